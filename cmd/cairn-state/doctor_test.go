package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// doctorLineRE is one line of doctor's human output: the status, the
// check, its finding and, after " — ", what to do.
var doctorLineRE = regexp.MustCompile(`^(ok  |warn|fail|skip)  ([a-z-]+): (\S.*?)(?: — (\S.*))?$`)

// doctor runs `cairn-state doctor --json` with extra arguments and
// environment and returns the run and its document.
func (tg *target) doctor(t *testing.T, env []string, args ...string) (result, doctorDoc) {
	t.Helper()
	r := tg.cliEnv(t, nil, env, append([]string{"doctor", "--json"}, args...)...)
	return r, decode[doctorDoc](t, r)
}

// names are the checks of a document, in order.
func (doc doctorDoc) names() []string {
	var n []string
	for _, c := range doc.Checks {
		n = append(n, c.Name)
	}
	return n
}

// only returns the one check named name, failing the test unless there is
// exactly one.
func (doc doctorDoc) only(t *testing.T, name string) checkDoc {
	t.Helper()
	var found []checkDoc
	for _, c := range doc.Checks {
		if c.Name == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d checks named %q in %+v", len(found), name, doc.Checks)
	}
	return found[0]
}

// wantCheck fails the test unless the check named name has status and its
// finding and hint together contain every word.
func (doc doctorDoc) wantCheck(t *testing.T, name, status string, words ...string) checkDoc {
	t.Helper()
	c := doc.only(t, name)
	if c.Status != status {
		t.Errorf("check %s: status %s, want %s: %s — %s", name, c.Status, status, c.Finding, c.Hint)
	}
	for _, w := range words {
		if !strings.Contains(c.Finding+" — "+c.Hint, w) {
			t.Errorf("check %s does not say %q: %s — %s", name, w, c.Finding, c.Hint)
		}
	}
	return c
}

// checkHumanOutput runs doctor without --json and checks that every line
// is a check in doctor's format, in the JSON document's order, and that
// the run ends as usable says.
func (tg *target) checkHumanOutput(t *testing.T, env []string, doc doctorDoc, args ...string) result {
	t.Helper()
	r := tg.cliEnv(t, nil, env, append([]string{"doctor"}, args...)...)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if doc.Usable {
		r.must(t, exitOK)
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "doctor: the store is usable (") {
			t.Errorf("last line %q", last)
		}
		lines = lines[:len(lines)-1]
	} else {
		r.must(t, exitFail)
		if !strings.Contains(r.stderr, "cairn-state: doctor: the store is not usable: ") {
			t.Errorf("stderr: %s", r)
		}
	}
	if len(lines) != len(doc.Checks) {
		t.Fatalf("%d lines for %d checks:\n%s", len(lines), len(doc.Checks), r.stdout)
	}
	for i, line := range lines {
		m := doctorLineRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %q is not in doctor's format", line)
			continue
		}
		m[1] = strings.TrimSpace(m[1])
		if c := doc.Checks[i]; m[1] != c.Status || m[2] != c.Name {
			t.Errorf("line %d is %s %s, the JSON document's check %s %s", i, m[1], m[2], c.Status, c.Name)
		}
		if (m[1] == statusFail || m[1] == statusWarn) && m[4] == "" {
			t.Errorf("line %q says what is wrong but not what to do", line)
		}
	}
	return r
}

// eachS3Server runs fn against versitygw and Garage.
func eachS3Server(t *testing.T, fn func(t *testing.T, srv *testutil.S3Server)) {
	t.Run("versitygw", func(t *testing.T) { fn(t, &versitygw.Start(t).S3Server) })
	t.Run("garage", func(t *testing.T) { fn(t, &garage.Start(t).S3Server) })
}

