//! GPU memory limits: past `set_memory_limit`'s cap an allocation is a typed
//! `Error::DeviceLimit` (after the pool is emptied to make room), the same program then goes
//! on with smaller tensors, and a tensor over the device's own binding limit is refused the
//! same way, before anything is allocated.

use crate::common;

use dygraph::{self as paddle, DType, Error, Tensor};

const MIB: u64 = 1 << 20;

fn expect_limit(r: paddle::Result<Tensor>, what: &str) {
    match r {
        Err(Error::DeviceLimit { limit_name, .. }) => eprintln!("{what}: DeviceLimit ({limit_name})"),
        Err(other) => panic!("{what}: expected DeviceLimit, got {other}"),
        Ok(t) => panic!("{what}: allocated {:?}", t.shape()),
    }
}

#[test]
fn allocations_past_the_cap_fail_typed_and_the_program_goes_on() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let paddle::Place::Gpu(index) = gpu else { panic!("gpu_or_skip gave {gpu}") };
    paddle::sync().unwrap();
    paddle::empty_cache(index).unwrap();
    let base = paddle::memory_stats(index).unwrap().allocated;
    paddle::set_memory_limit(index, Some(base + 16 * MIB)).unwrap();
    let result = std::panic::catch_unwind(|| {
        paddle::guard(gpu, || {
            let mib = |n: usize| paddle::full([n * (MIB as usize) / 4], 1.0, DType::Float32);
            let a = mib(8).unwrap();
            let b = mib(8).unwrap();
            expect_limit(mib(4), "4 MiB past a full 16 MiB cap");
            drop(b);
            // The freed 8 MiB sit in the pool; the cap empties it and the 4 MiB fit.
            let c = mib(4).unwrap();
            expect_limit(a.add_scalar(1.0), "an op whose 8 MiB output passes the cap");
            drop(c);
            let d = a.add_scalar(1.0).unwrap();
            // 16 MiB in use: even a 256-byte result needs one of them back.
            expect_limit(d.sum(&[], false), "a 256-byte sum at the cap");
            drop(a);
            assert_eq!(d.sum(&[], false).unwrap().item::<f32>().unwrap(), 2.0 * (2 * MIB) as f32);
            // A tensor over the device's own binding limit is refused before allocating.
            let limits = paddle::gpu_info(index).unwrap();
            eprintln!("device: {}", limits.name);
            expect_limit(paddle::full([1usize << 31], 0.0, DType::Float32), "an 8 GiB tensor");
            let small = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]).unwrap();
            assert_eq!(small.square().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 4.0, 9.0]);
        })
    });
    paddle::set_memory_limit(index, None).unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
