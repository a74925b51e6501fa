package docs_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil/versitygw"
)

var update = flag.Bool("update", false, "rewrite the expected output of the docs' transcripts from what the built binaries print")

// A transcript is a fenced ```console block of README.md or docs/*.md:
// lines starting with "$ " are commands, the lines after a command are its
// output (stdout and stderr, as a terminal shows them). ADR 0038 describes
// the format, its directives and its placeholders.
type transcript struct {
	file       string
	line       int // the line of the opening fence, 1-based
	directives []string
	cmds       []command
	// first and end are the indexes of the block's content lines in the
	// file: lines[first:end] lie between the fences.
	first, end int
}

type command struct {
	lines []string // the command as written: "$ " line, continuations, here-document
	want  []string // the output the doc shows
}

// text is the command as the shell gets it.
func (c command) text() string {
	s := strings.Join(c.lines, "\n")
	return strings.TrimPrefix(s, "$ ")
}

func (c command) background() bool {
	return strings.HasSuffix(strings.TrimSpace(c.lines[0]), "&")
}

var (
	directiveRE = regexp.MustCompile(`^<!--\s*transcript:\s*(.*?)\s*-->$`)
	heredocRE   = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)
)

// parseTranscripts finds the console blocks of one markdown file.
func parseTranscripts(file string, lines []string) ([]transcript, error) {
	var out []transcript
	var pending []string
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if m := directiveRE.FindStringSubmatch(line); m != nil {
			pending = append(pending, m[1])
			continue
		}
		if !strings.HasPrefix(line, "```") {
			if line != "" {
				pending = nil
			}
			continue
		}
		info := strings.TrimSpace(strings.TrimPrefix(line, "```"))
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: a code block that never closes", file, i+1)
		}
		if info == "console" {
			tr := transcript{file: file, line: i + 1, directives: pending, first: i + 1, end: end}
			if err := tr.parse(lines[i+1 : end]); err != nil {
				return nil, err
			}
			out = append(out, tr)
		} else if info != "" || len(pending) > 0 {
			// A block that is not a transcript carries no directives, and
			// one that looks like a transcript must say so to be run.
			if len(pending) > 0 {
				return nil, fmt.Errorf("%s:%d: transcript directives before a ```%s block", file, i+1, info)
			}
		}
		if info != "console" {
			for _, l := range lines[i+1 : end] {
				if strings.HasPrefix(l, "$ ") && (info == "" || info == "sh" || info == "text") {
					return nil, fmt.Errorf("%s:%d: a ```%s block with a \"$ \" prompt: make it a ```console transcript (checked) or drop the prompt", file, i+1, info)
				}
			}
		}
		pending = nil
		i = end
	}
	return out, nil
}

func (tr *transcript) parse(body []string) error {
	for j := 0; j < len(body); j++ {
		l := body[j]
		if !strings.HasPrefix(l, "$ ") {
			if len(tr.cmds) == 0 {
				return fmt.Errorf("%s:%d: a transcript starts with output, not a \"$ \" command", tr.file, tr.line+1+j)
			}
			c := &tr.cmds[len(tr.cmds)-1]
			c.want = append(c.want, l)
			continue
		}
		c := command{lines: []string{l}}
		for strings.HasSuffix(c.lines[len(c.lines)-1], `\`) && j+1 < len(body) {
			j++
			c.lines = append(c.lines, body[j])
		}
		if m := heredocRE.FindStringSubmatch(strings.Join(c.lines, "\n")); m != nil {
			for {
				j++
				if j == len(body) {
					return fmt.Errorf("%s:%d: here-document %s never ends", tr.file, tr.line+1+j, m[1])
				}
				c.lines = append(c.lines, body[j])
				if strings.TrimSpace(body[j]) == m[1] {
					break
				}
			}
		}
		tr.cmds = append(tr.cmds, c)
	}
	if len(tr.cmds) == 0 {
		return fmt.Errorf("%s:%d: an empty transcript", tr.file, tr.line)
	}
	return nil
}

// Placeholders: where output truly varies from run to run, the doc writes
// one of these instead of the value. "…" is anything within a line; a line
// that is only "…" is any number of lines. <dir> and <host> stand for the
// session's directory and this machine's host name exactly.
var placeholders = map[string]string{
	"<recipient>": `age1[0-9a-z]+`,
	"<time>":      `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`,
	"<id>":        `[0-9a-f]{8,}`,
	"<uuid>":      `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"<pid>":       `\d+`,
	"<port>":      `\d+`,
	"<n>":         `\d+`,
	"<dur>":       `\d[\dhmsµnu.]*`,
	"…":           `[^\n]*?`,
}

var placeholderRE = func() *regexp.Regexp {
	var alts []string
	for p := range placeholders {
		alts = append(alts, regexp.QuoteMeta(p))
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}()

// linePattern is the regular expression for one expected line.
func linePattern(want string) string {
	want = strings.TrimRight(want, " \t")
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRE.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:loc[0]]))
		b.WriteString(placeholders[want[loc[0]:loc[1]]])
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(want[last:]))
	return b.String()
}

