package dataset

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func synth(t *testing.T, spec string) (train, test *Dataset, planted *Planted) {
	t.Helper()
	c, err := ParseSynth(spec)
	if err != nil {
		t.Fatal(err)
	}
	train, test, planted, err = Synthetic(c)
	if err != nil {
		t.Fatal(err)
	}
	return train, test, planted
}

func TestSyntheticShape(t *testing.T) {
	train, test, planted := synth(t, "rows=500,features=1000,perrow=30,seed=3")
	if len(train.Rows) != 500 || len(test.Rows) != 100 {
		t.Fatalf("%d training and %d test rows, want 500 and 100", len(train.Rows), len(test.Rows))
	}
	if len(planted.Weights) != 1000 {
		t.Fatalf("%d planted weights, want 1000", len(planted.Weights))
	}
	for _, d := range []*Dataset{train, test} {
		if d.MaxFeature != 1000 {
			t.Errorf("%s: MaxFeature %d, want 1000", d.Name, d.MaxFeature)
		}
		for i, r := range d.Rows {
			if r.Label != 1 && r.Label != -1 {
				t.Fatalf("%s row %d: label %v", d.Name, i, r.Label)
			}
			if len(r.Keys) != 30 || cap(r.Keys) != 30 || len(r.Values) != 30 || cap(r.Values) != 30 {
				t.Fatalf("%s row %d: %d keys, %d values (caps %d, %d), want 30", d.Name, i, len(r.Keys), len(r.Values), cap(r.Keys), cap(r.Values))
			}
			for j, k := range r.Keys {
				if k < 1 || k > 1000 || j > 0 && k <= r.Keys[j-1] || r.Values[j] != 1 {
					t.Fatalf("%s row %d: keys %v values %v: want distinct ascending ids 1..1000 of value 1", d.Name, i, r.Keys, r.Values)
				}
			}
		}
	}
}

func TestSyntheticIsSeeded(t *testing.T) {
	a, at, ap := synth(t, "rows=200,features=5000,seed=9")
	b, bt, bp := synth(t, "seed=9,features=5000,rows=200")
	if !reflect.DeepEqual(a.Rows, b.Rows) || !reflect.DeepEqual(at.Rows, bt.Rows) || !reflect.DeepEqual(ap, bp) {
		t.Fatal("the same spec drew different data")
	}
	c, _, _ := synth(t, "rows=200,features=5000,seed=10")
	if reflect.DeepEqual(a.Rows, c.Rows) {
		t.Fatal("seeds 9 and 10 drew the same rows")
	}
}

func TestSyntheticFrequenciesFollowAPowerLaw(t *testing.T) {
	train, _, _ := synth(t, "rows=4000,features=100000,perrow=20,zipf=1.1,seed=1")
	count := map[uint64]int{}
	for _, r := range train.Rows {
		for _, k := range r.Keys {
			count[k]++
		}
	}
	// With s = 1.1 feature 10 is drawn 10^1.1 ≈ 12.6 times as often as
	// feature 100; feature 1 would be drawn 12.6 times as often as
	// feature 10 but a row holds it once, so it saturates near every row.
	if count[1] < 3*count[10] || count[10] < 8*count[100] {
		t.Errorf("counts of features 1, 10, 100: %d, %d, %d; want a power law", count[1], count[10], count[100])
	}
	// A long tail: most features that occur at all occur once or twice.
	rare := 0
	for _, c := range count {
		if c <= 2 {
			rare++
		}
	}
	if rare < len(count)/2 {
		t.Errorf("%d of %d features occur at most twice, want over half", rare, len(count))
	}
}

