//! The GPU runtime under the ops: the buffer pool and its counters, empty_cache, sync, the
//! recorder's batching (> 512 dispatches per batch bound, small uploads through the arena,
//! large uploads that flush first), buffer reuse inside one batch, and 2-D dispatch grids.

use crate::common;

use std::sync::{Mutex, MutexGuard};

use common::{Rng, gpu_or_skip, values};
use dygraph::{DType, Place, Tensor};

/// The memory counters are per device: every test here holds this lock so no other test
/// of this binary allocates while one is counting.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn upload(v: &[f32], shape: &[usize], g: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, g).unwrap()
}

#[test]
fn prints_the_adapter() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(_) = gpu_or_skip() else { return };
    let info = dygraph::gpu_info(0).unwrap();
    println!(
        "gpu:0 = {} | backend {} | type {} | driver {} | max binding {} bytes | {} storage buffers per stage | {} adapter(s)",
        info.name,
        info.backend,
        info.device_type,
        info.driver,
        info.max_binding_bytes,
        info.max_storage_buffers_per_stage,
        dygraph::gpu_count()
    );
    assert!(!info.name.is_empty() && !info.backend.is_empty() && !info.device_type.is_empty());
    assert!(info.max_binding_bytes >= 1 << 27, "WebGPU guarantees 128 MiB bindings: {}", info.max_binding_bytes);
    assert!(info.max_storage_buffers_per_stage >= 8, "WebGPU guarantees 8 storage buffers: {info:?}");
    assert!(dygraph::gpu_count() >= 1);
    println!("gpu:0 float16 arithmetic: {} | subgroup sizes: {:?}", info.shader_f16, info.subgroup_sizes);
    // What the device reports is what its kernels may use: a float16 kernel and a subgroup
    // kernel compile exactly when the matching feature is reported.
    let f16 = "enable f16;\n@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
               @compute @workgroup_size(1) fn main() { let h = f16(1.5) * f16(2.0); out[0] = f32(h); }";
    let compiled = dygraph::testing::gpu_compiles(0, f16).unwrap();
    assert_eq!(
        compiled.is_ok(),
        info.shader_f16,
        "float16 kernel on a device reporting {}: {compiled:?}",
        info.shader_f16
    );
    // Naga takes the subgroup built-ins without WGSL's `enable subgroups;` (not parsed yet).
    let subgroup = "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
                    @compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) \
                    { out[i] = subgroupAdd(f32(i)); }";
    let compiled = dygraph::testing::gpu_compiles(0, subgroup).unwrap();
    assert_eq!(compiled.is_ok(), info.subgroup_sizes.is_some(), "subgroup kernel: {compiled:?}");
    if let Some((min, max)) = info.subgroup_sizes {
        assert!(min <= max && min.is_power_of_two() && max.is_power_of_two() && (4..=128).contains(&min), "{info:?}");
    }
    if info.name.contains("llvmpipe") {
        // Mesa's lavapipe has shaderFloat16 and 8-wide subgroups.
        assert!(info.shader_f16 && info.subgroup_sizes == Some((8, 8)), "lavapipe reports {info:?}");
    }
    let again = pollster::block_on(dygraph::init_gpu()).unwrap();
    assert_eq!(again.name, info.name, "init_gpu opens the same adapter");
}

