//! Shared test helpers: the GPU place policy, fresh random inputs, closeness checks and
//! float64 finite-difference gradchecks.
#![allow(dead_code)]

pub mod cifar;

use std::sync::{Mutex, MutexGuard, OnceLock};

use dygraph::{DType, Place, Result, Tensor};

/// Checks of a kind this run was told to skip: `DYGRAPH_TEST_SKIP` lists kinds separated by
/// commas (`gpu`: no GPU adapter; `python`: no Python with safetensors and numpy). Without
/// the opt-out a missing adapter or tool fails the test that needs it.
pub fn skipping(kind: &str) -> bool {
    std::env::var("DYGRAPH_TEST_SKIP").is_ok_and(|v| v.split(',').any(|k| k.trim() == kind))
}

/// Records one skipped check and prints it, with the running count, where `cargo test` shows
/// it (written to the process's stderr directly, past the test harness's capture).
pub fn skip(kind: &str, what: &str, why: &str) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    let n = SKIPPED.fetch_add(1, Ordering::Relaxed) + 1;
    let line = format!("SKIPPED {kind} check ({n} skipped in this test binary so far): {what}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The GPU place the tests run on, printing the adapter once. Without an adapter the test
/// fails, unless `DYGRAPH_TEST_SKIP` contains `gpu`: then the skip is counted and printed and
/// `None` comes back.
#[track_caller]
pub fn gpu_or_skip() -> Option<Place> {
    static INFO: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    let info = INFO.get_or_init(|| match dygraph::gpu_info(0) {
        Ok(i) => {
            eprintln!("GPU adapter: {} ({}, {}, {})", i.name, i.backend, i.device_type, i.driver);
            Ok(i.name)
        }
        Err(e) => Err(e.to_string()),
    });
    match info {
        Ok(_) => Some(Place::Gpu(0)),
        Err(e) if skipping("gpu") => {
            skip("gpu", &std::panic::Location::caller().to_string(), e);
            None
        }
        Err(e) => panic!(
            "no GPU adapter ({e}); install Mesa's lavapipe (mesa-vulkan-drivers), or set \
             DYGRAPH_TEST_SKIP=gpu to skip the GPU checks (they are counted and printed)"
        ),
    }
}

/// The CPU and, when there is an adapter, the GPU (see [`gpu_or_skip`]).
#[track_caller]
pub fn places() -> Vec<Place> {
    std::iter::once(Place::Cpu).chain(gpu_or_skip()).collect()
}

/// The generator behind `dygraph::seed` is process-wide, as in Paddle: a test that seeds and
/// expects its own draws, and a test that draws at all (it would take numbers from another's
/// stream), holds this lock while it runs. Taking it again on a thread that holds it is a
/// no-op, so helpers may take it too.
pub fn generator_lock() -> GeneratorGuard {
    static GENERATOR: Mutex<()> = Mutex::new(());
    thread_local! {
        static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let outer = HELD.with(|h| h.get() == 0);
    let guard = outer.then(|| GENERATOR.lock().unwrap_or_else(|e| e.into_inner()));
    HELD.with(|h| h.set(h.get() + 1));
    GeneratorGuard { _guard: guard, held: &HELD }
}

/// What [`generator_lock`] returns: the lock, released when the outermost guard drops.
pub struct GeneratorGuard {
    _guard: Option<MutexGuard<'static, ()>>,
    held: &'static std::thread::LocalKey<std::cell::Cell<usize>>,
}

impl Drop for GeneratorGuard {
    fn drop(&mut self) {
        self.held.with(|h| h.set(h.get() - 1));
    }
}

/// The seed of this test run's random inputs: `DYGRAPH_TEST_SEED` or fresh from the clock.
pub fn run_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let s = std::env::var("DYGRAPH_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        eprintln!("random inputs seeded with DYGRAPH_TEST_SEED={s}");
        s
    })
}

/// A small deterministic generator for host-side test data (splitmix64).
pub struct Rng(u64);

impl Rng {
    /// A generator for this run, distinct per `stream`.
    pub fn new(stream: u64) -> Self {
        Rng(run_seed() ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// Uniform values kept at least `gap` away from zero (away from kinks like relu's).
    pub fn vec_away_from_zero(&mut self, n: usize, lo: f64, hi: f64, gap: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                loop {
                    let v = self.uniform(lo, hi);
                    if v.abs() >= gap {
                        break v;
                    }
                }
            })
            .collect()
    }

    pub fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n).map(|_| lo + (self.next_u64() % (hi - lo) as u64) as i64).collect()
    }
}

