package sim

// Running a fault script (see scenario.go for its language): its steps
// resolved to iterations, churn expanded into joins and leaves, each
// fired when the live members reach it.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// simStep is a scenario step resolved against the run's nodes.
type simStep struct {
	Step
	name   string
	nodes  []int
	groups []int // node → group, for partition
	// churn marks a departure a churn step drew: skipped when it would
	// leave fewer than two members up.
	churn bool
}

// resolveSteps checks the scenario against the run, orders its steps by
// trigger (file order within a trigger), expands churn into the joins,
// leaves and kills it draws, and sets p, the number of nodes the run will
// have started by its end. A step's node sets are resolved against the
// nodes started by the time it fires.
func (s *sim) resolveSteps() error {
	s.p = s.cfg.Nodes
	sc := s.cfg.Faults
	if sc == nil {
		return nil
	}
	items := make([]plannedStep, len(sc.Steps))
	for i, st := range sc.Steps {
		items[i] = plannedStep{Step: st}
	}
	sortPlanned(items)
	last, length := s.exchanges()
	for i := 0; i < len(items); i++ {
		it := items[i]
		st := it.Step
		rs := simStep{Step: st, name: sc.Name}
		where := fmt.Sprintf("%s:%d", sc.Name, st.Line)
		if st.At > last {
			return fmt.Errorf("%s: iteration %d is beyond the run's %s", where, st.At, length)
		}
		if st.At == AtEnd && st.op != "assert" {
			return fmt.Errorf("%s: only assert may run at end", where)
		}
		var err error
		if st.nodes != nil {
			if rs.nodes, err = st.nodes.resolve(s.p); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		if st.groups != nil {
			rs.groups = make([]int, s.p)
			for i := range rs.groups {
				rs.groups[i] = len(st.groups) // in no group
			}
			for g, set := range st.groups {
				members, err := set.resolve(s.p)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				for _, i := range members {
					if rs.groups[i] != len(st.groups) {
						return fmt.Errorf("%s: node %d is in two groups", where, i)
					}
					rs.groups[i] = g
				}
			}
		}
		switch {
		case st.op == "churn":
			if st.churn.until > last {
				return fmt.Errorf("%s: until %d is beyond the run's %s", where, st.churn.until, length)
			}
			items = append(items[:i+1], append(s.expandChurn(st, s.p), items[i+1:]...)...)
			sortPlanned(items[i+1:])
		case it.slot != nil && st.op == "join":
			*it.slot = s.p
		case it.slot != nil:
			rs.nodes, rs.churn = []int{*it.slot}, true
			rs.Text = fmt.Sprintf("%s %d (churn)", st.op, *it.slot)
		}
		if st.op == "restart" {
			if s.restartable == nil {
				s.restartable = map[int]bool{}
			}
			for _, n := range rs.nodes {
				s.restartable[n] = true
			}
		}
		if st.op == "join" {
			if s.p+st.count > MaxNodes {
				return fmt.Errorf("%s: %d more nodes make %d, above the limit of %d", where, st.count, s.p+st.count, MaxNodes)
			}
			s.p += st.count
		}
		s.steps = append(s.steps, rs)
	}
	return nil
}

// plannedStep is a scenario step before it is resolved; slot links the
// join and the departure a churn step drew for one arrival: the join sets
// the node number the departure names.
type plannedStep struct {
	Step
	slot *int
}

// sortPlanned orders steps by trigger, at end last, keeping the order of
// steps with the same trigger.
func sortPlanned(items []plannedStep) {
	key := func(at int) int {
		if at == AtEnd {
			return math.MaxInt
		}
		return at
	}
	slices.SortStableFunc(items, func(a, b plannedStep) int { return key(a.At) - key(b.At) })
}

// expandChurn draws what churn step st does to the run, of which started
// nodes are up by its trigger: a departure for every member whose session
// ends by the step's last iteration, and arrivals at a Poisson rate per
// iteration, each with its own session. The draws come from a source of
// their own, so the run's other draws are those of the same run without
// churn.
func (s *sim) expandChurn(st Step, started int) []plannedStep {
	c := st.churn
	until := c.until
	if until == 0 {
		until = s.cfg.Iterations
	}
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0xc4_0000_0000+uint64(st.Line)))
	session := func() int {
		// Inverse transform: L·(−ln U)^(1/K), U in (0, 1].
		return max(1, int(math.Ceil(c.scale*math.Pow(-math.Log(1-rng.Float64()), 1/c.shape))))
	}
	derived := func(at int, op string, slot *int) plannedStep {
		return plannedStep{Step: Step{Line: st.Line, At: at, Text: op + " (churn)", op: op, count: 1}, slot: slot}
	}
	var out []plannedStep
	depart := func(from int, slot *int) {
		op := "leave"
		if rng.Float64() < c.kills {
			op = "kill"
		}
		if at := from + session(); at <= until {
			out = append(out, derived(at, op, slot))
		}
	}
	for i := range started {
		depart(st.At, &i)
	}
	rate := float64(s.cfg.Nodes) / (c.scale * math.Gamma(1+1/c.shape))
	for t := st.At + 1; t <= until; t++ {
		for range poisson(rng, rate) {
			slot := new(int)
			out = append(out, derived(t, "join", slot))
			depart(t, slot)
		}
	}
	return out
}

