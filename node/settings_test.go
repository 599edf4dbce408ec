package node

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/wire"
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
			{ID: "node-02", Live: false, High: 17},
		},
		Pending: []Update{
			{Origin: "node-01", Clock: 44, Frame: []byte{1, 2, 3}},
			{Origin: "node-00", Clock: 43, Frame: []byte{}, Sig: bytes.Repeat([]byte{7}, 64)},
		},
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
	if a.Clock != b.Clock || !sameFloats(a.View, b.View) || len(a.Members) != len(b.Members) || len(a.Pending) != len(b.Pending) {
		return false
	}
	for i, m := range a.Members {
		o := b.Members[i]
		if m.ID != o.ID || m.Live != o.Live || m.High != o.High || !slices.Equal(m.Ahead, o.Ahead) {
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
	} {
		got, err := readSettings(encodeSettings(s))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("%s: read %+v, want %+v", name, got, s)
		}
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
}

// part is one msgpack value of an encoding, named as the decoder's error
// must name it when the value is wrong.
type part struct {
	name string
	data []byte
}

func partOf(name string, write func(w *wire.Writer)) part {
	w := wire.NewWriter()
	write(w)
	return part{name, slices.Clone(w.Bytes())}
}

func settingsParts(s Settings) []part {
	return []part{
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

func snapshotParts(s *Snapshot) []part {
	ps := []part{
		partOf("snapshot", func(w *wire.Writer) { w.Array(4) }),
		partOf("snapshot clock", func(w *wire.Writer) { w.Uint(s.Clock) }),
		partOf("snapshot view", func(w *wire.Writer) { w.Floats(s.View) }),
		partOf("snapshot members", func(w *wire.Writer) { w.Array(len(s.Members)) }),
	}
	for _, m := range s.Members {
		ps = append(ps,
			partOf("snapshot member", func(w *wire.Writer) { w.Array(5) }),
			partOf("member id", func(w *wire.Writer) { w.String(m.ID) }),
			partOf("member live", func(w *wire.Writer) { w.Bool(m.Live) }),
			partOf("member entry clock", func(w *wire.Writer) { w.Uint(m.Entry) }),
			partOf("member high-water mark", func(w *wire.Writer) { w.Uint(m.High) }),
			partOf("member gaps", func(w *wire.Writer) { w.Array(len(m.Ahead)) }))
		for _, c := range m.Ahead {
			ps = append(ps, partOf("member gap", func(w *wire.Writer) { w.Uint(c) }))
		}
	}
	return append(ps, partOf("snapshot pending", func(w *wire.Writer) { w.Bin(EncodeEnvelope(s.Pending)) }))
}

func joinParts(ps []part) []byte {
	var out []byte
	for _, p := range ps {
		out = append(out, p.data...)
	}
	return out
}

// replaced returns the encoding of ps with part i's bytes replaced.
func replaced(ps []part, i int, with []byte) []byte {
	return append(append(joinParts(ps[:i]), with...), joinParts(ps[i+1:])...)
}

// mutant is an encoding with one part made wrong, and what the decoder's
// error must say about it.
type mutant struct {
	name, want string
	data       []byte
}

// wrongParts makes each part wrong in turn: of the wrong type, nil, or
// missing (the input ends before it). The error must name the part, but
// for a missing one.
func wrongParts(ps []part) []mutant {
	var out []mutant
	for i, p := range ps {
		wrongType := []byte{0xc3} // true, which no part but a bool is
		if p.data[0] == 0xc2 || p.data[0] == 0xc3 {
			wrongType = []byte{0xa1, 'x'}
		}
		out = append(out,
			mutant{p.name + " of the wrong type", p.name, replaced(ps, i, wrongType)},
			mutant{p.name + " nil", p.name, replaced(ps, i, []byte{0xc0})},
			// The input ends before the part: an enclosing array's
			// claim may be what is refused, so any field may be named.
			mutant{p.name + " missing", "", joinParts(ps[:i])})
	}
	return out
}

// headerLen returns the length of the array, str or bin header a value
// starts with and whether it is an array; 0 for any other value.
func headerLen(b []byte) (n int, array bool) {
	switch c := b[0]; {
	case c >= 0x90 && c <= 0x9f:
		return 1, true
	case c == 0xdc:
		return 3, true
	case c == 0xdd:
		return 5, true
	case c >= 0xa0 && c <= 0xbf:
		return 1, false
	case c == 0xd9 || c == 0xc4:
		return 2, false
	case c == 0xda || c == 0xc5:
		return 3, false
	case c == 0xdb || c == 0xc6:
		return 5, false
	}
	return 0, false
}

// hostileHeaders replaces each length-carrying header in turn with one
// that claims 0xffffffff elements or bytes (and, for arrays, with a map32
// header), keeping what followed it.
func hostileHeaders(ps []part) []mutant {
	var out []mutant
	for i, p := range ps {
		n, array := headerLen(p.data)
		if n == 0 {
			continue
		}
		heads := map[string][]byte{"str32": {0xdb, 0xff, 0xff, 0xff, 0xff}, "bin32": {0xc6, 0xff, 0xff, 0xff, 0xff}}
		if array {
			heads = map[string][]byte{"array32": {0xdd, 0xff, 0xff, 0xff, 0xff}, "map32": {0xdf, 0xff, 0xff, 0xff, 0xff}}
		}
		for h, head := range heads {
			want := "claims"
			if h == "map32" {
				want = "invalid code"
			}
			out = append(out, mutant{p.name + " as " + h, want, replaced(ps, i, append(slices.Clone(head), p.data[n:]...))})
		}
	}
	return out
}

// allocated returns the bytes f allocates, the least of three runs so that
// an allocation elsewhere in the process does not count against f.
func allocated(f func()) uint64 {
	best := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
	}
	return best
}

// allocLimit is what decoding n bytes may allocate.
func allocLimit(n int) uint64 { return uint64(64*n + 64<<10) }

// checkRefused runs decode on each mutant: it must fail with
// wire.ErrMalformed, say what the mutant wants, and allocate little.
func checkRefused(t *testing.T, ms []mutant, decode func([]byte) error) {
	t.Helper()
	for _, m := range ms {
		err := decode(m.data)
		if err == nil {
			t.Errorf("%s: accepted", m.name)
			continue
		}
		if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%s: error %q, want wire.ErrMalformed saying %q", m.name, err, m.want)
		}
		if a := allocated(func() { _ = decode(m.data) }); a > allocLimit(len(m.data)) {
			t.Errorf("%s: refusing %d bytes allocated %d", m.name, len(m.data), a)
		}
	}
}

