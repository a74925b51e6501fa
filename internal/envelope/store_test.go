package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestStoreID_TextForm_RoundTripsAndRefusesGarbage(t *testing.T) {
	id := NewStoreID()
	if id.IsZero() || id == NewStoreID() {
		t.Fatal("NewStoreID returned the zero id or the same id twice")
	}
	s := id.String()
	if len(s) != 32 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 32 lower-case hex digits", s)
	}
	for _, in := range []string{s, strings.ToUpper(s), " " + s + "\n"} {
		if got, err := ParseStoreID(in); err != nil || got != id {
			t.Errorf("ParseStoreID(%q) = %v, %v; want %v", in, got, err, id)
		}
	}
	b, err := json.Marshal(struct{ ID StoreID }{id})
	if err != nil || !strings.Contains(string(b), `"`+s+`"`) {
		t.Fatalf("JSON = %s, %v", b, err)
	}
	var back struct{ ID StoreID }
	if err := json.Unmarshal(b, &back); err != nil || back.ID != id {
		t.Fatalf("JSON round trip = %v, %v", back.ID, err)
	}
	for _, bad := range []string{"", "abc", s[:31], s + "0", strings.Repeat("g", 32), strings.Repeat("0", 32)} {
		if _, err := ParseStoreID(bad); !errors.Is(err, ErrInvalidStoreID) {
			t.Errorf("ParseStoreID(%q) = %v, want ErrInvalidStoreID", bad, err)
		}
	}
}

