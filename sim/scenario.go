package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Scenario is a fault script for Run. See ParseScenario for the
// language.
type Scenario struct {
	Name  string
	Steps []Step
}

// AtEnd is Step.At for steps triggered when the run ends.
const AtEnd = -1

// Step is one line of a scenario.
type Step struct {
	Line int    // line number in the file, from 1
	At   int    // trigger iteration, or AtEnd
	Text string // the step as written, without its trigger

	op     string
	nodes  nodeSet   // kill, restart, slow; join's donors (nil: any)
	groups []nodeSet // partition
	value  float64   // slow factor; loss, dup and reorder probability; assertion bound
	count  int       // join
	metric string    // assert
	cmp    string    // assert
	churn  *churnSpec
}

// churnSpec is a churn step's session model: Weibull session lengths in
// iterations, departures until an iteration, a share of them kills.
type churnSpec struct {
	shape, scale float64
	until        int // 0: the run's last iteration
	kills        float64
}

// nodeSet is a union of node ranges as written; it is resolved against the
// number of nodes when the run starts.
type nodeSet []nodeRange

// nodeRange is lo..hi inclusive (node numbers), or [lo%, hi%) of the nodes.
type nodeRange struct {
	lo, hi  float64
	percent bool
}

// Assertion metrics and comparisons.
var (
	assertMetrics = []string{"staleness", "loss", "accuracy", "live", "undelivered", "applied_twice"}
	assertCmps    = []string{"<=", ">=", "==", "<", ">"}
)

