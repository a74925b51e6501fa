package garageserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// Cluster is a Garage cluster of several nodes on loopback, as Garage's
// users run it: each node with its own RPC and S3 ports and its own
// metadata and data directories, connected to the others, one layout with
// replication_factor = min(3, n) applied (a zone per node, so copies land
// on distinct nodes) and consistency_mode "consistent" (Garage's default).
//
// Its S3Server gives the cluster's key and the multi-endpoint forms:
// Endpoint lists every node's endpoint separated by commas, so Options,
// Backend and URL open a backend that fails over between nodes (ADR 0015).
// Each node's own endpoint is in Nodes[i].Endpoint, for reading a node
// directly (Nodes[i].Minio).
type Cluster struct {
	testutil.S3Server
	// Nodes are the cluster's nodes, in the order of Endpoint's list.
	Nodes []*Node

	t     testing.TB
	start func(n *Node) error // (re)starts a node's server
}

// Node is one node of a [Cluster]. Its S3Server is the node's endpoint
// alone, with the cluster's key. Kill, Stop, Pause, Resume and Restart act
// on the node's server; they fail the test when they cannot.
type Node struct {
	testutil.S3Server
	// Index is the node's position in Cluster.Nodes (from 0).
	Index int
	// ID is the node's public key (64 hex digits).
	ID string
	// RPCAddr is the node's RPC address (host:port).
	RPCAddr string
	// Dir holds the node's configuration, metadata and data; ConfigPath
	// is its garage.toml.
	Dir, ConfigPath string

	c   *Cluster
	cli CLI

	mu     sync.Mutex
	ctl    nodeControl // the running server; nil once killed or stopped
	paused bool
	starts int
}

// nodeControl is a running node server: a process, or a container.
type nodeControl interface {
	kill() error
	stop() error
	pause() error
	resume() error
	exited() bool
	lostPortRace() bool
}

// ClusterOptions set what [StartClusterWith] writes into every node's
// configuration beyond [StartCluster]'s. The zero value is StartCluster's
// cluster: Garage's defaults.
type ClusterOptions struct {
	// ConsistencyMode is Garage's consistency_mode: "consistent" (the
	// default when empty), "degraded" or "dangerous".
	ConsistencyMode string
	// RPCTimeout is Garage's rpc_timeout_msec, how long a node waits for
	// another's answer; zero leaves Garage's default (300 s in 2.5.0). A
	// node that hangs without closing its connections (SIGSTOP, a frozen
	// VM) holds up reads for up to this long (docs/servers.md).
	RPCTimeout time.Duration
}

// StartCluster starts an n-node Garage cluster with Garage's default
// settings and stops it when the test ends. It returns once every node
// reports every other node healthy and the layout applied, and answers S3
// requests signed with the cluster's key. A three-node cluster takes a few
// seconds to come up.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartClusterWith(t, n, ClusterOptions{})
}

