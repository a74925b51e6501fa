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
// file with mode 0600 and prints its recipient. The identity itself is never
// printed: without -o it goes to the first --identity (or
// CAIRN_STATE_IDENTITY) path, else to ./cairn-state-identity.txt. An
// existing file is never overwritten.
func runKeygen(_ context.Context, a *app, args []string) error {
	fs := a.flags("keygen")
	out := fs.String("o", "", "write the identity to `FILE` (default: the first --identity, else ./cairn-state-identity.txt); an existing file is never overwritten")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
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
