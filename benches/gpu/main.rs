//! GPU benchmark harness: the same workloads timed on `Place::Gpu(0)` eagerly and as static
//! Programs run by `static_::Executor`, printed as one markdown table beside PyTorch's figures
//! (eager and CUDA graphs) when `torch_bench.py` produced them. `bash benches/gpu/run.sh`
//! builds this target, runs PyTorch when it is installed and merges both; by hand:
//!
//! ```text
//! cargo bench --bench gpu --locked -- [--quick | --full] [--repeats N] [--torch FILE]
//!     [--torch-missing WHY] [--spec] [--info] [--only ID-PART]
//! ```
//!
//! `--spec` prints the workload list as JSON lines (what `torch_bench.py` reads) and `--info`
//! the adapter; `--only matmul` keeps the workloads whose id contains `matmul` (ids as in
//! `--spec`); a software adapter (device type `Cpu`, e.g. Mesa lavapipe) gets reduced sizes
//! unless `--full`. Without arguments (`cargo test --benches`) every workload runs once at the
//! reduced sizes, as a smoke test.
//!
//! Timing: after warm-up calls (pipelines compiled, buffer pool filled; on a hardware GPU for
//! a second, so that its clock has ramped up), N calls are timed
//! with `Instant` up to the point where the device has finished them, N chosen so a repeat
//! lasts about a quarter of a second; the cell is the median time per call over the repeats.
//! Host-cost rows time the calling thread's CPU while ops are recorded, without waiting. A cell
//! still running after `DYGRAPH_BENCH_TIMEOUT_S` (300) seconds ends the run with the table so
//! far and a failure.

#[path = "../common/mod.rs"]
mod common;
mod report;
mod workloads;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_ as st;
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, Conv2dOptions, DType, Place, Result, Tensor};

use report::{Cell, Context, Row};
use workloads::{Kind, Workload};

const GPU: Place = Place::Gpu(0);

/// How long and how often each cell is measured.
struct Settings {
    repeats: usize,
    /// Seconds one repeat aims at.
    target_s: f64,
    /// Seconds of calls before the timed ones, on a hardware GPU: its driver lowers the clock
    /// after a second or two idle and raises it again only under sustained load (an H100 ran
    /// at 345–570 MHz instead of 1980 through a workload timed right after a CPU-only set-up).
    warm_s: f64,
    max_iters: usize,
    /// Chained-op calls per host-cost repeat.
    host_calls: usize,
    smoke: bool,
}

#[derive(Default)]
struct Args {
    quick: Option<bool>,
    repeats: Option<usize>,
    torch: Option<String>,
    torch_missing: Option<String>,
    spec: bool,
    info: bool,
    smoke: bool,
    only: Option<String>,
}

