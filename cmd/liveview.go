package cmd

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/sketchmesh/sketchmesh/liveview"
	"github.com/sketchmesh/sketchmesh/mesh"
)

// uiFlags are the live view's flags; run and testnet share them.
type uiFlags struct {
	addr   string
	public bool
}

func (f *uiFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
}) {
	fs.StringVar(&f.addr, "ui", "", "serve a live web view of the mesh (members, links, vector clocks, learning curve; JSON at /api/state) at this host:port, e.g. 127.0.0.1:8080; read-only, at most 2 updates a second")
	fs.BoolVar(&f.public, "ui-public", false, "allow --ui on an address other than loopback: anyone who reaches it sees the mesh (logs a warning)")
}

// listen checks --ui and opens its listener, so that a bad address or a
// port in use is bad input found before anything starts; nil without --ui.
func (f *uiFlags) listen() (net.Listener, error) {
	if f.addr == "" {
		if f.public {
			return nil, badInput("--ui-public needs --ui HOST:PORT")
		}
		return nil, nil
	}
	if _, err := liveview.CheckAddr(f.addr, f.public); err != nil {
		if errors.Is(err, liveview.ErrPublic) {
			return nil, badInput("--ui %w; or add --ui-public", err)
		}
		return nil, badInput("--ui %w", err)
	}
	ln, err := mesh.ListenTCP(f.addr)
	if err != nil {
		return nil, badInput("--ui %s: %w", f.addr, err)
	}
	return ln, nil
}

// serveUI serves the live view of src on ln until the returned stop is
// called, and says where through say.
func serveUI(ln net.Listener, src liveview.Source, public bool, say func(url string), logger *slog.Logger) (url string, stop func()) {
	if public {
		liveview.WarnPublic(logger, ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := liveview.NewServer(src, liveview.Options{Logger: logger})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("live view stopped", "err", err)
		}
	}()
	url = "http://" + ln.Addr().String() + "/"
	say(url)
	return url, func() {
		cancel()
		<-done
	}
}
