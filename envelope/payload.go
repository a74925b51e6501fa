package envelope

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// Open decrypts the age part itself, with the file key from the
// authentication stanza, instead of through age.Decrypt: age's reader
// allocates two 64 KiB chunk buffers per file, which dominates opening a
// small object. This follows the age-encryption.org/v1 specification (header
// MAC, then the STREAM payload) and is checked against age.Decrypt in the
// tests; sealing still goes through age.Encrypt.
const (
	ageIntro      = "age-encryption.org/v1\n"
	ageFooter     = "\n--- "
	ageMACB64Len  = 43 // base64 (raw, standard) of 32 bytes
	streamNonce   = 16
	chunkSize     = 64 << 10
	encChunkSize  = chunkSize + chacha20poly1305.Overhead
	payloadLabel  = "payload"
	ageHeaderInfo = "header"
)

var errAgeFormat = errors.New("malformed age file")

// decryptAge verifies the age header MAC under fileKey and decrypts the
// payload into one exactly sized allocation.
func decryptAge(name string, ageFile, fileKey []byte) ([]byte, error) {
	pt, err := decryptAgeFile(ageFile, fileKey)
	if err != nil {
		return nil, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	return pt, nil
}

func decryptAgeFile(ageFile, fileKey []byte) ([]byte, error) {
	if !bytes.HasPrefix(ageFile, []byte(ageIntro)) {
		return nil, fmt.Errorf("%w: no age intro line", errAgeFormat)
	}
	// The first "\n--- " is the footer: stanza lines start with "-> " and
	// body lines are base64, so neither can start with "--- ". Whatever
	// precedes it is covered by the MAC checked below.
	i := bytes.Index(ageFile, []byte(ageFooter))
	if i < 0 {
		return nil, fmt.Errorf("%w: no header footer", errAgeFormat)
	}
	macStart := i + len(ageFooter)
	macEnd := macStart + ageMACB64Len
	if len(ageFile) < macEnd+1 || ageFile[macEnd] != '\n' {
		return nil, fmt.Errorf("%w: bad header footer", errAgeFormat)
	}
	var gotMAC [sha256.Size]byte
	if n, err := base64.RawStdEncoding.Strict().Decode(gotMAC[:], ageFile[macStart:macEnd]); err != nil || n != sha256.Size {
		return nil, fmt.Errorf("%w: bad header MAC encoding", errAgeFormat)
	}
	hk, err := hkdf.Key(sha256.New, fileKey, nil, ageHeaderInfo, sha256.Size)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	m := hmac.New(sha256.New, hk)
	m.Write(ageFile[:i+len("\n---")])
	if !hmac.Equal(m.Sum(nil), gotMAC[:]) {
		return nil, errors.New("bad age header MAC")
	}

	rest := ageFile[macEnd+1:]
	if len(rest) < streamNonce {
		return nil, fmt.Errorf("%w: payload nonce missing", errAgeFormat)
	}
	pk, err := hkdf.Key(sha256.New, fileKey, rest[:streamNonce], payloadLabel, chacha20poly1305.KeySize)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	aead, err := chacha20poly1305.New(pk)
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	payload := rest[streamNonce:]
	if len(payload) < chacha20poly1305.Overhead {
		return nil, fmt.Errorf("%w: payload shorter than one chunk", errAgeFormat)
	}
	chunks := (len(payload) + encChunkSize - 1) / encChunkSize
	out := make([]byte, 0, len(payload)-chunks*chacha20poly1305.Overhead)
	var nonce [chacha20poly1305.NonceSize]byte
	for c := 0; len(payload) > 0; c++ {
		n := min(len(payload), encChunkSize)
		last := n == len(payload)
		if last {
			nonce[len(nonce)-1] = 1
			if n == chacha20poly1305.Overhead && c > 0 {
				return nil, fmt.Errorf("%w: empty final chunk", errAgeFormat)
			}
		}
		if n < chacha20poly1305.Overhead {
			return nil, fmt.Errorf("%w: chunk %d truncated", errAgeFormat, c)
		}
		out, err = aead.Open(out, nonce[:], payload[:n], nil)
		if err != nil {
			return nil, fmt.Errorf("payload chunk %d does not verify", c)
		}
		payload = payload[n:]
		incNonce(&nonce)
	}
	return out, nil
}

// incNonce increments the 11-byte big-endian chunk counter.
func incNonce(n *[chacha20poly1305.NonceSize]byte) {
	for i := len(n) - 2; i >= 0; i-- {
		n[i]++
		if n[i] != 0 {
			return
		}
	}
}
