package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestVersion_JSON_IsWhatTheToolchainRecordedInTheBinary runs the built
// binary and compares its report with `go version -m` of the same file.
func TestVersion_JSON_IsWhatTheToolchainRecordedInTheBinary(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	doc := decode[versionDoc](t, tg.cli(t, nil, "version", "--json").must(t, exitOK))
	out, err := exec.Command("go", "version", "-m", binPath).Output()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	goVersion, _, _ := strings.Cut(strings.TrimPrefix(string(out), binPath+": "), "\n")
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			recorded["module"], recorded["version"] = f[1], f[2]
		case len(f) >= 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			recorded[k] = v
		}
	}
	goenv := func(k string) string {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(v))
	}
	if doc.Module != "github.com/cairnhq/state" || doc.Module != recorded["module"] || doc.Version != recorded["version"] || doc.Version == "" {
		t.Errorf("module %s %s, recorded %s %s", doc.Module, doc.Version, recorded["module"], recorded["version"])
	}
	if doc.GoVersion != goVersion || doc.OS != goenv("GOOS") || doc.Arch != goenv("GOARCH") {
		t.Errorf("built with %s for %s/%s, recorded %s for %s/%s", doc.GoVersion, doc.OS, doc.Arch, goVersion, goenv("GOOS"), goenv("GOARCH"))
	}
	if rev := recorded["vcs.revision"]; rev == "" {
		// Built without VCS stamping (-buildvcs=false, no git, or a git
		// worktree, which cmd/go does not stamp): nothing to report.
		if doc.VCS != nil {
			t.Errorf("vcs %+v reported, none recorded", doc.VCS)
		}
		t.Logf("this build carries no VCS information; TestVersionOf covers its fields")
	} else if doc.VCS == nil || doc.VCS.Revision != rev || doc.VCS.Modified != (recorded["vcs.modified"] == "true") ||
		doc.VCS.Time.Format(time.RFC3339) != recorded["vcs.time"] {
		t.Errorf("vcs %+v, recorded %v", doc.VCS, recorded)
	}

	// The human form says the same.
	r := tg.cli(t, nil, "version").must(t, exitOK)
	if !strings.Contains(r.stdout, doc.Version) || !strings.Contains(r.stdout, doc.GoVersion) || !strings.Contains(r.stdout, doc.OS+"/"+doc.Arch) {
		t.Errorf("version:\n%s", r)
	}
}

func TestVersionOf_ReadsModuleVersionAndVCSSettings(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/cairnhq/state", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "47d6aae269dd6602e569d4597e4b40b8f21adc97"},
			{Key: "vcs.time", Value: "2026-11-30T06:30:06Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	doc := versionOf(bi)
	want := vcsDoc{System: "git", Revision: "47d6aae269dd6602e569d4597e4b40b8f21adc97", Time: time.Date(2026, 11, 30, 6, 30, 6, 0, time.UTC), Modified: true}
	if doc.Version != "v0.3.0" || doc.VCS == nil || *doc.VCS != want {
		t.Errorf("versionOf = %+v, vcs %+v", doc, doc.VCS)
	}
	if doc := versionOf(nil); doc.Version != "unknown" || doc.VCS != nil {
		t.Errorf("versionOf(nil) = %+v", doc)
	}
}
