package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// keptVersionDoc is one version in `history --json`.
type keptVersionDoc struct {
	Version  string    `json:"version"`
	Epoch    uint64    `json:"epoch"`
	Sequence uint64    `json:"sequence"`
	Time     time.Time `json:"time"`
	Instance string    `json:"instance"`
	Size     int64     `json:"size"`
	Current  bool      `json:"current"`
	Deleted  bool      `json:"deleted"`
	Kept     bool      `json:"kept"`
}

func keptVersionOf(v store.Version) keptVersionDoc {
	return keptVersionDoc{Version: v.ID.String(), Epoch: v.ID.Epoch, Sequence: v.ID.Sequence, Time: v.Time,
		Instance: v.Instance, Size: v.Size, Current: v.Current, Deleted: v.Deleted, Kept: v.Kept}
}

// marks is the NOTE column of the history table.
func marks(v store.Version) string {
	switch {
	case v.Deleted:
		return "deleted"
	case v.Current && !v.Kept:
		return "current, not kept"
	case v.Current:
		return "current"
	}
	return ""
}

func runHistory(ctx context.Context, a *app, args []string) error {
	fs := a.flags("history")
	pos, err := a.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := storeadmin.ValidateName(name); err != nil {
		return usagef("history: %v", err)
	}
	// The identity opens each version's header (who wrote it).
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	vs, err := st.History(ctx, name)
	if err != nil {
		return err
	}
	if a.json {
		docs := make([]keptVersionDoc, 0, len(vs))
		for _, v := range vs {
			docs = append(docs, keptVersionOf(v))
		}
		a.emit(docs)
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "VERSION\tTIME\tINSTANCE\tEPOCH\tSIZE\tNOTE\n")
	for _, v := range vs {
		inst := v.Instance
		if inst == "" {
			inst = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", v.ID, timestamp(v.Time), shown(inst), v.ID.Epoch, v.Size, marks(v))
	}
	return tw.Flush()
}

// parseVersion parses a version argument for cmd.
func parseVersion(cmd, s string) (store.VersionID, error) {
	id, err := store.ParseVersionID(s)
	if err != nil {
		return store.VersionID{}, usagef("%s: %v", cmd, err)
	}
	return id, nil
}

type restoreDoc struct {
	Name     string  `json:"name"`
	Restored string  `json:"restored"`
	Version  string  `json:"version"`
	Replaced *string `json:"replaced"`
	Lock     lockDoc `json:"lock"`
}

func runRestore(ctx context.Context, a *app, args []string) error {
	fs := a.flags("restore")
	a.waitFlag(fs)
	pos, err := a.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := storeadmin.ValidateName(name); err != nil {
		return usagef("restore: %v", err)
	}
	id, err := parseVersion("restore", pos[1])
	if err != nil {
		return err
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	return a.withLock(ctx, st, fmt.Sprintf("restore %q", name), func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		res, err := fenced.Restore(ctx, name, id)
		if err != nil {
			return err
		}
		written := res.Written.ID.String()
		if a.json {
			doc := restoreDoc{Name: name, Restored: res.From.String(), Version: written, Lock: lockOf(l)}
			if res.Replaced != nil {
				r := res.Replaced.String()
				doc.Replaced = &r
			}
			a.emit(doc)
			return nil
		}
		if res.Replaced == nil {
			a.printf("restored %s to %s as version %s (it had been deleted)\n", shown(name), res.From, written)
			return nil
		}
		a.printf("restored %s to %s as version %s; the version it replaced, %s, is kept\n", shown(name), res.From, written, res.Replaced)
		return nil
	})
}

// deletedDoc is one name in `ls --deleted --json`.
type deletedDoc struct {
	Name        string     `json:"name"`
	DeletedAt   *time.Time `json:"deleted_at"`
	DeletedBy   string     `json:"deleted_by,omitempty"`
	LastVersion string     `json:"last_version"`
	Instance    string     `json:"instance"`
	Size        int64      `json:"size"`
}

// lsDeleted lists the deleted names under prefix that history keeps.
func lsDeleted(ctx context.Context, a *app, st *store.Store, prefix string) error {
	docs := []deletedDoc{}
	err := st.ListDeleted(ctx, prefix, func(d store.Deleted) error {
		doc := deletedDoc{Name: d.Name, LastVersion: d.Last.ID.String(), Instance: d.Last.Instance, Size: d.Last.Size}
		if !d.DeletedAt.IsZero() {
			at := d.DeletedAt
			doc.DeletedAt, doc.DeletedBy = &at, d.By.String()
		}
		docs = append(docs, doc)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ls --deleted: %w", err)
	}
	if a.json {
		a.emit(docs)
		return nil
	}
	if len(docs) == 0 {
		a.say("note", "no deleted objects kept in history")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tDELETED\tLAST VERSION\n")
	for _, d := range docs {
		at := "-"
		if d.DeletedAt != nil {
			at = timestamp(*d.DeletedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", shown(d.Name), at, d.LastVersion)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	a.say("note", "cairn-state restore NAME VERSION brings one back")
	return nil
}

// historyUsageDoc is history's size in `ls --all --json`.
type historyUsageDoc struct {
	Names      int   `json:"names"`
	Versions   int   `json:"versions"`
	Tombstones int   `json:"tombstones"`
	Bytes      int64 `json:"bytes"`
}

func historyUsageOf(u storeadmin.HistoryUsage) *historyUsageDoc {
	return &historyUsageDoc{Names: u.Names, Versions: u.Versions, Tombstones: u.Tombstones, Bytes: u.Bytes}
}

// historyLine is the last line of `ls --all`.
func historyLine(u storeadmin.HistoryUsage) string {
	return fmt.Sprintf("history: %s of %s, %s", plural(u.Versions, "version"), plural(u.Names, "name"), byteSize(u.Bytes))
}

// byteSize formats a size for people: bytes, KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// rmKept is what rm says history kept of name.
func rmKept(ctx context.Context, fenced *store.Store, name string) (string, bool) {
	if storeadmin.KeptVersions(fenced) == 0 {
		return "", false
	}
	id, ok, err := storeadmin.LastKept(ctx, fenced, name)
	if err != nil || !ok {
		return "", false
	}
	return id.String(), true
}
