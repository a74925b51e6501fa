package s3_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/s3"
)

func TestParseURL_Valid(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want s3.Options
		root string
	}{
		{"s3://bucket", s3.Options{Bucket: "bucket", Conditional: s3.ConditionalAuto}, ""},
		{"s3://bucket/", s3.Options{Bucket: "bucket", Conditional: s3.ConditionalAuto}, ""},
		{"s3://bucket/apps/one/", s3.Options{Bucket: "bucket", Conditional: s3.ConditionalAuto}, "apps/one"},
		{
			"s3://state/root?endpoint=http://127.0.0.1:3900&region=garage&path_style=true&conditional=off",
			s3.Options{Bucket: "state", Endpoint: "http://127.0.0.1:3900", Region: "garage", PathStyle: true, Conditional: s3.ConditionalOff},
			"root",
		},
		// A custom endpoint defaults to path-style; it can be turned off.
		{"s3://b?endpoint=https://s3.example.com", s3.Options{Bucket: "b", Endpoint: "https://s3.example.com", PathStyle: true, Conditional: s3.ConditionalAuto}, ""},
		{"s3://b?endpoint=https://s3.example.com&path_style=false", s3.Options{Bucket: "b", Endpoint: "https://s3.example.com", Conditional: s3.ConditionalAuto}, ""},
		{"s3://b?conditional=on&region=eu-west-3", s3.Options{Bucket: "b", Region: "eu-west-3", Conditional: s3.ConditionalOn}, ""},
		// The scheme is case-insensitive.
		{"S3://b", s3.Options{Bucket: "b", Conditional: s3.ConditionalAuto}, ""},
		{"S3://b/root?endpoint=http://h:3900", s3.Options{Bucket: "b", Endpoint: "http://h:3900", PathStyle: true, Conditional: s3.ConditionalAuto}, "root"},
		// Several endpoints, comma-separated (ADR 0015).
		{
			"s3://b?endpoint=http://10.0.0.1:3900,http://10.0.0.2:3900,https://s3.example.com/garage",
			s3.Options{Bucket: "b", Endpoint: "http://10.0.0.1:3900,http://10.0.0.2:3900,https://s3.example.com/garage", PathStyle: true, Conditional: s3.ConditionalAuto},
			"",
		},
		{
			"s3://b?endpoint=" + url.QueryEscape("http://[::1]:3900,http://[::1]:3901"),
			s3.Options{Bucket: "b", Endpoint: "http://[::1]:3900,http://[::1]:3901", PathStyle: true, Conditional: s3.ConditionalAuto},
			"",
		},
		// Timeouts and retries (ADR 0016).
		{
			"s3://b?connect_timeout=2s&response_timeout=1500ms&attempt_timeout=1m&max_attempts=5&max_backoff=250ms",
			s3.Options{Bucket: "b", Conditional: s3.ConditionalAuto, ConnectTimeout: 2 * time.Second, ResponseTimeout: 1500 * time.Millisecond,
				AttemptTimeout: time.Minute, MaxAttempts: 5, MaxBackoff: 250 * time.Millisecond},
			"",
		},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			got, root, err := s3.ParseURL(tc.raw)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if got != tc.want || root != tc.root {
				t.Errorf("ParseURL = %+v, root %q\nwant       %+v, root %q", got, root, tc.want, tc.root)
			}
		})
	}
}

