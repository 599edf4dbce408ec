package codec

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSpec returns the codec a specification names: a registered codec
// name, optionally followed by sketchml options, each ":option=value":
//
//	layout=width|energy      GroupLayout: the paper's equal-width groups or equal-energy ones
//	quantiles=Q rows=S groups=R columns=RATIO seed=N
//	keys=auto|delta-binary|huffman  cells=auto|packed|huffman
//	representative=mean|midpoint
//	target-error=E           TargetError, a relative L2 error in (0, 1)
//	budget=BYTES             ByteBudget, bytes a frame may take
//	fallback=uniform8|off    off sets SketchOnly: never a uniform8 frame in place of the sketch
//
// For example "sketchml:layout=width" is the paper's group layout with the
// project's coders. Options start from DefaultSketchMLConfig. Other codecs
// take no options.
func ParseSpec(spec string) (Codec, error) {
	name, opts, hasOpts := strings.Cut(spec, ":")
	c, err := ByName(name)
	if err != nil || !hasOpts {
		return c, err
	}
	if name != "sketchml" {
		return nil, fmt.Errorf("%w: codec %s takes no options (%q)", ErrBadInput, name, spec)
	}
	cfg := DefaultSketchMLConfig()
	for _, opt := range strings.Split(opts, ":") {
		key, val, ok := strings.Cut(opt, "=")
		if !ok {
			return nil, fmt.Errorf("%w: sketchml option %q: want option=value", ErrBadInput, opt)
		}
		if err := cfg.set(key, val); err != nil {
			return nil, fmt.Errorf("sketchml option %q: %w", opt, err)
		}
	}
	return NewSketchML(cfg)
}

// set applies one ParseSpec option; NewSketchML checks the ranges.
func (cfg *SketchMLConfig) set(key, val string) error {
	choice := func(dst *uint8, names ...string) error {
		for i, n := range names {
			if val == n {
				*dst = uint8(i)
				return nil
			}
		}
		return fmt.Errorf("%w: %q is not one of %s", ErrBadInput, val, strings.Join(names, ", "))
	}
	integer := func(dst *int) error {
		n, err := strconv.Atoi(val)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		*dst = n
		return nil
	}
	real := func(dst *float64) error {
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		*dst = x
		return nil
	}
	switch key {
	case "layout":
		return choice((*uint8)(&cfg.GroupLayout), "width", "energy")
	case "keys":
		return choice((*uint8)(&cfg.KeyCoding), "auto", "delta-binary", "huffman")
	case "cells":
		return choice((*uint8)(&cfg.CellCoding), "auto", "packed", "huffman")
	case "representative":
		return choice((*uint8)(&cfg.Representative), "mean", "midpoint")
	case "quantiles":
		return integer(&cfg.Quantiles)
	case "rows":
		return integer(&cfg.Rows)
	case "groups":
		return integer(&cfg.Groups)
	case "budget":
		return integer(&cfg.ByteBudget)
	case "fallback":
		var off uint8
		if err := choice(&off, "uniform8", "off"); err != nil {
			return err
		}
		cfg.SketchOnly = off == 1
		return nil
	case "columns":
		return real(&cfg.ColumnRatio)
	case "target-error":
		return real(&cfg.TargetError)
	case "seed":
		n, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		cfg.Seed = n
		return nil
	}
	return fmt.Errorf("%w: unknown option %q (known: layout, quantiles, rows, groups, columns, seed, keys, cells, representative, target-error, budget, fallback)", ErrBadInput, key)
}
