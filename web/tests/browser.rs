//! The GPU-against-CPU op checks run inside headless Chromium: WebGPU (SwiftShader in CI)
//! against the CPU backend compiled to wasm, on fresh random inputs; and the page's
//! inference model through an Executor, whose WebGPU runs replay a plan and read back
//! asynchronously. `web/test.sh` runs them.

use dygraph::Place;
use dygraph_web::check::{self, CheckResult};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// Opens WebGPU (a missing adapter fails the test: these tests exist to run the GPU path)
/// and runs one family, asserting every comparison.
async fn assert_family(family: &str) {
    let info = dygraph::init_gpu().await.unwrap_or_else(|e| panic!("WebGPU is required here: {e}"));
    assert_eq!(info.backend, "BrowserWebGpu", "{info:?}");
    let results: Vec<CheckResult> = check::run_family(family, Place::Gpu(0)).await.unwrap();
    assert!(!results.is_empty());
    for r in &results {
        assert!(r.elements > 0, "{family}: {} compared nothing", r.name);
        assert!(r.passed(), "{family}: {} differs: max error {} > {}", r.name, r.max_error, r.tolerance);
    }
}

#[wasm_bindgen_test]
async fn elementwise_ops_agree() {
    assert_family("elementwise").await;
}

#[wasm_bindgen_test]
async fn matmul_agrees() {
    assert_family("matmul").await;
}

#[wasm_bindgen_test]
async fn reductions_agree() {
    assert_family("reductions").await;
}

#[wasm_bindgen_test]
async fn conv2d_forward_and_backward_agree() {
    assert_family("conv2d").await;
}

#[wasm_bindgen_test]
async fn pools_agree() {
    assert_family("pools").await;
}

#[wasm_bindgen_test]
async fn softmax_agrees() {
    assert_family("softmax").await;
}

#[wasm_bindgen_test]
async fn layer_norm_agrees() {
    assert_family("layer_norm").await;
}

#[wasm_bindgen_test]
async fn mlp_backward_agrees() {
    assert_family("mlp backward").await;
}

#[wasm_bindgen_test]
async fn the_checks_catch_a_wrong_result() {
    // A check must fail when the numbers differ, or the tests above would prove nothing.
    let bad = CheckResult { name: "x".into(), max_error: 1e-3, tolerance: 1e-5, elements: 4 };
    assert!(!bad.passed());
    let nan = CheckResult { name: "x".into(), max_error: f64::NAN, tolerance: 1e-5, elements: 4 };
    assert!(!nan.passed());
}

#[wasm_bindgen_test]
async fn predict_rejects_ink_of_the_wrong_size() {
    // 10 values for a 4 × 4 drawing: an error naming the sizes, not an empty "nothing drawn".
    let err = dygraph_web::predict(vec![255; 10], 4, 4).await.expect_err("mismatched ink must be an error");
    let error = wasm_bindgen::JsValue::from(err);
    let message = js_sys::Reflect::get(&error, &"message".into()).unwrap().as_string().unwrap();
    assert!(message.starts_with("predict:") && message.contains("10 values") && message.contains("4 × 4"), "{message}");
}

#[wasm_bindgen_test]
async fn the_classifier_replays_a_plan_on_webgpu_and_matches_the_cpu() {
    use dygraph_web::classifier::Classifier;
    let info = dygraph::init_gpu().await.unwrap_or_else(|e| panic!("WebGPU is required here: {e}"));
    assert_eq!(info.backend, "BrowserWebGpu", "{info:?}");
    let (model, params) = (include_bytes!("../mnist.pdmodel"), include_bytes!("../mnist.pdiparams"));
    let gpu = Classifier::from_inference_model(model, params, Place::Gpu(0)).unwrap();
    let cpu = Classifier::from_inference_model(model, params, Place::Cpu).unwrap();
    // The first prediction captures the plan, the next ones replay it.
    for k in 0..3usize {
        let input: Vec<f32> = (0..784).map(|i| (((i * 7 + k * 13) % 17) as f32 / 8.0) - 1.0).collect();
        let g = gpu.probabilities(&input).unwrap().to_vec_async::<f32>().await.unwrap();
        let c = cpu.probabilities(&input).unwrap().to_vec_async::<f32>().await.unwrap();
        assert_eq!((g.len(), c.len()), (10, 10));
        for (i, (a, b)) in g.iter().zip(&c).enumerate() {
            assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "input {k}, class {i}: WebGPU {a} against CPU {b}");
        }
        let plan = gpu.last_plan().unwrap_or_else(|| panic!("input {k}: the WebGPU run was interpreted"));
        assert!(plan.dispatches > 0, "{plan:?}");
        assert!(cpu.last_plan().is_none());
    }
}

