package mesh

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sketchmesh/sketchmesh/dataset"
)

// logRecords decodes the JSON log lines in b.
func logRecords(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// The daemon's lines name the local node self= and the member they are
// about member=; waiting for members is info, not a warning; there is no
// progress line before training.
func TestDaemonLogLines(t *testing.T) {
	train, _, err := dataset.Builtin("rcv1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := newTestHost(t)
	a := startDaemon(t, ctx, daemonSettings(train), train.Rows[:100], nil, h)
	var logs bytes.Buffer
	a.log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("self", shortMember(a.self))

	a.progress()
	if logs.Len() != 0 {
		t.Errorf("a progress line before training: %s", logs.String())
	}
	other := newTestHost(t)
	dead := MemberID(other.h.ID(), 7)
	now := time.Now()
	a.n.AddMember(dead, 0)
	// The member stays silent past the suspicion and death timeouts.
	a.n.SetTiming(1, 1, 1)
	for range 3 {
		a.n.Tick()
	}
	a.handleReady()
	a.aloneFrom = now.Add(-time.Hour)
	a.checkAlone(now)
	var sawDead, sawWait bool
	for _, rec := range logRecords(t, &logs) {
		switch rec["msg"] {
		case "member declared dead":
			sawDead = true
			if rec["self"] != shortMember(a.self) || rec["member"] != shortMember(dead) || rec["level"] != "WARN" {
				t.Errorf("member declared dead: %v", rec)
			}
		case "waiting for 3 members before training":
			sawWait = true
			if rec["level"] != "INFO" {
				t.Errorf("waiting for members logged at %v", rec["level"])
			}
		}
	}
	if !sawDead || !sawWait {
		t.Errorf("declared dead logged %v, waiting logged %v:\n%s", sawDead, sawWait, logs.String())
	}
}

func TestSig4(t *testing.T) {
	for v, want := range map[float64]float64{0.6931471805599453: 0.6931, 93.17269076305221: 93.17, 12345.678: 12350, 0: 0, 1e-9: 1e-9} {
		if got := Sig4(v); got != want {
			t.Errorf("Sig4(%v) = %v, want %v", v, got, want)
		}
	}
}
