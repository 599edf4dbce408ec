package cmd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxConfigBytes bounds a config file; a real one is a few hundred bytes.
const maxConfigBytes = 1 << 20

// repeatable is implemented by flag values that may say whether their
// flag can be given more than once; see isRepeatable.
type repeatable interface {
	Repeatable() bool
}

// isRepeatable reports whether flag f may be given more than once, each
// use adding a value (--listen, --join), so that a config file may give it
// a list: its value says so (repeatable), or is a slice type such as
// listFlag.
func isRepeatable(f *flag.Flag) bool {
	if r, ok := f.Value.(repeatable); ok {
		return r.Repeatable()
	}
	v := reflect.ValueOf(f.Value)
	return v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Slice
}

// applyConfigFile applies the YAML config file at path to fs, which has
// been parsed: the file maps flag names (without dashes) to a scalar, or
// for a repeatable flag to a list of scalars, and each value is given to
// fs.Set as if it came on the command line. Flags set on the command line
// win: a flag already set is left as it is. A bool flag takes a YAML
// boolean.
//
// Every key must be a flag of fs; an unknown key, a value of the wrong
// shape, or a value the flag refuses is bad input, with an error naming the
// file, the line and the key.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	doc, err := readConfig(path)
	if err != nil || doc == nil {
		return err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	seen := map[string]int{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], resolve(doc.Content[i+1])
		at := fmt.Sprintf("config file %s, line %d", path, k.Line)
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			return badInput("%s: a key must be a flag name", at)
		}
		name := k.Value
		f := fs.Lookup(name)
		switch {
		case f == nil && fs.Lookup(strings.TrimLeft(name, "-")) != nil:
			return badInput("%s: unknown setting %q (write flag names without dashes)", at, name)
		case f == nil:
			return badInput("%s: unknown setting %q (not a flag of this command)", at, name)
		case name == "config":
			return badInput("%s: a config file cannot name another config file", at)
		}
		if line, ok := seen[name]; ok {
			return badInput("%s: %s is already set on line %d", at, name, line)
		}
		seen[name] = k.Line
		values, line, err := configValues(f, v)
		if err != nil {
			return badInput("config file %s, line %d: %s: %v", path, line, name, err)
		}
		if explicit[name] {
			continue
		}
		for _, s := range values {
			if err := fs.Set(name, s.text); err != nil {
				return badInput("config file %s, line %d: %s: invalid value %q: %v", path, s.line, name, s.text, err)
			}
		}
	}
	return nil
}

// readConfig reads and parses a config file; it returns the top-level
// mapping, or nil for a file without settings.
func readConfig(path string) (*yaml.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("config file: %w", err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, badInput("config file %s is larger than %d bytes", path, maxConfigBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, usageError{fmt.Errorf("config file %s: %w", path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, badInput("config file %s holds more than one YAML document", path)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	top := resolve(doc.Content[0])
	switch {
	case top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null":
		return nil, nil
	case top.Kind != yaml.MappingNode:
		return nil, badInput("config file %s, line %d: want a mapping of flag names to values", path, top.Line)
	}
	return top, nil
}

// resolve follows YAML aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// configValue is one value for a flag and the line it is on.
type configValue struct {
	text string
	line int
}

// configValues returns the values a config entry gives flag f, as text for
// f.Value.Set; on error, also the line of the value at fault.
func configValues(f *flag.Flag, v *yaml.Node) ([]configValue, int, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		s, err := scalar(f, v)
		if err != nil {
			return nil, v.Line, err
		}
		return []configValue{{s, v.Line}}, 0, nil
	case yaml.SequenceNode:
		if !isRepeatable(f) {
			return nil, v.Line, errors.New("takes one value, not a list")
		}
		out := make([]configValue, 0, len(v.Content))
		for _, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return nil, item.Line, errors.New("a list item must be a single value")
			}
			s, err := scalar(f, item)
			if err != nil {
				return nil, item.Line, err
			}
			out = append(out, configValue{s, item.Line})
		}
		return out, 0, nil
	}
	return nil, v.Line, errors.New("want a value or a list of values, not a mapping")
}

// scalar returns the text of one scalar value for flag f.
func scalar(f *flag.Flag, v *yaml.Node) (string, error) {
	if v.ShortTag() == "!!null" {
		return "", errors.New("has no value (remove the line to keep the default)")
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		var x bool
		if v.ShortTag() != "!!bool" || v.Decode(&x) != nil {
			return "", fmt.Errorf("want true or false, not %q", v.Value)
		}
		return strconv.FormatBool(x), nil
	}
	return v.Value, nil
}
