package cmd

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// maxKeyFileBytes bounds a key file: a marshalled RSA-8192 key takes about
// 4.7 KiB, an Ed25519 one 68 bytes.
const maxKeyFileBytes = 64 << 10

// loadOrCreateKey returns the node's identity key, kept in the file at
// path so that the node keeps its peer id across restarts. When the file
// does not exist it generates an Ed25519 key and writes it there (mode
// 0600, written to a temporary file and renamed, so a crash never leaves a
// half-written key) and reports created; the file's directory must exist.
//
// An existing file must be readable by its owner only and hold a libp2p
// private key as crypto.MarshalPrivateKey writes it (of any key type). A
// file that fails either check, or a missing directory, is bad input
// (usageError) with a message naming the file and the cause; I/O failures
// are returned as plain errors.
func loadOrCreateKey(path string) (key crypto.PrivKey, created bool, err error) {
	key, err = readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, false, badInput("key file %s: directory %s does not exist; create it or choose another --key", path, dir)
	}
	if key, err = createKey(path); err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// readKey reads and checks an existing key file. A missing file gives an
// error that is fs.ErrNotExist.
func readKey(path string) (crypto.PrivKey, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, badInput("key file %s is not a regular file (mode %v)", path, fi.Mode())
	}
	// Windows has no owner/group/other permission bits to check.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, badInput("key file %s has mode %#o; it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	if fi.Size() > maxKeyFileBytes {
		return nil, badInput("key file %s holds %d bytes, more than any libp2p private key", path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	key, err := crypto.UnmarshalPrivateKey(data)
	if err != nil {
		return nil, usageError{fmt.Errorf("key file %s does not hold a libp2p private key: %w", path, err)}
	}
	return key, nil
}

// createKey generates an Ed25519 key and writes it to path atomically,
// with mode 0600.
func createKey(path string) (crypto.PrivKey, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key file %s: generating a key: %w", path, err)
	}
	data, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	// Make the rename durable; a failure here leaves a complete key file.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return key, nil
}
