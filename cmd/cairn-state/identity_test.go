package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/store"
)

// TestFirstWrites_EightRacingProcesses_OneManifest starts eight puts at
// once, as separate processes, on a store that does not exist yet; each
// TestInit_EightRacingProcesses_OneStore runs 8 `cairn-state init` at
// once, as separate processes, where there is no store yet: exactly one
// creates it; every other one fails, saying a store is there (exit 1), or
// that the lock is held by the creator writing its manifest (exit 3, on
// storage without conditional writes). Writes then land in that one store.
func TestInit_EightRacingProcesses_OneStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		const n = 8
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, binPath, "init", "--identity", id)
				cmd.Env, cmd.Dir = tg.environ(), tg.dir
				out, err := cmd.CombinedOutput()
				results[i] = result{code: cmd.ProcessState.ExitCode(), stderr: string(out)}
				_ = err
			})
		}
		wg.Wait()
		created := 0
		for i, r := range results {
			switch {
			case r.code == exitOK && strings.Contains(r.stderr, "created store "):
				created++
			case r.code == exitFail && strings.Contains(r.stderr, "a store exists at this location already"),
				r.code == exitHeld:
			default:
				t.Errorf("racer %d: %s", i, r)
			}
		}
		if created != 1 {
			t.Errorf("%d racers say they created the store, want 1", created)
		}
		manifests := 0
		if err := tg.raw.List(t.Context(), "", func(o backend.Object) error {
			if strings.HasSuffix(o.Key, store.Prefix+storemeta.ManifestName) {
				manifests++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if manifests != 1 {
			t.Fatalf("%d manifests after racing inits", manifests)
		}
		for i := range n {
			tg.cli(t, []byte(fmt.Sprint(i)), "put", fmt.Sprintf("racer/%d", i), "--identity", id).must(t, exitOK)
		}
		st := tg.store(t, id)
		m, _ := storeadmin.Manifest(st)
		for i := range n {
			name := fmt.Sprintf("racer/%d", i)
			got, _, err := st.Get(t.Context(), name)
			if err != nil || string(got) != fmt.Sprint(i) {
				t.Errorf("%s = %q, %v", name, got, err)
			}
			if hdr, _ := envelope.PeekHeader(name, rawBytes(t, tg, name)); hdr.StoreID != m.ID {
				t.Errorf("%s is bound to %s, the store is %s", name, hdr.StoreID, m.ID)
			}
		}
		v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitOK))
		if v.Store == nil || v.Store.ID != m.ID.String() {
			t.Errorf("verify: %+v", v)
		}
	})
}

func TestRecipientsDiffer_NoteOnStderr_WritesSealToTheStoresSet(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	recoveryFile, recovery := tg.keygen(t, "recovery.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	tg.cli(t, []byte("v"), "put", "a", "--identity", id).must(t, exitOK)
	r := tg.cli(t, []byte("w"), "put", "b", "--identity", id, "--recipient", recovery).must(t, exitOK)
	if !strings.Contains(r.stderr, "differ from the store's") || !strings.Contains(r.stderr, recovery[:16]) || !strings.Contains(r.stderr, "cairn-state rekey") {
		t.Errorf("no note naming the difference and the command:\n%s", r)
	}
	// The recovery key was not added by the put: the store's set rules.
	v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--recovery-identity", recoveryFile, "--json").must(t, exitFail))
	if v.Recovery == nil || v.Recovery.Recovered != 0 || len(v.Recovery.Failed) != v.Checked {
		t.Errorf("the recovery key reads objects the store does not seal to it: %+v", v.Recovery)
	}
	// rekey with the recipient makes it the store's; then it reads all.
	tg.cli(t, nil, "rekey", "--identity", id, "--recipient", recovery).must(t, exitOK)
	v = decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--recovery-identity", recoveryFile, "--json").must(t, exitOK))
	if v.Recovery.Recovered != v.Checked {
		t.Errorf("after rekey the recovery key reads %d of %d", v.Recovery.Recovered, v.Checked)
	}
	r = tg.cli(t, []byte("w"), "put", "b", "--identity", id, "--recipient", recovery).must(t, exitOK)
	if strings.Contains(r.stderr, "differ") {
		t.Errorf("a note after the sets agree:\n%s", r)
	}
}

// TestVerify_RecoveryIdentity_StockAgeFailureReportedPerObject: an object
// whose recovery stanza is damaged still opens with the writer's key (the
// envelope does not check other recipients' stanzas), and the stock-age
// check is what finds it.
func TestVerify_RecoveryIdentity_StockAgeFailureReportedPerObject(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	recoveryFile, recovery := tg.keygen(t, "recovery.txt")
	tg.cli(t, nil, "init", "--identity", id, "--recipient", recovery).must(t, exitOK)
	tg.cli(t, []byte("fine"), "put", "good", "--identity", id, "--recipient", recovery).must(t, exitOK)
	// A writer that left the recovery key out: sealed to the writer alone,
	// but bound to this store.
	st := tg.store(t, id)
	m, _ := storeadmin.Manifest(st)
	alone, err := envelope.New(mustIdentities(t, id), nil, envelope.Options{StoreID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := alone.Seal("bad", []byte("no recovery stanza"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tg.dir, "bad.age"), sealed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.raw.Put(t.Context(), tg.key("bad"), sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--recovery-identity", recoveryFile, "--json").must(t, exitFail))
	if v.Recovery == nil || len(v.Recovery.Failed) != 1 || v.Recovery.Failed[0].Name != "bad" || v.Recovery.Failed[0].Reason != reasonWrongKey {
		t.Errorf("recovery check = %+v, want bad reported as not sealed to the recovery key", v.Recovery)
	}
	// It is also outside the store's recipient set.
	if len(v.Findings) != 1 || v.Findings[0].Name != "bad" {
		t.Errorf("findings = %+v", v.Findings)
	}
	r := tg.cli(t, nil, "verify", "--identity", id, "--recovery-identity", recoveryFile).must(t, exitFail)
	if !strings.Contains(r.stdout, "NOT RECOVERABLE bad") || !strings.Contains(r.stdout, "recovery key: stock age read") {
		t.Errorf("human verify:\n%s", r)
	}
}