func TestSyntheticLabelsComeFromThePlantedModel(t *testing.T) {
	train, test, planted := synth(t, "rows=20000,features=2000,perrow=20,scale=3,seed=5")
	// The labels are Bernoulli draws with the planted probabilities: the
	// share of positives is the mean probability within a few standard
	// errors.
	var positives, mean, variance float64
	for _, r := range train.Rows {
		p := 1 / (1 + math.Exp(-planted.Margin(r)))
		mean += p
		variance += p * (1 - p)
		if r.Label > 0 {
			positives++
		}
	}
	if diff := math.Abs(positives - mean); diff > 4*math.Sqrt(variance) {
		t.Errorf("%v positives, %.1f expected from the planted probabilities (sd %.1f)", positives, mean, math.Sqrt(variance))
	}
	acc := planted.Accuracy(test)
	if acc < 0.7 || acc > 0.95 {
		t.Errorf("planted model's test accuracy %.3f: want a learnable but noisy task (0.7 to 0.95 at scale 3)", acc)
	}
	// The planted model is the best a model can do on average: its log
	// loss is below that of a constant guess of the positive rate.
	q := positives / float64(len(train.Rows))
	constant := -(q*math.Log(q) + (1-q)*math.Log(1-q))
	if ll := planted.LogLoss(train); ll >= constant {
		t.Errorf("planted log loss %.4f, not below the constant guess's %.4f", ll, constant)
	}
}

func TestSyntheticManyPerRowEnds(t *testing.T) {
	// Every feature in every row under a steep power law: the tail is too
	// thin to draw, and the next free id is taken instead.
	train, _, _ := synth(t, "rows=3,features=50,perrow=50,zipf=8,test=1")
	for i, r := range train.Rows {
		for j, k := range r.Keys {
			if k != uint64(j+1) {
				t.Fatalf("row %d: keys %v, want 1..50", i, r.Keys)
			}
		}
	}
}

func TestParseSynthRefuses(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"", "not key=value"},
		{"rows=10", "rows and features are required"},
		{"rows=10,features=10,rows=5", "rows given twice"},
		{"rows=10,features=10,colour=blue", `unknown key "colour"`},
		{"rows=ten,features=10", "rows: strconv.Atoi"},
		{"rows=0,features=10", "rows 0: want 1 to"},
		{"rows=10,features=0", "features 0: want 1 to"},
		{"rows=10,features=5,perrow=6", "perrow 6: want 1 to 1000 and at most features (5)"},
		{"rows=10,features=100,zipf=1", "zipf 1: want above 1"},
		{"rows=10,features=100,zipf=NaN", "zipf NaN"},
		{"rows=10,features=100,scale=-1", "scale -1"},
		{"rows=40000000,features=100,perrow=100", "above the bound of 500000000 non-zeros"},
		{"rows=10,features=10,test=0", "test 0: want 1 to"},
		{strings.Repeat("x", 300), "longer than 256 bytes"},
	} {
		_, err := ParseSynth(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSynth(%q) = %v, want an error with %q", c.spec, err, c.want)
		}
	}
}

// FuzzParseSynth checks that any spec either is refused or passes the
// bounds that keep Synthetic's allocation small; it draws the sets of
// those that ask for little.
func FuzzParseSynth(f *testing.F) {
	for _, s := range []string{"rows=100,features=1000,seed=1", "rows=5,features=3,perrow=3,zipf=9,scale=0.5,test=2", "rows=1,features=1,perrow=1", "rows=-1,features=1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseSynth(spec)
		if err != nil {
			return
		}
		if c.Rows < 1 || c.TestRows < 1 || c.Features < 1 || c.PerRow > c.Features || (c.Rows+c.TestRows)*c.PerRow > MaxSynthNonzeros {
			t.Fatalf("ParseSynth(%q) accepted %+v", spec, c)
		}
		if (c.Rows+c.TestRows)*c.PerRow > 10_000 || c.Features > 100_000 {
			return
		}
		train, test, _, err := Synthetic(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(train.Rows) != c.Rows || len(test.Rows) != c.TestRows {
			t.Fatalf("%+v: %d and %d rows", c, len(train.Rows), len(test.Rows))
		}
	})
}