#[wasm_bindgen_test]
async fn a_plan_writes_elementwise_outputs_in_place_on_webgpu() {
    use dygraph::static_::{self as st, Executor, Program, Scope};
    use dygraph::{DType, Tensor};
    let info = dygraph::init_gpu().await.unwrap_or_else(|e| panic!("WebGPU is required here: {e}"));
    assert_eq!(info.backend, "BrowserWebGpu", "{info:?}");
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 256], DType::Float32).unwrap();
        let b = st::data("b", &[256], DType::Float32).unwrap();
        // The scale reads the feed; tanh and the add write over their dying inputs; h lives on
        // past the second scale; the product, fetched, keeps a buffer of its own.
        let h = x.scale(2.0, 0.5).unwrap().tanh().unwrap().add(&b).unwrap();
        h.mul(&h.scale(-1.0, 0.5).unwrap()).unwrap()
    });
    let exe = Executor::with_scope(Place::Gpu(0), Scope::new());
    exe.set_fusion(false);
    for run in 0..3usize {
        let xv: Vec<f32> = (0..3 * 256).map(|i| (((i * 37 + run * 11) % 101) as f32 / 50.0) - 1.0).collect();
        let bv: Vec<f32> = (0..256).map(|i| ((i * 13 + run) % 7) as f32 / 7.0).collect();
        let x = Tensor::from_vec(xv.clone(), [3, 256]).unwrap().to(Place::Gpu(0)).unwrap();
        let b = Tensor::from_vec(bv.clone(), [256]).unwrap().to(Place::Gpu(0)).unwrap();
        let out = exe.run(&main, &[("x", &x), ("b", &b)], &[&y]).unwrap();
        let got = out[0].to_vec_async::<f32>().await.unwrap();
        for (i, (g, v)) in got.iter().zip(&xv).enumerate() {
            let h = (2.0 * *v as f64 + 0.5).tanh() + bv[i % 256] as f64;
            let want = h * (0.5 - h);
            assert!((*g as f64 - want).abs() <= 1e-5 + 1e-5 * want.abs(), "run {run}, element {i}: {g} against {want}");
        }
    }
    let plan = exe.last_plan().unwrap_or_else(|| panic!("the WebGPU run was interpreted"));
    assert_eq!(plan.in_place, 2, "{plan:?}");
    drop(startup);
}

#[wasm_bindgen_test]
async fn a_plan_merges_sgd_updates_within_webgpus_binding_limit() {
    use dygraph::nn::{self, Initializer, ParamAttr};
    use dygraph::optimizer::{Optimizer, SGD};
    use dygraph::static_::{self as st, Executor, Program, Scope};
    use dygraph::{DType, Tensor};
    let info = dygraph::init_gpu().await.unwrap_or_else(|e| panic!("WebGPU is required here: {e}"));
    assert_eq!(info.backend, "BrowserWebGpu", "{info:?}");
    // Loss Σ sum(p_k · x_k): each gradient is its feed. At WebGPU's default of 8 storage
    // buffers per stage an SGD dispatch takes 3 parameters (2 bindings each, the schedule and
    // the parameter words), so the four updates replay as two dispatches.
    let sizes = [1usize, 300, 257, 5];
    let (main, startup) = (Program::new(), Program::new());
    let loss = st::program_guard(&main, &startup, || {
        let mut params = Vec::new();
        let mut loss: Option<Tensor> = None;
        for (k, &n) in sizes.iter().enumerate() {
            let x = st::data(&format!("x{k}"), &[n as i64], DType::Float32).unwrap();
            let attr = ParamAttr { name: Some(format!("p{k}")), ..ParamAttr::default() };
            let p = nn::create_parameter(&[n], DType::Float32, &attr, &Initializer::Constant(0.5)).unwrap();
            let term = p.mul(&x).unwrap().sum(&[], false).unwrap();
            loss = Some(match loss {
                None => term,
                Some(l) => l.add(&term).unwrap(),
            });
            params.push(p);
        }
        let loss = loss.unwrap();
        SGD::new(0.1, params).minimize(&loss).unwrap();
        loss
    });
    let exe = Executor::with_scope(Place::Gpu(0), Scope::new());
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let feed = |k: usize, n: usize, run: usize| -> Vec<f32> {
        (0..n).map(|i| (((i * 7 + k * 5 + run * 3) % 23) as f32 - 11.0) / 4.0).collect()
    };
    for run in 0..3 {
        let xs: Vec<(String, Tensor)> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                (format!("x{k}"), Tensor::from_vec(feed(k, n, run), [n]).unwrap().to(Place::Gpu(0)).unwrap())
            })
            .collect();
        let refs: Vec<(&str, &Tensor)> = xs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        exe.run(&main, &refs, &[&loss]).unwrap();
    }
    let plan = exe.last_plan().unwrap_or_else(|| panic!("the WebGPU run was interpreted"));
    // At least the default's 3 per dispatch; an adapter offering more merges all four.
    assert!(plan.merged >= 2, "{plan:?}");
    for (k, &n) in sizes.iter().enumerate() {
        let got = exe.scope().var(&format!("p{k}")).unwrap().to_vec_async::<f32>().await.unwrap();
        for (i, g) in got.iter().enumerate() {
            let want = 0.5 - 0.1 * (0..3).map(|run| feed(k, n, run)[i] as f64).sum::<f64>();
            assert!((*g as f64 - want).abs() <= 1e-5 + 1e-5 * want.abs(), "p{k}[{i}]: {g} against {want}");
        }
    }
}

