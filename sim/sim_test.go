package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

var simData = sync.OnceValues(func() ([2]*dataset.Dataset, error) {
	train, test, err := dataset.Builtin("rcv1")
	return [2]*dataset.Dataset{train, test}, err
})

func simConfig(t testing.TB, nodes, iterations int, seed uint64) Config {
	t.Helper()
	d, err := simData()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Nodes: nodes, Train: d[0], Test: d[1], Training: netmodel.Training{
			Model: model.LogisticRegression, Optimizer: model.SGD, LR: 1, L2: 1e-4,
			Batch: 0.1, Iterations: iterations, Seed: seed, Codec: "raw",
		},
	}
}

func loadScenario(t testing.TB, name string) *Scenario {
	t.Helper()
	path := filepath.Join("testdata", "scenarios", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ParseScenario(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func simulate(t testing.TB, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Many seeds of a short faulty run (5% loss, a kill, a partition and its
// heal, a member joining during the partition and two after it) on both
// topologies and three staleness bounds: no update is applied twice, no read
// by a live node is staler than s, every update a live node holds reaches
// every live node, and every run replays to the same trace.
func TestSimInvariantsUnderFaults(t *testing.T) {
	sc := loadScenario(t, "smoke.txt")
	seeds := simInvariantSeeds
	if testing.Short() {
		seeds = min(seeds, 10)
	}
	hashes := map[string]uint64{}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := simConfig(t, 8, 20, seed)
		cfg.Faults = sc
		cfg.Staleness = int(seed % 3)
		if seed%2 == 0 {
			cfg.Topology = "full"
		}
		// Seeds 2, 3, 6, 7, ... run on two workers (workers.go).
		cfg.Workers = 1 + int(seed/2%2)
		r := simulate(t, cfg)
		inv := r.Invariants
		if !inv.OK || inv.AppliedTwice != 0 || inv.MaxReadStaleness > uint64(cfg.Staleness) || inv.UndeliveredAfterHeal != 0 || inv.Stalled {
			t.Fatalf("seed %d (s=%d, %s): invariants %+v", seed, cfg.Staleness, cfg.Topology, inv)
		}
		if r.LiveNodes != 10 || r.Joined != 3 || r.NodeIterations < 7*20+3 {
			t.Fatalf("seed %d: %d live nodes (%d joined) ran %d iterations; want 7 nodes to finish 20 each and 3 to join", seed, r.LiveNodes, r.Joined, r.NodeIterations)
		}
		if r.Dropped["loss"] == 0 || r.UpdatesResent == 0 {
			t.Fatalf("seed %d: %d messages lost, %d updates resent: the faults did not bite", seed, r.Dropped["loss"], r.UpdatesResent)
		}
		for _, a := range r.Assertions {
			if !a.Passed {
				t.Fatalf("seed %d: %s failed with value %v", seed, a.Step, a.Value)
			}
		}
		if again := simulate(t, cfg); again.TraceHash != r.TraceHash || again.FinalTestLoss != r.FinalTestLoss {
			t.Fatalf("seed %d: rerun gives trace %s and loss %v, first run %s and %v", seed, again.TraceHash, again.FinalTestLoss, r.TraceHash, r.FinalTestLoss)
		}
		if prev, dup := hashes[r.TraceHash]; dup {
			t.Fatalf("seeds %d and %d give the same trace hash %s", prev, seed, r.TraceHash)
		}
		hashes[r.TraceHash] = seed
	}
}

// Workers run the same protocol in another order: a run on 1, 2 or 3
// workers (3 over 16 nodes: shares of 6, 5 and 5) holds the invariants,
// trains every iteration, replays to its trace, and its trace depends on
// the number of workers, which the configuration bounds.
func TestSimWorkers(t *testing.T) {
	traces := map[string]int{}
	for _, w := range []int{1, 2, 3} {
		cfg := simConfig(t, 16, 12, 4)
		cfg.Workers = w
		r := simulate(t, cfg)
		if !r.Invariants.OK || r.NodeIterations != 16*12 || r.LiveNodes != 16 {
			t.Fatalf("%d workers: invariants %+v, %d node-iterations, %d live", w, r.Invariants, r.NodeIterations, r.LiveNodes)
		}
		if again := simulate(t, cfg); again.TraceHash != r.TraceHash || again.FinalTestLoss != r.FinalTestLoss {
			t.Fatalf("%d workers: rerun gives trace %s, first run %s", w, again.TraceHash, r.TraceHash)
		}
		if prev, dup := traces[r.TraceHash]; dup {
			t.Fatalf("%d and %d workers give the same trace %s", prev, w, r.TraceHash)
		}
		traces[r.TraceHash] = w
	}
	for _, w := range []int{-1, MaxWorkers + 1} {
		cfg := simConfig(t, 4, 2, 1)
		cfg.Workers = w
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "workers must be between 1 and") {
			t.Fatalf("%d workers: %v", w, err)
		}
	}
}

// Without faults, bulk-synchronous nodes end bit-identical (as the core
// promises), and the report's accounting adds up.
func TestSimFaultFreeFullMesh(t *testing.T) {
	cfg := simConfig(t, 6, 15, 3)
	cfg.Topology = "full"
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := s.nodes[0].core.View()
	for _, n := range s.nodes[1:] {
		if !sameView(first, n.core.View()) {
			t.Fatalf("%s's view differs from %s's", n.id, s.nodes[0].id)
		}
	}
	r := s.report(time.Second)
	if r.NodeIterations != 6*15 || !r.Invariants.OK || len(r.Dropped) != 0 || r.StalenessObservedMax != 0 {
		t.Fatalf("report %+v", r)
	}
	// Each node sends its update to the five others once per iteration;
	// the rest is sync traffic.
	if r.MessagesTotal < 6*5*15 || r.MessagesPerNodePerIteration != float64(r.MessagesTotal)/90 {
		t.Fatalf("messages %d, per node-iteration %v", r.MessagesTotal, r.MessagesPerNodePerIteration)
	}
	if r.FinalTestAccuracy == nil || *r.FinalTestAccuracy < 0.5 {
		t.Fatalf("accuracy %v", r.FinalTestAccuracy)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
}

// sameView reports whether two views are equal bit for bit.
func sameView(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// A paused node resumes with its state; peers wait for it again and the
// run completes with every node alive.
func TestSimRestartAndStraggler(t *testing.T) {
	cfg := simConfig(t, 4, 20, 5)
	cfg.Faults = loadScenario(t, "restart.txt")
	cfg.Staleness = 1
	r := simulate(t, cfg)
	if !r.Invariants.OK || r.LiveNodes != 4 {
		t.Fatalf("invariants %+v, %d live", r.Invariants, r.LiveNodes)
	}
	if len(r.Assertions) != 1 || !r.Assertions[0].Passed {
		t.Fatalf("assertions %+v", r.Assertions)
	}
	// Node 2 ran all its iterations: the restarted node resumed, not restarted from zero.
	if r.NodeIterations != 4*20 {
		t.Fatalf("%d node-iterations, want 80", r.NodeIterations)
	}
	clean := simConfig(t, 4, 20, 5)
	clean.Staleness = 1
	if base := simulate(t, clean); base.SimulatedSeconds >= r.SimulatedSeconds {
		t.Fatalf("the faulty run took %.3fs simulated, no longer than the clean %.3fs", r.SimulatedSeconds, base.SimulatedSeconds)
	}
}

// On geo3 a bulk-synchronous iteration cannot be faster than the farthest
// site pair's one-way latency.
func TestSimGeo3Latency(t *testing.T) {
	cfg := simConfig(t, 6, 10, 1)
	wan, err := netmodel.ParseLinkProfile("geo3")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WAN = wan
	r := simulate(t, cfg)
	if min := 10 * 0.120; r.SimulatedSeconds < min {
		t.Fatalf("10 iterations over geo3 took %.3fs simulated, below %.2fs", r.SimulatedSeconds, min)
	}
	if r.BlockedSecondsPerNode < 10*0.08 {
		t.Fatalf("blocked %.3fs per node over geo3", r.BlockedSecondsPerNode)
	}
	if !r.Invariants.OK {
		t.Fatalf("invariants %+v", r.Invariants)
	}
}

// Messages on one link queue behind each other at the link's bandwidth.
func TestSimLinkQueueing(t *testing.T) {
	s := linkSim(t, 2, 0) // 8 Mbit/s, 1 MB/s: 1 ms per 1000 bytes
	msg := make([]byte, 1000)
	s.send(0, 1, msg)
	s.send(0, 1, msg)
	s.send(1, 0, msg) // another link: does not queue behind
	got, _ := runLinks(s)
	ms := int64(time.Millisecond)
	want := []int64{11 * ms, 11 * ms, 12 * ms}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
}

// The link table keeps only the links still busy: a sweep forgets those
// free by now, and a message on a link still busy queues as before.
func TestSimLinkSweepKeepsBusyLinks(t *testing.T) {
	s := linkSim(t, 3, 0) // 8 Mbit/s, 1 MB/s: 1 ms per 1000 bytes
	ms := int64(time.Millisecond)
	s.send(0, 1, make([]byte, 1000)) // free at 1 ms
	s.send(1, 2, make([]byte, 5000)) // free at 5 ms
	s.now = 2 * ms
	s.sweepLinks()
	if _, ok := s.busy[linkKey(0, 1)]; ok || s.busy[linkKey(1, 2)] != 5*ms || len(s.busy) != 1 || s.busyKept != 1 {
		t.Fatalf("after the sweep at 2 ms: %v, kept %d", s.busy, s.busyKept)
	}
	s.send(1, 2, make([]byte, 1000)) // behind the 5 ms: free at 6 ms
	s.send(0, 1, make([]byte, 1000)) // from now: free at 3 ms
	want := []int64{11 * ms, 13 * ms, 15 * ms, 16 * ms}
	if got, _ := runLinks(s); !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
}

// linkSim is the one worker of a simulator of nodes nodes on links of
// 10 ms and 8 Mbit/s, whose queues hold queueBytes of update traffic (0:
// the default).
func linkSim(t *testing.T, nodes, queueBytes int) *worker {
	t.Helper()
	cfg := simConfig(t, nodes, 1, 1)
	wan, err := netmodel.ParseLinkProfile("latency=10ms,bandwidth=8Mbit")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WAN, cfg.SendQueueBytes = wan, queueBytes
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s.workers[0]
}

// runLinks runs the link events queued in s (a busy link's next message
// starting) and returns the arrival times of the messages, in order, and
// their sizes.
func runLinks(s *worker) (at []int64, sizes []int) {
	for len(s.q) > 0 {
		ev := s.q.pop()
		s.now = ev.at
		if ev.kind == evLinkFree {
			s.linkFree(ev.from, ev.node)
			continue
		}
		at, sizes = append(at, ev.at), append(sizes, len(ev.data))
	}
	return at, sizes
}

// What waits for a busy link is kept as the daemon's send queue keeps it:
// an announcement goes ahead of the update traffic that has not started
// (a hello behind seconds of frames would make the members take each
// other for dead), and update traffic past SendQueueBytes is dropped,
// oldest first; a sender that stops takes its queue with it.
func TestSimLinkAnnouncementsGoFirst(t *testing.T) {
	s := linkSim(t, 2, 2500) // 8 Mbit/s, 1 MB/s: 1 ms per 1000 bytes
	hello := node.EncodeAnnouncement(node.Announcement{Kind: node.KindHello, Member: "n0"})
	ms := int64(time.Millisecond)
	for _, size := range []int{1000, 1000, 1000} {
		s.send(0, 1, make([]byte, size))
	}
	s.send(0, 1, hello)
	s.send(0, 1, make([]byte, 1000)) // past 2500 bytes waiting: the oldest waiting goes
	at, sizes := runLinks(s)
	// The first 1000 bytes leave at once (arrive at 11 ms); the hello
	// next, ahead of the two frames still waiting.
	helloAt := 11*ms + int64(len(hello))*int64(time.Microsecond)
	if len(at) != 4 || s.dropped["queue"] != 1 {
		t.Fatalf("arrivals at %v, %d dropped from the queue: want 4 arrivals and 1 dropped", at, s.dropped["queue"])
	}
	if at[0] != 11*ms || sizes[0] != 1000 || at[1] != helloAt || sizes[1] != len(hello) {
		t.Fatalf("arrivals at %v of %v bytes: want 1000 bytes at 11 ms, then the hello at %d ns", at, sizes, helloAt)
	}

	// A sender that stops while its link is busy takes its queue along.
	s.send(0, 1, make([]byte, 1000))
	s.send(0, 1, make([]byte, 1000))
	s.nodes[0].inc++
	arrived, _ := runLinks(s)
	if len(arrived) != 1 || s.dropped["dead"] != 1 {
		t.Fatalf("after the sender stopped: %d arrivals, %d dropped as dead, want 1 and 1", len(arrived), s.dropped["dead"])
	}
}

func TestSimEventOrder(t *testing.T) {
	var q simQueue
	for i, at := range []int64{5, 1, 3, 1, 5, 0, 3} {
		q.push(simEvent{at: at, seq: uint64(i)})
	}
	var prev simEvent
	for i := 0; len(q) > 0; i++ {
		ev := q.pop()
		if i > 0 && (ev.at < prev.at || ev.at == prev.at && ev.seq < prev.seq) {
			t.Fatalf("popped (%d,%d) after (%d,%d)", ev.at, ev.seq, prev.at, prev.seq)
		}
		prev = ev
	}
}

// Pushes and pops interleaved at random, as a run makes them: every pop
// takes the least (at, seq) still queued, and the queue holds what was
// pushed and not popped.
func TestSimEventQueueAgainstSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var q simQueue
	var held []simEvent
	seq := uint64(0)
	for step := range 20000 {
		if len(held) == 0 || rng.IntN(3) > 0 {
			seq++
			e := simEvent{at: int64(rng.IntN(50)), seq: seq, node: int32(step)}
			q.push(e)
			held = append(held, e)
			continue
		}
		least := 0
		for i := range held {
			if held[i].at < held[least].at || held[i].at == held[least].at && held[i].seq < held[least].seq {
				least = i
			}
		}
		if got, want := q.pop(), held[least]; got.at != want.at || got.seq != want.seq || got.node != want.node {
			t.Fatalf("step %d: popped %+v, want %+v", step, got, want)
		}
		held = slices.Delete(held, least, least+1)
		if len(q) != len(held) {
			t.Fatalf("step %d: %d queued, want %d", step, len(q), len(held))
		}
	}
}

func TestParseScenario(t *testing.T) {
	src := `# comment
at 0: loss 0.05
at 3: slow 1,4-5 x2.5   # trailing comment
at 5: kill 25%
at 8: partition 0%-50% | 50%-100%
at 9: heal
at 9: dup 0.01
at 9: reorder 0.1
at 10: restart 0-1
at 11: join
at 11: join 3
at 12: assert staleness <= 3
at end: assert accuracy >= 0.5
`
	sc, err := ParseScenario(strings.NewReader(src), "x.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Steps) != 12 || sc.Steps[1].Line != 3 || sc.Steps[1].Text != "slow 1,4-5 x2.5" || sc.Steps[11].At != AtEnd {
		t.Fatalf("steps %+v", sc.Steps)
	}
	if j1, j3 := sc.Steps[8], sc.Steps[9]; j1.op != "join" || j1.count != 1 || j3.count != 3 {
		t.Fatalf("joins %+v %+v", j1, j3)
	}
	via, err := ParseScenario(strings.NewReader("at 2: join 2 via 1,4-5"), "via.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := via.Steps[0].nodes.resolve(8); via.Steps[0].count != 2 || !slices.Equal(got, []int{1, 4, 5}) {
		t.Fatalf("join 2 via 1,4-5: %d members via %v", via.Steps[0].count, got)
	}
	nodes, err := sc.Steps[1].nodes.resolve(8)
	if err != nil || len(nodes) != 3 || nodes[0] != 1 || nodes[2] != 5 || sc.Steps[1].value != 2.5 {
		t.Fatalf("slow: %v %v %v", nodes, sc.Steps[1].value, err)
	}
	if q, _ := sc.Steps[2].nodes.resolve(8); len(q) != 2 || q[1] != 1 {
		t.Fatalf("25%% of 8 nodes: %v", q)
	}
	if g, _ := sc.Steps[3].groups[1].resolve(8); len(g) != 4 || g[0] != 4 {
		t.Fatalf("50%%-100%% of 8 nodes: %v", g)
	}
	for in, want := range map[string]string{
		"at 3 kill 1":               "want \"at <iteration>: <step>\"",
		"kill 1":                    "want \"at <iteration>: <step>\"",
		"at -1: kill 1":             "iteration >= 0",
		"at 3: join 0":              "number of new members",
		"at 3: join two":            "number of new members",
		"at 3: join 1 2":            "join or join 3",
		"at 3: join 2 via x":        "via",
		"at 3: join via":            "number of new members",
		"at 3: explode 1":           "unknown step",
		"at 3: kill":                "one node set",
		"at 3: kill 3-1":            "0 <= a <= b",
		"at 3: kill 10%-5%":         "percentages",
		"at 3: slow 1 4":            "slow 5 x4",
		"at 3: slow 1 x0.5":         "factor",
		"at 3: partition 0-3":       "two groups",
		"at 3: loss 2":              "probability",
		"at 3: assert speed <= 1":   "unknown metric",
		"at 3: assert loss about 1": "<metric> <op> <number>",
		"at 3: heal now":            "no arguments",
		"at 3:":                     "no step",
	} {
		_, err := ParseScenario(strings.NewReader("\n"+in), "x.txt")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "x.txt:2: ") {
			t.Errorf("%q: error %v, want x.txt:2 and %q", in, err, want)
		}
	}
}

// A scenario that does not fit the run is refused before it starts, naming
// the file and line.
func TestSimRejectsBadConfig(t *testing.T) {
	bad := func(name, script string, mutate func(*Config)) {
		t.Helper()
		cfg := simConfig(t, 4, 10, 1)
		if script != "" {
			sc, err := ParseScenario(strings.NewReader(script), "s.txt")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Faults = sc
		}
		if mutate != nil {
			mutate(&cfg)
		}
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if script != "" && !strings.Contains(err.Error(), "s.txt:1") {
			t.Errorf("%s: error %q does not name s.txt:1", name, err)
		}
	}
	bad("node out of range", "at 1: kill 4", nil)
	bad("trigger past the end", "at 11: heal", nil)
	bad("kill at end", "at end: kill 1", nil)
	bad("node in two groups", "at 1: partition 0-2 | 2-3", nil)
	bad("kill everyone", "at 1: kill 0-3", nil)
	bad("kill a node before it joins", "at 1: kill 4\nat 2: join", nil)
	bad("join at end", "at end: join", nil)
	bad("join beyond the limit", fmt.Sprintf("at 1: join %d", MaxNodes-3), nil)
	bad("no nodes", "", func(c *Config) { c.Nodes = 0 })
	bad("too many nodes", "", func(c *Config) { c.Nodes = MaxNodes + 1 })
	bad("unknown topology", "", func(c *Config) { c.Topology = "ring" })
	bad("negative staleness", "", func(c *Config) { c.Staleness = -1 })
	bad("unknown codec", "", func(c *Config) { c.Codec = "gzip9" })
	bad("negative compute time", "", func(c *Config) { c.ComputeTime = -time.Millisecond })
	bad("small sync window", "", func(c *Config) { c.Staleness = 2; c.Sync.Window = 3 })
}

// Failing assertions are reported, not fatal; a cancelled context stops the
// run with an error that wraps the cause.
func TestSimAssertionsAndCancel(t *testing.T) {
	cfg := simConfig(t, 4, 10, 2)
	sc, err := ParseScenario(strings.NewReader("at 5: assert live == 3\nat end: assert loss < 10"), "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults = sc
	r := simulate(t, cfg)
	if len(r.Assertions) != 2 || r.Assertions[0].Passed || r.Assertions[0].Value != 4 || !r.Assertions[1].Passed || r.Assertions[0].Iteration < 5 {
		t.Fatalf("assertions %+v", r.Assertions)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, simConfig(t, 4, 10, 2)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}

func TestSimProgress(t *testing.T) {
	cfg := simConfig(t, 4, 20, 1)
	sc, err := ParseScenario(strings.NewReader("at 7: slow 0 x2"), "p.txt")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults = sc
	var got []Progress
	cfg.Progress = func(p Progress) { got = append(got, p) }
	simulate(t, cfg)
	steps := 0
	for i, p := range got {
		if p.Step != "" {
			steps++
			if p.Step != "at 7: slow 0 x2" || p.Iteration != 7 {
				t.Fatalf("step report %+v", p)
			}
			continue
		}
		if i > 0 && p.Iteration <= got[i-1].Iteration || p.Live != 4 || math.IsNaN(p.TestLoss) {
			t.Fatalf("report %d: %+v", i, p)
		}
	}
	if steps != 1 || len(got) < 10 {
		t.Fatalf("%d reports, %d for steps", len(got), steps)
	}
}

// A driver that asks for a status line at every chance (Config.Heartbeat)
// gets reports while the cores are built (at most one per 64), then
// between windows reports without test metrics whose clocks never go
// back, and the run is the same as without.
func TestSimHeartbeatChangesNothing(t *testing.T) {
	// On three sites, whose labels the members announce: both protocols
	// send.
	wan, err := netmodel.ParseLinkProfile("geo3")
	if err != nil {
		t.Fatal(err)
	}
	base := simConfig(t, 130, 12, 3)
	base.Workers, base.WAN = 2, wan
	plain := simulate(t, base)

	cfg := simConfig(t, 130, 12, 3)
	cfg.Workers, cfg.WAN = 2, wan
	var built []int
	var beats []Progress
	evaluated := 0
	cfg.Heartbeat = func() bool { return true }
	cfg.Progress = func(p Progress) {
		switch {
		case !p.Heartbeat:
			evaluated++
		case p.Built < cfg.Nodes:
			built = append(built, p.Built)
		default:
			beats = append(beats, p)
		}
	}
	r := simulate(t, cfg)
	if r.TraceHash != plain.TraceHash {
		t.Fatalf("trace %s with heartbeats, %s without", r.TraceHash, plain.TraceHash)
	}
	if len(built) == 0 || built[0] < 64 || !slices.IsSorted(built) || built[len(built)-1] >= cfg.Nodes {
		t.Fatalf("reports while building: %v, want counts from 64 up, below %d", built, cfg.Nodes)
	}
	if evaluated == 0 || len(beats) < 10 {
		t.Fatalf("%d heartbeats and %d evaluated reports", len(beats), evaluated)
	}
	for i, p := range beats {
		if !math.IsNaN(p.TestLoss) || p.Live != cfg.Nodes || p.Iteration > p.Fastest || p.Fastest > 12 ||
			i > 0 && (p.Iteration < beats[i-1].Iteration || p.SimulatedSeconds < beats[i-1].SimulatedSeconds || p.BytesSent < beats[i-1].BytesSent) {
			t.Fatalf("heartbeat %d: %+v after %+v", i, p, beats[max(i-1, 0)])
		}
	}
	if last := beats[len(beats)-1]; last.Iteration != 12 || last.BytesSent == 0 || last.MembershipBytes == 0 {
		t.Fatalf("last heartbeat %+v: want every node at 12 and bytes sent by both protocols", last)
	}
}

// TestSimStress runs harsher scripts (kills during partitions, three-way
// splits, restarts, joins, duplication and reordering, several networks) over
// SKETCHMESH_SIM_STRESS seeds; it is skipped when that is unset.
func TestSimStress(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("SKETCHMESH_SIM_STRESS"))
	if seeds <= 0 {
		t.Skip("set SKETCHMESH_SIM_STRESS to a number of seeds")
	}
	scripts := []struct {
		nodes int
		src   string
	}{
		{8, "at 0: loss 0.1\nat 0: dup 0.05\nat 0: reorder 0.1\nat 4: kill 1,6\nat 7: restart 1\nat 9: partition 0-2 | 3-7\nat 11: kill 2\nat 14: heal\nat 15: restart 6"},
		{8, "at 2: partition 0-1 | 2-3 | 4-7\nat 3: kill 5\nat 6: heal\nat 6: restart 5\nat 8: slow 0 x5\nat 10: loss 0.2"},
		{8, "at 1: kill 0-5\nat 3: restart 0-2\nat 5: loss 0.1\nat 9: restart 3-5"},
		{16, "at 0: loss 0.02\nat 3: kill 25%\nat 6: partition 0%-50% | 50%-100%\nat 9: restart 0\nat 10: heal\nat 12: restart 25%"},
		{16, "at 1: partition 0%-30% | 30%-60% | 60%-100%\nat 2: kill 5\nat 3: kill 12\nat 5: restart 5\nat 7: heal\nat 8: loss 0.15\nat 8: dup 0.1\nat 8: reorder 0.2"},
		{16, "at 0: slow 3 x3\nat 4: partition 0-7 | 8-15\nat 5: kill 0-3\nat 6: kill 8-11\nat 8: restart 0-1\nat 9: heal\nat 10: restart 8-9"},
		{8, "at 0: loss 0.05\nat 2: join\nat 4: partition 0-3 | 4-8\nat 5: join 2\nat 6: kill 8\nat 8: heal\nat 9: restart 8\nat 10: join 3"},
		// stress-7 failed on every seed: nodes 0-3, killed at 3 and
		// restarted at 10, never learned that the joiner admitted at 4 and
		// killed at 7 was a member, and lacked its updates that every other
		// node held; and a joiner admitted during the split took a snapshot
		// without that joiner. Members now send a member back from a
		// silence the admits they took in meanwhile, and forward a late
		// admit to the joiners they admitted since (node.Node.resendAdmits,
		// forwardAdmit). (It also stalled at seeds 14 and 34 when a member
		// joined from a donor whose rows were behind an earlier joiner's
		// entry clock.)
		{16, "at 0: reorder 0.05\nat 3: kill 25%\nat 4: join 4\nat 6: partition 0%-50% | 50%-100%\nat 7: join\nat 7: kill 16\nat 9: heal\nat 10: restart 25%\nat 12: join 2"},
	}
	networks := []string{"lan", "geo3,loss=0.01", "geo3,jitter=5ms", "latency=20ms,bandwidth=10Mbit,jitter=2ms,reorder=0.05"}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		for i, sc := range scripts {
			script, err := ParseScenario(strings.NewReader(sc.src), fmt.Sprintf("stress-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			cfg := simConfig(t, sc.nodes, 15, seed)
			cfg.Faults, cfg.Staleness = script, int(seed%4)
			if seed%2 == 0 {
				cfg.Topology = "full"
			}
			if seed%3 == 0 {
				cfg.FlushDelay = time.Millisecond
			}
			if cfg.WAN, err = netmodel.ParseLinkProfile(networks[seed%4]); err != nil {
				t.Fatal(err)
			}
			r := simulate(t, cfg)
			// A joiner runs from its entry clock, not from 0.
			if !r.Invariants.OK || r.NodeIterations < uint64(max(0, r.LiveNodes-r.Joined)*15) {
				t.Errorf("seed %d, %s (s=%d, %s, %s): invariants %+v, %d live nodes ran %d iterations",
					seed, script.Name, cfg.Staleness, cfg.Topology, networks[seed%4], r.Invariants, r.LiveNodes, r.NodeIterations)
			}
		}
	}
}

// Links too slow for the traffic, without a budget: raw frames of 16
// nodes on 300 kbit/s links. Answers to sync requests of 1 MiB a tick
// kept the links full of resends after training ended, members took each
// other for dead behind them, and the run stalled with updates
// undelivered; paced at the link's rate, in bursts no larger than it
// carries in a suspicion timeout (node.SyncConfig.ReplyRate), it holds.
func TestSimSlowLinksWithoutABudgetHold(t *testing.T) {
	cfg := simConfig(t, 16, 30, 1)
	cfg.Staleness = 2
	wan, err := netmodel.ParseLinkProfile("latency=50ms,bandwidth=300kbit")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WAN = wan
	r := simulate(t, cfg)
	if !r.Invariants.OK {
		t.Fatalf("invariants %+v, %d updates resent", r.Invariants, r.UpdatesResent)
	}
}

// A run ends as soon as every live node is done and holds every update:
// a mesh that trains no more says hellos, P² deliveries a round, and
// waiting for the next periodic check (at 200 ms here, the nodes done at
// 135 ms) let it say a round more than the one every node says as it
// starts.
func TestSimEndsWhenAllAreDone(t *testing.T) {
	const p = 48
	cfg := simConfig(t, p, 12, 1)
	s, r := runSim(t, cfg)
	if !r.Invariants.OK {
		t.Fatalf("invariants %+v", r.Invariants)
	}
	if s.now != s.allDoneAt {
		t.Errorf("the run went on to %d ns, past %d ns, when all were done", s.now, s.allDoneAt)
	}
	if r.MembershipMessages > p*(p-1) {
		t.Errorf("%d membership messages, more than one hello from each of %d nodes to every other (%d)", r.MembershipMessages, p, p*(p-1))
	}
}

// Recycling the buffers of delivered envelopes (node.QueuePool.Recycle)
// changes nothing a run does: under loss, duplicates, reordering, a kill,
// a partition and joins, on one and two workers, the trace and the loss are
// those of a run that leaves every envelope to the collector. A core that
// kept a reference into an envelope it read would read the next envelope
// written there instead.
func TestRecycledEnvelopesChangeNothing(t *testing.T) {
	wan, err := netmodel.ParseLinkProfile("geo3,loss=0.02,dup=0.05,reorder=0.05")
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		cfg := simConfig(t, 8, 20, 3)
		cfg.Faults = loadScenario(t, "smoke.txt")
		cfg.WAN, cfg.Workers = wan, workers
		cfg.keepEnvelopes = true
		kept := simulate(t, cfg)
		cfg.keepEnvelopes = false
		recycled := simulate(t, cfg)
		if kept.EnvelopesReused != 0 || recycled.EnvelopesReused == 0 {
			t.Fatalf("%d workers: %d envelopes reused keeping them, %d recycling", workers, kept.EnvelopesReused, recycled.EnvelopesReused)
		}
		if !recycled.Invariants.OK || recycled.TraceHash != kept.TraceHash || recycled.FinalTestLoss != kept.FinalTestLoss || recycled.Duplicated == 0 {
			t.Fatalf("%d workers: recycled run: trace %s, loss %v, invariants %+v, %d duplicates; kept: trace %s, loss %v",
				workers, recycled.TraceHash, recycled.FinalTestLoss, recycled.Invariants, recycled.Duplicated, kept.TraceHash, kept.FinalTestLoss)
		}
		t.Logf("%d workers: %d envelopes reused of %d messages", workers, recycled.EnvelopesReused, recycled.MessagesTotal)
	}
}
