package liveview

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed web
var webFiles embed.FS

// DefaultRate is how many states a second the server sends at most.
const DefaultRate = 2

// Options tune a Server.
type Options struct {
	// Rate is the most states a second the server polls its Source for and
	// sends (DefaultRate when 0).
	Rate float64
	// Logger receives the server's own events; slog.Default when nil.
	Logger *slog.Logger
}

// Server serves the page, /api/state and /api/events for one Source.
type Server struct {
	src      Source
	interval time.Duration
	log      *slog.Logger
	web      fs.FS

	mu      sync.Mutex
	latest  []byte // the last state encoded, JSON
	clients map[chan []byte]struct{}
	// encodes counts the states encoded, for tests and the bench.
	encodes uint64
}

// NewServer returns a server of src. Run must be running for /api/events
// to send anything; /api/state polls src itself when Run has not yet.
func NewServer(src Source, opts Options) *Server {
	rate := opts.Rate
	if !(rate > 0) || math.IsInf(rate, 0) {
		rate = DefaultRate
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	return &Server{
		src: src, interval: time.Duration(float64(time.Second) / rate), log: log, web: sub,
		clients: map[chan []byte]struct{}{},
	}
}

// Run polls the source and sends each changed state to every client, until
// ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll encodes the source's state and, when it changed, queues it for
// every client; a client whose slot is still full gets the newer state in
// place of the older one.
func (s *Server) poll() {
	data, err := Encode(s.src.LiveState())
	if err != nil {
		s.log.Error("live view: cannot encode the state", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.encodes++
	if bytes.Equal(data, s.latest) {
		return
	}
	s.latest = data
	for c := range s.clients {
		select {
		case <-c:
		default:
		}
		c <- data
	}
}

// Encode writes st as the JSON /api/state serves. Figures that are not
// finite (a loss that diverged) are written as 0, since JSON has no NaN.
func Encode(st State) ([]byte, error) {
	finite(&st)
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode live state: %w", err)
	}
	return data, nil
}

func finite(st *State) {
	fix := func(v *float64) {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = 0
		}
	}
	fixOpt := func(v **float64) {
		if *v != nil && (math.IsNaN(**v) || math.IsInf(**v, 0)) {
			*v = nil
		}
	}
	fix(&st.ElapsedSeconds)
	if len(st.Members) > 0 {
		st.Members = append([]Member(nil), st.Members...)
	}
	for i := range st.Members {
		m := &st.Members[i]
		fix(&m.StalenessMean)
		fix(&m.BlockedSeconds)
		fix(&m.CompressionRatio)
		fix(&m.TrainLoss)
	}
	if len(st.Links) > 0 {
		st.Links = append([]Link(nil), st.Links...)
	}
	for i := range st.Links {
		fix(&st.Links[i].CompressionRatio)
	}
	if len(st.Curve) > 0 {
		st.Curve = append([]Point(nil), st.Curve...)
	}
	for i := range st.Curve {
		p := &st.Curve[i]
		fix(&p.WallSeconds)
		fix(&p.TrainLoss)
		fix(&p.TestLoss)
		fixOpt(&p.TestAccuracy)
		fixOpt(&p.TestAUC)
	}
}

// Handler serves the page, its assets, /api/state and /api/events.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServerFS(s.web))
	mux.HandleFunc("/api/state", s.serveState)
	mux.HandleFunc("/api/events", s.serveEvents)
	return readOnly(mux)
}

// readOnly refuses every method but GET and HEAD, and forbids the page to
// load anything from another origin.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only: GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// current is the last state polled, or a fresh poll before the first.
func (s *Server) current() []byte {
	s.mu.Lock()
	data := s.latest
	s.mu.Unlock()
	if data != nil {
		return data
	}
	s.poll()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// compressed wraps w in gzip when the client accepts it: a state names
// every member many times over (links, the vector clock, who waits for
// whom), and compresses about sevenfold. The caller closes the writer.
func compressed(w http.ResponseWriter, r *http.Request) (io.Writer, func() error, func() error) {
	w.Header().Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		nop := func() error { return nil }
		return w, nop, nop
	}
	w.Header().Set("Content-Encoding", "gzip")
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	return gz, gz.Flush, gz.Close
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			return strings.ReplaceAll(params, " ", "") != "q=0"
		}
	}
	return false
}

func (s *Server) serveState(w http.ResponseWriter, r *http.Request) {
	data := s.current()
	if data == nil {
		http.Error(w, "no state yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	out, _, closeOut := compressed(w, r)
	_, _ = out.Write(data)
	_ = closeOut()
}

// serveEvents streams states as server-sent events: the latest at once,
// then each change, one "data:" line of JSON per event.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	c := make(chan []byte, 1)
	if data := s.current(); data != nil {
		c <- data
	}
	s.mu.Lock()
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	out, flushOut, closeOut := compressed(w, r)
	defer func() { _ = closeOut() }()
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	// A comment every 15 s keeps proxies from closing an idle stream.
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case data := <-c:
			if _, err := fmt.Fprintf(out, "data: %s\n\n", data); err != nil {
				return
			}
		case <-keep.C:
			if _, err := fmt.Fprint(out, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if flushOut() != nil {
			return
		}
		flusher.Flush()
	}
}

// Clients returns how many event streams are open.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// ErrPublic is wrapped by the error CheckAddr returns for an address that
// is not loopback when public is false.
var ErrPublic = errors.New("not a loopback address")

// CheckAddr checks a HOST:PORT for the server: the host must be a loopback
// address (or localhost) unless public is set. It reports whether the
// address is public.
func CheckAddr(hostport string, public bool) (isPublic bool, err error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false, fmt.Errorf("%q: want HOST:PORT, e.g. 127.0.0.1:8080: %w", hostport, err)
	}
	if port == "" {
		return false, fmt.Errorf("%q: no port", hostport)
	}
	loopback := strings.EqualFold(host, "localhost")
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	if !loopback && !public {
		shown := host
		if shown == "" {
			shown = "every interface"
		}
		return true, fmt.Errorf("%w: %s would expose the live view beyond this machine; give a loopback address such as 127.0.0.1:%s, or ask for it explicitly", ErrPublic, shown, port)
	}
	return !loopback, nil
}

// WarnPublic logs the warning a live view on a public address deserves.
func WarnPublic(logger *slog.Logger, addr net.Addr) {
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("live view served on a non-loopback address: anyone who can reach it sees the mesh's members, addresses and progress (it is read-only, without authentication)", "addr", addr.String())
}

// Serve runs the server on ln until ctx ends, then closes it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Run(ctx)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("live view server: %w", err)
	}
	return nil
}
