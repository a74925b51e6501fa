package model

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
)

var writeTrails = flag.Bool("trails", false,
	"write each known-bad variant's shortest counterexample (a breadth-first search) to testdata/<name>.txt")

// The assertions of the two properties, as pan reports them.
const (
	mutualExclusion = "assertion violated (nopen<=1)"
	casEpochs       = "assertion violated ((lastopen==myacq)||(myep>maxopened))"
	claimsEpochs    = "assertion violated ((lastopen==(a+1))||(myep>maxopened))"
	casCanary       = "assertion violated ((lastopen==0)||(lastopen==myacq))"
	claimsCanary    = "assertion violated ((lastopen==0)||(lastopen==(a+1)))"
	// time.pml (L = 5, LL = 7 ticks): (a) at a takeover, (c) another id's
	// takeover, (b) a data write, (a) between two acquirers.
	timeExclusion = "assertion violated  !(((( !(alost)&& !(arel))&& !(asusp))&&((t-aconf)<5)))"
	timeOtherID   = "assertion violated ((alost||adel)||((t-aconf)>=7))"
	timeData      = "assertion violated (dep<=1)"
	timeIntents   = "assertion violated (ph[*"
)

// The bounds of each exhaustive run; doc.go says why these.
var (
	casTwo       = []string{"-DNPROC=2", "-DMAXATT=2", "-DMAXHB=2", "-DMAXFAULT=2"}
	casThree     = []string{"-DNPROC=3", "-DMAXATT=1", "-DMAXHB=2", "-DMAXFAULT=1"}
	casDelete    = []string{"-DNPROC=2", "-DMAXATT=2", "-DMAXHB=1", "-DMAXFAULT=1", "-DMAXOOB=2"}
	claimsFaults = []string{"-DNPROC=2", "-DMAXATT=1", "-DMAXHB=2", "-DMAXFAULT=2"}
	claimsRetry  = []string{"-DNPROC=2", "-DMAXATT=2", "-DMAXHB=1", "-DMAXFAULT=0"}
	// Three processes release in one step and leave the dead intents of
	// the acquisition's listing behind, to fit in time and memory (the
	// two-process runs check both; claims.pml's header).
	claimsThree = []string{"-DNPROC=3", "-DMAXATT=1", "-DMAXHB=1", "-DMAXFAULT=0", "-DRELEASE_KEEPS_DEAD", "-DRELEASE_ATOMIC"}
	claimsBad   = []string{"-DNPROC=2", "-DMAXATT=1", "-DMAXHB=1", "-DMAXFAULT=1"}
	// time.pml's scenarios (ADR 0029): 0 the judgement under clock steps,
	// 1 two claims acquirers' intents, 2 fenced data writes.
	timeJudge   = []string{"-DSCEN=0", "-DTMAX=14", "-DMAXSTEP=1"}
	timeIntent  = []string{"-DSCEN=1", "-DTMAX=8", "-DMAXSTEP=1", "-DS=5"}
	timeWrites  = []string{"-DSCEN=2", "-DTMAX=14"}
	timeNoConds = with(timeWrites, "-DNOCOND")
	// Instance ids in claims.pml: P0 and P1 share one unless -DID1=1
	// gives P1 another; P2 always has another.
	otherID = "-DID1=1"
)

type check struct {
	name    string
	model   string
	defines []string
	// fails is "" for a model that must verify, else the assertion that
	// must be violated.
	fails string
}

func with(bounds []string, define string) []string {
	return append(append([]string(nil), bounds...), define)
}

