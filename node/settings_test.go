package node

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/wire"
	"github.com/sketchmesh/sketchmesh/wire/wiretest"
)

func testSettings() Settings {
	return Settings{
		Model: model.Softmax, MaxFeature: 1000, Classes: []float64{-1, 0, 2.5}, L2: 1e-4,
		Optimizer: model.Adam, LearningRate: 0.05, Staleness: 3, Codec: "sketch",
		ErrorFeedback: true, Factors: FactorsAuto, Iterations: 500,
	}
}

func testSnapshot() *Snapshot {
	return &Snapshot{
		Clock: 42,
		View:  []float64{1, -2, 0.5, math.Copysign(0, -1), 1e300},
		Members: []MemberEntry{
			{ID: "node-00", Live: true, High: 42},
			{ID: "node-01", Live: true, High: 40, Ahead: []uint64{42, 44}},
			{ID: "node-02", Live: false, High: 17, Left: true, Last: 19},
		},
		Pending: []Update{
			{Origin: "node-01", Clock: 44, Frame: []byte{1, 2, 3}},
			{Origin: "node-00", Clock: 43, Frame: []byte{}, Sig: bytes.Repeat([]byte{7}, 64)},
		},
		Refused: []UpdateID{{Origin: "node-01", Clock: 44}},
	}
}

func encodeSettings(s Settings) []byte {
	w := wire.NewWriter()
	s.WriteTo(w)
	return w.Bytes()
}

func encodeSnapshot(s *Snapshot) []byte {
	w := wire.NewWriter()
	s.WriteTo(w)
	return w.Bytes()
}

// readSettings reads settings that must fill data exactly.
func readSettings(data []byte) (Settings, error) {
	r := wire.NewReader(data)
	s, err := ReadSettings(r)
	if err == nil {
		err = r.End()
	}
	return s, err
}

func readSnapshot(data []byte) (*Snapshot, error) {
	r := wire.NewReader(data)
	s, err := ReadSnapshot(r)
	if err == nil {
		err = r.End()
	}
	return s, err
}

func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// sameSnapshot compares snapshots value by value; a nil slice and an
// empty one are the same.
func sameSnapshot(a, b *Snapshot) bool {
	if a.Clock != b.Clock || !sameFloats(a.View, b.View) || len(a.Members) != len(b.Members) || len(a.Pending) != len(b.Pending) ||
		!slices.Equal(a.Refused, b.Refused) {
		return false
	}
	for i, m := range a.Members {
		o := b.Members[i]
		if m.ID != o.ID || m.Live != o.Live || m.Entry != o.Entry || m.High != o.High || !slices.Equal(m.Ahead, o.Ahead) || m.Left != o.Left || m.Last != o.Last {
			return false
		}
	}
	for i, u := range a.Pending {
		o := b.Pending[i]
		if u.Origin != o.Origin || u.Clock != o.Clock || !bytes.Equal(u.Frame, o.Frame) || !bytes.Equal(u.Sig, o.Sig) {
			return false
		}
	}
	return true
}