fn parse_args() -> std::result::Result<Args, String> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args { smoke: raw.is_empty(), ..Args::default() };
    let mut it = raw.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            // Passed by `cargo bench`.
            "--bench" => {}
            "--quick" => a.quick = Some(true),
            "--full" => a.quick = Some(false),
            "--spec" => a.spec = true,
            "--info" => a.info = true,
            "--repeats" => {
                a.repeats = Some(value("--repeats")?.parse().map_err(|e| format!("--repeats: {e}"))?);
            }
            "--torch" => a.torch = Some(value("--torch")?),
            "--torch-missing" => a.torch_missing = Some(value("--torch-missing")?),
            "--only" => a.only = Some(value("--only")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

use common::thread_cpu;

const HOST_CLOCK: &str = if cfg!(target_os = "linux") { "calling thread's CPU time" } else { "wall time" };

/// Waits until the device has run everything recorded so far. `sync()` submits but does
/// not wait for the device to finish, so a one-element readback follows it: the readback's
/// submission completes only after every earlier one on the queue.
struct Waiter {
    probe: Tensor,
}

impl Waiter {
    fn new() -> Result<Self> {
        Ok(Waiter { probe: paddle::zeros_on([1], DType::Float32, GPU)? })
    }

    fn wait(&self) -> Result<()> {
        paddle::sync()?;
        self.probe.to_vec::<f32>()?;
        Ok(())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// Calls `f` once (compiling its pipelines, capturing a plan: host work that leaves the device
/// idle), then for `s.warm_s` seconds more, each call waited for.
fn warm_up(s: &Settings, w: &Waiter, f: &mut impl FnMut() -> Result<()>) -> Result<()> {
    f()?;
    w.wait()?;
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < s.warm_s {
        f()?;
        w.wait()?;
    }
    Ok(())
}

/// Seconds per call of `f`, device work included.
fn per_call(s: &Settings, w: &Waiter, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    warm_up(s, w, &mut f)?;
    let n = if s.smoke {
        1
    } else {
        let t = Instant::now();
        f()?;
        w.wait()?;
        ((s.target_s / t.elapsed().as_secs_f64()) as usize).clamp(1, s.max_iters)
    };
    let mut samples = Vec::with_capacity(s.repeats);
    for _ in 0..s.repeats {
        let t = Instant::now();
        for _ in 0..n {
            f()?;
        }
        w.wait()?;
        samples.push(t.elapsed().as_secs_f64() / n as f64);
    }
    Ok(median(samples))
}

/// The calling thread's CPU seconds per op of `f`, which records `ops` ops; the device's
/// execution is waited for between repeats, outside the clock.
fn host_per_op(s: &Settings, w: &Waiter, ops: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    warm_up(s, w, &mut f)?;
    let mut samples = Vec::with_capacity(s.repeats);
    for _ in 0..s.repeats {
        let t = thread_cpu();
        for _ in 0..s.host_calls {
            f()?;
        }
        samples.push((thread_cpu() - t).as_secs_f64() / (s.host_calls * ops) as f64);
        w.wait()?;
    }
    Ok(median(samples))
}

/// The input shapes of a workload's op.
fn input_shapes(kind: &Kind) -> Vec<Vec<usize>> {
    match *kind {
        Kind::Matmul { m, k, n } => vec![vec![m, k], vec![k, n]],
        Kind::MatmulF16 { n, .. } => vec![vec![n, n], vec![n, n]],
        Kind::Conv { x, w, .. } => vec![x.to_vec(), w.to_vec(), vec![w[0]]],
        Kind::Copy { n } => vec![vec![n]],
        Kind::Add { n } | Kind::HostAdd { n, .. } => vec![vec![n], vec![n]],
        Kind::Softmax { rows, cols } => vec![vec![rows, cols]],
        Kind::LayerNorm { rows, cols } => vec![vec![rows, cols], vec![cols], vec![cols]],
        Kind::HostMatmul { n, .. } => vec![vec![n, n], vec![n, n]],
        Kind::MnistTrain { .. } => vec![],
    }
}

/// The workload's op, on eager tensors or static variables alike.
fn apply(kind: &Kind, x: &[Tensor]) -> Result<Tensor> {
    match kind {
        Kind::Matmul { .. } | Kind::MatmulF16 { .. } => paddle::matmul(&x[0], &x[1], false, false),
        Kind::Conv { pad, .. } => paddle::conv2d(&x[0], &x[1], Some(&x[2]), &Conv2dOptions::new().padding(*pad)),
        Kind::Copy { .. } => x[0].clone_data(),
        Kind::Add { .. } => x[0].add(&x[1]),
        Kind::Softmax { .. } => paddle::softmax(&x[0], -1),
        Kind::LayerNorm { cols, .. } => paddle::layer_norm(&x[0], &[*cols], Some(&x[1]), Some(&x[2]), 1e-5),
        Kind::HostAdd { chain, .. } => (0..*chain).try_fold(x[0].clone(), |t, _| t.add(&x[1])),
        Kind::HostMatmul { chain, .. } => (0..*chain).try_fold(x[0].clone(), |t, _| t.matmul(&x[1])),
        Kind::MnistTrain { .. } => unreachable!("the MNIST step is not one op"),
    }
}

fn ops_per_call(kind: &Kind) -> Option<usize> {
    match kind {
        Kind::HostAdd { chain, .. } | Kind::HostMatmul { chain, .. } => Some(*chain),
        _ => None,
    }
}

/// Random inputs on the GPU (float16 for the float16 product, which also sets
/// `FLAGS_use_cooperative_matrix` as the workload asks); the host-cost matmul's are scaled so
/// the chain stays finite.
fn inputs(kind: &Kind) -> Result<Vec<Tensor>> {
    let scale = if matches!(kind, Kind::HostMatmul { .. }) { 0.25 } else { 1.0 };
    let dtype = if let Kind::MatmulF16 { coop, .. } = kind {
        paddle::set_flags(&[("FLAGS_use_cooperative_matrix", if *coop { "1" } else { "0" })])?;
        paddle::DType::Float16
    } else {
        paddle::DType::Float32
    };
    input_shapes(kind).into_iter().map(|s| paddle::randn_on(s, GPU)?.scale(scale, 0.0)?.cast(dtype)).collect()
}

fn eager(kind: &Kind, s: &Settings, w: &Waiter) -> Result<f64> {
    let x = inputs(kind)?;
    let call = || apply(kind, &x).map(drop);
    match ops_per_call(kind) {
        Some(ops) => host_per_op(s, w, ops, call),
        None => per_call(s, w, call),
    }
}

fn static_(kind: &Kind, s: &Settings, w: &Waiter) -> Result<f64> {
    let x = inputs(kind)?;
    let names: Vec<String> = (0..x.len()).map(|i| format!("x{i}")).collect();
    let (main, startup) = (st::Program::new(), st::Program::new());
    let out = st::program_guard(&main, &startup, || -> Result<Tensor> {
        let vars = x
            .iter()
            .zip(&names)
            .map(|(t, n)| st::data(n, &t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(), t.dtype()))
            .collect::<Result<Vec<_>>>()?;
        apply(kind, &vars)
    })?;
    let exe = st::Executor::with_scope(GPU, st::Scope::new());
    let feed: Vec<(&str, &Tensor)> = names.iter().map(|n| n.as_str()).zip(&x).collect();
    let call = || exe.run(&main, &feed, &[&out]).map(drop);
    match ops_per_call(kind) {
        Some(ops) => host_per_op(s, w, ops, call),
        None => per_call(s, w, call),
    }
}

/// A synthetic batch: images in [−1, 1] (the examples' scaling) and labels `[batch, 1]`.
fn mnist_batch(batch: usize) -> Result<(Tensor, Tensor)> {
    Ok((
        paddle::uniform_on([batch, 1, 28, 28], DType::Float32, -1.0, 1.0, GPU)?,
        paddle::randint_on(0, 10, [batch, 1], DType::Int64, GPU)?,
    ))
}

/// One Adam step (forward, loss, backward, update) of the examples' MNIST network.
fn mnist_eager(batch: usize, s: &Settings, w: &Waiter) -> Result<f64> {
    paddle::guard(GPU, || {
        let (x, y) = mnist_batch(batch)?;
        let net = MnistNet::new()?;
        let mut opt = Adam::new(1e-3, net.parameters());
        per_call(s, w, || {
            let loss = mnist_loss(&net.forward(&x)?, &y)?;
            loss.backward()?;
            opt.step()?;
            opt.clear_grad();
            Ok(())
        })
    })
}

/// The same step as `examples/static_mnist.rs`'s program: `minimize` appends backward and Adam.
fn mnist_static(batch: usize, s: &Settings, w: &Waiter) -> Result<f64> {
    paddle::guard(GPU, || {
        let (x, y) = mnist_batch(batch)?;
        let (main, startup) = (st::Program::new(), st::Program::new());
        let loss = st::program_guard(&main, &startup, || -> Result<Tensor> {
            let img = st::data("pixel", &[-1, 1, 28, 28], DType::Float32)?;
            let label = st::data("label", &[-1, 1], DType::Int64)?;
            let net = MnistNet::new()?;
            let loss = mnist_loss(&net.forward(&img)?, &label)?;
            Adam::new(1e-3, net.parameters()).minimize(&loss)?;
            Ok(loss)
        })?;
        let exe = st::Executor::with_scope(GPU, st::Scope::new());
        exe.run(&startup, &[], &[] as &[&str])?;
        // The host CPU of each run alone (the waits for the device excluded); the median
        // leaves out the first run, which compiles and captures the plan.
        let mut cpu = Vec::new();
        let secs = per_call(s, w, || {
            let t = thread_cpu();
            let out = exe.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).map(drop);
            cpu.push((thread_cpu() - t).as_secs_f64() * 1e6);
            out
        });
        if cpu.len() > 1 {
            cpu.remove(0);
        }
        cpu.sort_by(f64::total_cmp);
        let host_us = cpu.get(cpu.len() / 2).copied().unwrap_or(f64::NAN);
        match (exe.last_plan(), exe.interpreted_because()) {
            (Some(p), _) => eprintln!(
                "  static: a replayed plan of {} dispatches, median {host_us:.0} µs host CPU per run",
                p.dispatches
            ),
            (None, why) => eprintln!(
                "  static: interpreted ({}), median {host_us:.0} µs host CPU per run",
                why.unwrap_or_else(|| "plans off".into())
            ),
        }
        secs
    })
}

fn cell(r: Result<f64>) -> Cell {
    match r {
        Ok(secs) => Cell::Secs(secs),
        Err(e) => Cell::Failed(e.to_string().replace('\n', " ")),
    }
}

/// Everything the table needs besides the measured rows, shared with the watchdog.
struct Reporter {
    header: String,
    list: Vec<Workload>,
    peak: Option<f64>,
    torch: Option<report::Torch>,
    torch_missing: Option<String>,
}

impl Reporter {
    /// PyTorch's (eager, graph) cells for a workload.
    fn torch_cells(&self, id: &str) -> (Cell, Cell) {
        match self.torch.as_ref().map(|t| t.results.get(id)) {
            Some(Some((e, g))) => (e.clone(), g.clone()),
            Some(None) => (Cell::Failed("no result from torch_bench.py".into()), Cell::Na),
            None => (Cell::Na, Cell::Na),
        }
    }

    fn row(&self, workload: &Workload, eager: Cell, static_: Cell) -> Row {
        let (torch_eager, torch_graph) = self.torch_cells(&workload.id);
        Row { workload: workload.clone(), eager, static_, torch_eager, torch_graph }
    }

    /// Prints the header and the table; true when a cell failed.
    fn print(&self, rows: &[Row]) -> bool {
        let cx = Context {
            peak: self.peak,
            host_clock: HOST_CLOCK,
            torch: self.torch.as_ref(),
            torch_missing: self.torch_missing.clone(),
        };
        let (text, failed) = report::render(rows, &cx);
        println!("{}\n{text}", self.header);
        failed
    }
}

/// What has been measured, and what is being measured since when (for the watchdog).
#[derive(Default)]
struct Progress {
    rows: Vec<Row>,
    /// The current workload's eager cell, once measured.
    eager: Option<Cell>,
    started: Option<Instant>,
}

/// Ends the process with the table so far when one cell runs longer than `limit`: a hang in
/// the library or the driver must not keep an unattended run (or a lent GPU) waiting forever.
fn watchdog(limit: Duration, reporter: Arc<Reporter>, progress: Arc<Mutex<Progress>>) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
            if p.started.is_none_or(|t| t.elapsed() <= limit) {
                continue;
            }
            let hung = format!(
                "still running after {} s, stopped (a hang?); DYGRAPH_BENCH_TIMEOUT_S sets the limit, the rows after \
                 this one were not run",
                limit.as_secs()
            );
            let mut rows = std::mem::take(&mut p.rows);
            let current = reporter.list[rows.len()].clone();
            let (eager, static_) = match p.eager.take() {
                None => (Cell::Failed(hung), Cell::Na),
                Some(e) => (e, Cell::Failed(hung)),
            };
            eprintln!("gpu bench: {}: stopped after {} s", current.label(), limit.as_secs());
            rows.push(reporter.row(&current, eager, static_));
            for w in &reporter.list[rows.len()..] {
                rows.push(reporter.row(w, Cell::Na, Cell::Na));
            }
            reporter.print(&rows);
            std::process::exit(1);
        }
    });
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gpu bench: {e}\nusage: see the module documentation of benches/gpu/main.rs");
            return ExitCode::from(2);
        }
    };
    let info = match paddle::gpu_info(0) {
        Ok(i) => i,
        Err(e) => {
            if args.smoke && std::env::var("DYGRAPH_TEST_SKIP").is_ok_and(|v| v.split(',').any(|s| s == "gpu")) {
                eprintln!("gpu bench: skipped (DYGRAPH_TEST_SKIP=gpu): {e}");
                return ExitCode::SUCCESS;
            }
            eprintln!("gpu bench: no GPU adapter: {e}");
            return ExitCode::FAILURE;
        }
    };
    let software = info.device_type == "Cpu";
    let quick = args.smoke || args.quick.unwrap_or(software);
    let settings = match (args.smoke, quick) {
        (true, _) => Settings { repeats: 1, target_s: 0.0, warm_s: 0.0, max_iters: 1, host_calls: 1, smoke: true },
        (false, true) => {
            Settings { repeats: 5, target_s: 0.25, warm_s: 1.0, max_iters: 1000, host_calls: 10, smoke: false }
        }
        (false, false) => {
            Settings { repeats: 5, target_s: 0.25, warm_s: 1.0, max_iters: 1000, host_calls: 20, smoke: false }
        }
    };
    // A software adapter's speed does not ramp; one call warms its caches.
    let settings = Settings { warm_s: if software { 0.0 } else { settings.warm_s }, ..settings };
    let settings = Settings { repeats: args.repeats.unwrap_or(settings.repeats).max(1), ..settings };
    let mut list = workloads::workloads(quick, (info.max_binding_bytes / 4) as usize);
    if let Some(part) = &args.only {
        list.retain(|w| w.id.contains(part.as_str()));
    }
    if args.info {
        println!(
            "adapter: {} | backend: {} | device type: {} | driver: {} | float16 arithmetic: {} | subgroups: {:?}",
            info.name, info.backend, info.device_type, info.driver, info.shader_f16, info.subgroup_sizes
        );
        return ExitCode::SUCCESS;
    }
    if args.spec {
        println!(
            r#"{{"id":"_settings","repeats":{},"target_s":{},"warm_s":{},"max_iters":{},"host_calls":{},"smoke":{}}}"#,
            settings.repeats,
            settings.target_s,
            settings.warm_s,
            settings.max_iters,
            settings.host_calls,
            settings.smoke
        );
        for w in &list {
            println!("{}", w.spec_line());
        }
        return ExitCode::SUCCESS;
    }
    let torch = match &args.torch {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(report::read_torch(&text)),
            Err(e) => {
                eprintln!("gpu bench: cannot read PyTorch results {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let limit = match std::env::var("DYGRAPH_BENCH_TIMEOUT_S").map(|v| v.trim().parse::<u64>()) {
        Err(_) => 300,
        Ok(Ok(s)) if s > 0 => s,
        Ok(_) => {
            eprintln!("gpu bench: DYGRAPH_BENCH_TIMEOUT_S must be a positive number of seconds");
            return ExitCode::from(2);
        }
    };
    let (peak, peak_source) = workloads::peak_tflops(&info.name);
    let mode = match (settings.smoke, quick, software) {
        (true, ..) => "smoke test: every workload once at the reduced sizes (no arguments given)".to_string(),
        (_, true, true) => "reduced sizes: software adapter (device type Cpu), --full for the full list".into(),
        (_, true, false) => "reduced sizes (--quick)".into(),
        (_, false, _) => "full sizes".into(),
    };
    let header = format!(
        "dygraph on {} ({}, {}); float32 peak: {} ({peak_source})\n{mode}; median of {} repeats, device work \
         included\n",
        info.name,
        info.backend,
        info.device_type,
        peak.map_or("unknown".into(), |p| format!("{p} TFLOP/s")),
        settings.repeats,
    );
    let reporter = Arc::new(Reporter { header, list, peak, torch, torch_missing: args.torch_missing });
    let waiter = match Waiter::new() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("gpu bench: cannot allocate on {}: {e}", info.name);
            return ExitCode::FAILURE;
        }
    };
    let progress = Arc::new(Mutex::new(Progress::default()));
    watchdog(Duration::from_secs(limit), reporter.clone(), progress.clone());
    let lock = || progress.lock().unwrap_or_else(|e| e.into_inner());
    for w in &reporter.list {
        eprintln!("dygraph: {}", w.label());
        let t = Instant::now();
        lock().started = Some(Instant::now());
        let eager = cell(match w.kind {
            Kind::MnistTrain { batch } => mnist_eager(batch, &settings, &waiter),
            ref k => eager(k, &settings, &waiter),
        });
        {
            let mut p = lock();
            p.eager = Some(eager.clone());
            p.started = Some(Instant::now());
        }
        let static_ = cell(match w.kind {
            Kind::MnistTrain { batch } => mnist_static(batch, &settings, &waiter),
            ref k => static_(k, &settings, &waiter),
        });
        // The next workload starts from an empty pool (the large tensors are not kept around).
        let _ = paddle::empty_cache(0);
        let mut p = lock();
        p.eager = None;
        p.started = None;
        p.rows.push(reporter.row(w, eager, static_));
        eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
    }
    let rows = std::mem::take(&mut lock().rows);
    if reporter.print(&rows) { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
