package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/dataset"
	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
)

// testPeer returns a fixed peer id.
func testPeer(t testing.TB, seed byte) peer.ID {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sgdState is a checkpoint of an SGD node whose rows carry pending frames.
func sgdState(t testing.TB) *State {
	a, b := testPeer(t, 1).String()+"/0", testPeer(t, 2).String()+"/3"
	return &State{
		Mesh:   "lab-mesh",
		Member: b,
		Settings: node.Settings{
			Model: model.Softmax, MaxFeature: 3, Classes: []float64{0, 1, 2}, L2: 0,
			Optimizer: model.SGD, LearningRate: 0.05, Staleness: 2, Codec: "sketchml",
			ErrorFeedback: false, Factors: node.FactorsAuto, Iterations: 500,
		},
		Clock: 42,
		Rows: &node.Snapshot{
			Clock: 40,
			View:  []float64{0, math.Copysign(0, -1), 1.5, -2.25e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, -1e10, 0.1, 1.0 / 3},
			Members: []node.MemberEntry{
				{ID: a, Live: true, High: 38, Ahead: []uint64{40}},
				{ID: b, Live: true, High: 40},
				{ID: testPeer(t, 3).String() + "/1", Live: false, High: 12},
			},
			Pending: []node.Update{
				{Origin: a, Clock: 41, Frame: []byte("frame 41")},
				{Origin: a, Clock: 42, Frame: []byte{0, 1, 2, 255}, Sig: bytes.Repeat([]byte{7}, 64)},
			},
		},
		Optimizer: model.OptimizerState{Kind: model.SGD},
	}
}

// adamState is a checkpoint of an Adam node without pending frames.
func adamState(t testing.TB) *State {
	id := testPeer(t, 4).String() + "/18446744073709551615"
	return &State{
		Mesh:   "m",
		Member: id,
		Settings: node.Settings{
			Model: model.LogisticRegression, MaxFeature: 4, L2: 1e-4, Optimizer: model.Adam,
			LearningRate: 0.02, Staleness: 0, Codec: "raw", ErrorFeedback: true, Factors: node.FactorsOff,
		},
		Clock: 7,
		Rows: &node.Snapshot{
			Clock:   7,
			View:    []float64{0.25, -0.5, 3, 1e-9},
			Members: []node.MemberEntry{{ID: id, Live: true, High: 7}},
		},
		Optimizer: model.OptimizerState{Kind: model.Adam, Steps: 7, M: []float64{-0.1, 0, 0.3, 1e-12}, V: []float64{0.01, 0, 0.09, 5e-324}},
	}
}

// sameBits fails unless a and b hold the same float64 bit patterns.
func sameBits(t *testing.T, what string, a, b []float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(b), len(a))
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, b[i], a[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for name, want := range map[string]*State{"sgd": sgdState(t), "adam": adamState(t)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, want); err != nil {
				t.Fatal(err)
			}
			got, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
			}
			sameBits(t, "view", want.Rows.View, got.Rows.View)
			sameBits(t, "m", want.Optimizer.M, got.Optimizer.M)
			sameBits(t, "v", want.Optimizer.V, got.Optimizer.V)
			assertOnlyCheckpoint(t, dir)
		})
	}
}

func TestSaveCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "ckpt")
	if err := Save(dir, adamState(t)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestLoadMissing(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		_, err := Load(dir)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Load(%s): %v, want fs.ErrNotExist", dir, err)
		}
		if errors.Is(err, ErrCorrupt) {
			t.Fatalf("a missing checkpoint reported as corrupt: %v", err)
		}
	}
}

// fileBytes returns the checkpoint file of s.
func fileBytes(s *State) []byte {
	header, body := encode(s)
	data := append(header, body...)
	sum := sha256.Sum256(data)
	return append(data, sum[:]...)
}

// reseal recomputes the checksum of a file whose header or body was edited.
func reseal(data []byte) []byte {
	n := len(data) - trailerBytes
	sum := sha256.Sum256(data[:n])
	return append(data[:n:n], sum[:]...)
}