func TestSettingsRoundTrip(t *testing.T) {
	for name, s := range map[string]Settings{
		"softmax with classes": testSettings(),
		"zero":                 {},
		"extremes": {
			Model: model.Kind(strings.Repeat("m", maxNameBytes)), MaxFeature: math.MaxUint64,
			L2: math.MaxFloat64, LearningRate: math.SmallestNonzeroFloat64, Staleness: math.MaxInt32,
			Codec: strings.Repeat("c", maxNameBytes), Iterations: math.MaxUint64, Classes: []float64{-math.MaxFloat64, 0, 1},
		},
		"hashed": {Model: model.LogisticRegression, MaxFeature: 1 << 18, HashBits: 18, Optimizer: model.SGD, LearningRate: 1, Codec: "raw"},
	} {
		got, err := readSettings(encodeSettings(s))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("%s: read %+v, want %+v", name, got, s)
		}
	}
	// Without hashing the settings keep the eleven fields of meshes and
	// checkpoints from before hashing existed.
	if data := encodeSettings(testSettings()); data[0] != 0x9b {
		t.Errorf("settings without hashing start %#x, want an array of 11 (0x9b)", data[0])
	}
	// No classes read back as nil, however they were given.
	s := testSettings()
	s.Classes = []float64{}
	if got, err := readSettings(encodeSettings(s)); err != nil || got.Classes != nil {
		t.Fatalf("empty classes read back as %#v, %v", got.Classes, err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for name, s := range map[string]*Snapshot{
		"members, gaps and pending": testSnapshot(),
		"empty":                     {},
		"clock extremes": {Clock: math.MaxUint64, Members: []MemberEntry{
			{ID: strings.Repeat("x", maxOriginBytes), Live: true, High: math.MaxUint64 - 2, Ahead: []uint64{math.MaxUint64}},
		}},
	} {
		data := encodeSnapshot(s)
		got, err := readSnapshot(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !sameSnapshot(got, s) {
			t.Fatalf("%s: read %+v, want %+v", name, got, s)
		}
		if !bytes.Equal(encodeSnapshot(got), data) {
			t.Fatalf("%s: the snapshot re-encodes differently", name)
		}
	}
	// The exact values of the full snapshot, spelled out.
	got, err := readSnapshot(encodeSnapshot(testSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Clock != 42 || len(got.View) != 5 || got.View[4] != 1e300 || !math.Signbit(got.View[3]) {
		t.Fatalf("clock %d, view %v", got.Clock, got.View)
	}
	if m := got.Members[1]; m.ID != "node-01" || !m.Live || m.High != 40 || !slices.Equal(m.Ahead, []uint64{42, 44}) {
		t.Fatalf("member 1 read as %+v", m)
	}
	if m := got.Members[2]; m.ID != "node-02" || m.Live || m.High != 17 || len(m.Ahead) != 0 {
		t.Fatalf("member 2 read as %+v", m)
	}
	if u := got.Pending[1]; u.Origin != "node-00" || u.Clock != 43 || len(u.Frame) != 0 || len(u.Sig) != 64 {
		t.Fatalf("pending update 1 read as %+v", u)
	}
	if !slices.Equal(got.Refused, []UpdateID{{Origin: "node-01", Clock: 44}}) {
		t.Fatalf("refused marks read as %v", got.Refused)
	}
}

// partOf is the part called name that write writes.
func partOf(name string, write func(w *wire.Writer)) wiretest.Part {
	w := wire.NewWriter()
	write(w)
	return wiretest.Part{Name: name, Data: slices.Clone(w.Bytes())}
}

func settingsParts(s Settings) []wiretest.Part {
	return []wiretest.Part{
		partOf("settings", func(w *wire.Writer) { w.Array(11) }),
		partOf("model", func(w *wire.Writer) { w.String(string(s.Model)) }),
		partOf("dimension", func(w *wire.Writer) { w.Uint(s.MaxFeature) }),
		partOf("classes", func(w *wire.Writer) { w.Floats(s.Classes) }),
		partOf("l2", func(w *wire.Writer) { w.Float(s.L2) }),
		partOf("optimizer", func(w *wire.Writer) { w.String(string(s.Optimizer)) }),
		partOf("learning rate", func(w *wire.Writer) { w.Float(s.LearningRate) }),
		partOf("staleness", func(w *wire.Writer) { w.Uint(uint64(s.Staleness)) }),
		partOf("codec", func(w *wire.Writer) { w.String(s.Codec) }),
		partOf("error feedback", func(w *wire.Writer) { w.Bool(s.ErrorFeedback) }),
		partOf("factors", func(w *wire.Writer) { w.String(string(s.Factors)) }),
		partOf("iterations", func(w *wire.Writer) { w.Uint(s.Iterations) }),
	}
}

func snapshotParts(s *Snapshot) []wiretest.Part {
	ps := []wiretest.Part{
		partOf("snapshot", func(w *wire.Writer) { w.Array(6) }),
		partOf("snapshot version", func(w *wire.Writer) { w.Uint(snapshotVersion) }),
		partOf("snapshot clock", func(w *wire.Writer) { w.Uint(s.Clock) }),
		partOf("snapshot view", func(w *wire.Writer) { w.Floats(s.View) }),
		partOf("snapshot members", func(w *wire.Writer) { w.Array(len(s.Members)) }),
	}
	for _, m := range s.Members {
		ps = append(ps,
			partOf("snapshot member", func(w *wire.Writer) { w.Array(7) }),
			partOf("member id", func(w *wire.Writer) { w.String(m.ID) }),
			partOf("member live", func(w *wire.Writer) { w.Bool(m.Live) }),
			partOf("member entry clock", func(w *wire.Writer) { w.Uint(m.Entry) }),
			partOf("member high-water mark", func(w *wire.Writer) { w.Uint(m.High) }),
			partOf("member gaps", func(w *wire.Writer) { w.Array(len(m.Ahead)) }))
		for _, c := range m.Ahead {
			ps = append(ps, partOf("member gap", func(w *wire.Writer) { w.Uint(c) }))
		}
		ps = append(ps,
			partOf("member left", func(w *wire.Writer) { w.Bool(m.Left) }),
			partOf("member last clock", func(w *wire.Writer) { w.Uint(m.Last) }))
	}
	ps = append(ps,
		partOf("snapshot pending", func(w *wire.Writer) { w.Bin(EncodeEnvelope(s.Pending)) }),
		partOf("snapshot refused", func(w *wire.Writer) { w.Array(len(s.Refused)) }))
	for _, id := range s.Refused {
		ps = append(ps,
			partOf("refused update", func(w *wire.Writer) { w.Array(2) }),
			partOf("refused origin", func(w *wire.Writer) { w.String(id.Origin) }),
			partOf("refused clock", func(w *wire.Writer) { w.Uint(id.Clock) }))
	}
	return ps
}

func decodeSettingsErr(data []byte) error { _, err := readSettings(data); return err }
func decodeSnapshotErr(data []byte) error { _, err := readSnapshot(data); return err }

func TestSettingsWrongFields(t *testing.T) {
	s := testSettings()
	ps := settingsParts(s)
	if !bytes.Equal(wiretest.Join(ps), encodeSettings(s)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	ms := wiretest.WrongParts(ps)
	set := func(name string, write func(w *wire.Writer)) []byte {
		return wiretest.Set(ps, name, partOf(name, write).Data)
	}
	long := strings.Repeat("x", maxNameBytes+1)
	ms = append(ms, []wiretest.Mutant{
		{Name: "ten fields", Want: "settings have 10 fields, want 11, 12 or 15", Data: wiretest.Replaced(ps, 0, []byte{0x9a})},
		{Name: "twelve fields, eleven given", Want: "hash bits: EOF", Data: wiretest.Replaced(ps, 0, []byte{0x9c})},
		{Name: "thirteen fields", Want: "settings have 13 fields, want 11, 12 or 15", Data: wiretest.Replaced(ps, 0, []byte{0x9d})},
		{Name: "hash bits 0", Want: "hash bits 0, want 1 to 30", Data: append(wiretest.Replaced(ps, 0, []byte{0x9c}), 0x00)},
		{Name: "hash bits 31", Want: "hash bits 31, want 1 to 30", Data: append(wiretest.Replaced(ps, 0, []byte{0x9c}), 31)},
		{Name: "long model", Want: "model claims 65 bytes", Data: set("model", func(w *wire.Writer) { w.String(long) })},
		{Name: "long optimizer", Want: "optimizer claims 65 bytes", Data: set("optimizer", func(w *wire.Writer) { w.String(long) })},
		{Name: "long codec", Want: "codec claims 65 bytes", Data: set("codec", func(w *wire.Writer) { w.String(long) })},
		{Name: "long factors", Want: "factors claims 65 bytes", Data: set("factors", func(w *wire.Writer) { w.String(long) })},
		{Name: "negative dimension", Want: "dimension is negative", Data: set("dimension", func(w *wire.Writer) { w.Int(-1) })},
		{Name: "class NaN", Want: "classes[1] is NaN", Data: set("classes", func(w *wire.Writer) { w.Floats([]float64{0, math.NaN()}) })},
		{Name: "class Inf", Want: "classes[0] is +Inf", Data: set("classes", func(w *wire.Writer) { w.Floats([]float64{math.Inf(1)}) })},
		{Name: "classes not whole floats", Want: "classes holds 9 bytes", Data: set("classes", func(w *wire.Writer) { w.Bin(make([]byte, 9)) })},
		{Name: "too many classes", Want: "classes claims 524296 bytes", Data: set("classes", func(w *wire.Writer) { w.Floats(make([]float64, maxClasses+1)) })},
		{Name: "l2 NaN", Want: "l2 is NaN", Data: set("l2", func(w *wire.Writer) { w.Float(math.NaN()) })},
		{Name: "l2 Inf", Want: "l2 is -Inf", Data: set("l2", func(w *wire.Writer) { w.Float(math.Inf(-1)) })},
		{Name: "learning rate NaN", Want: "learning rate is NaN", Data: set("learning rate", func(w *wire.Writer) { w.Float(math.NaN()) })},
		{Name: "learning rate Inf", Want: "learning rate is +Inf", Data: set("learning rate", func(w *wire.Writer) { w.Float(math.Inf(1)) })},
		{Name: "staleness past int32", Want: "staleness 2147483648", Data: set("staleness", func(w *wire.Writer) { w.Uint(math.MaxInt32 + 1) })},
		{Name: "negative staleness", Want: "staleness is negative", Data: set("staleness", func(w *wire.Writer) { w.Int(-3) })},
		{Name: "negative iterations", Want: "iterations is negative", Data: set("iterations", func(w *wire.Writer) { w.Int(-1) })},
		{Name: "iterations a float", Want: "iterations", Data: set("iterations", func(w *wire.Writer) { w.Float(3) })},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, decodeSettingsErr)
	wiretest.CheckRefused(t, wiretest.HostileParts(ps), wire.ErrMalformed, decodeSettingsErr)
	data := encodeSettings(s)
	for i := range data {
		if err := decodeSettingsErr(data[:i]); err == nil {
			t.Errorf("a %d-byte prefix accepted", i)
		}
	}
	// Settings are read as part of a longer message: they end where their
	// last field does, and the message's reader refuses what follows.
	r := wire.NewReader(append(encodeSettings(s), 0x01))
	if _, err := ReadSettings(r); err != nil {
		t.Fatal(err)
	}
	if err := r.End(); err == nil || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Fatalf("End after settings and a byte: %v", err)
	}
}

func TestSnapshotWrongFields(t *testing.T) {
	s := testSnapshot()
	ps := snapshotParts(s)
	if !bytes.Equal(wiretest.Join(ps), encodeSnapshot(s)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	ms := wiretest.WrongParts(ps)
	gap := slices.IndexFunc(ps, func(p wiretest.Part) bool { return p.Name == "member gap" })
	at := func(name string) int {
		return slices.IndexFunc(ps, func(p wiretest.Part) bool { return p.Name == name })
	}
	set := func(name string, write func(w *wire.Writer)) []byte {
		return wiretest.Set(ps, name, partOf(name, write).Data)
	}
	ms = append(ms, []wiretest.Mutant{
		{Name: "four fields (version 1)", Want: "snapshot has 4 fields, want 6", Data: wiretest.Replaced(ps, 0, []byte{0x94})},
		{Name: "version 1", Want: "snapshot version 1, this build reads version 2", Data: set("snapshot version", func(w *wire.Writer) { w.Uint(1) })},
		{Name: "member with six fields", Want: "snapshot member has 6 fields, want 7", Data: wiretest.Replaced(ps, at("snapshot member"), []byte{0x96})},
		{Name: "view NaN", Want: "snapshot view[1] is NaN", Data: set("snapshot view", func(w *wire.Writer) { w.Floats([]float64{0, math.NaN()}) })},
		{Name: "negative clock", Want: "snapshot clock is negative", Data: wiretest.Replaced(ps, at("snapshot clock"), []byte{0xff})},
		{Name: "negative gap", Want: "member gap is negative", Data: wiretest.Replaced(ps, gap, []byte{0xd0, 0x80})},
		{Name: "long member id", Want: "member id claims 257 bytes", Data: wiretest.Replaced(ps, at("member id"), partOf("", func(w *wire.Writer) { w.String(strings.Repeat("x", maxOriginBytes+1)) }).Data)},
		{Name: "refused update not carried", Want: "snapshot marks node-01's update 45 refused and does not carry it", Data: set("refused clock", func(w *wire.Writer) { w.Uint(45) })},
		{Name: "more marks than pending updates", Want: "snapshot marks 3 updates refused, it carries 2",
			Data: append(wiretest.Replaced(ps, at("snapshot refused"), []byte{0x93}), bytes.Repeat(partOf("", func(w *wire.Writer) { w.Array(2); w.String("node-01"); w.Uint(44) }).Data, 2)...)},
		{Name: "long refused origin", Want: "refused origin claims 257 bytes", Data: set("refused origin", func(w *wire.Writer) { w.String(strings.Repeat("x", maxOriginBytes+1)) })},
	}...)
	wiretest.CheckRefused(t, ms, wire.ErrMalformed, decodeSnapshotErr)
	wiretest.CheckRefused(t, wiretest.HostileParts(ps), wire.ErrMalformed, decodeSnapshotErr)
	data := encodeSnapshot(s)
	for i := range data {
		if _, err := readSnapshot(data[:i]); err == nil {
			t.Errorf("a %d-byte prefix accepted", i)
		}
	}

	// The pending updates are an envelope, checked as one.
	for name, env := range map[string][]byte{
		"not an envelope":         {0x01},
		"envelope array32 huge":   {0xdd, 0xff, 0xff, 0xff, 0xff},
		"envelope origin bin32":   {0x92, 0x01, 0x91, 0x93, 0xc6, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"envelope trailing bytes": append(EncodeEnvelope(nil), 0),
	} {
		bad := wiretest.Set(ps, "snapshot pending", partOf("", func(w *wire.Writer) { w.Bin(env) }).Data)
		_, err := readSnapshot(bad)
		if !errors.Is(err, ErrBadEnvelope) || !strings.Contains(err.Error(), "snapshot pending") {
			t.Errorf("%s: error %v, want ErrBadEnvelope naming the snapshot's pending updates", name, err)
		}
	}
}

// Lists over their limits are refused when their header is read, before
// their elements are.
func TestSnapshotOverLimits(t *testing.T) {
	w := wire.NewWriter()
	w.Array(6)
	w.Uint(snapshotVersion)
	w.Uint(1)
	w.Floats(nil)
	w.Array(MaxMembers + 1)
	data := append(w.Bytes(), make([]byte, 7*(MaxMembers+1))...)
	_, err := readSnapshot(data)
	if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), "65537 members, limit 65536") {
		t.Fatalf("error %v, want the member limit", err)
	}
	if a := wiretest.Allocated(func() { _, _ = readSnapshot(data) }); a > 64<<10 {
		t.Fatalf("refusing the member list allocated %d bytes", a)
	}
	// A view over MaxParams cannot be sent in less than a GiB; its header
	// is refused for the limit as well as for the missing bytes.
	w = wire.NewWriter()
	w.Array(6)
	w.Uint(snapshotVersion)
	w.Uint(1)
	view := []byte{0xc6, 0, 0, 0, 0}
	view[1], view[2], view[3], view[4] = 0x40, 0, 0, 8 // (MaxParams+1)*8 bytes
	data = append(w.Bytes(), view...)
	if _, err := readSnapshot(data); err == nil || !strings.Contains(err.Error(), "snapshot view claims 1073741832 bytes") || !strings.Contains(err.Error(), "limit 1073741824") {
		t.Fatalf("error %v, want the view limit", err)
	}
}

// Member entries claim at least seven bytes each, gaps one: a claim the
// input cannot hold is refused on those grounds.
func TestSnapshotClaimsCheckedAgainstInput(t *testing.T) {
	w := wire.NewWriter()
	w.Array(6)
	w.Uint(snapshotVersion)
	w.Uint(1)
	w.Floats(nil)
	w.Array(3)
	data := append(w.Bytes(), make([]byte, 14)...)
	if _, err := readSnapshot(data); err == nil || !strings.Contains(err.Error(), "snapshot members claims 3 elements, 14 bytes remain") {
		t.Fatalf("error %v, want the member claim refused", err)
	}
	w = wire.NewWriter()
	w.Array(6)
	w.Uint(snapshotVersion)
	w.Uint(1)
	w.Floats(nil)
	w.Array(1)
	w.Array(7)
	w.String("a")
	w.Bool(true)
	w.Uint(0)
	w.Uint(0)
	w.Array(100)
	data = append(w.Bytes(), make([]byte, 99)...)
	if _, err := readSnapshot(data); err == nil || !strings.Contains(err.Error(), "member gaps claims 100 elements, 99 bytes remain") {
		t.Fatalf("error %v, want the gap claim refused", err)
	}
}

func FuzzReadSettings(f *testing.F) {
	f.Add(encodeSettings(testSettings()))
	f.Add(encodeSettings(Settings{}))
	ps := settingsParts(testSettings())
	for _, m := range wiretest.HostileParts(ps) {
		f.Add(m.Data)
	}
	f.Add(encodeSettings(localSettings()))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := wire.NewReader(data)
		s, err := wiretest.DecodeOnce(t, len(data), func() (Settings, error) { return ReadSettings(r) })
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap wire.ErrMalformed", err)
			}
			return
		}
		if s.Staleness < 0 || len(s.Classes) > maxClasses || len(s.Model) > maxNameBytes || len(s.Codec) > maxNameBytes ||
			s.LocalSteps < 0 || s.LocalSteps > MaxLocalSteps || s.OuterRate < 0 {
			t.Fatalf("out of bounds settings accepted: %+v", s)
		}
		for _, v := range append([]float64{s.L2, s.LearningRate}, s.Classes...) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%v accepted in %+v", v, s)
			}
		}
		enc := encodeSettings(s)
		again, err := readSettings(enc)
		if err != nil {
			t.Fatalf("re-encoded settings do not read: %v", err)
		}
		if !reflect.DeepEqual(again, s) || !bytes.Equal(encodeSettings(again), enc) {
			t.Fatalf("settings changed in a round trip: %+v, then %+v", s, again)
		}
	})
}

func FuzzReadSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(testSnapshot()))
	f.Add(encodeSnapshot(&Snapshot{}))
	ps := snapshotParts(testSnapshot())
	for _, m := range wiretest.HostileParts(ps) {
		f.Add(m.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := wire.NewReader(data)
		s, err := wiretest.DecodeOnce(t, len(data), func() (*Snapshot, error) { return ReadSnapshot(r) })
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("error %v wraps neither wire.ErrMalformed nor ErrBadEnvelope", err)
			}
			return
		}
		if len(s.Members) > MaxMembers || len(s.View) > MaxParams {
			t.Fatalf("%d members and %d values accepted", len(s.Members), len(s.View))
		}
		for _, v := range s.View {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%v accepted in the view", v)
			}
		}
		enc := encodeSnapshot(s)
		again, err := readSnapshot(enc)
		if err != nil {
			t.Fatalf("re-encoded snapshot does not read: %v", err)
		}
		if !sameSnapshot(again, s) || !bytes.Equal(encodeSnapshot(again), enc) {
			t.Fatalf("snapshot changed in a round trip: %+v, then %+v", s, again)
		}
	})
}

// Issue 14, defect 8: what a snapshot may say of its members is one rule,
// CheckMembers, which checkpoints apply and which agrees with what a node
// started from the snapshot accepts; a member admitted above the rows
// (High = Entry > Clock) is valid.
func TestSnapshotCheckMembersAgreesWithStart(t *testing.T) {
	nodes, _ := newNodesWith(t, 1, SyncConfig{}, func(c *Config) { c.Staleness, c.Iterations = 1, 10 })
	base := nodes[0].Config()
	for _, c := range []struct {
		name   string
		member MemberEntry
		valid  bool
	}{
		{"within the rows", MemberEntry{ID: "x", Live: true, High: 9, Ahead: []uint64{11, 12}}, true},
		{"admitted above the rows", MemberEntry{ID: "x", Live: true, Entry: 13, High: 13}, true},
		{"admitted at the rows", MemberEntry{ID: "x", Live: true, Entry: 12, High: 12}, true},
		{"high above the rows", MemberEntry{ID: "x", Live: true, High: 13}, false},
		{"high above an entry above the rows", MemberEntry{ID: "x", Live: true, Entry: 13, High: 14}, false},
		{"entry above high", MemberEntry{ID: "x", Live: true, Entry: 5, High: 4}, false},
		{"ahead at high", MemberEntry{ID: "x", Live: true, High: 9, Ahead: []uint64{9}}, false},
		{"ahead above the rows", MemberEntry{ID: "x", Live: true, High: 9, Ahead: []uint64{13}}, false},
		{"no id", MemberEntry{Live: true, High: 3}, false},
	} {
		snap := &Snapshot{Clock: 12, View: make([]float64, base.Model.NumParams()), Members: []MemberEntry{{ID: "node-00", Live: true, High: 12}, c.member}}
		checked := snap.CheckMembers()
		cfg := base
		cfg.ID, cfg.Members, cfg.Start = "joiner", nil, snap
		_, started := New(cfg)
		if (checked == nil) != c.valid || (started == nil) != c.valid {
			t.Errorf("%s: CheckMembers says %v, starting from it %v; want valid %v", c.name, checked, started, c.valid)
		}
		if checked != nil && !errors.Is(checked, ErrSnapshot) {
			t.Errorf("%s: %v does not wrap ErrSnapshot", c.name, checked)
		}
	}
	twice := &Snapshot{Clock: 1, Members: []MemberEntry{{ID: "x", High: 1}, {ID: "x", High: 1}}}
	if err := twice.CheckMembers(); err == nil || !strings.Contains(err.Error(), `member "x" is listed twice`) {
		t.Errorf("a member listed twice: %v", err)
	}
}