func outputPattern(want []string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A`)
	for _, w := range want {
		if strings.TrimSpace(w) == "…" {
			b.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		b.WriteString(linePattern(w))
		b.WriteString(`\n`)
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

func lineMatches(want, got string) bool {
	return regexp.MustCompile(`\A` + linePattern(want) + `\z`).MatchString(got)
}

// masks turn a value that varies from run to run into its placeholder when
// -update records new output.
var masks = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\bage1[0-9a-z]{50,}\b`), "<recipient>"},
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`\b[0-9a-f]{16,}\b`), "<id>"},
	{regexp.MustCompile(`\bpid \d+`), "pid <pid>"},
	{regexp.MustCompile(`\b127\.0\.0\.1:\d{5}\b`), "127.0.0.1:<port>"}, // a free port; the ports a doc names have 4 digits
	{regexp.MustCompile(`\b\d+(?:\.\d+)?(?:ns|µs|ms)\b`), "<dur>"},
	{regexp.MustCompile(`\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s ago\b`), "<dur> ago"},
	{regexp.MustCompile(`\(in (?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s\)`), "(in <dur>)"},
}

func mask(line string) string {
	for _, m := range masks {
		line = m.re.ReplaceAllString(line, m.repl)
	}
	return line
}

// rerecord is the expected output -update writes for got: the doc's own
// lines where they still match (keeping the writer's "…" and wording),
// masked output elsewhere.
func rerecord(want []string, got string) []string {
	if got == "" {
		return nil
	}
	var out []string
	j := 0
	for _, g := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		kept := false
		for k := j; k < len(want) && k < j+4; k++ {
			if strings.TrimSpace(want[k]) != "…" && lineMatches(want[k], g) {
				out, j, kept = append(out, want[k]), k+1, true
				break
			}
		}
		if !kept {
			out = append(out, mask(g))
		}
	}
	return out
}

// A session is one bash process that runs a transcript's commands one by
// one, in a directory of its own with the built binaries in bin/ and on
// PATH, keeping variables, the working directory and background jobs from
// one command to the next as an operator's terminal does.
type session struct {
	t     *testing.T // the running subtest
	once  sync.Once
	dir   string
	host  string
	ports map[string]string // the doc's port → the free port used here
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	cond  *sync.Cond
	buf   bytes.Buffer
	done  bool
	n     int
}

