package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

var sentinels = []error{ErrTooLarge, ErrNotEnvelope, ErrTruncated, ErrTampered, ErrNoMatchingIdentity, ErrNameMismatch, ErrForeignStore}

// typed reports whether err carries one of the package's sentinels.
func typed(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// fileKeyFor recovers the file key Open used for an object it accepted:
// from a writer's stanza, or, for an unauthenticated open, from a recovery
// identity.
func fileKeyFor(t *testing.T, e *Envelope, name string, object []byte, info Opened) []byte {
	t.Helper()
	hdr, err := parseHeader(name, object)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Unauthenticated {
		_, fk, found, err := e.unwrapWriter(name, hdr)
		if err != nil || !found {
			t.Fatalf("an authenticated open without a stanza of ours (found=%v, %v)", found, err)
		}
		return fk
	}
	ageHdr, _, err := splitAge(hdr.age)
	if err != nil {
		t.Fatal(err)
	}
	fk, err := age.DecryptHeader(ageHdr, e.recovery...)
	if err != nil {
		t.Fatalf("an unauthenticated open whose file key no recovery identity gives: %v", err)
	}
	return fk
}

// fuzzOpenSetup seeds f with the test vectors and returns the envelopes
// the open fuzzers try: bound and unbound, with and without a recovery
// identity.
func fuzzOpenSetup(f *testing.F) []*Envelope {
	paths, err := filepath.Glob("testdata/vectors/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		v := parseVector(&testing.T{}, p)
		f.Add(v.name, v.object)
	}
	var ids []age.Identity
	for _, k := range []string{"alice.txt", "bob.txt"} {
		got, err := LoadIdentityFile(filepath.Join("testdata/keys", k))
		if err != nil {
			f.Fatal(err)
		}
		ids = append(ids, got...)
	}
	recovery, err := LoadIdentityFile("testdata/keys/recovery.txt")
	if err != nil {
		f.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	var envs []*Envelope
	for _, o := range []Options{
		{},
		{StoreID: vectorStoreA},
		{Recovery: recovery, Logger: quiet},
		{StoreID: vectorStoreA, Recovery: recovery, Logger: quiet},
	} {
		e, err := New(ids, nil, o)
		if err != nil {
			f.Fatal(err)
		}
		envs = append(envs, e)
	}
	return envs
}

// FuzzOpenReaderAt feeds the same hostile objects to OpenReaderAt: it
// must not panic, and must agree with OpenWithInfo — the same plaintext
// and Opened when that opens, and a typed error (from OpenReaderAt or
// from a Read, never io.EOF early) when it does not.
func FuzzOpenReaderAt(f *testing.F) {
	envs := fuzzOpenSetup(f)
	f.Fuzz(func(t *testing.T, name string, object []byte) {
		for _, e := range envs {
			pt, info, err := e.OpenWithInfo(name, object)
			r, sinfo, serr := e.OpenReaderAt(name, bytes.NewReader(object), int64(len(object)))
			var spt []byte
			if serr == nil {
				spt, serr = io.ReadAll(r)
			}
			switch {
			case err == nil && serr != nil:
				t.Fatalf("Open opens it, OpenReaderAt fails: %v", serr)
			case err == nil && (!bytes.Equal(pt, spt) || info != sinfo):
				t.Fatalf("OpenReaderAt read %d bytes and %+v, Open %d bytes and %+v", len(spt), sinfo, len(pt), info)
			case err != nil && serr == nil:
				t.Fatalf("Open fails (%v), OpenReaderAt reads %d bytes to the end", err, len(spt))
			case err != nil:
				if !typed(serr) {
					t.Fatalf("untyped error: %v", serr)
				}
			}
		}
	})
}

// FuzzOpen feeds hostile objects to Open, with envelopes bound and
// unbound, with and without a recovery identity: it must not panic; every
// failure must carry one of the package's sentinel errors; a success must
// be for the name asked and the envelope's store, report the header's
// stamp, agree with what OpenHeader reads from the same bytes, and stock
// age (age.Decrypt, with the file key Open used) must read the same
// plaintext from the age part. OpenHeader, on every input, must not panic
// and must fail with a sentinel.
func FuzzOpen(f *testing.F) {
	envs := fuzzOpenSetup(f)
	f.Fuzz(func(t *testing.T, name string, object []byte) {
		for _, e := range envs {
			pt, info, err := e.OpenWithInfo(name, object)
			hinfo, herr := e.OpenHeader(name, object, int64(len(object)))
			if herr != nil && !typed(herr) {
				t.Fatalf("OpenHeader: untyped error: %v", herr)
			}
			if err == nil && (herr != nil || hinfo != info) {
				t.Fatalf("Open = %+v; OpenHeader of the same bytes = %+v, %v", info, hinfo, herr)
			}
			if err != nil {
				if !typed(err) {
					t.Fatalf("untyped error: %v", err)
				}
				continue
			}
			hdr, perr := parseHeader(name, object)
			if perr != nil || hdr.name != name {
				t.Fatalf("opened an object whose header does not parse or names another object (%v)", perr)
			}
			if len(pt) >= len(object) {
				t.Fatalf("plaintext of %d bytes from an object of %d", len(pt), len(object))
			}
			if info.StoreID != hdr.storeID || info.Stamp != hdr.stamp {
				t.Fatalf("Opened %+v disagrees with the header (store %s, stamp %+v)", info, hdr.storeID, hdr.stamp)
			}
			if hdr.storeID != e.storeID {
				t.Fatalf("envelope of store %s opened an object of store %s", e.storeID, hdr.storeID)
			}
			if info.Unauthenticated && len(e.recovery) == 0 {
				t.Fatal("an unauthenticated open without a recovery identity")
			}
			fk := fileKeyFor(t, e, name, object, info)
			r, err := age.Decrypt(bytes.NewReader(hdr.age), age.NewInjectedFileKeyIdentity(fk))
			if err != nil {
				t.Fatalf("Open accepted an age file stock age refuses: %v", err)
			}
			stock, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("Open accepted an age payload stock age refuses: %v", err)
			}
			if !bytes.Equal(stock, pt) {
				t.Fatal("stock age reads another plaintext than Open")
			}
		}
	})
}

// FuzzSealOpen checks that whatever is sealed opens back, with its stamp
// and writer, under its name and in its store only, that its header alone
// says the same, that the writer's names are not in the sealed bytes, and
// that stock age recovers it.
func FuzzSealOpen(f *testing.F) {
	f.Add("apps/one/state.json", []byte(`{"a":1}`), uint64(1), uint64(7), uint64(42), "pod-a", "node-1", uint32(4242))
	f.Add("x", []byte{}, uint64(0), uint64(0), uint64(0), "", "", uint32(0))
	f.Add("ünïcode/名前", bytes.Repeat([]byte{0}, 70000), uint64(1<<63), ^uint64(0), uint64(1), strings.Repeat("i", MaxWriterLen-3), "hôte", ^uint32(0))
	f.Add("n", []byte("v"), uint64(1), uint64(2), uint64(3), strings.Repeat("x", MaxWriterLen), "y", uint32(1))
	ids, err := LoadIdentityFile("testdata/keys/alice.txt")
	if err != nil {
		f.Fatal(err)
	}
	e, err := New(ids, nil, Options{StoreID: vectorStoreA})
	if err != nil {
		f.Fatal(err)
	}
	other, err := New(ids, nil, Options{StoreID: vectorStoreB})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string, pt []byte, gen, epoch, seq uint64, instance, hostname string, pid uint32) {
		stamp := Stamp{Generation: gen, Epoch: epoch, Sequence: seq}
		writer := Writer{Instance: instance, Hostname: hostname, PID: int(pid)}
		sealed, err := e.SealStamped(name, pt, stamp, writer)
		if name == "" || len(name) > MaxNameLen || len(instance)+len(hostname) > MaxWriterLen {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Seal(%q, writer of %d bytes): got %v, want ErrInvalidName", name, len(instance)+len(hostname), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, info, err := e.OpenWithInfo(name, sealed)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("round trip: %v", err)
		}
		if info.StoreID != vectorStoreA || info.Stamp != stamp || info.Writer != writer || !info.SameRecipients || info.Unauthenticated {
			t.Fatalf("Opened = %+v", info)
		}
		n, _, err := HeaderLen(name, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if hinfo, err := e.OpenHeader(name, sealed[:n], int64(len(sealed))); err != nil || hinfo != info {
			t.Fatalf("OpenHeader = %+v, %v; Open said %+v", hinfo, err, info)
		}
		// The writer's names are not in the sealed bytes, unless they are
		// there anyway (in the name, the magic, the age header's text, a
		// run of zeros): in the same object sealed without a writer.
		anon, err := e.SealStamped(name, pt, stamp, Writer{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{instance, hostname} {
			if len(s) >= 12 && bytes.Contains(sealed, []byte(s)) && !bytes.Contains(anon, []byte(s)) {
				t.Fatalf("the sealed object carries the writer's %q in clear", s)
			}
		}
		if hdr, err := PeekHeader(name, sealed); err != nil || hdr.Stamp != stamp || hdr.StoreID != vectorStoreA || hdr.AgeRecipients != 1 {
			t.Fatalf("PeekHeader = %+v, %v", hdr, err)
		}
		if _, err := e.Open(name+"x", sealed); !errors.Is(err, ErrNameMismatch) {
			t.Fatalf("Open under another name: got %v, want ErrNameMismatch", err)
		}
		if _, err := other.Open(name, sealed); !errors.Is(err, ErrForeignStore) {
			t.Fatalf("Open in another store: got %v, want ErrForeignStore", err)
		}
		var stock bytes.Buffer
		if err := Recover(name, sealed, &stock, ids...); err != nil || !bytes.Equal(stock.Bytes(), pt) {
			t.Fatalf("Recover with stock age: %v", err)
		}
	})
}

// FuzzParseRecipient checks that no error quotes secret-looking input at
// all, and other input by at most its first 16 characters.
func FuzzParseRecipient(f *testing.F) {
	id, _ := age.GenerateX25519Identity()
	for _, s := range []string{id.String(), `"` + strings.ToLower(id.String()) + `"`, id.Recipient().String(), "ssh-ed25519 AAAA", "-----BEGIN OPENSSH PRIVATE KEY-----", "AGE-PLUGIN-X-1Q", "scrypt", "age1" + strings.Repeat("q", 100)} {
		f.Add(s)
	}
	// What errors say whatever the input: the messages of inputs of every
	// branch, whose fixed words an input may happen to contain.
	var fixed strings.Builder
	for _, s := range []string{"AGE-SECRET-KEY-1", "AGE-PLUGIN-", "-----BEGIN", "x", "age1x", "age1pq1x", "age1yubikey1x", "ssh-rsa x", "ssh-ed25519 x"} {
		_, err := ParseRecipient(s)
		fixed.WriteString(err.Error() + "\n")
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := ParseRecipient(s)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrInvalidRecipient) {
			t.Fatalf("untyped error: %v", err)
		}
		// The safe form is the one place input may appear (16 characters
		// at most, quoted); take it out, then no run of input is left.
		msg := err.Error()
		window := 8
		if secretShape(s) == "" {
			if f := safeForm(strings.TrimSpace(s)); strings.Contains(f, `"`) {
				if len(strings.TrimSpace(s)) > 16 && !strings.HasPrefix(f, fmt.Sprintf("%q…", strings.TrimSpace(s)[:16])) {
					t.Fatalf("safe form %s is not the first 16 characters", f)
				}
				msg = strings.Replace(msg, f, "", 1)
			}
		}
		for i := 0; i+window <= len(s); i++ {
			if w := s[i : i+window]; strings.Contains(msg, w) && !strings.Contains(fixed.String(), w) {
				t.Fatalf("error %q quotes %q of the input", msg, w)
			}
		}
	})
}
