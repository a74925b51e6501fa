package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// versionDoc is what `cairn-state version` reports about this build.
type versionDoc struct {
	Module    string  `json:"module"`
	Version   string  `json:"version"` // "(devel)" for a build from a checkout
	GoVersion string  `json:"go_version"`
	OS        string  `json:"os"`
	Arch      string  `json:"arch"`
	VCS       *vcsDoc `json:"vcs,omitempty"` // absent when the build recorded none
}

type vcsDoc struct {
	System   string    `json:"system"`
	Revision string    `json:"revision"`
	Time     time.Time `json:"time,omitzero"`
	Modified bool      `json:"modified"` // the working tree had uncommitted changes
}

// buildVersion reads what the Go toolchain recorded in this binary.
func buildVersion() versionDoc {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf is the version document of a build's information (nil when
// the binary carries none).
func versionOf(bi *debug.BuildInfo) versionDoc {
	doc := versionDoc{Module: "github.com/cairnhq/state", Version: "unknown", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi == nil {
		return doc
	}
	if bi.GoVersion != "" {
		doc.GoVersion = bi.GoVersion
	}
	if bi.Main.Path != "" {
		doc.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		doc.Version = bi.Main.Version
	}
	var vcs vcsDoc
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			vcs.System = s.Value
		case "vcs.revision":
			vcs.Revision = s.Value
		case "vcs.time":
			vcs.Time, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			vcs.Modified, _ = strconv.ParseBool(s.Value)
		}
	}
	if vcs.System != "" || vcs.Revision != "" {
		doc.VCS = &vcs
	}
	return doc
}

// runVersion prints the module version and build information.
func runVersion(_ context.Context, a *app, args []string) error {
	fs := a.flags("version")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	doc := buildVersion()
	if a.json {
		a.emit(doc)
		return nil
	}
	a.printf("cairn-state %s (%s)\n", doc.Version, doc.Module)
	if v := doc.VCS; v != nil {
		dirty := ""
		if v.Modified {
			dirty = ", with uncommitted changes"
		}
		a.printf("%s revision %s, %s%s\n", v.System, v.Revision, timestamp(v.Time), dirty)
	}
	a.printf("built with %s for %s/%s\n", doc.GoVersion, doc.OS, doc.Arch)
	return nil
}
