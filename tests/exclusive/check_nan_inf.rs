//! `FLAGS_check_nan_inf`: with the flag on, the first NaN or infinity an op produces is
//! `Error::NonFinite` naming the op (and `backward of <node>` inside backward) and the output.
//! At level 2 (every op) the error comes from the op itself, with the inputs' statistics, on
//! each place and in a static program; at level 1 a CPU op's comes at once and a GPU op's at
//! the next readback (its element and value, float32 and float16, backward included, and
//! from a static program's replayed plan). With the flag off the same values pass through.
//! The flag is process-wide, so one test runs every case in turn.

use crate::common;

use dygraph::static_::{Executor, Program, Scope, data, program_guard};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

fn non_finite<T: std::fmt::Debug>(r: paddle::Result<T>, what: &str) -> (String, String) {
    match r {
        Err(Error::NonFinite { op, msg }) => (op, msg),
        other => panic!("{what}: expected NonFinite, got {other:?}"),
    }
}

fn check_on(place: Place) {
    let x = Tensor::from_vec_on(vec![1.0f32, 0.0, 4.0], [3], place).unwrap();
    // Finite results pass.
    assert_eq!(x.sqrt().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 0.0, 2.0]);
    let (op, msg) = non_finite(x.log(), "log of 0");
    assert_eq!(op, "log", "{msg}");
    assert!(msg.contains("output 0 [3] float32") && msg.contains("1 ±inf"), "{msg}");
    assert!(msg.contains("input 0 [3] float32: finite min 0.000000e0, max 4.000000e0"), "{msg}");
    let nan = Tensor::from_vec_on(vec![-1.0f32, 2.0], [2], place).unwrap();
    let (op, msg) = non_finite(nan.sqrt(), "sqrt of -1");
    assert!(op == "sqrt" && msg.contains("1 NaN"), "{op}: {msg}");
    // Inside backward: d sqrt(x)/dx at 0 is infinite.
    let leaf = Tensor::from_vec_on(vec![0.0f32, 1.0], [2], place).unwrap();
    leaf.set_stop_gradient(false);
    let y = leaf.sqrt().unwrap().sum(&[], false).unwrap();
    let (op, msg) = non_finite(y.backward(), "backward of sqrt at 0");
    assert!(op.starts_with("backward of sqrt: "), "{op}: {msg}");
    // Integer outputs are not checked; a float64 one is.
    let d = Tensor::from_vec_on(vec![1.0f64, -1.0], [2], Place::Cpu).unwrap();
    assert!(matches!(d.log(), Err(Error::NonFinite { .. })));
}

/// `exp(log(2x))` as a program with an executor on `place`, and a feed that keeps it finite
/// and one whose `log` is of 0.
fn log_program(place: Place) -> (Program, Tensor, Executor, Tensor, Tensor) {
    let (main, startup) = (Program::new(), Program::new());
    let y = program_guard(&main, &startup, || {
        let x = data("x", &[-1, 2], DType::Float32).unwrap();
        x.scale(2.0, 0.0).unwrap().log().unwrap().exp().unwrap()
    });
    let exe = Executor::with_scope(place, Scope::new());
    let ok = common::tensor(&[1.0, 2.0], &[1, 2], DType::Float32, place);
    let zero = common::tensor(&[0.0, 2.0], &[1, 2], DType::Float32, place);
    (main, y, exe, ok, zero)
}

