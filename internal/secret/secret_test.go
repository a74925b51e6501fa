package secret

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"
)

// samples are one real secret of each kind, and the part of it that must
// never survive redaction.
type sample struct {
	kind   Kind
	secret string
	core   string // what must not be printed
}

func samples(t testing.TB) []sample {
	t.Helper()
	x, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(edKey, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPEM := string(pem.EncodeToMemory(block))
	body := strings.Join(strings.Split(strings.TrimSpace(sshPEM), "\n")[1:3], "\n")
	const plugin = "AGE-PLUGIN-YUBIKEY-1QQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZ"
	const pass = "release-response-bright-wrist-olive-fever-thumb-glow-myth-copy"
	return []sample{
		{AgeKey, x.String(), x.String()[len("AGE-SECRET-KEY-1"):][:20]},
		{AgeHybridKey, pq.String(), pq.String()[len("AGE-SECRET-KEY-PQ-1"):][:20]},
		{AgePluginKey, plugin, plugin[len("AGE-PLUGIN-YUBIKEY-1"):][:20]},
		{PrivateKey, sshPEM, strings.Split(sshPEM, "\n")[2]},
		{PrivateKey, body, strings.Split(body, "\n")[1]},
		{Passphrase, pass, "bright-wrist-olive"},
		{URLCredentials, "s3://AKIDUSER:p4ss'w0rd@bucket/root", "p4ss'w0rd"},
	}
}

// shapes are the ways a secret reaches a flag or a name.
var shapes = map[string]func(string) string{
	"exact":    func(s string) string { return s },
	"quoted":   func(s string) string { return `"` + s + `"` },
	"embedded": func(s string) string { return "my key: " + s + " (new)" },
	"spaced":   func(s string) string { return "  " + s + "\t" },
	"a flag":   func(s string) string { return "--" + s },
	"lower":    strings.ToLower,
}

func TestDetect_EverySecretKind_InEveryShape(t *testing.T) {
	for _, s := range samples(t) {
		for name, shape := range shapes {
			if name == "lower" && (s.kind == URLCredentials || s.kind == Passphrase || strings.Contains(s.secret, "b3BlbnNzaC1rZXktdjE")) {
				continue // case carries no meaning, or base64 whose case is its value
			}
			if got := Detect(shape(s.secret)); got != s.kind {
				t.Errorf("Detect(%s %s) = %q, want %q", name, s.kind, got, s.kind)
			}
		}
	}
}

func TestDetect_OrdinaryText_IsNoSecret(t *testing.T) {
	for _, s := range []string{
		"", "app/db-password", "settings/theme", "legacy/a/b.json", "30s", "5m",
		"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpuRMhFcY9bfXAmZ4OHMYGh8aTv1bSZs1iA alice@host",
		"s3://bucket/root?endpoint=http://127.0.0.1:3900&region=garage",
		"file:///var/lib/app/state", "file:state",
		`state lock held by "cairn-state@host" (pid 12 on host)`,
		"expected age-keygen output (AGE-SECRET-KEY-1… lines)",
		"one-two-three-four-five-six-seven-eight-nine", // nine words
		"one-two-three-four-five-six-seven-eight-nine-ten-eleven",
		"2a1b3c4d-0000-4000-8000-123456789abc",
		"notes/my private key", // words, not a key
	} {
		if k := Detect(s); k != "" {
			t.Errorf("Detect(%q) = %q, want none", s, k)
		}
		if got := Redact(s); got != s {
			t.Errorf("Redact(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestRedact_HidesEveryKind_KeepsTheText(t *testing.T) {
	for _, s := range samples(t) {
		for name, shape := range shapes {
			if name == "lower" {
				continue
			}
			in := "before " + shape(s.secret) + " after"
			got := Redact(in)
			if strings.Contains(got, s.core) {
				t.Errorf("Redact(%s %s) kept %q: %q", name, s.kind, s.core, got)
			}
			if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") || !strings.Contains(got, Placeholder) {
				t.Errorf("Redact(%s %s) = %q: want the text around it kept and %s in its place", name, s.kind, got, Placeholder)
			}
		}
	}
}

func TestRedactor_URLCredentials_AnyCharacter_ExactlyAndNothingMore(t *testing.T) {
	for _, c := range []struct {
		url, msg, want string
	}{
		// Quotes and whitespace in a password, in the URL and in a message
		// quoting it with %q.
		{`s3://AK:p4ss'w0rd@bucket/x`, `s3://AK:p4ss'w0rd@bucket/x`, `s3://REDACTED@bucket/x`},
		{`s3://AK:pa ss"w@bucket`, `bad URL "s3://AK:pa ss\"w@bucket": no`, `bad URL "s3://REDACTED@bucket": no`},
		{"s3://AK:tab\there@bucket", "s3://AK:tab\there@bucket", "s3://REDACTED@bucket"},
		// One-letter user names are hidden where they stand, not
		// everywhere.
		{"s3://b:SECRETPASS@bucket/root", "s3://b:SECRETPASS@bucket/root: bucket b", "s3://REDACTED@bucket/root: bucket b"},
		{"s3://u@bucket", "s3://u@bucket (user u)", "s3://REDACTED@bucket (user u)"},
		// A long password alone is hidden too.
		{"s3://b?endpoint=http://AK:SECRETPASS@h:1", "auth failed for SECRETPASS", "auth failed for REDACTED"},
		// '@' and ':' inside the userinfo: up to the last '@'.
		{"s3://a@b:c:d@bucket", "s3://a@b:c:d@bucket", "s3://REDACTED@bucket"},
		// Percent-encoded.
		{"s3://b?endpoint=http%3A%2F%2FU%3AP%40host", "s3://b?endpoint=http%3A%2F%2FU%3AP%40host", "s3://b?endpoint=http%3A%2F%2FREDACTED%40host"},
		{"s3://b?endpoint=http://U:P@host", "endpoint http://U:P@host", "endpoint http://REDACTED@host"},
		// A short secret parameter.
		{"s3://b?token=x&region=y", "s3://b?token=x&region=y", "s3://b?token=REDACTED&region=y"},
		// Nothing to hide.
		{"s3://bucket/root?region=b", "s3://bucket/root?region=b", "s3://bucket/root?region=b"},
	} {
		if got := NewRedactor(c.url).Redact(c.msg); got != c.want {
			t.Errorf("NewRedactor(%q).Redact(%q) = %q, want %q", c.url, c.msg, got, c.want)
		}
	}
}

func TestRedactor_AWholeValueThatIsASecret_HiddenWhole(t *testing.T) {
	// A mangled private key (no armour Redact could find on its own) given
	// as an argument is hidden whole wherever it is echoed.
	v := "PRIVATE KEY----- zzzzzzzzzzzzzzzzzzzzzzzzzzzz"
	got := NewRedactor("--timeout", v).Redact(`invalid value "` + v + `" for flag -timeout`)
	if strings.Contains(got, "zzzz") {
		t.Errorf("kept the value: %q", got)
	}
}

// FuzzRedact: a secret of any kind, planted in any text, never survives
// Redact, and Redact never panics.
func FuzzRedact(f *testing.F) {
	f.Add("before ", " after", 0)
	f.Add("", "", 3)
	f.Add("\"", "\\\"", 6)
	ss := samples(f)
	f.Fuzz(func(t *testing.T, prefix, suffix string, which int) {
		_ = Redact(prefix + suffix)
		s := ss[uint(which)%uint(len(ss))]
		if s.kind == Passphrase {
			// A passphrase is known by its shape: words before or after
			// it make another shape. Keep them apart.
			prefix, suffix = prefix+" ", " "+suffix
		}
		if s.kind == URLCredentials {
			// The free-text scan ends a URL's authority at whitespace or
			// '"'; a known URL's credentials are exact (FuzzRedactURL).
			prefix, suffix = prefix+" ", " "+suffix
		}
		got := Redact(prefix + s.secret + suffix)
		if strings.Contains(strings.ReplaceAll(got, Placeholder, "\x00"), s.core) && !strings.Contains(prefix+suffix, s.core) {
			t.Fatalf("Redact kept %q of %s: %q", s.core, s.kind, got)
		}
	})
}
