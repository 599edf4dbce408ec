// Command sketchmesh runs and measures a peer-to-peer training mesh.
package main

import (
	"os"

	"github.com/sketchmesh/sketchmesh/cmd"
)

func main() { os.Exit(cmd.Main(os.Args[1:], os.Stdout, os.Stderr)) }