func TestDoctor_HealthyStore_EveryCheckOK_OnFsVersitygwAndGarage(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, recipient := tg.keygen(t, "id.txt")
		env := []string{"CAIRN_STATE_IDENTITY=" + id}
		tg.cliEnv(t, []byte("hunter2"), env, "put", "app/db-password").must(t, exitOK)
		before := tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK).stdout

		r, doc := tg.doctor(t, env)
		r.must(t, exitOK)
		t.Logf("doctor on %s:\n%s", tg.name, tg.checkHumanOutput(t, env, doc).stdout)
		if !doc.Usable || doc.Failed != 0 {
			t.Errorf("usable %v, failed %d", doc.Usable, doc.Failed)
		}
		want := []string{checkURL, checkEndpoint, checkCredentials, checkRegion, checkBucket, checkConditional, checkLockMode, checkClock, checkIdentity, checkMembership, checkLock}
		mode := "compare-and-swap"
		switch tg.name {
		case "fs":
			want = []string{checkURL, checkDirectory, checkConditional, checkLockMode, checkClock, checkIdentity, checkMembership, checkLock}
		case "garage":
			want = slices.Insert(want, slices.Index(want, checkClock), checkListConsistency)
			mode = "claims"
		}
		if !slices.Equal(doc.names(), want) {
			t.Fatalf("checks %v, want %v", doc.names(), want)
		}
		for _, c := range doc.Checks {
			if c.Status != statusOK && !(c.Name == checkListConsistency && c.Status == statusWarn) {
				t.Errorf("%s %s: %s — %s", c.Status, c.Name, c.Finding, c.Hint)
			}
		}
		if got := doc.only(t, checkLockMode).Facts.LockMode; got != mode {
			t.Errorf("lock mode %q, want %q", got, mode)
		}
		if tg.name != "fs" {
			opts, _, err := s3.ParseURL(tg.url)
			if err != nil {
				t.Fatal(err)
			}
			if ep := doc.only(t, checkEndpoint).Facts; ep.Endpoint != opts.Endpoint || ep.HTTPStatus != 200 {
				t.Errorf("endpoint facts %+v, want %s answering 200", ep, opts.Endpoint)
			}
			probe := doc.wantCheck(t, checkConditional, statusOK, "a probe object was written and removed").Facts
			if probe.Evidence == "" || probe.PutConditions == nil || *probe.PutConditions != (tg.name == "versitygw") {
				t.Errorf("probe facts %+v", probe)
			}
			if tg.name == "garage" {
				doc.wantCheck(t, checkListConsistency, statusWarn, `consistency_mode = "consistent"`, "cannot read the server's configuration")
			}
			clock := doc.only(t, checkClock).Facts
			if clock.OffsetSeconds == nil || math.Abs(*clock.OffsetSeconds) > 2 || clock.StorageTime.IsZero() {
				t.Errorf("clock facts %+v", clock)
			}
		}
		if f := doc.only(t, checkIdentity).Facts; f.Mode != "0600" || !slices.Equal(f.Recipients, []string{recipient}) {
			t.Errorf("identity facts %+v", f)
		}
		// The store's identity record where the store has one, else the
		// object written.
		if c := doc.wantCheck(t, checkMembership, statusOK, "the identity opens the store"); c.Facts.Object != ".cairn-state/.store" && c.Facts.Object != ".cairn-state/app/db-password" {
			t.Errorf("membership read %q", c.Facts.Object)
		}
		doc.wantCheck(t, checkLock, statusOK, "not held")

		// Doctor left nothing behind.
		if after := tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK).stdout; after != before {
			t.Errorf("the store changed under doctor:\nbefore %s\nafter %s", before, after)
		}
	})
}

func TestDoctor_WrongRegion_FailsTheRegionLine_Exit1(t *testing.T) {
	eachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		bucket := srv.NewBucket(t)
		tg := &target{dir: t.TempDir(), env: srv.Env(),
			url: fmt.Sprintf("s3://%s/apps/one?endpoint=%s&region=eu-west-9", bucket, srv.Endpoint)}
		r, doc := tg.doctor(t, nil)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, nil, doc)
		assertNoCredentials(t, r, srv)
		doc.wantCheck(t, checkEndpoint, statusOK, "HTTP 400")
		doc.wantCheck(t, checkRegion, statusFail, `"eu-west-9"`, "set region= in the URL")
		doc.wantCheck(t, checkBucket, statusSkip)
		if doc.Usable || doc.Failed != 1 {
			t.Errorf("usable %v, failed %d", doc.Usable, doc.Failed)
		}
	})
}

