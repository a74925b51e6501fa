package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"filippo.io/age"
)

// defaultIdentityFile is where keygen writes without -o, --identity or
// CAIRN_STATE_IDENTITY.
const defaultIdentityFile = "cairn-state-identity.txt"

type keygenDoc struct {
	IdentityFile string `json:"identity_file"`
	Recipient    string `json:"recipient"`
}

// runKeygen writes a new X25519 identity in age-keygen's format to a new
// file with mode 0600 and prints its recipient. Without -o it goes to the
// first --identity (or CAIRN_STATE_IDENTITY) path, else to
// ./cairn-state-identity.txt; an existing file is never overwritten. With
// -o - the identity is written to stdout, as age-keygen does, and the
// recipient to stderr: the one case where the CLI prints a secret, because
// it was asked to.
func runKeygen(_ context.Context, a *app, args []string) error {
	fs := a.flags("keygen")
	out := fs.String("o", "", "write the identity to `FILE` (default: the first --identity, else ./cairn-state-identity.txt); an existing file is never overwritten; - writes it to stdout and the recipient to stderr")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := checkIdentityArg("-o", *out); err != nil {
		return err
	}
	if *out == "-" {
		return a.keygenToStdout()
	}
	path := *out
	if path == "" && len(a.identities) > 0 {
		path = a.identities[0]
	}
	if path == "" {
		path = defaultIdentityFile
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	recipient := id.Recipient().String()
	if err := writeIdentity(path, id, recipient); err != nil {
		return err
	}
	if a.json {
		a.emit(keygenDoc{IdentityFile: path, Recipient: recipient})
		return nil
	}
	fmt.Fprintf(a.err, "wrote a new identity to %s (mode 0600); keep it secret and back it up\n", path)
	a.printf("%s\n", recipient)
	return nil
}

// keygenToStdout writes a new identity to stdout, as age-keygen does,
// and its recipient to stderr.
func (a *app) keygenToStdout() error {
	if a.json {
		return usagef("keygen: -o - writes the identity to stdout, where --json writes its document; give -o FILE")
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	recipient := id.Recipient().String()
	// a.data: the identity is the output asked for, not to be redacted.
	if _, err := fmt.Fprintf(a.data, "# created: %s\n# public key: %s\n%s\n", time.Now().Format(time.RFC3339), recipient, id.String()); err != nil {
		return fmt.Errorf("keygen: writing to stdout: %w", err)
	}
	a.say("note", "Public key: "+recipient, "recipient", recipient)
	return nil
}

// writeIdentity creates path (failing if it exists) with the identity in
// age-keygen's format, and syncs it.
func writeIdentity(path string, id *age.X25519Identity, recipient string) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("keygen: %s already exists; refusing to overwrite an identity", path)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("keygen: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	_, err = fmt.Fprintf(f, "# created: %s\n# public key: %s\n%s\n",
		time.Now().Format(time.RFC3339), recipient, id.String())
	if err != nil {
		return fmt.Errorf("keygen: %w", err) // "write PATH: …"
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("keygen: %w", err) // "sync PATH: …"
	}
	return nil
}
