package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildShipped builds the main package in the test's directory as it
// ships (no build tags) into a temporary directory, as name, and returns
// the binary's path. The test fails if the binary holds any of hooks: the
// names of test hooks' environment variables, which only a build with the
// cairntest tag may contain.
func BuildShipped(t testing.TB, name string, hooks ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if len(hooks) == 0 {
		return bin
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		if bytes.Contains(data, []byte(h)) {
			t.Errorf("the shipped %s contains %s", name, h)
		}
	}
	return bin
}
