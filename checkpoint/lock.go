package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockName is the lock file inside a checkpoint directory.
const LockName = "node.lock"

// ErrLocked is wrapped by Lock's error when another process holds the
// directory.
var ErrLocked = errors.New("checkpoint directory in use")

// Lock takes the directory dir (created, mode 0700, if it does not exist)
// for this process alone, so that two nodes never write one checkpoint. The
// lock is the operating system's (an advisory file lock): it goes when the
// process ends, however it ends, so a killed node never leaves it behind.
// Release gives it back.
func Lock(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint directory: %w", err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: %s is locked by %s", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Say who holds it, for the message another process will print.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		unlockErr := unlockFile(f)
		closeErr := f.Close()
		return errors.Join(unlockErr, closeErr)
	}, nil
}

// readHolder names the process recorded in a lock file, or "another
// process" when the file does not say.
func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && pid > 0 {
		return "process " + strconv.Itoa(pid)
	}
	return "another process"
}
