//! CPU shadow mode (`FLAGS_shadow` / `DYGRAPH_SHADOW=cpu`): with it on, GPU ops agree with
//! their CPU reruns through MNIST training steps (forward, backward, Adam's in-place update,
//! random dropout with the generator left where the GPU run left it, a static program run op
//! by op); a real cross-place
//! difference (a float32 sum whose order of additions matters) is a `ShadowMismatch` naming
//! the op and element, with a file from which `shadow::replay` reproduces both values. The
//! flag is process-wide, so one test runs every case in turn.

use crate::common;

use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_::{Executor, Program, Scope, data, program_guard};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, DropoutOptions, Error, Place, Tensor};

fn sum_on(values: &[f32], place: Place) -> f32 {
    let x = Tensor::from_vec_on(values.to_vec(), [values.len()], place).unwrap();
    x.sum(&[], false).unwrap().item::<f32>().unwrap()
}

/// Sums whose float32 result depends on the order of the additions: a large value that
/// swallows ones added to it one at a time, but not ones added to each other first.
fn order_sensitive_sums() -> Vec<Vec<f32>> {
    let big = 16_777_216.0f32; // 2^24: big + 1 rounds back to big
    let mut cases = Vec::new();
    for n in [3usize, 7, 15, 63, 255, 1023, 4095] {
        let mut v = vec![big];
        v.extend(std::iter::repeat_n(1.0f32, n));
        v.push(-big);
        cases.push(v.clone());
        v.rotate_right(1);
        cases.push(v);
    }
    cases
}

fn shadow_finds_an_order_difference(gpu: Place) {
    let Some((values, cpu_sum, gpu_sum)) = order_sensitive_sums().into_iter().find_map(|v| {
        let (c, g) = (sum_on(&v, Place::Cpu), sum_on(&v, gpu));
        ((c - g).abs() > 2e-5 + 2e-4 * c.abs()).then_some((v, c, g))
    }) else {
        panic!("no order-sensitive sum differs between the places: the test cannot show a mismatch");
    };
    paddle::set_flags(&[("FLAGS_shadow", "cpu")]).unwrap();
    let x = Tensor::from_vec_on(values.clone(), [values.len()], gpu).unwrap();
    let result = x.sum(&[], false);
    paddle::set_flags(&[("FLAGS_shadow", "off")]).unwrap();
    let (op, msg, file) = match result {
        Err(Error::ShadowMismatch { op, msg, file }) => (op, msg, file),
        other => panic!("{} values: expected ShadowMismatch, got {other:?}", values.len()),
    };
    assert_eq!(op, "sum", "{msg}");
    assert!(msg.contains("output 0 [] float32: element 0"), "{msg}");
    assert!(msg.contains(&format!("{gpu_sum:e} on the GPU and {cpu_sum:e} on the CPU")), "{msg}");
    let file = file.unwrap_or_else(|| panic!("no reproduction file: {msg}"));
    let replay = paddle::shadow::replay(&file, gpu).unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(replay.op, "sum");
    assert!(replay.recorded.starts_with("sum: output 0"), "{}", replay.recorded);
    assert!(replay.difference.is_some(), "the replay found no difference");
    assert_eq!(replay.cpu[0].item::<f32>().unwrap(), cpu_sum, "the replay's CPU value");
    assert_eq!(replay.gpu[0].item::<f32>().unwrap(), gpu_sum, "the replay's GPU value");
}

