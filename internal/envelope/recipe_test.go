package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testserver"
)

// recoveryRecipe is docs/recovery.md's command, verbatim: strip the
// envelope header (444 + L + 40n bytes) and hand the rest to stock age.
const recoveryRecipe = `n=$(od -An -tu1 -j9 -N1 obj | tr -d ' ')
L=$(( $(od -An -tu1 -j10 -N1 obj) * 256 + $(od -An -tu1 -j11 -N1 obj) ))
H=$(( 444 + L + 40*n ))
tail -c +$((H + 1)) obj | age -d -i identity.txt
`

// The recipe, run by bash with the stock age CLI on vectors of every
// identity type age's CLI reads from a file, prints the plaintext. Hybrid
// (post-quantum) identities need age 1.3 or later, as docs/recovery.md
// says: with an older age on PATH those cases are skipped, saying so, and
// the others still run.
func TestRecoveryRecipe_StockAgeCLI(t *testing.T) {
	doc, err := os.ReadFile("../../docs/recovery.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(recoveryRecipe)) {
		t.Fatal("docs/recovery.md does not carry the recovery recipe this test checks")
	}
	// make test installs the pinned age into the cache and names it in
	// AGE_BIN; elsewhere the age on PATH is used.
	const install = "make age (installs age " + pinnedAge + " into ~/.cache/cairn-state and make test sets AGE_BIN), or GOBIN=$(mktemp -d) go install filippo.io/age/cmd/...@" + pinnedAge + " and put that directory first on PATH"
	ageBin, err := testserver.FindBinary("AGE_BIN", "age", testserver.CachePath("age-"+pinnedAge+"/bin/age"))
	if err != nil {
		t.Fatal(err)
	}
	if ageBin == "" {
		testserver.RequireServer(t, "the age CLI", install)
	}
	version, err := exec.Command(ageBin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", ageBin, err)
	}
	hybridOK := ageAtLeast(strings.TrimSpace(string(version)), 1, 3)
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
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(ageBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		var errBuf bytes.Buffer
		cmd.Stderr = &errBuf
		out, err = cmd.Output()
		return out, strings.TrimSpace(errBuf.String()), err
	}
	for _, c := range []struct{ vector, identityFile string }{
		{"v4_x25519", "keys/alice.txt"},
		{"v4_x25519_two_chunks", "keys/alice.txt"},
		{"v4_content_bound", "keys/recovery.txt"},
		{"v4_hybrid", "keys/hybrid.txt"},
		{"v4_ssh_ed25519", "keys/ssh_ed25519"},
	} {
		t.Run(c.vector, func(t *testing.T) {
			if strings.Contains(c.vector, "hybrid") && !hybridOK {
				testserver.RequireServer(t, "age 1.3 or later (hybrid identities; "+ageBin+" is "+strings.TrimSpace(string(version))+")", install)
			}
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
	v := parseVector(t, "testdata/vectors/v4_age_header_stock_age_rejects")
	if out, stderr, err := run(t, v.object, "keys/alice.txt"); err == nil {
		t.Fatalf("stock age read %d bytes from an object whose age header it should refuse", len(out))
	} else if !strings.Contains(stderr, "header") {
		t.Errorf("stock age failed, but not on the header: %s", stderr)
	}
}

// pinnedAge is the age release make test installs for this test: the
// version of filippo.io/age in go.mod.
const pinnedAge = "v1.3.2"

// ageAtLeast reports whether an `age --version` answer ("1.1.1",
// "v1.3.2", "(devel)") is at least major.minor; an answer it cannot read
// counts as new enough, so that a development build runs every case.
func ageAtLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(strings.TrimPrefix(version, "v"), "%d.%d", &ma, &mi); err != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}

func TestAgeAtLeast(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"1.1.1", false}, {"v1.2.1", false}, {"v1.3.0", true}, {"v1.3.2", true}, {"2.0.0", true}, {"(devel)", true},
	} {
		if got := ageAtLeast(c.version, 1, 3); got != c.want {
			t.Errorf("ageAtLeast(%q, 1, 3) = %v, want %v", c.version, got, c.want)
		}
	}
}
