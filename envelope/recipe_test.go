package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recoveryRecipe is the README's "Recovering without this library"
// command, verbatim: strip the envelope header (116 + L + 40n bytes for
// format 2, 68 + L + 40n for format 1) and hand the rest to stock age.
const recoveryRecipe = `v=$(od -An -tu1 -j7 -N1 obj | tr -d ' '); n=$(od -An -tu1 -j9 -N1 obj | tr -d ' ')
L=$(( $(od -An -tu1 -j10 -N1 obj) * 256 + $(od -An -tu1 -j11 -N1 obj) ))
H=$(( $([ "$v" = 1 ] && echo 68 || echo 116) + L + 40*n ))
tail -c +$((H + 1)) obj | age -d -i identity.txt
`

// The recipe, run by bash with the stock age CLI on vectors of both
// formats and every identity type age's CLI reads from a file, prints the
// plaintext.
func TestRecoveryRecipe_StockAgeCLI(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte(recoveryRecipe)) {
		t.Fatal("README.md does not carry the recovery recipe this test checks")
	}
	if _, err := exec.LookPath("age"); err != nil {
		t.Skip("no age binary on PATH; to run this test: GOBIN=$(mktemp -d) go install filippo.io/age/cmd/...@v1.3.2 and add that directory to PATH")
	}
	run := func(t *testing.T, object []byte, identityFile string) (out []byte, stderr string, err error) {
		t.Helper()
		dir := t.TempDir()
		key, err := os.ReadFile(filepath.Join("testdata", identityFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "identity.txt"), key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "obj"), object, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", recoveryRecipe)
		cmd.Dir = dir
		var errBuf bytes.Buffer
		cmd.Stderr = &errBuf
		out, err = cmd.Output()
		return out, strings.TrimSpace(errBuf.String()), err
	}
	for _, c := range []struct{ vector, identityFile string }{
		{"v2_x25519", "keys/alice.txt"},
		{"v2_x25519_two_chunks", "keys/alice.txt"},
		{"v2_content_bound", "keys/recovery.txt"},
		{"v2_hybrid", "keys/hybrid.txt"},
		{"v2_ssh_ed25519", "keys/ssh_ed25519"},
		{"v1_x25519", "keys/alice.txt"},
		{"v1_content_bound", "keys/recovery.txt"},
	} {
		t.Run(c.vector, func(t *testing.T) {
			v := parseVector(t, filepath.Join("testdata/vectors", c.vector))
			out, stderr, err := run(t, v.object, c.identityFile)
			if err != nil {
				t.Fatalf("recipe: %v\n%s", err, stderr)
			}
			if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != v.payload {
				t.Fatalf("stock age printed %d bytes with SHA-256 %x, want %s", len(out), sum, v.payload)
			}
		})
	}
	// The object Open refuses because stock age's parser refuses its age
	// header: the stock CLI refuses it too.
	v := parseVector(t, "testdata/vectors/v2_age_header_stock_age_rejects")
	if out, stderr, err := run(t, v.object, "keys/alice.txt"); err == nil {
		t.Fatalf("stock age read %d bytes from an object whose age header it should refuse", len(out))
	} else if !strings.Contains(stderr, "header") {
		t.Errorf("stock age failed, but not on the header: %s", stderr)
	}
}
