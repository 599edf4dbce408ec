package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/sketchmesh/sketchmesh/model"
	"github.com/sketchmesh/sketchmesh/node"
	"github.com/sketchmesh/sketchmesh/wire"
)

// State is what a node needs to resume.
type State struct {
	Mesh     string // mesh name
	Member   string // member id: libp2p peer id, "/", incarnation number
	Settings node.Settings
	Clock    uint64 // the node's own clock when written
	// Rows are the committed rows and their vector clock entries (Pending
	// may be empty).
	Rows      *node.Snapshot
	Optimizer model.OptimizerState
}

// FileName is the checkpoint's name inside its directory.
const FileName = "node.ckpt"

// tempPattern names Save's temporary files (see os.CreateTemp).
const tempPattern = FileName + ".tmp*"

// ErrCorrupt is wrapped, together with the cause, by every error about a
// checkpoint file whose contents are wrong.
var ErrCorrupt = errors.New("corrupt checkpoint")

// Format constants (see the package documentation).
const (
	magic        = "SKMCKPT\n"
	version      = 3         // 2: member entries say who left, and after which update; 3: rows carry marks of refused updates (snapshot version 2)
	headerBytes  = 8 + 4 + 8 // magic, version, body length
	trailerBytes = sha256.Size
)

// Limits on what a checkpoint may hold.
const (
	maxNameBytes = 256 // mesh name and member id
	// maxBodyBytes bounds the body: the view and two optimizer moments of
	// node.MaxParams values each, the pending envelope, and room for the
	// members.
	maxBodyBytes = 3*8*node.MaxParams + node.MaxEnvelopeBytes + 256<<20
	maxFileBytes = headerBytes + maxBodyBytes + trailerBytes
)

// rename is os.Rename; tests replace it to make a Save fail late.
var rename = os.Rename

// Save writes s as the checkpoint in dir, creating dir (mode 0700) if it
// does not exist. It replaces an existing checkpoint atomically, and
// refuses (with an error wrapping ErrCorrupt) to replace a file that is not
// an intact checkpoint. It validates s as Load would, so what Save writes
// Load reads back.
func Save(dir string, s *State) error {
	if err := validate(s); err != nil {
		return fmt.Errorf("checkpoint: not saved: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := verifyFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%w; not replaced (remove it to start over)", err)
		}
		return err
	}
	removeStaleTemps(dir)

	header, body := encode(s)
	sum := sha256.New()
	sum.Write(header)
	sum.Write(body)

	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	tmp := f.Name()
	err = writeAll(f, header, body, sum.Sum(nil))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

func writeAll(f *os.File, parts ...[]byte) error {
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			return err
		}
	}
	return f.Sync()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeStaleTemps removes temporary files a Save left when its process
// died before it could clean up. Nothing else writes them, so any found
// before a Save starts are stale.
func removeStaleTemps(dir string) {
	stale, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, p := range stale {
		os.Remove(p)
	}
}

// Load reads the checkpoint in dir. It returns an error that is
// errors.Is(err, fs.ErrNotExist) when there is none, one wrapping
// ErrCorrupt and naming the cause when the file's contents are wrong, and
// other I/O errors as they come.
func Load(dir string) (*State, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, corrupt(path, fmt.Errorf("not a regular file (mode %v)", fi.Mode()))
	}
	if fi.Size() > maxFileBytes {
		return nil, corrupt(path, fmt.Errorf("%d bytes, more than any checkpoint holds", fi.Size()))
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	s, err := decode(data)
	if err != nil {
		return nil, corrupt(path, err)
	}
	return s, nil
}

func corrupt(path string, cause error) error {
	return fmt.Errorf("%s: %w: %w", path, ErrCorrupt, cause)
}

