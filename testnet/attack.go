package testnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/attack"
	"github.com/sketchmesh/sketchmesh/mesh"
	"github.com/sketchmesh/sketchmesh/netmodel"
	"github.com/sketchmesh/sketchmesh/node"
)

// The run side of an attack (Config.Attack): the baseline it is compared
// with, the hardened mesh it runs against, and the overlay that puts a
// member attacker on it as a leaf. The hostile peer itself is package
// attack, hosted through the adversary hook (adversary.go).

// RunAttack runs the testnet twice with the same seed, first with the
// baseline of cfg.Attack (Baseline), then with the hostile peer, and
// returns the attacked run's report with the comparison filled in.
func RunAttack(ctx context.Context, cfg Config) (*Report, error) {
	if !slices.Contains(AttackKinds, cfg.Attack) {
		return nil, fmt.Errorf("unknown attack %q (want one of %v)", cfg.Attack, AttackKinds)
	}
	baseRep, basePeak, err := runSampled(ctx, Baseline(cfg))
	if err != nil {
		return nil, fmt.Errorf("run without the attacker: %w", err)
	}
	return RunAttackAgainst(ctx, cfg, baseRep, basePeak)
}

// Baseline returns the run an attack is compared with: the same hardened
// mesh with a quiet member in the attacker's place when the attacker is a
// member, and without it otherwise.
func Baseline(cfg Config) Config {
	base := cfg
	base.Attack = ""
	if attack.IsMember(cfg.Attack) {
		base.Attack = quietMember
	}
	base.Progress = nil
	base.JoinAt = cfg.joinAt()
	hardenForAttack(&base)
	return base
}

// RunAttackAgainst runs the attack of cfg and compares it with a baseline
// report (and its peak heap, 0 if unknown) of the same hardened run
// without the attacker.
func RunAttackAgainst(ctx context.Context, cfg Config, baseline *Report, baselinePeak uint64) (*Report, error) {
	rep, peak, err := runSampled(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := rep.Attack
	a.PeakHeapBytes = peak
	a.WithinMemoryBound = true
	if baselinePeak > 0 {
		a.BaselinePeakHeapBytes = baselinePeak
		a.MemoryBoundBytes = 2*baselinePeak + 64<<20
		a.WithinMemoryBound = peak <= a.MemoryBoundBytes
	}
	a.HonestAccuracy = rep.FinalTestAccuracy
	if baseline != nil && baseline.FinalTestAccuracy != nil && rep.FinalTestAccuracy != nil {
		b := *baseline.FinalTestAccuracy
		d := 100 * (*rep.FinalTestAccuracy - b)
		a.BaselineAccuracy, a.AccuracyDeltaPoints = &b, &d
	}
	return rep, nil
}

// runSampled runs cfg while sampling the process's heap.
func runSampled(ctx context.Context, cfg Config) (*Report, uint64, error) {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	rep, err := Run(ctx, cfg)
	close(done)
	wg.Wait()
	return rep, peak.Load(), err
}

// hardenForAttack turns on what an attack run tests: signed updates, a PSK
// and an allow list.
func hardenForAttack(c *Config) {
	c.Sign = true
	c.AllowList = true
	if c.PSK == nil {
		// Derived from the seed, so runs stay reproducible.
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], c.Seed)
		copy(seed[8:], "sketchmesh-testnet-psk")
		psk := make([]byte, 32)
		_, _ = rand.NewChaCha8(seed).Read(psk)
		c.PSK = psk
	}
}

// attackerKey is the hostile peer's identity, derived from the seed apart
// from every node's.
func attackerKey(seed uint64) (crypto.PrivKey, error) { return nodeKey(seed, 1<<20) }

// allIDs returns the member ids a run's hosts will have (and the
// attacker's, when it is a member), derived from the seed.
func (c *Config) allIDs() ([]peer.ID, error) {
	ids := make([]peer.ID, 0, c.Nodes+1)
	for i := 0; i < c.Nodes; i++ {
		key, err := nodeKey(c.Seed, i)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		ids = append(ids, id)
	}
	if c.joinAt() > 0 {
		key, err := c.joinerKey()
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if attack.IsMember(c.Attack) {
		key, err := attackerKey(c.Seed)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// secureHost sets the PSK and the allow list of a node's host config.
func (c *Config) secureHost(hc *mesh.HostConfig) error {
	hc.PSK = c.PSK
	if !c.AllowList {
		return nil
	}
	ids, err := c.allIDs()
	if err != nil {
		return err
	}
	hc.Allow = mesh.NewAllowList(ids...)
	return nil
}

// nodeSecurity returns node i's authenticator (nil unless Sign) and screen.
func (c *Config) nodeSecurity(i int, id string) (node.Authenticator, *node.Robust, error) {
	robust, err := node.NewRobust(c.Robust)
	if err != nil {
		return nil, nil, err
	}
	if !c.Sign {
		return nil, robust, nil
	}
	key, err := nodeKey(c.Seed, i)
	if err != nil {
		return nil, nil, err
	}
	auth, err := mesh.NewKeyAuthenticator(c.meshName(), id, key)
	if err != nil {
		return nil, nil, fmt.Errorf("node %d: %w", i, err)
	}
	return auth, robust, nil
}

func (c *Config) meshName() string {
	if c.MeshName == "" {
		return "testnet"
	}
	return c.MeshName
}

// leafRouter is an overlay with one extra member as a leaf: every origin
// sends it its own update directly, nobody relays through it, and what it
// sends it sends to everyone itself.
type leafRouter struct {
	netmodel.Router
	leaf string
}

func (l leafRouter) Forward(origin, at string) []string {
	if origin == l.leaf {
		return nil
	}
	hops := l.Router.Forward(origin, at)
	if origin == at {
		hops = append(slices.Clone(hops), l.leaf)
	}
	return hops
}
