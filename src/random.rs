//! Random numbers: Philox4x32-10 keyed by (seed, offset), identical bits on every place.
//!
//! # The generator
//! One process-wide state `{seed, offset}` behind a mutex. Each random op reserves a
//! contiguous range of Philox counter *blocks* `offset .. offset + blocks` and advances
//! `offset` past it, so later calls get fresh numbers and [`seed`] (which resets the offset
//! to 0) makes every sequence reproducible. [`get_seed_offset`] / [`set_seed_offset`] save and
//! restore the state. Before the first [`seed`] the seed is drawn from the process's hash
//! entropy (as Paddle, runs differ unless seeded).
//!
//! # Bit layout (the same on the CPU, in WGSL and on wasm)
//! Block `j` of a call whose reserved range starts at `offset` is
//! `philox4x32_10(counter = (lo(offset + j), hi(offset + j), 0, 0), key = (lo(seed), hi(seed)))`,
//! four 32-bit words `w[0..4]`.
//! - **32-bit outputs** (float32 `rand`/`uniform`, `randn`/`normal`, dropout masks): element
//!   `i` uses block `i / 4`, word `i % 4`. Uniform: `k = w >> 8` (top 24 bits),
//!   `u = k · 2^-24 ∈ [0, 1)`, then `u · (max − min) + min`. Normal (Box–Muller): the words
//!   pair up as (0, 1) and (2, 3); for a pair `(a, b)`: `u1 = ((a >> 8) + 1) · 2^-24 ∈ (0, 1]`
//!   (so `ln` never sees 0), `u2 = (b >> 8) · 2^-24`, `r = sqrt(−2 ln u1)`,
//!   `θ = 2π (u2 − ½)`; the even element of the pair is `r cos θ`, the odd one `r sin θ`, then
//!   `· std + mean`. A call of `n` elements uses `ceil(n / 4)` blocks.
//! - **64-bit outputs** (`randint`, float64 `rand`/`uniform`/`randn`, `randperm`): element `i`
//!   uses block `i / 2`, and the 64-bit word `x = w[2h] | w[2h + 1] << 32` with `h = i % 2`.
//!   `randint` is `low + floor(x · (high − low) / 2^64)` (Lemire's multiply-shift, no
//!   rejection: the bias is below `(high − low) / 2^64`). float64 uniform is
//!   `(x >> 11) · 2^-53`. float64 normal uses both words of the block for one Box–Muller pair
//!   (`u1` from word pair 0, `u2` from pair 1, 53 bits each): element `2j` is the cosine and
//!   `2j + 1` the sine. These use `ceil(n / 2)` blocks.
//! - float16 outputs are float32 results cast to float16.
//!
//! Integers and the uniform draws themselves are bit-identical on every place. A uniform
//! float is `u·(max − min) + min`, which a GPU compiler may fuse into one multiply-add (one
//! rounding instead of two): the NVIDIA driver does, Mesa's lavapipe does not, so the two
//! places agree to one unit in the last place. Normal values agree up to the rounding of the
//! platform's `ln`, `sin` and `cos`; dropout masks (`u >= p`, no arithmetic) are identical.
//!
//! The random ops (`uniform`, `gaussian`, `randint`, `randperm`: `ops/random.rs`, and
//! `dropout`) draw from here; each call (eager, or each run of a program) reserves fresh
//! counter blocks.

use std::sync::Mutex;

use crate::backend::cpu::{CpuData, par_chunks_mut};
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel};
use crate::{DType, Result};

pub(crate) static RANDOM: Kernel = Kernel::single("random.wgsl");

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;
pub(crate) const TWO_NEG24: f32 = 1.0 / 16_777_216.0;
pub(crate) const TWO_NEG53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// The Philox4x32-10 block function (Random123's `philox4x32_10`): ten rounds of the
/// multiply–xor network over `counter`, bumping `key` by the Weyl constants between rounds.
/// Exposed so the generator can be checked against the published known-answer vectors.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)];
        }
        let p0 = PHILOX_M0 as u64 * c[0] as u64;
        let p1 = PHILOX_M1 as u64 * c[2] as u64;
        c = [(p1 >> 32) as u32 ^ c[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ c[3] ^ k[1], p0 as u32];
    }
    c
}

struct GeneratorState {
    seed: u64,
    offset: u64,
}

static GENERATOR: Mutex<Option<GeneratorState>> = Mutex::new(None);

