package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// commandFlags are the flags each command must document in its help
// (besides the global ones, which every help lists).
var commandFlags = map[string][]string{
	"keygen":         {"-o FILE"},
	"init":           nil,
	"ls":             {"--all", "--deleted"},
	"get":            {"--allow-unauthenticated", "--recovery-identity FILE", "--version V", "--strict"},
	"history":        nil,
	"restore":        {"--wait DURATION"},
	"put":            {"--wait DURATION", "--allow-empty", "--if-absent", "--if-version V"},
	"rm":             {"--wait DURATION", "--purge"},
	"verify":         {"--recovery-identity FILE"},
	"rekey":          {"--old-identity FILE", "--restart", "--allow-unauthenticated", "--recovery-identity FILE", "--yes", "--wait DURATION"},
	"lock status":    nil,
	"lock break":     {"--holder ID", "--force"},
	"migrate status": nil,
	"version":        nil,
	"doctor":         nil,
}

var globalFlagNames = []string{"--url URL", "--identity FILE", "--recipient R", "--json", "--stale-after DURATION", "--timeout DURATION", "--verbose", "--store-id ID", "--history N"}

// flagLineRE is a flag's entry in help text: the flag, then its sentence
// on the same line or the next.
var flagLineRE = regexp.MustCompile(`(?m)^  (--?[a-z-]+(?: [A-Z]+)?)(?: +(\S.*)|\n {20,}(\S.*))$`)

func TestHelp_EveryCommandAndGroup_Exit0_DocumentsEachFlagAndGivesAnExample(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	if len(commandFlags) != len(commands()) {
		t.Fatalf("the test knows %d commands, the CLI has %d", len(commandFlags), len(commands()))
	}
	for _, c := range commands() {
		want, ok := commandFlags[c.name]
		if !ok {
			t.Fatalf("the test does not know the flags of %q", c.name)
		}
		words := strings.Fields(c.name)
		for _, args := range [][]string{
			append(append([]string{}, words...), "-h"),
			append(append([]string{}, words...), "--help"),
			append([]string{"help"}, words...),
		} {
			r := tg.cli(t, nil, args...).must(t, exitOK)
			out := r.stdout
			if !strings.HasPrefix(out, "Usage: cairn-state "+c.name) {
				t.Errorf("%v: no synopsis:\n%s", args, out)
			}
			if !strings.Contains(out, "\nExample:\n  $ cairn-state ") && !strings.Contains(out, "\nExample:\n  $ echo") {
				t.Errorf("%v: no example:\n%s", args, out)
			}
			documented := map[string]string{}
			for _, m := range flagLineRE.FindAllStringSubmatch(out, -1) {
				documented[m[1]] = m[2] + m[3]
			}
			for _, f := range append(append([]string{}, want...), globalFlagNames...) {
				sentence, ok := documented[f]
				if !ok {
					t.Errorf("%v: flag %s not documented:\n%s", args, f, out)
				} else if len(strings.Fields(sentence)) < 4 {
					t.Errorf("%v: flag %s has no sentence: %q", args, f, sentence)
				}
			}
			if len(documented) != len(want)+len(globalFlagNames) {
				t.Errorf("%v: documents %d flags, want %d: %v", args, len(documented), len(want)+len(globalFlagNames), documented)
			}
		}
	}
	for group, subs := range map[string][]string{"lock": {"lock status", "lock break"}, "migrate": {"migrate status"}} {
		for _, args := range [][]string{{group, "-h"}, {group, "--help"}, {"help", group}} {
			r := tg.cli(t, nil, args...).must(t, exitOK)
			for _, sub := range subs {
				if !strings.Contains(r.stdout, "\n  "+sub) {
					t.Errorf("%v does not list %q:\n%s", args, sub, r.stdout)
				}
			}
		}
		// The group alone is still a usage error, naming its subcommands.
		if r := tg.cli(t, nil, group).must(t, exitUsage); !strings.Contains(r.stderr, subs[0][len(group)+1:]) {
			t.Errorf("%s alone: %s", group, r)
		}
	}
}

