package state_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/testkit"
)

func TestOpen_IdentityFileReadableByOthers_WarnsNamingFileAndMode_AndStillBoots(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	path, _ := testkit.IdentityFile(t)
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o640, true}, {0o644, true}, {0o604, true}, {0o620, true}} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		inst, err := state.Open(context.Background(), state.Config{Backend: mem.New(mem.Options{}), IdentityFiles: []string{path}, Logger: logger})
		if err != nil {
			t.Fatalf("mode %04o: the library refused to boot: %v", c.mode, err)
		}
		if err := inst.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "accessible by group or others")
		if warned != c.warn {
			t.Errorf("mode %04o: warned %v, want %v:\n%s", c.mode, warned, c.warn, logs.String())
		}
		if c.warn {
			want := []string{"file=" + path, "mode=" + fmt.Sprintf("%04o", c.mode.Perm()), "chmod 600"}
			for _, w := range want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("mode %04o: warning lacks %q:\n%s", c.mode, w, logs.String())
				}
			}
		}
	}
}
