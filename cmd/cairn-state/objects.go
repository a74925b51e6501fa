package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

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
}

func runLs(ctx context.Context, a *app, args []string) error {
	fs := a.flags("ls")
	all := fs.Bool("all", false, "also list cairn-state's own objects (names starting with '.': the lock, its saved epoch, the migration log, rekey progress)")
	pos, err := a.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	prefix := ""
	if len(pos) == 1 {
		prefix = pos[0]
		// A prefix is valid when a name could start with it.
		var ne *store.NameError
		if err := store.ValidateName(prefix + "x"); errors.As(err, &ne) && !(*all && ne.Reserved) {
			return usagef("ls: prefix %q: no state name can start with it: %s", prefix, ne.Reason)
		}
	}
	// Listing opens nothing: no identity needed.
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	if *all {
		st = st.Internal()
	}
	doc := lsDoc{Objects: []objectDoc{}}
	err = st.List(ctx, prefix, func(i store.Info) error {
		doc.Objects = append(doc.Objects, objectOf(i))
		return nil
	})
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	if a.json {
		a.emit(doc)
		return nil
	}
	if len(doc.Objects) == 0 {
		fmt.Fprintln(a.err, "no objects")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tSIZE\tMODIFIED\n")
	for _, o := range doc.Objects {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", o.Name, o.Size, timestamp(o.ModTime))
	}
	return tw.Flush()
}

type getDoc struct {
	objectDoc
	Data []byte `json:"data"` // the plaintext, base64
}

func runGet(ctx context.Context, a *app, args []string) error {
	fs := a.flags("get")
	a.recoveryFlags(fs, true)
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := a.checkRecoveryFlags("get"); err != nil {
		return err
	}
	if err := store.ValidateName(pos[0]); err != nil {
		return usagef("get: %v", err)
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	data, info, err := st.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		a.emit(getDoc{objectDoc: objectOf(info), Data: data})
		return nil
	}
	if _, err := a.out.Write(data); err != nil {
		return fmt.Errorf("get %q: writing to stdout: %w", pos[0], err)
	}
	return nil
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
	pos, err := a.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := store.ValidateName(name); err != nil {
		return usagef("put: %v", err)
	}
	var src io.Reader = a.in
	from := "stdin"
	if len(pos) < 2 && isTerminal(a.in) {
		fmt.Fprintf(a.err, "reading %s from the terminal; end with Ctrl-D\n", name)
	}
	if len(pos) == 2 && pos[1] != "-" {
		f, err := os.Open(pos[1])
		if err != nil {
			return fmt.Errorf("put %q: %w", name, err)
		}
		defer f.Close()
		src, from = f, pos[1]
	}
	// Read all input before taking the lock: a slow pipe must not hold it.
	data, err := io.ReadAll(io.LimitReader(src, store.DefaultMaxObjectSize+1))
	if err != nil {
		return fmt.Errorf("put %q: %w", name, err) // "read FILE: …"
	}
	if len(data) > store.DefaultMaxObjectSize {
		return fmt.Errorf("put %q: %s is larger than %d bytes: %w", name, from, store.DefaultMaxObjectSize, store.ErrTooLarge)
	}
	a.mayCreate = true // the first put of a new file: store creates its directory
	a.write = true
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	return a.withLock(ctx, st, fmt.Sprintf("put %q", name), func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		info, err := fenced.Put(ctx, name, data, store.PutOptions{})
		if err != nil {
			return err
		}
		if a.json {
			a.emit(putDoc{objectDoc: objectOf(info), Plaintext: int64(len(data)), Lock: lockOf(l)})
			return nil
		}
		a.printf("put %s: %d bytes from %s, sealed %d bytes, version %s\n", name, len(data), from, info.Size, info.Version)
		return nil
	})
}

// waitFlag registers --wait on a write's flag set.
func (a *app) waitFlag(fs *flag.FlagSet) {
	fs.DurationVar(&a.wait, "wait", 0, "if a live instance holds the lock, poll for up to `DURATION` (e.g. 30s, 5m) for it to be released or go stale instead of exiting 3 at once")
}

type rmDoc struct {
	Name    string  `json:"name"`
	Removed bool    `json:"removed"`
	Lock    lockDoc `json:"lock"`
}

func runRm(ctx context.Context, a *app, args []string) error {
	fs := a.flags("rm")
	a.waitFlag(fs)
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := store.ValidateName(name); err != nil {
		return usagef("rm: %v", err)
	}
	a.write = true
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	return a.withLock(ctx, st, fmt.Sprintf("rm %q", name), func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		// Stat first: some S3 servers answer a delete of a missing key
		// with success, and the operator should hear about a typo.
		if _, err := fenced.Stat(ctx, name); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return &wordedError{msg: fmt.Sprintf("rm: no object named %q", name), err: err}
			}
			return err
		}
		if err := fenced.Delete(ctx, name, store.DeleteOptions{}); err != nil {
			return err
		}
		if a.json {
			a.emit(rmDoc{Name: name, Removed: true, Lock: lockOf(l)})
			return nil
		}
		a.printf("removed %s\n", name)
		return nil
	})
}
