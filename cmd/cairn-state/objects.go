package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// objectDoc describes one object in JSON output.
type objectDoc struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"` // sealed size in bytes
	Version string    `json:"version"`
	ModTime time.Time `json:"mod_time"`
}

func objectOf(i store.Info) objectDoc {
	return objectDoc{Name: i.Name, Size: i.Size, Version: i.Version, ModTime: i.ModTime}
}

type lsDoc struct {
	Objects []objectDoc `json:"objects"`
	// History is what history holds (ls --all only).
	History *historyUsageDoc `json:"history,omitempty"`
}

func runLs(ctx context.Context, a *app, args []string) error {
	fs := a.flags("ls")
	all := fs.Bool("all", false, "also list cairn-state's own objects (names starting with '.': the lock, its saved epoch, the migration log, rekey progress, history) and the size of history")
	deleted := fs.Bool("deleted", false, "list deleted names whose versions history keeps, with the version `restore` brings back")
	pos, err := a.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	prefix := ""
	if len(pos) == 1 {
		prefix = pos[0]
		// A prefix is valid when a name could start with it.
		var ne *storemeta.NameError
		if err := storeadmin.ValidateName(prefix + "x"); errors.As(err, &ne) && !(*all && ne.Reserved) {
			return usagef("ls: prefix %q: no state name can start with it: %s", prefix, ne.Reason)
		}
	}
	// Listing opens nothing: no identity needed.
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	if *deleted {
		if *all {
			return usagef("ls: --deleted and --all exclude each other")
		}
		return lsDeleted(ctx, a, st, prefix)
	}
	if *all {
		st = storeadmin.Internal(st)
	}
	doc := lsDoc{Objects: []objectDoc{}}
	err = st.List(ctx, prefix, func(i store.Info) error {
		doc.Objects = append(doc.Objects, objectOf(i))
		return nil
	})
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	var usage storeadmin.HistoryUsage
	if *all {
		if usage, err = storeadmin.HistoryUsageOf(ctx, st); err != nil {
			return fmt.Errorf("ls: %w", err)
		}
		doc.History = historyUsageOf(usage)
	}
	if a.json {
		a.emit(doc)
		return nil
	}
	if len(doc.Objects) == 0 {
		a.say("note", "no objects")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tSIZE\tMODIFIED\n")
	for _, o := range doc.Objects {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", shown(o.Name), o.Size, timestamp(o.ModTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *all {
		a.printf("%s\n", historyLine(usage))
	}
	return nil
}

type getDoc struct {
	objectDoc
	Data []byte `json:"data"` // the plaintext, base64
}

func runGet(ctx context.Context, a *app, args []string) error {
	fs := a.flags("get")
	a.recoveryFlags(fs, true)
	version := fs.String("version", "", "read the kept version `V` (as `history NAME` lists them) instead of the current one")
	fs.BoolVar(&a.strict, "strict", false, "refuse an object older than a version kept in its own history (put back from a backup or an old copy): exit 1, naming both versions")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	var id store.VersionID
	if *version != "" {
		if id, err = parseVersion("get", *version); err != nil {
			return err
		}
	}
	if err := a.checkRecoveryFlags("get"); err != nil {
		return err
	}
	if err := storeadmin.ValidateName(pos[0]); err != nil {
		return usagef("get: %v", err)
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	if a.json || *version != "" {
		var (
			data []byte
			info store.Info
		)
		if *version != "" {
			data, info, err = st.GetVersion(ctx, pos[0], id)
		} else {
			data, info, err = st.Get(ctx, pos[0])
		}
		a.noteInterruptedRekey(ctx, st, pos[0], err)
		if err != nil {
			return err
		}
		if a.json {
			a.emit(getDoc{objectDoc: objectOf(info), Data: data})
			return nil
		}
		if _, err := a.data.Write(data); err != nil {
			return fmt.Errorf("get %q: writing to stdout: %w", pos[0], err)
		}
		return nil
	}
	r, _, err := st.GetReader(ctx, pos[0])
	a.noteInterruptedRekey(ctx, st, pos[0], err)
	if err != nil {
		return err
	}
	defer r.Close()
	out := &stdoutWriter{w: a.data}
	if _, err := io.Copy(out, r); err != nil {
		if out.err != nil {
			return fmt.Errorf("get %q: writing to stdout: %w", pos[0], out.err)
		}
		return err // a chunk that does not authenticate: ErrUnreadable
	}
	return nil
}

// stdoutWriter records its writer's error, to tell it from the reader's.
type stdoutWriter struct {
	w   io.Writer
	err error
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

type putDoc struct {
	objectDoc
	Plaintext int64   `json:"plaintext_size"`
	Lock      lockDoc `json:"lock"`
}

// lockDoc names the lock a write was made under.
type lockDoc struct {
	InstanceID string `json:"instance_id"`
	Epoch      uint64 `json:"epoch"`
	Mode       string `json:"mode"`
}

func lockOf(l *lock.Lock) lockDoc {
	r := l.Record()
	return lockDoc{InstanceID: r.InstanceID, Epoch: r.Epoch, Mode: string(r.Mode)}
}

func runPut(ctx context.Context, a *app, args []string) error {
	fs := a.flags("put")
	a.waitFlag(fs)
	allowEmpty := fs.Bool("allow-empty", false, "write an empty value when standard input is empty; without it an empty stdin is refused, so that a failed pipeline (cat missing.txt | cairn-state put NAME) cannot replace a value")
	ifAbsent := fs.Bool("if-absent", false, "write only if no object of that name exists; else exit 7, writing nothing")
	ifVersion := fs.String("if-version", "", "write only if the object exists with version `V` (as put, ls --json or get --json show it); else exit 7, writing nothing")
	pos, err := a.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := storeadmin.ValidateName(name); err != nil {
		return usagef("put: %v", err)
	}
	if *ifAbsent && *ifVersion != "" {
		return usagef("put: --if-absent and --if-version exclude each other")
	}
	var src io.Reader = a.in
	from := "stdin"
	if len(pos) < 2 && isTerminal(a.in) {
		a.say("note", fmt.Sprintf("reading %s from the terminal; end with Ctrl-D", shown(name)))
	}
	if len(pos) == 2 && pos[1] != "-" {
		f, err := os.Open(pos[1])
		if err != nil {
			return fmt.Errorf("put %q: %w", name, err)
		}
		defer f.Close()
		src, from = f, pos[1]
	}
	in, stop := interruptible(ctx, src)
	defer stop()
	empty := false
	if from == "stdin" {
		_, err := in.Peek(1)
		if err != nil && err != io.EOF {
			return fmt.Errorf("put %q: reading stdin: %w", name, err)
		}
		empty = err == io.EOF
	}
	// The keys and recipients first: a bad one is the error to report.
	if _, err := a.loadKeys(true); err != nil {
		return err
	}
	if empty && !*allowEmpty {
		return usagef("put %q: standard input is empty (did the command before the pipe fail?); nothing was written; to store an empty value: --allow-empty", name)
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	// Read and seal all input before taking the lock: a slow pipe must not
	// hold it. Only sealed bytes go to the temporary file.
	u, err := storeadmin.Prepare(ctx, st, name, in)
	if err != nil {
		return fmt.Errorf("%w (from %s)", err, from) // "store: put NAME: … read FILE: …"
	}
	defer u.Close()
	cond := store.PutOptions{IfAbsent: *ifAbsent, IfVersion: *ifVersion}
	return a.withLock(ctx, st, fmt.Sprintf("put %q", name), func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		info, err := putIf(ctx, fenced, u, name, cond)
		if err != nil {
			return err
		}
		if a.json {
			a.emit(putDoc{objectDoc: objectOf(info), Plaintext: u.Plaintext(), Lock: lockOf(l)})
			return nil
		}
		a.printf("put %s: %d bytes from %s, sealed %d bytes, version %s\n", shown(name), u.Plaintext(), from, info.Size, info.Version)
		return nil
	})
}

// putIf writes name under cond. Where the storage has compare-and-swap the
// store enforces the condition; where it has not (Garage), a look before
// the write is the same test, since the caller holds the instance lock
// that every writer takes. A condition that does not hold is a
// *conditionError (exit 7), saying what was found.
func putIf(ctx context.Context, st *store.Store, u storeadmin.Upload, name string, cond store.PutOptions) (store.Info, error) {
	if cond == (store.PutOptions{}) {
		return storeadmin.PutUpload(ctx, st, u, cond)
	}
	check := func() error {
		cur, err := st.Stat(ctx, name)
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		case cond.IfAbsent && err == nil:
			return &conditionError{msg: fmt.Sprintf("put %q: --if-absent: it exists (version %s); nothing was written", name, cur.Version), err: store.ErrPreconditionFailed}
		case cond.IfVersion != "" && err != nil:
			return &conditionError{msg: fmt.Sprintf("put %q: --if-version %s: it does not exist; nothing was written", name, cond.IfVersion), err: store.ErrPreconditionFailed}
		case cond.IfVersion != "" && cur.Version != cond.IfVersion:
			return &conditionError{msg: fmt.Sprintf("put %q: --if-version %s: its version is %s; nothing was written", name, cond.IfVersion, cur.Version), err: store.ErrPreconditionFailed}
		}
		return nil
	}
	if !storeadmin.ConditionalWrites(st) {
		if err := check(); err != nil {
			return store.Info{}, err
		}
		return storeadmin.PutUpload(ctx, st, u, store.PutOptions{})
	}
	info, err := storeadmin.PutUpload(ctx, st, u, cond)
	if errors.Is(err, store.ErrPreconditionFailed) {
		if cerr := check(); cerr != nil {
			return store.Info{}, cerr
		}
		return store.Info{}, &conditionError{msg: fmt.Sprintf("put %q: the condition did not hold; nothing was written", name), err: err}
	}
	return info, err
}

// interruptible returns a buffered reader of r that fails with ctx's
// error once ctx is done, even while a read of r blocks (a SIGTERM while
// a pipe stays open): that read goes on in the background until it
// returns or the process exits. stop ends the reader.
func interruptible(ctx context.Context, r io.Reader) (in *bufio.Reader, stop func()) {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err)
	}()
	unhook := context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	return bufio.NewReader(pr), func() { unhook(); pr.Close() }
}

