//! Parallel work over the chunks of a new output: the builders behind the CPU kernels'
//! outputs, and per-worker scratch buffers kept between calls.
//!
//! A convolution's workers each need an im2col buffer (MNIST: 57–563 KiB; a large layer's
//! can reach tens of MiB). Handing every rayon job a fresh copy of one buffer cost the
//! 2-core MNIST step about 6% (a memcpy per job split); each thread now keeps its largest
//! buffer up to [`KEEP_BYTES`] per float type and lends it to the next job it runs (larger
//! ones are allocated per job and freed). Scratch contents are unspecified: every user
//! overwrites what it reads.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::thread::LocalKey;

/// Largest scratch buffer a thread keeps after a call (bytes); larger ones are freed.
const KEEP_BYTES: usize = 4 << 20;

/// A float type with a per-thread cache of one scratch buffer.
pub(crate) trait CachedScratch: Copy + Default + 'static {
    fn cache() -> &'static LocalKey<RefCell<Vec<Self>>>;
}

macro_rules! cached_scratch {
    ($t:ty) => {
        impl CachedScratch for $t {
            fn cache() -> &'static LocalKey<RefCell<Vec<Self>>> {
                thread_local! {
                    static CACHE: RefCell<Vec<$t>> = const { RefCell::new(Vec::new()) };
                }
                &CACHE
            }
        }
    };
}
cached_scratch!(f32);
cached_scratch!(f64);

/// A scratch buffer of `len` elements borrowed from the current thread's cache (or newly
/// allocated), returned to the cache of the thread that drops it.
pub(crate) struct Scratch<T: CachedScratch> {
    buf: Vec<T>,
    len: usize,
}

impl<T: CachedScratch> Scratch<T> {
    pub fn take(len: usize) -> Self {
        if len == 0 {
            return Scratch { buf: Vec::new(), len };
        }
        let cached = T::cache().try_with(|c| std::mem::take(&mut *c.borrow_mut())).unwrap_or_default();
        if cached.len() >= len {
            return Scratch { buf: cached, len };
        }
        // Too small: it stays cached (a larger request over KEEP_BYTES must not cost the
        // thread the buffer its usual jobs fit in).
        let _ = T::cache().try_with(|c| *c.borrow_mut() = cached);
        Scratch { buf: vec![T::default(); len], len }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.buf[..self.len]
    }
}

impl<T: CachedScratch> Drop for Scratch<T> {
    fn drop(&mut self) {
        let bytes = self.buf.len() * std::mem::size_of::<T>();
        if bytes == 0 || bytes > KEEP_BYTES {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        // A thread being torn down has no cache left: the buffer is simply freed.
        let _ = T::cache().try_with(|c| {
            let mut c = c.borrow_mut();
            if buf.len() > c.len() {
                *c = buf;
            }
        });
    }
}

/// A vector of `len` elements built in `per`-sized chunks (items) by `f(item, chunk,
/// scratch)`, each chunk zeroed (`T::default()`) first, in parallel on native targets. `scratch` holds
/// `scratch_len` elements of unspecified contents, reused across the items one worker
/// handles.
pub(crate) fn zeroed_items<T: CachedScratch + Send + Sync>(
    len: usize,
    per: usize,
    scratch_len: usize,
    f: impl Fn(usize, &mut [T], &mut [T]) + Sync,
) -> Vec<T> {
    build_chunks(
        len,
        T::default(),
        per,
        || Scratch::<T>::take(scratch_len),
        |i, chunk, s| f(i, chunk, s.as_mut_slice()),
    )
}

/// A vector of `len` elements made in `per`-sized chunks: each chunk is set to `init` by
/// the worker that then runs `f(chunk_index, chunk, state)` on it, `state` coming from
/// `make` once per rayon job. Filling the whole vector up front (`vec![init; len]`) ran on
/// the calling thread alone while the other cores waited, and left the output cold in
/// cache: on the 2-core MNIST step, the largest serial part left. One chunk runs on the
/// calling thread; more run in parallel on native targets, in order on wasm.
pub(crate) fn build_chunks<T: Copy + Send + Sync, S>(
    len: usize,
    init: T,
    per: usize,
    make: impl Fn() -> S + Sync + Send,
    f: impl Fn(usize, &mut [T], &mut S) + Sync,
) -> Vec<T> {
    // A second output of `()` takes no memory and no work.
    build_chunk_pairs(len, (init, ()), per, make, |i, a, _, s| f(i, a, s)).0
}

/// Two vectors of `len` elements made together in matching `per`-sized chunks, as
/// [`build_chunks`] makes one: `f(chunk_index, a_chunk, b_chunk, state)` (a kernel with two
/// outputs, such as max pooling's values and indices).
pub(crate) fn build_chunk_pairs<A: Copy + Send + Sync, B: Copy + Send + Sync, S>(
    len: usize,
    (init_a, init_b): (A, B),
    per: usize,
    make: impl Fn() -> S + Sync + Send,
    f: impl Fn(usize, &mut [A], &mut [B], &mut S) + Sync,
) -> (Vec<A>, Vec<B>) {
    if per == 0 || len <= per {
        let (mut a, mut b) = (vec![init_a; len], vec![init_b; len]);
        if per > 0 && len > 0 {
            f(0, &mut a, &mut b, &mut make());
        }
        return (a, b);
    }
    let (mut a, mut b): (Vec<A>, Vec<B>) = (Vec::with_capacity(len), Vec::with_capacity(len));
    let fill = |i: usize, ca: &mut [MaybeUninit<A>], cb: &mut [MaybeUninit<B>], state: &mut S| {
        ca.fill(MaybeUninit::new(init_a));
        cb.fill(MaybeUninit::new(init_b));
        // SAFETY: every element of both chunks was initialised just above, and
        // `MaybeUninit<T>` has the layout of `T`.
        let (ca, cb) = unsafe { (&mut *(ca as *mut [_] as *mut [A]), &mut *(cb as *mut [_] as *mut [B])) };
        f(i, ca, cb, state);
    };
    let (sa, sb) = (&mut a.spare_capacity_mut()[..len], &mut b.spare_capacity_mut()[..len]);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        sa.par_chunks_mut(per)
            .zip(sb.par_chunks_mut(per))
            .enumerate()
            .for_each_init(make, |s, (i, (ca, cb))| fill(i, ca, cb, s));
    }
    #[cfg(target_arch = "wasm32")]
    {
        let mut s = make();
        for (i, (ca, cb)) in sa.chunks_mut(per).zip(sb.chunks_mut(per)).enumerate() {
            fill(i, ca, cb, &mut s);
        }
    }
    // SAFETY: the chunks cover `0..len` of both and each was initialised (a panic in `f`
    // unwinds past this line, dropping both with length 0).
    unsafe {
        a.set_len(len);
        b.set_len(len);
    }
    (a, b)
}

