package main

// The operator's first hour (issue #20): each test runs the built binary
// as a process, on a directory, versitygw and Garage where storage is
// involved, and pins a behaviour the issue measured on 0ac0f30.

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestPut_EmptyStdin_RefusedUnlessAllowEmpty_TheValueKept(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		env := []string{"CAIRN_STATE_IDENTITY=" + id}
		tg.cliEnv(t, nil, env, "init").must(t, exitOK)
		tg.cliEnv(t, []byte("hunter2"), env, "put", "app/db-password").must(t, exitOK)
		// cat missing.txt | cairn-state put app/db-password
		r := tg.cliEnv(t, nil, env, "put", "app/db-password").must(t, exitUsage)
		for _, want := range []string{"standard input is empty", "nothing was written", "--allow-empty"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, r)
			}
		}
		if got := tg.cliEnv(t, nil, env, "get", "app/db-password").must(t, exitOK).stdout; got != "hunter2" {
			t.Fatalf("after a refused empty put the value is %q, want hunter2", got)
		}
		// An empty value on purpose.
		tg.cliEnv(t, nil, env, "put", "--allow-empty", "app/db-password").must(t, exitOK)
		if got := tg.cliEnv(t, nil, env, "get", "app/db-password").must(t, exitOK).stdout; got != "" {
			t.Fatalf("after put --allow-empty the value is %q, want empty", got)
		}
		// An empty file given by name is the operator's choice.
		empty := filepath.Join(tg.dir, "empty.txt")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		tg.cliEnv(t, nil, env, "put", "app/empty", empty).must(t, exitOK)
	})
}

func TestPut_IfAbsentAndIfVersion_Exit7NothingWritten(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		env := []string{"CAIRN_STATE_IDENTITY=" + id}
		tg.cliEnv(t, nil, env, "init").must(t, exitOK)
		first := decode[putDoc](t, tg.cliEnv(t, []byte("one"), env, "put", "--if-absent", "app/token", "--json").must(t, exitOK))

		r := tg.cliEnv(t, []byte("two"), env, "put", "--if-absent", "app/token", "--json").must(t, exitCondition)
		if doc := decode[errorDoc](t, r); doc.Error.Kind != kindCondition || !strings.Contains(doc.Error.Message, "--if-absent: it exists (version "+first.Version+")") {
			t.Errorf("--if-absent on an existing object: %+v", doc.Error)
		}
		r = tg.cliEnv(t, []byte("two"), env, "put", "--if-version", "not-"+first.Version, "app/token").must(t, exitCondition)
		if !strings.Contains(r.stderr, "its version is "+first.Version) {
			t.Errorf("--if-version with another version:\n%s", r)
		}
		tg.cliEnv(t, []byte("x"), env, "put", "--if-version", first.Version, "app/missing").must(t, exitCondition)
		if got := tg.cliEnv(t, nil, env, "get", "app/token").must(t, exitOK).stdout; got != "one" {
			t.Fatalf("a refused conditional put wrote: %q", got)
		}
		second := decode[putDoc](t, tg.cliEnv(t, []byte("two"), env, "put", "--if-version", first.Version, "app/token", "--json").must(t, exitOK))
		if got := tg.cliEnv(t, nil, env, "get", "app/token").must(t, exitOK).stdout; got != "two" || second.Version == first.Version {
			t.Fatalf("put --if-version with the current version: %q, version %s", got, second.Version)
		}
		tg.cliEnv(t, []byte("x"), env, "put", "--if-absent", "--if-version", second.Version, "app/token").must(t, exitUsage)
	})
}

func TestURL_TildeRefusedWithAHint_BarePathIsADirectory(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir}
	id, _ := tg.keygen(t, "id.txt")
	for _, u := range []string{"file:~/state", "~/state"} {
		r := tg.cli(t, []byte("v"), "put", "app/x", "--url", u, "--identity", id).must(t, exitUsage)
		if !strings.Contains(r.stderr, "not expanded") || !strings.Contains(r.stderr, "file://$HOME/state") {
			t.Errorf("--url %s: no hint:\n%s", u, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "~")); !os.IsNotExist(err) {
		t.Fatalf("a refused ~ URL created ./~: %v", err)
	}
	// A bare relative path names a directory, as file:state does.
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	seed(t, &target{dir: dir, url: "file://" + state, raw: mustFS(t, state)}, 1, id)
	for _, u := range []string{"state", "./state", state} {
		if r := tg.cli(t, nil, "ls", "--url", u).must(t, exitOK); !strings.Contains(r.stdout, "obj/000") {
			t.Errorf("--url %s does not list the store:\n%s", u, r)
		}
	}
}