func TestParseURL_Invalid_RefusedWithReason(t *testing.T) {
	for _, tc := range []struct{ raw, why string }{
		{"file:///tmp/x", "scheme"},
		{"s3://", "no bucket"},
		{"s3:bucket", "no bucket"},
		{"s3://AKIA:secret@bucket", "credentials"},
		{"s3://bucket:9000", "port"},
		{"s3://bucket/a//b", "root prefix"},
		{"s3://bucket/a/../b", "root prefix"},
		{"s3://bucket?conditional=maybe", "auto, on or off"},
		{"s3://bucket?path_style=yes please", "path_style"},
		{"s3://bucket?endpoint=127.0.0.1:3900", "endpoint"},
		{"s3://bucket?endpiont=http://x", "unknown parameter"},
		{"s3://bucket?region=a&region=b", "2 times"},
		{"s3://bucket#frag", "fragment"},
		{"s3://bucket?endpoint=http://a:1,,http://b:1", "empty entry"},
		{"s3://bucket?endpoint=http://a:1,http://a:1", "listed twice"},
		{"s3://bucket?endpoint=http://a:1&endpoint=http://b:1", "2 times"},
		{"s3://bucket?endpoint=http://a:1,ftp://b:1", "endpoint"},
		{"s3://bucket?endpoint=http://a:1?x=1", "no query"},
		{"s3://bucket?connect_timeout=5", "positive duration"},
		{"s3://bucket?response_timeout=-1s", "positive duration"},
		{"s3://bucket?max_attempts=0", "positive integer"},
		{"s3://bucket?max_attempts=many", "positive integer"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			_, _, err := s3.ParseURL(tc.raw)
			if err == nil {
				t.Fatal("ParseURL accepted it")
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q does not say %q", err, tc.why)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

func TestParseConditionalMode(t *testing.T) {
	for in, want := range map[string]s3.ConditionalMode{"": s3.ConditionalAuto, "auto": s3.ConditionalAuto, "on": s3.ConditionalOn, "off": s3.ConditionalOff} {
		if got, err := s3.ParseConditionalMode(in); err != nil || got != want {
			t.Errorf("ParseConditionalMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := s3.ParseConditionalMode("ON"); err == nil {
		t.Error(`ParseConditionalMode("ON") succeeded; modes are lower case`)
	}
}

func ExampleParseURL() {
	opts, root, err := s3.ParseURL("s3://state/apps/wiki?endpoint=http://127.0.0.1:3900&region=garage")
	if err != nil {
		panic(err)
	}
	fmt.Println(opts.Bucket, opts.Endpoint, opts.Region, opts.PathStyle, opts.Conditional)
	fmt.Println("root:", root)
	// Output:
	// state http://127.0.0.1:3900 garage true auto
	// root: apps/wiki
}

// A secret pasted into the URL — as userinfo, in an endpoint, as the value
// of a parameter — never appears in the error, whatever else is wrong.
func TestParseURL_NeverEchoesASecret(t *testing.T) {
	const secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
	for _, raw := range []string{
		"s3://AKIAEXAMPLE:" + secret + "@bucket",
		"S3://AKIAEXAMPLE:" + secret + "@bucket/root?region=garage",
		"s3://" + secret + "@bucket",
		"s3://bucket?endpoint=http://AKIAEXAMPLE:" + secret + "@127.0.0.1:3900",
		"s3://bucket?endpoint=http://127.0.0.1:3900,http://AKIAEXAMPLE:" + secret + "@127.0.0.1:3901",
		"s3://bucket?endpoint=http://127.0.0.1:3900?key=" + secret,
		"s3://bucket?aws_secret_access_key=" + secret,
		"s3://bucket?secret=" + secret,
		"s3://bucket?" + secret + "=1",
		"s3://bucket?" + secret,
		"s3://bucket?regoin=" + secret,
		"s3://bucket?region=garage&token=" + secret + "&conditional=maybe",
		"s3://bucket?x=%zz" + secret,
		"s3://AKIAEXAMPLE:" + secret + "@bucket?endpiont=http://x",
		"s3://AKIAEXAMPLE:" + secret + "@bucket/a//b",
		"s3://AKIAEXAMPLE:" + secret + "@bucket:9000",
		"s3://AKIAEXAMPLE:" + secret + "@bucket#" + secret,
		"s3://AKIAEXAMPLE:" + secret + "@bucket%zz",
		"s3://bucket?max_attempts=" + secret,
	} {
		t.Run(strings.ReplaceAll(raw, secret, "SECRET"), func(t *testing.T) {
			_, _, err := s3.ParseURL(raw)
			if err == nil {
				t.Fatal("ParseURL accepted it")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error repeats the secret: %v", err)
			}
			if strings.Contains(err.Error(), url.QueryEscape(secret)) || strings.Contains(err.Error(), secret[:16]) {
				t.Errorf("the error repeats part of the secret: %v", err)
			}
		})
	}
}

// Options given in Go are checked the same way: an endpoint with
// credentials is refused without showing them.
func TestNew_EndpointWithCredentials_RefusedWithoutEchoingThem(t *testing.T) {
	const secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
	for _, ep := range []string{
		"http://AK:" + secret + "@127.0.0.1:3900",
		"http://127.0.0.1:3900,https://AK:" + secret + "@10.0.0.2",
	} {
		_, err := s3.NewBackend(t.Context(), s3.Options{Bucket: "b", Endpoint: ep})
		if err == nil {
			t.Fatalf("New accepted endpoint %q", strings.ReplaceAll(ep, secret, "SECRET"))
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "credentials") {
			t.Errorf("New(%q) = %v; want a refusal naming credentials, without the secret", strings.ReplaceAll(ep, secret, "SECRET"), err)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	got, err := s3.ParseEndpoints(" http://a:1 ,https://b/path,http://[::1]:3")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://a:1", "https://b/path", "http://[::1]:3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseEndpoints = %q, want %q", got, want)
	}
	if got, err := s3.ParseEndpoints(""); err != nil || got != nil {
		t.Errorf("ParseEndpoints(\"\") = %q, %v; want none (AWS)", got, err)
	}
}

// FuzzParseURL: no input panics, no error repeats a userinfo password, and
// an accepted URL's endpoints all parse.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"s3://bucket", "S3://b/r?endpoint=http://a:1,http://b:2&region=garage",
		"s3://u:p@b", "s3://b?endpoint=http://u:p@h", "s3://b?connect_timeout=1s&max_attempts=2",
		"s3://b?x=%zz", "s3://b/%zz", "s3://b?endpoint=,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		opts, _, err := s3.ParseURL(raw)
		if err != nil {
			u, perr := url.Parse(raw)
			if perr == nil && u.User != nil {
				if p, ok := u.User.Password(); ok && len(p) >= 8 && strings.Contains(err.Error(), p) {
					t.Fatalf("error repeats the URL's password %q: %v", p, err)
				}
			}
			return
		}
		if _, err := s3.ParseEndpoints(opts.Endpoint); err != nil {
			t.Fatalf("ParseURL accepted endpoint %q that ParseEndpoints refuses: %v", opts.Endpoint, err)
		}
	})
}

// The URL shown in an error keeps what helps (known parameters, endpoints
// without credentials) and hides what might be secret.
func TestParseURL_ErrorShowsTheURLRedacted(t *testing.T) {
	_, _, err := s3.ParseURL("s3://AK:pw@bucket/root?region=garage&endpoint=http://u:p@h:1&conditional=maybe")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"REDACTED@bucket/root", "region=garage", "endpoint=http://REDACTED@h:1", "conditional=maybe"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestParseURL_UnknownParameter_DidYouMean_ValueNotCalledASecret(t *testing.T) {
	for raw, want := range map[string]string{
		"s3://bucket?regoin=garage":                   `unknown parameter "regoin": did you mean "region"?`,
		"s3://bucket?endpiont=http://127.0.0.1:3900":  `unknown parameter "endpiont": did you mean "endpoint"?`,
		"s3://bucket?pathstyle=true":                  `unknown parameter "pathstyle": did you mean "path_style"?`,
		"s3://bucket?conditonal=on":                   `unknown parameter "conditonal": did you mean "conditional"?`,
		"s3://bucket?max_attempt=3":                   `unknown parameter "max_attempt": did you mean "max_attempts"?`,
		"s3://bucket?colour=blue":                     `unknown parameter "colour" (known: `,
		"s3://bucket?region=garage&x=1&regoin=garage": `did you mean "region"?`,
	} {
		_, _, err := s3.ParseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %v, want it to say %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "=REDACTED") {
			t.Errorf("ParseURL(%q): the value of a mistyped parameter is shown as a secret: %v", raw, err)
		}
	}
}
