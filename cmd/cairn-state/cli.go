package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/lock"
)

// Exit codes, as in the design ("The operator CLI").
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	exitHeld  = 3
)

// defaultStaleAfter is the lock's default stale window (the design's 5 min).
const defaultStaleAfter = 5 * time.Minute

// stdio is where a run reads and writes.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// app is one invocation of the CLI: its global options and its streams.
type app struct {
	stdio
	getenv func(string) string

	url         string
	identities  listFlag
	recipients  listFlag
	json        bool
	staleAfter  time.Duration
	verbose     bool
	interactive bool // stderr is a terminal: draw a progress bar
	allowUnauth bool // --allow-unauthenticated (get, rekey): the emergency recovery read

	logger  *slog.Logger
	emitted bool        // a JSON document has been written to stdout
	closers []io.Closer // backends to close when the command is done
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// reportedError is a failure whose details the command already printed (for
// example verify's per-object report): exit 1, a one-line summary on stderr
// and no second JSON document.
type reportedError struct{ msg string }

func (e *reportedError) Error() string { return e.msg }

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, lock.ErrHeld):
		return exitHeld
	default:
		return exitFail
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// command is one entry of the command table.
type command struct {
	name     string // "ls", "lock status"
	synopsis string // arguments, for the usage text
	summary  string
	run      func(ctx context.Context, a *app, args []string) error
}

func commands() []command {
	return []command{
		{"keygen", "[-o FILE]", "write a new X25519 identity (0600); print its recipient", runKeygen},
		{"ls", "[--all] [PREFIX]", "list state names with sealed size and modification time", runLs},
		{"get", "[--allow-unauthenticated] NAME", "decrypt one object to stdout", runGet},
		{"put", "NAME [FILE]", "seal and write one object (stdin when no FILE); takes the lock", runPut},
		{"rm", "NAME", "delete one object; takes the lock", runRm},
		{"verify", "", "open every object, report each one that fails and why", runVerify},
		{"rekey", "[--old-identity FILE]... [--allow-unauthenticated] [--restart]", "re-seal every object to the current recipients; takes the lock", runRekey},
		{"lock status", "", "holder, PID, heartbeat age, stale horizon, mode, epoch", runLockStatus},
		{"lock break", "[--holder ID] [--force]", "remove a stale lock; a live one only with --force and the matching --holder (an unreadable live one: --force alone)", runLockBreak},
		{"migrate status", "", "applied (and unfinished) migrations", runMigrateStatus},
	}
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, io stdio, getenv func(string) string) int {
	a := &app{stdio: io, getenv: getenv, staleAfter: defaultStaleAfter}
	a.interactive = isTerminal(io.err)
	err := a.dispatch(ctx, args)
	for _, c := range a.closers {
		_ = c.Close()
	}
	if errors.Is(err, errHelpShown) {
		return exitOK
	}
	if err != nil {
		a.fail(err)
	}
	return exitCode(err)
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	// Know about --json before parsing, so that even a usage error is
	// reported as a JSON document.
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" || arg == "-json" || arg == "--json=true" || arg == "-json=true" {
			a.json = true
		}
	}
	top := flag.NewFlagSet("cairn-state", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	a.globalFlags(top)
	help := top.Bool("help", false, "")
	top.BoolVar(help, "h", false, "")
	if err := top.Parse(args); err != nil {
		return usagef("%v", err)
	}
	rest := top.Args()
	if *help || (len(rest) > 0 && rest[0] == "help") {
		var text strings.Builder
		a.usage(&text)
		a.showHelp(text.String())
		return nil
	}
	if len(rest) == 0 {
		a.usage(a.err)
		return usagef("no command given")
	}
	name := rest[0]
	rest = rest[1:]
	if name == "lock" || name == "migrate" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usagef("%s: missing subcommand (%s)", name, subcommandsOf(name))
		}
		name += " " + rest[0]
		rest = rest[1:]
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, a, rest)
		}
	}
	return usagef("unknown command %q (run cairn-state help)", name)
}

func subcommandsOf(group string) string {
	var subs []string
	for _, c := range commands() {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			subs = append(subs, sub)
		}
	}
	return strings.Join(subs, ", ")
}

