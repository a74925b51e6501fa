package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/setup"
)

// identityFacts are an identity line's: the file, never its contents.
type identityFacts struct {
	Mode       string   `json:"mode,omitempty"` // permission bits, octal
	Error      string   `json:"error,omitempty"`
	File       string   `json:"file,omitempty"`
	Identities int      `json:"identities,omitempty"`
	Recipients []string `json:"recipients,omitempty"`
}

// checkIdentities checks each configured identity file: it exists, only
// its owner may read it, and it parses. Its contents are never shown;
// the recipients (public) are.
func (d *doctor) checkIdentities(context.Context) {
	if len(d.a.identities) == 0 {
		d.add(checkIdentity, statusWarn, "no identity configured: the storage was checked, not whether a key opens the store",
			"pass --identity FILE (or set CAIRN_STATE_IDENTITY) to check the key the application uses", nil)
		return
	}
	d.keysOK = true
	for _, path := range d.a.identities {
		f := &identityFacts{File: path}
		file, err := setup.ReadIdentityFile(path)
		if err != nil {
			d.keysOK = false
			f.Error = err.Error()
			hint := "give the file age-keygen or cairn-state keygen wrote, or an SSH private key"
			switch {
			case errors.Is(err, os.ErrNotExist):
				hint = "fix the path, or create a new identity with cairn-state keygen -o FILE (a new key cannot open an existing store)"
			case errors.Is(err, setup.ErrNotRegularFile):
				hint = "give the path of the identity file itself"
			case errors.Is(err, os.ErrPermission):
				hint = "check the file's permissions"
			}
			d.add(checkIdentity, statusFail, err.Error(), hint, f)
			continue
		}
		f.Mode = fmt.Sprintf("%04o", file.Mode)
		if file.OpenToOthers() {
			d.keysOK = false
			d.add(checkIdentity, statusFail, fmt.Sprintf("%s has mode %04o: a secret key must not be accessible by group or others, and the CLI refuses it", path, file.Mode),
				"chmod 600 "+path, f)
			continue
		}
		ids := file.Identities
		for _, id := range ids {
			if r, err := envelope.RecipientOf(id); err == nil {
				if s, err := envelope.RecipientString(r); err == nil {
					f.Recipients = append(f.Recipients, s)
				}
			}
		}
		f.Identities = len(ids)
		d.keys = append(d.keys, ids...)
		n := "1 identity"
		if len(ids) != 1 {
			n = fmt.Sprintf("%d identities", len(ids))
		}
		finding := fmt.Sprintf("%s: %s, mode %s", path, n, f.Mode)
		if len(f.Recipients) > 0 {
			finding += ", recipient " + strings.Join(f.Recipients, ", ")
		}
		d.add(checkIdentity, statusOK, finding, "", f)
	}
}