var checks = []check{
	// The protocols as modelled (ADR 0019 and 0020 with the fixes in the
	// models' headers): every reachable state, no violation.
	{"CAS/TwoProcesses", "cas.pml", casTwo, ""},
	{"CAS/ThreeProcesses", "cas.pml", casThree, ""},
	{"CAS/OutOfBandDeletes", "cas.pml", casDelete, ""},
	{"Claims/TwoProcessesFaults", "claims.pml", claimsFaults, ""},
	{"Claims/TwoProcessesRetries", "claims.pml", claimsRetry, ""},
	{"Claims/TwoProcessesFaultsOtherID", "claims.pml", with(claimsFaults, otherID), ""},
	{"Claims/TwoProcessesRetriesOtherID", "claims.pml", with(claimsRetry, otherID), ""},
	{"Claims/ThreeProcesses", "claims.pml", claimsThree, ""},
	// The other fix for GONE_INTENT_SKIPPED: lost instead of listed again.
	{"Claims/TwoProcessesFaults/GoneIntentLost", "claims.pml", with(claimsFaults, "-DGONE_INTENT_LOST"), ""},
	// In explicit time (time.pml, ADR 0029).
	{"Time/Judge", "time.pml", timeJudge, ""},
	{"Time/JudgeBreak", "time.pml", with(timeJudge, "-DBREAK"), ""},
	{"Time/Intents", "time.pml", timeIntent, ""},
	{"Time/Writes", "time.pml", timeWrites, ""},
	{"Time/WritesNoConditions", "time.pml", timeNoConds, ""},
	{"Time/WritesForcedBreak", "time.pml", with(with(timeWrites, "-DBREAK"), "-DFORCE"), ""},
	{"Time/WritesOutOfBandDelete", "time.pml", with(timeWrites, "-DOOB"), ""},

	// Not vacuous: a second acquisition's fence does open.
	{"CAS/Canary", "cas.pml", with(casTwo, "-DCANARY"), casCanary},
	{"Claims/Canary", "claims.pml", with(claimsFaults, "-DCANARY"), claimsCanary},

	// Known-bad variants: each must be caught.
	{"CAS/Bad/SameIDAtOnce", "cas.pml", with(casTwo, "-DSAME_ID_AT_ONCE"), mutualExclusion},
	// The persistent lock object (ADR 0066): a release that is not
	// conditional, an absent lock counted without the markers, and each
	// part of the block reservation left out.
	{"CAS/Bad/ReleaseUnconditional", "cas.pml", with(casTwo, "-DRELEASE_UNCOND"), mutualExclusion},
	{"CAS/Bad/RootWithoutMarkers", "cas.pml", with(casDelete, "-DROOT_NO_MARKERS"), casEpochs},
	{"CAS/Bad/NoBlockMarker", "cas.pml", with(casDelete, "-DNO_BLOCK_MARKER"), casEpochs},
	{"CAS/Bad/RootSharedBlock", "cas.pml", with(casDelete, "-DROOT_SHARED_BLOCK"), casEpochs},
	{"CAS/Bad/BoundarySharedBlock", "cas.pml", with(casDelete, "-DBOUNDARY_SHARED_BLOCK"), casEpochs},
	{"CAS/Bad/NoRootPostCheck", "cas.pml", with(casDelete, "-DNO_ROOT_POSTCHECK"), casEpochs},
	{"CAS/Bad/RootUnflagged", "cas.pml", with(casDelete, "-DROOT_UNFLAGGED"), casEpochs},
	// The assumption of ADR 0066 lifted: a lock write applied after an
	// out-of-band delete that came after it was sent.
	{"CAS/Assumption/LateWriteAcrossDelete", "cas.pml", with(casDelete, "-DLATE_ACROSS_DELETE"), casEpochs},
	{"Claims/Bad/ReadThenWrite", "claims.pml", with(claimsBad, "-DREAD_THEN_WRITE"), mutualExclusion},
	{"Claims/Bad/EarlyIntentDelete", "claims.pml", with(claimsBad, "-DEARLY_INTENT_DELETE"), mutualExclusion},
	{"Claims/Bad/LateConfirm", "claims.pml", with(claimsBad, "-DLATE_CONFIRM"), mutualExclusion},
	{"Claims/Bad/HeldFirst", "claims.pml", with(claimsBad, "-DHELD_FIRST"), mutualExclusion},
	{"Claims/Bad/JudgeLate", "claims.pml", with(claimsBad, "-DJUDGE_LATE"), mutualExclusion},
	{"Claims/Bad/HeartbeatUnconfirmed", "claims.pml", with(claimsBad, "-DHB_UNCONFIRMED"), mutualExclusion},
	{"Claims/Bad/Get404Ignored", "claims.pml", with(claimsBad, "-DGET_404_IGNORED"), claimsEpochs},
	// Real only when every instance has the same lease and W < 2L: checked
	// with one lease for all (SAMECONFIG), which gives that trail.
	{"Claims/Bad/HeartbeatNoEpochCheck", "claims.pml", with(with(claimsBad, "-DSAMECONFIG"), "-DHB_NO_EPOCH_CHECK"), claimsEpochs},
	// The same-id refinement: a suspended holder yields to live claims of
	// its own instance id, and acquirers with another id wait for the long
	// lease; without either half, two fences open.
	{"Claims/Bad/ReopenIgnoresSameID", "claims.pml", with(claimsBad, "-DREOPEN_IGNORES_SAME_ID"), mutualExclusion},
	{"Claims/Bad/OtherIDShort", "claims.pml", with(with(claimsBad, otherID), "-DOTHER_ID_SHORT"), mutualExclusion},
	// lock.go's claimsLost before this model found it: a live intent
	// listed, then gone at its GET, is skipped (fixed: the vanished
	// intent's attempt is looked for in a second listing).
	{"Claims/Bad/GoneIntentSkipped", "claims.pml", with(claimsBad, "-DGONE_INTENT_SKIPPED"), claimsEpochs},
	// That second listing without its epoch markers.
	{"Claims/Bad/RelistNoMarkers", "claims.pml", with(claimsBad, "-DRELIST_NO_MARKERS"), claimsEpochs},
	// The release without a look (ADR 0067) must leave its own marker.
	{"Claims/Bad/ReleaseOwnMarker", "claims.pml", with(claimsBad, "-DRELEASE_OWN_MARKER"), claimsEpochs},

	// The findings of issue 23, each as the code was at 0ac0f30 (ADR
	// 0026–0029).
	{"Finding1/ReleaseWithoutDrain", "time.pml", with(timeNoConds, "-DNO_DRAIN"), timeData},
	{"Finding2/UnconditionalFencedWrites", "time.pml", with(timeWrites, "-DBLIND_DATA"), timeData},
	{"Finding3/IntentOnTheStorageClock", "time.pml", with(timeIntent, "-DINTENT_STORAGE_AGE"), timeIntents},
	{"Finding4/OtherIDAfterAMissedHeartbeat", "time.pml", with(timeJudge, "-DOTHER_ID_MISSED_HB"), timeOtherID},
	{"Finding5/BreakTakesAWatchedLock", "time.pml", with(with(timeJudge, "-DBREAK"), "-DBREAK_WATCHING"), timeOtherID},
	// Finding 6 was cas.pml's; the compare-and-swap heartbeat has no check
	// after a suspension since ADR 0066, the claims heartbeat has.
	{"Finding6/SuspendedDecidedAtTheSend", "claims.pml", with(claimsFaults, "-DSUSPEND_AT_SEND"), mutualExclusion},
	{"Time/Bad/StorageAgeOnly", "time.pml", with(timeJudge, "-DSTORAGE_AGE_ONLY"), timeExclusion},
}

