package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Exit codes, as in the design ("The operator CLI").
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	exitHeld  = 3
	// exitNotMember: the identity does not belong to this store.
	exitNotMember = 5
)

// exitCodes are the exit codes as `cairn-state help` lists them: the CLI's,
// and those of the example application that share their numbering.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{0, "success (lock status: whether or not the lock is held; help)"},
	{1, "failure: I/O, a missing object, a wrong key, verify found bad objects, an interrupted rekey, no answer within --timeout, doctor found the store unusable"},
	{2, "usage error: unknown command or flag, wrong arguments, an invalid state name, a bad --recipient, no --url, no identity"},
	{3, "the lock is held by a live instance (a refused write or lock break)"},
	{4, "reserved: the example application lost its lock while serving"},
	{5, "the identity does not belong to this store (it cannot open .cairn-state/.store)"},
}

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

	url           string
	identities    listFlag
	recipients    listFlag
	json          bool
	staleAfter    time.Duration
	verbose       bool
	interactive   bool          // stderr is a terminal: draw a progress bar
	allowUnauth   bool          // --allow-unauthenticated (get, rekey): the emergency recovery read
	recoveryFiles listFlag      // --recovery-identity (get, rekey, verify)
	write         bool          // the command writes: it may create the store's manifest (put, rm)
	quietDiff     bool          // the recipient difference was reported
	wait          time.Duration // --wait (put, rm, rekey): how long to wait for a held lock
	mayCreate     bool          // the command may create a missing file: store (put)

	timeout time.Duration // --timeout: how long a command waits on storage that does not answer

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

// wordedError is an error with the CLI's own message that still unwraps
// to its cause (errors.Is, errors.As): for causes whose text would only
// repeat what the message says.
type wordedError struct {
	msg string
	err error
}

func (e *wordedError) Error() string { return e.msg }
func (e *wordedError) Unwrap() error { return e.err }

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
	case errors.Is(err, store.ErrNotMember):
		return exitNotMember
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
	example  string // shell lines, each shown after "$ "
	run      func(ctx context.Context, a *app, args []string) error
}

func commands() []command {
	return []command{
		{"keygen", "[-o FILE]", "write a new X25519 identity (0600); print its recipient",
			"cairn-state keygen -o identity.txt", runKeygen},
		{"ls", "[--all] [PREFIX]", "list state names with sealed size and modification time",
			"cairn-state ls app/", runLs},
		{"get", "[--recovery-identity FILE --allow-unauthenticated] NAME", "decrypt one object to stdout",
			"cairn-state get app/db-password > db-password.txt", runGet},
		{"put", "[--wait DURATION] NAME [FILE]", "seal and write one object (stdin when no FILE); takes the lock",
			"echo hunter2 | cairn-state put app/db-password\ncairn-state put --wait 2m app/config config.json", runPut},
		{"rm", "[--wait DURATION] NAME", "delete one object; takes the lock",
			"cairn-state rm app/old-token", runRm},
		{"verify", "[--recovery-identity FILE]", "check the store's manifest and open every object: report each one that fails and why, legacy ones and ones sealed outside the store's recipients; prove a recovery key reads everything with stock age",
			"cairn-state verify --json\ncairn-state verify --recovery-identity recovery.txt", runVerify},
		{"rekey", "[--old-identity FILE]... [--recovery-identity FILE --allow-unauthenticated [--yes]] [--restart] [--wait DURATION]", "move the store and every object to the current recipients; afterwards the old keys are refused; takes the lock",
			"cairn-state keygen -o new.txt && cairn-state rekey --identity new.txt --old-identity identity.txt", runRekey},
		{"lock status", "", "holder, PID, heartbeat age, stale horizon, mode, epoch",
			"cairn-state lock status --json", runLockStatus},
		{"lock break", "[--holder ID] [--force]", "remove a stale lock; a live one only with --force and the matching --holder (an unreadable live one: --force alone)",
			"cairn-state lock break --force --holder pod-a", runLockBreak},
		{"migrate status", "", "applied (and unfinished) migrations",
			"cairn-state migrate status", runMigrateStatus},
		{"doctor", "", "check the store end to end, one line per check (ok, warn, fail) with what to do; on S3 it writes and removes one probe object; exit 1 when the store is not usable",
			"cairn-state doctor\ncairn-state doctor --json --timeout 10s", runDoctor},
		{"version", "", "the module version, VCS revision, Go version and platform of this build",
			"cairn-state version --json", runVersion},
	}
}

