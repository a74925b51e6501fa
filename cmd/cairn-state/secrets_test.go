package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// secretOf returns the AGE-SECRET-KEY-1… line of an identity file.
func secretOf(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-1") {
			return line
		}
	}
	t.Fatalf("no secret key in %s", path)
	return ""
}

// assertAbsent fails if any run printed the secret's key material (its
// bech32 data, in any case) on stdout or stderr.
func assertAbsent(t *testing.T, what string, r result, secrets ...string) {
	t.Helper()
	out := strings.ToLower(r.stdout + r.stderr)
	for _, s := range secrets {
		s = strings.ToLower(s)
		if data, ok := strings.CutPrefix(s, "age-secret-key-1"); ok {
			s = data[:20] // any long run of the key data is a leak
		}
		if strings.Contains(out, s) {
			t.Errorf("%s: the secret %q was printed:\n%s", what, s, r)
		}
	}
}

func TestSecrets_SecretKeyWhereARecipientOrPathBelongs_NeverEchoed_SaysWhatWasWrong(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	key := secretOf(t, id)
	shapes := map[string]string{
		"exact":      key,
		"quoted":     `"` + key + `"`,
		"lower-case": strings.ToLower(key),
		"mixed-case": "Age-Secret-Key-1" + strings.ToLower(key[len("AGE-SECRET-KEY-1"):]),
		"embedded":   "my key: " + key + " (new)",
		"spaced":     "  " + key + "\t",
	}
	for shape, v := range shapes {
		for _, c := range []struct {
			name, want string
			args       []string
			env        []string
		}{
			{"--recipient", "--recipient looks like a secret key (AGE-SECRET-KEY-…); give the public recipient, age1…; see `age-keygen -y`",
				[]string{"put", "x", "--identity", id, "--recipient", v}, nil},
			{"CAIRN_STATE_RECIPIENTS", "CAIRN_STATE_RECIPIENTS looks like a secret key",
				[]string{"put", "x", "--identity", id}, []string{"CAIRN_STATE_RECIPIENTS=age1qqqq," + v}},
			{"--identity", "--identity looks like a secret key (AGE-SECRET-KEY-…) itself, not the path of a file",
				[]string{"get", "x", "--identity", v}, nil},
			{"CAIRN_STATE_IDENTITY", "CAIRN_STATE_IDENTITY looks like a secret key",
				[]string{"get", "x"}, []string{"CAIRN_STATE_IDENTITY=" + v}},
			{"--old-identity", "--old-identity looks like a secret key",
				[]string{"rekey", "--identity", id, "--old-identity", v}, nil},
			{"rekey --recipient", "--recipient looks like a secret key",
				[]string{"rekey", "--identity", id, "--recipient", v}, nil},
		} {
			for _, json := range []bool{false, true} {
				args := c.args
				if json {
					args = append(append([]string{}, args...), "--json")
				}
				r := tg.cliEnv(t, []byte("v"), c.env, append(args, "--verbose")...).must(t, exitUsage)
				what := shape + " " + c.name
				assertAbsent(t, what, r, key)
				if !strings.Contains(r.stderr, c.want) {
					t.Errorf("%s: stderr does not say %q:\n%s", what, c.want, r)
				}
				if json {
					if doc := decode[errorDoc](t, r); !strings.Contains(doc.Error.Message, c.want) {
						t.Errorf("%s --json: message %q", what, doc.Error.Message)
					}
				}
			}
		}
	}
	// A value that is no public recipient is not repeated either (it
	// might be a secret in a form not recognised); a public one is.
	r := tg.cli(t, []byte("v"), "put", "x", "--identity", id, "--recipient", "c2VjcmV0LWluLWJhc2U2NA").must(t, exitUsage)
	assertAbsent(t, "unknown recipient", r, "c2VjcmV0LWluLWJhc2U2NA")
	if !strings.Contains(r.stderr, "not a public recipient") {
		t.Errorf("unknown recipient:\n%s", r)
	}
	r = tg.cli(t, []byte("v"), "put", "x", "--identity", id, "--recipient", "age1nope").must(t, exitUsage)
	if !strings.Contains(r.stderr, "age1nope") {
		t.Errorf("a bad public recipient is not named:\n%s", r)
	}
	// Nothing was written.
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Errorf("a refused put created the store: %v", err)
	}
}

