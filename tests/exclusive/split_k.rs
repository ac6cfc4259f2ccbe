//! Split-K products (`src/ops/split_k.rs`): a hardware GPU splits the reduction of a small
//! `matmul` or `conv2d` (forward, input gradient, filter gradient) over workgroups and sums
//! the slices in a `finish` dispatch that also adds the bias and runs a fused epilogue. The
//! software adapter here does not split by itself, so the parent test runs this binary's
//! child with `DYGRAPH_SPLIT_K` forcing it, once with each convolution kernel (tiled, direct
//! and direct8) and once with the matmul's `wide` entries, and the child checks every split
//! product against the CPU, and that `finish` and the forced entries ran (the kernel profiler
//! counts them).

use crate::common;

use common::{assert_close, values};
use dygraph::nn::{self, Forward};
use dygraph::profiler::Profiler;
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Tensor};

/// `(x, w, bias)` for a 5×5 convolution whose three products all reach a split on `place`:
/// forward K = 6·25 = 150, input gradient K = 8·25 = 200, filter gradient K = 4·8·8 = 256.
fn conv_operands(seed: u64, place: Place) -> (Tensor, Tensor, Tensor) {
    let mut rng = common::Rng::new(seed ^ 0x5b1);
    let t = |n: usize, shape: &[usize], rng: &mut common::Rng| {
        let v = common::tensor(&rng.vec(n, -1.0, 1.0), shape, DType::Float32, place);
        v.set_stop_gradient(false);
        v
    };
    (t(4 * 6 * 144, &[4, 6, 12, 12], &mut rng), t(8 * 6 * 25, &[8, 6, 5, 5], &mut rng), t(8, &[8], &mut rng))
}

/// A conv2d, a grouped conv2d, a 64×800·800×10 matmul and a batched 3×(32×256·256×8) one,
/// with their gradients on `place`.
fn eager_products(seed: u64, place: Place) -> Vec<Vec<f64>> {
    let (x, w, b) = conv_operands(seed, place);
    let y = paddle::conv2d(&x, &w, Some(&b), &Default::default()).unwrap();
    let mut rng = common::Rng::new(seed ^ 0x77);
    let r = common::tensor(&rng.vec(y.numel(), -1.0, 1.0), y.shape(), DType::Float32, place);
    (&y * &r).sum(&[], false).unwrap().backward().unwrap();
    let a = common::tensor(&rng.vec(64 * 800, -1.0, 1.0), &[64, 800], DType::Float32, place);
    let m = common::tensor(&rng.vec(800 * 10, -1.0, 1.0), &[800, 10], DType::Float32, place);
    a.set_stop_gradient(false);
    m.set_stop_gradient(false);
    let p = paddle::matmul(&a, &m, false, false).unwrap();
    let q = common::tensor(&rng.vec(640, -1.0, 1.0), &[64, 10], DType::Float32, place);
    (&p * &q).sum(&[], false).unwrap().backward().unwrap();
    // Two groups of 6 input and 4 output channels: the forward reduces over 150.
    let gx = common::tensor(&rng.vec(2 * 12 * 100, -1.0, 1.0), &[2, 12, 10, 10], DType::Float32, place);
    let gw = common::tensor(&rng.vec(8 * 6 * 25, -1.0, 1.0), &[8, 6, 5, 5], DType::Float32, place);
    let gy = paddle::conv2d(&gx, &gw, None, &paddle::Conv2dOptions::default().groups(2)).unwrap();
    let ba = common::tensor(&rng.vec(3 * 32 * 256, -1.0, 1.0), &[3, 32, 256], DType::Float32, place);
    let bb = common::tensor(&rng.vec(3 * 256 * 8, -1.0, 1.0), &[3, 256, 8], DType::Float32, place);
    let bp = paddle::matmul(&ba, &bb, false, false).unwrap();
    // K = 300 in 4 slices of 80, 80, 80 and 60: a short last slice and a partial last stage.
    let ra = common::tensor(&rng.vec(2 * 5 * 300, -1.0, 1.0), &[2, 5, 300], DType::Float32, place);
    let rb = common::tensor(&rng.vec(2 * 300 * 12, -1.0, 1.0), &[2, 300, 12], DType::Float32, place);
    let rp = paddle::matmul(&ra, &rb, false, false).unwrap();
    // 128 output channels: the input gradient reduces over 128·9 in one product, or over 128
    // for the columns a software adapter sums with col2im (its one split there).
    let wx = common::tensor(&rng.vec(2 * 36, -1.0, 1.0), &[1, 2, 6, 6], DType::Float32, place);
    let ww = common::tensor(&rng.vec(128 * 2 * 9, -1.0, 1.0), &[128, 2, 3, 3], DType::Float32, place);
    wx.set_stop_gradient(false);
    let wy = paddle::conv2d(&wx, &ww, None, &Default::default()).unwrap();
    let wr = common::tensor(&rng.vec(wy.numel(), -1.0, 1.0), wy.shape(), DType::Float32, place);
    (&wy * &wr).sum(&[], false).unwrap().backward().unwrap();
    let grad = |t: &Tensor| values(&t.grad().expect("a gradient"));
    #[rustfmt::skip]
    let out = vec![
        values(&y), grad(&x), grad(&w), grad(&b), values(&p), grad(&a), grad(&m), values(&gy), values(&bp), values(&rp),
        grad(&wx),
    ];
    out
}

