//! The row kernels' workgroup reductions by both paths: subgroup operations (where the device
//! has `SUBGROUP` and `FLAGS_use_subgroups` is on) and tree reductions in workgroup memory.
//! softmax, log_softmax, layer norm and batch norm, forward and gradients, and the row
//! reductions (float32, int64, max) agree between the two and with the CPU, and the profiler sees which form ran (bit 31 of a kernel's variant
//! key). The flag is process-wide, so these tests run in the exclusive binary.

use crate::common;

use common::{Rng, check_allclose, values};
use dygraph::profiler::Profiler;
use dygraph::{self as paddle, DType, Place, Tensor};

/// Bit 31 of a variant key: the kernel's subgroup form.
const SUBGROUP_FORM: u32 = 1 << 31;

/// Turns subgroups back on when a test ends, however it ends.
struct SubgroupsAgain;

impl Drop for SubgroupsAgain {
    fn drop(&mut self) {
        paddle::set_flags(&[("FLAGS_use_subgroups", "1")]).unwrap();
    }
}

/// The outputs and gradients of the row ops on `place`, with the subgroup-form and plain
/// dispatches of their reduction kernels (GPU only).
fn row_ops(seed: u64, place: Place) -> (Vec<(&'static str, Vec<f64>)>, [u64; 2]) {
    let mut rng = Rng::new(seed);
    // Few long rows: one workgroup per row on every adapter, cached (≤ 1,024) and not.
    let mut leaf = |shape: &[usize]| {
        let t = common::tensor(&rng.vec(shape.iter().product(), -2.0, 2.0), shape, DType::Float32, place);
        t.set_stop_gradient(false);
        t
    };
    let (short, long) = (leaf(&[3, 700]), leaf(&[2, 2100]));
    let (w, b) = (leaf(&[700]), leaf(&[700]));
    let image = leaf(&[4, 3, 20, 20]);
    let p = (place.is_gpu()).then(|| {
        paddle::sync().unwrap();
        Profiler::start(place).unwrap()
    });
    let sm = paddle::softmax(&short, -1).unwrap();
    let lsm = paddle::log_softmax(&long, -1).unwrap();
    let ln = paddle::layer_norm(&short, &[700], Some(&w), Some(&b), 1e-5).unwrap();
    let ln_long = paddle::layer_norm(&long, &[2100], None, None, 1e-5).unwrap();
    let (mean, var) =
        (paddle::zeros_on([3], DType::Float32, place).unwrap(), paddle::ones_on([3], DType::Float32, place).unwrap());
    let opts = paddle::BatchNormOptions { training: true, ..Default::default() };
    let bn = paddle::batch_norm(&image, &mean, &var, None, None, &opts).unwrap();
    // Row reductions: float32, int64 (emulated 64-bit words) and a max.
    let sum = long.sum(&[1], false).unwrap();
    let ints: Vec<f64> = (0..4200).map(|i| ((i * 37) % 1001) as f64 - 500.0).collect();
    let int_sum = common::tensor(&ints, &[2, 2100], DType::Int64, place).sum(&[1], false).unwrap();
    let row_max = short.max(&[1], false).unwrap();
    let weights = |t: &Tensor, k: f64| {
        let n = t.numel();
        common::tensor(
            &(0..n).map(|i| ((i % 7) as f64 - 3.0) * k).collect::<Vec<_>>(),
            t.shape(),
            DType::Float32,
            place,
        )
    };
    let total = [(&sm, 1.0), (&lsm, 0.1), (&ln, 0.5), (&ln_long, 0.3), (&bn, 0.2)]
        .iter()
        .map(|(t, k)| (*t * &weights(t, *k)).sum(&[], false).unwrap())
        .reduce(|a, b| a.add(&b).unwrap())
        .unwrap();
    total.backward().unwrap();
    let forms = p.map_or([0, 0], |p| {
        let summary = p.stop().unwrap();
        let mut forms = [0, 0];
        for file in [
            "softmax.wgsl",
            "softmax_grad.wgsl",
            "layer_norm.wgsl",
            "layer_norm_grad.wgsl",
            "batch_norm.wgsl",
            "reduce.wgsl",
        ] {
            for k in summary.shader(file) {
                forms[usize::from(k.variant & SUBGROUP_FORM == 0)] += k.calls;
            }
        }
        forms
    });
    let grad = |t: &Tensor| values(&t.grad().unwrap());
    let out = vec![
        ("softmax", values(&sm)),
        ("log_softmax", values(&lsm)),
        ("layer_norm", values(&ln)),
        ("layer_norm (2100)", values(&ln_long)),
        ("batch_norm", values(&bn)),
        ("running_var", values(&var)),
        ("sum", values(&sum)),
        ("int64 sum", values(&int_sum)),
        ("max", values(&row_max)),
        ("d short", grad(&short)),
        ("d long", grad(&long)),
        ("d weight", grad(&w)),
        ("d bias", grad(&b)),
        ("d image", grad(&image)),
    ];
    (out, forms)
}

#[test]
fn row_reductions_agree_with_and_without_subgroups() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = SubgroupsAgain;
    let sizes = paddle::gpu_info(0).unwrap().subgroup_sizes;
    let seed = common::run_seed();
    paddle::set_flags(&[("FLAGS_use_subgroups", "1")]).unwrap();
    let (with, forms_on) = row_ops(seed, gpu);
    paddle::set_flags(&[("FLAGS_use_subgroups", "0")]).unwrap();
    let (without, forms_off) = row_ops(seed, gpu);
    let (cpu, _) = row_ops(seed, Place::Cpu);
    for (((name, a), (_, b)), (_, c)) in with.iter().zip(&without).zip(&cpu) {
        let what = format!("{name} (seed {seed}, subgroup sizes {sizes:?})");
        check_allclose(&format!("{what}: subgroups vs tree"), a, b, 1e-5, 1e-4).unwrap();
        check_allclose(&format!("{what}: subgroups vs CPU"), a, c, 1e-5, 1e-4).unwrap();
    }
    // [subgroup-form dispatches, plain ones] of the row kernels.
    assert_eq!(forms_off[0], 0, "FLAGS_use_subgroups off ran a subgroup form: {forms_off:?}");
    assert!(forms_off[1] > 0, "no row kernel ran: {forms_off:?}");
    match sizes {
        Some(_) => assert!(forms_on[0] >= 5 && forms_on[1] == 0, "with subgroups {sizes:?}: {forms_on:?}"),
        None => assert_eq!(forms_on[0], 0, "a device without SUBGROUP ran a subgroup form: {forms_on:?}"),
    }
    println!("row reductions agree with subgroups (sizes {sizes:?}, {} dispatches) and without", forms_on[0]);
    assert_eq!(paddle::get_flags(&["FLAGS_use_subgroups"]).unwrap()[0].1, "0");
    assert!(paddle::set_flags(&[("FLAGS_use_subgroups", "maybe")]).is_err());
}