// StartClusterWith is [StartCluster] with opts in every node's
// configuration.
func StartClusterWith(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("garageserver.StartCluster: %d nodes", n)
	}
	bin, err := FindBinary()
	if err != nil {
		t.Fatalf("garage: %v", err)
	}
	if bin == "" {
		if DockerAnswers() {
			return startContainerCluster(t, n, opts)
		}
		testserver.RequireServer(t, "garage", HowTo)
	}
	c := &Cluster{t: t}
	c.S3Server = testutil.S3Server{Region: Region, Name: fmt.Sprintf("garage cluster of %d", n)}
	secret := RandomHex(32)
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("node%d", i+1))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		node := &Node{Index: i, Dir: dir, ConfigPath: filepath.Join(dir, "garage.toml"), c: c}
		node.cli = func(ctx context.Context, args ...string) ([]byte, error) {
			return Run(ctx, bin, append([]string{"-c", node.ConfigPath}, args...)...)
		}
		c.Nodes = append(c.Nodes, node)
	}
	c.start = func(node *Node) error {
		node.mu.Lock()
		node.starts++
		logPath := filepath.Join(node.Dir, fmt.Sprintf("garage-%d.log", node.starts))
		node.mu.Unlock()
		p, err := testserver.StartProcess(t, fmt.Sprintf("garage node %d", node.Index+1), logPath, bin, "-c", node.ConfigPath, "server")
		if err != nil {
			return err
		}
		p.Grace = 0 // throwaway data: killed at the end of the test
		node.mu.Lock()
		node.ctl, node.paused = processControl{p}, false
		node.mu.Unlock()
		return p.WaitReady(30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := node.cli(ctx, "status")
			return err
		})
	}
	// Start every node, each on fresh ports; a node that lost the race
	// for a port gets new ones.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, node := range c.Nodes {
		wg.Go(func() {
			for attempt := 1; ; attempt++ {
				rpc := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
				s3 := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
				cfg := Config(filepath.Join(node.Dir, "meta"), filepath.Join(node.Dir, "data"), rpc, rpc, s3, secret, min(3, n), opts)
				if err := os.WriteFile(node.ConfigPath, []byte(cfg), 0o600); err != nil {
					errs[i] = err
					return
				}
				node.RPCAddr, node.Endpoint = rpc, "http://"+s3
				err := c.start(node)
				if err == nil {
					return
				}
				lost := node.lostPortRace()
				node.kill()
				if attempt == 3 || !lost {
					errs[i] = fmt.Errorf("garage node %d: %w", i+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("starting a garage cluster (%s): %v", bin, err)
		}
	}
	if err := c.bringUp(); err != nil {
		t.Fatalf("garage cluster of %d: %v", n, err)
	}
	return c
}

// bringUp connects the started nodes, applies the layout, imports the key
// and waits until the cluster is ready.
func (c *Cluster) bringUp() error {
	// Minutes, not seconds: four clusters starting at once beside other
	// test runs on two cores took over two minutes to agree on a layout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addrs := make([]string, len(c.Nodes))
	for i, node := range c.Nodes {
		out, err := node.cli(ctx, "node", "id", "-q")
		if err != nil {
			return err
		}
		full := strings.TrimSpace(string(out))
		node.ID = nodeID.FindString(full)
		if node.ID == "" || !strings.Contains(full, "@") {
			return fmt.Errorf("garage node id: no id@address in %q", out)
		}
		addrs[i] = node.ID + "@" + node.RPCAddr
	}
	// Every node connects to every other, as Garage's dev-cluster.sh
	// does, rather than waiting for peers to be discovered.
	for _, node := range c.Nodes {
		for j, addr := range addrs {
			if j == node.Index {
				continue
			}
			if _, err := node.cli(ctx, "node", "connect", addr); err != nil {
				return err
			}
		}
	}
	first := c.Nodes[0]
	for _, node := range c.Nodes {
		zone := fmt.Sprintf("dc%d", node.Index+1)
		if _, err := first.cli(ctx, "layout", "assign", "-z", zone, "-c", "1G", node.ID); err != nil {
			return err
		}
	}
	if _, err := retryTransient(ctx, first.cli, "layout", "apply", "--version", "1"); err != nil {
		return err
	}
	c.AccessKey, c.SecretKey = "GK"+RandomHex(12), RandomHex(32)
	for _, args := range [][]string{
		{"key", "import", "--yes", "-n", "cairn-test", c.AccessKey, c.SecretKey},
		{"key", "allow", "--create-bucket", c.AccessKey},
	} {
		if _, err := retryTransient(ctx, first.cli, args...); err != nil {
			return err
		}
	}
	urls := make([]string, len(c.Nodes))
	for i, node := range c.Nodes {
		node.S3Server = testutil.S3Server{
			Endpoint: node.Endpoint, Region: Region, AccessKey: c.AccessKey, SecretKey: c.SecretKey,
			Name: fmt.Sprintf("garage node %d", node.Index+1),
		}
		urls[i] = node.Endpoint
	}
	c.Endpoint = strings.Join(urls, ",")
	for _, node := range c.Nodes {
		if err := node.waitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitReady waits until the node reports every node of the cluster that
// is running as healthy with its role, the layout applied, and answers S3
// requests signed with the cluster's key.
func (n *Node) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for {
		last = n.ready(ctx)
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("garage node %d not ready: %w", n.Index+1, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) ready(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	layout, err := n.cli(cctx, "layout", "show")
	if err != nil {
		return err
	}
	if !strings.Contains(string(layout), "Current cluster layout version: 1") {
		return fmt.Errorf("layout version 1 not applied yet")
	}
	status, err := n.cli(cctx, "status")
	if err != nil {
		return err
	}
	healthy, _, _ := strings.Cut(string(status), "==== FAILED NODES ====")
	for _, other := range n.c.Nodes {
		if !other.alive() {
			continue
		}
		line := lineWith(healthy, other.ID[:16])
		switch {
		case line == "":
			return fmt.Errorf("node %d does not see node %d healthy", n.Index+1, other.Index+1)
		case strings.Contains(line, "NO ROLE ASSIGNED"):
			return fmt.Errorf("node %d does not see node %d's role yet", n.Index+1, other.Index+1)
		}
	}
	return n.S3Server.Ready(cctx)
}

// lineWith returns the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// Endpoints returns every node's S3 endpoint, in order.
func (c *Cluster) Endpoints() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.Endpoint
	}
	return urls
}

// NodeAt returns the node whose S3 endpoint is endpoint (as
// s3diag.Backend.CurrentEndpoint reports it), or nil. A backend opened on the
// cluster's URL starts on Nodes[0].
func (c *Cluster) NodeAt(endpoint string) *Node {
	for _, n := range c.Nodes {
		if n.Endpoint == endpoint {
			return n
		}
	}
	return nil
}

// Running returns the nodes whose server runs (paused ones included).
func (c *Cluster) Running() []*Node {
	var nodes []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// live returns a node that runs and is not paused, for the cluster's own
// administration and its oracle.
func (c *Cluster) live(t testing.TB) *Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n.alive() {
			return n
		}
	}
	t.Fatalf("%s: no node is running", c.Name)
	return nil
}

// Minio returns an independent S3 client (minio-go) on a running node.
// To read what one particular node serves, use Nodes[i].Minio.
func (c *Cluster) Minio(t testing.TB) *minio.Client {
	t.Helper()
	return c.live(t).Minio(t)
}

// NewBucket creates a fresh, empty bucket through a running node and
// returns its name.
func (c *Cluster) NewBucket(t testing.TB) string {
	t.Helper()
	return c.live(t).NewBucket(t)
}

// CLI runs a garage command on a running node and returns its output.
func (c *Cluster) CLI(t testing.TB, args ...string) string {
	t.Helper()
	return Cmd(t, c.live(t).cli, args...)
}

// NewKey creates an access key allowed what allow grants on bucket (see
// the package's NewKey) and returns its credentials.
func (c *Cluster) NewKey(t testing.TB, bucket string, allow ...string) (accessKey, secretKey string) {
	t.Helper()
	return NewKey(t, c.live(t).cli, bucket, allow...)
}

// Running reports whether the node's server runs (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ctl != nil && !n.ctl.exited()
}

// alive reports whether the node runs and is not paused.
func (n *Node) alive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ctl != nil && !n.ctl.exited() && !n.paused
}

