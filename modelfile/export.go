package modelfile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// exportJSON is the JSON export's shape. Field names are part of the
// interface and stay stable.
type exportJSON struct {
	Format     string           `json:"format"`
	Version    int              `json:"version"`
	Kind       string           `json:"kind"`
	Classes    []float64        `json:"classes,omitempty"`
	Mapping    exportMapping    `json:"mapping"`
	Provenance exportProvenance `json:"provenance"`
	// Weights holds one array per block (class), dense: index 0 is the
	// bias, index j the weight of key j.
	Weights [][]float64 `json:"weights"`
}

type exportMapping struct {
	Dimension uint64 `json:"dimension"`
	HashBits  uint   `json:"hash_bits"`
	Hash      string `json:"hash,omitempty"`
}

type exportProvenance struct {
	Mesh     string            `json:"mesh"`
	Member   string            `json:"member"`
	Clock    uint64            `json:"clock"`
	Settings map[string]string `json:"settings"`
	Data     []string          `json:"data"`
}

// WriteJSON writes m as one JSON document: its kind, classes, mapping and
// provenance, and its weights as one dense array per block (index 0 the
// bias). Numbers are written in their shortest exact form, so a reader
// gets the float64 weights back bit for bit.
func (m *Model) WriteJSON(w io.Writer) error {
	stride := int(m.Mapping.Dimension) + 1
	out := exportJSON{
		Format: "sketchmesh-model", Version: Version, Kind: string(m.Kind), Classes: m.Classes,
		Mapping: exportMapping{Dimension: m.Mapping.Dimension, HashBits: m.Mapping.HashBits, Hash: m.Mapping.Hash},
		Provenance: exportProvenance{
			Mesh: m.Provenance.Mesh, Member: m.Provenance.Member, Clock: m.Provenance.Clock,
			Settings: map[string]string{}, Data: m.Provenance.Data,
		},
	}
	for _, s := range m.Provenance.Settings {
		out.Provenance.Settings[s.Name] = s.Value
	}
	if out.Provenance.Data == nil {
		out.Provenance.Data = []string{}
	}
	for b := 0; b < m.Blocks(); b++ {
		out.Weights = append(out.Weights, m.Weights[b*stride:(b+1)*stride])
	}
	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(out); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return bw.Flush()
}

// WriteTSV writes m's non-zero weights as tab-separated values under the
// header "class, key, weight": one line per weight, key 0 being the bias.
// class is the softmax label value, or 0 for the other models. Weights are
// in their shortest exact form.
func (m *Model) WriteTSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	stride := int(m.Mapping.Dimension) + 1
	fmt.Fprintln(bw, "class\tkey\tweight")
	var line []byte
	for b := 0; b < m.Blocks(); b++ {
		class := 0.0
		if m.Classes != nil {
			class = m.Classes[b]
		}
		for j, v := range m.Weights[b*stride : (b+1)*stride] {
			if v == 0 {
				continue
			}
			line = strconv.AppendFloat(line[:0], class, 'g', -1, 64)
			line = append(line, '\t')
			line = strconv.AppendInt(line, int64(j), 10)
			line = append(line, '\t')
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
