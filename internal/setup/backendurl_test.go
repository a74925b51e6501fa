package setup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/testkit"
)

func TestOpenBackend_MustExist_MissingDirectory_ErrNoStoreAndCreatesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{"file:typo-dir", "FILE:typo-dir/nested"} {
		_, _, err := setup.OpenBackend(context.Background(), u, setup.BackendOptions{Logger: quiet(), MustExist: true})
		if !errors.Is(err, setup.ErrNoStore) {
			t.Fatalf("%s: err = %v, want ErrNoStore", u, err)
		}
		abs, _ := filepath.Abs("typo-dir")
		if !strings.Contains(err.Error(), "no state store at "+abs) {
			t.Errorf("%s: error does not name the directory: %v", u, err)
		}
		if _, err := os.Stat("typo-dir"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: MustExist created the directory (stat: %v)", u, err)
		}
	}
	// A file where the directory should be is no store either.
	if err := os.WriteFile("a-file", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := setup.OpenBackend(context.Background(), "file:a-file", setup.BackendOptions{Logger: quiet(), MustExist: true}); !errors.Is(err, setup.ErrNoStore) {
		t.Errorf("file:a-file: err = %v, want ErrNoStore", err)
	}
	// An existing (empty) directory is a store, and the default creates.
	if err := os.Mkdir("empty", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := setup.OpenBackend(context.Background(), "file:empty", setup.BackendOptions{Logger: quiet(), MustExist: true}); err != nil {
		t.Errorf("existing directory: %v", err)
	}
	if _, _, err := setup.OpenBackend(context.Background(), "file:new", setup.BackendOptions{Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat("new"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the default did not create the directory 0700: %v %v", fi, err)
	}
}

func TestOpenBackend_S3SchemeIsCaseInsensitive(t *testing.T) {
	// conditional=off: no probe, so no server is needed to get past the
	// scheme.
	for _, u := range []string{"S3://bucket?endpoint=http://127.0.0.1:1&region=x&conditional=off", "s3://bucket?endpoint=http://127.0.0.1:1&region=x&conditional=off"} {
		b, _, err := setup.OpenBackend(context.Background(), u, setup.BackendOptions{Logger: quiet()})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if c, ok := b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

func TestRedactURL_HidesEveryCredential_KeepsTheRest(t *testing.T) {
	for _, c := range testkit.SecretURLs {
		t.Run(c.Name, func(t *testing.T) {
			got := setup.RedactURL(c.URL)
			for _, s := range c.Secrets {
				if strings.Contains(got, s) {
					t.Errorf("RedactURL(%q) = %q still holds %q", c.URL, got, s)
				}
			}
			if !strings.Contains(got, "REDACTED") {
				t.Errorf("RedactURL(%q) = %q does not say what it hid", c.URL, got)
			}
			msg := setup.RedactURLIn("failed: "+c.URL+" (user "+c.Secrets[0]+")", c.URL)
			for _, s := range c.Secrets {
				if strings.Contains(msg, s) {
					t.Errorf("RedactURLIn: %q still holds %q", msg, s)
				}
			}
		})
	}
	for in, want := range map[string]string{
		"s3://bucket/root?endpoint=http://127.0.0.1:3900&region=garage": "s3://bucket/root?endpoint=http://127.0.0.1:3900&region=garage",
		"file:///var/lib/app/state":                                     "file:///var/lib/app/state",
		"s3://AKID:SECRET@bucket/root?region=garage":                    "s3://REDACTED@bucket/root?region=garage",
		"s3://b?endpoint=http://AKID:SECRET@host:3900&region=garage":    "s3://b?endpoint=http://REDACTED@host:3900&region=garage",
		"s3://b?token=SECRET&region=garage":                             "s3://b?token=REDACTED&region=garage",
	} {
		if got := setup.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenBackend_CredentialsInURL_NeverInErrorsOrLogs(t *testing.T) {
	// Credentials from the environment make the S3 client reach the
	// (closed) endpoint, so that the probe fails and warns.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, c := range testkit.SecretURLs {
		t.Run(c.Name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx, cancel := context.WithTimeout(context.Background(), 30e9)
			defer cancel()
			b, _, err := setup.OpenBackend(ctx, c.URL, setup.BackendOptions{Logger: logger})
			if err == nil {
				if c, ok := b.(interface{ Close() error }); ok {
					c.Close()
				}
				t.Logf("opened (no error to check)")
			}
			out := logs.String()
			if err != nil {
				out += err.Error()
			}
			for _, s := range c.Secrets {
				if strings.Contains(out, s) {
					t.Errorf("%q printed:\n%s", s, out)
				}
			}
		})
	}
}

func TestRedactURL_QuotesWhitespaceAndOneLetterUsers(t *testing.T) {
	for in, want := range map[string]string{
		// Every character a userinfo can hold, as typed.
		`s3://AK:p4ss'w0rd@bucket/root?region=x`:   `s3://REDACTED@bucket/root?region=x`,
		`s3://AK:p4ss"w0rd@bucket/root`:            `s3://REDACTED@bucket/root`,
		"s3://AK:pa ss w0rd@bucket/root":           "s3://REDACTED@bucket/root",
		"s3://AK:tab\there@bucket":                 "s3://REDACTED@bucket",
		"s3://b?endpoint=http://AK:p'w%20x@host:1": "s3://b?endpoint=http://REDACTED@host:1",
		// A one-letter user is hidden where it stands, not everywhere.
		"s3://b:SECRET@bucket/root": "s3://REDACTED@bucket/root",
		"s3://u@bucket":             "s3://REDACTED@bucket",
		"s3://u:p@bucket?region=u":  "s3://REDACTED@bucket?region=u",
		"s3://bucket/root?region=b": "s3://bucket/root?region=b",
	} {
		if got := setup.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	// A message quoting the URL with %q: the quote escaped in the password.
	u := `s3://AK:p4ss"w0rd@bucket`
	if got := setup.RedactURLIn(fmt.Sprintf("bad URL %q", u), u); strings.Contains(got, "p4ss") {
		t.Errorf("RedactURLIn kept the password: %s", got)
	}
}

// FuzzRedactURL: RedactURL never panics, and whatever the user name and
// password hold, the userinfo of an s3 URL or of its endpoint does not
// survive it: the authority of the result holds no userinfo but REDACTED,
// and neither the user nor the password appears in it (once four
// characters long: shorter ones are hidden only where they stand).
func FuzzRedactURL(f *testing.F) {
	f.Add("AKID", "SECRET", "bucket/root", "endpoint=http://127.0.0.1:3900&region=garage")
	f.Add("a", "b", "b", "token=b")
	f.Add("AK%3AID", "SE%40CRET", "x", "endpoint=http%3A%2F%2FU%3AP%40host")
	f.Add("AK", "p4ss'w0rd", "bucket", "region=x")
	f.Add("AK", "pa ss\"w", "bucket", "")
	f.Add("a/b", "c?d#e", "bucket", "")
	f.Add("a@b", "c:d", "b@x", "")
	f.Fuzz(func(t *testing.T, user, pass, path, query string) {
		for _, s := range []string{user, pass, path, query} {
			_ = setup.RedactURL(s)
		}
		if user == "" || pass == "" {
			return
		}
		// As typed, but for the three characters that end an authority,
		// which a userinfo can only hold encoded; and fully encoded.
		raw := strings.NewReplacer("/", "%2F", "?", "%3F", "#", "%23").Replace(user + ":" + pass)
		for _, ui := range []string{raw, url.UserPassword(user, pass).String()} {
			u := "s3://" + ui + "@" + path + "?" + query
			got := setup.RedactURL(u)
			if info := userinfoOf(got); info != "" && info != "REDACTED" {
				t.Fatalf("RedactURL(%q) = %q: userinfo %q", u, got, info)
			}
			mustHide(t, u, got, user, pass, ui)
		}
		endpoint := "http://" + url.UserPassword(user, pass).String() + "@host:1"
		u := "s3://bucket?endpoint=" + url.QueryEscape(endpoint) + "&" + query
		got := setup.RedactURL(u)
		mustHide(t, u, got, user, pass, url.QueryEscape(url.UserPassword(user, pass).String()))
	})
}

// userinfoOf is the userinfo of the authority of s, split as a URL parser
// splits it: from "://" to the last '@' before '/', '?' or '#'.
func userinfoOf(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return rest[:at]
	}
	return ""
}

// mustHide fails if got (REDACTED masked out) holds any of secrets that is
// at least four bytes long and was not already in what u holds around the
// userinfo.
func mustHide(t *testing.T, u, got string, secrets ...string) {
	t.Helper()
	mask := "\x00"
	for _, r := range "\x00\x01\x02\x03" {
		if !strings.ContainsRune(strings.Join(secrets, ""), r) {
			mask = string(r)
			break
		}
	}
	masked := strings.ReplaceAll(got, "REDACTED", mask)
	for _, s := range secrets {
		if len(s) >= 4 && strings.Contains(masked, s) {
			t.Fatalf("RedactURL(%q) = %q keeps %q", u, got, s)
		}
	}
}

func TestOpenBackend_Tilde_RefusedWithAHint_CreatingNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{"file:~/state", "FILE:~/state", "~/state", "file:~", "~other/state"} {
		for _, mustExist := range []bool{false, true} {
			_, _, err := setup.OpenBackend(context.Background(), u, setup.BackendOptions{Logger: quiet(), MustExist: mustExist})
			if !errors.Is(err, setup.ErrBadURL) || !strings.Contains(err.Error(), "not expanded") || !strings.Contains(err.Error(), "$HOME") {
				t.Errorf("%s: %v, want ErrBadURL saying ~ is not expanded and what to give instead", u, err)
			}
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("a refused ~ URL created %v", entries)
	}
}

func TestOpenBackend_BarePath_IsALocalDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	abs := filepath.Join(t.TempDir(), "abs-state")
	for _, u := range []string{"state", "./nested/state", abs} {
		b, root, err := setup.OpenBackend(context.Background(), u, setup.BackendOptions{Logger: quiet()})
		if err != nil || root != "" {
			t.Fatalf("%s: %v (root %q)", u, err, root)
		}
		if fi, err := os.Stat(u); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory store: %v", u, err)
		}
		if c, ok := b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	// A scheme-like prefix is still a scheme.
	if _, _, err := setup.OpenBackend(context.Background(), "st:ate", setup.BackendOptions{Logger: quiet()}); !errors.Is(err, setup.ErrBadURL) {
		t.Errorf("st:ate: %v, want ErrBadURL", err)
	}
}
