package lock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/locktest"
	"github.com/cairnhq/state/internal/s3diag"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Garage as its users run it: three nodes, replication factor 3, the
// claims protocol resting on the quorums' list-after-write consistency.

// clusterBackend is a backend on bucket through the cluster's multi-endpoint
// URL (failover between the nodes), or through one node's endpoint alone.
func clusterBackend(t testing.TB, c *garageserver.Cluster, bucket, endpoint string, responseTimeout time.Duration) backend.Backend {
	t.Helper()
	opts, _, err := s3.ParseURL(c.URL(bucket, ""))
	if err != nil {
		t.Fatal(err)
	}
	if endpoint != "" {
		opts.Endpoint = endpoint
	}
	if responseTimeout > 0 {
		opts.ResponseTimeout = responseTimeout
	}
	opts.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, "")
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	opts.HTTPClient = &http.Client{Transport: tr}
	b, err := s3.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	return b
}

func TestLock_Cluster(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := garageserver.StartCluster(t, 3)
	h := serverHarness(func(t *testing.T) backend.Backend { return clusterBackend(t, c, c.NewBucket(t), "", 0) })
	h.RaceTrials, h.DelayedRaceTrials = 10, 1 // the racing test below runs 2 × 10 more on the cluster
	// Each request pays the quorum's round trips, which took over a second
	// on two loaded cores: windows twice the single server's.
	h.StaleAfter = 2 * s3StaleAfter
	h.RequestTimeout = h.StaleAfter / 4 * 3 / 4
	locktest.Run(t, h)
}

func openOn(t *testing.T, b backend.Backend, env *envelope.Envelope) *store.Store {
	t.Helper()
	st, err := storeadmin.Open(b, env, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fencedWriter writes fresh names through a fenced store until stopped,
// recording what was acknowledged and when.
type fencedWriter struct {
	st *store.Store

	mu      sync.Mutex
	acked   []string
	ackedAt []time.Time
	errs    []error
}

func (w *fencedWriter) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("w/%06d", i)
		_, err := w.st.Put(ctx, name, []byte(name), store.PutOptions{})
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked, w.ackedAt = append(w.acked, name), append(w.ackedAt, time.Now())
		case ctx.Err() == nil:
			w.errs = append(w.errs, err)
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *fencedWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *fencedWriter) firstAckAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.ackedAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkAcksReadBack opens the store on each node's own endpoint and reads
// every acknowledged write back.
func checkAcksReadBack(t *testing.T, c *garageserver.Cluster, bucket string, env *envelope.Envelope, w *fencedWriter, nodes []*garageserver.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range nodes {
		st := openOn(t, clusterBackend(t, c, bucket, n.Endpoint, 0), env)
		lost := 0
		for _, name := range w.acked {
			got, _, err := st.Get(ctx, name)
			if err != nil || string(got) != name {
				lost++
				if lost <= 3 {
					t.Errorf("node %d: acknowledged write %s: %q, %v", n.Index+1, name, got, err)
				}
			}
		}
		if lost > 0 {
			t.Errorf("node %d: %d of %d acknowledged writes do not read back", n.Index+1, lost, len(w.acked))
		}
	}
}

// clusterOpts are the lock's timings on the cluster: a heartbeat of 2 s,
// stale after 12 s (writes on three debug-build nodes take tens of
// milliseconds, a failover up to the client's response timeout, 3 s; a
// heartbeat that waits for one suspends the fence for a moment, and the
// next confirmed heartbeat reopens it).
func clusterOpts(t testing.TB, id string) lock.Options {
	return lock.Options{InstanceID: id, HeartbeatInterval: 2 * time.Second, StaleAfter: 12 * time.Second,
		RequestTimeout: 8 * time.Second, // above the client's 3 s response timeout plus Garage's 2 s RPC timeout: room to fail over
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", id)}
}

// startClusterHolder takes the lock on the cluster and writes through its
// fence until stopWriting is called (or the test ends).
func startClusterHolder(t *testing.T, st *store.Store, o lock.Options) (l *lock.Lock, w *fencedWriter, stopWriting func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := lock.Acquire(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	w = &fencedWriter{st: l.Fence(st)}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx) }()
	var once sync.Once
	stopWriting = func() { once.Do(func() { stop(); <-done }) }
	t.Cleanup(func() {
		stopWriting()
		_ = l.Release(context.Background())
	})
	return l, w, stopWriting
}

// neverSecondHolder tries to acquire as another instance every half
// second until the returned function is called (or the test ends), and
// fails the test if it ever succeeds.
func neverSecondHolder(t *testing.T, st *store.Store, o lock.Options) (stopTrying func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			l, err := lock.Acquire(ctx, st, o)
			cancel()
			if err == nil {
				_ = l.Release(context.Background())
				t.Errorf("a second instance acquired the lock while the first held it (epoch %d)", l.Record().Epoch)
				return
			}
			if !errors.Is(err, lock.ErrHeld) {
				t.Logf("second instance: %v", err)
			}
		}
	}()
	var once sync.Once
	stopTrying = func() { once.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopTrying)
	return stopTrying
}

