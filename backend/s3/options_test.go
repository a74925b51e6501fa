package s3_test

import (
	"fmt"
	"strings"
	"testing"

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
