package envelope

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"golang.org/x/crypto/chacha20poly1305"
)

// Writer names the process whose write made an object: the instance
// that held the store's lock, its host and its process id. The store
// fills it in from the fence of the writing view; the envelope seals it
// into the object's header, encrypted under a key derived from the
// object's file key, so that only a reader of the object learns it and
// the storage operator sees a field of one fixed length whatever it
// holds (docs/adr/0064-writer-sealed-in-the-header.md). The zero Writer
// is a write that names no one (an unfenced write).
type Writer struct {
	// Instance is the writing instance's id (the lock's instance id).
	Instance string
	// Hostname is the host the writing process ran on.
	Hostname string
	// PID is the writing process's id, 0 when unknown; at most 2³²−1.
	PID int
}

// MaxWriterLen is how many bytes a [Writer]'s Instance and Hostname may
// take together.
const MaxWriterLen = writerBlockLen - 6

const (
	// writerBlockLen is the writer's plaintext: len(Instance) (1 byte),
	// Instance, len(Hostname) (1 byte), Hostname, PID (4 bytes,
	// big-endian), then zeros: always this long, so that its length says
	// nothing.
	writerBlockLen  = 256
	writerSealedLen = writerBlockLen + chacha20poly1305.Overhead
)

// errWriterFormat is what a writer block that decrypts but does not
// parse is: a sealer that does not follow the format.
var errWriterFormat = errors.New("malformed writer block")

// check refuses a writer that does not fit its block.
func (w Writer) check(name string) error {
	if n := len(w.Instance) + len(w.Hostname); n > MaxWriterLen {
		return fmt.Errorf("%w: sealing object %q: its writer's instance and host names take %d bytes, more than %d", ErrInvalidName, shorten(name, 80), n, MaxWriterLen)
	}
	if w.PID < 0 || uint64(w.PID) > math.MaxUint32 {
		return fmt.Errorf("%w: sealing object %q: its writer's process id %d is out of range", ErrInvalidName, shorten(name, 80), w.PID)
	}
	return nil
}

// block encodes a checked writer into its plaintext block.
func (w Writer) block() []byte {
	b := make([]byte, 0, writerBlockLen)
	b = append(b, byte(len(w.Instance)))
	b = append(b, w.Instance...)
	b = append(b, byte(len(w.Hostname)))
	b = append(b, w.Hostname...)
	b = binary.BigEndian.AppendUint32(b, uint32(w.PID))
	return b[:writerBlockLen]
}

// parseWriter decodes a writer block, refusing anything Writer.block
// would not have written.
func parseWriter(b []byte) (Writer, error) {
	var w Writer
	if len(b) != writerBlockLen {
		return w, errWriterFormat
	}
	field := func() (string, bool) {
		n := int(b[0])
		if 1+n > len(b) {
			return "", false
		}
		s := string(b[1 : 1+n])
		b = b[1+n:]
		return s, true
	}
	var ok bool
	if w.Instance, ok = field(); !ok {
		return Writer{}, errWriterFormat
	}
	if w.Hostname, ok = field(); !ok || len(b) < 4 {
		return Writer{}, errWriterFormat
	}
	w.PID = int(binary.BigEndian.Uint32(b))
	if !bytes.Equal(b[4:], make([]byte, len(b)-4)) {
		return Writer{}, errWriterFormat
	}
	return w, nil
}

// writerAEAD is the AEAD of an object's writer block: keyed by the
// object's file key and salt under its own label.
func writerAEAD(fileKey, salt []byte) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, fileKey, salt, labelWriter, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	return chacha20poly1305.New(k)
}

// sealWriterField writes w's block, sealed under the file key, into dst
// (writerSealedLen bytes); ad is the fixed header before the field.
func sealWriterField(dst []byte, w Writer, fileKey, salt, ad []byte) {
	a, err := writerAEAD(fileKey, salt)
	if err != nil {
		panic("envelope: writer key: " + err.Error())
	}
	a.Seal(dst[:0], zeroNonce[:], w.block(), ad)
}

// openWriterField decrypts and decodes an object's writer field under its file
// key; any failure is tampering (the field is authenticated three times:
// by its tag, by the key stanzas' associated data and by the header MAC).
func openWriterField(name string, hdr *header, fileKey []byte) (Writer, error) {
	a, err := writerAEAD(fileKey, hdr.salt)
	if err != nil {
		panic("envelope: writer key: " + err.Error())
	}
	plain, err := a.Open(nil, zeroNonce[:], hdr.writer, hdr.prefix[:offWriter])
	if err != nil {
		return Writer{}, fmt.Errorf("%w: object %q: its writer field does not verify", ErrTampered, name)
	}
	w, err := parseWriter(plain)
	if err != nil {
		return Writer{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	return w, nil
}
