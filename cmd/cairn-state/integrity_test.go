package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/storemeta"
)

type initOut struct {
	Store storeDoc `json:"store"`
	URL   string   `json:"url"`
}

// Only init creates a store: every other command on a location without
// one fails with exit 6, names the location, suggests init and creates
// nothing. init prints the new store's id, location and recipients, and
// refuses a location that holds a store.
func TestInit_OnlyWayToCreate_EveryOtherCommandExit6(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, recipient := tg.keygen(t, "id.txt")
		_, extra := tg.keygen(t, "recovery.txt")
		for _, args := range [][]string{
			{"put", "x"}, {"rm", "x"}, {"rekey"}, {"ls"}, {"get", "x"}, {"verify"},
			{"lock", "status"}, {"lock", "break", "--force"}, {"migrate", "status"},
		} {
			r := tg.cli(t, []byte("v"), append(args, "--identity", id)...).must(t, exitNoStore)
			if !strings.Contains(r.stderr, "holds no store") || !strings.Contains(r.stderr, "cairn-state init") {
				t.Errorf("%v on a location without a store:\n%s", args, r)
			}
		}
		if got := rawSnapshot(t, tg); len(got) != 0 {
			t.Fatalf("commands on a location without a store wrote %v", got)
		}

		doc := decode[initOut](t, tg.cli(t, nil, "init", "--json", "--identity", id, "--recipient", extra).must(t, exitOK))
		if len(doc.Store.ID) != 32 || doc.URL == "" || len(doc.Store.Recipients) != 2 || !strings.Contains(strings.Join(doc.Store.Recipients, " "), recipient) || doc.Store.Generation != 1 {
			t.Fatalf("init --json = %+v", doc)
		}
		wantMode := storemeta.LockModeCAS
		if tg.name == "garage" {
			wantMode = storemeta.LockModeClaims
		}
		if doc.Store.LockMode != wantMode {
			t.Errorf("init recorded lock mode %s, want %s", doc.Store.LockMode, wantMode)
		}
		tg.cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
		snap := rawSnapshot(t, tg)
		r := tg.cli(t, nil, "init", "--identity", id).must(t, exitFail)
		if !strings.Contains(r.stderr, "a store exists at this location already") || !strings.Contains(r.stderr, doc.Store.ID) {
			t.Errorf("init on a store:\n%s", r)
		}
		if got := rawSnapshot(t, tg); !maps.Equal(got, snap) {
			t.Errorf("init on a store wrote: %v → %v", snap, got)
		}
	})
}

// --store-id (or CAIRN_STATE_STORE_ID) pins the store: another store is
// refused with exit 5 before anything is read or written, in every
// command, with the ids in --json's error.
func TestStoreID_PinsTheStore_AnotherExit5(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		mine := decode[initOut](t, tg.cli(t, nil, "init", "--json", "--identity", id).must(t, exitOK))
		tg.cli(t, []byte("v"), "put", "x", "--identity", id, "--store-id", mine.Store.ID).must(t, exitOK)
		other := "01a2" + strings.Repeat("0", 27) + "1"
		snap := rawSnapshot(t, tg)
		for _, args := range [][]string{{"get", "x"}, {"put", "x"}, {"rm", "x"}, {"ls"}, {"verify"}, {"rekey"}, {"lock", "status"}, {"migrate", "status"}} {
			r := tg.cli(t, []byte("w"), append(args, "--identity", id, "--store-id", other)...).must(t, exitNotMember)
			if !strings.Contains(r.stderr, "is pinned") || !strings.Contains(r.stderr, mine.Store.ID) || !strings.Contains(r.stderr, other) {
				t.Errorf("%v pinned to another store:\n%s", args, r)
			}
		}
		r := tg.cliEnv(t, []byte("w"), []string{"CAIRN_STATE_STORE_ID=" + other}, "put", "x", "--identity", id, "--json").must(t, exitNotMember)
		var doc errorDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Error.ExitCode != exitNotMember {
			t.Errorf("--json refusal: %+v, %v", doc, err)
		}
		if got := rawSnapshot(t, tg); !maps.Equal(got, snap) {
			t.Errorf("a pinned refusal wrote: %v → %v", snap, got)
		}
		tg.cli(t, nil, "get", "x", "--identity", id, "--store-id", "not-hex").must(t, exitUsage)
		// doctor names the store and says so.
		_, dd := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id, "CAIRN_STATE_STORE_ID=" + other})
		dd.wantCheck(t, checkMembership, statusFail, "is pinned", mine.Store.ID)
	})
}

// The lock mode is the store's: a URL that forces the other one is
// refused, saying which parameter to change, before anything is written.
func TestConditionalParameter_ForcingTheOtherLockMode_Refused(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		if tg.name == "fs" {
			return // no conditional= parameter
		}
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		snap := rawSnapshot(t, tg)
		forced := "conditional=off"
		if tg.name == "garage" {
			forced = "conditional=on"
		}
		other := *tg
		other.url = strings.Replace(tg.url, "conditional=auto", forced, 1)
		for _, args := range [][]string{{"put", "x"}, {"get", "x"}, {"ls"}} {
			r := other.cli(t, []byte("v"), append(args, "--identity", id)...).must(t, exitFail)
			if !strings.Contains(r.stderr, forced+" in the URL forces lock mode") || !strings.Contains(r.stderr, "remove "+forced) {
				t.Errorf("%v with %s:\n%s", args, forced, r)
			}
		}
		if got := rawSnapshot(t, tg); !maps.Equal(got, snap) {
			t.Errorf("a refused command wrote: %v → %v", snap, got)
		}
	})
}
