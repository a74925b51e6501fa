package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
)

// Streaming (docs/adr/0046-large-values-stream.md): a large value goes
// between the caller and the storage through a temporary file holding its
// sealed bytes — never its plaintext — so that neither a write nor a read
// holds it whole in memory. The file is made in [os.TempDir] (TMPDIR),
// readable only by its owner, and unlinked as soon as it is made, so that
// nothing is left behind by a crash; it takes the sealed size on that
// file system while the call runs.

// upload is a value sealed into a temporary file by prepare, to be
// written once by putUpload (internal/storeadmin's Prepare, PutUpload). Close it when done; it is not safe
// for concurrent use.
type upload struct {
	c         *core
	name, key string
	spool     *os.File
	sealing   *envelope.Sealing // nil for a store with another Sealer
	data      []byte            // the plaintext, for a store with another Sealer
	plaintext int64
	used      bool
}

// Plaintext is the number of plaintext bytes read from the reader.
func (u *upload) Plaintext() int64 { return u.plaintext }

// Close releases the temporary file.
func (u *upload) Close() error {
	if u.spool == nil {
		return nil
	}
	return u.spool.Close()
}

// PutReader seals what r yields, to its end, and writes it as name's
// object, as [Store.Put] writes a byte slice (same conditions, fences and
// errors) without holding the value in memory: it seals the value into an
// unlinked temporary file, then writes it.
func (s *Store) PutReader(ctx context.Context, name string, r io.Reader, opts PutOptions) (Info, error) {
	u, err := s.prepare(ctx, name, r)
	if err != nil {
		return Info{}, err
	}
	defer u.Close()
	return s.putUpload(ctx, u, opts)
}

// prepare reads r to its end and seals it for name into a temporary file
// (only the header, stamped with the write that sends it, is left for
// putUpload to write): what can take long — a slow pipe — is done
// before the caller takes the lock its write needs. It fails with a
// *storemeta.NameError, with ErrTooLarge as soon as the sealed value is
// over the maximum object size, with an error wrapping r's when a read
// fails, and with ctx's error once ctx is done (checked between reads). Through a
// store opened with a Sealer other than a connected store's, the value is
// read into memory and sealed by PutUpload.
func (s *Store) prepare(ctx context.Context, name string, r io.Reader) (*upload, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, fmt.Errorf("store: put: %w", err)
	}
	u := &upload{c: s.c, name: name, key: key}
	limited := &ctxReader{ctx: ctx, r: io.LimitReader(r, s.c.maxSize+1)}
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok {
		if u.data, err = io.ReadAll(limited); err != nil {
			return nil, fmt.Errorf("store: put %q: reading the value: %w", name, err)
		}
		u.plaintext = int64(len(u.data))
		if u.plaintext > s.c.maxSize {
			return nil, fmt.Errorf("store: put %q: more than %s of plaintext, over the limit: %w", name, mib(s.c.maxSize), ErrTooLarge)
		}
		return u, nil
	}
	switch {
	case name == storemeta.ManifestName:
		return nil, fmt.Errorf("store: put %q: the manifest is written only by Connect, CommitManifest and RecordMigrationLog", name)
	case ss.readOnly:
		return nil, fmt.Errorf("store: put %q: seal: %w", name, ErrNoManifest)
	case ss.env == nil:
		return nil, fmt.Errorf("store: put %q: seal: %w", name, errNoKey)
	}
	if u.spool, err = newSpool(); err != nil {
		return nil, fmt.Errorf("store: put %q: %w", name, err)
	}
	u.sealing, err = ss.env.SealTo(u.spool, name, limited)
	switch {
	case errors.Is(err, envelope.ErrTooLarge) || err == nil && u.sealing.Size() > s.c.maxSize:
		u.Close()
		return nil, fmt.Errorf("store: put %q: sealed, over the %s limit: %w", name, mib(s.c.maxSize), ErrTooLarge)
	case err != nil:
		u.Close()
		return nil, fmt.Errorf("store: put %q: seal: %w", name, err)
	}
	u.plaintext = u.sealing.Plaintext()
	return u, nil
}

// putUpload writes u, prepared by prepare on this store or a view
// of it, as [Store.Put] writes (same conditions, fences and errors); the
// object is stamped here, by this view's fence. An upload is written at
// most once: a second putUpload fails.
func (s *Store) putUpload(ctx context.Context, u *upload, opts PutOptions) (_ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opPut, time.Now(), &err)
	}
	switch {
	case u.c != s.c:
		return Info{}, fmt.Errorf("store: put %q: the upload was prepared by another store", u.name)
	case u.used:
		return Info{}, fmt.Errorf("store: put %q: the upload was already written", u.name)
	}
	u.used = true
	if u.sealing == nil {
		return s.put(ctx, u.key, u.name, u.data, opts)
	}
	if (opts.IfAbsent || opts.IfVersion != "") && !s.conditionalWrites() {
		return Info{}, fmt.Errorf("store: put %q: conditional write on a backend without compare-and-swap: %w", u.name, ErrUnsupported)
	}
	if err := s.checkFences("put", u.name); err != nil {
		return Info{}, err
	}
	stamp := s.stamp(s.c.sealer.(*storeSealer).generation())
	if err := u.sealing.Finish(stamp, s.writerFor(stamp.Epoch)); err != nil {
		return Info{}, fmt.Errorf("store: put %q: seal: %w", u.name, err)
	}
	size := u.sealing.Size()
	w := write{op: "put", key: u.key, name: u.name, body: u.spool, size: size, put: opts}
	if s.keepsHistory(u.name) {
		info, err := s.putKept(ctx, w, stamp, nil)
		if err != nil {
			return Info{}, err
		}
		info.ID = idOf(stamp)
		return info, nil
	}
	obj, err := s.send(ctx, w)
	if err != nil {
		return Info{}, err
	}
	s.c.metrics.moved(ctx, dirWrite, int(size))
	info := s.info(u.name, obj)
	info.ID = idOf(stamp)
	return info, nil
}