thread_local! {
    /// A generator standing in for the global one on this thread (`with_private_generator`).
    static PRIVATE: std::cell::RefCell<Option<GeneratorState>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread drawing from a private generator at `(seed, offset)` instead of
/// the global one, which `f`'s draws leave untouched (the CPU shadow reruns a random op from
/// the state its GPU run started at this way); also returns the private state `f` left.
pub(crate) fn with_private_generator<R>(seed: u64, offset: u64, f: impl FnOnce() -> R) -> (R, (u64, u64)) {
    struct Restore(Option<GeneratorState>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            PRIVATE.with(|p| *p.borrow_mut() = outer);
        }
    }
    let outer = PRIVATE.with(|p| p.borrow_mut().replace(GeneratorState { seed, offset }));
    let restore = Restore(outer);
    let r = f();
    let after = PRIVATE.with(|p| p.borrow().as_ref().map(|g| (g.seed, g.offset))).unwrap_or((seed, offset));
    drop(restore);
    (r, after)
}

fn with_generator<R>(f: impl FnOnce(&mut GeneratorState) -> R) -> R {
    PRIVATE.with(|p| {
        let mut private = p.borrow_mut();
        if let Some(g) = private.as_mut() {
            return f(g);
        }
        drop(private);
        let mut guard = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
        let state = guard.get_or_insert_with(|| {
            use std::hash::BuildHasher;
            let seed = std::collections::hash_map::RandomState::new().hash_one(0x5EED_u64);
            GeneratorState { seed, offset: 0 }
        });
        f(state)
    })
}

/// Seeds the global generator and resets its offset (`paddle.seed`): every random op after
/// it produces the same numbers on every run and every place.
pub fn seed(s: u64) {
    with_generator(|g| {
        g.seed = s;
        g.offset = 0;
    });
}

/// The generator's `(seed, offset)`: the offset counts the Philox blocks handed out since
/// the last [`seed`]. Restore it with [`set_seed_offset`] to replay a sequence.
pub fn get_seed_offset() -> (u64, u64) {
    with_generator(|g| (g.seed, g.offset))
}

/// Restores a state saved by [`get_seed_offset`].
pub fn set_seed_offset(seed: u64, offset: u64) {
    with_generator(|g| {
        g.seed = seed;
        g.offset = offset;
    });
}

/// A reserved range of counter blocks of the global generator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    seed: u64,
    offset: u64,
}

impl Stream {
    /// Reserves `blocks` counter blocks.
    pub fn reserve(blocks: u64) -> Stream {
        with_generator(|g| {
            let s = Stream { seed: g.seed, offset: g.offset };
            g.offset = g.offset.wrapping_add(blocks);
            s
        })
    }

    /// Reserves the blocks for `n` elements drawing `per_block` elements from each block.
    pub fn for_elements(n: usize, per_block: usize) -> Stream {
        Stream::reserve(n.div_ceil(per_block) as u64)
    }

    /// The four words of block `j`.
    pub fn block(&self, j: u64) -> [u32; 4] {
        let b = self.offset.wrapping_add(j);
        philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], [self.seed as u32, (self.seed >> 32) as u32])
    }

    /// The 64-bit word of element `i` under the 64-bit layout.
    pub fn word64(&self, i: usize) -> u64 {
        let w = self.block((i / 2) as u64);
        let h = 2 * (i % 2);
        w[h] as u64 | (w[h + 1] as u64) << 32
    }

    /// `[n, seed_lo, seed_hi, offset_lo, offset_hi]`: the common head of the kernel params.
    pub(crate) fn params(&self, n: usize) -> Vec<u32> {
        vec![n as u32, self.seed as u32, (self.seed >> 32) as u32, self.offset as u32, (self.offset >> 32) as u32]
    }

    /// Fills `out[i] = f(block(i / per_block), i % per_block)`, computing each block once.
    pub(crate) fn fill<T: Send>(&self, out: &mut [T], per_block: usize, f: impl Fn(&[u32; 4], usize) -> T + Sync) {
        par_chunks_mut(out, 1 << 14, |start, chunk| {
            let mut current = u64::MAX;
            let mut words = [0u32; 4];
            for (k, o) in chunk.iter_mut().enumerate() {
                let i = start + k;
                let b = (i / per_block) as u64;
                if b != current {
                    words = self.block(b);
                    current = b;
                }
                *o = f(&words, i % per_block);
            }
        });
    }

    /// Runs `entry` of random.wgsl over the blocks of `n` elements of `dtype` into `out`
    /// (integer entries take 2 elements per block, float ones 4).
    pub(crate) fn dispatch(
        &self,
        ctx: &GpuContext,
        entry: &'static str,
        n: usize,
        dtype: DType,
        extra: &[u32],
        out: &GpuBuffer,
    ) -> Result<()> {
        let per_block = if dtype.is_int() { 2 } else { 4 };
        let mut params = self.params(n);
        params.extend_from_slice(extra);
        ctx.dispatch(&RANDOM, 0, entry, &[Bind::write(out)], &params, n.div_ceil(per_block) as u64)
    }
}