/// Level 1 on a GPU: the op returns, the next readback reports the NaN/Inf, and the flag is
/// clear afterwards.
fn deferred_on(gpu: Place) {
    let x = Tensor::from_vec_on(vec![1.0f32, 0.0, 4.0], [3], gpu).unwrap();
    let y = x.log().expect("a GPU op returns before its check is read");
    let (op, msg) = non_finite(y.to_vec::<f32>(), "the readback after log of 0");
    assert_eq!(op, "log", "{msg}");
    assert!(msg.contains("output 0 [3] float32: element 1 (index [1]) is -inf"), "{msg}");
    assert_eq!(x.sqrt().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 0.0, 2.0], "the flag is clear again");
    // float16, and an error reported by sync() rather than by the result's own readback.
    let h = Tensor::from_vec_on(vec![-1.0f32, 4.0], [2], gpu).unwrap().cast(DType::Float16).unwrap();
    let _nan = h.sqrt().unwrap();
    let (op, msg) = non_finite(paddle::sync(), "sync after sqrt of -1 in float16");
    assert!(op == "sqrt" && msg.contains("[2] float16: element 0 (index [0]) is NaN"), "{op}: {msg}");
    // Inside backward.
    let leaf = Tensor::from_vec_on(vec![0.0f32, 1.0], [2], gpu).unwrap();
    leaf.set_stop_gradient(false);
    leaf.sqrt().unwrap().sum(&[], false).unwrap().backward().expect("backward returns before the check is read");
    let (op, msg) = non_finite(leaf.grad().unwrap().to_vec::<f32>(), "the gradient of sqrt at 0");
    assert!(op.starts_with("backward of sqrt: "), "{op}: {msg}");
    // What an op writes in place is checked too.
    let a = Tensor::from_vec_on(vec![1.0f32, 2.0], [2], gpu).unwrap();
    a.assign_(&Tensor::from_vec_on(vec![3.0f32, f32::INFINITY], [2], gpu).unwrap()).unwrap();
    let (op, msg) = non_finite(paddle::sync(), "assign_ writing inf in place");
    assert!(op == "assign_" && msg.contains("input 0 (written in place) [2] float32: element 1"), "{op}: {msg}");
    // A static program keeps its plan, which replays the checks; a plan taped while the flag
    // was off is not reused once it is on.
    let (main, y, exe, ok, zero) = log_program(gpu);
    paddle::set_flags(&[("FLAGS_check_nan_inf", "0")]).unwrap();
    for _ in 0..2 {
        exe.run(&main, &[("x", &zero)], &[y.name().unwrap()]).unwrap()[0].to_vec::<f32>().unwrap();
    }
    assert!(exe.last_plan().is_some(), "unchecked runs replay a plan");
    paddle::set_flags(&[("FLAGS_check_nan_inf", "1")]).unwrap();
    for _ in 0..2 {
        let out = exe.run(&main, &[("x", &ok)], &[y.name().unwrap()]).unwrap();
        common::assert_close("exp(log(2x))", &common::values(&out[0]), &[2.0, 4.0], 1e-6);
    }
    assert!(exe.last_plan().is_some(), "level 1 keeps the replayed plan");
    let out = exe.run(&main, &[("x", &zero)], &[y.name().unwrap()]).expect("a run returns before its checks are read");
    let (op, msg) = non_finite(out[0].to_vec::<f32>(), "the fetch of a plan's log of 0");
    assert_eq!(op, "log", "{msg}");
    assert!(exe.last_plan().is_some(), "the error came from the replayed plan");
}

fn static_program_is_checked(place: Place) {
    let (main, y, exe, ok, zero) = log_program(place);
    let out = exe.run(&main, &[("x", &ok)], &[y.name().unwrap()]).unwrap();
    common::assert_close("exp(log(2x))", &common::values(&out[0]), &[2.0, 4.0], 1e-6);
    let (op, msg) = non_finite(exe.run(&main, &[("x", &zero)], &[y.name().unwrap()]), "a program's log of 0");
    assert_eq!(op, "log", "{msg}");
}

#[test]
fn check_nan_inf_names_the_op_forward_backward_and_static() {
    let _exclusive = crate::exclusive();
    assert_eq!(paddle::get_flags(&["FLAGS_check_nan_inf"]).unwrap()[0].1, "0", "off unless asked");
    assert!(paddle::set_flags(&[("FLAGS_no_such_flag", "1")]).is_err());
    assert!(paddle::set_flags(&[("FLAGS_check_nan_inf", "maybe")]).is_err());
    let zero = Tensor::from_vec(vec![0.0f32], [1]).unwrap();
    assert_eq!(zero.log().unwrap().to_vec::<f32>().unwrap(), vec![f32::NEG_INFINITY], "off: passes through");
    let result = std::panic::catch_unwind(|| {
        paddle::set_flags(&[("FLAGS_check_nan_inf", "2")]).unwrap();
        assert_eq!(paddle::get_flags(&["FLAGS_check_nan_inf"]).unwrap()[0].1, "2");
        for place in common::places() {
            check_on(place);
            static_program_is_checked(place);
        }
        paddle::set_flags(&[("FLAGS_check_nan_inf", "1")]).unwrap();
        check_on(Place::Cpu);
        if let Some(gpu) = common::gpu_or_skip() {
            deferred_on(gpu);
        }
    });
    paddle::set_flags(&[("FLAGS_check_nan_inf", "0")]).unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert_eq!(zero.log().unwrap().to_vec::<f32>().unwrap(), vec![f32::NEG_INFINITY]);
}