func decodeSettingsErr(data []byte) error { _, err := readSettings(data); return err }
func decodeSnapshotErr(data []byte) error { _, err := readSnapshot(data); return err }

func TestSettingsWrongFields(t *testing.T) {
	s := testSettings()
	ps := settingsParts(s)
	if !bytes.Equal(joinParts(ps), encodeSettings(s)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	ms := wrongParts(ps)
	set := func(name string, write func(w *wire.Writer)) []byte {
		for i, p := range ps {
			if p.name == name {
				return replaced(ps, i, partOf(name, write).data)
			}
		}
		panic(name)
	}
	long := strings.Repeat("x", maxNameBytes+1)
	ms = append(ms,
		mutant{"ten fields", "settings has 10 fields, want 11", replaced(ps, 0, []byte{0x9a})},
		mutant{"twelve fields", "settings has 12 fields, want 11", replaced(ps, 0, []byte{0x9c})},
		mutant{"long model", "model claims 65 bytes", set("model", func(w *wire.Writer) { w.String(long) })},
		mutant{"long optimizer", "optimizer claims 65 bytes", set("optimizer", func(w *wire.Writer) { w.String(long) })},
		mutant{"long codec", "codec claims 65 bytes", set("codec", func(w *wire.Writer) { w.String(long) })},
		mutant{"long factors", "factors claims 65 bytes", set("factors", func(w *wire.Writer) { w.String(long) })},
		mutant{"negative dimension", "dimension is negative", set("dimension", func(w *wire.Writer) { w.Int(-1) })},
		mutant{"class NaN", "classes[1] is NaN", set("classes", func(w *wire.Writer) { w.Floats([]float64{0, math.NaN()}) })},
		mutant{"class Inf", "classes[0] is +Inf", set("classes", func(w *wire.Writer) { w.Floats([]float64{math.Inf(1)}) })},
		mutant{"classes not whole floats", "classes holds 9 bytes", set("classes", func(w *wire.Writer) { w.Bin(make([]byte, 9)) })},
		mutant{"too many classes", "classes claims 524296 bytes", set("classes", func(w *wire.Writer) { w.Floats(make([]float64, maxClasses+1)) })},
		mutant{"l2 NaN", "l2 is NaN", set("l2", func(w *wire.Writer) { w.Float(math.NaN()) })},
		mutant{"l2 Inf", "l2 is -Inf", set("l2", func(w *wire.Writer) { w.Float(math.Inf(-1)) })},
		mutant{"learning rate NaN", "learning rate is NaN", set("learning rate", func(w *wire.Writer) { w.Float(math.NaN()) })},
		mutant{"learning rate Inf", "learning rate is +Inf", set("learning rate", func(w *wire.Writer) { w.Float(math.Inf(1)) })},
		mutant{"staleness past int32", "staleness 2147483648", set("staleness", func(w *wire.Writer) { w.Uint(math.MaxInt32 + 1) })},
		mutant{"negative staleness", "staleness is negative", set("staleness", func(w *wire.Writer) { w.Int(-3) })},
		mutant{"negative iterations", "iterations is negative", set("iterations", func(w *wire.Writer) { w.Int(-1) })},
		mutant{"iterations a float", "iterations", set("iterations", func(w *wire.Writer) { w.Float(3) })},
	)
	checkRefused(t, ms, decodeSettingsErr)
	checkRefused(t, hostileHeaders(ps), decodeSettingsErr)
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
	if !bytes.Equal(joinParts(ps), encodeSnapshot(s)) {
		t.Fatal("the parts do not add up to the encoding")
	}
	ms := wrongParts(ps)
	gap := slices.IndexFunc(ps, func(p part) bool { return p.name == "member gap" })
	ms = append(ms,
		mutant{"three fields", "snapshot has 3 fields, want 4", replaced(ps, 0, []byte{0x93})},
		mutant{"member with six fields", "snapshot member has 6 fields, want 5", replaced(ps, 4, []byte{0x96})},
		mutant{"view NaN", "snapshot view[1] is NaN", replaced(ps, 2, partOf("", func(w *wire.Writer) { w.Floats([]float64{0, math.NaN()}) }).data)},
		mutant{"negative clock", "snapshot clock is negative", replaced(ps, 1, []byte{0xff})},
		mutant{"negative gap", "member gap is negative", replaced(ps, gap, []byte{0xd0, 0x80})},
		mutant{"long member id", "member id claims 257 bytes", replaced(ps, 5, partOf("", func(w *wire.Writer) { w.String(strings.Repeat("x", maxOriginBytes+1)) }).data)},
	)
	checkRefused(t, ms, decodeSnapshotErr)
	checkRefused(t, hostileHeaders(ps), decodeSnapshotErr)
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
		bad := replaced(ps, len(ps)-1, partOf("", func(w *wire.Writer) { w.Bin(env) }).data)
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
	w.Array(4)
	w.Uint(1)
	w.Floats(nil)
	w.Array(MaxMembers + 1)
	data := append(w.Bytes(), make([]byte, 5*(MaxMembers+1))...)
	_, err := readSnapshot(data)
	if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), "65537 members, limit 65536") {
		t.Fatalf("error %v, want the member limit", err)
	}
	if a := allocated(func() { _, _ = readSnapshot(data) }); a > 64<<10 {
		t.Fatalf("refusing the member list allocated %d bytes", a)
	}
	// A view over MaxParams cannot be sent in less than a GiB; its header
	// is refused for the limit as well as for the missing bytes.
	w = wire.NewWriter()
	w.Array(4)
	w.Uint(1)
	view := []byte{0xc6, 0, 0, 0, 0}
	view[1], view[2], view[3], view[4] = 0x40, 0, 0, 8 // (MaxParams+1)*8 bytes
	data = append(w.Bytes(), view...)
	if _, err := readSnapshot(data); err == nil || !strings.Contains(err.Error(), "snapshot view claims 1073741832 bytes") || !strings.Contains(err.Error(), "limit 1073741824") {
		t.Fatalf("error %v, want the view limit", err)
	}
}

