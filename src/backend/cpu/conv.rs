//! CPU convolution: im2col + GEMM.