func TestHelp_ListsEveryCommandAndTheExitCodes(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		out := tg.cli(t, nil, args...).must(t, exitOK).stdout
		for _, c := range commands() {
			if !strings.Contains(out, "\n  "+c.name) {
				t.Errorf("%v does not list %q", args, c.name)
			}
		}
		listed := exitCodesIn(t, out)
		if len(listed) != len(exitTable) {
			t.Errorf("%v lists %d exit codes, the table has %d:\n%s", args, len(listed), len(exitTable), out)
		}
		for _, row := range exitTable {
			if got := listed[row.code]; got != strings.Join(strings.Fields(row.meaning), " ") {
				t.Errorf("%v: exit code %d reads %q, the table says %q", args, row.code, got, row.meaning)
			}
		}
		// What the issue (#20) asks each code to say.
		for code, words := range map[int][]string{
			exitUsage: {"usage", "flag", "--url", "identity file"}, exitHeld: {"held by a live instance"},
			exitLockLost: {"lost"}, exitNotMember: {"does not belong to this store"}, exitNoStore: {"no store"},
			exitSIGINT: {"SIGINT", "releasing"}, exitSIGTERM: {"SIGTERM", "releasing"},
		} {
			for _, w := range words {
				if !strings.Contains(listed[code], w) {
					t.Errorf("%v: exit code %d does not say %q: %q", args, code, w, listed[code])
				}
			}
		}
	}
}

// exitCodesIn parses the exit-code table of help text: each code with its
// meaning, wrapped lines joined.
func exitCodesIn(t *testing.T, help string) map[int]string {
	t.Helper()
	_, section, ok := strings.Cut(help, "\nExit codes:\n")
	if !ok {
		t.Fatalf("no exit codes in:\n%s", help)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	out := map[int]string{}
	last := -1
	for line := range strings.SplitSeq(section, "\n") {
		if m := regexp.MustCompile(`^  (\d+) +(.*)$`).FindStringSubmatch(line); m != nil {
			last, _ = strconv.Atoi(m[1])
			out[last] = m[2]
		} else if last >= 0 {
			out[last] += " " + strings.TrimSpace(line)
		}
	}
	return out
}

func TestUsage_UnknownCommandOrFlag_Exit2WithAHint(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"frobnicate"}, "cairn-state help"},
		{[]string{"--colour", "ls"}, "cairn-state help"},
		{[]string{"ls", "--colour"}, "cairn-state ls -h"},
		{[]string{"lock", "break", "--colour"}, "cairn-state lock break -h"},
		{[]string{"lock", "steal"}, "cairn-state lock -h"},
		{[]string{"migrate", "up"}, "cairn-state migrate -h"},
		{[]string{"help", "frobnicate"}, "cairn-state help"},
	} {
		r := tg.cli(t, nil, c.args...).must(t, exitUsage)
		if !strings.Contains(r.stderr, c.hint) {
			t.Errorf("%v: no hint %q:\n%s", c.args, c.hint, r)
		}
	}
}

func TestInvalidStateName_IsAUsageError_ForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	tg.cli(t, []byte("v"), "put", "ok", "--identity", id).must(t, exitOK)
	for _, args := range [][]string{
		{"put", "../x"}, {"get", "../x"}, {"rm", "../x"}, {"ls", "../"},
		{"put", "a//b"}, {"get", "a//b"}, {"get", "/abs"}, {"rm", "dir/"},
		{"get", ".lock"}, {"ls", "a//"},
	} {
		r := tg.cli(t, []byte("v"), append(args, "--identity", id)...).must(t, exitUsage)
		if !strings.Contains(r.stderr, args[0]+": ") || !strings.Contains(r.stderr, strconv.Quote(args[1])) {
			t.Errorf("%v: the error does not name the command and the name:\n%s", args, r)
		}
	}
	// ls --all may list the reserved names.
	tg.cli(t, nil, "ls", "--all", ".lock").must(t, exitOK)
}

// segmentRepeated returns a ": "-separated segment of msg that occurs
// twice, or "".
func segmentRepeated(msg string) string {
	seen := map[string]bool{}
	for _, seg := range strings.Split(msg, ": ") {
		seg = strings.TrimSpace(seg)
		if len(seg) < 4 {
			continue
		}
		if seen[seg] {
			return seg
		}
		seen[seg] = true
	}
	return ""
}

// stutter returns a run of words of msg that is immediately repeated
// ("lock break: lock: break", "identity file X: identity file X"), or "".
func stutter(msg string) string {
	words := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ':' || r == ';' || r == ',' })
	for k := 1; k <= len(words)/2; k++ {
		for i := 0; i+2*k <= len(words); i++ {
			a, b := strings.Join(words[i:i+k], " "), strings.Join(words[i+k:i+2*k], " ")
			if a == b && len(a) >= 4 {
				return a
			}
		}
	}
	return ""
}