// ParseScenario reads a fault script: one step per line, each preceded by
// its trigger, with # starting a comment.
//
//	at 5: loss 0.05            # every link now loses 5% of messages
//	at 10: slow 3 x4           # node 3 computes four times slower (x1 restores)
//	at 20: kill 0-3,7          # nodes stop; peers suspect them after the detection delay
//	at 25: restart 2           # a killed node resumes with the state it had
//	at 28: leave 5             # node 5 stops after announcing its last clock
//	at 30: partition 0-7 | 8-15
//	at 40: heal                # every partition ends
//	at 42: join 2              # two new members start from live members' snapshots
//	at 44: join via 5-7        # one more, from the snapshot of one of nodes 5-7
//	at 10: churn weibull 0.5 40 until 90 kills 0.25
//	at 45: assert staleness <= 3
//	at end: assert loss <= 0.4
//
// "at N" fires once the slowest live node has completed N iterations (so
// "at 0" fires at the start); "at end" fires when the run is over. Steps with
// the same trigger run in file order. Node sets are node numbers (from 0),
// ranges a-b, percentages of the nodes ("25%" is the first quarter,
// "50%-100%" the second half), or comma-separated lists of these. A partition
// lists groups separated by |; nodes in no group form one more group. dup
// and reorder set those link faults as loss does. An assertion compares
// staleness (the largest read staleness so far), loss or accuracy (the mean
// test figures of the live nodes now), live (the number of live nodes),
// undelivered or applied_twice (as in the report's invariants) with <=, <,
// >=, > or ==; its outcome is reported, it does not stop the run.
//
// join adds one new member (join k adds k): each starts from the snapshot of
// a live member and is admitted by the rest, as Run describes; "via"
// and a node set limit the donors to those nodes (the run fails when none
// of them is up). New
// members are numbered on from the run's nodes in the order they join, so
// later steps can name them; a node set that names a node, or a percentage,
// counts the nodes started by then, dead ones included.
//
// churn weibull K L makes members come and go from its trigger on: every
// member started by then, and every member that arrives, stays for a
// session drawn from a Weibull distribution of shape K (0.1 to 10; below 1
// heavy-tailed, as P2P measurements find) and scale L iterations (1 to
// 10^6), then leaves with notice, or is killed with the probability kills
// gives (default 0); members arrive by join, at a Poisson rate per
// iteration of the run's initial nodes over the mean session, so that the
// mesh keeps about its size. Departures and arrivals stop after iteration
// until (default: the run's last). The draws come from the run's seed and
// the step's line, apart from the seed's other draws; a departure that
// would leave fewer than two members up is skipped. Errors name the file
// and line.
func ParseScenario(r io.Reader, name string) (*Scenario, error) {
	sc := &Scenario{Name: name}
	in := bufio.NewScanner(r)
	line := 0
	for in.Scan() {
		line++
		text, _, _ := strings.Cut(in.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		st, err := parseStep(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		st.Line = line
		sc.Steps = append(sc.Steps, st)
	}
	if err := in.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return sc, nil
}

func parseStep(text string) (Step, error) {
	trigger, rest, ok := strings.Cut(text, ":")
	f := strings.Fields(trigger)
	if !ok || len(f) != 2 || f[0] != "at" {
		return Step{}, fmt.Errorf("%q: want \"at <iteration>: <step>\" or \"at end: <step>\"", text)
	}
	st := Step{Text: strings.TrimSpace(rest)}
	if f[1] == "end" {
		st.At = AtEnd
	} else {
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return Step{}, fmt.Errorf("trigger %q: want an iteration >= 0 or end", f[1])
		}
		st.At = n
	}
	words := strings.Fields(st.Text)
	if len(words) == 0 {
		return Step{}, fmt.Errorf("no step after %q", trigger+":")
	}
	st.op = words[0]
	args := words[1:]
	var err error
	switch st.op {
	case "kill", "restart", "leave":
		if len(args) != 1 {
			return Step{}, fmt.Errorf("%s: want one node set, such as %s 3 or %s 0-3,7", st.op, st.op, st.op)
		}
		st.nodes, err = parseNodeSet(args[0])
	case "slow":
		if len(args) != 2 || !strings.HasPrefix(args[1], "x") {
			return Step{}, fmt.Errorf("slow: want a node set and a factor, such as slow 5 x4")
		}
		if st.nodes, err = parseNodeSet(args[0]); err != nil {
			break
		}
		st.value, err = strconv.ParseFloat(args[1][1:], 64)
		if err != nil || !(st.value >= 1) || math.IsInf(st.value, 0) {
			return Step{}, fmt.Errorf("slow: factor %q: want x followed by a finite number >= 1", args[1])
		}
	case "partition":
		groups := strings.Split(strings.Join(args, ""), "|")
		if len(groups) < 2 {
			return Step{}, fmt.Errorf("partition: want at least two groups separated by |, such as partition 0-7 | 8-15")
		}
		for _, g := range groups {
			set, err := parseNodeSet(g)
			if err != nil {
				return Step{}, fmt.Errorf("partition: %w", err)
			}
			st.groups = append(st.groups, set)
		}
	case "heal":
		if len(args) != 0 {
			return Step{}, fmt.Errorf("heal takes no arguments")
		}
	case "loss", "dup", "reorder":
		if len(args) != 1 {
			return Step{}, fmt.Errorf("%s: want one probability, such as %s 0.05", st.op, st.op)
		}
		st.value, err = strconv.ParseFloat(args[0], 64)
		if err != nil || !(st.value >= 0 && st.value < 1) {
			return Step{}, fmt.Errorf("%s: %q is not a probability in [0, 1)", st.op, args[0])
		}
	case "assert":
		expr := strings.Join(args, " ")
		for _, c := range assertCmps {
			if m, v, ok := strings.Cut(expr, c); ok {
				st.metric, st.cmp = strings.TrimSpace(m), c
				st.value, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return Step{}, fmt.Errorf("assert: %q is not a number", strings.TrimSpace(v))
				}
				break
			}
		}
		if st.cmp == "" {
			return Step{}, fmt.Errorf("assert: want <metric> <op> <number>, such as assert staleness <= 3")
		}
		if !slices.Contains(assertMetrics, st.metric) {
			return Step{}, fmt.Errorf("assert: unknown metric %q (known: %s)", st.metric, strings.Join(assertMetrics, ", "))
		}
	case "join":
		st.count = 1
		if k := len(args); k >= 2 && args[k-2] == "via" {
			if st.nodes, err = parseNodeSet(args[k-1]); err != nil {
				return Step{}, fmt.Errorf("join: via: %w", err)
			}
			args = args[:k-2]
		}
		switch {
		case len(args) > 1:
			return Step{}, fmt.Errorf("join: want nothing or a number of new members, such as join or join 3, then optionally via and a node set (join 2 via 0-3)")
		case len(args) == 1:
			st.count, err = strconv.Atoi(args[0])
			if err != nil || st.count < 1 || st.count > MaxNodes {
				return Step{}, fmt.Errorf("join: %q is not a number of new members from 1 to %d", args[0], MaxNodes)
			}
		}
	case "churn":
		st.churn, err = parseChurn(args)
	default:
		return Step{}, fmt.Errorf("unknown step %q (known: kill, restart, partition, heal, join, leave, churn, slow, loss, dup, reorder, assert)", st.op)
	}
	if err != nil {
		return Step{}, fmt.Errorf("%s: %w", st.op, err)
	}
	return st, nil
}