// writeFile puts data in dir as the checkpoint file.
func writeFile(t *testing.T, dir string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadCorrupt(t *testing.T) {
	good := fileBytes(sgdState(t))
	badMember := sgdState(t)
	badMember.Member = "not-a-member"
	badVersion := slices.Clone(good)
	binary.BigEndian.PutUint32(badVersion[8:], 1)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 bytes"},
		{"in magic", good[:5], "truncated: 5 bytes"},
		{"in header", good[:headerBytes-1], "truncated"},
		{"header only", good[:headerBytes], "truncated: header declares"},
		{"in body", good[:headerBytes+10], "truncated: header declares"},
		{"in checksum", good[:len(good)-1], "truncated: header declares"},
		{"trailing", append(slices.Clone(good), 0), "1 trailing bytes"},
		{"foreign", []byte("key: value\nother: 1\n"), "bad magic"},
		{"version", reseal(badVersion), "format version 1, this build reads version 3"},
		{"body flip", flip(good, headerBytes+30, 0), "checksum mismatch"},
		{"checksum flip", flip(good, len(good)-1, 7), "checksum mismatch"},
		{"bad field", fileBytes(badMember), `bad field: member id "not-a-member"`},
		{"huge length", withLength(good, 1<<62), "more than any checkpoint holds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, c.data)
			_, err := Load(dir)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q, want it to name %s and %q", err, path, c.want)
			}
		})
	}
}

func TestLoadMalformedBody(t *testing.T) {
	// A body with the right checksum that does not decode: the cause is the
	// wire error, naming the field.
	s := adamState(t)
	header, body := encode(s)
	body = body[:len(body)-3]
	binary.BigEndian.PutUint64(header[12:], uint64(len(body)))
	dir := t.TempDir()
	writeFile(t, dir, reseal(append(append(header, body...), make([]byte, trailerBytes)...)))
	_, err := Load(dir)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), "second moment") {
		t.Fatalf("error %v, want ErrCorrupt and wire.ErrMalformed naming the second moment", err)
	}
}

func TestEveryBitFlipIsCaught(t *testing.T) {
	good := fileBytes(adamState(t))
	for i := range good {
		for b := range 8 {
			if _, err := decode(flip(good, i, b)); err == nil {
				t.Fatalf("flipping bit %d of byte %d went unnoticed", b, i)
			}
		}
	}
	// And through Load, once per region.
	for _, i := range []int{0, 9, 15, headerBytes + 1, len(good) - 5} {
		dir := t.TempDir()
		writeFile(t, dir, flip(good, i, 3))
		if _, err := Load(dir); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}

func flip(data []byte, i, bit int) []byte {
	out := slices.Clone(data)
	out[i] ^= 1 << bit
	return out
}

func withLength(data []byte, n uint64) []byte {
	out := slices.Clone(data)
	binary.BigEndian.PutUint64(out[12:], n)
	return out
}

// assertOnlyCheckpoint fails unless dir holds the checkpoint file and
// nothing else.
func assertOnlyCheckpoint(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{FileName}) {
		t.Fatalf("directory holds %v, want only %s", names, FileName)
	}
}

func mustLoad(t *testing.T, dir string) *State {
	t.Helper()
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveReplaces(t *testing.T) {
	dir := t.TempDir()
	first, second := sgdState(t), sgdState(t)
	second.Clock, second.Rows.Clock = 43, 41
	second.Rows.View[2] = -7
	if err := Save(dir, first); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, second); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, dir); !reflect.DeepEqual(got, second) {
		t.Fatalf("loaded clock %d view %v, want the second save", got.Clock, got.Rows.View)
	}
	assertOnlyCheckpoint(t, dir)
}