func TestDoctor_WrongCredentials_FailsTheCredentialsLine_Exit1(t *testing.T) {
	eachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		tg := &target{dir: t.TempDir(), env: srv.Env(), url: srv.URL(srv.NewBucket(t), "apps/one")}
		for _, c := range []struct {
			name string
			env  []string
			hint string
		}{
			{"wrong secret", []string{"AWS_SECRET_ACCESS_KEY=" + strings.Repeat("0", 64)}, "AWS_SECRET_ACCESS_KEY"},
			{"unknown access key", []string{"AWS_ACCESS_KEY_ID=GK0123456789abcdef01234567"}, "AWS_ACCESS_KEY_ID"},
			{"none", []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r, doc := tg.doctor(t, c.env)
				r.must(t, exitFail)
				tg.checkHumanOutput(t, c.env, doc)
				assertNoCredentials(t, r, srv)
				doc.wantCheck(t, checkCredentials, statusFail, c.hint)
				doc.wantCheck(t, checkRegion, statusSkip)
				doc.wantCheck(t, checkBucket, statusSkip)
				doc.wantCheck(t, checkConditional, statusSkip)
			})
		}
	})
}

func TestDoctor_MissingBucket_FailsTheBucketLine_Exit1(t *testing.T) {
	eachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		tg := &target{dir: t.TempDir(), env: srv.Env(), url: srv.URL("cairn-no-such-bucket", "")}
		r, doc := tg.doctor(t, nil)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, nil, doc)
		doc.wantCheck(t, checkCredentials, statusOK)
		doc.wantCheck(t, checkRegion, statusOK)
		doc.wantCheck(t, checkBucket, statusFail, `"cairn-no-such-bucket" does not exist`, "create it")
		doc.wantCheck(t, checkConditional, statusSkip)
	})
}

// TestDoctor_HungEndpoint_FailsWithinTheTimeout_NamingIt: a listener that
// accepts and never answers; doctor ends within its --timeout, the
// endpoint line naming it and the timeout that fired.
func TestDoctor_HungEndpoint_FailsWithinTheTimeout_NamingIt(t *testing.T) {
	t.Parallel()
	ep := testutil.SilentEndpoint(t)
	tg := &target{dir: t.TempDir(), env: fakeCredentials, url: "s3://bucket?endpoint=" + ep + "&region=garage"}
	for _, c := range []struct {
		args   []string
		budget time.Duration
	}{
		{nil, defaultTimeout},
		{[]string{"--timeout", "3s"}, 3 * time.Second},
	} {
		t.Run(c.budget.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r, doc := tg.doctor(t, nil, c.args...)
			took := time.Since(start)
			r.must(t, exitFail)
			if took > c.budget {
				t.Errorf("doctor took %v, want at most %v", took, c.budget)
			}
			doc.wantCheck(t, checkEndpoint, statusFail, ep, "did not answer", "(response timeout)", "hung")
			for _, name := range []string{checkCredentials, checkConditional, checkClock, checkLock} {
				doc.wantCheck(t, name, statusSkip, "no endpoint answered")
			}
		})
	}
}

