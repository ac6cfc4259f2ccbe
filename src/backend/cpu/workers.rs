//! Parallel work over the chunks of a new output: the builders behind the CPU kernels'
//! outputs, and per-worker scratch buffers kept between calls.
//!
//! A convolution's workers each need an im2col buffer (up to a few MiB). Handing every
//! rayon job a fresh copy of one buffer cost the 2-core MNIST step about 6% (a memcpy per
//! job split); each thread now keeps its largest buffer up to [`KEEP_BYTES`] and lends it to
//! the next job it runs. Scratch contents are unspecified: every user overwrites what it
//! reads.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::thread::LocalKey;

use super::conv::WinFloat;

/// Largest scratch buffer a thread keeps after a call (bytes); larger ones are freed.
const KEEP_BYTES: usize = 4 << 20;

/// A float type with a per-thread cache of one scratch buffer.
pub(crate) trait CachedScratch: Sized + 'static {
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
pub(crate) struct Scratch<T: WinFloat> {
    buf: Vec<T>,
    len: usize,
}

impl<T: WinFloat> Scratch<T> {
    pub fn take(len: usize) -> Self {
        if len == 0 {
            return Scratch { buf: Vec::new(), len };
        }
        let mut buf = T::cache().try_with(|c| std::mem::take(&mut *c.borrow_mut())).unwrap_or_default();
        if buf.len() < len {
            buf = vec![T::ZERO; len];
        }
        Scratch { buf, len }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.buf[..self.len]
    }
}

impl<T: WinFloat> Drop for Scratch<T> {
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
/// scratch)`, each chunk zeroed first, in parallel on native targets. `scratch` holds
/// `scratch_len` elements of unspecified contents, reused across the items one worker
/// handles.
pub(crate) fn zeroed_items<T: WinFloat>(
    len: usize,
    per: usize,
    scratch_len: usize,
    f: impl Fn(usize, &mut [T], &mut [T]) + Sync,
) -> Vec<T> {
    build_chunks(len, T::ZERO, per, || Scratch::<T>::take(scratch_len), |i, chunk, s| f(i, chunk, s.as_mut_slice()))
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
    if per == 0 || len <= per {
        let mut out = vec![init; len];
        if per > 0 && len > 0 {
            f(0, &mut out, &mut make());
        }
        return out;
    }
    let mut out: Vec<T> = Vec::with_capacity(len);
    let fill = |i: usize, chunk: &mut [MaybeUninit<T>], state: &mut S| {
        chunk.fill(MaybeUninit::new(init));
        // SAFETY: every element of `chunk` was initialised just above, and `MaybeUninit<T>`
        // has the layout of `T`.
        let chunk = unsafe { &mut *(chunk as *mut [MaybeUninit<T>] as *mut [T]) };
        f(i, chunk, state);
    };
    let spare = &mut out.spare_capacity_mut()[..len];
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        spare.par_chunks_mut(per).enumerate().for_each_init(make, |s, (i, chunk)| fill(i, chunk, s));
    }
    #[cfg(target_arch = "wasm32")]
    {
        let mut s = make();
        for (i, chunk) in spare.chunks_mut(per).enumerate() {
            fill(i, chunk, &mut s);
        }
    }
    // SAFETY: the chunks cover `0..len` and each was initialised (a panic in `f` unwinds
    // past this line, dropping `out` with length 0).
    unsafe { out.set_len(len) };
    out
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

    /// A kept buffer is lent again: it may hold old values, never fewer elements than asked.
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
        assert!(f32::cache().with(|c| c.borrow().len()) < too_big, "a buffer over KEEP_BYTES was kept");
    }
}
