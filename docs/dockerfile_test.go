package docs_test

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// dockerBuild is the build stage of the repository's Dockerfile: its ENV
// settings and the RUN line that runs go build.
func dockerBuild(t *testing.T) (env []string, build string, final string) {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stage := 0
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stage++
			if stage == 2 {
				final = f[1]
			}
		case "ENV":
			if stage == 1 {
				env = append(env, f[1:]...)
			}
		case "RUN":
			if stage == 1 && strings.Contains(line, "go build") {
				build = strings.TrimSpace(line[strings.Index(line, f[1]):])
			}
		}
	}
	if build == "" {
		t.Fatal("the Dockerfile's first stage has no RUN go build line")
	}
	return env, build, final
}

// The Dockerfile builds binaries that start on an image with no libc
// (distroless static, scratch): built here with its own command and
// environment, they have no program interpreter and no dynamic section,
// and record the build's CGO_ENABLED=0 and -trimpath.
func TestDockerfile_BuildsStaticBinaries(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux; this checks ELF binaries")
	}
	env, build, final := dockerBuild(t)
	if !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("the final stage is FROM %s, want a distroless static image (no libc)", final)
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("the build stage sets ENV %q, want CGO_ENABLED=0", env)
	}
	out := t.TempDir()
	cmdline := strings.ReplaceAll(build, "/out/", out+"/")
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	names := regexp.MustCompile(`\./(?:cmd|examples)/([a-z-]+)`).FindAllStringSubmatch(build, -1)
	if len(names) < 2 {
		t.Fatalf("the build line %q builds %d packages, want cmd/cairn-state and examples/instance", build, len(names))
	}
	for _, m := range names {
		bin := filepath.Join(out, m[1])
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s has a %v program header: it needs a dynamic loader and libc", m[1], p.Type)
			}
		}
		if s := f.Section(".dynamic"); s != nil {
			t.Errorf("%s has a .dynamic section", m[1])
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %q", m[1], libs)
		}
		f.Close()
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s was built with CGO_ENABLED=%q -trimpath=%q, want 0 and true", m[1], settings["CGO_ENABLED"], settings["-trimpath"])
		}
	}
}
