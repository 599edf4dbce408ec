package dataset

import (
	"embed"
	"fmt"
	"strings"
)

// The built-in datasets ship inside the binary so a mesh can be tried without
// fetching data. builtin/NOTICE records where each file comes from and its
// licence; it must travel with the files.
//
//go:embed builtin/*.gz builtin/NOTICE
var builtinFS embed.FS

// builtinSet names the embedded files of one built-in dataset.
type builtinSet struct {
	name, train, test string
}

// builtins is sorted by name and never modified.
var builtins = [...]builtinSet{
	{name: "a9a", train: "builtin/a9a.gz", test: "builtin/a9a.t.gz"},
	{name: "rcv1", train: "builtin/rcv1_vw.train.libsvm.gz", test: "builtin/rcv1_vw.test.libsvm.gz"},
}

// BuiltinNotice returns the provenance and licence notice of the built-in
// datasets. Their licences (BSD-3-Clause for rcv1, CC BY 4.0 for a9a) require
// the notice to accompany binary distributions, so commands should offer a
// way to print it.
func BuiltinNotice() string {
	b, err := builtinFS.ReadFile("builtin/NOTICE")
	if err != nil {
		// The go:embed directive guarantees the file; failing here
		// means the build itself is broken.
		panic("dataset: embedded NOTICE missing: " + err.Error())
	}
	return string(b)
}

// BuiltinNames returns the names of the built-in datasets, sorted.
func BuiltinNames() []string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return names
}

// Builtin parses the train and test splits of a built-in dataset, named
// "<name>.train" and "<name>.test". The embedded files are parsed on every
// call and nothing is cached, so callers own the result outright and may
// modify it; parsing takes tens of milliseconds.
func Builtin(name string) (train, test *Dataset, err error) {
	b, ok := lookupBuiltin(name)
	if !ok {
		return nil, nil, unknownBuiltin(name)
	}
	if train, err = readEmbedded(b.train, b.name+".train"); err != nil {
		return nil, nil, err
	}
	if test, err = readEmbedded(b.test, b.name+".test"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// Load returns the training split of the built-in dataset named spec, or
// else reads spec as a file path. A built-in name takes precedence over a
// file of the same name; write "./a9a" to read such a file.
func Load(spec string) (*Dataset, error) {
	if b, ok := lookupBuiltin(spec); ok {
		return readEmbedded(b.train, b.name+".train")
	}
	return ReadFile(spec)
}

func lookupBuiltin(name string) (builtinSet, bool) {
	for _, b := range builtins {
		if b.name == name {
			return b, true
		}
	}
	return builtinSet{}, false
}

func unknownBuiltin(name string) error {
	return fmt.Errorf("dataset: unknown built-in dataset %q (known: %s)", name, strings.Join(BuiltinNames(), ", "))
}

func readEmbedded(path, name string) (*Dataset, error) {
	f, err := builtinFS.Open(path)
	if err != nil {
		// Only reachable if the embed pattern and the table disagree.
		return nil, fmt.Errorf("dataset: built-in %s: %w", name, err)
	}
	defer f.Close()
	return Read(f, name)
}
