//! Out-of-range indices found on the GPU. A kernel that reads indices (gather-like ops,
//! one_hot) binds the device's error flag; the first invocation that meets an index outside
//! `[0, n)` records its op's code, the index and `n` there. The next readback or `sync()`
//! reads the flag back with its own data and returns the `InvalidArgument` error the CPU
//! gives for the same call (the op named, the index and the size), then clears it. As with
//! any asynchronous device error, that readback may be another thread's: the flag is per
//! device, not per caller.
//!
//! Flag layout (u32 words): `[count, op code, index lo, index hi, n]`; `count` is an atomic
//! counter, so exactly one invocation writes the details.
//!
//! The same flag carries `FLAGS_check_nan_inf`'s deferred GPU check (the check mode's
//! kernel, `ops/registry/dispatch/check.rs`): the first NaN or infinity an output holds is
//! recorded as `[count, code, element, 0, bits]`, the code naming the op, the output and its
//! shape; the next readback returns `Error::NonFinite`.
//!
//! [`ErrorFlag`] is a leaf of the runtime: the context owns one per device, records the
//! readback of its buffer and asks it for the error its words hold.

use std::collections::HashMap;

use crate::{DType, Error, Result};

/// What a code in the flag stands for.
enum Source {
    /// A kernel of this op checks its indices.
    Index(&'static str),
    /// The deferred NaN/Inf check of what an op wrote (`what`: "output 0", or an input
    /// written in place); `shape` is `None` past [`MAX_SHAPED_SOURCES`].
    NonFinite { op: String, what: String, shape: Option<Vec<usize>>, dtype: DType },
}

/// A NaN-check source: (op, what, shape, dtype).
type NonFiniteKey = (String, String, Option<Vec<usize>>, DType);

/// NaN-check sources kept with their shapes; past this many (a program whose shapes keep
/// changing) new ones are keyed without the shape and report the flat element index, so the
/// table stays bounded.
const MAX_SHAPED_SOURCES: usize = 4096;

/// Bytes of the flag buffer.
pub(crate) const FLAG_BYTES: u64 = 20;

/// The device's flag and the ops whose kernels bound it (their codes are positions + 1).
pub(crate) struct ErrorFlag {
    buffer: wgpu::Buffer,
    sources: Vec<Source>,
    /// Codes of the index-checking ops.
    index_codes: HashMap<&'static str, u32>,
    /// Codes of the NaN checks by (op, what, shape, dtype).
    non_finite: HashMap<NonFiniteKey, u32>,
    /// A checking kernel was recorded since the flag was last read.
    armed: bool,
}

impl ErrorFlag {
    pub fn new(device: &wgpu::Device) -> ErrorFlag {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-index-errors"),
            size: FLAG_BYTES,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        ErrorFlag { buffer, sources: Vec::new(), index_codes: HashMap::new(), non_finite: HashMap::new(), armed: false }
    }

    /// The flag buffer for a kernel of `op` that checks its indices, and `op`'s code.
    pub fn index_code(&mut self, op: &'static str) -> (u32, wgpu::Buffer) {
        let f = self;
        let code = match f.index_codes.get(op) {
            Some(&c) => c,
            None => {
                f.sources.push(Source::Index(op));
                let c = f.sources.len() as u32;
                f.index_codes.insert(op, c);
                c
            }
        };
        f.armed = true;
        (code, f.buffer.clone())
    }

    /// The code of the deferred NaN/Inf check of what `op` wrote (`what`: "output 0", ...,
    /// of `shape` and `dtype`), and the flag buffer its kernel binds.
    pub fn non_finite_code(&mut self, op: String, what: &str, shape: &[usize], dtype: DType) -> (u32, wgpu::Buffer) {
        let f = self;
        let mut key = (op, what.to_string(), Some(shape.to_vec()), dtype);
        if !f.non_finite.contains_key(&key) && f.non_finite.len() >= MAX_SHAPED_SOURCES {
            key.2 = None;
        }
        let code = match f.non_finite.get(&key) {
            Some(&c) => c,
            None => {
                let (op, what, shape, dtype) = key.clone();
                f.sources.push(Source::NonFinite { op, what, shape, dtype });
                let c = f.sources.len() as u32;
                f.non_finite.insert(key, c);
                c
            }
        };
        f.armed = true;
        (code, f.buffer.clone())
    }

    /// Notes that a checking kernel was recorded (a replayed plan's).
    pub fn arm(&mut self) {
        self.armed = true;
    }

    /// The flag buffer when a checking kernel ran since it was last read (and disarms it).
    pub fn take(&mut self) -> Option<wgpu::Buffer> {
        std::mem::replace(&mut self.armed, false).then(|| self.buffer.clone())
    }

    /// The error recorded in the flag's `words`, if any.
    pub fn error(&self, words: &[u8]) -> Result<()> {
        let w: Vec<u32> = words.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if w.len() < 5 || w[0] == 0 {
            return Ok(());
        }
        let f = self;
        match (w[1] as usize).checked_sub(1).and_then(|i| f.sources.get(i)) {
            Some(Source::NonFinite { op, what, shape, dtype }) => {
                let (k, bits) = (w[2] as usize, w[4]);
                let value = match dtype {
                    DType::Float16 => half::f16::from_bits(bits as u16).to_f32(),
                    DType::BFloat16 => half::bf16::from_bits(bits as u16).to_f32(),
                    _ => f32::from_bits(bits),
                };
                let place = match shape {
                    Some(shape) => {
                        let mut index = vec![0; shape.len()];
                        let mut rest = k;
                        for d in (0..shape.len()).rev() {
                            index[d] = rest % shape[d].max(1);
                            rest /= shape[d].max(1);
                        }
                        format!("{what} {shape:?} {dtype}: element {k} (index {index:?})")
                    }
                    None => format!("{what} {dtype}: element {k} (flat)"),
                };
                Err(Error::NonFinite {
                    op: op.clone(),
                    msg: format!(
                        "{place} is {value}; found on the GPU by the deferred check and reported at this readback"
                    ),
                })
            }
            source => {
                let op = match source {
                    Some(Source::Index(op)) => op,
                    _ => "index op",
                };
                let value = (w[2] as u64 | (w[3] as u64) << 32) as i64;
                let n = w[4];
                Err(Error::invalid(
                    op,
                    format!("index {value} is out of range (size {n}, valid 0..{n}); found on the GPU"),
                ))
            }
        }
    }
}
