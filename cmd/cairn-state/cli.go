package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/secret"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
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

	url           string
	identities    listFlag
	recipients    listFlag
	json          bool
	staleAfter    time.Duration
	verbose       bool
	interactive   bool          // stderr is a terminal: draw a progress bar
	allowUnauth   bool          // --allow-unauthenticated (get, rekey): the emergency recovery read
	strict        bool          // get --strict: refuse a put-back object (store.Options.RejectRollback)
	recoveryFiles listFlag      // --recovery-identity (get, rekey, verify)
	quietDiff     bool          // the recipient difference was reported
	wait          time.Duration // --wait (put, rm, rekey): how long to wait for a held lock
	mayCreate     bool          // the command creates the store, and its directory (init)
	storeID       string        // --store-id, or $CAIRN_STATE_STORE_ID: the pinned store
	history       historyFlag   // --history, or $CAIRN_STATE_HISTORY: versions kept per name
	keys          store.Keys    // the keys openStore connected with
	boot          boot.Options  // the first-open protocol's options openStore used

	timeout time.Duration // --timeout: how long a command waits on storage that does not answer

	redactor *secret.Redactor // hides the secrets of the command line and environment
	data     io.Writer        // stdout as given: get's plaintext and the JSON document
	logger   *slog.Logger
	emitted  bool        // a JSON document has been written to stdout
	closers  []io.Closer // backends to close when the command is done
}

