package netmodel

import (
	"strings"
	"testing"
	"time"
)

func TestParseLinkProfile(t *testing.T) {
	lan, err := ParseLinkProfile("lan")
	if err != nil || lan.Sites != 1 || lan.Latency[0][0] != 100*time.Microsecond || lan.Bandwidth[0][0] != 10e9/8 {
		t.Fatalf("lan: %+v, %v", lan, err)
	}
	geo, err := ParseLinkProfile("geo3,loss=0.01,jitter=2ms")
	if err != nil {
		t.Fatal(err)
	}
	if geo.Sites != 3 || geo.Latency[0][0] != time.Millisecond || geo.Bandwidth[1][1] != 1e9/8 ||
		geo.Latency[0][1] != 40*time.Millisecond || geo.Latency[2][1] != 80*time.Millisecond || geo.Latency[0][2] != 120*time.Millisecond ||
		geo.Bandwidth[0][2] != 100e6/8 || geo.Loss != 0.01 || geo.Jitter != 2*time.Millisecond {
		t.Fatalf("geo3: %+v", geo)
	}
	if got := geo.String(); got != "geo3,jitter=2ms,loss=0.01" {
		t.Fatalf("geo3 reads back as %q", got)
	}
	c, err := ParseLinkProfile("latency=50ms,bandwidth=100Mbit,loss=0.01,jitter=5ms,dup=0.001,reorder=0.02")
	if err != nil || c.Latency[0][0] != 50*time.Millisecond || c.Bandwidth[0][0] != 100e6/8 || c.Loss != 0.01 ||
		c.Jitter != 5*time.Millisecond || c.Duplicate != 0.001 || c.Reorder != 0.02 {
		t.Fatalf("custom: %+v, %v", c, err)
	}
	for in, want := range map[string]string{
		"latency=50ms":               "needs latency= and bandwidth=",
		"geo3,latency=5ms":           "fixes latency and bandwidth",
		"lan,loss=1":                 "probability",
		"lan,loss=0.1,loss=0.2":      "twice",
		"wan":                        "not key=value",
		"latency=x,bandwidth=1Mbit":  "latency",
		"latency=1ms,bandwidth=fast": "bandwidth",
		"lan,color=red":              "unknown key",
		"latency=1ms,bandwidth=1Mbit,jitter=-1ms": "jitter",
	} {
		if _, err := ParseLinkProfile(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", in, err, want)
		}
	}
}