/// A tensor of `dtype` on `place` from f64 values.
pub fn tensor(values: &[f64], shape: &[usize], dtype: DType, place: Place) -> Tensor {
    Tensor::from_vec_on(values.to_vec(), shape, Place::Cpu).unwrap().cast(dtype).unwrap().to(place).unwrap()
}

/// `Ok` when every element satisfies `|a − b| ≤ atol + rtol·|b|` (NaN equals only NaN,
/// an infinity only the same infinity); else the first offending element.
pub fn try_allclose(a: &[f64], b: &[f64], atol: f64, rtol: f64) -> std::result::Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("lengths differ: {} vs {}", a.len(), b.len()));
    }
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let ok = if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        if !ok {
            return Err(format!(
                "element {i}: {x} vs expected {y} (|diff| {:e} > atol {atol:e} + rtol {rtol:e}·|expected|)",
                (x - y).abs()
            ));
        }
    }
    Ok(())
}

/// `Err` unless `actual` matches `expected` element-wise with `atol` and `rtol`, naming
/// `what` and the run seed.
pub fn check_allclose(
    what: &str,
    actual: &[f64],
    expected: &[f64],
    atol: f64,
    rtol: f64,
) -> std::result::Result<(), String> {
    let show = |v: &[f64]| format!("{:?}", &v[..v.len().min(16)]);
    try_allclose(actual, expected, atol, rtol).map_err(|m| {
        format!("{what}: {m} (seed {})\n actual:   {}\n expected: {}", run_seed(), show(actual), show(expected))
    })
}

/// `check_allclose` with `atol = rtol = tol`.
pub fn check_close(what: &str, actual: &[f64], expected: &[f64], tol: f64) -> std::result::Result<(), String> {
    check_allclose(what, actual, expected, tol, tol)
}

/// Asserts `check_close`.
#[track_caller]
pub fn assert_close(what: &str, actual: &[f64], expected: &[f64], tol: f64) {
    if let Err(m) = check_close(what, actual, expected, tol) {
        panic!("{m}");
    }
}

/// `Err` unless the values are identical (exact dtypes: ints and bools), naming `what`.
pub fn check_exact(what: &str, actual: &[f64], expected: &[f64]) -> std::result::Result<(), String> {
    if actual.len() != expected.len() {
        return Err(format!("{what}: lengths differ: {} vs {}", actual.len(), expected.len()));
    }
    match actual.iter().zip(expected).position(|(a, e)| a != e) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {} but expected {} (seed {})\n actual:   {:?}\n expected: {:?}",
            actual[i],
            expected[i],
            run_seed(),
            &actual[..actual.len().min(16)],
            &expected[..expected.len().min(16)]
        )),
    }
}

/// Runs `f`, turning a panic into `Some(message)`, so one test can check many ops and report
/// every failure at once.
pub fn catch(name: &str, f: impl FnOnce()) -> Option<String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(()) => None,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into());
            Some(format!("{name}: {msg}"))
        }
    }
}