// groups are the commands that only name a family of subcommands.
var groups = map[string]string{
	"lock":    "show or break the instance lock",
	"migrate": "inspect the migration log",
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, io stdio, getenv func(string) string) int {
	a := &app{stdio: io, getenv: getenv, staleAfter: defaultStaleAfter, timeout: defaultTimeout}
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
		return usagef("%v (cairn-state help lists the commands and global flags)", err)
	}
	rest := top.Args()
	if *help {
		rest = append([]string{"help"}, rest...)
	}
	if len(rest) == 0 {
		a.usage(a.err)
		return usagef("no command given")
	}
	name := rest[0]
	rest = rest[1:]
	if name == "help" {
		return a.help(ctx, rest)
	}
	if _, ok := groups[name]; ok {
		if len(rest) > 0 && isHelp(rest[0]) {
			a.showHelp(groupHelp(name))
			return nil
		}
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usagef("%s: missing subcommand (%s; cairn-state %s -h)", name, subcommandsOf(name), name)
		}
		name += " " + rest[0]
		rest = rest[1:]
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, a, rest)
		}
	}
	if group, _, ok := strings.Cut(name, " "); ok {
		return usagef("unknown command %q: %s has %s (cairn-state %s -h)", name, group, subcommandsOf(group), group)
	}
	return usagef("unknown command %q (cairn-state help lists the commands)", name)
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

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help", "help":
		return true
	}
	return false
}

// help runs `cairn-state help [COMMAND]`: the overview, a group's
// subcommands, or a command's own help.
func (a *app) help(ctx context.Context, args []string) error {
	var words []string
	for _, arg := range args {
		if !strings.HasPrefix(arg, "-") {
			words = append(words, arg)
		}
	}
	switch {
	case len(words) == 0:
		var text strings.Builder
		a.usage(&text)
		a.showHelp(text.String())
		return nil
	case len(words) == 1 && groups[words[0]] != "":
		a.showHelp(groupHelp(words[0]))
		return nil
	}
	name := strings.Join(words, " ")
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, a, []string{"-h"})
		}
	}
	return usagef("help: unknown command %q (cairn-state help lists the commands)", name)
}

func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: cairn-state %s SUBCOMMAND [flags]\n\n%s.\n\nSubcommands:\n", group, capitalize(groups[group]))
	for _, c := range commands() {
		if strings.HasPrefix(c.name, group+" ") {
			printEntry(&b, strings.TrimSpace(c.name+" "+c.synopsis), c.summary)
		}
	}
	fmt.Fprintf(&b, "\nRun cairn-state %s SUBCOMMAND -h for its flags and an example.\n", group)
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
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
	fmt.Fprint(w, "Usage: cairn-state [global flags] COMMAND [flags] [args]\n\nGlobal flags (also accepted after the command):\n")
	fs := flag.NewFlagSet("global", flag.ContinueOnError)
	(&app{staleAfter: defaultStaleAfter, timeout: defaultTimeout}).globalFlags(fs)
	printFlags(w, fs, nil)
	fmt.Fprint(w, "\nCommands:\n")
	for _, c := range commands() {
		printEntry(w, strings.TrimSpace(c.name+" "+c.synopsis), c.summary)
	}
	fmt.Fprint(w, "\nRun cairn-state COMMAND -h (or cairn-state help COMMAND) for a command's flags and an example.\n\nExit codes:\n")
	for _, e := range exitCodes {
		printEntryAt(w, 5, strconv.Itoa(e.code), e.meaning)
	}
}

