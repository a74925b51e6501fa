package state_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	state "github.com/cairnhq/state"
)

func TestOpenBackend_MustExist_MissingDirectory_ErrNoStoreAndCreatesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, u := range []string{"file:typo-dir", "FILE:typo-dir/nested"} {
		_, _, err := state.OpenBackend(context.Background(), u, state.BackendOptions{Logger: quiet(), MustExist: true})
		if !errors.Is(err, state.ErrNoStore) {
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
	if _, _, err := state.OpenBackend(context.Background(), "file:a-file", state.BackendOptions{Logger: quiet(), MustExist: true}); !errors.Is(err, state.ErrNoStore) {
		t.Errorf("file:a-file: err = %v, want ErrNoStore", err)
	}
	// An existing (empty) directory is a store, and the default creates.
	if err := os.Mkdir("empty", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := state.OpenBackend(context.Background(), "file:empty", state.BackendOptions{Logger: quiet(), MustExist: true}); err != nil {
		t.Errorf("existing directory: %v", err)
	}
	if _, _, err := state.OpenBackend(context.Background(), "file:new", state.BackendOptions{Logger: quiet()}); err != nil {
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
		b, _, err := state.OpenBackend(context.Background(), u, state.BackendOptions{Logger: quiet()})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if c, ok := b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// secretURLs are URLs with credentials in each place one can hide, with the
// substrings that must never be printed.
var secretURLs = []struct {
	name    string
	url     string
	secrets []string
}{
	{"userinfo", "s3://AKIDUSER:SECRETPASS@bucket?endpoint=http://127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"userinfo, upper-case scheme", "S3://AKIDUSER:SECRETPASS@bucket?endpoint=http://127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"user only", "s3://SECRETUSERONLY@bucket?endpoint=http://127.0.0.1:1", []string{"SECRETUSERONLY"}},
	{"endpoint userinfo", "s3://bucket?endpoint=http://AKIDUSER:SECRETPASS@127.0.0.1:1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"endpoint userinfo, encoded", "s3://bucket?endpoint=http%3A%2F%2FAKIDUSER%3ASECRETPASS%40127.0.0.1%3A1&region=x", []string{"AKIDUSER", "SECRETPASS"}},
	{"endpoint without scheme", "s3://bucket?endpoint=AKIDUSER:SECRETPASS@127.0.0.1:1", []string{"AKIDUSER", "SECRETPASS"}},
	{"query token", "s3://bucket?endpoint=http://127.0.0.1:1&region=x&X-Amz-Security-Token=SECRETTOKEN", []string{"SECRETTOKEN"}},
	{"query secret key", "s3://bucket?endpoint=http://127.0.0.1:1&aws_secret_access_key=SECRETPASS", []string{"SECRETPASS"}},
	{"file userinfo", "file://AKIDUSER:SECRETPASS@localhost/tmp/x", []string{"AKIDUSER", "SECRETPASS"}},
	{"unparsable", "s3://AKIDUSER:SECRETPASS@bucket/%zz?endpoint=http://127.0.0.1:1", []string{"AKIDUSER", "SECRETPASS"}},
	{"unknown scheme", "ftp://AKIDUSER:SECRETPASS@host/x", []string{"AKIDUSER", "SECRETPASS"}},
}

func TestRedactURL_HidesEveryCredential_KeepsTheRest(t *testing.T) {
	for _, c := range secretURLs {
		t.Run(c.name, func(t *testing.T) {
			got := state.RedactURL(c.url)
			for _, s := range c.secrets {
				if strings.Contains(got, s) {
					t.Errorf("RedactURL(%q) = %q still holds %q", c.url, got, s)
				}
			}
			if !strings.Contains(got, "REDACTED") {
				t.Errorf("RedactURL(%q) = %q does not say what it hid", c.url, got)
			}
			msg := state.RedactURLIn("failed: "+c.url+" (user "+c.secrets[0]+")", c.url)
			for _, s := range c.secrets {
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
		if got := state.RedactURL(in); got != want {
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
	for _, c := range secretURLs {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx, cancel := context.WithTimeout(context.Background(), 30e9)
			defer cancel()
			b, _, err := state.OpenBackend(ctx, c.url, state.BackendOptions{Logger: logger})
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
			for _, s := range c.secrets {
				if strings.Contains(out, s) {
					t.Errorf("%q printed:\n%s", s, out)
				}
			}
		})
	}
}

// FuzzRedactURL: RedactURL never panics, and the userinfo of an s3 URL or
// of its endpoint never survives it, whatever the credentials and the rest
// of the URL are.
func FuzzRedactURL(f *testing.F) {
	f.Add("AKID", "SECRET", "bucket/root", "endpoint=http://127.0.0.1:3900&region=garage")
	f.Add("a", "b", "b", "token=b")
	f.Add("AK%3AID", "SE%40CRET", "x", "endpoint=http%3A%2F%2FU%3AP%40host")
	f.Fuzz(func(t *testing.T, user, pass, path, query string) {
		for _, s := range []string{user, pass, path, query} {
			_ = state.RedactURL(s)
		}
		if user == "" || pass == "" || strings.ContainsAny(user+pass, "/?#@:\"' \t\n\r\v\f") {
			return
		}
		ui := user + ":" + pass
		for _, u := range []string{
			"s3://" + ui + "@" + path + "?" + query,
			"s3://bucket?endpoint=http://" + ui + "@host:1&" + query,
		} {
			if got := state.RedactURL(u); strings.Contains(got, ui) {
				t.Fatalf("RedactURL(%q) = %q keeps %q", u, got, ui)
			}
		}
	})
}
