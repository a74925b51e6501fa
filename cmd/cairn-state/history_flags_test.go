package main

import (
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
)

// keptOf counts the versions history keeps of name (tombstones and a
// current version not kept are not counted), from `history --json`; 0
// when the name has no history at all.
func keptOf(t *testing.T, tg *target, id, name string) (kept int, currentKept bool) {
	t.Helper()
	r := tg.cli(t, nil, "history", name, "--identity", id, "--json")
	if r.code == exitFail {
		return 0, false
	}
	for _, v := range decode[[]keptVersionDoc](t, r.must(t, exitOK)) {
		if v.Kept && !v.Deleted {
			kept++
		}
		if v.Current {
			currentKept = v.Kept
		}
	}
	return kept, currentKept
}

// Issue #21: the CLI always kept the library's default (5 versions of
// each name), whatever the application keeps; `--history N` and
// CAIRN_STATE_HISTORY set it, 0 turning history off, the flag over the
// variable as for the CLI's other flag and variable pairs.
func TestHistory_CLI_RetentionFlagAndEnv(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	puts := func(n int, name string, env []string, args ...string) {
		t.Helper()
		for range n {
			tg.cliEnv(t, []byte("v"), env, append([]string{"put", name, "--identity", id}, args...)...).must(t, exitOK)
		}
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"default", nil, nil, 5},
		{"flag", nil, []string{"--history", "2"}, 2},
		{"flag=", nil, []string{"--history=3"}, 3},
		{"env", []string{"CAIRN_STATE_HISTORY=3"}, nil, 3},
		{"env with spaces", []string{"CAIRN_STATE_HISTORY= 2 "}, nil, 2},
		{"empty env is unset", []string{"CAIRN_STATE_HISTORY="}, nil, 5},
		{"flag over env", []string{"CAIRN_STATE_HISTORY=4"}, []string{"--history", "1"}, 1},
		{"flag 0 over env", []string{"CAIRN_STATE_HISTORY=4"}, []string{"--history", "0"}, 0},
	}
	for _, c := range cases {
		name := "app/" + strings.ReplaceAll(c.name, " ", "-")
		puts(7, name, c.env, c.args...)
		if got, _ := keptOf(t, tg, id, name); got != c.want {
			t.Errorf("%s: after 7 puts (env %q, args %q): %d versions kept, want %d", c.name, c.env, c.args, got, c.want)
		}
	}
	// 0 turns history off: a write keeps nothing and removes nothing
	// already kept (ADR 0040: store.NoHistory).
	puts(2, "app/flag", []string{"CAIRN_STATE_HISTORY=0"})
	if got, curKept := keptOf(t, tg, id, "app/flag"); got != 2 || curKept {
		t.Errorf("after puts with history off: %d kept (current kept: %v), want the 2 kept before and the current one not kept", got, curKept)
	}
	// The retention applies to every command that writes, and doctor
	// says which one is in force.
	tg.cliEnv(t, nil, []string{"CAIRN_STATE_HISTORY=1"}, "restore", "app/default", "999.1", "--identity", id).must(t, exitFail) // no such version: nothing written
	hist := decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "app/default", "--identity", id, "--json").must(t, exitOK))
	tg.cli(t, nil, "restore", "app/default", hist[len(hist)-1].Version, "--identity", id, "--history", "2").must(t, exitOK)
	if got, _ := keptOf(t, tg, id, "app/default"); got != 2 {
		t.Errorf("after restore --history 2: %d kept, want 2", got)
	}
	_, dd := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id, "CAIRN_STATE_HISTORY=3"})
	dd.wantCheck(t, checkHistory, statusOK, "keeping 3 per name")
	_, dd = tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id}, "--history", "0")
	dd.wantCheck(t, checkHistory, statusOK, "keeping 0 per name")

	// A bad value is a usage error naming it, and nothing is written.
	for _, c := range []struct {
		env    []string
		args   []string
		source string
		value  string
	}{
		{nil, []string{"--history", "-1"}, "-history", "-1"},
		{nil, []string{"--history", "five"}, "-history", "five"},
		{nil, []string{"--history", "2.5"}, "-history", "2.5"},
		{[]string{"CAIRN_STATE_HISTORY=lots"}, nil, "CAIRN_STATE_HISTORY", "lots"},
		{[]string{"CAIRN_STATE_HISTORY=-2"}, nil, "CAIRN_STATE_HISTORY", "-2"},
	} {
		r := tg.cliEnv(t, []byte("bad"), c.env, append([]string{"put", "app/bad", "--identity", id}, c.args...)...).must(t, exitUsage)
		if !strings.Contains(r.stderr, c.source) || !strings.Contains(r.stderr, `"`+c.value+`"`) {
			t.Errorf("env %q args %q: the usage error does not name %s and %q:\n%s", c.env, c.args, c.source, c.value, r)
		}
	}
	tg.cli(t, nil, "get", "app/bad", "--identity", id).must(t, exitFail)
	// --json reports it as a document too.
	r := tg.cliEnv(t, nil, []string{"CAIRN_STATE_HISTORY=x"}, "ls", "--json", "--identity", id).must(t, exitUsage)
	if doc := decode[errorDoc](t, r); doc.Error.ExitCode != exitUsage || !strings.Contains(doc.Error.Message, `"x"`) {
		t.Errorf("ls --json with a bad CAIRN_STATE_HISTORY: %+v", doc)
	}
}