// usageError is a mistake in the command line or its configuration (the
// URL, an identity file): exit code 2. It unwraps to its cause, if any.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.err }

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
		{"keygen", "[-o FILE|-]", "write a new X25519 identity (0600); print its recipient",
			"cairn-state keygen -o identity.txt", runKeygen},
		{"init", "", "create a store at --url, sealed to --identity's recipients and --recipient; print its id, location and recipients (the only command that creates a store)",
			"cairn-state init --url file:///var/lib/app/state --identity identity.txt", runInit},
		{"ls", "[--all|--deleted] [PREFIX]", "list state names with sealed size and modification time; --deleted: deleted names history keeps",
			"cairn-state ls app/", runLs},
		{"get", "[--version V|--strict] [--recovery-identity FILE --allow-unauthenticated] NAME", "decrypt one object (or a kept version of it) to stdout",
			"cairn-state get app/db-password > db-password.txt\ncairn-state get --version 3.7 app/db-password", runGet},
		{"history", "NAME", "the versions of one object kept in history, newest first: version, time, instance, epoch, sealed size",
			"cairn-state history app/db-password", runHistory},
		{"restore", "[--wait DURATION] NAME VERSION", "write a kept version's value as the new current one (the version it replaces is kept); undeletes a deleted name; takes the lock",
			"cairn-state restore app/db-password 3.7", runRestore},
		{"put", "[--allow-empty] [--if-absent|--if-version V] [--wait DURATION] NAME [FILE]", "seal and write one object (stdin when no FILE; an empty stdin is refused); takes the lock",
			"echo hunter2 | cairn-state put app/db-password\ncairn-state put --if-absent --wait 2m app/config config.json", runPut},
		{"rm", "[--purge] [--wait DURATION] NAME", "delete one object (its last version stays in history: restore brings it back; --purge removes its history too, leaving nothing to restore); takes the lock",
			"cairn-state rm app/old-token\ncairn-state rm --purge app/leaked-token", runRm},
		{"verify", "[--recovery-identity FILE]", "check the store's manifest and open every object: report each one that fails and why, legacy ones and ones sealed outside the store's recipients; prove a recovery key reads everything with stock age",
			"cairn-state verify --json\ncairn-state verify --recovery-identity recovery.txt", runVerify},
		{"rekey", "[--old-identity FILE]... [--recovery-identity FILE --allow-unauthenticated [--yes]] [--restart] [--wait DURATION]", "move the store and every object to the current recipients; afterwards the old keys are refused; takes the lock; with nothing to change it says so and writes nothing; an interrupted run resumes",
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

// run executes one command line and returns the process exit code. Every
// line it prints passes through one redactor, made from the command line
// and the environment: a secret given anywhere is never echoed.
func run(ctx context.Context, args []string, io stdio, getenv func(string) string) int {
	a := &app{stdio: io, getenv: getenv, staleAfter: defaultStaleAfter, timeout: defaultTimeout}
	a.interactive = isTerminal(io.err)
	a.redactor = secret.NewRedactor(append(slices.Clone(args), getenv(setup.EnvURL), getenv(setup.EnvIdentity), getenv(setup.EnvRecipients))...)
	a.data = io.out
	a.out = redactingWriter{a: a, w: io.out}
	a.err = redactingWriter{a: a, w: io.err}
	err := a.dispatch(ctx, args)
	for _, c := range a.closers {
		_ = c.Close()
	}
	if errors.Is(err, errHelpShown) {
		return exitOK
	}
	code := exitCode(ctx, err)
	if err != nil {
		a.fail(err, code)
	}
	return code
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	// Know about --json before parsing, so that even a usage error is
	// reported as a JSON document.
	a.json = wantsJSON(args)
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

// wantsJSON reports whether a command line asks for --json, before it is
// parsed.
func wantsJSON(args []string) bool {
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" || arg == "-json" || arg == "--json=true" || arg == "-json=true" {
			return true
		}
	}
	return false
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
	fs.Var(&a.history, "history", "how many versions of each name a write keeps in history (a whole number `N`, the current one included; 0 turns history off, keeping nothing and removing nothing already kept); default 5, or $"+envHistory)
	fs.StringVar(&a.storeID, "store-id", a.storeID, "pin the store: its `ID` (32 hex digits, as init and doctor print it); another store is refused with exit 5 before anything is read or written; or $CAIRN_STATE_STORE_ID")
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

// setup completes the global options once the command line is parsed:
// environment defaults, the logger, and the refusal of a secret given
// where a path or a public recipient belongs.
func (a *app) setup() error {
	// The environment is read as state.ConfigFromEnv reads it, so that the
	// CLI and the application agree on what a variable means.
	if a.url == "" {
		a.url = strings.TrimSpace(a.getenv(setup.EnvURL))
	}
	if a.storeID == "" {
		a.storeID = strings.TrimSpace(a.getenv(setup.EnvStoreID))
	}
	if v := strings.TrimSpace(a.getenv(envHistory)); !a.history.set && v != "" {
		if err := a.history.Set(v); err != nil {
			return usagef("%s=%q: %v", envHistory, v, err)
		}
	}
	identitySource, recipientSource := "--identity", "--recipient"
	if len(a.identities) == 0 {
		identitySource = setup.EnvIdentity
		for _, p := range filepath.SplitList(a.getenv(setup.EnvIdentity)) {
			if p = strings.TrimSpace(p); p != "" {
				a.identities = append(a.identities, p)
			}
		}
	}
	if len(a.recipients) == 0 {
		recipientSource = setup.EnvRecipients
		a.recipients = setup.SplitRecipients(a.getenv(setup.EnvRecipients))
	}
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(_ []string, at slog.Attr) slog.Attr {
			switch v := at.Value.Resolve(); v.Kind() {
			case slog.KindString, slog.KindAny:
				at.Value = slog.StringValue(terminalSafe(a.redact(v.String())))
			}
			return at
		}}
	if a.json {
		a.logger = slog.New(slog.NewJSONHandler(a.err, ho)) // stderr carries JSON lines only
	} else {
		a.logger = slog.New(slog.NewTextHandler(a.err, ho))
	}
	// What the layers below log without being given a logger goes the
	// same way: redacted, at the same level, JSON lines with --json.
	slog.SetDefault(a.logger)
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

// redact hides, in text about to be printed or logged, every secret
// recognised (internal/secret) and the credentials of every URL the
// command line or the environment carries, however they are written.
func (a *app) redact(s string) string { return a.redactor.Redact(s) }

// requestIDs are the request and host ids the S3 SDK puts in its errors:
// clutter for an operator, kept with --verbose for a support request.
var requestIDs = regexp.MustCompile(`,? ?(RequestID|HostID): [^,\s]*,?`)

// fail reports err: a line on stderr (a JSON line with --json) and, with
// --json, an error document on stdout unless the command already printed
// its own. code is err's exit code.
func (a *app) fail(err error, code int) {
	msg := a.redact(err.Error())
	if !a.verbose {
		msg = requestIDs.ReplaceAllStringFunc(msg, func(m string) string {
			if strings.HasPrefix(m, ",") && strings.HasSuffix(m, ",") {
				return ","
			}
			return ""
		})
	}
	msg = terminalSafe(msg)
	kind := errorKind(err, code)
	a.say("error", "cairn-state: "+msg, "kind", kind, "exit_code", code)
	var re *reportedError
	if errors.As(err, &re) {
		return
	}
	if errors.Is(err, state.ErrNoStore) || errors.Is(err, store.ErrNoStore) {
		a.say("hint", fmt.Sprintf("hint: check --url (or %s); to create a store there: cairn-state init", setup.EnvURL))
	}
	var foreign *envelope.ForeignStoreError
	if errors.As(err, &foreign) {
		a.say("hint", fmt.Sprintf("hint: %q was copied here from another store (store %s); this store is %s: restore this store's own copy, or remove it (cairn-state rm)",
			foreign.Name, foreign.Object, foreign.Envelope))
	}
	var held *lock.HeldError
	if errors.As(err, &held) {
		a.say("hint", "hint: "+heldHint(held))
	}
	if !a.json || a.emitted {
		return
	}
	doc := errorDoc{Error: errorBody{Message: msg, Kind: kind, ExitCode: code}}
	var nm *storemeta.NotMemberError
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