// Node loss: SIGKILL the node the holder's client talks to while it
// heartbeats and writes. The holder keeps its lock (its client fails over
// within a heartbeat), writes keep landing, a second instance stays
// refused, and every acknowledged write reads back from each surviving
// node.
func TestLock_Cluster_NodeKilledUnderTheHolder_KeepsLockWritesLand(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := garageserver.StartClusterWith(t, 3, garageserver.ClusterOptions{RPCTimeout: 2 * time.Second})
	bucket := c.NewBucket(t)
	env := testkit.Envelope(t) // one key for every instance of the test
	b := clusterBackend(t, c, bucket, "", 3*time.Second)
	l, w, stopWriting := startClusterHolder(t, openOn(t, b, env), clusterOpts(t, "pod-a"))
	stopTrying := neverSecondHolder(t, openOn(t, clusterBackend(t, c, bucket, "", 3*time.Second), env), clusterOpts(t, "pod-b"))

	waitUntil(t, 30*time.Second, "20 fenced writes", func() bool { return w.count() >= 20 })
	victim := c.NodeAt(b.(s3diag.Backend).CurrentEndpoint())
	killed := time.Now()
	victim.Kill(t)
	waitUntil(t, 30*time.Second, "a fenced write after the kill", func() bool { _, ok := w.firstAckAfter(killed); return ok })
	next, _ := w.firstAckAfter(killed)
	t.Logf("node %d killed under the holder: next acknowledged fenced write after %s", victim.Index+1, next.Sub(killed).Round(time.Millisecond))
	time.Sleep(3 * clusterOpts(t, "").HeartbeatInterval)
	if isLostLock(l) {
		t.Fatalf("the holder lost its lock over a node loss: %v", l.Err())
	}
	// Under load a heartbeat can still be late here (suspended for a
	// moment): the fence must be open again within two heartbeats.
	waitUntil(t, 2*clusterOpts(t, "").HeartbeatInterval, "the holder's fence open after the failover", func() bool { return l.Err() == nil })
	// While the client fails over, a heartbeat can take longer than the
	// lease (on two loaded cores it did: 3 s): the fence suspends and
	// refuses writes until the next heartbeat confirms, and a write in
	// flight when the lease ends is cut off at its end (CI saw one) — the
	// fence doing its job. A lost or released lock, or any unfenced
	// failure, is a failure.
	w.mu.Lock()
	errs := append([]error(nil), w.errs...)
	w.mu.Unlock()
	paused := 0
	for _, err := range errs {
		if errors.Is(err, store.ErrFenced) && !errors.Is(err, lock.ErrLost) && !errors.Is(err, lock.ErrReleased) {
			paused++
			continue
		}
		t.Errorf("a fenced write failed for another reason than a paused fence: %v", err)
	}
	t.Logf("%d fenced writes refused or cut off while the fence was paused during the failover", paused)
	stopTrying()
	stopWriting()
	checkAcksReadBack(t, c, bucket, env, w, c.Running())
}