#[test]
fn memory_counters_follow_allocations() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    dygraph::sync().unwrap();
    dygraph::empty_cache(0).unwrap();
    let s0 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s0.pooled, 0, "empty_cache leaves nothing pooled");

    // 1000 float32 = 4000 bytes: the 4096-byte size class.
    let t = dygraph::zeros_on([1000], DType::Float32, g).unwrap();
    let s1 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s1.allocated, s0.allocated + 4096, "allocated goes up by the size class");
    assert_eq!(s1.buffers_created, s0.buffers_created + 1);
    assert!(s1.peak_allocated >= s1.allocated);

    drop(t);
    let s2 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s2.allocated, s0.allocated, "allocated comes back down when the tensor drops");
    assert_eq!(s2.pooled, 4096, "the buffer went to the pool");
    assert_eq!(s2.peak_allocated, s1.peak_allocated);

    let t = dygraph::ones_on([1000], DType::Float32, g).unwrap();
    let s3 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s3.pool_hits, s2.pool_hits + 1, "the same size class is served from the pool");
    assert_eq!(s3.buffers_created, s2.buffers_created, "no new buffer");
    assert_eq!((s3.pooled, s3.allocated), (0, s1.allocated));
    assert_eq!(values(&t), vec![1.0; 1000], "a reused buffer holds the new values");

    // A different size class is a new buffer; the pooled one stays for later.
    let u = dygraph::zeros_on([10_000], DType::Float32, g).unwrap();
    drop(t);
    let s4 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s4.buffers_created, s3.buffers_created + 1);
    assert_eq!(s4.pooled, 4096);
    assert!(s4.allocated >= s0.allocated + 40_000);

    // empty_cache frees the pool but not live tensors.
    dygraph::empty_cache(0).unwrap();
    let s5 = dygraph::memory_stats(0).unwrap();
    assert_eq!((s5.pooled, s5.allocated), (0, s4.allocated));
    dygraph::reset_peak_memory(0).unwrap();
    let s6 = dygraph::memory_stats(0).unwrap();
    assert_eq!(s6.peak_allocated, s6.allocated, "reset_peak_memory");
    assert_eq!(u.to_vec::<f32>().unwrap()[9_999], 0.0);
    drop(u);
    assert_eq!(dygraph::memory_stats(0).unwrap().allocated, s0.allocated);

    // Steady state: a loop of same-sized temporaries creates no new buffers.
    let x = dygraph::ones_on([4096], DType::Float32, g).unwrap();
    let mut y = x.clone();
    for _ in 0..3 {
        y = y.add(&x).unwrap().scale(0.5, 0.0).unwrap();
    }
    let warm = dygraph::memory_stats(0).unwrap();
    for _ in 0..50 {
        y = y.add(&x).unwrap().scale(0.5, 0.0).unwrap();
    }
    let after = dygraph::memory_stats(0).unwrap();
    assert_eq!(after.buffers_created, warm.buffers_created, "the pool serves every temporary");
    assert!(after.pool_hits >= warm.pool_hits + 100);
    assert_eq!(values(&y), vec![1.0; 4096]);
}

#[test]
fn sync_and_long_dispatch_chains() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    dygraph::sync().unwrap();
    // About 830 kernels without a readback: crosses the 512-dispatch batch bound, with every
    // intermediate freed and its buffer reused inside the batch.
    let mut rng = Rng::new(1);
    let v: Vec<f32> = rng.vec(777, -1.0, 1.0).into_iter().map(|x| x as f32).collect();
    let w: Vec<f32> = rng.vec(777, 0.5, 1.5).into_iter().map(|x| x as f32).collect();
    let run = |place: Place| {
        let a = upload(&v, &[777], place);
        let b = upload(&w, &[777], place);
        let mut x = a.clone();
        for i in 0..500 {
            x = match i % 3 {
                0 => x.add(&b).unwrap(),
                1 => x.mul(&b).unwrap().scale(0.5, 0.0).unwrap(),
                _ => x.sub(&a).unwrap().tanh().unwrap(),
            };
        }
        x
    };
    let d = run(g);
    dygraph::sync().unwrap();
    let c = run(Place::Cpu);
    common::assert_close("830-kernel chain GPU vs CPU", &values(&d), &values(&c), 1e-5);

    // An exact count: 2000 increments, four batches' worth of dispatches.
    let mut x = dygraph::zeros_on([3], DType::Int64, g).unwrap();
    for _ in 0..2000 {
        x = &x + 1;
    }
    assert_eq!(x.to_vec::<i64>().unwrap(), [2000, 2000, 2000]);
    dygraph::sync().unwrap();
    dygraph::sync().unwrap();
}

#[test]
fn uploads_large_and_small_interleaved_with_kernels() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    // A large upload (> 256 KiB) goes straight to the queue after flushing pending work.
    let n = 300_000;
    let big: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 - 500.0).collect();
    let t = upload(&big, &[n], g);
    assert_eq!(t.to_vec::<f32>().unwrap(), big, "large upload round trip");

    // Many small uploads interleaved with kernels, no readback until the end.
    let mut acc = dygraph::zeros_on([64], DType::Float32, g).unwrap();
    let mut expected = vec![0.0f32; 64];
    for i in 0..400 {
        let v: Vec<f32> = (0..64).map(|j| ((i * 64 + j) % 97) as f32).collect();
        acc = acc.add(&upload(&v, &[64], g)).unwrap();
        for (e, x) in expected.iter_mut().zip(&v) {
            *e += x;
        }
        if i % 50 == 0 {
            // A large upload in the middle of the stream.
            let l = upload(&big, &[n], g);
            let s = i as i64;
            acc = acc.add(&l.slice(&[0], &[s], &[s + 64]).unwrap()).unwrap();
            for (j, e) in expected.iter_mut().enumerate() {
                *e += big[i + j];
            }
        }
    }
    assert_eq!(acc.to_vec::<f32>().unwrap(), expected);
}

