//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One process at a time holds a checkpoint directory; the refusal names
// the holder, and the directory is free again once released.
func TestLockExcludesASecondHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v, %v; want mode 0700", info, err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Lock: %v; want ErrLocked naming process %d", err, os.Getpid())
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = Lock(dir)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

func TestLockReportsWhatItCannotCreate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(filepath.Join(file, "ckpt")); err == nil || !strings.Contains(err.Error(), "create checkpoint directory") {
		t.Fatalf("Lock under a file: %v", err)
	}
}
