package envelope

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// Streaming: a large object is sealed into and opened from a file (an
// [io.WriterAt], an [io.ReaderAt]) chunk by chunk, never held whole in
// memory. The format is the same as Seal's and Open's
// (docs/adr/0046-large-values-stream.md).

// maxAgeHeaderLen bounds the age header an object may have: 64 stanzas of
// the largest kind (post-quantum hybrid, about 1.6 KB each) fit with room.
const maxAgeHeaderLen = 256 << 10

// Sealing is an object sealed by [Envelope.SealTo] whose envelope header
// is not written yet: [Sealing.Finish] writes it, with the [Stamp] and the
// [Writer] of the write that sends it. Until then the object does not
// open. It holds the object's file key in memory until Finish.
type Sealing struct {
	e           *Envelope
	dst         io.WriterAt
	name        string
	h           int
	total       int64
	plaintext   int64
	contentHash []byte
	fileKey     []byte
}

// Size is the sealed object's length in bytes, header included.
func (s *Sealing) Size() int64 { return s.total }

// Plaintext is the number of plaintext bytes sealed.
func (s *Sealing) Plaintext() int64 { return s.plaintext }

// Finish writes the envelope header, bound to stamp and sealing writer,
// at offset 0 of the destination: the object is then complete, the Size
// bytes at the start of the destination. It fails as
// [Envelope.SealStamped] does for a writer that does not fit its field
// (the file key is kept: Finish can be called again). Once it succeeded
// or failed writing, it forgets the file key and cannot be called again.
func (s *Sealing) Finish(stamp Stamp, writer Writer) error {
	if s.fileKey == nil {
		return fmt.Errorf("envelope: sealing object %q: already finished", s.name)
	}
	if err := writer.check(s.name); err != nil {
		return err
	}
	defer func() { clear(s.fileKey); s.fileKey = nil }()
	hdr := make([]byte, s.h)
	s.e.fillHeader(hdr, s.name, s.total, s.contentHash, s.fileKey, stamp, writer)
	if _, err := s.dst.WriteAt(hdr, 0); err != nil {
		return fmt.Errorf("envelope: sealing object %q: writing its header: %w", s.name, err)
	}
	return nil
}

// SealTo encrypts what plaintext yields, up to its end, bound to name and
// to the envelope's store id, into dst from offset 0, as
// [Envelope.SealStamped] seals a byte slice — in 64 KiB chunks, holding
// none of it whole — and returns the [Sealing] whose Finish writes the
// header that makes it an object. It fails as SealStamped does
// ([ErrInvalidName], [ErrInvalidIdentity], [ErrTooLarge] as soon as the
// object would exceed [MaxSize]), with an error wrapping plaintext's when
// a read fails, and with an error wrapping dst's when a write fails; dst
// then holds no object.
func (e *Envelope) SealTo(dst io.WriterAt, name string, plaintext io.Reader) (*Sealing, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if len(e.sealers) == 0 {
		return nil, fmt.Errorf("envelope: sealing object %q: %w: none of the configured identities can authenticate objects sealed to this recipient set", name, ErrInvalidIdentity)
	}
	h := headerLen(len(name), len(e.sealers))
	w := &sealWriter{w: io.NewOffsetWriter(dst, int64(h)), hash: sha256.New(), limit: int64(MaxSize - h), name: name}
	var fileKey []byte
	rs := slices.Clone(e.recipients)
	rs[0] = captureRecipient{Recipient: rs[0], fileKey: &fileKey}
	w.capture = true // age.Encrypt writes the age header and the payload nonce
	aw, err := age.Encrypt(w, rs...)
	if err != nil {
		return nil, fmt.Errorf("envelope: sealing object %q: %w", name, err)
	}
	w.capture = false
	if len(fileKey) != fileKeyLen {
		return nil, fmt.Errorf("envelope: sealing object %q: age did not hand out a file key", name)
	}
	ok := false
	defer func() {
		if !ok {
			clear(fileKey)
		}
	}()
	ageStanzas := countAgeStanzas(w.head)
	pr := &plaintextReader{r: plaintext}
	n, err := io.Copy(aw, pr)
	if err == nil {
		err = aw.Close()
	}
	switch {
	case pr.err != nil:
		return nil, fmt.Errorf("envelope: sealing object %q: reading the plaintext: %w", name, pr.err)
	case err != nil:
		return nil, err
	}
	s := &Sealing{e: e, dst: dst, name: name, h: h, total: int64(h) + w.n, plaintext: n, fileKey: fileKey}
	if len(e.sealers) > 1 || ageStanzas != 1 {
		s.contentHash = w.hash.Sum(nil)
	}
	ok = true
	return s, nil
}

// sealWriter writes the age file after the header's room, hashing it and
// refusing to grow past limit; while capture is set it also keeps what is
// written (the age header).
type sealWriter struct {
	w       io.Writer
	hash    hash.Hash
	n       int64
	limit   int64
	name    string
	capture bool
	head    []byte
}