// checkSize checks a file of size bytes against its header, given as the
// file's first min(size, headerBytes) bytes, and returns the body length.
func checkSize(size int64, header []byte) (int, error) {
	if k := min(len(header), len(magic)); !bytes.Equal(header[:k], []byte(magic[:k])) {
		return 0, errors.New("bad magic: not a sketchmesh checkpoint")
	}
	if len(header) < headerBytes {
		return 0, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", size, headerBytes)
	}
	if v := binary.BigEndian.Uint32(header[len(magic):]); v != version {
		return 0, fmt.Errorf("format version %d, this build reads version %d", v, version)
	}
	n := binary.BigEndian.Uint64(header[len(magic)+4:])
	if n > maxBodyBytes {
		return 0, fmt.Errorf("header declares a %d-byte body, more than any checkpoint holds", n)
	}
	if want := headerBytes + int64(n) + trailerBytes; size != want {
		if size < want {
			return 0, fmt.Errorf("truncated: header declares %d bytes in all, the file holds %d", want, size)
		}
		return 0, fmt.Errorf("%d trailing bytes after the checksum", size-want)
	}
	return int(n), nil
}

// verifyFile checks the header, length and checksum of the file at path
// without decoding it, reading it as a stream. A missing file gives an
// error that is fs.ErrNotExist.
func verifyFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return corrupt(path, fmt.Errorf("not a regular file (mode %v)", fi.Mode()))
	}
	header := make([]byte, headerBytes)
	k, err := io.ReadFull(f, header)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	n, err := checkSize(fi.Size(), header[:k])
	if err != nil {
		return corrupt(path, err)
	}
	sum := sha256.New()
	sum.Write(header)
	if _, err := io.CopyN(sum, f, int64(n)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	trailer := make([]byte, trailerBytes)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if !bytes.Equal(sum.Sum(nil), trailer) {
		return corrupt(path, errors.New("checksum mismatch: the file was changed or damaged after it was written"))
	}
	return nil
}

// encode returns the header and body of s's checkpoint file.
func encode(s *State) (header, body []byte) {
	w := wire.NewWriter()
	w.Array(6)
	w.String(s.Mesh)
	w.String(s.Member)
	s.Settings.WriteTo(w)
	w.Uint(s.Clock)
	s.Rows.WriteTo(w)
	w.Array(4)
	w.String(string(s.Optimizer.Kind))
	w.Uint(s.Optimizer.Steps)
	w.Floats(s.Optimizer.M)
	w.Floats(s.Optimizer.V)
	body = w.Bytes()
	return makeHeader(len(body)), body
}

// makeHeader returns the header of a file with a body of n bytes.
func makeHeader(n int) []byte {
	header := make([]byte, headerBytes)
	copy(header, magic)
	binary.BigEndian.PutUint32(header[len(magic):], version)
	binary.BigEndian.PutUint64(header[len(magic)+4:], uint64(n))
	return header
}

// decode checks and decodes a whole checkpoint file. Its errors give the
// cause; the caller wraps them with ErrCorrupt.
func decode(data []byte) (*State, error) {
	n, err := checkSize(int64(len(data)), data[:min(len(data), headerBytes)])
	if err != nil {
		return nil, err
	}
	body := data[headerBytes : headerBytes+n]
	sum := sha256.Sum256(data[:headerBytes+n])
	if !bytes.Equal(sum[:], data[headerBytes+n:]) {
		return nil, errors.New("checksum mismatch: the file was changed or damaged after it was written")
	}
	return decodeBody(body)
}