func TestOpen_ObjectOfAnotherStore_ForeignStoreErrorWhateverTheKey(t *testing.T) {
	id := newX25519(t)
	a, b := NewStoreID(), NewStoreID()
	sealed := mustSeal(t, mustNew(t, []age.Identity{id}, nil, Options{StoreID: a}), "config/app", []byte("prod"))
	for what, e := range map[string]*Envelope{
		"same key":  mustNew(t, []age.Identity{id}, nil, Options{StoreID: b}),
		"other key": mustNew(t, []age.Identity{newX25519(t)}, nil, Options{StoreID: b}),
	} {
		t.Run(what, func(t *testing.T) {
			_, err := e.Open("config/app", sealed)
			var fe *ForeignStoreError
			if !errors.Is(err, ErrForeignStore) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *ForeignStoreError", err)
			}
			if fe.Object != a || fe.Envelope != b || fe.Name != "config/app" {
				t.Fatalf("ForeignStoreError = %+v", fe)
			}
			for _, want := range []string{"another store", a.String(), b.String(), `"config/app"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	_, err := mustNew(t, []age.Identity{id}, nil, Options{}).Open("config/app", sealed)
	if !errors.Is(err, ErrForeignStore) || !strings.Contains(err.Error(), "bound to no store") {
		t.Fatalf("unbound envelope: got %v, want ErrForeignStore saying it is bound to no store", err)
	}
}

func TestOpen_UnboundObjectInBoundStore_ForeignStore(t *testing.T) {
	id := newX25519(t)
	sid := NewStoreID()
	unbound := mustSeal(t, mustNew(t, []age.Identity{id}, nil, Options{}), "x", []byte("old"))
	_, err := mustNew(t, []age.Identity{id}, nil, Options{StoreID: sid}).Open("x", unbound)
	var fe *ForeignStoreError
	if !errors.As(err, &fe) || !fe.Object.IsZero() || fe.Envelope != sid || !strings.Contains(err.Error(), "belongs to no store") {
		t.Fatalf("got %v, want a *ForeignStoreError saying it belongs to no store", err)
	}
}

func TestPeekHeader_ReadsStoreIDNameAndStamp(t *testing.T) {
	sid := NewStoreID()
	stamp := Stamp{Generation: 3, Epoch: 17, Sequence: 9}
	sealed, err := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{StoreID: sid}).SealStamped(".store", []byte("{}"), stamp, Writer{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := PeekHeader(".store", sealed)
	if err != nil || h.StoreID != sid || h.Name != ".store" || h.Stamp != stamp || h.AgeRecipients != 1 {
		t.Fatalf("PeekHeader = %+v, %v", h, err)
	}
	// Unauthenticated: a changed store id is reported as it is.
	bad := bytes.Clone(sealed)
	bad[offStoreID] ^= 1
	if h, err := PeekHeader(".store", bad); err != nil || h.StoreID == sid {
		t.Fatalf("PeekHeader of a changed id = %+v, %v; want the changed id", h, err)
	}
	for _, b := range [][]byte{nil, []byte("CAIRNST\x04"), []byte(`{"json":1}`), sealed[:len(sealed)-1]} {
		if _, err := PeekHeader(".store", b); !isDetected(err) {
			t.Errorf("PeekHeader(%d bytes) = %v, want a typed error", len(b), err)
		}
	}
}

// The store's recorded set is what a writer seals to; an identity kept to
// read (a retired key) is neither sealed to nor writes a stanza.
func TestExactRecipients_RetiredIdentityReadsButIsNotSealedTo(t *testing.T) {
	retired, current, recovery := newX25519(t), newX25519(t), newX25519(t)
	sid := NewStoreID()
	old := mustSeal(t, mustNew(t, []age.Identity{retired}, nil, Options{StoreID: sid}), "db", []byte("v1"))

	set := []age.Recipient{current.Recipient(), recovery.Recipient()}
	e := mustNew(t, []age.Identity{current, retired}, set, Options{StoreID: sid, ExactRecipients: true})
	want := []string{current.Recipient().String(), recovery.Recipient().String()}
	slices.Sort(want)
	if got := e.Recipients(); !slices.Equal(got, want) {
		t.Fatalf("Recipients() = %v, want %v", got, want)
	}
	// It still reads what the retired key wrote; that object was sealed to
	// another set.
	got, info, err := e.OpenWithInfo("db", old)
	if err != nil || string(got) != "v1" || info.SameRecipients {
		t.Fatalf("old object: %q, %+v, %v", got, info, err)
	}
	sealed := mustSeal(t, e, "db", []byte("v2"))
	if n := sealed[offCount]; n != 1 {
		t.Fatalf("%d key stanzas, want 1 (the current key's only)", n)
	}
	if _, err := mustNew(t, []age.Identity{retired}, nil, Options{StoreID: sid}).Open("db", sealed); !errors.Is(err, ErrNoMatchingIdentity) {
		t.Fatalf("the retired key opening a new object: got %v, want ErrNoMatchingIdentity (not a recipient)", err)
	}
	if _, info, err := e.OpenWithInfo("db", sealed); err != nil || !info.SameRecipients {
		t.Fatalf("new object: %+v, %v; want sealed to the same set", info, err)
	}
	if err := Recover("db", sealed, nil, recovery); err != nil {
		t.Fatalf("the recovery key of the set: %v", err)
	}
	// A writer none of whose identities is in the set cannot seal.
	outsider := mustNew(t, []age.Identity{retired}, set, Options{StoreID: sid, ExactRecipients: true})
	if _, err := outsider.Seal("db", nil); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("Seal by a writer outside the set: got %v, want ErrInvalidIdentity", err)
	}
}

// A store whose recorded set is "scrypt" reopens with the passphrase.
func TestExactRecipients_ScryptTextRoundTrips(t *testing.T) {
	pass := newTestPassphrase(t, "correct horse battery staple", 10)
	sid := NewStoreID()
	first := mustNew(t, []age.Identity{pass}, nil, Options{StoreID: sid})
	var set []age.Recipient
	for _, s := range first.Recipients() {
		r, err := ParseRecipient(s)
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, r)
	}
	e := mustNew(t, []age.Identity{pass}, set, Options{StoreID: sid, ExactRecipients: true})
	sealed := mustSeal(t, e, "x", []byte("v"))
	if _, info, err := first.OpenWithInfo("x", sealed); err != nil || !info.SameRecipients {
		t.Fatalf("%+v, %v", info, err)
	}
}

func TestRecover_ReportsWhyItFails(t *testing.T) {
	writer, recovery := newX25519(t), newX25519(t)
	sealed := mustSeal(t, mustNew(t, []age.Identity{writer}, []age.Recipient{recovery.Recipient()}, Options{}), "db", []byte("rows"))
	var out bytes.Buffer
	if err := Recover("db", sealed, &out, recovery); err != nil || out.String() != "rows" {
		t.Fatalf("Recover = %q, %v", out.String(), err)
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	cases := map[string]struct {
		object []byte
		id     age.Identity
		want   error
	}{
		"wrong key":      {sealed, newX25519(t), ErrNoMatchingIdentity},
		"damaged":        {bad, recovery, ErrTampered},
		"truncated":      {sealed[:len(sealed)-1], recovery, ErrTruncated},
		"not a envelope": {[]byte("hello"), recovery, ErrNotEnvelope},
	}
	for what, c := range cases {
		t.Run(what, func(t *testing.T) {
			var out bytes.Buffer
			err := Recover("db", c.object, &out, c.id)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `"db"`) {
				t.Fatalf("got %v, want %v naming the object", err, c.want)
			}
			if out.Len() > 0 && what != "damaged" {
				t.Fatalf("wrote %d bytes of plaintext on failure", out.Len())
			}
		})
	}
	var noMatch *age.NoIdentityMatchError
	if err := Recover("db", sealed, nil, newX25519(t)); !errors.As(err, &noMatch) {
		t.Fatalf("wrong key: %v does not wrap *age.NoIdentityMatchError", err)
	}
}
