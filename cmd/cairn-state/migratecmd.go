package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/cairnhq/state/internal/migratelog"
)

type migrateStatusDoc struct {
	// Migrations are the log's records in the order they first started.
	Migrations []migratelog.Record `json:"migrations"`
	Applied    int                 `json:"applied"`
	// Unfinished counts records not applied: started (interrupted),
	// failed, or marked pending again by an operator.
	Unfinished int `json:"unfinished"`
}

// runMigrateStatus shows the migration log. The CLI does not know the
// application's list of migrations, so "pending" means what the log knows:
// steps that started and never finished, failed, or were marked pending;
// steps the application has never started are not in the log, and the
// application's boot runs them.
func runMigrateStatus(ctx context.Context, a *app, args []string) error {
	fs := a.flags("migrate status")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	recs, err := migratelog.Applied(ctx, st)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	doc := migrateStatusDoc{Migrations: recs}
	if doc.Migrations == nil {
		doc.Migrations = []migratelog.Record{}
	}
	for _, r := range recs {
		if r.State == migratelog.StateApplied {
			doc.Applied++
		} else {
			doc.Unfinished++
		}
	}
	if a.json {
		a.emit(doc)
		return nil
	}
	if len(recs) == 0 {
		a.printf("no migrations recorded\n")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tSTATE\tATTEMPTS\tFINISHED\tBY\tDESCRIPTION\n")
	for _, r := range recs {
		by := r.InstanceID
		if r.Epoch > 0 {
			by = fmt.Sprintf("%s (epoch %d)", r.InstanceID, r.Epoch)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.State, r.Attempts, timestamp(r.FinishedAt), by, r.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	a.printf("%d applied, %d not finished\n", doc.Applied, doc.Unfinished)
	for _, r := range recs {
		switch r.State {
		case migratelog.StateStarted:
			a.printf("%s was interrupted; %s\n", r.ID, nextBoot(r))
		case migratelog.StateFailed:
			a.printf("%s failed: %s\n", r.ID, r.Error)
		}
	}
	return nil
}

// nextBoot says what the application's next boot does with an interrupted
// step.
func nextBoot(r migratelog.Record) string {
	if r.NonRepeatable {
		return "it is non-repeatable, so the next boot stops and asks for migrate.MarkApplied or migrate.MarkPending once the state is inspected"
	}
	return "the next boot runs it again"
}