// waitFlag registers --wait on a write's flag set.
func (a *app) waitFlag(fs *flag.FlagSet) {
	fs.DurationVar(&a.wait, "wait", 0, "if a live instance holds the lock, poll for up to `DURATION` (e.g. 30s, 5m) for it to be released or go stale instead of exiting 3 at once")
}

type rmDoc struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed"` // the object was there and is removed
	// Kept is the removed value's version in history ("" with history
	// off, or with --purge): `restore NAME KEPT` brings it back.
	Kept string `json:"kept"`
	// Purged (rm --purge): the name's history is removed too, and
	// HistoryRemoved counts its objects (versions and tombstones).
	Purged         bool    `json:"purged"`
	HistoryRemoved int     `json:"history_removed"`
	Lock           lockDoc `json:"lock"`
}

func runRm(ctx context.Context, a *app, args []string) error {
	fs := a.flags("rm")
	a.waitFlag(fs)
	purge := fs.Bool("purge", false, "also remove every version and tombstone history keeps of NAME (a name already removed too), so that nothing of it is left to restore: for a value that must be forgotten, such as a leaked secret")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := storeadmin.ValidateName(name); err != nil {
		return usagef("rm: %v", err)
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	return a.withLock(ctx, st, fmt.Sprintf("rm %q", name), func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		// Stat first: some S3 servers answer a delete of a missing key
		// with success, and the operator should hear about a typo.
		_, err := fenced.Stat(ctx, name)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if *purge {
			return rmPurge(ctx, a, fenced, l, name, exists)
		}
		if !exists {
			return &wordedError{msg: fmt.Sprintf("rm: no object named %q", name), err: err}
		}
		if err := fenced.Delete(ctx, name, store.DeleteOptions{}); err != nil {
			return err
		}
		kept, ok := rmKept(ctx, fenced, name)
		if a.json {
			a.emit(rmDoc{Name: name, Removed: true, Kept: kept, Lock: lockOf(l)})
			return nil
		}
		if !ok {
			a.printf("removed %s (history is off: nothing was kept)\n", shown(name))
			return nil
		}
		a.printf("removed %s; its last version, %s, is kept: cairn-state restore %s %s brings it back (rm --purge forgets it)\n", shown(name), kept, shown(name), kept)
		return nil
	})
}

// rmPurge is rm --purge of name (exists: it has a current object):
// the object and everything history keeps of it (store.Store.Purge).
func rmPurge(ctx context.Context, a *app, fenced *store.Store, l *lock.Lock, name string, exists bool) error {
	n, err := fenced.Purge(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return &wordedError{msg: fmt.Sprintf("rm --purge: no object and no history named %q", name), err: err}
	}
	if err != nil {
		return err
	}
	if a.json {
		a.emit(rmDoc{Name: name, Removed: exists, Purged: true, HistoryRemoved: n, Lock: lockOf(l)})
		return nil
	}
	if exists {
		a.printf("removed %s and its history (%s): nothing of it is left to restore\n", shown(name), plural(n, "kept object"))
		return nil
	}
	a.printf("removed the history of %s, deleted before (%s): nothing of it is left to restore\n", shown(name), plural(n, "kept object"))
	return nil
}