// Kill ends the node's server with SIGKILL, as a crash would.
func (n *Node) Kill(t testing.TB) {
	t.Helper()
	if err := n.kill(); err != nil {
		t.Fatalf("garage node %d: kill: %v", n.Index+1, err)
	}
}

func (n *Node) kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctl == nil {
		return nil
	}
	err := n.ctl.kill()
	n.ctl, n.paused = nil, false
	return err
}

// Stop ends the node's server gracefully (SIGTERM, then SIGKILL after ten
// seconds).
func (n *Node) Stop(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctl == nil {
		return
	}
	if n.paused {
		_ = n.ctl.resume() // a stopped process cannot handle SIGTERM
	}
	err := n.ctl.stop()
	n.ctl, n.paused = nil, false
	if err != nil {
		t.Fatalf("garage node %d: stop: %v", n.Index+1, err)
	}
}

// Pause freezes the node's server (SIGSTOP): its ports stay open and its
// kernel still accepts connections, but it answers nothing — a hung node.
func (n *Node) Pause(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctl == nil {
		t.Fatalf("garage node %d: pause: not running", n.Index+1)
	}
	if err := n.ctl.pause(); err != nil {
		t.Fatalf("garage node %d: pause: %v", n.Index+1, err)
	}
	n.paused = true
}

// Resume lets a paused node run again (SIGCONT).
func (n *Node) Resume(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctl == nil || !n.paused {
		t.Fatalf("garage node %d: resume: not paused", n.Index+1)
	}
	if err := n.ctl.resume(); err != nil {
		t.Fatalf("garage node %d: resume: %v", n.Index+1, err)
	}
	n.paused = false
}

// Restart starts a killed or stopped node again on its ports, directories
// and identity (killing it first if it runs), and waits until it is back
// in the cluster: it sees the running nodes healthy and serves S3.
func (n *Node) Restart(t testing.TB) {
	t.Helper()
	if err := n.kill(); err != nil {
		t.Fatalf("garage node %d: restart: %v", n.Index+1, err)
	}
	if err := n.c.start(n); err != nil {
		t.Fatalf("garage node %d: restart: %v", n.Index+1, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.waitReady(ctx); err != nil {
		t.Fatalf("garage node %d: restart: %v", n.Index+1, err)
	}
}

func (n *Node) lostPortRace() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ctl != nil && n.ctl.lostPortRace()
}

// processControl is a node server run as a local process.
type processControl struct{ p *testserver.Process }

func (c processControl) kill() error { c.p.Kill(); return nil }

func (c processControl) stop() error {
	c.p.Grace = 10 * time.Second
	c.p.Stop()
	return nil
}

// pause stops the process and, where /proc tells, waits until every one of
// its threads is stopped, so that nothing it does afterwards races the
// caller.
func (c processControl) pause() error {
	if err := c.p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	tasks := fmt.Sprintf("/proc/%d/task", c.p.Pid())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		entries, err := os.ReadDir(tasks)
		if err != nil {
			return nil // no /proc: the signal is all we can do
		}
		stopped := 0
		for _, e := range entries {
			stat, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
			// The state follows the command name's closing parenthesis.
			if i := strings.LastIndexByte(string(stat), ')'); err == nil && i >= 0 && i+2 < len(stat) && (stat[i+2] == 'T' || stat[i+2] == 't') {
				stopped++
			}
		}
		if stopped == len(entries) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("pid %d not stopped 5s after SIGSTOP", c.p.Pid())
}
func (c processControl) resume() error { return c.p.Signal(syscall.SIGCONT) }

func (c processControl) exited() bool {
	select {
	case <-c.p.Exited():
		return true
	default:
		return false
	}
}

func (c processControl) lostPortRace() bool { return c.p.LostPortRace() }