// interruptedRekey seeds n objects with old.txt and interrupts a rekey to
// new.txt with SIGINT after it re-sealed after of them.
func interruptedRekey(t *testing.T, tg *target, n, after int) (oldID, newID string, want map[string][]byte) {
	t.Helper()
	oldID, _ = tg.keygen(t, "old.txt")
	newID, _ = tg.keygen(t, "new.txt")
	want = seed(t, tg, n, oldID)
	p := tg.startPausedRekey(t, after, "--identity", newID, "--old-identity", oldID)
	if code, rest := p.stop(syscall.SIGINT); code != exitSIGINT {
		t.Fatalf("rekey after SIGINT: exit %d, want %d\n%s", code, exitSIGINT, rest)
	}
	return oldID, newID, want
}

func TestRekey_Interrupted_NamedByVerifyGetDoctorLockStatus_PendingNotFailed(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		const n, after = 30, 4
		_, newID, want := interruptedRekey(t, tg, n, after)
		note := regexp.MustCompile("rekey interrupted at (\\d+) of 30: resume with `(cairn-state rekey [^`]+)`")

		// verify with the new key: the objects not reached are pending,
		// not 26 "wrong key" failures.
		r := tg.cli(t, nil, "verify", "--identity", newID).must(t, exitFail)
		m := note.FindStringSubmatch(r.stdout)
		if m == nil || strings.Contains(r.stdout, "FAIL ") || !strings.Contains(r.stdout, "0 failed") {
			t.Fatalf("verify after an interrupted rekey:\n%s", r)
		}
		doc := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", newID, "--json").must(t, exitFail))
		if len(doc.Failed) != 0 || len(doc.Pending) < n-after-1 || doc.Rekey == nil || !doc.Rekey.Readable || doc.Rekey.Total != n {
			t.Errorf("verify --json: %d failed, %d pending, rekey %+v", len(doc.Failed), len(doc.Pending), doc.Rekey)
		}
		resume := strings.Fields(m[2])[1:] // without "cairn-state"

		// get of an object not reached yet: the error, and why.
		r = tg.cli(t, nil, "get", "obj/029", "--identity", newID).must(t, exitFail)
		if !note.MatchString(r.stderr) || !strings.Contains(r.stderr, "obj/029 is not re-sealed yet") {
			t.Errorf("get of a pending object:\n%s", r)
		}
		// get of one re-sealed: the value, and the note.
		r = tg.cli(t, nil, "get", "obj/000", "--identity", newID).must(t, exitOK)
		if r.stdout != string(want["obj/000"]) || !note.MatchString(r.stderr) {
			t.Errorf("get of a re-sealed object:\n%s", r)
		}
		_, dd := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + newID})
		dd.wantCheck(t, checkRekey, statusWarn, "rekey interrupted at", "resume with")
		r = tg.cli(t, nil, "lock", "status", "--identity", newID).must(t, exitOK)
		if !note.MatchString(r.stdout) {
			t.Errorf("lock status:\n%s", r)
		}
		// Without a key, lock status still tells that a rekey is unfinished.
		if r := tg.cli(t, nil, "lock", "status").must(t, exitOK); !strings.Contains(r.stdout, "a rekey was interrupted") {
			t.Errorf("lock status without a key:\n%s", r)
		}

		// The command it names finishes the job.
		tg.cli(t, nil, resume...).must(t, exitOK)
		if r := tg.cli(t, nil, "verify", "--identity", newID).must(t, exitOK); strings.Contains(r.stdout, "interrupted") {
			t.Errorf("verify after the resume:\n%s", r)
		}
	})
}

func TestRekey_NothingToChange_SaysSo_ResealsNothingUnlessRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		seed(t, tg, 20, id)
		before := rawSnapshot(t, tg)
		r := tg.cli(t, nil, "rekey", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "rekey: nothing to change") || !strings.Contains(r.stdout, "nothing was re-sealed") {
			t.Errorf("a rekey to the store's own set:\n%s", r)
		}
		if after := rawSnapshot(t, tg); !maps.Equal(before, after) {
			t.Errorf("a rekey with nothing to change wrote:\nbefore %v\nafter  %v", before, after)
		}
		doc := decode[rekeyDoc](t, tg.cli(t, nil, "rekey", "--identity", id, "--json").must(t, exitOK))
		if !doc.NothingToChange || doc.Resealed != 0 || doc.UpToDate != 20 {
			t.Errorf("rekey --json: %+v", doc)
		}
		doc = decode[rekeyDoc](t, tg.cli(t, nil, "rekey", "--identity", id, "--restart", "--json").must(t, exitOK))
		if doc.NothingToChange || doc.Resealed != 20 {
			t.Errorf("rekey --restart: %+v, want every object re-sealed", doc)
		}
	})
}

