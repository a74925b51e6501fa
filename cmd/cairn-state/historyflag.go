package main

import (
	"errors"
	"strconv"

	"github.com/cairnhq/state/store"
)

// envHistory holds the CLI's retention when --history is not given:
// how many versions of each name a write keeps (0: history off). It is
// the CLI's, like --history (docs/adr/0057): an application sets
// state.Config.History.
const envHistory = "CAIRN_STATE_HISTORY"

// historyFlag is --history N: how many versions of each name a write
// keeps, the current one included; 0 turns history off. set reports
// whether it was given (on the command line or by $CAIRN_STATE_HISTORY):
// unset means the store's default.
type historyFlag struct {
	n   int
	set bool
}

func (h *historyFlag) String() string {
	if h == nil || !h.set {
		return ""
	}
	return strconv.Itoa(h.n)
}

// Set parses N: a whole number, 0 or more.
func (h *historyFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return errors.New("want a whole number of versions to keep per name, 0 to turn history off")
	}
	h.n, h.set = n, true
	return nil
}

// option is the retention as store.Options.History has it: 0 (the
// default) when unset, store.NoHistory for 0.
func (h historyFlag) option() int {
	switch {
	case !h.set:
		return 0
	case h.n == 0:
		return store.NoHistory
	}
	return h.n
}