func TestMessages_NoRepeatedPrefixes(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	tg.cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
	garbage := filepath.Join(dir, "garbage.txt")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.txt")
	for _, c := range []struct {
		name string
		tg   *target
		args []string
		once []string // substrings that must appear exactly once
	}{
		{"missing identity file", tg, []string{"get", "x", "--identity", missing}, []string{missing}},
		{"garbage identity file", tg, []string{"get", "x", "--identity", garbage}, []string{garbage}},
		{"missing old identity", tg, []string{"rekey", "--identity", id, "--old-identity", missing}, []string{missing}},
		{"garbage old identity", tg, []string{"rekey", "--identity", id, "--old-identity", garbage}, []string{garbage}},
		{"bad recipient", tg, []string{"put", "x", "--identity", id, "--recipient", "age1nope"}, []string{"--recipient"}},
		{"file URL with a query", &target{dir: dir, url: "file:state?sync=1"}, []string{"ls"}, []string{"file:state?sync=1"}},
		{"unknown scheme", &target{dir: dir, url: "ftp://host/x"}, []string{"ls"}, []string{"ftp://host/x"}},
		{"missing file store", &target{dir: dir, url: "file:nope"}, []string{"ls"}, []string{filepath.Join(dir, "nope")}},
		{"put from a directory", tg, []string{"put", "x", dir, "--identity", id}, []string{dir + ":"}},
		{"rm of a missing object", tg, []string{"rm", "nope", "--identity", id}, []string{`"nope"`}},
		{"lock break without a lock", tg, []string{"lock", "break", "--identity", id}, []string{"no state lock"}},
		{"lock break without an identity", tg, []string{"lock", "break"}, []string{"without an identity"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.tg.cli(t, nil, c.args...)
			if r.code == exitOK {
				t.Fatalf("succeeded: %s", r)
			}
			msg, _, _ := strings.Cut(r.stderr, "\n")
			if seg := segmentRepeated(msg); seg != "" {
				t.Errorf("%q repeated in: %s", seg, msg)
			}
			if run := stutter(msg); run != "" {
				t.Errorf("%q stutters in: %s", run, msg)
			}
			for _, s := range c.once {
				if n := strings.Count(msg, s); n != 1 {
					t.Errorf("%q appears %d times in: %s", s, n, msg)
				}
			}
		})
	}
}

func TestURLSchemes_AreCaseInsensitive(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	tg := &target{dir: dir}
	id, _ := tg.keygen(t, "id.txt")
	(&target{dir: dir, url: "FILE://" + state}).cli(t, nil, "init", "--identity", id).must(t, exitOK)
	(&target{dir: dir, url: "FILE://" + state}).cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
	if r := (&target{dir: dir, url: "File:state"}).cli(t, nil, "get", "x", "--identity", id).must(t, exitOK); r.stdout != "v" {
		t.Errorf("get through File:state = %q", r.stdout)
	}
	eachBackend(t, func(t *testing.T, tg *target) {
		if tg.name == "fs" {
			return
		}
		id, _ := tg.keygen(t, "id.txt")
		upper := *tg
		upper.url = "S3" + strings.TrimPrefix(tg.url, "s3")
		upper.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		upper.cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
		if r := tg.cli(t, nil, "get", "x", "--identity", id).must(t, exitOK); r.stdout != "v" {
			t.Errorf("get after a put through S3:// = %q", r.stdout)
		}
	})
}

func TestCommands_MissingFileStore_NoStoreAtPathExit6AndCreateNothing(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file:typo-dir"}
	id, _ := tg.keygen(t, "id.txt")
	abs := filepath.Join(dir, "typo-dir")
	for _, args := range [][]string{
		{"ls"}, {"ls", "--json"}, {"get", "x"}, {"verify"}, {"lock", "status"}, {"lock", "break", "--force"},
		{"migrate", "status"}, {"rm", "x"}, {"rekey"}, {"put", "x"}, {"doctor"},
	} {
		want := exitNoStore
		if args[0] == "doctor" {
			want = exitFail // doctor reports, one line per check
		}
		r := tg.cli(t, []byte("v"), append(args, "--identity", id)...).must(t, want)
		if !strings.Contains(r.stderr+r.stdout, "no state store at "+abs) {
			t.Errorf("%v: stderr does not say there is no store at %s:\n%s", args, abs, r)
		}
		if _, err := os.Stat(abs); !os.IsNotExist(err) {
			t.Fatalf("%v created %s (stat: %v)", args, abs, err)
		}
	}
	// init creates the store, and only init.
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		t.Fatalf("init did not create the store: %v", err)
	}
	tg.cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
	tg.cli(t, nil, "ls").must(t, exitOK)
}