func TestSecrets_CredentialsInTheURL_NeverPrinted_NotEvenInJSONOrLogs(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir}
	id, _ := tg.keygen(t, "id.txt")
	// Credentials in the environment make the S3 client reach the closed
	// endpoint, so that the failures are network errors, logged and
	// returned.
	env := []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true"}
	for _, c := range testkit.SecretURLs {
		for _, args := range [][]string{
			{"ls"}, {"ls", "--json"}, {"ls", "--verbose"}, {"put", "x", "--identity", id, "--verbose", "--json"}, {"lock", "status", "--json"},
		} {
			r := (&target{dir: dir}).cliEnv(t, []byte("v"), append(env, "CAIRN_STATE_URL="+c.URL), args...)
			if r.code == exitOK {
				t.Errorf("%s %v succeeded against a closed port: %s", c.Name, args, r)
			}
			for _, s := range c.Secrets {
				if strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("%s %v printed %q:\n%s", c.Name, args, s, r)
				}
			}
		}
	}
}

func TestIdentityFile_AccessibleByOthers_RefusedNamingFileModeAndFix(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	old, _ := tg.keygen(t, "old.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
	tg.cli(t, []byte("v"), "put", "x", "--identity", id).must(t, exitOK)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		for _, c := range []struct {
			file string
			args []string
		}{
			{id, []string{"get", "x", "--identity", id}},
			{id, []string{"put", "y", "--identity", id}},
			{old, []string{"rekey", "--identity", id, "--old-identity", old}},
		} {
			if err := os.Chmod(c.file, mode); err != nil {
				t.Fatal(err)
			}
			r := tg.cli(t, []byte("v"), c.args...).must(t, exitUsage)
			for _, want := range []string{c.file, "mode " + fmt.Sprintf("%04o", mode.Perm()), "chmod 600 " + c.file} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%04o %v: stderr lacks %q:\n%s", mode, c.args, want, r)
				}
			}
			if err := os.Chmod(c.file, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Nothing was written by the refused put, and 0400 is fine.
	if err := os.Chmod(id, 0o400); err != nil {
		t.Fatal(err)
	}
	ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--json").must(t, exitOK))
	if len(ls.Objects) != 1 {
		t.Errorf("objects after refused writes: %+v", ls.Objects)
	}
	tg.cli(t, nil, "get", "x", "--identity", id).must(t, exitOK)
}

// batterySecret is one secret of a kind, and the strings that must never
// be printed, in any form (as given, quoted, percent-encoded, in JSON).
type batterySecret struct {
	kind  string
	value string
	cores []string
}

func batterySecrets(t *testing.T) []batterySecret {
	t.Helper()
	x, pq := testkit.Identity(t), testkit.HybridIdentity(t)
	sshKey, err := os.ReadFile("../../internal/envelope/testdata/keys/ssh_ed25519")
	if err != nil {
		t.Fatal(err)
	}
	sshLines := strings.Split(string(sshKey), "\n")
	const plugin = "AGE-PLUGIN-YUBIKEY-1QQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQ"
	const pass = "release-response-bright-wrist-olive-fever-thumb-glow-myth-copy"
	return []batterySecret{
		{"age X25519", x.String(), []string{x.String()[16:40]}},
		{"age post-quantum", pq.String(), []string{pq.String()[19:43]}},
		{"age plugin", plugin, []string{plugin[20:44]}},
		{"SSH private key", string(sshKey), []string{sshLines[1][:40], sshLines[2][:30]}},
		{"OpenSSH body alone", sshLines[1] + "\n" + sshLines[2], []string{sshLines[1][20:50], sshLines[2][:30]}},
		{"age passphrase", pass, []string{"bright-wrist-olive"}},
		{"URL password with a quote", `s3://AKIDUSER1:p4ss'w0rd"x@bucket/root?endpoint=http://127.0.0.1:1`, []string{`p4ss'w0rd"x`, "AKIDUSER1"}},
		{"URL password with spaces", "s3://AKIDUSER2:pa ss w0rd@bucket?endpoint=http://127.0.0.1:1", []string{"pa ss w0rd", "AKIDUSER2"}},
		{"endpoint password with a quote", `s3://bucket?endpoint=http://AKIDUSER3:s3cr'et%20pw@127.0.0.1:1`, []string{"s3cr'et", "AKIDUSER3"}},
	}
}

// forms are the ways a core may appear in output.
func forms(core string) []string {
	q := strconv.Quote(core)
	j, _ := json.Marshal(core)
	return []string{core, q[1 : len(q)-1], string(j[1 : len(j)-1]), url.QueryEscape(core), url.PathEscape(core), strings.ToLower(core)}
}

// TestSecrets_Battery_EveryKindInEveryFlagAndArgument_NeverPrinted gives
// a secret of every kind in every flag, argument, name and environment
// variable, with and without --json and --verbose, and checks stdout,
// stderr and the JSON document: no form of it is printed.
func TestSecrets_Battery_EveryKindInEveryFlagAndArgument_NeverPrinted(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 1, id)
	for _, s := range batterySecrets(t) {
		v := s.value
		places := map[string]struct {
			args []string
			env  []string
		}{
			"--url":                  {[]string{"ls", "--url", v}, nil},
			"--identity":             {[]string{"get", "obj/000", "--identity", v}, nil},
			"--recipient":            {[]string{"put", "obj/x", "--identity", id, "--recipient", v}, nil},
			"--stale-after":          {[]string{"lock", "status", "--stale-after", v}, nil},
			"--timeout":              {[]string{"ls", "--timeout", v}, nil},
			"--wait":                 {[]string{"put", "obj/x", "--identity", id, "--wait", v}, nil},
			"--if-version":           {[]string{"put", "obj/000", "--identity", id, "--if-version", v}, nil},
			"--old-identity":         {[]string{"rekey", "--identity", id, "--old-identity", v}, nil},
			"--recovery-identity":    {[]string{"verify", "--identity", id, "--recovery-identity", v}, nil},
			"--holder":               {[]string{"lock", "break", "--identity", id, "--holder", v}, nil},
			"keygen -o":              {[]string{"keygen", "-o", v}, nil},
			"an unknown flag":        {[]string{"ls", "--" + v}, nil},
			"an unknown value":       {[]string{"ls", "--all=" + v}, nil},
			"a command":              {[]string{v}, nil},
			"a subcommand":           {[]string{"lock", v}, nil},
			"help's command":         {[]string{"help", v}, nil},
			"get's name":             {[]string{"get", v, "--identity", id}, nil},
			"put's name":             {[]string{"put", v, "--identity", id}, nil},
			"put's name in a dir":    {[]string{"put", "app/" + v, "--identity", id}, nil},
			"put's file":             {[]string{"put", "obj/x", v, "--identity", id}, nil},
			"rm's name":              {[]string{"rm", v, "--identity", id}, nil},
			"ls's prefix":            {[]string{"ls", v + "/"}, nil},
			"CAIRN_STATE_URL":        {[]string{"ls"}, []string{"CAIRN_STATE_URL=" + v}},
			"CAIRN_STATE_IDENTITY":   {[]string{"get", "obj/000"}, []string{"CAIRN_STATE_IDENTITY=" + v}},
			"CAIRN_STATE_RECIPIENTS": {[]string{"put", "obj/x", "--identity", id}, []string{"CAIRN_STATE_RECIPIENTS=" + v}},
		}
		for place, c := range places {
			for _, extra := range [][]string{nil, {"--json"}, {"--verbose"}, {"--json", "--verbose"}} {
				args := append(slices.Clone(c.args), extra...)
				r := tg.cliEnv(t, []byte("value"), c.env, args...)
				out := r.stdout + r.stderr
				if strings.HasPrefix(place, "put") && r.code == exitOK {
					t.Errorf("%s as %s: the put succeeded", s.kind, place)
				}
				var doc any
				if hasFlag(args, "--json") && json.Unmarshal([]byte(r.stdout), &doc) == nil {
					out += fmt.Sprint(doc) // the document's strings, unescaped
				}
				for _, core := range s.cores {
					for _, f := range forms(core) {
						if strings.Contains(out, f) || strings.Contains(strings.ToLower(out), strings.ToLower(f)) && len(f) > 12 {
							t.Errorf("%s as %s %v: printed %q:\n%s", s.kind, place, extra, f, r)
						}
					}
				}
			}
		}
	}
	// Nothing of it was stored either: the only objects are the seeded one
	// and the store's own.
	for key := range rawSnapshot(t, tg) {
		if strings.Contains(key, "obj/x") || !strings.HasPrefix(key, store.Prefix) {
			t.Errorf("a refused command wrote %s", key)
		}
	}
}