// decodeBody decodes and validates a checkpoint's msgpack body.
func decodeBody(body []byte) (*State, error) {
	r := wire.NewReader(body)
	if err := r.Fields("checkpoint", 6); err != nil {
		return nil, err
	}
	s := &State{}
	var err error
	if s.Mesh, err = r.String("mesh name", maxNameBytes); err != nil {
		return nil, err
	}
	if s.Member, err = r.String("member id", maxNameBytes); err != nil {
		return nil, err
	}
	if s.Settings, err = node.ReadSettings(r); err != nil {
		return nil, err
	}
	if s.Clock, err = r.Uint("clock"); err != nil {
		return nil, err
	}
	if s.Rows, err = node.ReadSnapshot(r); err != nil {
		return nil, err
	}
	if err := r.Fields("optimizer", 4); err != nil {
		return nil, err
	}
	kind, err := r.String("optimizer kind", maxNameBytes)
	if err != nil {
		return nil, err
	}
	s.Optimizer.Kind = model.OptimizerKind(kind)
	if s.Optimizer.Steps, err = r.Uint("optimizer steps"); err != nil {
		return nil, err
	}
	if s.Optimizer.M, err = r.Floats("optimizer first moment", node.MaxParams); err != nil {
		return nil, err
	}
	if s.Optimizer.V, err = r.Floats("optimizer second moment", node.MaxParams); err != nil {
		return nil, err
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	normalize(s)
	if err := validate(s); err != nil {
		return nil, err
	}
	return s, nil
}

// normalize gives decoded empty lists as nil, as the state was most likely
// built, and copies the pending frames out of the file's buffer so that
// holding them does not hold the whole file.
func normalize(s *State) {
	if len(s.Optimizer.M) == 0 {
		s.Optimizer.M = nil
	}
	if len(s.Optimizer.V) == 0 {
		s.Optimizer.V = nil
	}
	if len(s.Rows.View) == 0 {
		s.Rows.View = nil
	}
	if len(s.Rows.Members) == 0 {
		s.Rows.Members = nil
	}
	for i := range s.Rows.Members {
		if len(s.Rows.Members[i].Ahead) == 0 {
			s.Rows.Members[i].Ahead = nil
		}
	}
	if len(s.Rows.Pending) == 0 {
		s.Rows.Pending = nil
	}
	if len(s.Rows.Refused) == 0 {
		s.Rows.Refused = nil
	}
	for i := range s.Rows.Pending {
		u := &s.Rows.Pending[i]
		u.Frame = bytes.Clone(u.Frame)
		u.Sig = bytes.Clone(u.Sig)
	}
}

// validate checks what a checkpoint must satisfy beyond its shape.
func validate(s *State) error {
	switch {
	case s == nil:
		return errors.New("no state")
	case s.Mesh == "" || len(s.Mesh) > maxNameBytes:
		return fmt.Errorf("bad field: mesh name %q: want 1 to %d bytes", s.Mesh, maxNameBytes)
	case s.Rows == nil:
		return errors.New("bad field: no rows")
	case s.Rows.Clock > s.Clock:
		return fmt.Errorf("bad field: rows' clock %d is above the node's clock %d", s.Rows.Clock, s.Clock)
	}
	if err := checkMember(s.Member); err != nil {
		return err
	}
	if err := s.Rows.CheckMembers(); err != nil {
		return fmt.Errorf("bad field: rows: %w", err)
	}
	o := &s.Optimizer
	if o.Kind != s.Settings.Optimizer {
		return fmt.Errorf("bad field: optimizer state is of %q, the settings name %q", o.Kind, s.Settings.Optimizer)
	}
	switch o.Kind {
	case model.SGD:
		if len(o.M) != 0 || len(o.V) != 0 {
			return fmt.Errorf("bad field: sgd state has %d and %d moments, want none", len(o.M), len(o.V))
		}
	case model.Adam:
		if len(o.M) != len(s.Rows.View) || len(o.V) != len(s.Rows.View) {
			return fmt.Errorf("bad field: adam state has %d and %d moments, the rows hold %d parameters", len(o.M), len(o.V), len(s.Rows.View))
		}
		if i := slices.IndexFunc(o.V, func(v float64) bool { return !(v >= 0) }); i >= 0 {
			return fmt.Errorf("bad field: adam second moment [%d] is %v, want >= 0", i, o.V[i])
		}
	default:
		return fmt.Errorf("bad field: unknown optimizer %q", o.Kind)
	}
	return nil
}

// checkMember checks a member id: "<peer id>/<incarnation>".
func checkMember(id string) error {
	p, inc, ok := strings.Cut(id, "/")
	if !ok || len(id) > maxNameBytes {
		return fmt.Errorf("bad field: member id %q: want <peer id>/<incarnation>", id)
	}
	pid, err := peer.Decode(p)
	if err != nil {
		return fmt.Errorf("bad field: member id %q: peer id: %w", id, err)
	}
	if pid.String() != p {
		return fmt.Errorf("bad field: member id %q: peer id is not in its canonical form %s", id, pid)
	}
	if v, err := strconv.ParseUint(inc, 10, 64); err != nil || strconv.FormatUint(v, 10) != inc {
		return fmt.Errorf("bad field: member id %q: incarnation %q is not a decimal number", id, inc)
	}
	return nil
}
