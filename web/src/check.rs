//! GPU-against-CPU agreement checks that run inside the browser: the same op on the same fresh
//! random inputs on WebGPU and on the CPU backend compiled to wasm, compared element by element.
//! The page's Check panel shows them; `tests/browser.rs` asserts them in headless Chromium.

use dygraph::nn::{self, Conv2dOptions, CrossEntropyOptions, Forward, Layer, Pool2dOptions};
use dygraph::{self as paddle, DType, Place, Result, Tensor};

/// One op compared on the two places.
#[derive(Clone, Debug)]
pub struct CheckResult {
    /// What ran, e.g. `"conv2d backward: dW"`.
    pub name: String,
    /// The largest `|gpu − cpu| / (1 + |cpu|)` over all elements of all outputs.
    pub max_error: f64,
    /// The bound `max_error` must stay under.
    pub tolerance: f64,
    /// Elements compared.
    pub elements: usize,
}

impl CheckResult {
    /// True when the two places agree within the tolerance (and produced numbers at all).
    pub fn passed(&self) -> bool {
        self.max_error.is_finite() && self.max_error <= self.tolerance && self.elements > 0
    }
}

/// The families the Check panel and the browser tests run, by name.
pub const FAMILIES: [&str; 8] =
    ["elementwise", "matmul", "reductions", "conv2d", "pools", "softmax", "layer_norm", "mlp backward"];

/// Runs one family on `gpu` against the CPU backend.
pub async fn run_family(family: &str, gpu: Place) -> Result<Vec<CheckResult>> {
    match family {
        "elementwise" => elementwise(gpu).await,
        "matmul" => matmul(gpu).await,
        "reductions" => reductions(gpu).await,
        "conv2d" => conv2d(gpu).await,
        "pools" => pools(gpu).await,
        "softmax" => softmax(gpu).await,
        "layer_norm" => layer_norm(gpu).await,
        "mlp backward" => mlp_backward(gpu).await,
        other => {
            Err(paddle::Error::invalid("check", format!("unknown family {other:?}; expected one of {FAMILIES:?}")))
        }
    }
}

/// Fresh standard-normal inputs on the CPU.
fn randn_cpu(shape: &[usize]) -> Result<Tensor> {
    paddle::randn_on(shape, Place::Cpu)
}

/// Compares `outputs_gpu` with `outputs_cpu` (same order), reading the GPU side back
/// asynchronously.
async fn compare(name: &str, gpu: &[Tensor], cpu: &[Tensor], tolerance: f64) -> Result<CheckResult> {
    let mut max_error = 0.0f64;
    let mut elements = 0;
    for (g, c) in gpu.iter().zip(cpu) {
        if g.shape() != c.shape() {
            return Err(paddle::Error::invalid(
                "check",
                format!("{name}: GPU shape {:?} but CPU shape {:?}", g.shape(), c.shape()),
            ));
        }
        let gv = g.to_f64_vec_async().await?;
        let cv = c.to_f64_vec_async().await?;
        for (a, b) in gv.iter().zip(&cv) {
            let e = (a - b).abs() / (1.0 + b.abs());
            // NaN must fail the check, so it cannot be lost in `max`.
            max_error = if e.is_nan() { f64::NAN } else { max_error.max(e) };
        }
        elements += cv.len();
    }
    Ok(CheckResult { name: name.to_string(), max_error, tolerance, elements })
}

/// Runs `f` on copies of `inputs` on both places and compares every output.
async fn check_op(
    name: &str,
    gpu: Place,
    inputs: &[Tensor],
    tolerance: f64,
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
) -> Result<CheckResult> {
    let on_gpu = inputs.iter().map(|t| t.to(gpu)).collect::<Result<Vec<_>>>()?;
    let cpu_out = f(inputs)?;
    let gpu_out = f(&on_gpu)?;
    compare(name, &gpu_out, &cpu_out, tolerance).await
}