// TestModels generates each verifier with spin, compiles it and runs it to
// the end of its search.
func TestModels(t *testing.T) {
	spin := requireTool(t, "spin", "apt-get install spin (make test installs it)")
	gcc := requireTool(t, "gcc", "apt-get install gcc")
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := verify(t, spin, gcc, c, false)
			if c.fails == "" {
				if res.errors != 0 || res.violated != "" {
					t.Fatalf("%s %s: %d errors (%s); pan said:\n%s", c.model, strings.Join(c.defines, " "), res.errors, res.violated, res.out)
				}
				if !res.complete {
					t.Fatalf("%s %s: the search did not complete (depth or memory bound); pan said:\n%s", c.model, strings.Join(c.defines, " "), res.out)
				}
				t.Logf("%s %s: errors: 0, complete; %d states stored, %.0f transitions, depth %d, %.1f s",
					c.model, strings.Join(c.defines, " "), res.states, res.transitions, res.depth, res.elapsed)
				return
			}
			if res.errors < 1 || !violates(res.violated, c.fails) {
				t.Fatalf("%s %s: want the violation %q, got %d errors (%q); pan said:\n%s", c.model, strings.Join(c.defines, " "), c.fails, res.errors, res.violated, res.out)
			}
			t.Logf("%s %s: %s after %d states (%.1f s), as it must", c.model, strings.Join(c.defines, " "), res.violated, res.states, res.elapsed)
			if *writeTrails {
				bfs := verify(t, spin, gcc, c, true)
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				name := filepath.Join("testdata", strings.ReplaceAll(c.name, "/", "-")+".txt")
				hdr := fmt.Sprintf("# spin -a %s %s; gcc -DSAFETY -DBFS; ./pan; spin -t (MSC lines)\n# %s\n",
					strings.Join(c.defines, " "), c.model, bfs.violated)
				if err := os.WriteFile(name, []byte(hdr+bfs.trail), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s", name)
			}
		})
	}
}

// violates matches pan's violated assertion against want, where a final
// '*' matches any rest (which of two symmetric processes trips it first).
func violates(got, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "*"); ok {
		return strings.HasPrefix(got, prefix)
	}
	return got == want
}

func requireTool(t *testing.T, name, howto string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testserver.RequireServer(t, name, howto)
	}
	return p
}

type result struct {
	out         string
	errors      int
	violated    string
	complete    bool
	states      int64
	transitions float64
	depth       int
	elapsed     float64
	trail       string
}

var (
	reErrors  = regexp.MustCompile(`depth reached (\d+), errors: (\d+)`)
	reStored  = regexp.MustCompile(`(?m)^\s*([0-9.e+]+) states, stored`)
	reTrans   = regexp.MustCompile(`(?m)^\s*([0-9.e+]+) transitions`)
	reElapsed = regexp.MustCompile(`pan: elapsed time ([0-9.e+]+) seconds`)
	reViolate = regexp.MustCompile(`pan:\d+: (assertion violated .*) \(at depth \d+\)`)
)

