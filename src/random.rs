//! Random numbers: Philox4x32-10 keyed by (seed, offset), identical bits on every place.