#[test]
fn freed_buffers_reused_while_their_readers_are_pending() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    // A kernel reads `a`; `a` is dropped and its buffer handed to the next upload of the
    // same size class before anything is submitted. The kernel must still see the old data,
    // for small (arena) and large (direct queue write) uploads alike.
    for &n in &[100usize, 70_000, 100_000] {
        let mut outs = Vec::new();
        let mut news = Vec::new();
        for k in 0..20 {
            let old: Vec<f32> = (0..n).map(|i| (i + k) as f32).collect();
            let a = upload(&old, &[n], g);
            outs.push((k, a.scale(2.0, 0.0).unwrap()));
            drop(a);
            let fresh: Vec<f32> = (0..n).map(|i| -((i * 3 + k) as f32)).collect();
            news.push((k, upload(&fresh, &[n], g)));
        }
        for (k, o) in outs {
            let v = o.to_vec::<f32>().unwrap();
            assert!(
                v.iter().enumerate().all(|(i, &x)| x == 2.0 * (i + k) as f32),
                "n = {n}, step {k}: kernel saw overwritten input"
            );
        }
        for (k, t) in news {
            let v = t.to_vec::<f32>().unwrap();
            assert!(v.iter().enumerate().all(|(i, &x)| x == -((i * 3 + k) as f32)), "n = {n}, step {k}: upload lost");
        }
    }
}

#[test]
fn buffer_reuse_within_one_batch() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    // create, compute, drop, create again in a loop; read everything back at the end.
    let mut kept = Vec::new();
    for i in 0..300 {
        let t = dygraph::full_on([513], i as f64, DType::Float32, g).unwrap();
        let u = t.scale(2.0, 1.0).unwrap();
        drop(t);
        let w = dygraph::full_on([513], -(i as f64), DType::Float32, g).unwrap();
        let r = u.add(&w).unwrap();
        drop((u, w));
        if i % 7 == 0 {
            kept.push((i, r));
        }
    }
    for (i, r) in kept {
        assert_eq!(values(&r), vec![(i + 1) as f64; 513], "iteration {i}");
    }
    // The same with int64 and float16 (two words and half a word per element).
    let mut kept = Vec::new();
    for i in 0..100i64 {
        let t = dygraph::full_on([33], i << 33, DType::Int64, g).unwrap();
        let h = dygraph::full_on([33], i as f64, DType::Float16, g).unwrap();
        let s = (&t + 5).add(&h.cast(DType::Int64).unwrap()).unwrap();
        drop((t, h));
        kept.push((i, s));
    }
    for (i, s) in kept {
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![(i << 33) + 5 + i; 33]);
    }
}

#[test]
fn dispatch_grids_past_the_per_dimension_limit() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    // More than 65535 workgroups of 256: the 1-D kernels run on a 2-D grid.
    let n = 4097 * 4097;
    assert!(n > 65_535 * 256);
    let v: Vec<f32> = (0..n).map(|i| (i % 65_521) as f32).collect();
    let x = upload(&v, &[n], g);
    let y = x.scale(1.0, 1.0).unwrap().to_vec::<f32>().unwrap();
    let bad = y.iter().zip(&v).position(|(a, b)| *a != b + 1.0);
    assert_eq!(bad, None, "element {bad:?} of the 2-D grid dispatch is wrong");
    drop(y);
    let s = x.reshape([n / 4097, 4097]).unwrap().max(&[1], false).unwrap();
    assert_eq!(s.shape(), [n / 4097]);
    let m = x.sum(&[], false).unwrap().item::<f32>().unwrap() as f64;
    let exact: f64 = v.iter().map(|&a| a as f64).sum();
    assert!((m - exact).abs() / exact < 1e-5, "sum of {n} elements: {m} vs {exact}");
    drop(x);
    dygraph::empty_cache(0).unwrap();
}

#[test]
fn async_readback() {
    let _exclusive = crate::exclusive();
    let _s = serial();
    let Some(g) = gpu_or_skip() else { return };
    let x = upload(&[1.0, 2.0, 3.0], &[3], g).exp().unwrap();
    let v = pollster::block_on(x.to_vec_async::<f32>()).unwrap();
    common::assert_close(
        "async exp",
        &v.iter().map(|&a| a as f64).collect::<Vec<_>>(),
        &[1f64.exp(), 2f64.exp(), 3f64.exp()],
        1e-6,
    );
    let e = upload(&[], &[0], g);
    assert!(pollster::block_on(e.to_vec_async::<f32>()).unwrap().is_empty());
}
