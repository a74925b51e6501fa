package envelope

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// Open checks the age header with age's own parser and decrypts the
// payload itself, with the file key already known, instead of through
// age.Decrypt: age's reader allocates two 64 KiB chunk buffers per file,
// which dominates opening a small object. The header goes through age's
// own parser ([age.ExtractHeader]: its syntax and limits), must be exactly
// age's encoding of what it parsed, and its MAC is checked as age checks it,
// so an object that opens here has an age header the stock age tool
// accepts; the payload is decrypted per the
// age-encryption.org/v1 specification (64 KiB STREAM chunks), as age's
// reader does, which the tests and FuzzOpen check against age.Decrypt.
// Sealing goes through age.Encrypt.
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

// splitAge splits an age file into its header (through the MAC line) and
// its payload (nonce and chunks). The first "\n--- " is the footer: stanza
// lines start with "-> " and body lines are base64, so neither can start
// with "--- " — and if an earlier line started with "---", age's parser
// (run on the header by checkAgeHeader) would refuse it.
func splitAge(ageFile []byte) (hdr, payload []byte, err error) {
	if !bytes.HasPrefix(ageFile, []byte(ageIntro)) {
		return nil, nil, fmt.Errorf("%w: no age intro line", errAgeFormat)
	}
	i := bytes.Index(ageFile, []byte(ageFooter))
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: no header footer", errAgeFormat)
	}
	end := i + len(ageFooter) + ageMACB64Len
	if len(ageFile) < end+1 || ageFile[end] != '\n' {
		return nil, nil, fmt.Errorf("%w: bad header footer", errAgeFormat)
	}
	return ageFile[:end+1], ageFile[end+1:], nil
}

// checkAgeHeader runs age's own header parser on hdr (through
// [age.ExtractHeader], which parses and re-encodes it), requires the bytes
// to be exactly age's encoding of what it parsed, and verifies the header
// MAC under fileKey as age defines it. That is what stock age accepts:
// age computes the MAC over its re-encoding of the header, which here is the
// header itself. It returns the number of recipient stanzas.
func checkAgeHeader(hdr, fileKey []byte) (int, error) {
	canon, err := age.ExtractHeader(bytes.NewReader(hdr))
	if err != nil {
		return 0, fmt.Errorf("the stock age parser refuses its age header: %w", err)
	}
	if !bytes.Equal(canon, hdr) {
		return 0, fmt.Errorf("%w: its age header is not in age's own encoding", errAgeFormat)
	}
	if err := checkAgeMAC(hdr, fileKey); err != nil {
		return 0, err
	}
	// In age's encoding every stanza line starts with "-> " and no other
	// line can.
	return bytes.Count(hdr, []byte("\n-> ")), nil
}

// checkAgeMAC verifies the age header MAC (age-encryption.org/v1: HMAC
// under HKDF(file key, "header") of the header through "---") of hdr.
func checkAgeMAC(hdr, fileKey []byte) error {
	macStart := len(hdr) - 1 - ageMACB64Len
	var got [sha256.Size]byte
	if n, err := base64.RawStdEncoding.Strict().Decode(got[:], hdr[macStart:len(hdr)-1]); err != nil || n != sha256.Size {
		return fmt.Errorf("%w: bad header MAC encoding", errAgeFormat)
	}
	hk, err := hkdf.Key(sha256.New, fileKey, nil, ageHeaderInfo, sha256.Size)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	m := hmac.New(sha256.New, hk)
	m.Write(hdr[:macStart-1]) // through "---", without the space
	if !hmac.Equal(m.Sum(nil), got[:]) {
		return errors.New("bad age header MAC")
	}
	return nil
}

// decryptPayload decrypts an age payload (nonce, then STREAM chunks) into
// one exactly sized allocation.
func decryptPayload(rest, fileKey []byte) ([]byte, error) {
	if len(rest) < streamNonce {
		return nil, fmt.Errorf("%w: payload nonce missing", errAgeFormat)
	}
	payload := rest[streamNonce:]
	if len(payload) < chacha20poly1305.Overhead {
		return nil, fmt.Errorf("%w: payload shorter than one chunk", errAgeFormat)
	}
	p := newChunkOpener(fileKey, rest[:streamNonce])
	chunks := (len(payload) + encChunkSize - 1) / encChunkSize
	out := make([]byte, 0, len(payload)-chunks*chacha20poly1305.Overhead)
	for len(payload) > 0 {
		n := min(len(payload), encChunkSize)
		var err error
		if out, err = p.open(out, payload[:n], n == len(payload)); err != nil {
			return nil, err
		}
		payload = payload[n:]
	}
	return out, nil
}

// chunkOpener opens the STREAM chunks of one age payload in order.
type chunkOpener struct {
	aead  cipher.AEAD
	nonce [chacha20poly1305.NonceSize]byte
	chunk int
}

// newChunkOpener derives the payload key from the file key and the
// payload's nonce.
func newChunkOpener(fileKey, nonce []byte) *chunkOpener {
	pk, err := hkdf.Key(sha256.New, fileKey, nonce, payloadLabel, chacha20poly1305.KeySize)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	aead, err := chacha20poly1305.New(pk)
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	return &chunkOpener{aead: aead}
}

// open authenticates and decrypts the next chunk (the final one when
// last), appending its plaintext to dst.
func (p *chunkOpener) open(dst, chunk []byte, last bool) ([]byte, error) {
	if last {
		p.nonce[len(p.nonce)-1] = 1
		if len(chunk) == chacha20poly1305.Overhead && p.chunk > 0 {
			return nil, fmt.Errorf("%w: empty final chunk", errAgeFormat)
		}
	}
	if len(chunk) < chacha20poly1305.Overhead {
		return nil, fmt.Errorf("%w: chunk %d truncated", errAgeFormat, p.chunk)
	}
	out, err := p.aead.Open(dst, p.nonce[:], chunk, nil)
	if err != nil {
		return nil, fmt.Errorf("payload chunk %d does not verify", p.chunk)
	}
	p.chunk++
	incNonce(&p.nonce)
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
