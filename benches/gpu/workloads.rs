//! The workload list shared by dygraph and `torch_bench.py`: sizes (full, or reduced for
//! software adapters), the work each iteration does, and the spec lines the Python side reads.

/// What one timed iteration does.
#[derive(Clone, Debug)]
pub enum Kind {
    /// `[m, k] · [k, n]` float32.
    Matmul { m: usize, k: usize, n: usize },
    /// `[n, n] · [n, n]` float16, with `FLAGS_use_cooperative_matrix` set to `coop` (tensor
    /// cores where the adapter has cooperative matrices; the plain float16 kernels else).
    MatmulF16 { n: usize, coop: bool },
    /// NCHW `x` convolved with OIHW `w` plus a bias, stride 1, zero padding `pad`.
    Conv { x: [usize; 4], w: [usize; 4], pad: usize },
    /// A new tensor holding a copy of `n` floats (`clone_data`, a buffer-to-buffer copy).
    Copy { n: usize },
    /// `a + b` over `n` floats into a new tensor.
    Add { n: usize },
    /// Softmax over the last axis of `[rows, cols]`.
    Softmax { rows: usize, cols: usize },
    /// Layer norm over the last axis of `[rows, cols]`, with weight and bias.
    LayerNorm { rows: usize, cols: usize },
    /// `chain` dependent `t = t + y` on `n` floats, timed by the calling thread's CPU time.
    HostAdd { n: usize, chain: usize },
    /// `chain` dependent `t = t · a` on `n × n` matrices, same clock.
    HostMatmul { n: usize, chain: usize },
    /// One Adam step of the MNIST network on a synthetic batch.
    MnistTrain { batch: usize },
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Key shared with the Python results.
    pub id: String,
    pub kind: Kind,
}

/// How a row's figure is derived from seconds per iteration.
pub enum Work {
    Flops(f64),
    Bytes(f64),
    /// Host time per op: the seconds are per op already.
    HostOp,
    Images(usize),
}

impl Workload {
    fn new(id: impl Into<String>, kind: Kind) -> Self {
        Workload { id: id.into(), kind }
    }

    /// The row's label.
    pub fn label(&self) -> String {
        match &self.kind {
            Kind::Matmul { m, k, n } if m == k && k == n => format!("matmul {m}³ f32"),
            Kind::Matmul { m, k, n } => format!("matmul {m}×{k}·{k}×{n} f32"),
            Kind::MatmulF16 { n, coop: true } => format!("matmul {n}³ f16 (cooperative matrices where present)"),
            Kind::MatmulF16 { n, coop: false } => format!("matmul {n}³ f16 (plain kernels)"),
            Kind::Conv { x, w, pad } => {
                let what = match self.id.as_str() {
                    "conv_mnist1" => "conv2d MNIST conv1",
                    "conv_mnist2" => "conv2d MNIST conv2",
                    _ => "conv2d ResNet 3×3",
                };
                let p = if *pad > 0 { format!(", pad {pad}") } else { String::new() };
                format!("{what} {}×{}×{}×{} → {}, {}×{}{p}", x[0], x[1], x[2], x[3], w[0], w[2], w[3])
            }
            Kind::Copy { n } => format!("copy {} f32 (buffer copy)", count(*n)),
            Kind::Add { n } => format!("add {} f32 (a + b)", count(*n)),
            Kind::Softmax { rows, cols } => format!("softmax rows {rows}×{cols}"),
            Kind::LayerNorm { rows, cols } => format!("layer_norm rows {rows}×{cols} (+ weight, bias)"),
            Kind::HostAdd { n, chain } => format!("host cost: add {} (chain of {chain})", count(*n)),
            Kind::HostMatmul { n, chain } => format!("host cost: matmul {n}×{n} (chain of {chain})"),
            Kind::MnistTrain { batch } => format!("MNIST train step, batch {batch} (synthetic data)"),
        }
    }

    pub fn work(&self) -> Work {
        const F32: f64 = 4.0;
        match &self.kind {
            Kind::Matmul { m, k, n } => Work::Flops(2.0 * (m * k * n) as f64),
            Kind::MatmulF16 { n, .. } => Work::Flops(2.0 * (n * n * n) as f64),
            Kind::Conv { x, w, pad } => {
                let (oh, ow) = (x[2] + 2 * pad + 1 - w[2], x[3] + 2 * pad + 1 - w[3]);
                Work::Flops(2.0 * (x[0] * w[0] * oh * ow * w[1] * w[2] * w[3]) as f64)
            }
            // Read once, written once (the add reads two operands).
            Kind::Copy { n } => Work::Bytes(2.0 * F32 * *n as f64),
            Kind::Add { n } => Work::Bytes(3.0 * F32 * *n as f64),
            Kind::Softmax { rows, cols } | Kind::LayerNorm { rows, cols } => {
                Work::Bytes(2.0 * F32 * (rows * cols) as f64)
            }
            Kind::HostAdd { .. } | Kind::HostMatmul { .. } => Work::HostOp,
            Kind::MnistTrain { batch } => Work::Images(*batch),
        }
    }