func (w *sealWriter) Write(p []byte) (int, error) {
	if w.n+int64(len(p)) > w.limit {
		return 0, fmt.Errorf("%w: sealing object %q: more than %d bytes sealed", ErrTooLarge, w.name, MaxSize)
	}
	if w.capture {
		w.head = append(w.head, p...)
	}
	n, err := w.w.Write(p)
	w.hash.Write(p[:n])
	w.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("envelope: sealing object %q: writing: %w", w.name, err)
	}
	return n, nil
}

// plaintextReader records its reader's error, to tell it from the
// destination's.
type plaintextReader struct {
	r   io.Reader
	err error
}

func (p *plaintextReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		p.err = err
	}
	return n, err
}

// OpenReaderAt authenticates an object of size bytes sealed for name, read
// from sealed (a file the caller spooled it into), and returns a reader of
// its plaintext, which decrypts it 64 KiB chunk by chunk, as
// [Envelope.OpenWithInfo] would open the same bytes, with the same errors.
//
// Before it returns, the envelope header, its authentication stanza (over
// a SHA-256 of the whole age file when the object is content-bound), the
// header MAC, the name and the age header are verified; an object shorter
// or longer than its header says fails here with [ErrTruncated] or
// [ErrTampered]. Each chunk is authenticated (age's STREAM) before any of
// its plaintext is returned, and the last one must carry STREAM's final
// flag: a chunk altered, dropped or reordered makes Read fail with an
// error wrapping [ErrTampered] after the chunks before it were returned;
// Read returns io.EOF only after the final chunk authenticated, never
// short data silently. A failed read of sealed makes Read fail with an
// error wrapping it. sealed must not change while the reader is used.
func (e *Envelope) OpenReaderAt(name string, sealed io.ReaderAt, size int64) (io.Reader, Opened, error) {
	head := make([]byte, max(0, min(size, maxHeaderLen)))
	if err := readFullAt(sealed, head, 0); err != nil {
		return nil, Opened{}, fmt.Errorf("envelope: reading object %q: %w", name, err)
	}
	hdr, err := parsePrefix(name, head, size)
	if err != nil {
		return nil, Opened{}, err
	}
	if err := e.checkBinding(name, hdr); err != nil {
		return nil, Opened{}, err
	}
	ageLen := size - hdr.ageOff
	var contentHash []byte
	if hdr.bound() {
		sum := sha256.New()
		if _, err := io.Copy(sum, io.NewSectionReader(sealed, hdr.ageOff, ageLen)); err != nil {
			return nil, Opened{}, fmt.Errorf("envelope: reading object %q: %w", name, err)
		}
		contentHash = sum.Sum(nil)
	}
	ageHead := make([]byte, min(ageLen, maxAgeHeaderLen))
	if err := readFullAt(sealed, ageHead, hdr.ageOff); err != nil {
		return nil, Opened{}, fmt.Errorf("envelope: reading object %q: %w", name, err)
	}
	ageHdr, rest, err := splitAge(ageHead)
	if err == nil && len(rest) < streamNonce {
		err = fmt.Errorf("%w: payload nonce missing", errAgeFormat)
	}
	if err != nil {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	fileKey, info, err := e.authenticate(name, hdr, ageHdr, contentHash, true)
	if err != nil {
		return nil, Opened{}, err
	}
	defer clear(fileKey)
	off := hdr.ageOff + int64(len(ageHdr)) + streamNonce
	if size-off < chacha20poly1305.Overhead {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %w: payload shorter than one chunk", ErrTampered, name, errAgeFormat)
	}
	return &payloadReader{
		name:   name,
		r:      io.NewSectionReader(sealed, off, size-off),
		left:   size - off,
		opener: newChunkOpener(fileKey, rest[:streamNonce]),
		enc:    make([]byte, encChunkSize),
	}, info, nil
}

// readFullAt fills p from r at off.
func readFullAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %d bytes at offset %d, fewer than its size says", ErrTruncated, n, off)
	}
	return err
}

// payloadReader decrypts an age payload's chunks as they are read.
type payloadReader struct {
	name   string
	r      *io.SectionReader
	left   int64
	opener *chunkOpener
	enc    []byte // one sealed chunk
	plain  []byte // the current chunk's plaintext not yet returned
	err    error  // sticky: io.EOF after the final chunk
}

func (p *payloadReader) Read(b []byte) (int, error) {
	for len(p.plain) == 0 && p.err == nil {
		p.next()
	}
	if len(p.plain) == 0 {
		return 0, p.err
	}
	n := copy(b, p.plain)
	p.plain = p.plain[n:]
	return n, nil
}

// next authenticates and decrypts the next chunk, or records why not.
func (p *payloadReader) next() {
	if p.left == 0 {
		p.err = io.EOF
		return
	}
	n := min(p.left, encChunkSize)
	if _, err := io.ReadFull(p.r, p.enc[:n]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %w", ErrTruncated, err)
		}
		p.err = fmt.Errorf("envelope: reading object %q: %w", p.name, err)
		return
	}
	plain, err := p.opener.open(p.enc[:0], p.enc[:n], n == p.left)
	if err != nil {
		p.err = fmt.Errorf("%w: object %q: %w", ErrTampered, p.name, err)
		return
	}
	p.left -= n
	p.plain = plain
}