// commandHelp is the help of one command: synopsis, flags, global flags
// and an example.
func commandHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	name := fs.Name()
	fmt.Fprintf(&b, "Usage: cairn-state %s\n\n%s.\n", synopsis(name), capitalize(summary(name)))
	global := flag.NewFlagSet("global", flag.ContinueOnError)
	(&app{staleAfter: defaultStaleAfter, timeout: defaultTimeout}).globalFlags(global)
	isGlobal := func(f *flag.Flag) bool { return global.Lookup(f.Name) != nil }
	own := false
	fs.VisitAll(func(f *flag.Flag) { own = own || !isGlobal(f) })
	if own {
		b.WriteString("\nFlags:\n")
		printFlags(&b, fs, func(f *flag.Flag) bool { return !isGlobal(f) })
	}
	b.WriteString("\nGlobal flags:\n")
	printFlags(&b, global, nil)
	if ex := example(name); ex != "" {
		b.WriteString("\nExample:\n")
		for line := range strings.SplitSeq(ex, "\n") {
			fmt.Fprintf(&b, "  $ %s\n", line)
		}
	}
	return b.String()
}

// printFlags writes each flag of fs that keep accepts (all when nil): the
// flag, its argument and its sentence.
func printFlags(w io.Writer, fs *flag.FlagSet, keep func(*flag.Flag) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if keep != nil && !keep(f) {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		left := dash + f.Name
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool && arg != "" {
			left += " " + arg
		}
		switch f.DefValue {
		case "", "false", "0", "0s":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		printEntry(w, left, usage)
	})
}

// Help text layout: entries are indented by two, their text starts at
// helpColumn and is wrapped at helpWidth.
const (
	helpColumn = 26
	helpWidth  = 80
)

// printEntry writes "  left  text", with text wrapped at helpWidth and
// starting on a line of its own when left is too long for its column.
func printEntry(w io.Writer, left, text string) { printEntryAt(w, helpColumn, left, text) }

func printEntryAt(w io.Writer, column int, left, text string) {
	line := "  " + left
	if len(line) >= column-1 {
		fmt.Fprintln(w, line)
		line = ""
	}
	pad := strings.Repeat(" ", column)
	line += pad[len(line):]
	n := 0
	for _, word := range strings.Fields(text) {
		if n > 0 && len([]rune(line))+1+len([]rune(word)) > helpWidth {
			fmt.Fprintln(w, line)
			line, n = pad, 0
		}
		if n > 0 {
			line += " "
		}
		line += word
		n++
	}
	fmt.Fprintln(w, line)
}

// globalFlags registers the global flags on fs. They are registered on every
// command's flag set too, so that they may follow the command.
func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "url", a.url, "the store, or $CAIRN_STATE_URL: file:///abs/path, file:rel/path or s3://BUCKET[/ROOT]?endpoint=`URL`&region=R&path_style=true&conditional=auto|on|off")
	fs.Var(&a.identities, "identity", "an age identity `FILE` (age-keygen's format) or SSH private key, mode 0600; repeatable, or $CAIRN_STATE_IDENTITY")
	fs.Var(&a.recipients, "recipient", "an extra public recipient `R` (age1…, ssh-ed25519 …), e.g. a recovery key: one of the store's recipients when a write creates the store and with rekey; otherwise writes seal to the store's own set and a difference is noted; repeatable, or $CAIRN_STATE_RECIPIENTS")
	fs.BoolVar(&a.json, "json", a.json, "print one JSON document on stdout instead of human output, also on failure")
	fs.DurationVar(&a.staleAfter, "stale-after", a.staleAfter, "the stale window (a `DURATION`) used to judge the lock and recorded in the CLI's own; it can lengthen a holder's recorded window, not shorten it")
	fs.DurationVar(&a.timeout, "timeout", a.timeout, "how long a command waits on storage that does not answer (a `DURATION`, at least 1s): an S3 operation gives up within 45% of it, naming the endpoint; the S3 timeouts the URL does not set are derived from it")
	fs.BoolVar(&a.verbose, "verbose", a.verbose, "log what the layers below do, on stderr")
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
			a.showHelp(commandHelp(fs))
			return nil, errHelpShown
		} else if err != nil {
			return nil, usagef("%s: %v (cairn-state %s -h lists its flags)", fs.Name(), err, fs.Name())
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
	case a.wait < 0:
		return nil, usagef("%s: --wait %s: want a positive duration", fs.Name(), a.wait)
	case a.timeout < minTimeout:
		return nil, usagef("%s: --timeout %s: want at least %s", fs.Name(), a.timeout, minTimeout)
	}
	if err := a.setup(); err != nil {
		return nil, err
	}
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