/// Runs `f` on both places with gradients on, then compares the outputs and the gradient of
/// every input (the loss is `Σ out · w` for a fixed random `w`, so every gradient is distinct).
async fn check_grad(
    name: &str,
    gpu: Place,
    inputs: &[Tensor],
    tolerance: f64,
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Result<Vec<CheckResult>> {
    let run = |inputs: Vec<Tensor>, w: &Tensor| -> Result<(Tensor, Vec<Tensor>)> {
        for t in &inputs {
            t.set_stop_gradient(false);
        }
        let out = f(&inputs)?;
        out.multiply(w)?.sum(&[], false)?.backward()?;
        let grads = inputs
            .iter()
            .map(|t| {
                t.grad().ok_or_else(|| paddle::Error::invalid("check", format!("{name}: an input has no gradient")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((out.detach(), grads))
    };
    let cpu_inputs: Vec<Tensor> = inputs.iter().map(|t| t.detach()).collect();
    let gpu_inputs = inputs.iter().map(|t| t.to(gpu)).collect::<Result<Vec<_>>>()?;
    let probe = paddle::no_grad(|| f(&cpu_inputs.iter().map(|t| t.detach()).collect::<Vec<_>>()))?;
    let w = randn_cpu(probe.shape())?;
    let (cpu_out, cpu_grads) = run(cpu_inputs, &w)?;
    let (gpu_out, gpu_grads) = run(gpu_inputs, &w.to(gpu)?)?;
    let mut results = vec![compare(&format!("{name} forward"), &[gpu_out], &[cpu_out], tolerance).await?];
    for (i, (g, c)) in gpu_grads.iter().zip(&cpu_grads).enumerate() {
        results.push(
            compare(
                &format!("{name} backward: d input {i}"),
                std::slice::from_ref(g),
                std::slice::from_ref(c),
                tolerance,
            )
            .await?,
        );
    }
    Ok(results)
}

async fn elementwise(gpu: Place) -> Result<Vec<CheckResult>> {
    let a = randn_cpu(&[3, 1, 5])?;
    let b = randn_cpu(&[4, 5])?;
    let pos = randn_cpu(&[4, 5])?.abs()?.add_scalar(0.5)?;
    let mut r = vec![
        check_op("add (broadcast [3,1,5] + [4,5])", gpu, &[a.clone(), b.clone()], 1e-6, |x| Ok(vec![x[0].add(&x[1])?]))
            .await?,
        check_op("mul (broadcast)", gpu, &[a.clone(), b.clone()], 1e-6, |x| Ok(vec![x[0].multiply(&x[1])?])).await?,
        check_op("div", gpu, &[b.clone(), pos.clone()], 1e-5, |x| Ok(vec![x[0].divide(&x[1])?])).await?,
    ];
    let x = randn_cpu(&[257])?;
    r.push(check_op("exp", gpu, std::slice::from_ref(&x), 1e-5, |x| Ok(vec![x[0].exp()?])).await?);
    r.push(check_op("tanh", gpu, std::slice::from_ref(&x), 1e-5, |x| Ok(vec![x[0].tanh()?])).await?);
    r.push(check_op("sigmoid", gpu, std::slice::from_ref(&x), 1e-5, |x| Ok(vec![x[0].sigmoid()?])).await?);
    r.push(check_op("relu", gpu, std::slice::from_ref(&x), 0.0, |x| Ok(vec![x[0].relu()?])).await?);
    r.extend(check_grad("mul · tanh", gpu, &[a, b], 1e-5, |x| x[0].multiply(&x[1])?.tanh()).await?);
    Ok(r)
}

async fn matmul(gpu: Place) -> Result<Vec<CheckResult>> {
    let a = randn_cpu(&[33, 47])?;
    let b = randn_cpu(&[47, 29])?;
    let mut r = vec![
        check_op("matmul [33,47]·[47,29]", gpu, &[a.clone(), b.clone()], 1e-4, |x| {
            Ok(vec![paddle::matmul(&x[0], &x[1], false, false)?])
        })
        .await?,
    ];
    let p = randn_cpu(&[4, 16, 24])?;
    let q = randn_cpu(&[4, 20, 24])?;
    r.push(
        check_op("batched matmul, transpose_y", gpu, &[p, q], 1e-4, |x| {
            Ok(vec![paddle::matmul(&x[0], &x[1], false, true)?])
        })
        .await?,
    );
    r.extend(check_grad("matmul", gpu, &[a, b], 1e-4, |x| paddle::matmul(&x[0], &x[1], false, false)).await?);
    Ok(r)
}

async fn reductions(gpu: Place) -> Result<Vec<CheckResult>> {
    let x = randn_cpu(&[37, 129])?;
    let mut r = vec![
        check_op("sum over axis 1", gpu, std::slice::from_ref(&x), 1e-5, |x| Ok(vec![x[0].sum(&[1], false)?])).await?,
        check_op("mean of all", gpu, std::slice::from_ref(&x), 1e-5, |x| Ok(vec![x[0].mean(&[], false)?])).await?,
        check_op("max over axis 0", gpu, std::slice::from_ref(&x), 0.0, |x| Ok(vec![x[0].max(&[0], false)?])).await?,
        check_op("argmax over axis 1", gpu, std::slice::from_ref(&x), 0.0, |x| Ok(vec![x[0].argmax(Some(1), false)?]))
            .await?,
        check_op("logsumexp over axis 1", gpu, std::slice::from_ref(&x), 1e-5, |x| {
            Ok(vec![x[0].logsumexp(&[1], false)?])
        })
        .await?,
    ];
    r.extend(check_grad("mean over axis 0", gpu, &[x], 1e-5, |x| x[0].mean(&[0], true)).await?);
    Ok(r)
}

async fn conv2d(gpu: Place) -> Result<Vec<CheckResult>> {
    let x = randn_cpu(&[2, 3, 11, 11])?;
    let w = randn_cpu(&[5, 3, 3, 3])?;
    let b = randn_cpu(&[5])?;
    let opts = Conv2dOptions::new().stride(2).padding(1);
    let mut r = vec![
        check_op("conv2d 3→5, 3×3, stride 2, padding 1", gpu, &[x.clone(), w.clone(), b.clone()], 1e-4, |t| {
            Ok(vec![paddle::conv2d(&t[0], &t[1], Some(&t[2]), &opts)?])
        })
        .await?,
    ];
    let plain = Conv2dOptions::new();
    r.extend(
        check_grad(
            "conv2d 5×5 (the MNIST layer's shape)",
            gpu,
            &[randn_cpu(&[2, 4, 12, 12])?, randn_cpu(&[6, 4, 5, 5])?, randn_cpu(&[6])?],
            1e-4,
            |t| paddle::conv2d(&t[0], &t[1], Some(&t[2]), &plain),
        )
        .await?,
    );
    Ok(r)
}

async fn pools(gpu: Place) -> Result<Vec<CheckResult>> {
    let x = randn_cpu(&[2, 3, 9, 9])?;
    let max2 = Pool2dOptions::new(2).stride(2);
    let avg3 = Pool2dOptions::new(3).stride(2).padding(1);
    let mut r = vec![
        check_op("max_pool2d 2×2 stride 2", gpu, std::slice::from_ref(&x), 0.0, |t| {
            Ok(vec![paddle::max_pool2d(&t[0], &max2)?])
        })
        .await?,
        check_op("avg_pool2d 3×3 stride 2 padding 1", gpu, std::slice::from_ref(&x), 1e-6, |t| {
            Ok(vec![paddle::avg_pool2d(&t[0], &avg3)?])
        })
        .await?,
    ];
    r.extend(
        check_grad("max_pool2d", gpu, std::slice::from_ref(&x), 1e-6, |t| paddle::max_pool2d(&t[0], &max2)).await?,
    );
    r.extend(check_grad("avg_pool2d", gpu, &[x], 1e-6, |t| paddle::avg_pool2d(&t[0], &avg3)).await?);
    Ok(r)
}

async fn softmax(gpu: Place) -> Result<Vec<CheckResult>> {
    let x = randn_cpu(&[6, 10])?.mul_scalar(3.0)?;
    let mut r = vec![
        check_op("softmax over the last axis", gpu, std::slice::from_ref(&x), 1e-6, |t| {
            Ok(vec![paddle::softmax(&t[0], -1)?])
        })
        .await?,
        check_op("log_softmax over axis 0", gpu, std::slice::from_ref(&x), 1e-5, |t| {
            Ok(vec![paddle::log_softmax(&t[0], 0)?])
        })
        .await?,
    ];
    r.extend(check_grad("softmax", gpu, &[x], 1e-5, |t| paddle::softmax(&t[0], -1)).await?);
    // Rows of 300: a workgroup per row on the GPU (short rows above take one invocation each).
    let wide = randn_cpu(&[6, 300])?.mul_scalar(3.0)?;
    r.extend(
        check_grad("log_softmax over rows of 300", gpu, std::slice::from_ref(&wide), 1e-5, |t| {
            paddle::log_softmax(&t[0], -1)
        })
        .await?,
    );
    r.extend(check_grad("softmax over rows of 300", gpu, &[wide], 1e-5, |t| paddle::softmax(&t[0], -1)).await?);
    Ok(r)
}

async fn layer_norm(gpu: Place) -> Result<Vec<CheckResult>> {
    // Rows of 300 (a workgroup per row, held in registers) and of 12 (one invocation per row),
    // forward and the gradients of x, weight and bias.
    let mut r = Vec::new();
    for (rows, d) in [(6, 300), (40, 12)] {
        let inputs = [randn_cpu(&[rows, d])?.mul_scalar(2.0)?, randn_cpu(&[d])?, randn_cpu(&[d])?];
        let name = format!("layer_norm over rows of {d}");
        r.extend(
            check_grad(&name, gpu, &inputs, 1e-4, |t| paddle::layer_norm(&t[0], &[d], Some(&t[1]), Some(&t[2]), 1e-5))
                .await?,
        );
    }
    Ok(r)
}

/// A small MLP trained one step on both places from the same weights: the loss and every
/// parameter's gradient must agree.
#[derive(nn::Layer)]
struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.relu()?)
    }
}

async fn mlp_backward(gpu: Place) -> Result<Vec<CheckResult>> {
    let cpu_model = paddle::guard(Place::Cpu, || -> Result<Mlp> {
        Ok(Mlp { fc1: nn::Linear::new(12, 32)?, fc2: nn::Linear::new(32, 4)? })
    })?;
    let mut gpu_model = paddle::guard(gpu, || -> Result<Mlp> {
        Ok(Mlp { fc1: nn::Linear::new(12, 32)?, fc2: nn::Linear::new(32, 4)? })
    })?;
    gpu_model.set_state_dict(&cpu_model.state_dict())?;
    let x = randn_cpu(&[16, 12])?;
    let label = paddle::randint_on(0, 4, [16, 1], DType::Int64, Place::Cpu)?;
    let loss = |model: &Mlp, x: &Tensor, label: &Tensor| -> Result<Tensor> {
        let l = nn::functional::cross_entropy(&model.forward(x)?, label, &CrossEntropyOptions::default())?;
        l.backward()?;
        Ok(l)
    };
    let cpu_loss = loss(&cpu_model, &x, &label)?;
    let gpu_loss = loss(&gpu_model, &x.to(gpu)?, &label.to(gpu)?)?;
    let mut r = vec![compare("MLP 12→32→4 cross-entropy loss", &[gpu_loss], &[cpu_loss], 1e-5).await?];
    for ((name, c), (_, g)) in cpu_model.named_parameters().iter().zip(gpu_model.named_parameters()) {
        let (Some(cg), Some(gg)) = (c.grad(), g.grad()) else {
            return Err(paddle::Error::invalid("check", format!("MLP parameter {name} has no gradient")));
        };
        r.push(compare(&format!("MLP backward: d {name}"), &[gg], &[cg], 1e-5).await?);
    }
    Ok(r)
}