// newSession starts a session that lives as long as the test owner.
func newSession(owner *testing.T, extraPath []string, extraEnv []string) *session {
	t := owner
	t.Helper()
	s := &session{t: t, dir: t.TempDir(), ports: map[string]string{}}
	s.cond = sync.NewCond(&s.mu)
	s.host, _ = os.Hostname()
	bin := filepath.Join(s.dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cairn-state", "instance"} {
		if err := os.Symlink(filepath.Join(builtBin(t), name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	path := strings.Join(append(append([]string{bin}, extraPath...), os.Getenv("PATH")), string(os.PathListSeparator))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("bash", "--noprofile", "--norc", "/dev/fd/3")
	s.cmd.Dir = s.dir
	s.cmd.Env = append([]string{
		"PATH=" + path,
		"HOME=" + s.dir,
		"TMPDIR=" + s.dir,
		"TZ=UTC",
		"LC_ALL=C.UTF-8",
		"TERM=dumb",
		"AWS_EC2_METADATA_DISABLED=true", // no instance-metadata lookups from a doc
	}, extraEnv...)
	s.cmd.ExtraFiles = []*os.File{r}
	s.cmd.Stdout, s.cmd.Stderr = outW, outW
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	outW.Close()
	s.in = w
	go func() {
		p := make([]byte, 4096)
		for {
			n, err := out.Read(p)
			s.mu.Lock()
			s.buf.Write(p[:n])
			if err != nil {
				s.done = true
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			if err != nil {
				out.Close()
				return
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

// close ends the background jobs a transcript left running, then bash,
// then anything left in its process group.
func (s *session) close() { s.once.Do(s.stop) }

func (s *session) stop() {
	if s.in != nil {
		fmt.Fprintf(s.in, "\nkill $(jobs -p) 2>/dev/null; wait\nexit 0\n")
		s.in.Close()
		s.in = nil
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		s.t.Errorf("the transcript's shell did not exit 30s after its last command; killing it")
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// port maps a port a doc names to a free port on this machine, so that a
// transcript that starts a server on a fixed port runs beside other tests.
func (s *session) port(doc string) {
	s.ports[doc] = strconv.Itoa(testserver.FreePort(s.t))
}

func (s *session) toLocal(text string) string {
	for doc, local := range s.ports {
		text = regexp.MustCompile(`\b`+doc+`\b`).ReplaceAllString(text, local)
	}
	return text
}

func (s *session) toDoc(text string) string {
	for doc, local := range s.ports {
		text = regexp.MustCompile(`\b`+local+`\b`).ReplaceAllString(text, doc)
	}
	text = strings.ReplaceAll(text, s.dir, "<dir>")
	if s.host != "" {
		text = regexp.MustCompile(`\b`+regexp.QuoteMeta(s.host)+`\b`).ReplaceAllString(text, "<host>")
	}
	return text
}

const commandTimeout = 3 * time.Minute

// run sends one command and returns what it printed, in the doc's terms.
// For a command sent to the background it also waits until the output
// matches what the doc shows (the job keeps printing after the prompt
// returns), and until the session's mapped ports accept connections.
func (s *session) run(c command) (string, bool) {
	s.n++
	marker := fmt.Sprintf("\x1etranscript-%d\x1e\n", s.n)
	s.mu.Lock()
	start := s.buf.Len()
	s.mu.Unlock()
	if _, err := fmt.Fprintf(s.in, "%s\nprintf '\\036transcript-%d\\036\\n'\n", s.toLocal(c.text()), s.n); err != nil {
		s.t.Errorf("writing to the transcript's shell: %v", err)
		return "", false
	}
	deadline := time.Now().Add(commandTimeout)
	timer := time.AfterFunc(commandTimeout, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !bytes.Contains(s.buf.Bytes()[start:], []byte(marker)) {
		if s.done || time.Now().After(deadline) {
			return s.toDoc(string(s.buf.Bytes()[start:])), false
		}
		s.cond.Wait()
	}
	text := strings.Replace(string(s.buf.Bytes()[start:]), marker, "", 1)
	if c.background() {
		s.mu.Unlock()
		s.waitPorts()
		if len(c.want) > 0 {
			pat := outputPattern(c.want)
			wait := time.Now().Add(30 * time.Second)
			for time.Now().Before(wait) && !pat.MatchString(normalise(s.toDoc(s.since(start, marker)))) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		s.mu.Lock()
		text = strings.Replace(string(s.buf.Bytes()[start:]), marker, "", 1)
	}
	return s.toDoc(text), true
}

func (s *session) since(start int, marker string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Replace(string(s.buf.Bytes()[start:]), marker, "", 1)
}

func (s *session) waitPorts() {
	for doc, local := range s.ports {
		deadline := time.Now().Add(60 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+local, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				s.t.Errorf("port %s (the doc's %s) did not accept a connection within 60s: %v", local, doc, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// normalise gives output a trailing newline per line and no trailing blanks.
func normalise(out string) string {
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return ""
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n") + "\n"
}

// docFiles are the markdown files whose transcripts are checked.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md"}
	more, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

func TestTranscripts(t *testing.T) {
	for _, file := range docFiles(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		name := "docs/" + file
		if file == "../README.md" {
			name = "README.md"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t
			trs, err := parseTranscripts(file, lines)
			if err != nil {
				t.Fatal(err)
			}
			changed := false
			var s *session
			skipped := ""
			for i := range trs {
				tr := &trs[i]
				t.Run(fmt.Sprintf("line%d", tr.line), func(t *testing.T) {
					continues := slices.Contains(tr.directives, "continue")
					if continues && skipped != "" {
						t.Skip(skipped)
					}
					skipped = ""
					if reason := missingCommand(t, tr); reason != "" {
						skipped = reason
						t.Skip(reason)
					}
					if !continues || s == nil {
						if s != nil {
							s.close()
						}
						var reason string
						s, reason = startSession(parent, t, tr)
						if reason != "" {
							skipped, s = reason, nil
							t.Skip(reason)
						}
					}
					s.t = t
					if tr.runIn(t, s) {
						changed = true
					}
				})
			}
			if s != nil {
				s.close()
			}
			if changed {
				writeBack(t, file, lines, trs)
			}
		})
	}
}

// startSession reads the block's directives — "needs versitygw", "needs
// garage" (the server on PATH, or skip), "ports N…" (fixed ports the doc
// uses, mapped to free ones) — and starts a session for it.
func startSession(owner, t *testing.T, tr *transcript) (*session, string) {
	var extraPath, extraEnv, ports []string
	for _, d := range tr.directives {
		f := strings.Fields(d)
		switch {
		case len(f) == 1 && f[0] == "continue":
		case len(f) == 2 && f[0] == "needs" && f[1] == "versitygw":
			bin, err := testserver.FindBinary("VERSITYGW_BIN", "versitygw", testserver.CachePath("versitygw-"+versitygw.Version+"/bin/versitygw"))
			if err != nil {
				t.Fatal(err)
			}
			if bin == "" {
				testserver.RequireServer(t, "versitygw", versitygw.HowTo)
			}
			extraPath = append(extraPath, linkDir(owner, "versitygw", bin))
		case len(f) == 2 && f[0] == "needs" && f[1] == "garage":
			bin, err := garageserver.FindBinary()
			if err != nil {
				t.Fatal(err)
			}
			if bin == "" {
				testserver.RequireServer(t, "garage", garageserver.HowTo)
			}
			// scripts/install-garage.sh finds it in its cache.
			cache := owner.TempDir()
			if err := os.MkdirAll(filepath.Join(cache, "garage-"+garageserver.Version, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(bin, filepath.Join(cache, "garage-"+garageserver.Version, "bin", "garage")); err != nil {
				t.Fatal(err)
			}
			extraEnv = append(extraEnv, "CAIRN_CACHE="+cache)
		case len(f) == 3 && f[0] == "needs" && f[1] == "command":
			// missingCommand's
		case len(f) >= 2 && f[0] == "ports":
			ports = append(ports, f[1:]...)
		default:
			t.Fatalf("%s:%d: unknown transcript directive %q", tr.file, tr.line, d)
		}
	}
	s := newSession(owner, extraPath, extraEnv)
	s.t = t
	for _, p := range ports {
		s.port(p)
	}
	// The repository's scripts, for the recipes that run them.
	abs, err := filepath.Abs("../scripts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(s.dir, "scripts")); err != nil {
		t.Fatal(err)
	}
	return s, ""
}

// missingCommand says why the block cannot run yet when it needs a
// cairn-state command ("needs command NAME") that this build lacks: the
// docs are written for the CLI as it is about to be, and the block runs
// (and -update records it) once the command exists.
func missingCommand(t *testing.T, tr *transcript) string {
	for _, d := range tr.directives {
		f := strings.Fields(d)
		if len(f) == 3 && f[0] == "needs" && f[1] == "command" {
			if err := exec.Command(filepath.Join(builtBin(t), "cairn-state"), "help", f[2]).Run(); err != nil {
				return fmt.Sprintf("cairn-state has no %q command yet (help %s: %v); this transcript runs once it has", f[2], f[2], err)
			}
		}
	}
	return ""
}

// linkDir makes a directory holding only bin under name, for PATH.
func linkDir(t *testing.T, name, bin string) string {
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runIn runs the transcript's commands in s and compares, or with -update
// records, their output. It reports whether the expected output changed.
func (tr *transcript) runIn(t *testing.T, s *session) bool {
	changed := false
	for i := range tr.cmds {
		c := &tr.cmds[i]
		got, ok := s.run(*c)
		got = normalise(got)
		if !ok {
			t.Fatalf("%s:%d: %s\ndid not finish within %v; its output so far:\n%s", tr.file, tr.line, c.text(), commandTimeout, got)
		}
		if outputPattern(c.want).MatchString(got) {
			continue
		}
		if *update {
			c.want = rerecord(c.want, got)
			changed = true
			continue
		}
		t.Errorf("%s:%d: %s\nprinted:\n%s\nthe doc shows:\n%s\n(re-record with: go test ./docs -run TestTranscripts -update)",
			tr.file, tr.line, c.text(), indent(got), indent(strings.Join(c.want, "\n")))
	}
	return changed
}

func indent(s string) string {
	if s == "" {
		return "\t(nothing)"
	}
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// writeBack rewrites file with the transcripts' new expected output.
func writeBack(t *testing.T, file string, lines []string, trs []transcript) {
	var out []string
	last := 0
	for _, tr := range trs {
		out = append(out, lines[last:tr.first]...)
		for _, c := range tr.cmds {
			out = append(out, c.lines...)
			out = append(out, c.want...)
		}
		last = tr.end
	}
	out = append(out, lines[last:]...)
	if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("re-recorded %s", file)
}
