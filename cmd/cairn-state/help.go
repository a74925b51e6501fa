package main

// The help: the overview, a group's subcommands, a command's own help
// (synopsis, flags, example), all wrapped at helpWidth.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// subcommandsOf lists a group's subcommands, for its help.
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
	for _, e := range exitTable {
		printEntryAt(w, exitColumn, strconv.Itoa(e.code), e.meaning)
	}
	fmt.Fprintln(w)
	printParagraph(w, jsonHelp())
}

// jsonHelp says what --json prints, with the kinds of exitcodes.go.
func jsonHelp() string {
	var kinds []string
	for _, c := range exitTable {
		if c.kind != "" && !slices.Contains(kinds, c.kind) {
			kinds = append(kinds, c.kind)
		}
	}
	return fmt.Sprintf("With --json, stdout carries one JSON document, also on failure: {\"error\": {\"message\", \"kind\", \"exit_code\", …}}, its kind one of the table's (%s) or, for exit 1, a finer one (%s); stderr then carries JSON lines only (progress, notes, hints, the error, logs).",
		strings.Join(kinds, ", "), strings.Join(finerKinds, ", "))
}

// printParagraph writes text wrapped at helpWidth.
func printParagraph(w io.Writer, text string) {
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > helpWidth {
			fmt.Fprintln(w, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
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
// helpColumn (exitColumn for the exit codes) and is wrapped at helpWidth.
const (
	helpColumn = 26
	exitColumn = 7
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

// errHelpShown ends a run that printed a command's help: exit 0.
var errHelpShown = errors.New("help shown")

// summary, example and synopsis are a command's lines of help, from the
// command table.
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
