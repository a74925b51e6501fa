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
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/store"
)

// TestFirstWrites_EightRacingProcesses_OneManifest starts eight puts at
// once, as separate processes, on a store that does not exist yet; each
// waits for the lock. They all land, in one store with one manifest.
func TestFirstWrites_EightRacingProcesses_OneManifest(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		const n = 8
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, binPath, "put", fmt.Sprintf("racer/%d", i), "--identity", id, "--wait", "90s")
				cmd.Env, cmd.Dir = tg.environ(), tg.dir
				cmd.Stdin = strings.NewReader(fmt.Sprint(i))
				out, err := cmd.CombinedOutput()
				results[i] = result{code: cmd.ProcessState.ExitCode(), stderr: string(out)}
				_ = err
			})
		}
		wg.Wait()
		for i, r := range results {
			if r.code != exitOK {
				t.Errorf("racer %d: %s", i, r)
			}
		}
		manifests := 0
		if err := tg.raw.List(t.Context(), "", func(o backend.Object) error {
			if strings.HasSuffix(o.Key, store.Prefix+store.ManifestName) {
				manifests++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if manifests != 1 {
			t.Fatalf("%d manifests after racing first writes", manifests)
		}
		st := tg.store(t, id)
		m, _ := st.Manifest()
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

// TestUpgrade_StoreWithoutManifest_GetsOneAtTheFirstWrite_RekeyBindsEverything
// fills a store as versions before the manifest did, then uses it.
func TestUpgrade_StoreWithoutManifest_GetsOneAtTheFirstWrite_RekeyBindsEverything(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		ctx := t.Context()
		id, _ := tg.keygen(t, "id.txt")
		legacyEnv, err := envelope.New(mustIdentities(t, id), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		legacy, err := store.Open(tg.raw, legacyEnv, store.Options{Root: tg.root})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := legacy.Put(ctx, fmt.Sprintf("old/%d", i), []byte("from before"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		stale := rawBytes(t, tg, "old/0")

		// Reads work and create nothing.
		if r := tg.cli(t, nil, "get", "old/1", "--identity", id).must(t, exitOK); r.stdout != "from before" {
			t.Errorf("get before the upgrade = %q", r.stdout)
		}
		v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitFail))
		if v.Store != nil || len(v.Findings) != 3 || len(v.Failed) != 0 {
			t.Errorf("verify before the upgrade = %+v, want no manifest and 3 legacy objects", v)
		}
		if _, _, err := tg.raw.Get(ctx, tg.key(store.ManifestName)); err == nil {
			t.Fatal("a read-only command created the manifest")
		}
		// An unrelated key is not made the store's owner by a write.
		other, _ := tg.keygen(t, "other.txt")
		tg.cli(t, []byte("x"), "put", "new", "--identity", other).must(t, exitNotMember)

		// The first write creates the manifest, in the legacy format.
		tg.cli(t, []byte("v"), "put", "new", "--identity", id).must(t, exitOK)
		v = decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitFail))
		if v.Store == nil || v.Store.Format != store.FormatLegacy || len(v.Findings) != 3 {
			t.Fatalf("verify after the upgrade = %+v, want format %d and the 3 legacy objects to re-seal", v, store.FormatLegacy)
		}
		for _, f := range v.Findings {
			if !strings.HasPrefix(f.Name, "old/") || f.Reason != "legacy" {
				t.Errorf("finding %+v", f)
			}
		}

		// rekey rewrites them and moves the store to the bound format.
		tg.cli(t, nil, "rekey", "--identity", id).must(t, exitOK)
		v = decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitOK))
		if v.Store.Format != store.FormatBound || len(v.Findings) != 0 {
			t.Fatalf("verify after rekey = %+v", v)
		}
		// A legacy object put back is refused from now on.
		if _, err := tg.raw.Put(ctx, tg.key("old/0"), stale, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		r := tg.cli(t, nil, "get", "old/0", "--identity", id).must(t, exitFail)
		if !strings.Contains(r.stderr, "legacy format") {
			t.Errorf("a legacy object in a bound store:\n%s", r)
		}
	})
}

func TestRecipientsDiffer_NoteOnStderr_WritesSealToTheStoresSet(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	recoveryFile, recovery := tg.keygen(t, "recovery.txt")
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
	tg.cli(t, []byte("fine"), "put", "good", "--identity", id, "--recipient", recovery).must(t, exitOK)
	// A writer that left the recovery key out: sealed to the writer alone,
	// but bound to this store.
	st := tg.store(t, id)
	m, _ := st.Manifest()
	alone, err := envelope.New(mustIdentities(t, id), nil, &envelope.Options{StoreID: m.ID})
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
