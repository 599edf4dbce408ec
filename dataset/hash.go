package dataset

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// HashFunction names the feature hash, as model files record it: 64-bit
// FNV-1a over the id's bytes, followed by MurmurHash3's 64-bit finalizer
// (fmix64). FNV-1a alone mixes its last bytes poorly into the high bits,
// which are the ones a bucket is taken from; fmix64 spreads every input bit
// over the whole word.
//
// An integer id is hashed as its 8 bytes, little-endian; a string id as its
// UTF-8 bytes. With B hash bits, the id's key is 1 + (hash >> (64−B)), so keys
// run from 1 to 2^B and key 0 stays the bias.
const HashFunction = "fnv1a64-fmix64"

// MaxHashBits bounds --hash-bits: 2^30 weights per class, 8 GiB of float64,
// is already past what a mesh can exchange snapshots of.
const MaxHashBits = 30

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Mix64 is MurmurHash3's 64-bit finalizer (fmix64): every input bit
// reaches every output bit.
func Mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Hash64 returns the feature hash (HashFunction) of b.
func Hash64(b []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return Mix64(h)
}

// hashString is Hash64 of s's bytes, without converting s to a slice.
func hashString(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return Mix64(h)
}

// bucket maps a hash to a key in 1..2^bits.
func bucket(h uint64, bits uint) uint64 { return 1 + h>>(64-bits) }

// HashID returns the key of integer feature id under bits hash bits.
func HashID(id uint64, bits uint) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], id)
	return bucket(Hash64(b[:]), bits)
}

// HashString returns the key of string feature id under bits hash bits.
func HashString(id string, bits uint) uint64 { return bucket(hashString(id), bits) }

// CheckHashBits validates a number of hash bits.
func CheckHashBits(bits uint) error {
	if bits < 1 || bits > MaxHashBits {
		return fmt.Errorf("hash bits %d: want 1 to %d", bits, MaxHashBits)
	}
	return nil
}

// Hasher maps the feature ids of rows into 2^Bits keys. Ids that land on
// the same key within a row are summed, in the row's order. With Bits 0 it
// maps nothing.
type Hasher struct {
	Bits   uint
	hashed []uint64 // the key of each input position
	order  []int    // input positions sorted by key
	keys   []uint64
	vals   []float32
}

// Row returns r with its ids hashed, keys strictly ascending; the returned
// slices are owned by the Hasher and valid until its next call. With Bits
// 0 it returns r unchanged.
func (h *Hasher) Row(r Row) Row {
	if h.Bits == 0 {
		return r
	}
	n := len(r.Keys)
	h.hashed = slices.Grow(h.hashed[:0], n)[:n]
	h.order = slices.Grow(h.order[:0], n)[:n]
	for i, id := range r.Keys {
		h.hashed[i] = HashID(id, h.Bits)
		h.order[i] = i
	}
	slices.SortFunc(h.order, func(a, b int) int {
		if c := cmp.Compare(h.hashed[a], h.hashed[b]); c != 0 {
			return c
		}
		return a - b
	})
	h.keys, h.vals = h.keys[:0], h.vals[:0]
	for _, i := range h.order {
		k := h.hashed[i]
		if m := len(h.keys); m > 0 && h.keys[m-1] == k {
			h.vals[m-1] += r.Values[i]
			continue
		}
		h.keys = append(h.keys, k)
		h.vals = append(h.vals, r.Values[i])
	}
	m := len(h.keys)
	return Row{Label: r.Label, Keys: h.keys[:m:m], Values: h.vals[:m:m]}
}

// Hashed returns d with every row's ids hashed into 2^bits keys (see
// Hasher), in new backing arrays; MaxFeature becomes 2^bits, the model
// dimension hashing implies, whatever keys the rows use.
func (d *Dataset) Hashed(bits uint) *Dataset {
	h := Hasher{Bits: bits}
	nnz := d.NNZ()
	keys := make([]uint64, 0, nnz)
	vals := make([]float32, 0, nnz)
	rows := make([]Row, len(d.Rows))
	for i, r := range d.Rows {
		hr := h.Row(r)
		start := len(keys)
		keys = append(keys, hr.Keys...)
		vals = append(vals, hr.Values...)
		rows[i] = Row{Label: r.Label, Keys: keys[start:len(keys):len(keys)], Values: vals[start:len(vals):len(vals)]}
	}
	return &Dataset{Name: d.Name, Rows: rows, MaxFeature: 1 << bits}
}