// Member entries claim at least five bytes each, gaps one: a claim the
// input cannot hold is refused on those grounds.
func TestSnapshotClaimsCheckedAgainstInput(t *testing.T) {
	w := wire.NewWriter()
	w.Array(4)
	w.Uint(1)
	w.Floats(nil)
	w.Array(3)
	data := append(w.Bytes(), make([]byte, 14)...)
	if _, err := readSnapshot(data); err == nil || !strings.Contains(err.Error(), "snapshot members claims 3 elements, 14 bytes remain") {
		t.Fatalf("error %v, want the member claim refused", err)
	}
	w = wire.NewWriter()
	w.Array(4)
	w.Uint(1)
	w.Floats(nil)
	w.Array(1)
	w.Array(5)
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
	for _, m := range hostileHeaders(ps) {
		f.Add(m.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := wire.NewReader(data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := ReadSettings(r)
		runtime.ReadMemStats(&after)
		if a := after.TotalAlloc - before.TotalAlloc; a > allocLimit(len(data)) {
			t.Fatalf("reading %d bytes allocated %d", len(data), a)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap wire.ErrMalformed", err)
			}
			return
		}
		if s.Staleness < 0 || len(s.Classes) > maxClasses || len(s.Model) > maxNameBytes || len(s.Codec) > maxNameBytes {
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
	for _, m := range hostileHeaders(ps) {
		f.Add(m.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := wire.NewReader(data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := ReadSnapshot(r)
		runtime.ReadMemStats(&after)
		if a := after.TotalAlloc - before.TotalAlloc; a > allocLimit(len(data)) {
			t.Fatalf("reading %d bytes allocated %d", len(data), a)
		}
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