/// Panics listing every failure, if any.
pub fn report(what: &str, failures: &[String]) {
    assert!(failures.is_empty(), "{what}: {} failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// The values of `t` as f64 (any dtype, any place).
pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

/// Finite-difference gradient check in float64 on the CPU: for a random cotangent `v`,
/// compares the autograd gradient of `Σ f(inputs)·v` with central differences. `inputs`
/// are host values and shapes; returns an error message on mismatch.
pub fn gradcheck(
    name: &str,
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[(Vec<f64>, Vec<usize>)],
) -> std::result::Result<(), String> {
    let eps = 1e-6;
    // Central differences in float64: truncation O(eps²) and rounding O(1e-16·|loss|/eps).
    let (atol, rtol) = (1e-6, 1e-5);
    let make = |vals: &[Vec<f64>]| -> Vec<Tensor> {
        vals.iter()
            .zip(inputs)
            .map(|(v, (_, s))| {
                let t = Tensor::from_vec_on(v.clone(), s, Place::Cpu).unwrap();
                t.set_stop_gradient(false);
                t
            })
            .collect()
    };
    let base: Vec<Vec<f64>> = inputs.iter().map(|(v, _)| v.clone()).collect();
    let xs = make(&base);
    let out = f(&xs).map_err(|e| format!("{name}: forward failed: {e}"))?;
    let mut rng = Rng::new(0xC0FFEE ^ name.len() as u64);
    let v = Tensor::from_vec_on(rng.vec(out.numel(), -1.0, 1.0), out.shape(), Place::Cpu).unwrap();
    let loss = |t: &Tensor| -> f64 { values(&t.mul(&v).unwrap().sum(&[], false).unwrap())[0] };
    out.mul(&v).unwrap().sum(&[], false).unwrap().backward().map_err(|e| format!("{name}: backward failed: {e}"))?;
    for (i, x) in xs.iter().enumerate() {
        let analytic = match x.grad() {
            Some(g) => values(&g),
            None => vec![0.0; x.numel()],
        };
        for j in 0..x.numel() {
            let mut plus = base.clone();
            plus[i][j] += eps;
            let mut minus = base.clone();
            minus[i][j] -= eps;
            let lp = f(&make(&plus)).map(|t| loss(&t)).map_err(|e| e.to_string())?;
            let lm = f(&make(&minus)).map(|t| loss(&t)).map_err(|e| e.to_string())?;
            let numeric = (lp - lm) / (2.0 * eps);
            let a = analytic[j];
            if (a - numeric).abs() > atol + rtol * numeric.abs() {
                return Err(format!(
                    "{name}: d/d input{i}[{j}]: analytic {a} vs numeric {numeric} (seed {})",
                    run_seed()
                ));
            }
        }
    }
    Ok(())
}

/// Runs `f` on the same float32 inputs on the CPU and on the GPU, and compares the outputs
/// and the gradients of `Σ f·v` for a random `v` (relative error `tol`).
pub fn gpu_matches_cpu(
    name: &str,
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[(Vec<f64>, Vec<usize>)],
    differentiable: bool,
    tol: f64,
) {
    let Some(gpu) = gpu_or_skip() else { return };
    let mut results = Vec::new();
    for place in [Place::Cpu, gpu] {
        let xs: Vec<Tensor> = inputs
            .iter()
            .map(|(v, s)| {
                let t = tensor(v, s, DType::Float32, place);
                t.set_stop_gradient(!differentiable);
                t
            })
            .collect();
        let out = f(&xs).unwrap_or_else(|e| panic!("{name} on {place}: {e}"));
        let mut grads = Vec::new();
        if differentiable {
            let mut rng = Rng::new(77);
            let v = tensor(&rng.vec(out.numel(), -1.0, 1.0), out.shape(), out.dtype(), place);
            out.mul(&v)
                .unwrap()
                .sum(&[], false)
                .unwrap()
                .backward()
                .unwrap_or_else(|e| panic!("{name} backward on {place}: {e}"));
            grads = xs.iter().map(|x| x.grad().map(|g| values(&g))).collect::<Vec<Option<Vec<f64>>>>();
            // An input may get no gradient (one the op is constant in), but not every input.
            assert!(grads.iter().any(Option::is_some), "{name}: no input got a gradient on {place}");
        }
        results.push((out.shape().to_vec(), values(&out), grads));
    }
    let (cpu, gpu) = (&results[0], &results[1]);
    assert_eq!(cpu.0, gpu.0, "{name}: shapes differ between CPU and GPU");
    assert_close(&format!("{name} forward GPU vs CPU"), &gpu.1, &cpu.1, tol);
    for (i, (g, c)) in gpu.2.iter().zip(&cpu.2).enumerate() {
        match (g, c) {
            (Some(g), Some(c)) => assert_close(&format!("{name} grad of input {i} GPU vs CPU"), g, c, tol.max(1e-5)),
            (None, None) => {}
            _ => {
                panic!("{name}: input {i} has a gradient on one place only (GPU {}, CPU {})", g.is_some(), c.is_some())
            }
        }
    }
}

/// Runs test `name` again with `var` set to each of `values` in turn (see [`rerun_with`]), so
/// every GPU entry a per-process choice selects is checked on any machine. Counted as a skip
/// when `var` is already set (the whole run is then forced) or there is no adapter.
#[track_caller]
pub fn rerun_with_each(name: &str, var: &str, values: &[&str]) {
    if let Ok(v) = std::env::var(var) {
        skip(
            var,
            &format!("{name} with each {var} forced"),
            &format!("{var}={v} already forces one for this whole run"),
        );
        return;
    }
    if gpu_or_skip().is_none() {
        return;
    }
    for v in values {
        rerun_with(name, var, v);
    }
}

/// Runs test `name` of this test binary again in a child process with `var=value` set (for a
/// choice the library reads once per process) and this run's seed; fails with the child's
/// output unless it ran that one test and it passed.
pub fn rerun_with(name: &str, var: &str, value: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(var, value)
        .env("DYGRAPH_TEST_SEED", run_seed().to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} with {var}={value} failed:\n{text}");
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}

/// The test-harness name of test function `f` in the module `module` (pass `module_path!()`),
/// for a test that reruns its own binary on one `#[ignore]`d child test with `--exact`.
pub fn test_path(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, m)) => format!("{m}::{f}"),
        None => f.to_string(),
    }
}
