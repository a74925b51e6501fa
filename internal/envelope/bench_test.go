package envelope

import (
	"bytes"
	"fmt"
	"testing"

	"filippo.io/age"
)

var benchSizes = []int{1 << 10, 4 << 10, 1 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func benchIdentity(b *testing.B) *age.X25519Identity {
	b.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// bareSeal and bareOpen are the baseline: the same X25519 recipient with
// plain age, no envelope.
func bareSeal(b *testing.B, r age.Recipient, pt []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(pt) + 1024)
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Write(pt); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func bareOpen(b *testing.B, id age.Identity, ct []byte) []byte {
	r, err := age.Decrypt(bytes.NewReader(ct), id)
	if err != nil {
		b.Fatal(err)
	}
	// Pre-sized, so the baseline does not pay for io.ReadAll's regrowth.
	var out bytes.Buffer
	out.Grow(len(ct))
	if _, err := out.ReadFrom(r); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// BenchmarkSealOpen compares a seal plus an open through the envelope
// ("envelope") with the same through bare age ("age"), per size; the ratio
// of the two is the envelope's overhead. The "+recovery" pair seals to a
// second X25519 recipient as well (content-bound envelope).
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range benchSizes {
		pt := bytes.Repeat([]byte{'x'}, size)
		b.Run("age/"+sizeName(size), func(b *testing.B) {
			id := benchIdentity(b)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bareOpen(b, id, bareSeal(b, id.Recipient(), pt))
			}
		})
		b.Run("age+recovery/"+sizeName(size), func(b *testing.B) {
			id := benchIdentity(b)
			rs := multiRecipient{id.Recipient(), benchIdentity(b).Recipient()}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bareOpen(b, id, bareSeal(b, rs, pt))
			}
		})
		for _, v := range envelopeVariants(b) {
			b.Run(v.label+sizeName(size), func(b *testing.B) {
				e := benchEnvelope(b, v.extra)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					sealed, err := e.Seal("bench/object", pt)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := e.Open("bench/object", sealed); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// envelopeVariant is an envelope configuration the benchmarks compare:
// the sub-benchmark's label, and the recipients it seals to besides its
// own identity.
type envelopeVariant struct {
	label string
	extra []age.Recipient
}

// envelopeVariants are the envelope alone and with a recovery recipient
// (content-bound: one SHA-256 pass more).
func envelopeVariants(b *testing.B) []envelopeVariant {
	return []envelopeVariant{{"envelope/", nil}, {"envelope+recovery/", []age.Recipient{benchIdentity(b).Recipient()}}}
}

// benchEnvelope is an envelope of a fresh identity that seals to extra as
// well.
func benchEnvelope(b *testing.B, extra []age.Recipient) *Envelope {
	e, err := New([]age.Identity{benchIdentity(b)}, extra, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkSeal measures sealing alone, bare age beside the envelope.
func BenchmarkSeal(b *testing.B) {
	for _, size := range benchSizes {
		pt := bytes.Repeat([]byte{'x'}, size)
		b.Run("age/"+sizeName(size), func(b *testing.B) {
			r := benchIdentity(b).Recipient()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bareSeal(b, r, pt)
			}
		})
		b.Run("envelope/"+sizeName(size), func(b *testing.B) {
			e := benchEnvelope(b, nil)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Seal("bench/object", pt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures opening alone, bare age beside the envelope, and
// the envelope with a recovery recipient (content-bound: one SHA-256 pass).
func BenchmarkOpen(b *testing.B) {
	for _, size := range benchSizes {
		pt := bytes.Repeat([]byte{'x'}, size)
		b.Run("age/"+sizeName(size), func(b *testing.B) {
			id := benchIdentity(b)
			ct := bareSeal(b, id.Recipient(), pt)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bareOpen(b, id, ct)
			}
		})
		for _, v := range envelopeVariants(b) {
			b.Run(v.label+sizeName(size), func(b *testing.B) {
				e := benchEnvelope(b, v.extra)
				sealed, err := e.Seal("bench/object", pt)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Open("bench/object", sealed); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
