// Package sfb owns sufficient factor broadcasting: sending the update of a
// matrix-shaped model as the factors whose outer products sum to it, instead
// of the matrix itself.
//
// For multinomial logistic regression with K classes over features 1..D, the
// plain-SGD update of a mini-batch of S rows is
//
//	ΔW = Σ_i b_i c_iᵀ,  b_i = −(η/S)·(softmax(W u_i) − onehot(y_i)) ∈ R^K,  c_i = (1, u_i)
//
// where c_i is row i's sparse features with the bias at key 0. Sending the S
// pairs costs S·(K + nnz) numbers instead of K × (features the batch
// touches), which wins for small batches and loses for large ones. Which is
// smaller depends on the data and on the codec, so the sender encodes both and
// sends the smaller (package node decides; this package encodes, decodes and
// reconstructs).
//
// The factors are exact only for plain SGD without L2: Adam's per-coordinate
// scaling and an L2 term on the touched coordinates are not rank-S, so a
// configuration that asks for factors with either is refused by the caller.
//
// # Frame
//
//	magic "SF" | version 1 | K uvarint | stride uvarint (D+1) | S uvarint |
//	len(b) uvarint | b frame | c frame
//
// The b frame is one dense codec frame of S·K values, b_0 then b_1 …; the c
// frame is one sparse codec frame whose key i·stride + j holds c_i[j], so
// all S factors share one ascending key space. Both are frames of package
// codec, coded by whatever codec the sender chose, and self-describing.
//
// Reconstruction sums sample by sample in index order and within a sample
// key by key, so it is deterministic: every receiver of a frame builds the
// same matrix delta, bit for bit. The Frobenius norm of each outer product is
// ‖b_i‖·‖c_i‖, which bounds the update's norm without building it.
package sfb
