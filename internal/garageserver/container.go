package garageserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// DockerAnswers reports whether a Docker engine is reachable.
func DockerAnswers() bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info").Run() == nil
}

// startContainerCluster runs an n-node cluster of the pinned image on a
// Docker network of its own, each node's S3 port published on loopback,
// with the same bring-up as process mode. Kill, Stop, Pause, Resume and
// Restart map to docker kill, stop, pause, unpause and start.
//
// Not exercised by this repository's CI (which has no Docker engine).
func startContainerCluster(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	network := "cairn-garage-" + RandomHex(6)
	if _, err := Run(ctx, "docker", "network", "create", network); err != nil {
		t.Fatalf("garage cluster: %v", err)
	}
	c := &Cluster{t: t}
	c.S3Server = testutil.S3Server{Region: Region, Name: fmt.Sprintf("garage cluster of %d (containers)", n)}
	var names []string
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		for _, name := range names {
			if t.Failed() {
				if out, err := Run(cctx, "docker", "logs", "--tail", "40", name); err == nil {
					t.Logf("%s log, last lines:\n%s", name, out)
				}
			}
			_, _ = Run(cctx, "docker", "rm", "-f", name)
		}
		_, _ = Run(cctx, "docker", "network", "rm", network)
	})
	secret := RandomHex(32)
	root := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("%s-%d", network, i+1)
		names = append(names, name)
		dir := filepath.Join(root, fmt.Sprintf("node%d", i+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		port := testserver.FreePort(t)
		cfgPath := filepath.Join(dir, "garage.toml")
		// No rpc_public_addr: the address is the container's on the
		// network, known once it runs; nodes connect by it below.
		cfg := Config("/var/lib/garage/meta", "/var/lib/garage/data", "0.0.0.0:3901", "", "0.0.0.0:3900", secret, min(3, n), opts)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		node := &Node{Index: i, Dir: dir, ConfigPath: "/etc/garage.toml", c: c}
		node.Endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
		node.cli = func(ctx context.Context, args ...string) ([]byte, error) {
			return Run(ctx, "docker", append([]string{"exec", name, "/garage"}, args...)...)
		}
		if _, err := Run(ctx, "docker", "run", "-d", "--name", name, "--network", network,
			"-p", "127.0.0.1:"+strconv.Itoa(port)+":3900", "-v", cfgPath+":/etc/garage.toml:ro", Image); err != nil {
			t.Fatalf("garage cluster: %v", err)
		}
		out, err := Run(ctx, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
		if err != nil {
			t.Fatalf("garage cluster: %v", err)
		}
		node.RPCAddr = strings.TrimSpace(string(out)) + ":3901"
		node.ctl = containerControl{name: name}
		c.Nodes = append(c.Nodes, node)
	}
	c.start = func(node *Node) error {
		name := names[node.Index]
		if _, err := Run(context.Background(), "docker", "start", name); err != nil {
			return err
		}
		node.mu.Lock()
		node.ctl, node.paused = containerControl{name: name}, false
		node.mu.Unlock()
		return waitStatus(node)
	}
	for _, node := range c.Nodes {
		if err := waitStatus(node); err != nil {
			t.Fatalf("garage cluster: %v", err)
		}
	}
	if err := c.bringUp(); err != nil {
		t.Fatalf("garage cluster of %d (containers): %v", n, err)
	}
	return c
}

// waitStatus polls `garage status` on node until it answers.
func waitStatus(node *Node) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := node.cli(ctx, "status")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("garage node %d not answering: %w", node.Index+1, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// containerControl is a node server run as a container.
type containerControl struct{ name string }

func (c containerControl) docker(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Run(ctx, "docker", append(args, c.name)...)
	return err
}

func (c containerControl) kill() error   { return c.docker("kill", "-s", "KILL") }
func (c containerControl) stop() error   { return c.docker("stop", "-t", "10") }
func (c containerControl) pause() error  { return c.docker("pause") }
func (c containerControl) resume() error { return c.docker("unpause") }

func (c containerControl) exited() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := Run(ctx, "docker", "inspect", "-f", "{{.State.Running}}", c.name)
	return err != nil || strings.TrimSpace(string(out)) != "true"
}

func (c containerControl) lostPortRace() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := Run(ctx, "docker", "logs", c.name)
	return testserver.PortInUse(string(out))
}
