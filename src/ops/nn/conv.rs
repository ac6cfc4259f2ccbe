//! conv