// TestDoctor_SeveralEndpoints_OneDown_WarnsAndStaysUsable: requests fail
// over to the endpoints that answer, so one node down is a warning; all
// down is a failure.
func TestDoctor_SeveralEndpoints_OneDown_WarnsAndStaysUsable(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	tg := &target{dir: t.TempDir(), env: srv.Env(),
		url: fmt.Sprintf("s3://%s?endpoint=%s,%s&region=%s", bucket, srv.Endpoint, down, srv.Region)}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitOK)
	tg.checkHumanOutput(t, nil, doc)
	var lines []checkDoc
	for _, c := range doc.Checks {
		if c.Name == checkEndpoint {
			lines = append(lines, c)
		}
	}
	if len(lines) != 2 || lines[0].Status != statusOK || lines[1].Status != statusWarn ||
		!strings.Contains(lines[1].Finding, down+" refused the connection") || !strings.Contains(lines[1].Hint, "fail over") {
		t.Errorf("endpoint lines: %+v", lines)
	}
	doc.wantCheck(t, checkBucket, statusOK)

	tg.url = fmt.Sprintf("s3://%s?endpoint=%s,%s&region=%s", bucket, down, testutil.SilentEndpoint(t), srv.Region)
	r, doc = tg.doctor(t, nil, "--timeout", "5s")
	r.must(t, exitFail)
	for _, c := range doc.Checks {
		if c.Name == checkEndpoint && c.Status != statusFail {
			t.Errorf("with no endpoint answering: %+v", c)
		}
	}
}

// TestDoctor_ConditionalOnAgainstGarage_Fails: a URL that forces
// compare-and-swap on a server that ignores the conditions would let two
// instances hold the lock; the probe says so.
func TestDoctor_ConditionalOnAgainstGarage_Fails(t *testing.T) {
	srv := garage.Start(t)
	tg := &target{dir: t.TempDir(), env: srv.Env(),
		url: fmt.Sprintf("s3://%s?endpoint=%s&region=%s&conditional=on", srv.NewBucket(t), srv.Endpoint, srv.Region)}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitFail)
	doc.wantCheck(t, checkConditional, statusFail, "conditional=on in the URL, but the server does not enforce them", "remove conditional=on")
	if f := doc.only(t, checkLockMode).Facts; f.LockMode != "compare-and-swap" {
		t.Errorf("lock mode %q: with conditional=on the lock would use compare-and-swap", f.LockMode)
	}
}

func TestDoctor_WorldReadableIdentityFile_FailsTheIdentityLine(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	env := []string{"CAIRN_STATE_IDENTITY=" + id}
	tg.cliEnv(t, []byte("v"), env, "put", "x").must(t, exitOK)
	for _, mode := range []os.FileMode{0o644, 0o640} {
		if err := os.Chmod(id, mode); err != nil {
			t.Fatal(err)
		}
		r, doc := tg.doctor(t, env)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, env, doc)
		doc.wantCheck(t, checkIdentity, statusFail, id, "mode "+fmtMode(mode), "chmod 600 "+id)
		doc.wantCheck(t, checkMembership, statusSkip)
		doc.wantCheck(t, checkLock, statusOK) // the storage is fine
	}
}

func TestDoctor_IdentityFileMissingOrNotAnIdentity_FailsTheIdentityLine(t *testing.T) {
	tg := fsTarget(t)
	garbage := filepath.Join(tg.dir, "garbage.txt")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, says string }{
		{filepath.Join(tg.dir, "missing.txt"), "no such file"},
		{garbage, garbage},
	} {
		r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + c.file})
		r.must(t, exitFail)
		doc.wantCheck(t, checkIdentity, statusFail, c.says)
	}
}

// TestDoctor_WrongIdentity_DoesNotBelongToTheStore: a key that is not the
// store's is a failure that says so; no key at all is only a warning.
func TestDoctor_WrongIdentity_DoesNotBelongToTheStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		other, _ := tg.keygen(t, "other.txt")
		tg.cli(t, []byte("v"), "--identity", id, "put", "app/x").must(t, exitOK)

		env := []string{"CAIRN_STATE_IDENTITY=" + other}
		r, doc := tg.doctor(t, env)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, env, doc)
		doc.wantCheck(t, checkIdentity, statusOK)
		doc.wantCheck(t, checkMembership, statusFail, "does not belong to this store", ".cairn-state/.store", "wrong key", "--identity FILE", "exit 5")
		if doc.Failed != 1 {
			t.Errorf("%d checks failed, want only membership: %v", doc.Failed, doc.Checks)
		}

		r, doc = tg.doctor(t, nil)
		r.must(t, exitOK)
		doc.wantCheck(t, checkIdentity, statusWarn, "no identity configured", "--identity FILE")
		doc.wantCheck(t, checkMembership, statusSkip)
	})
}