func TestRecipients_RecoveryKeyInTheStore_NoNote_ARealDifferenceNoted(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	_, recovery := tg.keygen(t, "recovery.txt")
	_, other := tg.keygen(t, "other.txt")
	ids, err := envelope.LoadIdentityFile(id)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := envelope.ParseRecipient(recovery)
	if err != nil {
		t.Fatal(err)
	}
	// The store seals to the writer and a recovery key, as the README
	// recommends.
	st, err := store.Connect(t.Context(), tg.raw, store.Keys{Identities: ids, Recipients: []age.Recipient{rec}}, store.ConnectOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := storeadmin.CommitManifest(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), "app/x", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"get", "app/x"}, {"ls"}, {"lock", "status"}, {"verify"}} {
		if r := tg.cli(t, nil, append(args, "--identity", id)...).must(t, exitOK); strings.Contains(r.stderr, "recipients differ") {
			t.Errorf("%v with the writer's key alone notes a difference:\n%s", args, r)
		}
	}
	r := tg.cli(t, nil, "get", "app/x", "--identity", id, "--recipient", other).must(t, exitOK)
	if !strings.Contains(r.stderr, "recipients differ") {
		t.Errorf("a recipient the store does not seal to is not noted:\n%s", r)
	}
}

func TestNames_WithControlCharacters_ShownEscaped(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		seed(t, tg, 1, id)
		// Written by something other than cairn-state, which refuses such
		// names: a C1 control (CSI, which terminals may read as ESC [) and a
		// right-to-left override, both of which the backends' keys allow.
		const evil = "evil\u009b2J\u202egnp.exe"
		if _, err := tg.raw.Put(t.Context(), tg.key(evil), []byte("junk"), backend.PutOptions{}); err != nil {
			t.Fatalf("%s does not store the key: %v", tg.name, err)
		}
		for _, args := range [][]string{{"ls"}, {"verify"}, {"ls", "--json"}} {
			r := tg.cli(t, nil, append(args, "--identity", id)...)
			if strings.ContainsAny(r.stdout+r.stderr, "\u009b\u202e\x1b") {
				t.Errorf("%v printed a control character:\n%q", args, r.stdout+r.stderr)
			}
			shown := `"evil\u009b2J\u202egnp.exe"`
			if hasFlag(args, "--json") {
				shown = `"evil\u009b2J\u202egnp.exe"` // JSON's escapes
			}
			if !strings.Contains(r.stdout, shown) {
				t.Errorf("%v does not show the name escaped (%s):\n%s", args, shown, r)
			}
		}
		// And cairn-state refuses to write one.
		r := tg.cli(t, []byte("v"), "put", "app/bell\x07", "--identity", id).must(t, exitUsage)
		if strings.Contains(r.stderr, "\x07") || !strings.Contains(r.stderr, "control character") {
			t.Errorf("put of a name with a control character:\n%q", r.stderr)
		}
	})
}

func TestIdentityFile_AFIFO_RefusedAtOnce(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 1, id)
	fifo := filepath.Join(tg.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := tg.cli(t, nil, "get", "obj/000", "--identity", fifo).must(t, exitUsage)
	if !strings.Contains(r.stderr, "not a regular file (a FIFO)") {
		t.Errorf("a FIFO as identity:\n%s", r)
	}
	t.Logf("refused in %s", time.Since(start))
}

func TestSIGTERM_EndsACLIBlockedOnAPipe(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 1, id)
	cmd := exec.Command(binPath, "put", "app/x", "--identity", id)
	cmd.Env, cmd.Dir = tg.environ(), tg.dir
	w, err := cmd.StdinPipe() // kept open: the read never ends
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let it reach the read
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("SIGTERM did not end a put blocked on stdin:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitSIGTERM {
		t.Errorf("exit %d, want %d:\n%s", code, exitSIGTERM, stderr.String())
	}
}

func TestKeygen_DashWritesTheIdentityToStdout(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binPath, "keygen", "-o", "-")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("keygen -o -: %v\n%s", err, stderr.String())
	}
	ids, err := envelope.ParseIdentities(&stdout)
	if err != nil || len(ids) != 1 {
		t.Fatalf("stdout is not an identity file: %v", err)
	}
	r, _ := envelope.RecipientOf(ids[0])
	if rs, _ := envelope.RecipientString(r); !strings.Contains(stderr.String(), "Public key: "+rs) {
		t.Errorf("stderr does not give the recipient:\n%s", stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("keygen -o - wrote a file: %v", entries)
	}
	(&target{dir: dir}).cli(t, nil, "keygen", "-o", "-", "--json").must(t, exitUsage)
}