/// relu(conv2d(x) + b) and relu(x·W + b) as a static program with fusion on `place` (a GPU
/// makes both epilogues): the fetched values and the fused op types.
fn fused_program(seed: u64, place: Place) -> (Vec<Vec<f64>>, Vec<String>) {
    paddle::seed(seed);
    let (main, startup) = (Program::new(), Program::new());
    let (c, f) = st::program_guard(&main, &startup, || {
        let img = st::data("img", &[-1, 6, 12, 12], DType::Float32).unwrap();
        let row = st::data("row", &[-1, 800], DType::Float32).unwrap();
        let conv = nn::Conv2D::new(6, 8, 5).unwrap();
        let fc = nn::Linear::new(800, 10).unwrap();
        (conv.forward(&img).unwrap().relu().unwrap(), fc.forward(&row).unwrap().relu().unwrap())
    });
    let exe = Executor::with_scope(place, Scope::new());
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let mut rng = common::Rng::new(seed ^ 0x3c);
    let img = common::tensor(&rng.vec(4 * 6 * 144, -1.0, 1.0), &[4, 6, 12, 12], DType::Float32, Place::Cpu);
    let row = common::tensor(&rng.vec(64 * 800, -1.0, 1.0), &[64, 800], DType::Float32, Place::Cpu);
    let out = exe.run(&main, &[("img", &img), ("row", &row)], &[&c, &f]).unwrap();
    let ops = exe.ops_to_run(&main).unwrap().into_iter().map(|o| o.op_type).collect();
    (out.iter().map(values).collect(), ops)
}