// TestDoctor_LiveHolder_NamedOnTheLockLine: a running instance's lock is
// the normal state: ok, with its holder.
func TestDoctor_LiveHolder_NamedOnTheLockLine(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	tg.startHolder(t, "pod-a", id)
	r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitOK)
	c := doc.wantCheck(t, checkLock, statusOK, `held by "pod-a"`, "live", "--wait")
	if c.Facts.Holder == nil || c.Facts.Holder.InstanceID != "pod-a" || c.Facts.Liveness != "live" {
		t.Errorf("lock facts %+v", c.Facts)
	}
	if c := doc.wantCheck(t, checkMembership, statusOK); c.Facts.Object != ".cairn-state/.store" && !strings.Contains(c.Finding, ".cairn-state/.lock (the lock record") {
		t.Errorf("membership did not read the store's record or the lock's: %s", c.Finding)
	}
}

func TestDoctor_NoStoreAtTheDirectory_FailsAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	tg := &target{dir: t.TempDir(), url: "file://" + dir}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitFail)
	doc.wantCheck(t, checkDirectory, statusFail, "no state store at "+dir)
	doc.wantCheck(t, checkLock, statusSkip)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("doctor created %s: %v", dir, err)
	}
}

// assertNoCredentials fails the test if a run printed the server's secret
// key.
func assertNoCredentials(t *testing.T, r result, srv *testutil.S3Server) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, srv.SecretKey) {
		t.Errorf("the secret key was printed:\n%s", r)
	}
}

// TestDoctor_StoreRecord_BindsTheCheck: with the store's manifest
// (.cairn-state/.store) membership is judged on it, as every other command
// judges it: an object sealed to another key does not decide; another key
// fails; a garbage manifest fails, named, and is left alone.
func TestDoctor_StoreRecord_BindsTheCheck(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	other, _ := tg.keygen(t, "other.txt")
	tg.cli(t, []byte("v"), "--identity", id, "put", "app/x").must(t, exitOK)
	st, err := tg.connect(t, id)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := st.Manifest()
	if !ok {
		t.Fatal("the first put wrote no manifest")
	}
	// An application object sealed to the other key must not decide.
	otherIDs, err := envelope.LoadIdentityFile(other)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv, err := envelope.New(otherIDs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := otherEnv.Seal("app/y", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.raw.Put(t.Context(), tg.key("app/y"), sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitOK)
	c := doc.wantCheck(t, checkMembership, statusOK, "the identity opens the store (store id "+m.ID.String()+", created ", "1 recipient", "key generation 1", "read .cairn-state/.store")
	if c.Facts.StoreID != m.ID.String() || c.Facts.Object != ".cairn-state/.store" {
		t.Errorf("membership facts %+v", c.Facts)
	}
	r, doc = tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + other})
	r.must(t, exitFail)
	c = doc.wantCheck(t, checkMembership, statusFail, "does not belong to this store", ".cairn-state/.store", m.ID.String(), "exit 5")
	if c.Facts.StoreID != m.ID.String() {
		t.Errorf("membership facts %+v", c.Facts)
	}
	// The CLI's other commands refuse the same key with exit 5.
	tg.cli(t, nil, "--identity", other, "ls").must(t, exitNotMember)

	garbage := []byte("not a manifest")
	if _, err := tg.raw.Put(t.Context(), tg.key(".store"), garbage, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r, doc = tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitFail)
	doc.wantCheck(t, checkMembership, statusFail, ".cairn-state/.store", "restore")
	rc, _, err := tg.raw.Get(t.Context(), tg.key(".store"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, garbage) {
		t.Errorf("doctor touched the garbage manifest: %q, %v", got, err)
	}
}
