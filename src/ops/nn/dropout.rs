//! dropout
