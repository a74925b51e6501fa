package envelope

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"filippo.io/age"
)

// streamEnvelopes are a writer alone (objects not content-bound) and a
// writer with a recovery recipient (content-bound objects).
func streamEnvelopes(t *testing.T) map[string]*Envelope {
	t.Helper()
	w, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	alone, err := New([]age.Identity{w}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	withRecovery, err := New([]age.Identity{w}, []age.Recipient{rec.Recipient()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Envelope{"writer": alone, "recovery recipient": withRecovery}
}

// sealToFile seals pt through SealTo into a fresh file and finishes it.
func sealToFile(t *testing.T, e *Envelope, name string, pt []byte, stamp Stamp) *os.File {
	t.Helper()
	return sealToFileWith(t, e, name, pt, stamp, Writer{})
}

// sealToFileWith is sealToFile with a writer.
func sealToFileWith(t *testing.T, e *Envelope, name string, pt []byte, stamp Stamp, w Writer) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s, err := e.SealTo(f, name, bytes.NewReader(pt))
	if err != nil {
		t.Fatalf("SealTo(%d bytes): %v", len(pt), err)
	}
	if s.Plaintext() != int64(len(pt)) {
		t.Errorf("Plaintext() = %d, want %d", s.Plaintext(), len(pt))
	}
	if err := s.Finish(stamp, w); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != s.Size() {
		t.Fatalf("the spool holds %v bytes (%v), Size() says %d", fi.Size(), err, s.Size())
	}
	return f
}

func fileBytes(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// What SealTo writes is what Open opens, and what SealStamped writes is
// what OpenReaderAt opens, for sizes around the 64 KiB chunk.
func TestStream_InteroperatesWithSealAndOpen(t *testing.T) {
	stamp := Stamp{Generation: 3, Epoch: 7, Sequence: 11}
	for kind, e := range streamEnvelopes(t) {
		for _, size := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 5} {
			pt := bytes.Repeat([]byte{byte(size)}, size)
			for i := range pt {
				pt[i] ^= byte(i * 7)
			}
			streamed := fileBytes(t, sealToFile(t, e, "big/value", pt, stamp))
			got, info, err := e.OpenWithInfo("big/value", streamed)
			if err != nil || !bytes.Equal(got, pt) || info.Stamp != stamp {
				t.Fatalf("%s, %d bytes: Open of SealTo's object = %d bytes, %+v, %v", kind, size, len(got), info.Stamp, err)
			}
			if hdr, _ := parseHeader("big/value", streamed); hdr.bound() != (kind != "writer") {
				t.Errorf("%s: content-bound = %v", kind, hdr.bound())
			}
			sealed, err := e.SealStamped("big/value", pt, stamp, Writer{})
			if err != nil {
				t.Fatal(err)
			}
			r, info, err := e.OpenReaderAt("big/value", bytes.NewReader(sealed), int64(len(sealed)))
			if err != nil {
				t.Fatalf("%s, %d bytes: OpenReaderAt: %v", kind, size, err)
			}
			if info.Stamp != stamp || !info.SameRecipients || info.AuthenticatedBy == "" {
				t.Errorf("%s: OpenReaderAt info %+v", kind, info)
			}
			if err := iotest.TestReader(r, pt); err != nil {
				t.Errorf("%s, %d bytes: the plaintext reader: %v", kind, size, err)
			}
		}
	}
}

// A chunk altered after the first makes Read fail with ErrTampered once
// the chunks before it were returned; a dropped final chunk, or any cut,
// fails at open: no reader ever ends early with io.EOF.
func TestOpenReaderAt_TamperedOrTruncated_ErrorNeverShortData(t *testing.T) {
	for kind, e := range streamEnvelopes(t) {
		pt := bytes.Repeat([]byte("0123456789abcdef"), 3*chunkSize/16+100) // 4 chunks
		sealed, err := e.Seal("v", pt)
		if err != nil {
			t.Fatal(err)
		}
		// Flip a byte in the third chunk.
		bad := bytes.Clone(sealed)
		bad[len(bad)-chunkSize-1000] ^= 1
		r, _, err := e.OpenReaderAt("v", bytes.NewReader(bad), int64(len(bad)))
		if kind != "writer" {
			// Content-bound: the SHA-256 of the age file catches it before
			// anything is returned.
			if !errors.Is(err, ErrTampered) {
				t.Errorf("%s: OpenReaderAt of a tampered content-bound object = %v, want ErrTampered", kind, err)
			}
		} else {
			if err != nil {
				t.Fatalf("%s: OpenReaderAt: %v", kind, err)
			}
			got, err := io.ReadAll(r)
			if !errors.Is(err, ErrTampered) {
				t.Errorf("%s: reading a tampered chunk = %v, want ErrTampered", kind, err)
			}
			if len(got) != 2*chunkSize || !bytes.Equal(got, pt[:len(got)]) {
				t.Errorf("%s: before the error the reader gave %d bytes, want the 2 authenticated chunks", kind, len(got))
			}
		}
		for _, cut := range []int{1, 16, chunkSize + 16, len(sealed) - 200} {
			short := sealed[:len(sealed)-cut]
			if _, _, err := e.OpenReaderAt("v", bytes.NewReader(short), int64(len(short))); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s: OpenReaderAt of an object cut by %d bytes = %v, want ErrTruncated", kind, cut, err)
			}
		}
		// A reader shorter than the size it is given (a spool cut under
		// it): an error, never io.EOF early.
		r, _, err = e.OpenReaderAt("v", bytes.NewReader(sealed[:len(sealed)-chunkSize]), int64(len(sealed)))
		if err == nil {
			_, err = io.ReadAll(r)
		}
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: a short spool = %v, want ErrTruncated", kind, err)
		}
		if _, _, err := e.OpenReaderAt("w", bytes.NewReader(sealed), int64(len(sealed))); !errors.Is(err, ErrNameMismatch) {
			t.Errorf("%s: OpenReaderAt under another name = %v, want ErrNameMismatch", kind, err)
		}
	}
}

// SealTo refuses, as soon as it is over, a plaintext whose object would
// exceed MaxSize, and reports a failing reader as the reader's error.
func TestSealTo_TooLargeAndFailingPlaintext(t *testing.T) {
	e := streamEnvelopes(t)["writer"]
	f, err := os.Create(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := e.SealTo(f, "v", io.LimitReader(zeros{}, MaxSize)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("SealTo of MaxSize bytes of plaintext = %v, want ErrTooLarge", err)
	}
	if fi, _ := f.Stat(); fi.Size() > MaxSize {
		t.Errorf("SealTo wrote %d bytes, more than MaxSize", fi.Size())
	}
	errRead := errors.New("the pipe broke")
	if _, err := e.SealTo(f, "v", io.MultiReader(bytes.NewReader(make([]byte, 100_000)), iotest.ErrReader(errRead))); !errors.Is(err, errRead) {
		t.Errorf("SealTo of a failing reader = %v, want its error", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