// verify runs spin -a, gcc and pan in a temporary directory. bfs asks for
// a breadth-first search (the shortest counterexample) and the trail.
func verify(t *testing.T, spin, gcc string, c check, bfs bool) result {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(c.model)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, c.model), src, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(spin, append(append([]string{"-a"}, c.defines...), c.model)...)
	// SAFETY: only safety properties (assertions, invalid end states);
	// COLLAPSE: lossless state compression; MEMLIM: a bound in MB, so that a
	// model grown too big fails as incomplete instead of filling the host.
	// -O2 only where the search is long: a short search does not repay
	// gcc's optimiser (seconds per model).
	opt := "-O2"
	if c.fails != "" {
		opt = "-O0"
	}
	cflags := []string{opt, "-w", "-DSAFETY", "-DCOLLAPSE", "-DMEMLIM=2048", "-o", "pan", "pan.c"}
	if bfs {
		cflags = append([]string{"-DBFS"}, cflags...)
	}
	pan := compilePan(t, ctx, gcc, dir, cflags, run)
	out := run(pan, "-m200000", "-w23")
	res := parse(t, out)
	if bfs && res.errors > 0 {
		trail := run(spin, append(append([]string{"-t"}, c.defines...), c.model)...)
		var b strings.Builder
		sc := bufio.NewScanner(strings.NewReader(trail))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if rest, ok := strings.CutPrefix(line, "MSC: "); ok {
				b.WriteString(rest + "\n")
			} else if strings.HasPrefix(line, "spin: text of failed assertion") {
				b.WriteString(line + "\n")
			}
		}
		res.trail = b.String()
	}
	return res
}

// compilePan compiles the verifier spin generated in dir with cflags and
// returns its path. The binary is cached by the hash of everything gcc
// reads (the generated sources, the flags, gcc's version), the way go
// build caches a package: the search itself runs every time, only the
// compile (seconds to tens of seconds per model, most of the package's
// time under load) is skipped when nothing it depends on changed. The
// cache lives in the user's cache directory beside the test servers
// (cairn-state/pan); CAIRN_MODEL_NOCACHE=1 compiles every time.
func compilePan(t *testing.T, ctx context.Context, gcc, dir string, cflags []string, run func(string, ...string) string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil || os.Getenv("CAIRN_MODEL_NOCACHE") == "1" {
		run(gcc, cflags...)
		return filepath.Join(dir, "pan")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q\n%s\n", cflags, gccVersion(t, ctx, gcc))
	srcs, err := filepath.Glob(filepath.Join(dir, "pan.*"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("spin generated no pan.* sources in %s (%v)", dir, err)
	}
	for _, src := range srcs { // Glob sorts: a stable order
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(src), len(b))
		h.Write(b)
	}
	cached := filepath.Join(cache, "cairn-state", "pan", hex.EncodeToString(h.Sum(nil)))
	if fi, err := os.Stat(cached); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0 {
		return cached
	}
	run(gcc, cflags...)
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Logf("pan cache: %v (compiled, not cached)", err)
		return filepath.Join(dir, "pan")
	}
	// Into the cache by rename, so that a concurrent run never sees half
	// a binary.
	tmp, err := os.CreateTemp(filepath.Dir(cached), "pan-*")
	if err == nil {
		b, rerr := os.ReadFile(filepath.Join(dir, "pan"))
		_, werr := tmp.Write(b)
		cerr := tmp.Close()
		if err = errors.Join(rerr, werr, cerr, os.Chmod(tmp.Name(), 0o755)); err == nil {
			err = os.Rename(tmp.Name(), cached)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		t.Logf("pan cache: %v (compiled, not cached)", err)
	}
	return filepath.Join(dir, "pan")
}

var (
	gccVersionOnce sync.Once
	gccVersionOut  string
)

// gccVersion is gcc's own description of itself, part of the cache key.
func gccVersion(t *testing.T, ctx context.Context, gcc string) string {
	gccVersionOnce.Do(func() {
		out, err := exec.CommandContext(ctx, gcc, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("gcc --version: %v\n%s", err, out)
		}
		gccVersionOut = string(out)
	})
	return gccVersionOut
}

func parse(t *testing.T, out string) result {
	t.Helper()
	res := result{out: out}
	m := reErrors.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pan's output has no error count:\n%s", out)
	}
	res.depth, _ = strconv.Atoi(m[1])
	res.errors, _ = strconv.Atoi(m[2])
	if m := reStored.FindStringSubmatch(out); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		res.states = int64(f)
	}
	if m := reTrans.FindStringSubmatch(out); m != nil {
		res.transitions, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reElapsed.FindStringSubmatch(out); m != nil {
		res.elapsed, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reViolate.FindStringSubmatch(out); m != nil {
		res.violated = m[1]
	}
	res.complete = !strings.Contains(out, "Search not completed") &&
		!strings.Contains(out, "max search depth too small") &&
		!strings.Contains(out, "reached -DMEMLIM bound")
	return res
}
