// Package docs_test checks the repository's documentation against the code:
// the command transcripts in README.md and docs/*.md run against the built
// binaries (-update re-records them), every relative link resolves, and the
// Dockerfile's build gives a static binary. ADR 0038.
package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// builtBin is a directory with cairn-state and instance built from this
// checkout as a user builds them (no test tags).
func builtBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "cairn-docs-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+"/", "./cmd/cairn-state", "./examples/instance")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
