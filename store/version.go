package store

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairnhq/state/internal/envelope"
)

// VersionID names one version of a state object in its history: the
// fencing epoch and write sequence of the write that made it, from the
// object's authenticated header ([Info].ID). Its text form is "E.S" in decimal
// ("7.42"): what `cairn-state history` lists and `get --version` and
// `restore` take. Ids order as the writes did, epoch first (ADR 0040);
// compare them with [VersionID.Compare], never as text.
//
// An object written through an unfenced view carries no epoch: a version
// of one kept in history is named "0.<its modification time in Unix
// milliseconds>", which orders before every fenced write.
type VersionID struct {
	Epoch    uint64
	Sequence uint64
}

// idOf returns the id of the version an object's stamp names.
func idOf(st envelope.Stamp) VersionID { return VersionID{Epoch: st.Epoch, Sequence: st.Sequence} }

// String returns "E.S".
func (v VersionID) String() string {
	return strconv.FormatUint(v.Epoch, 10) + "." + strconv.FormatUint(v.Sequence, 10)
}

// IsZero reports the zero id, "0.0": no version (or one made by an
// unfenced write, before it was kept).
func (v VersionID) IsZero() bool { return v == VersionID{} }

// Compare returns -1, 0 or +1 as v was written before, is, or was written
// after o: epochs first, then sequences.
func (v VersionID) Compare(o VersionID) int {
	if c := cmp.Compare(v.Epoch, o.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(v.Sequence, o.Sequence)
}

// ParseVersionID parses "E.S": two decimal numbers without sign, leading
// zeros or spaces. Its error names the text, which is never secret (an id
// is two numbers, or it is refused before it is quoted at length).
func ParseVersionID(s string) (VersionID, error) {
	bad := func() (VersionID, error) {
		shown := s
		if len(shown) > 48 {
			shown = shown[:48] + "…"
		}
		return VersionID{}, fmt.Errorf("version %q: want EPOCH.SEQUENCE, two decimal numbers (as `cairn-state history NAME` lists them)", shown)
	}
	e, q, ok := strings.Cut(s, ".")
	if !ok {
		return bad()
	}
	var v VersionID
	var err error
	if v.Epoch, err = parseDecimal(e); err != nil {
		return bad()
	}
	if v.Sequence, err = parseDecimal(q); err != nil {
		return bad()
	}
	return v, nil
}

// parseDecimal parses a uint64 written without sign or leading zeros.
func parseDecimal(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' || s[0] == '-' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, 64)
}
