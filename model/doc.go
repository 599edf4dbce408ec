// Package model owns the training step: the sparse linear models (logistic
// regression, linear SVM, linear regression, multinomial logistic regression),
// their mini-batch gradients, their metrics (loss, accuracy, AUC, macro-F1,
// RMSE, over a slice or a stream of rows: Evaluator), and the optimizers
// that turn a gradient into an additive update.
//
// It is a package of its own, apart from the node core, because the same math
// is used by the node, by single-node baselines and by the codec benchmark,
// and because it is the part a user extends with new models.
//
// Parameters live in one flat []float64 view. Key 0 of every class block is
// the bias: LIBSVM feature ids start at 1, so feature j maps to key j and no
// key is wasted. A model with K output blocks (K = number of classes for
// softmax, 1 otherwise) over features 1..D has K·(D+1) parameters, and class
// c's block starts at key c·(D+1).
//
// Everything here is deterministic: gradients sum rows in the order given and
// return keys sorted ascending, so two nodes that hold the same view and the
// same batch compute bit-identical updates. L2 regularisation is applied to
// the coordinates a batch touches (the usual lazy form for sparse data).
package model
