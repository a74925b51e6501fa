// Package garage starts a real Garage (Deuxfleurs' S3 store) for a test: a
// throwaway single node ([Start]) or a cluster of several nodes as Garage's
// users run it ([StartCluster]: each node with its own ports and
// directories, connected, one layout with three copies, and per-node Kill,
// Stop, Pause, Resume and Restart), on loopback with the layout applied and
// a key that may create buckets. Garage accepts conditional-write headers
// and ignores them, so this is where the no-compare-and-swap path of the
// backend and the lock run against a real server.
//
// A cluster's URL lists every node's endpoint, so a backend opened from it
// fails over between them:
//
//	c := garage.StartCluster(t, 3)
//	bucket := c.NewBucket(t)
//	b := c.Backend(t, bucket)           // an s3 backend on all three nodes
//	url := c.URL(bucket, "apps/one")    // the same, for a child process (with c.Env())
//	c.Nodes[0].Kill(t)                  // SIGKILL one node; b moves on
//	oracle := c.Nodes[1].Minio(t)       // read what one node serves
//
// # Where Garage comes from
//
// Process mode runs a garage binary from $GARAGE_BIN, else `garage` on
// PATH, else $HOME/.cache/cairn-state/garage-2.5.0/bin/garage, where
// scripts/install-garage.sh (run by make test) builds it from crates.io.
// Without a binary, container mode runs the dxflrs/garage image when a
// Docker engine answers (`docker info` succeeds). With neither, the test is
// skipped, or fails when CAIRN_REQUIRE_SERVERS=1; see
// [testutil.RequireServer].
package garage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// Version is the Garage release the tests are pinned to (the binary built
// by scripts/install-garage.sh and the container image's tag).
const Version = "2.5.0"

// image is the container image used when no binary is found and a Docker
// engine answers.
const image = "dxflrs/garage:v" + Version

// Region is the s3_region of the test cluster; requests must be signed for
// it.
const Region = "garage"

// HowTo says how to get Garage; it is the skip message's advice.
const HowTo = "run `bash scripts/install-garage.sh` (make test does; a cargo build of garage " + Version +
	" from crates.io, cached in $HOME/.cache/cairn-state), or set GARAGE_BIN to a garage " + Version +
	" binary, or start a Docker engine so the " + image + " image can be used"

// Server is a Garage node started for one test. Its S3Server fields and
// methods give the endpoint, credentials, fresh buckets, backends and URLs.
type Server struct {
	testutil.S3Server
	// Dir holds the node's configuration, metadata and data.
	Dir string
	// ConfigPath is the node's garage.toml (inside the container in
	// container mode).
	ConfigPath string

	cli func(ctx context.Context, args ...string) ([]byte, error)
}

// Start starts a single-node Garage and stops it when the test ends.
// Bring-up (server, layout, key) takes about a second, so each test gets
// its own node.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testserver.FindBinary("GARAGE_BIN", "garage", testserver.CachePath("garage-"+Version+"/bin/garage"))
	if err != nil {
		t.Fatalf("garage: %v", err)
	}
	if bin == "" {
		if dockerAnswers() {
			return startContainer(t)
		}
		testutil.RequireServer(t, "garage", HowTo)
	}
	var s *Server
	if err := testserver.Retry(func(attempt int) (p *testserver.Process, err error) {
		s, p, err = startProcess(t, bin, attempt)
		return p, err
	}); err != nil {
		t.Fatalf("starting garage (%s): %v", bin, err)
	}
	return s
}

// config is a throwaway node's configuration (Garage v2 syntax). The nodes
// of one cluster share rpcSecret, the replication factor and opts;
// rpcPublic is the address other nodes reach this one at (none when
// empty).
func config(metaDir, dataDir, rpcBind, rpcPublic, s3Addr, rpcSecret string, replication int, opts ClusterOptions) string {
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

func startProcess(t testing.TB, bin string, attempt int) (*Server, *testserver.Process, error) {
	dir := t.TempDir()
	s3Addr := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	rpcAddr := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	cfgPath := filepath.Join(dir, "garage.toml")
	cfg := config(filepath.Join(dir, "meta"), filepath.Join(dir, "data"), rpcAddr, rpcAddr, s3Addr, randomHex(32), 1, ClusterOptions{})
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, nil, err
	}
	p, err := testserver.StartProcess(t, "garage", filepath.Join(dir, fmt.Sprintf("garage-%d.log", attempt)), bin, "-c", cfgPath, "server")
	if err != nil {
		return nil, nil, err
	}
	// A throwaway node's data is discarded; Garage can take seconds to
	// shut down gracefully, so it is killed at once.
	p.Grace = 0
	s := &Server{
		S3Server:   testutil.S3Server{Endpoint: "http://" + s3Addr, Region: Region, Name: "garage"},
		Dir:        dir,
		ConfigPath: cfgPath,
		cli: func(ctx context.Context, args ...string) ([]byte, error) {
			return run(ctx, bin, append([]string{"-c", cfgPath}, args...)...)
		},
	}
	if err := s.bringUp(p); err != nil {
		return nil, p, err
	}
	return s, p, nil
}

// bringUp waits for the node to answer, then sets it up (Garage's own
// integration tests do the same).
func (s *Server) bringUp(p *testserver.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// /health answers before a layout exists; `garage status` is the
	// readiness signal.
	if err := p.WaitReady(30*time.Second, func() error {
		_, err := s.cli(ctx, "status")
		return err
	}); err != nil {
		return err
	}
	return s.setup(ctx)
}

// setup applies a one-node layout, imports a key allowed to create buckets
// and waits for the S3 port; the node must already answer `garage status`.
func (s *Server) setup(ctx context.Context) error {
	out, err := s.cli(ctx, "node", "id", "-q")
	if err != nil {
		return err
	}
	id := nodeID.FindString(string(out))
	if id == "" {
		return fmt.Errorf("garage node id: no node id in %q", out)
	}
	s.AccessKey = "GK" + randomHex(12)
	s.SecretKey = randomHex(32)
	for _, args := range [][]string{
		{"layout", "assign", "-z", "dc1", "-c", "1G", id},
		{"layout", "apply", "--version", "1"},
		{"key", "import", "--yes", "-n", "cairn-test", s.AccessKey, s.SecretKey},
		{"key", "allow", "--create-bucket", s.AccessKey},
	} {
		if _, err := retryTransient(ctx, s.cli, args...); err != nil {
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

// NewKey creates an access key allowed what allow grants on bucket —
// any of "read", "write", "owner" (Garage's `bucket allow` flags); none
// gives a key with no access to it — and returns its credentials. Use it
// to test what a restricted key may do.
func (s *Server) NewKey(t testing.TB, bucket string, allow ...string) (accessKey, secretKey string) {
	t.Helper()
	return newKey(t, s.cli, bucket, allow...)
}

// newKey imports a fresh key through cli and grants it allow on bucket.
func newKey(t testing.TB, cli func(context.Context, ...string) ([]byte, error), bucket string, allow ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	access, secret := "GK"+randomHex(12), randomHex(32)
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

// CLI runs a garage command against this node (`garage -c CONFIG ARGS…`,
// or through `docker exec` in container mode) and returns its output.
func (s *Server) CLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.cli(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var (
	nodeID   = regexp.MustCompile(`[0-9a-f]{64}`)
	bucketID = regexp.MustCompile(`[0-9a-f]{64}`)
)

func run(ctx context.Context, bin string, args ...string) ([]byte, error) {
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
func retryTransient(ctx context.Context, cli func(context.Context, ...string) ([]byte, error), args ...string) ([]byte, error) {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
