package locktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
)

// ageSealer is a small name-bound sealer for the suite: age to one X25519
// recipient, the state name sealed in front of the plaintext. It keeps the
// suite independent of the envelope package while still exercising real
// encryption (and a real wrong-key failure).
type ageSealer struct {
	id *age.X25519Identity
}

func newAgeSealer() (*ageSealer, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	return &ageSealer{id: id}, nil
}

func (s *ageSealer) Seal(name string, plaintext []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, s.id.Recipient())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "%d:%s", len(name), name)
	if _, err := w.Write(plaintext); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (s *ageSealer) Open(name string, sealed []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(sealed), s.id)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	prefix := fmt.Sprintf("%d:%s", len(name), name)
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return nil, fmt.Errorf("open %q: %w", name, errors.New("sealed for another name"))
	}
	return data[len(prefix):], nil
}
