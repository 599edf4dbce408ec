package cmd

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

func TestCodecBenchRows(t *testing.T) {
	code, out, errOut := runMain("codec-bench", "--data", "rcv1,a9a", "--codecs", "raw,sketchml,sketchml:layout=width", "--rows")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r benchRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("row %q: %v", sc.Text(), err)
		}
		seen[r.Dataset+" "+r.Codec]++
		if r.Pairs == 0 || r.Bytes == 0 || r.Model != "lr" || r.Point == "" || r.SignFlips != 0 {
			t.Errorf("row %+v", r)
		}
		if r.Codec == "raw" && (r.RelL2Error != 0 || r.Bytes < 12*r.Pairs) {
			t.Errorf("raw row %+v: want exact values and 12 bytes a pair", r)
		}
	}
	if len(seen) != 6 {
		t.Errorf("rows per data set and codec: %v, want 6 combinations", seen)
	}
	for k, n := range seen {
		if n != 4 {
			t.Errorf("%s: %d rows, want one per gradient (4)", k, n)
		}
	}
	if code, _, errOut := runMain("codec-bench", "--codecs", "sketchml:layout=wide"); code != 2 || !strings.Contains(errOut, `"wide" is not one of width, energy`) {
		t.Errorf("bad layout: exit %d, stderr %q", code, errOut)
	}
}