    /// The spec line `torch_bench.py` reads (flat JSON).
    pub fn spec_line(&self) -> String {
        let fields = match &self.kind {
            Kind::Matmul { m, k, n } => format!(r#""kind":"matmul","m":{m},"k":{k},"n":{n}"#),
            Kind::MatmulF16 { n, .. } => format!(r#""kind":"matmul_f16","n":{n}"#),
            Kind::Conv { x, w, pad } => format!(r#""kind":"conv2d","x":{x:?},"w":{w:?},"pad":{pad}"#),
            Kind::Copy { n } => format!(r#""kind":"copy","n":{n}"#),
            Kind::Add { n } => format!(r#""kind":"add","n":{n}"#),
            Kind::Softmax { rows, cols } => format!(r#""kind":"softmax","rows":{rows},"cols":{cols}"#),
            Kind::LayerNorm { rows, cols } => format!(r#""kind":"layer_norm","rows":{rows},"cols":{cols}"#),
            Kind::HostAdd { n, chain } => format!(r#""kind":"host_add","n":{n},"chain":{chain}"#),
            Kind::HostMatmul { n, chain } => format!(r#""kind":"host_matmul","n":{n},"chain":{chain}"#),
            Kind::MnistTrain { batch } => format!(r#""kind":"mnist_train","batch":{batch}"#),
        };
        format!(r#"{{"id":"{}",{fields}}}"#, self.id)
    }
}

/// `67108864` → `64M`.
fn count(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}k", n >> 10),
        n => n.to_string(),
    }
}

/// The workloads: the full sizes, or `quick` ones a software adapter (lavapipe) runs in
/// seconds. `max_floats` caps the copy and add tensors at the device's largest binding.
pub fn workloads(quick: bool, max_floats: usize) -> Vec<Workload> {
    let big = |n: usize| n.min(1 << max_floats.max(1).ilog2());
    let (mm, resnet_batch, resnet_hw, stream, rows) =
        if quick { ([256, 1024], 4, 28, 1 << 22, 1024) } else { ([1024, 4096], 32, 56, 1 << 26, 4096) };
    let mut w: Vec<Workload> =
        mm.iter().map(|&s| Workload::new(format!("matmul_{s}"), Kind::Matmul { m: s, k: s, n: s })).collect();
    let half = mm[1];
    w.extend([
        Workload::new(format!("matmul_f16_{half}"), Kind::MatmulF16 { n: half, coop: true }),
        Workload::new(format!("matmul_f16_plain_{half}"), Kind::MatmulF16 { n: half, coop: false }),
        Workload::new("conv_mnist1", Kind::Conv { x: [64, 1, 28, 28], w: [20, 1, 5, 5], pad: 0 }),
        Workload::new("conv_mnist2", Kind::Conv { x: [64, 20, 12, 12], w: [50, 20, 5, 5], pad: 0 }),
        Workload::new(
            "conv_resnet",
            Kind::Conv { x: [resnet_batch, 64, resnet_hw, resnet_hw], w: [64, 64, 3, 3], pad: 1 },
        ),
        Workload::new("copy", Kind::Copy { n: big(stream) }),
        Workload::new("add", Kind::Add { n: big(stream) }),
        Workload::new("softmax", Kind::Softmax { rows, cols: 1024 }),
        Workload::new("layer_norm", Kind::LayerNorm { rows, cols: 1024 }),
        Workload::new("host_add", Kind::HostAdd { n: 1024, chain: 100 }),
        Workload::new("host_matmul", Kind::HostMatmul { n: 16, chain: 100 }),
        Workload::new("mnist_train", Kind::MnistTrain { batch: 64 }),
    ]);
    w
}

/// Float32 peak (TFLOP/s, non-tensor-core) and where it came from: `DYGRAPH_PEAK_TFLOPS`, else
/// the adapter's name looked up in a short table of datasheet figures.
pub fn peak_tflops(adapter: &str) -> (Option<f64>, String) {
    if let Ok(v) = std::env::var("DYGRAPH_PEAK_TFLOPS") {
        return match v.trim().parse::<f64>() {
            Ok(p) if p > 0.0 => (Some(p), "DYGRAPH_PEAK_TFLOPS".into()),
            _ => (None, format!("DYGRAPH_PEAK_TFLOPS={v:?} is not a positive number")),
        };
    }
    let name = adapter.to_uppercase();
    // First match wins: the specific names come before the names they contain.
    const TABLE: &[(&str, f64, &str)] = &[
        ("H200", 67.0, "H200"),
        ("H100 PCIE", 51.0, "H100 PCIe"),
        ("H100 NVL", 60.0, "H100 NVL"),
        ("H100", 67.0, "H100 SXM"),
        ("A100", 19.5, "A100"),
        ("L40S", 91.6, "L40S"),
        ("L40", 90.5, "L40"),
        ("L4", 30.3, "L4"),
        ("RTX 4090", 82.6, "RTX 4090"),
    ];
    match TABLE.iter().find(|(key, _, _)| name.contains(key)) {
        Some((_, p, what)) => (Some(*p), format!("{what} datasheet, by adapter name; DYGRAPH_PEAK_TFLOPS overrides")),
        None => (None, "adapter not in the name table; set DYGRAPH_PEAK_TFLOPS".into()),
    }
}