// Issue #21: rm keeps the removed value in history so that it can be
// undeleted, and nothing removed it there: a leaked secret stayed
// readable by every identity of the store. `rm --purge` removes the name
// and every version history keeps of it, and says so.
func TestRm_Purge_RemovesTheNameAndItsHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		for _, v := range []string{"leaked-1", "leaked-2"} {
			tg.cli(t, []byte(v), "put", "app/token", "--identity", id).must(t, exitOK)
		}
		tg.cli(t, []byte("kept"), "put", "app/other", "--identity", id).must(t, exitOK)
		r := tg.cli(t, nil, "rm", "--purge", "app/token", "--identity", id).must(t, exitOK)
		if want := "removed app/token and its history (2 kept objects): nothing of it is left to restore"; !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "cairn-state restore") {
			t.Errorf("rm --purge does not say %q:\n%s", want, r)
		}
		tg.cli(t, nil, "history", "app/token", "--identity", id).must(t, exitFail)
		tg.cli(t, nil, "get", "app/token", "--identity", id).must(t, exitFail)
		if del := decode[[]deletedDoc](t, tg.cli(t, nil, "ls", "--deleted", "--json", "--identity", id).must(t, exitOK)); len(del) != 0 {
			t.Errorf("ls --deleted after rm --purge = %+v", del)
		}
		all := decode[lsDoc](t, tg.cli(t, nil, "ls", "--all", "--json", "--identity", id).must(t, exitOK))
		if all.History == nil || all.History.Names != 1 || all.History.Versions != 1 {
			t.Errorf("ls --all --json history after rm --purge = %+v, want app/other's one version only", all.History)
		}
		for _, o := range rawList(t, tg) {
			if strings.Contains(o, "app/token") {
				t.Errorf("left after rm --purge: %s", o)
			}
		}
		// A name rm already removed (history kept it) is purged the
		// same way.
		tg.cli(t, []byte("old"), "put", "app/old", "--identity", id).must(t, exitOK)
		tg.cli(t, nil, "rm", "app/old", "--identity", id).must(t, exitOK)
		doc := decode[rmDoc](t, tg.cli(t, nil, "rm", "--purge", "app/old", "--identity", id, "--json").must(t, exitOK))
		if doc.Name != "app/old" || doc.Removed || !doc.Purged || doc.HistoryRemoved != 2 || doc.Kept != "" {
			t.Errorf("rm --purge --json of a deleted name = %+v, want purged, 2 history objects (a version and a tombstone)", doc)
		}
		if r := tg.cli(t, nil, "restore", "app/old", "1.1", "--identity", id).must(t, exitFail); !strings.Contains(r.stderr, "app/old") {
			t.Errorf("restore after rm --purge:\n%s", r)
		}
		// Nothing to purge.
		if r := tg.cli(t, nil, "rm", "--purge", "app/never", "--identity", id).must(t, exitFail); !strings.Contains(r.stderr, `no object and no history named "app/never"`) {
			t.Errorf("rm --purge of a name never written:\n%s", r)
		}
		// Without --purge, rm keeps history as before.
		r = tg.cli(t, nil, "rm", "app/other", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "is kept: cairn-state restore app/other") || !strings.Contains(r.stdout, "rm --purge") {
			t.Errorf("rm without --purge:\n%s", r)
		}
		tg.cli(t, nil, "verify", "--identity", id).must(t, exitOK)
	})
}

// rawList lists every key of the target's storage.
func rawList(t *testing.T, tg *target) []string {
	t.Helper()
	var out []string
	if err := tg.raw.List(t.Context(), "", func(o backend.Object) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