/// `let mut v = vec![init; n]; par_chunks_mut(&mut v, min_chunk, f); v` (`super::par_chunks_mut`),
/// with each chunk set to `init` by the worker that runs `f` on it (see [`build_chunks`]), and
/// no call of `f` for `n == 0`.
pub(crate) fn par_chunks_new<T: Copy + Send + Sync>(
    n: usize,
    init: T,
    min_chunk: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) -> Vec<T> {
    #[cfg(not(target_arch = "wasm32"))]
    let chunk = if n <= min_chunk { n } else { n.div_ceil(rayon::current_num_threads() * 4).max(min_chunk) };
    #[cfg(target_arch = "wasm32")]
    let chunk = {
        let _ = min_chunk;
        n
    };
    build_chunks(n, init, chunk.max(1), || (), |i, c, _| f(i * chunk, c))
}

/// A vector of `n` elements cut into whole blocks of `block` elements (rows of a row-wise
/// kernel), built by `f(first_block, blocks)` several blocks per task, each task's blocks set
/// to `init` by the worker that runs `f` on them (see [`build_chunks`]).
pub(crate) fn par_blocks_new<T: Copy + Send + Sync>(
    n: usize,
    init: T,
    block: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) -> Vec<T> {
    let block = block.max(1);
    #[cfg(not(target_arch = "wasm32"))]
    let per_task = ((1 << 14) / block).max(1);
    #[cfg(target_arch = "wasm32")]
    let per_task = n.div_ceil(block).max(1);
    build_chunks(n, init, block * per_task, || (), |i, c, _| f(i * per_task, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element is set once by `f`, chunk indices and boundaries match `chunks_mut`, and
    /// `init` is what `f` sees before it writes, for lengths around the chunk size.
    #[test]
    fn build_chunks_covers_every_element_once() {
        for per in [1usize, 3, 7, 64] {
            for len in [0usize, 1, 2, 6, 7, 8, 63, 64, 65, 1000] {
                let out = build_chunks(
                    len,
                    -1i64,
                    per,
                    || (),
                    |i, chunk, _| {
                        for (k, v) in chunk.iter_mut().enumerate() {
                            assert_eq!(*v, -1, "len {len}, per {per}: chunk {i} was not initialised");
                            *v = (i * per + k) as i64;
                        }
                    },
                );
                let want: Vec<i64> = (0..len as i64).collect();
                assert_eq!(out, want, "len {len}, per {per}");
            }
        }
        assert_eq!(build_chunks(5, 2.5f32, 0, || (), |_, _, _| panic!("no chunks of size 0")), vec![2.5; 5]);
    }

    /// A kept buffer is lent again: it may hold old values, never fewer elements than asked;
    /// one over `KEEP_BYTES` is freed and leaves the cached one in place.
    #[test]
    fn scratch_is_reused_and_sized() {
        let mut a = Scratch::<f32>::take(100);
        a.as_mut_slice().fill(7.0);
        drop(a);
        let mut b = Scratch::<f32>::take(50);
        assert_eq!(b.as_mut_slice().len(), 50);
        assert!(b.as_mut_slice().iter().all(|&v| v == 7.0), "the 100-element buffer was not lent again");
        let mut c = Scratch::<f32>::take(200);
        assert_eq!(c.as_mut_slice().len(), 200);
        drop((b, c));
        let too_big = KEEP_BYTES / 4 + 1;
        drop(Scratch::<f32>::take(too_big));
        let kept = f32::cache().with(|c| c.borrow().len());
        assert_eq!(kept, 200, "a request over KEEP_BYTES must neither be kept nor evict the cached buffer");
    }
}
