// Package garageserver starts real Garage servers for tests: the node
// bring-up that testutil/garage's Start uses, and the clusters of several
// nodes that cairn-state's own tests run against ([StartCluster]: each node
// with its own ports and directories, connected, one layout with three
// copies, and per-node Kill, Stop, Pause, Resume and Restart). Users' tests
// start a single node with testutil/garage (docs/adr/0062).
//
// A cluster's URL lists every node's endpoint, so a backend opened from it
// fails over between them:
//
//	c := garageserver.StartCluster(t, 3)
//	bucket := c.NewBucket(t)
//	b := c.Backend(t, bucket)           // an s3 backend on all three nodes
//	url := c.URL(bucket, "apps/one")    // the same, for a child process (with c.Env())
//	c.Nodes[0].Kill(t)                  // SIGKILL one node; b moves on
//	oracle := c.Nodes[1].Minio(t)       // read what one node serves
//
// The binary and container are found as testutil/garage documents.
package garageserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// Version is the Garage release the tests are pinned to (the binary built
// by scripts/install-garage.sh and the container image's tag).
const Version = "2.5.0"

// Image is the container image used when no binary is found and a Docker
// engine answers.
const Image = "dxflrs/garage:v" + Version

// Region is the s3_region of the test cluster; requests must be signed for
// it.
const Region = "garage"

// HowTo says how to get Garage; it is the skip message's advice.
const HowTo = "run `bash scripts/install-garage.sh` (make test does; a cargo build of garage " + Version +
	" from crates.io, cached in $HOME/.cache/cairn-state), or set GARAGE_BIN to a garage " + Version +
	" binary, or start a Docker engine so the " + Image + " image can be used"

// Config is a throwaway node's configuration (Garage v2 syntax). The nodes
// of one cluster share rpcSecret, the replication factor and opts;
// rpcPublic is the address other nodes reach this one at (none when
// empty).
func Config(metaDir, dataDir, rpcBind, rpcPublic, s3Addr, rpcSecret string, replication int, opts ClusterOptions) string {
	var extra strings.Builder
	if rpcPublic != "" {
		fmt.Fprintf(&extra, "rpc_public_addr = %q\n", rpcPublic)
	}
	if opts.ConsistencyMode != "" {
		fmt.Fprintf(&extra, "consistency_mode = %q\n", opts.ConsistencyMode)
	}
	if opts.RPCTimeout > 0 {
		fmt.Fprintf(&extra, "rpc_timeout_msec = %d\n", opts.RPCTimeout.Milliseconds())
	}
	return fmt.Sprintf(`metadata_dir = %q
data_dir = %q
db_engine = "sqlite"
replication_factor = %d
rpc_bind_addr = %q
rpc_secret = %q
%s
[s3_api]
s3_region = %q
api_bind_addr = %q
`, metaDir, dataDir, replication, rpcBind, rpcSecret, extra.String(), Region, s3Addr)
}

// CLI runs a garage command against one node.
type CLI func(ctx context.Context, args ...string) ([]byte, error)