fn shadow_passes_training_steps(gpu: Place) {
    paddle::seed(common::run_seed());
    let mut rng = common::Rng::new(common::run_seed() ^ 3);
    let img: Vec<f32> = rng.vec(8 * 28 * 28, -1.0, 1.0).iter().map(|&v| v as f32).collect();
    let labels: Vec<i64> = (0..8).map(|i| i % 10).collect();
    let img = Tensor::from_vec_on(img, [8, 1, 28, 28], gpu).unwrap();
    let labels = Tensor::from_vec_on(labels, [8, 1], gpu).unwrap();
    let model = paddle::guard(gpu, MnistNet::new).unwrap();
    let mut opt = Adam::new(1e-3, model.parameters());
    paddle::set_flags(&[("FLAGS_shadow", "cpu")]).unwrap();
    let before = paddle::shadow::checked_ops();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for step in 0..2 {
            let loss = mnist_loss(&model.forward(&img).unwrap(), &labels).unwrap();
            loss.backward().unwrap_or_else(|e| panic!("step {step}, backward: {e}"));
            opt.step().unwrap_or_else(|e| panic!("step {step}, Adam: {e}"));
            opt.clear_grad();
        }
        let checked = paddle::shadow::checked_ops() - before;
        println!("shadow: {checked} GPU ops of two MNIST training steps agreed with the CPU");
        assert!(checked >= 60, "only {checked} ops were shadowed in two training steps");
        // A static program on the GPU runs op by op while shadowed (no plan, no fusion).
        let (main, startup) = (Program::new(), Program::new());
        let y = program_guard(&main, &startup, || {
            let x = data("x", &[-1, 3], DType::Float32).unwrap();
            x.scale(2.0, 0.5).unwrap().exp().unwrap().sum(&[], false).unwrap()
        });
        let exe = Executor::with_scope(gpu, Scope::new());
        let feed = Tensor::from_vec_on(vec![0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3], gpu).unwrap();
        let before_static = paddle::shadow::checked_ops();
        exe.run(&main, &[("x", &feed)], &[y.name().unwrap()]).unwrap();
        assert!(paddle::shadow::checked_ops() - before_static >= 3, "the program's ops were not shadowed");
        assert!(exe.last_plan().is_none(), "a shadowed program ran a replayed plan");
        // In place on the GPU: the CPU rerun writes its own copy, compared with the GPU's.
        let a = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0], [3], gpu).unwrap();
        a.add_(&Tensor::from_vec_on(vec![0.5f32, 0.5, 0.5], [3], gpu).unwrap()).unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5, 2.5, 3.5]);
        // A random op: the rerun draws the GPU's numbers and leaves the generator as the GPU
        // run left it, so the next draw is the one an unshadowed run makes.
        let x = Tensor::from_vec_on(vec![1.0f32; 64], [64], gpu).unwrap();
        paddle::seed(7);
        let shadowed = paddle::dropout(&x, DropoutOptions::default()).unwrap().to_vec::<f32>().unwrap();
        let next_shadowed = paddle::rand_on([4], gpu).unwrap().to_vec::<f32>().unwrap();
        (shadowed, next_shadowed)
    }));
    paddle::set_flags(&[("FLAGS_shadow", "off")]).unwrap();
    let (shadowed, next_shadowed) = result.unwrap_or_else(|e| std::panic::resume_unwind(e));
    let x = Tensor::from_vec_on(vec![1.0f32; 64], [64], gpu).unwrap();
    paddle::seed(7);
    let plain = paddle::dropout(&x, DropoutOptions::default()).unwrap().to_vec::<f32>().unwrap();
    let next_plain = paddle::rand_on([4], gpu).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(shadowed, plain, "dropout's mask with and without the shadow");
    assert_eq!(next_shadowed, next_plain, "the draw after a shadowed random op");
}

/// With the shadow on, an out-of-range index is the op's own error (the CPU rerun finds it
/// first), not a mismatch; and the NaN check reports a NaN both places agree on as the op's,
/// not the shadow's copies or rerun.
fn shadow_leaves_other_errors_as_they_are(gpu: Place) {
    paddle::set_flags(&[("FLAGS_shadow", "cpu")]).unwrap();
    let result = std::panic::catch_unwind(|| {
        let x = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0], [3], gpu).unwrap();
        let bad = Tensor::from_vec_on(vec![0i64, 7], [2], gpu).unwrap();
        let e = paddle::gather(&x, &bad, 0).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument { .. }) && e.to_string().contains("index 7"), "{e}");
        let _ = paddle::sync(); // the GPU's own report of the same index
        paddle::set_flags(&[("FLAGS_check_nan_inf", "1")]).unwrap();
        let zero = Tensor::from_vec_on(vec![0.0f32, 1.0], [2], gpu).unwrap();
        let y = zero.log().expect("both places agree on log(0)");
        match y.to_vec::<f32>() {
            Err(Error::NonFinite { op, msg }) => assert!(op == "log" && msg.contains("output 0"), "{op}: {msg}"),
            other => panic!("expected the NaN check's error for log, got {other:?}"),
        }
    });
    paddle::set_flags(&[("FLAGS_check_nan_inf", "0"), ("FLAGS_shadow", "off")]).unwrap();
    result.unwrap_or_else(|e| std::panic::resume_unwind(e));
}

#[test]
fn shadow_mode_checks_gpu_ops_against_the_cpu() {
    let _exclusive = crate::exclusive();
    let _g = common::generator_lock();
    assert_eq!(paddle::get_flags(&["FLAGS_shadow"]).unwrap()[0].1, "off", "off unless asked");
    assert!(paddle::set_flags(&[("FLAGS_shadow", "gpu")]).is_err());
    let Some(gpu) = common::gpu_or_skip() else { return };
    shadow_passes_training_steps(gpu);
    shadow_finds_an_order_difference(gpu);
    shadow_leaves_other_errors_as_they_are(gpu);
    // A file that is not a shadow case is a typed error naming what is missing.
    let dir = std::env::temp_dir().join(format!("dygraph-shadow-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plain.safetensors");
    let mut state = paddle::nn::StateDict::new();
    state.insert("w", Tensor::from_vec_on(vec![1.0f32], [1], Place::Cpu).unwrap());
    paddle::save(&state, &path).unwrap();
    let e = paddle::shadow::replay(&path, gpu).unwrap_err();
    assert!(e.to_string().contains("not a shadow file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