pub(crate) fn u64_of(w: &[u32; 4], h: usize) -> u64 {
    w[2 * h] as u64 | (w[2 * h + 1] as u64) << 32
}

pub(crate) fn box_muller_f32(a: u32, b: u32) -> (f32, f32) {
    let u1 = ((a >> 8) + 1) as f32 * TWO_NEG24;
    let u2 = (b >> 8) as f32 * TWO_NEG24;
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = std::f32::consts::TAU * (u2 - 0.5);
    (r * theta.cos(), r * theta.sin())
}

pub(crate) fn box_muller_f64(a: u64, b: u64) -> (f64, f64) {
    let u1 = ((a >> 11) + 1) as f64 * TWO_NEG53;
    let u2 = (b >> 11) as f64 * TWO_NEG53;
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = std::f64::consts::TAU * (u2 - 0.5);
    (r * theta.cos(), r * theta.sin())
}

/// `floor(x · range / 2^64)`: maps a uniform 64-bit word onto `[0, range)`.
pub(crate) fn below(x: u64, range: u64) -> u64 {
    ((x as u128 * range as u128) >> 64) as u64
}

/// `n` uniform draws in `[0, 1)` on the host from the global stream (53-bit resolution):
/// what the random image transforms use.
pub(crate) fn host_uniform(n: usize) -> Vec<f64> {
    let stream = Stream::for_elements(n, 2);
    (0..n).map(|i| (stream.word64(i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)).collect()
}

/// A permutation of `0..n` on the host (Fisher–Yates on the global Philox stream): what
/// `randperm` and shuffling data loaders draw.
pub(crate) fn permutation(n: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..n).collect();
    let draws = n.saturating_sub(1);
    let stream = Stream::for_elements(draws, 2);
    for k in 0..draws {
        let i = n - 1 - k;
        let j = below(stream.word64(k), (i + 1) as u64) as usize;
        perm.swap(i, j);
    }
    perm
}

/// Dropout's keep-mask threshold: element `i` is kept when its uniform draw
/// `(w >> 8) · 2^-24` (32-bit layout) is `>= p`; comparing the integer `w >> 8` against
/// `ceil(p · 2^24)` is exact and the same on every place.
fn keep_threshold(p: f64) -> u32 {
    (p * 16_777_216.0).ceil().clamp(0.0, 16_777_216.0) as u32
}

/// `n` mask values: `scale` where kept, else 0, from a fresh stream.
fn cpu_mask<T: Copy + Send + Sync + Default>(n: usize, p: f64, scale: T) -> Vec<T> {
    let threshold = keep_threshold(p);
    let stream = Stream::for_elements(n, 4);
    let mut out = vec![T::default(); n];
    stream.fill(&mut out, 4, |w, l| if (w[l] >> 8) >= threshold { scale } else { T::default() });
    out
}

/// Records the mask of `n` elements into `out` (float32).
pub(crate) fn gpu_mask(ctx: &GpuContext, n: usize, p: f64, scale: f64, out: &GpuBuffer) -> Result<()> {
    let stream = Stream::for_elements(n, 4);
    let extra = [keep_threshold(p), (scale as f32).to_bits()];
    stream.dispatch(ctx, "dropout_mask", n, DType::Float32, &extra, out)
}

/// Host mask data of `dtype` (float32 or float64).
pub(crate) fn cpu_mask_data(n: usize, p: f64, scale: f64, dtype: DType) -> CpuData {
    if dtype == DType::Float64 {
        CpuData::F64(cpu_mask(n, p, scale))
    } else {
        CpuData::F32(cpu_mask(n, p, scale as f32))
    }
}