// parseChurn reads "weibull K L [until M] [kills F]".
func parseChurn(args []string) (*churnSpec, error) {
	const want = "want weibull <shape> <scale in iterations>, then optionally until <iteration> and kills <share>, such as churn weibull 0.5 40 until 90 kills 0.25"
	if len(args) < 3 || args[0] != "weibull" || len(args)%2 != 1 {
		return nil, errors.New(want)
	}
	c := &churnSpec{}
	var err error
	if c.shape, err = strconv.ParseFloat(args[1], 64); err != nil || !(c.shape >= 0.1 && c.shape <= 10) {
		return nil, fmt.Errorf("shape %q: want a number from 0.1 to 10", args[1])
	}
	if c.scale, err = strconv.ParseFloat(args[2], 64); err != nil || !(c.scale >= 1 && c.scale <= 1e6) {
		return nil, fmt.Errorf("scale %q: want a number of iterations from 1 to 1000000", args[2])
	}
	seen := map[string]bool{}
	for i := 3; i < len(args); i += 2 {
		key, value := args[i], args[i+1]
		if seen[key] {
			return nil, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "until":
			if c.until, err = strconv.Atoi(value); err != nil || c.until < 1 {
				return nil, fmt.Errorf("until %q: want an iteration >= 1", value)
			}
		case "kills":
			if c.kills, err = strconv.ParseFloat(value, 64); err != nil || !(c.kills >= 0 && c.kills <= 1) {
				return nil, fmt.Errorf("kills %q: want a share from 0 to 1", value)
			}
		default:
			return nil, fmt.Errorf("%q: %s", key, want)
		}
	}
	return c, nil
}

// parseNodeSet reads "3", "0-3", "25%", "50%-100%" or a comma-separated
// list of these.
func parseNodeSet(s string) (nodeSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty node set")
	}
	var set nodeSet
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		pl, pctLo := strings.CutSuffix(lo, "%")
		ph, pctHi := strings.CutSuffix(hi, "%")
		if pctLo != pctHi {
			return nil, fmt.Errorf("%q: mix of a node number and a percentage", part)
		}
		var r nodeRange
		var err1, err2 error
		if pctLo {
			r.percent = true
			r.lo, err1 = strconv.ParseFloat(pl, 64)
			r.hi, err2 = strconv.ParseFloat(ph, 64)
			if !isRange {
				r.lo, r.hi = 0, r.lo
			}
			if err1 != nil || err2 != nil || !(r.lo >= 0 && r.lo <= r.hi && r.hi <= 100) {
				return nil, fmt.Errorf("%q: want percentages 0 <= a <= b <= 100", part)
			}
		} else {
			a, e1 := strconv.Atoi(pl)
			b, e2 := strconv.Atoi(ph)
			if e1 != nil || e2 != nil || a < 0 || a > b {
				return nil, fmt.Errorf("%q: want a node number or a range a-b with 0 <= a <= b", part)
			}
			r.lo, r.hi = float64(a), float64(b)
		}
		set = append(set, r)
	}
	return set, nil
}

// resolve lists the node numbers of s among p nodes, sorted and distinct.
func (s nodeSet) resolve(p int) ([]int, error) {
	var out []int
	for _, r := range s {
		lo, hi := int(r.lo), int(r.hi)
		if r.percent {
			lo, hi = int(math.Floor(r.lo*float64(p)/100)), int(math.Floor(r.hi*float64(p)/100))-1
		} else if hi >= p {
			return nil, fmt.Errorf("node %d does not exist: the run has %d nodes (0-%d)", hi, p, p-1)
		}
		for i := lo; i <= hi; i++ {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
