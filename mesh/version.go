package mesh

import (
	"runtime/debug"
	"sync"
)

// Build describes the running binary: the module version ("(devel)" for a
// build from a checkout), the commit it was built from, whether the
// checkout had local changes, and the Go version.
type Build struct {
	Version   string
	Commit    string
	Modified  bool
	GoVersion string
}

// BuildInfo reads the binary's build information once.
var BuildInfo = sync.OnceValue(func() Build {
	b := Build{Version: "(devel)", Commit: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = info.GoVersion
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
})

// AgentVersion is what the host announces in libp2p identify:
// sketchmesh/<module version>, or sketchmesh/devel-<short commit> for a
// build from a checkout.
func AgentVersion() string {
	b := BuildInfo()
	v := b.Version
	if v == "(devel)" {
		v = "devel"
		if b.Commit != "unknown" {
			v += "-" + b.Commit[:min(12, len(b.Commit))]
		}
	}
	return "sketchmesh/" + v
}