// GetReader reads one object into a temporary file and returns a reader
// of its plaintext, as [Store.Get] returns it whole (same errors, when it
// returns), without holding it in memory. Everything but the payload is
// authenticated before it returns; the payload is authenticated 64 KiB
// chunk by chunk, each before any of it is returned
// ([envelope.Envelope.OpenReaderAt]). What a caller sees of an object
// altered or cut in storage: GetReader fails (ErrUnreadable, wrapping
// envelope.ErrTruncated or envelope.ErrTampered) when the cut or the
// change is caught before the payload — always for a content-bound
// object, one sealed to more than one recipient, whose whole age file is
// hashed first — or Read fails with an error wrapping ErrUnreadable and
// envelope.ErrTampered once it reaches the altered chunk, after the
// chunks before it. Read returns io.EOF only after the object's final
// chunk authenticated: never short data silently. Close releases the
// temporary file.
func (s *Store) GetReader(ctx context.Context, name string) (_ io.ReadCloser, _ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &err)
	}
	key, err := s.key(name)
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get: %w", err)
	}
	if s.strictFor(name) {
		// Options.RejectRollback compares the object with its history:
		// through Get, in memory.
		plain, info, err := s.getStrict(ctx, key, name)
		if err != nil {
			return nil, Info{}, err
		}
		return io.NopCloser(bytes.NewReader(plain)), info, nil
	}
	rc, obj, err := s.getWithin(ctx, key, name)
	if err != nil {
		return nil, Info{}, err
	}
	defer rc.Close()
	spool, err := newSpool()
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get %q: %w", name, err)
	}
	ok := false
	defer func() {
		if !ok {
			spool.Close()
		}
	}()
	n, err := io.Copy(spool, io.LimitReader(rc, s.c.maxSize+1))
	switch {
	case err != nil:
		return nil, Info{}, s.wrap("get", name, err)
	case n > s.c.maxSize:
		return nil, Info{}, s.overRead(name, obj)
	}
	s.c.metrics.moved(ctx, dirRead, int(n))
	var (
		r      io.Reader
		opened envelope.Opened
	)
	if ss, is := s.c.sealer.(*storeSealer); is {
		r, opened, err = ss.openReaderAt(name, spool, n)
	} else {
		var plain []byte
		if plain, err = io.ReadAll(io.NewSectionReader(spool, 0, n)); err == nil {
			plain, err = s.c.sealer.Open(name, plain)
		}
		r = bytes.NewReader(plain)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get %q: %w: %w", name, ErrUnreadable, err)
	}
	info := s.info(name, obj)
	info.ID = idOf(opened.Stamp)
	ok = true
	return &plainReader{r: r, spool: spool, name: name}, info, nil
}

// openReaderAt is openWithInfo for an object in a file.
func (ss *storeSealer) openReaderAt(name string, sealed io.ReaderAt, size int64) (io.Reader, envelope.Opened, error) {
	env, err := ss.opener(name)
	if err != nil {
		return nil, envelope.Opened{}, err
	}
	r, opened, err := env.OpenReaderAt(name, sealed, size)
	if err == nil {
		err = ss.checkStamp(name, opened)
	}
	if err != nil {
		return nil, envelope.Opened{}, err
	}
	return r, opened, nil
}

// plainReader is GetReader's reader: its errors name the object, and
// those of the object's bytes wrap ErrUnreadable.
type plainReader struct {
	r     io.Reader
	spool *os.File
	name  string
}

func (p *plainReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, envelope.ErrTampered) || errors.Is(err, envelope.ErrTruncated):
		return n, fmt.Errorf("store: get %q: %w: %w", p.name, ErrUnreadable, err)
	default:
		return n, fmt.Errorf("store: get %q: %w", p.name, err)
	}
}

func (p *plainReader) Close() error { return p.spool.Close() }

// newSpool makes an unlinked temporary file (see "Streaming" above).
func newSpool() (*os.File, error) {
	f, err := os.CreateTemp("", "cairn-state-spool-*")
	if err != nil {
		return nil, fmt.Errorf("making a spool file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("unlinking the spool file: %w", err)
	}
	return f, nil
}

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