#[test]
#[ignore = "run by split_products_match_the_cpu with DYGRAPH_SPLIT_K set"]
fn split_child() {
    let _exclusive = crate::exclusive();
    let gpu = Place::Gpu(0);
    let seed = common::run_seed();
    let names = [
        "conv y",
        "conv dx",
        "conv dw",
        "conv db",
        "matmul",
        "matmul da",
        "matmul dm",
        "grouped conv y",
        "batched matmul",
        "batched matmul, ragged K",
        "128-channel conv dx",
    ];
    let p = Profiler::start(gpu).unwrap();
    let on_gpu = eager_products(seed, gpu);
    let (fused, ops) = fused_program(seed, gpu);
    let summary = p.stop().unwrap();
    println!("{summary}");
    let reference = eager_products(seed, Place::Cpu);
    for ((name, g), c) in names.iter().zip(&on_gpu).zip(&reference) {
        assert_close(&format!("{name}, split on the GPU against the CPU"), g, c, 1e-4);
    }
    assert!(ops.iter().any(|o| o == "conv2d_epilogue") && ops.iter().any(|o| o == "matmul_epilogue"), "{ops:?}");
    let (plain, _) = fused_program(seed, Place::Cpu);
    assert_close("relu(conv2d + b), split epilogue", &fused[0], &plain[0], 1e-4);
    assert_close("relu(x·W + b), split epilogue", &fused[1], &plain[1], 1e-4);
    // conv: the forward, input and filter gradients, the grouped forward, the epilogue and the
    // 128-channel input gradient each split, except that the direct8 kernel's first input
    // gradient runs as columns over 8 channels, too shallow to split; matmul: the forward, the
    // batched products and the epilogue (the gradients reduce over 10 and 64, too shallow).
    let conv_splits = if std::env::var("DYGRAPH_CONV_KERNEL").as_deref() == Ok("direct8") { 5 } else { 6 };
    for (shader, split) in [("conv2d.wgsl", conv_splits), ("matmul.wgsl", 4)] {
        let finishes: u64 = summary.shader(shader).iter().filter(|k| k.entry == "finish").map(|k| k.calls).sum();
        assert_eq!(finishes, split, "{shader}: split products finished\n{summary}");
    }
    // The forced matmul entries ran (`wide4` falls back to `wide` for the 800×10 product).
    let forced = std::env::var("DYGRAPH_MATMUL_KERNEL").unwrap_or_default();
    let entries: &[&str] = if forced == "wide4" { &["wide", "wide4"] } else { &["main"] };
    for entry in entries {
        let ran = summary.shader("matmul.wgsl").iter().any(|k| k.entry == *entry && k.calls > 0);
        assert!(ran, "matmul.wgsl `{entry}` did not run\n{summary}");
    }
    // float16 products split too (natively on devices with SHADER_F16: f16 operands into f32
    // slices, summed into an f16 output).
    let p = Profiler::start(gpu).unwrap();
    let half_gpu = half_products(seed, gpu);
    let summary = p.stop().unwrap();
    for (i, (g, c)) in half_gpu.iter().zip(&half_products(seed, Place::Cpu)).enumerate() {
        common::check_allclose(&format!("float16 product {i}, split on the GPU against the CPU"), g, c, 2e-3, 2e-3)
            .unwrap();
    }
    let finishes =
        |shader: &str| -> u64 { summary.shader(shader).iter().filter(|k| k.entry == "finish").map(|k| k.calls).sum() };
    assert_eq!(finishes("matmul.wgsl"), 2, "float16 split products finished\n{summary}");
    // The convolution's forward and filter gradient split with every kernel.
    assert!(finishes("conv2d.wgsl") >= 2, "float16 split convolutions finished\n{summary}");
    println!("split products checked");
}

/// A 64×800·800×10 and a batched 2×(5×300·300×12) product, and a convolution with its
/// gradients, in float16 on `place`.
fn half_products(seed: u64, place: Place) -> Vec<Vec<f64>> {
    let mut rng = common::Rng::new(seed ^ 0x16);
    let mut t = |shape: &[usize]| {
        let n = shape.iter().product();
        common::tensor(&rng.vec(n, -1.0, 1.0), shape, DType::Float16, place)
    };
    let (a, m, ra, rb) = (t(&[64, 800]), t(&[800, 10]), t(&[2, 5, 300]), t(&[2, 300, 12]));
    let p = paddle::matmul(&a, &m, false, false).unwrap();
    let rp = paddle::matmul(&ra, &rb, false, false).unwrap();
    let (x, w, b) = conv_operands(seed, place);
    let [x, w, b] = [x, w, b].map(|t| {
        let h = t.cast(DType::Float16).unwrap().detach();
        h.set_stop_gradient(false);
        h
    });
    let y = paddle::conv2d(&x, &w, Some(&b), &Default::default()).unwrap();
    let r = common::tensor(&vec![0.5; y.numel()], y.shape(), DType::Float16, place);
    (&y * &r).sum(&[], false).unwrap().backward().unwrap();
    let grad = |t: &Tensor| values(&t.grad().expect("a gradient"));
    vec![values(&p), values(&rp), values(&y), grad(&x), grad(&w)]
}

#[test]
fn split_products_match_the_cpu() {
    let _exclusive = crate::exclusive();
    let Some(_) = common::gpu_or_skip() else { return };
    // The matmul's `wide` entries split too (the 800×10 product reads floats, the batched
    // one vec4s); one run forces them.
    for (conv, matmul) in [("tiled", "main"), ("direct", "main"), ("direct8", "main"), ("tiled", "wide4")] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                common::test_path(module_path!(), "split_child").as_str(),
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("DYGRAPH_SPLIT_K", "4096")
            .env("DYGRAPH_CONV_KERNEL", conv)
            .env("DYGRAPH_MATMUL_KERNEL", matmul)
            .env("DYGRAPH_TEST_SEED", common::run_seed().to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("{conv} convolution kernel, {matmul} matmul:\n{text}");
        assert!(
            out.status.success() && text.contains("split products checked"),
            "the child with the {conv} convolution kernel and {matmul} matmul failed:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
