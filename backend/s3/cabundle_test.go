package s3_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/testutil/versitygw"
)

// Many hosts set AWS_CA_BUNDLE (a corporate or sandbox CA). The SDK can only
// apply it to its own buildable HTTP client; New must leave room for that
// when the caller gives no client, and still connect.
func TestNew_DefaultClientWithAWSCABundle_ConnectsThroughTheStandardChain(t *testing.T) {
	srv := versitygw.Start(t)
	bucket := srv.NewBucket(t)

	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, testCA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := srv.Options(bucket)
	opts.Credentials = nil // the standard AWS chain, where AWS_CA_BUNDLE applies
	b, err := s3.NewBackend(ctx, opts)
	if err != nil {
		t.Fatalf("New with AWS_CA_BUNDLE set: %v", err)
	}
	defer b.Close()
	if _, err := b.Put(ctx, "k", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

// testCA returns a freshly made self-signed CA certificate in PEM: a
// well-formed bundle that plays no part in the (plain HTTP) connection.
func testCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cairn-state test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
