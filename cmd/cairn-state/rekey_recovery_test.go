package main

// rekey when only the recovery key survives, and the raw-object helpers.

import (
	"bytes"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
)

func TestRekey_OnlyTheRecoveryKeySurvives_RecoversWithAllowUnauthenticated(t *testing.T) {
	tg := fsTarget(t)
	lostID, _ := tg.keygen(t, "lost.txt")
	recoveryID, recovery := tg.keygen(t, "recovery.txt")
	newID, _ := tg.keygen(t, "new.txt")
	// The application sealed with its key plus a recovery recipient.
	tg.cli(t, nil, "init", "--identity", lostID, "--recipient", recovery).must(t, exitOK)
	tg.cli(t, []byte("precious"), "put", "x", "--identity", lostID, "--recipient", recovery).must(t, exitOK)
	xVersion := decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "x", "--identity", lostID, "--json").must(t, exitOK))[0].Version
	// Someone who knows only the public recipient and the store id (both
	// visible in the bucket) forges an application object and the
	// migration log.
	hdr, err := envelope.PeekHeader(storemeta.ManifestName, rawBytes(t, tg, storemeta.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	rr, err := envelope.ParseRecipient(recovery)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Forge(t, tg.raw, tg.key(""), hdr.StoreID, rr, map[string]string{"config/admins": "mallory", storemeta.MigrationLogName: `{"forged":true}`})
	forgedLog := rawBytes(t, tg, storemeta.MigrationLogName)
	if err := os.Remove(lostID); err != nil {
		t.Fatal(err)
	}

	// The recovery key decrypts but never wrote: it does not belong to
	// the store as an identity.
	tg.cli(t, nil, "verify", "--identity", recoveryID).must(t, exitNotMember)
	// The opt-in needs the recovery key given as such.
	tg.cli(t, nil, "get", "x", "--allow-unauthenticated").must(t, exitUsage)
	tg.cli(t, nil, "get", "x", "--recovery-identity", recoveryID).must(t, exitUsage)
	if r := tg.cli(t, nil, "get", "x", "--recovery-identity", recoveryID, "--allow-unauthenticated").must(t, exitOK); r.stdout != "precious" {
		t.Errorf("emergency get = %q\n%s", r.stdout, r)
	}

	// Without --yes, rekey lists what it would re-seal as authentic, and
	// writes nothing.
	before := rawSnapshot(t, tg)
	args := []string{"rekey", "--identity", newID, "--recovery-identity", recoveryID, "--allow-unauthenticated", "--recipient", recovery}
	plan := decode[rekeyPlanDoc](t, tg.cli(t, nil, append(args, "--json")...).must(t, exitFail))
	if !slices.Equal(plan.Unauthenticated, []string{".history/x/" + xVersion, "config/admins", "x"}) || !slices.Equal(plan.ReservedLeft, []string{storemeta.MigrationLogName}) {
		t.Errorf("rekey plan = %+v, want x, its kept version and config/admins unauthenticated, the migration log left", plan)
	}
	r := tg.cli(t, nil, args...).must(t, exitFail)
	if !strings.Contains(r.stdout, "config/admins") || !strings.Contains(r.stdout, "--yes") {
		t.Errorf("rekey plan, human:\n%s", r)
	}
	if after := rawSnapshot(t, tg); !maps.Equal(before, after) {
		t.Errorf("the plan wrote: %v → %v", before, after)
	}

	// The lock object the last holder released is sealed like the
	// reserved objects, which no recovery identity opens: it reads as an
	// unreadable lock (docs/adr/0066), watched for the stale window before
	// it is taken over — shortened here, waited for.
	tg.cli(t, nil, append(args, "--yes")...).must(t, exitHeld)
	r = tg.cli(t, nil, append(args, "--yes", "--stale-after", "2s", "--wait", "30s")...).must(t, exitOK)
	if !strings.Contains(r.stdout, "config/admins") || !strings.Contains(r.stderr, "left "+storemeta.MigrationLogName) {
		t.Errorf("rekey --yes does not say what it re-sealed unauthenticated and what it left:\n%s", r)
	}
	if r := tg.cli(t, nil, "get", "x", "--identity", newID).must(t, exitOK); r.stdout != "precious" {
		t.Errorf("get with the new key after recovery = %q", r.stdout)
	}
	// The forged migration log was never opened through the recovery key,
	// so it is not laundered into authenticated state: same bytes, and it
	// does not open with the new key.
	if !bytes.Equal(rawBytes(t, tg, storemeta.MigrationLogName), forgedLog) {
		t.Error("the forged migration log was rewritten")
	}
	tg.cli(t, nil, "migrate", "status", "--identity", newID).must(t, exitFail)
	v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", newID, "--json").must(t, exitFail))
	if len(v.Failed) != 1 || v.Failed[0].Name != storemeta.MigrationLogName {
		t.Errorf("verify after the recovery: %+v", v.Failed)
	}
	// The recovery key no longer opens the store as an identity either,
	// and the lost key's store is now the new key's.
	tg.cli(t, nil, "get", "x", "--identity", recoveryID).must(t, exitNotMember)
}

func mustIdentities(t *testing.T, file string) []age.Identity {
	t.Helper()
	ids, err := envelope.LoadIdentityFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
