//! norm