// poisson draws a Poisson count of mean lambda, in parts of at most 30
// (Knuth's method, whose e^−λ underflows for large λ).
func poisson(rng *rand.Rand, lambda float64) int {
	k := 0
	for lambda > 0 {
		part := min(lambda, 30)
		lambda -= part
		limit, prod := math.Exp(-part), rng.Float64()
		for prod > limit {
			k++
			prod *= rng.Float64()
		}
	}
	return k
}

// fireSteps runs the steps whose trigger the slowest live node has reached.
// exchanges returns the run's last clock, which a script's steps count
// to, and says what it is: with local steps a node's clock counts
// exchanges, and a step past the last one would never fire.
func (s *sim) exchanges() (last int, length string) {
	h := max(s.cfg.Exchange.LocalSteps, 1)
	if h == 1 {
		return s.cfg.Iterations, fmt.Sprintf("%d iterations", s.cfg.Iterations)
	}
	last = (s.cfg.Iterations + h - 1) / h
	return last, fmt.Sprintf("%d exchanges (%d iterations of %d local steps each; fault scripts count exchanges)", last, s.cfg.Iterations, h)
}

func (s *sim) fireSteps() error {
	for s.nextStep < len(s.steps) {
		st := s.steps[s.nextStep]
		if st.At == AtEnd || uint64(st.At) > s.minLiveClock() {
			return nil
		}
		s.nextStep++
		if err := s.fire(st); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) fire(st simStep) error {
	s.trace.words(trStep, uint64(s.now), uint64(st.Line))
	switch st.op {
	case "kill", "leave":
		for _, i := range st.nodes {
			n := s.nodes[i]
			if !n.alive || n.leaving || st.churn && s.live() <= 2 {
				continue
			}
			if st.op == "leave" {
				s.leave(n)
			} else {
				s.stopNode(n)
			}
		}
		if s.live() == 0 {
			return fmt.Errorf("%s:%d: %q leaves no live node", st.name, st.Line, st.Text)
		}
		s.noteDone()
	case "restart":
		for _, i := range st.nodes {
			n := s.nodes[i]
			if n.left {
				return fmt.Errorf("%s:%d: %q: node %d left the mesh; a member that left does not come back (join adds a new one)", st.name, st.Line, st.Text, i)
			}
			if n.alive {
				continue
			}
			n.alive = true
			n.inc++
			s.schedule(s.now+s.tick, evTick, int32(i), 0, n.inc, nil)
		}
		for _, i := range st.nodes {
			s.workerOf(int32(i)).advance(s.nodes[i])
		}
		s.noteDone()
	case "join":
		first := len(s.nodes)
		for i := first; i < first+st.count; i++ {
			if err := s.join(i, first, st.nodes); err != nil {
				return err
			}
		}
	case "partition":
		for i, g := range st.groups {
			s.nodes[i].group = g
		}
	case "heal":
		for _, n := range s.nodes {
			n.group = 0
		}
	case "slow":
		for _, i := range st.nodes {
			s.nodes[i].slow = st.value
		}
	case "loss":
		s.net.Loss = st.value
	case "dup":
		s.net.Duplicate = st.value
	case "reorder":
		s.net.Reorder = st.value
	case "assert":
		s.assert(st)
	}
	if s.cfg.Progress != nil {
		s.progress(fmt.Sprintf("at %s: %s", atText(st.At), st.Text))
	}
	return nil
}

func atText(at int) string {
	if at == AtEnd {
		return "end"
	}
	return strconv.Itoa(at)
}
