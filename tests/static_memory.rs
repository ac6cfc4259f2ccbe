//! The Executor frees each intermediate value after its last reader: a chain of twenty
//! 1 MiB ops peaks at a few live buffers, not twenty, interpreted; and a plan's buffers
//! (assigned by liveness when it is captured) hold a few, not twenty. Alone in its test binary, because the
//! GPU memory statistics are per device and other tests would share them.

mod common;

use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Tensor};

#[test]
fn intermediates_are_freed_after_their_last_use() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    const N: usize = 256 * 1024; // 1 MiB of float32
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let mut h = st::data("x", &[N as i64], DType::Float32).unwrap();
        for k in 0..20 {
            h = h.scale(1.0, k as f64).unwrap();
        }
        h
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    exe.set_plans(false);
    exe.set_fusion(false);
    let x = Tensor::from_vec_on(vec![0.0f32; N], [N], gpu).unwrap();
    paddle::sync().unwrap();
    dygraph::reset_peak_memory(0).unwrap();
    let base = dygraph::memory_stats(0).unwrap().allocated;
    let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
    paddle::sync().unwrap();
    let peak = dygraph::memory_stats(0).unwrap().peak_allocated - base;
    let mib = 1u64 << 20;
    eprintln!("20 chained 1 MiB ops: peak {:.2} MiB above the input", peak as f64 / mib as f64);
    assert!(peak <= 3 * mib, "peak {peak} bytes: intermediates were kept alive");
    assert_eq!(out[0].to_vec::<f32>().unwrap()[0], (0..20).sum::<i32>() as f32);

    exe.set_plans(true);
    for _ in 0..3 {
        let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap()[0], (0..20).sum::<i32>() as f32);
    }
    let info = exe.last_plan().expect("the chain follows a plan");
    eprintln!("planned: {info:?}");
    assert_eq!(info.dispatches, 20);
    // The pinned feed and two buffers the twenty ops alternate between.
    assert!(info.buffer_bytes <= 3 * mib + mib / 4, "the plan holds {} bytes", info.buffer_bytes);

    // Fused, the chain is one kernel: the plan holds the pinned feed and the result.
    exe.set_fusion(true);
    for _ in 0..2 {
        let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap()[0], (0..20).sum::<i32>() as f32);
    }
    let info = exe.last_plan().expect("the fused chain follows a plan");
    eprintln!("planned and fused: {info:?}");
    assert_eq!((info.dispatches, info.ops), (1, 1));
    assert!(info.buffer_bytes <= 2 * mib + mib / 4, "the plan holds {} bytes", info.buffer_bytes);
}