// Hash bits are a setting like the dimension: a joiner given other bits is
// refused by name, and settings whose dimension is not 2^bits do not build.
func TestHashBitsSetting(t *testing.T) {
	mesh := Settings{Model: model.LogisticRegression, MaxFeature: 1 << 18, HashBits: 18, Optimizer: model.SGD, LearningRate: 1, Codec: "raw"}
	if _, _, _, err := mesh.Build(); err != nil {
		t.Fatalf("hashed settings do not build: %v", err)
	}
	joiner := mesh
	joiner.HashBits, joiner.MaxFeature = 20, 1<<20
	err := joiner.Conflict(mesh, []string{SettingHashBits})
	if err == nil || err.Error() != "setting hash-bits differs: this node was given 20, the mesh trains with 18" {
		t.Errorf("conflict: %v", err)
	}
	if err := joiner.Conflict(mesh, nil); err != nil {
		t.Errorf("a joiner that gave no hash bits takes the mesh's, got %v", err)
	}
	bad := mesh
	bad.MaxFeature = 1000
	if _, _, _, err := bad.Build(); err == nil || !strings.Contains(err.Error(), "does not match 18 hash bits") {
		t.Errorf("dimension 1000 with 18 hash bits: %v", err)
	}
	bad = mesh
	bad.HashBits = 31
	if _, _, _, err := bad.Build(); err == nil {
		t.Error("31 hash bits built")
	}
}