/// IDX files of `n` synthetic 28×28 digits: label `l` is a bright bar at rows 2l+4..2l+6
/// over a faint ramp, so a few steps already lower the loss.
fn synthetic_idx(n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut images = [0x0000_0803u32, n as u32, 28, 28].iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<u8>>();
    let mut labels = [0x0000_0801u32, n as u32].iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<u8>>();
    for i in 0..n {
        let l = (i * 7) % 10;
        labels.push(l as u8);
        for p in 0..784 {
            let (row, col) = (p / 28, p % 28);
            let bar = row >= 2 * l + 4 && row < 2 * l + 6 && (3..25).contains(&col);
            images.push(if bar { 250 } else { ((col + i) % 29) as u8 });
        }
    }
    (images, labels)
}

/// The page's trainer under float16 mixed precision on WebGPU (natively where it has
/// `shader-f16`, else through float32) and on the CPU backend: the same first loss as
/// float32 from the same weights and batch, within float16's rounding, finite losses after,
/// and the precision it names.
#[wasm_bindgen_test]
async fn the_trainer_trains_under_float16_mixed_precision() {
    use dygraph::vision::datasets::Mnist;
    use dygraph_web::trainer::Trainer;
    let info = dygraph::init_gpu().await.unwrap_or_else(|e| panic!("WebGPU is required here: {e}"));
    let (images, labels) = synthetic_idx(128);
    let data = || Mnist::from_idx_bytes(&images, &labels).unwrap();
    for place in [Place::Gpu(0), Place::Cpu] {
        let mut first = Vec::new();
        for precision in ["float32", "float16"] {
            let mut t = Trainer::new(data(), data(), 32, 7, place, precision).unwrap();
            let mut losses = Vec::new();
            for _ in 0..6 {
                losses.push(t.step().unwrap().to_vec_async::<f32>().await.unwrap()[0]);
            }
            assert!(losses.iter().all(|l| l.is_finite()), "{precision} on {place}: {losses:?}");
            let words = t.precision().to_string();
            let want = match (precision, place.is_gpu() && info.shader_f16) {
                ("float32", _) => "float32",
                (_, true) => "float16 mixed precision (float16 kernels, shader-f16)",
                (_, false) => "float16 mixed precision (through float32: no shader-f16 here)",
            };
            assert_eq!(words, want, "{precision} on {place}");
            first.push(losses[0]);
        }
        assert!(
            (first[0] - first[1]).abs() <= 2e-2,
            "first losses on {place}: float32 {} float16 {}",
            first[0],
            first[1]
        );
    }
    let auto = Trainer::new(data(), data(), 32, 7, Place::Gpu(0), "auto").unwrap();
    let want = if info.shader_f16 { "float16 mixed precision" } else { "float32 (this WebGPU has no shader-f16)" };
    assert!(auto.precision().starts_with(want), "auto on WebGPU: {}", auto.precision());
    assert!(Trainer::new(data(), data(), 32, 7, Place::Cpu, "float64").is_err());
}