// showHelp prints help text on stdout; with --json, as the one document
// {"usage": text}.
func (a *app) showHelp(text string) {
	if a.json {
		a.emit(struct {
			Usage string `json:"usage"`
		}{text})
		return
	}
	fmt.Fprint(a.out, text)
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `Usage: cairn-state [global flags] COMMAND [flags] [args]

Global flags (also accepted after the command):
  --url URL          the store, or CAIRN_STATE_URL (file:///abs, file:rel, s3://BUCKET[/ROOT]?endpoint=...)
  --identity FILE    age identity file or SSH private key; repeatable, or CAIRN_STATE_IDENTITY
  --recipient R      extra recipient to seal to; repeatable, or CAIRN_STATE_RECIPIENTS
  --json             one JSON document on stdout
  --stale-after D    stale window used to judge the lock (default 5m)
  --verbose          log what the layers below do, on stderr

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimSpace(c.name+" "+c.synopsis), c.summary)
	}
	fmt.Fprint(w, `
Exit codes: 0 success, 1 failure, 2 usage error, 3 lock held by a live foreign instance.
`)
}

// globalFlags registers the global flags on fs. They are registered on every
// command's flag set too, so that they may follow the command.
func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "url", a.url, "")
	fs.Var(&a.identities, "identity", "")
	fs.Var(&a.recipients, "recipient", "")
	fs.BoolVar(&a.json, "json", a.json, "")
	fs.DurationVar(&a.staleAfter, "stale-after", a.staleAfter, "")
	fs.BoolVar(&a.verbose, "verbose", a.verbose, "")
}

// flags returns a flag set for one command, with the global flags on it.
func (a *app) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	return fs
}

// parse parses args with flags and positional arguments interleaved (flag
// stops at the first positional one otherwise); everything after "--" is
// positional. It checks the number of positional arguments.
func (a *app) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var tail []string
	for i, arg := range args {
		if arg == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			a.showHelp(fmt.Sprintf("usage: cairn-state %s\n  %s\n(cairn-state help lists the global flags)\n", synopsis(fs.Name()), summary(fs.Name())))
			return nil, errHelpShown
		} else if err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	pos = append(pos, tail...)
	switch {
	case len(pos) < minArgs:
		return nil, usagef("%s: missing argument (usage: cairn-state %s)", fs.Name(), synopsis(fs.Name()))
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, usagef("%s: too many arguments (usage: cairn-state %s)", fs.Name(), synopsis(fs.Name()))
	}
	a.setup()
	return pos, nil
}

// errHelpShown ends a run that printed a command's help: exit 0.
var errHelpShown = errors.New("help shown")

func summary(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return c.summary
		}
	}
	return ""
}

func synopsis(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return strings.TrimSpace(c.name + " " + c.synopsis)
		}
	}
	return name
}

// setup completes the global options once the command line is parsed:
// environment defaults and the logger.
func (a *app) setup() {
	// The environment is read as state.ConfigFromEnv reads it, so that the
	// CLI and the application agree on what a variable means.
	if a.url == "" {
		a.url = strings.TrimSpace(a.getenv(state.EnvURL))
	}
	if len(a.identities) == 0 {
		for _, p := range filepath.SplitList(a.getenv(state.EnvIdentity)) {
			if p = strings.TrimSpace(p); p != "" {
				a.identities = append(a.identities, p)
			}
		}
	}
	if len(a.recipients) == 0 {
		a.recipients = state.SplitRecipients(a.getenv(state.EnvRecipients))
	}
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	a.logger = slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level}))
}

// fail reports err: a line on stderr and, with --json, an error document on
// stdout unless the command already printed its own.
func (a *app) fail(err error) {
	var re *reportedError
	if errors.As(err, &re) {
		fmt.Fprintf(a.err, "cairn-state: %v\n", err)
		return
	}
	fmt.Fprintf(a.err, "cairn-state: %v\n", err)
	var held *lock.HeldError
	switch {
	case !errors.As(err, &held):
	case held.Unreadable != "":
		fmt.Fprintf(a.err, "hint: pass the identity the lock is sealed to (--identity FILE) to see who holds it, or wait until it is stale (in %s); if its holder is gone for good: cairn-state lock break --force (no --holder: it cannot be read)\n",
			ago(held.StaleIn))
	default:
		fmt.Fprintf(a.err, "hint: stop %q first, or wait until its lock is stale; if it is gone for good: cairn-state lock break --force --holder %q\n",
			held.Holder.InstanceID, held.Holder.InstanceID)
	}
	if !a.json || a.emitted {
		return
	}
	doc := errorDoc{Error: errorBody{Message: err.Error(), ExitCode: exitCode(err)}}
	if held != nil {
		if held.Unreadable != "" {
			doc.Error.Unreadable = held.Unreadable
		} else {
			h := holderOf(held.Holder)
			doc.Error.Holder = &h
		}
		doc.Error.HeartbeatAgeSeconds = seconds(held.HeartbeatAge)
		doc.Error.StaleInSeconds = seconds(held.StaleIn)
	}
	a.emit(doc)
}
