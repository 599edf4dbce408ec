//go:build !unix

package checkpoint

import (
	"errors"
	"os"
)

// Elsewhere the directory is not locked: nothing stops a second process.
var errWouldBlock = errors.New("would block")

func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