func TestLockBreak_HolderWithoutForce_SaysForceIsMissing(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	tg.startHolder(t, "pod-a", id)
	r := tg.cli(t, nil, "lock", "break", "--holder", "pod-a", "--identity", id).must(t, exitHeld)
	if !strings.Contains(r.stderr, "--force is missing") || !strings.Contains(r.stderr, "lock break --force --holder pod-a") {
		t.Errorf("lock break --holder without --force:\n%s", r)
	}
	r = tg.cli(t, nil, "lock", "break", "--identity", id).must(t, exitHeld)
	if !strings.Contains(r.stderr, "--force and --holder are missing") {
		t.Errorf("lock break alone on a live lock:\n%s", r)
	}
}

func TestJSON_ProgressAsJSONLines_ErrorsCarryAKind(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 5, id)
	r := tg.cli(t, nil, "rekey", "--restart", "--identity", id, "--json").must(t, exitOK)
	progress := 0
	for line := range strings.SplitSeq(strings.TrimSpace(r.stderr), "\n") {
		var l struct {
			Type        string `json:"type"`
			Command     string `json:"command"`
			Done, Total int
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a stderr line is not JSON: %q", line)
		}
		if l.Type == "progress" && l.Command == "rekey" && l.Total == 5 {
			progress++
		}
	}
	if progress == 0 {
		t.Errorf("rekey --json printed no JSON progress lines:\n%s", r.stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"get", "app/missing", "--identity", id}, exitFail, kindNotFound},
		{[]string{"get", "--frobnicate"}, exitUsage, kindUsage},
		{[]string{"ls", "--url", "file:" + filepath.Join(tg.dir, "nowhere")}, exitNoStore, kindNoStore},
	} {
		doc := decode[errorDoc](t, tg.cli(t, nil, append(c.args, "--json")...).must(t, c.code))
		if doc.Error.Kind != c.kind || doc.Error.ExitCode != c.code {
			t.Errorf("%v --json: kind %q exit %d, want %q %d", c.args, doc.Error.Kind, doc.Error.ExitCode, c.kind, c.code)
		}
	}
}

func TestS3_ErrorsWithoutRequestIDs_NoSDKLogLines(t *testing.T) {
	tg := s3Target(t, "versitygw", &versitygw.Start(t).S3Server)
	// Wrong credentials: the server's refusal, without request ids.
	bad := []string{"AWS_ACCESS_KEY_ID=wrong", "AWS_SECRET_ACCESS_KEY=wrong"}
	r := (&target{dir: tg.dir, url: tg.url}).cliEnv(t, nil, bad, "ls").must(t, exitFail)
	if strings.Contains(r.stderr, "RequestID") || strings.Contains(r.stderr, "HostID") {
		t.Errorf("an S3 error with request ids:\n%s", r)
	}
	if r := (&target{dir: tg.dir, url: tg.url}).cliEnv(t, nil, bad, "ls", "--verbose"); !strings.Contains(r.stderr, "RequestID") {
		t.Logf("--verbose keeps request ids where the server sends them:\n%s", r.stderr)
	}
	// No credentials at all: the SDK falls back to the instance metadata
	// service (here a local one that refuses), and logs it; that line
	// stays out of the operator's terminal.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer imds.Close()
	env := []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
	r = (&target{dir: tg.dir, url: tg.url}).cliEnv(t, nil, env, "ls")
	if r.code == exitOK {
		t.Fatalf("ls without credentials succeeded:\n%s", r)
	}
	if strings.Contains(r.stderr, "SDK ") || strings.Contains(r.stderr, "IMDSv1") {
		t.Errorf("an SDK log line on stderr:\n%s", r.stderr)
	}
}

func TestURL_UnknownParameter_DidYouMean(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	r := tg.cli(t, nil, "ls", "--url", "s3://bucket?regoin=garage&endpoint=http://127.0.0.1:1").must(t, exitUsage)
	if !strings.Contains(r.stderr, `unknown parameter "regoin": did you mean "region"?`) || strings.Contains(r.stderr, "regoin=REDACTED") {
		t.Errorf("a misspelled URL parameter:\n%s", r)
	}
}

// mustFS is a directory backend on dir.
func mustFS(t *testing.T, dir string) backend.Backend {
	t.Helper()
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