// A paused node (SIGSTOP for longer than the stale window, then SIGCONT)
// holds stale data: no second holder meanwhile or after, and no
// acknowledged write lost, read from every node, the resumed one included.
func TestLock_Cluster_NodePausedPastStaleWindow_NoSecondHolderNoAckLost(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := garageserver.StartClusterWith(t, 3, garageserver.ClusterOptions{RPCTimeout: 2 * time.Second})
	bucket := c.NewBucket(t)
	env := testkit.Envelope(t) // one key for every instance of the test
	b := clusterBackend(t, c, bucket, "", 3*time.Second)
	// A longer stale window than the other cluster tests (still a tenth of
	// the default): while a node is paused every request the survivors
	// answer waits for the cluster's RPC to it to time out — 2.0 s each,
	// PUT, LIST and GET alike (measured on two loaded cores) — and a
	// suspended heartbeat beside a standby that keeps retrying is a PUT, a
	// LIST and a GET or more of each of the standby's intents: with a
	// 20 s window (a long lease of 18 s) CI once saw none confirmed, and
	// the holder lost its lock to the outage, not to a second holder.
	withWindow := func(id string) lock.Options {
		o := clusterOpts(t, id)
		o.StaleAfter = 30 * time.Second
		return o
	}
	l, w, stopWriting := startClusterHolder(t, openOn(t, b, env), withWindow("pod-a"))
	stopTrying := neverSecondHolder(t, openOn(t, clusterBackend(t, c, bucket, "", 3*time.Second), env), withWindow("pod-b"))

	waitUntil(t, 30*time.Second, "20 fenced writes", func() bool { return w.count() >= 20 })
	victim := c.NodeAt(b.(s3diag.Backend).CurrentEndpoint())
	victim.Pause(t)
	time.Sleep(withWindow("").StaleAfter + 2*time.Second)
	victim.Resume(t)
	time.Sleep(2 * withWindow("").HeartbeatInterval)
	stopTrying()
	stopWriting()
	if isLostLock(l) {
		t.Fatalf("the holder lost its lock while a node was paused: %v", l.Err())
	}
	checkAcksReadBack(t, c, bucket, env, w, c.Nodes)
}

func isLostLock(l *lock.Lock) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

// Racing acquirers on the cluster, 10 trials × 8, then again with one node
// down: exactly one winner each trial. (The closing figures of issue 23 ran
// 20 + 20; each trial is a few seconds of a loaded machine's make test.)
func TestLock_Cluster_RacingAcquirers_OneWinnerWithAllNodesAndWithOneDown(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := garageserver.StartCluster(t, 3)
	env := testkit.Envelope(t) // one key for every instance of the test
	bucket := c.NewBucket(t)
	var racers [8]backend.Backend // one client each, as eight instances
	for i := range racers {
		racers[i] = clusterBackend(t, c, bucket, "", 3*time.Second)
	}
	round := 0
	race := func(t *testing.T, trials int) {
		for trial := range trials {
			round++
			var (
				mu      sync.Mutex
				winners []*lock.Lock
				wg      sync.WaitGroup
			)
			for i := range 8 {
				st, err := storeadmin.Open(racers[i], env, store.Options{Root: fmt.Sprintf("round-%d", round), Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					l, err := lock.Acquire(ctx, st, clusterOpts(t, fmt.Sprintf("racer-%d", i)))
					if err != nil {
						if !errors.Is(err, lock.ErrHeld) {
							t.Errorf("trial %d: racer %d: %v", trial, i, err)
						}
						return
					}
					mu.Lock()
					winners = append(winners, l)
					mu.Unlock()
				}()
			}
			wg.Wait()
			for _, l := range winners {
				_ = l.Release(context.Background())
			}
			if len(winners) != 1 {
				t.Fatalf("trial %d: %d winners", trial, len(winners))
			}
		}
		t.Logf("%d trials × 8 racers on %d running nodes: exactly one winner in every trial", trials, len(c.Running()))
	}
	t.Run("AllNodes", func(t *testing.T) { race(t, 10) })
	c.Nodes[0].Kill(t) // the first endpoint of every client: each fails over
	t.Run("OneNodeDown", func(t *testing.T) { race(t, 10) })
}
