package s3

import (
	"fmt"
	"io"
	"sync"

	"github.com/cairnhq/state/internal/driver"
)

var _ driver.BodyPutter = (*s3Backend)(nil)

// attemptBody is the body of one PutObject attempt: a reader of its own
// over the caller's body, seekable (the SDK reads it to compute the
// payload's SHA-256 for the signature, then seeks back), that records why
// the body failed, if it did — a failed or short body is the caller's
// error, not the server's answer.
type attemptBody struct {
	r    *io.SectionReader
	size int64

	mu  sync.Mutex // an abandoned attempt's transport may still read
	err error
}

func newAttemptBody(body io.ReaderAt, size int64) *attemptBody {
	return &attemptBody{r: io.NewSectionReader(body, 0, size), size: size}
}

func (a *attemptBody) Read(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, err := a.r.Read(p)
	switch pos, _ := a.r.Seek(0, io.SeekCurrent); {
	case err == io.EOF && pos < a.size:
		err = fmt.Errorf("reading the body: %w after %d of %d bytes", io.ErrUnexpectedEOF, pos, a.size)
		a.err = err
	case err != nil && err != io.EOF:
		err = fmt.Errorf("reading the body at byte %d: %w", pos, err)
		a.err = err
	}
	return n, err
}

func (a *attemptBody) Seek(offset int64, whence int) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.r.Seek(offset, whence)
}

// failed is the body's error, nil when every read succeeded.
func (a *attemptBody) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