func TestFailedSaveKeepsOld(t *testing.T) {
	dir := t.TempDir()
	old := adamState(t)
	if err := Save(dir, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	newer := adamState(t)
	newer.Clock = 9

	t.Run("rename fails", func(t *testing.T) {
		rename = func(string, string) error { return errors.New("disk on fire") }
		defer func() { rename = os.Rename }()
		if err := Save(dir, newer); err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Fatalf("Save: %v, want the rename's error", err)
		}
	})
	t.Run("invalid state", func(t *testing.T) {
		bad := adamState(t)
		bad.Optimizer.V = bad.Optimizer.V[:2]
		if err := Save(dir, bad); err == nil || !strings.Contains(err.Error(), "adam state has 4 and 2 moments") {
			t.Fatalf("Save: %v, want the validation error", err)
		}
	})
	after, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a failed Save changed the checkpoint")
	}
	if got := mustLoad(t, dir); !reflect.DeepEqual(got, old) {
		t.Fatal("the old checkpoint does not load as it was saved")
	}
	assertOnlyCheckpoint(t, dir)
}

func TestSaveIntoAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Save(file, adamState(t))
	if err == nil || !strings.Contains(err.Error(), "checkpoint directory") {
		t.Fatalf("Save into a file: %v, want an error about the directory", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "data" {
		t.Fatalf("the file now holds %q", b)
	}
	if _, err := Load(file); err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load from a file: %v, want an I/O error", err)
	}
}

func TestSaveDoesNotReplaceCorrupt(t *testing.T) {
	good := fileBytes(adamState(t))
	for name, data := range map[string][]byte{
		"foreign":   []byte("not a checkpoint"),
		"truncated": good[:len(good)/2],
		"flipped":   flip(good, headerBytes+2, 1),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFile(t, dir, data)
			err := Save(dir, adamState(t))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not replaced") {
				t.Fatalf("Save over a corrupt file: %v, want ErrCorrupt, not replaced", err)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, data) {
				t.Fatal("the corrupt file was changed")
			}
			assertOnlyCheckpoint(t, dir)
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, FileName), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := Save(dir, adamState(t)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Save over a directory: %v, want ErrCorrupt", err)
		}
		if _, err := Load(dir); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Load of a directory: %v, want ErrCorrupt", err)
		}
	})
}

func TestSaveRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, FileName+".tmp123")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, adamState(t)); err != nil {
		t.Fatal(err)
	}
	assertOnlyCheckpoint(t, dir)
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(s *State)
		want string
	}{
		{"no mesh", func(s *State) { s.Mesh = "" }, "mesh name"},
		{"no rows", func(s *State) { s.Rows = nil }, "no rows"},
		{"bare peer id", func(s *State) { s.Member = testPeer(t, 1).String() }, "want <peer id>/<incarnation>"},
		{"bad peer id", func(s *State) { s.Member = "QmNope/1" }, "peer id"},
		{"bad incarnation", func(s *State) { s.Member = testPeer(t, 1).String() + "/01" }, `incarnation "01"`},
		{"rows ahead", func(s *State) { s.Rows.Clock = s.Clock + 1 }, "rows' clock 43 is above the node's clock 42"},
		{"empty member", func(s *State) { s.Rows.Members[0].ID = "" }, "empty id"},
		{"twice", func(s *State) { s.Rows.Members[1].ID = s.Rows.Members[0].ID }, "listed twice"},
		{"high", func(s *State) { s.Rows.Members[1].High = 41 }, "holds up to 41, above the rows' clock 40 and its entry 0"},
		{"high above entry above rows", func(s *State) { s.Rows.Members[1].Entry, s.Rows.Members[1].High = 41, 42 }, "holds up to 42, above the rows' clock 40 and its entry 41"},
		{"entry above high", func(s *State) { s.Rows.Members[1].Entry = 41 }, "holds up to 40, below its entry clock 41"},
		{"ahead", func(s *State) { s.Rows.Members[0].Ahead = []uint64{38} }, "lists clock 38 outside (38, 40]"},
		{"kind", func(s *State) { s.Optimizer.Kind = model.Adam }, `optimizer state is of "adam", the settings name "sgd"`},
		{"unknown", func(s *State) { s.Optimizer.Kind, s.Settings.Optimizer = "lion", "lion" }, `unknown optimizer "lion"`},
		{"sgd moments", func(s *State) { s.Optimizer.M = []float64{1} }, "sgd state has 1 and 0 moments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sgdState(t)
			c.edit(s)
			err := Save(t.TempDir(), s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Save: %v, want an error mentioning %q", err, c.want)
			}
			if c.name == "no rows" {
				return
			}
			// The same state, written anyway, does not load.
			dir := t.TempDir()
			writeFile(t, dir, fileBytes(s))
			if _, err := Load(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v, want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
	t.Run("negative second moment", func(t *testing.T) {
		s := adamState(t)
		s.Optimizer.V[1] = -1e-300
		if err := Save(t.TempDir(), s); err == nil || !strings.Contains(err.Error(), "second moment [1]") {
			t.Fatalf("Save: %v", err)
		}
	})
}

// Issue 14, defect 8: a donor admits a joiner at its own rows' clock, which
// may be ahead of this node's rows; the node's snapshot then lists the
// joiner with High = Entry above the rows' clock, which a node started from
// it accepts, and Save used to refuse ("entry 41 above the rows' clock
// 40"), losing the checkpoint. It is saved, read back unchanged, and a node
// starts from what was read.
func TestCheckpointWhileJoinerEntryAboveRows(t *testing.T) {
	settings := node.Settings{Model: model.LogisticRegression, MaxFeature: 4, Optimizer: model.SGD,
		LearningRate: 0.5, Staleness: 1, Codec: "raw", Factors: node.FactorsOff, Iterations: 100}
	ids := []string{testPeer(t, 1).String() + "/0", testPeer(t, 2).String() + "/0"}
	shard := []dataset.Row{{Label: 1, Keys: []uint64{0, 2}, Values: []float32{1, 0.5}}, {Label: 0, Keys: []uint64{1, 3}, Values: []float32{1, 2}}}
	newNode := func(id string, start *node.Snapshot) *node.Node {
		t.Helper()
		mdl, opt, cdc, err := settings.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := node.Config{ID: id, Members: ids, Model: mdl, Optimizer: opt, Codec: cdc, Staleness: settings.Staleness,
			Iterations: settings.Iterations, BatchSize: 1, Seed: 1, Shard: shard, Start: start}
		if start != nil {
			cfg.Members = nil
		}
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := newNode(ids[0], nil), newNode(ids[1], nil)
	for range 3 {
		for _, n := range []*node.Node{a, b} {
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range a.Ready().Messages {
			b.Receive(ids[0], m.Data)
		}
		for _, m := range b.Ready().Messages {
			a.Receive(ids[1], m.Data)
		}
	}
	joiner := testPeer(t, 3).String() + "/1"
	entry := a.Rows().Clock + 1 // admitted by a donor one row ahead
	a.AddMember(joiner, entry)
	rows := a.Rows() // what the run command checkpoints
	i := slices.IndexFunc(rows.Members, func(m node.MemberEntry) bool { return m.ID == joiner })
	if i < 0 || rows.Members[i].Entry != entry || rows.Members[i].High != entry || rows.Clock != entry-1 {
		t.Fatalf("rows at clock %d list the joiner as %+v, want entry and high %d", rows.Clock, rows.Members, entry)
	}
	dir := t.TempDir()
	state := &State{Mesh: "m", Member: ids[0], Settings: settings, Clock: a.Clock(), Rows: &rows, Optimizer: a.Config().Optimizer.State()}
	if err := Save(dir, state); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Rows.Members, rows.Members) || got.Rows.Clock != rows.Clock {
		t.Fatalf("read back rows at %d with %+v, want %d with %+v", got.Rows.Clock, got.Rows.Members, rows.Clock, rows.Members)
	}
	restarted := newNode(testPeer(t, 1).String()+"/1", got.Rows)
	if restarted.VectorClock().Get(joiner) != entry {
		t.Fatalf("a node started from the checkpoint holds the joiner at %d, want its entry %d", restarted.VectorClock().Get(joiner), entry)
	}
}
