//go:build !linux

package cmd

import "context"

// useHugePages is a no-op off Linux: other kernels' large pages are not
// asked for by mapping (see hugepages_linux.go).
func useHugePages(context.Context) string { return "" }