func example(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return c.example
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
// environment defaults, the logger, and the refusal of a secret given
// where a path or a public recipient belongs.
func (a *app) setup() error {
	// The environment is read as state.ConfigFromEnv reads it, so that the
	// CLI and the application agree on what a variable means.
	if a.url == "" {
		a.url = strings.TrimSpace(a.getenv(state.EnvURL))
	}
	identitySource, recipientSource := "--identity", "--recipient"
	if len(a.identities) == 0 {
		identitySource = state.EnvIdentity
		for _, p := range filepath.SplitList(a.getenv(state.EnvIdentity)) {
			if p = strings.TrimSpace(p); p != "" {
				a.identities = append(a.identities, p)
			}
		}
	}
	if len(a.recipients) == 0 {
		recipientSource = state.EnvRecipients
		a.recipients = state.SplitRecipients(a.getenv(state.EnvRecipients))
	}
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	a.logger = slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(_ []string, at slog.Attr) slog.Attr {
			switch v := at.Value.Resolve(); v.Kind() {
			case slog.KindString, slog.KindAny:
				at.Value = slog.StringValue(a.redact(v.String()))
			}
			return at
		}}))
	for _, p := range a.identities {
		if err := checkIdentityArg(identitySource, p); err != nil {
			return err
		}
	}
	for _, r := range a.recipients {
		if err := checkRecipientArg(recipientSource, r); err != nil {
			return err
		}
	}
	return nil
}

// redact hides, in text about to be printed or logged, the credentials of
// the store's URL and any age secret key.
func (a *app) redact(s string) string {
	return redactSecretKeys(state.RedactURLIn(s, a.url))
}

// fail reports err: a line on stderr and, with --json, an error document on
// stdout unless the command already printed its own.
func (a *app) fail(err error) {
	msg := a.redact(err.Error())
	fmt.Fprintf(a.err, "cairn-state: %s\n", msg)
	var re *reportedError
	if errors.As(err, &re) {
		return
	}
	if errors.Is(err, state.ErrNoStore) {
		fmt.Fprintf(a.err, "hint: check --url (or %s); a write (cairn-state put) creates a new store\n", state.EnvURL)
	}
	var foreign *envelope.ForeignStoreError
	if errors.As(err, &foreign) {
		fmt.Fprintf(a.err, "hint: %q was copied here from another store (store %s); this store is %s: restore this store's own copy, or remove it (cairn-state rm)\n",
			foreign.Name, foreign.Object, foreign.Envelope)
	}
	var held *lock.HeldError
	switch {
	case !errors.As(err, &held):
	case held.Unreadable != "":
		fmt.Fprintf(a.err, "hint: it may belong to a live instance whose key is not configured here: pass the identity the lock is sealed to (--identity FILE) to see who holds it, or wait until it is stale (in %s); if its holder is gone for good: cairn-state lock break --force (no --holder: it cannot be read)\n",
			ago(held.StaleIn))
	case held.Duplicate && held.Holder.InstanceID == instanceID():
		fmt.Fprintf(a.err, "hint: another cairn-state process on this host (pid %d) is writing; let it finish, or wait for it with --wait DURATION\n", held.Holder.PID)
	case held.Duplicate:
		fmt.Fprintf(a.err, "hint: two live processes use the instance id %q; give each instance its own (--instance-id, state.Config.InstanceID)\n", held.Holder.InstanceID)
	default:
		fmt.Fprintf(a.err, "hint: stop %q first, or wait until its lock is stale; if it is gone for good: cairn-state lock break --force --holder %q\n",
			held.Holder.InstanceID, held.Holder.InstanceID)
	}
	if !a.json || a.emitted {
		return
	}
	doc := errorDoc{Error: errorBody{Message: msg, ExitCode: exitCode(err)}}
	var nm *store.NotMemberError
	if errors.As(err, &nm) {
		doc.Error.Store = &notMemberDoc{StoreID: nm.StoreID.String(), Created: nm.Created, Recipients: nm.Recipients, Key: nm.Key}
		if nm.StoreID.IsZero() {
			doc.Error.Store.StoreID = ""
		}
	}
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