// Setup applies a one-node layout through cli, imports a key allowed to
// create buckets (s's AccessKey and SecretKey) and waits for s's S3 port;
// the node must already answer `garage status`.
func Setup(ctx context.Context, s *testutil.S3Server, cli CLI) error {
	out, err := cli(ctx, "node", "id", "-q")
	if err != nil {
		return err
	}
	id := nodeID.FindString(string(out))
	if id == "" {
		return fmt.Errorf("garage node id: no node id in %q", out)
	}
	s.AccessKey = "GK" + RandomHex(12)
	s.SecretKey = RandomHex(32)
	for _, args := range [][]string{
		{"layout", "assign", "-z", "dc1", "-c", "1G", id},
		{"layout", "apply", "--version", "1"},
		{"key", "import", "--yes", "-n", "cairn-test", s.AccessKey, s.SecretKey},
		{"key", "allow", "--create-bucket", s.AccessKey},
	} {
		if _, err := retryTransient(ctx, cli, args...); err != nil {
			return err
		}
	}
	// The S3 API comes up with the node; wait until it answers with our
	// key (which no other node has, should another test's server have
	// won the race for the port).
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.Ready(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("garage S3 API at %s: %w", s.Endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewKey imports a fresh key through cli and grants it allow on bucket —
// any of "read", "write", "owner" (Garage's `bucket allow` flags); none
// gives a key with no access to it — and returns its credentials.
func NewKey(t testing.TB, cli CLI, bucket string, allow ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	access, secret := "GK"+RandomHex(12), RandomHex(32)
	if _, err := retryTransient(ctx, cli, "key", "import", "--yes", "-n", "cairn-test-restricted", access, secret); err != nil {
		t.Fatalf("garage key import: %v", err)
	}
	// A bucket made over S3 is known by a name local to the key that made
	// it; give the new key the same local name for it.
	list, err := cli(ctx, "bucket", "list")
	if err != nil {
		t.Fatalf("garage bucket list: %v", err)
	}
	id := ""
	for line := range strings.Lines(string(list)) {
		f := strings.Fields(line)
		if len(f) > 1 && slices.ContainsFunc(f[1:], func(alias string) bool {
			return alias == bucket || strings.HasSuffix(alias, ":"+bucket) // global, or KEY:local
		}) {
			id = f[0]
			break
		}
	}
	if id == "" {
		t.Fatalf("garage NewKey: bucket %q not in `garage bucket list`:\n%s", bucket, list)
	}
	info, err := cli(ctx, "bucket", "info", id)
	if err != nil {
		t.Fatalf("garage bucket info: %v", err)
	}
	if full := bucketID.FindString(string(info)); full != "" {
		id = full
	}
	if _, err := cli(ctx, "bucket", "alias", "--local", access, id, bucket); err != nil {
		t.Fatalf("garage bucket alias: %v", err)
	}
	if len(allow) > 0 {
		args := []string{"bucket", "allow"}
		for _, a := range allow {
			switch a {
			case "read", "write", "owner":
				args = append(args, "--"+a)
			default:
				t.Fatalf("garage NewKey: unknown permission %q (want read, write or owner)", a)
			}
		}
		if _, err := cli(ctx, append(args, id, "--key", access)...); err != nil {
			t.Fatalf("garage bucket allow: %v", err)
		}
	}
	return access, secret
}

var (
	nodeID   = regexp.MustCompile(`[0-9a-f]{64}`)
	bucketID = regexp.MustCompile(`[0-9a-f]{64}`)
)

// Run runs bin with args and returns its output; its error names the
// command (a key's secret hidden) and carries the output.
func Run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(redactArgs(args), " "), err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// transientCluster are the answers of a cluster that is still coming up,
// or whose nodes are slow to answer each other (on a loaded machine, four
// clusters starting at once): `garage key import` answered 503 "Could not
// reach quorum of 2 … Timeout".
var transientCluster = regexp.MustCompile(`(?i)could not reach quorum|timeout|timed out|503|service unavailable|no such peer|not connected|netapp error`)

// retryTransient runs a bring-up command through cli, again after a
// transient cluster error, with a growing pause, until ctx ends. A command
// that failed transiently may have been carried out anyway: a retry that
// then finds the thing already there counts as done.
func retryTransient(ctx context.Context, cli CLI, args ...string) ([]byte, error) {
	pause := 200 * time.Millisecond
	retried := false
	for {
		out, err := cli(ctx, args...)
		switch {
		case err == nil:
			return out, nil
		case retried && done(args, err):
			return out, nil
		case !transientCluster.MatchString(err.Error()) || ctx.Err() != nil:
			return out, err
		}
		retried = true
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("%w (gave up retrying: %w)", err, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// done reports that a retried command's error says its first attempt was
// carried out: the key exists, the layout version was applied.
func done(args []string, err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "already exists") ||
		len(args) > 1 && args[0] == "layout" && args[1] == "apply" && strings.Contains(msg, "version")
}

// redactArgs hides the secret of `key import` in error messages.
func redactArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && len(out[i]) == 64 && out[i-1] != "" && strings.HasPrefix(out[i-1], "GK") {
			out[i] = "<secret>"
		}
	}
	return out
}

// RandomHex returns n random bytes in hexadecimal.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// FindBinary returns the garage binary: $GARAGE_BIN, else `garage` on
// PATH, else the one scripts/install-garage.sh builds into the cache; ""
// when there is none.
func FindBinary() (string, error) {
	return testserver.FindBinary("GARAGE_BIN", "garage", testserver.CachePath("garage-"+Version+"/bin/garage"))
}

// Cmd runs a garage command on a node and returns its output, failing t
// when it fails.
func Cmd(t testing.TB, cli CLI, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := cli(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
