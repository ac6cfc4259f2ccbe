//! Shared test helpers: the GPU place policy, fresh random inputs, closeness checks and
//! float64 finite-difference gradchecks.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard, OnceLock};

use dygraph::{DType, Place, Result, Tensor};

/// The GPU place the tests run on, printing the adapter once. Without an adapter a test
/// fails under `CI=true` (CI installs lavapipe); elsewhere it reports the skip on stderr.
pub fn gpu() -> Option<Place> {
    static INFO: OnceLock<Option<String>> = OnceLock::new();
    let info = INFO.get_or_init(|| match dygraph::gpu_info(0) {
        Ok(i) => {
            eprintln!("GPU adapter: {} ({}, {}, {})", i.name, i.backend, i.device_type, i.driver);
            Some(i.name)
        }
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("no GPU adapter in CI (install mesa-vulkan-drivers): {e}");
            }
            eprintln!("SKIPPING GPU checks: no GPU adapter ({e})");
            None
        }
    });
    info.as_ref().map(|_| Place::Gpu(0))
}

/// The generator behind `dygraph::seed` is process-wide, as in Paddle: a test that seeds and
/// expects its own draws holds this lock so that tests running beside it in the same binary
/// cannot take numbers from its stream.
pub fn generator_lock() -> MutexGuard<'static, ()> {
    static GENERATOR: Mutex<()> = Mutex::new(());
    GENERATOR.lock().unwrap_or_else(|e| e.into_inner())
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

/// `‖a − b‖ / ‖b‖` (plain `‖a − b‖` when `b` is all zeros); NaNs and infinities must match
/// positions (an error names the first mismatch).
pub fn try_rel_err(a: &[f64], b: &[f64]) -> std::result::Result<f64, String> {
    if a.len() != b.len() {
        return Err(format!("lengths differ: {} vs {}", a.len(), b.len()));
    }
    let (mut num, mut den) = (0.0, 0.0);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.is_nan() || y.is_nan() {
            if !(x.is_nan() && y.is_nan()) {
                return Err(format!("NaN mismatch at {i}: {x} vs {y}"));
            }
            continue;
        }
        if x.is_infinite() || y.is_infinite() {
            if x != y {
                return Err(format!("infinity mismatch at {i}: {x} vs {y}"));
            }
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    Ok(if den == 0.0 { num.sqrt() } else { (num / den).sqrt() })
}

/// `‖a − b‖ / ‖b‖` (plain `‖a − b‖` when `b` is all zeros); NaNs must match positions.
pub fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    try_rel_err(a, b).unwrap_or_else(|e| panic!("{e}"))
}

/// `Err` unless `rel_err(actual, expected) <= tol`, naming `what` and the run seed.
pub fn check_close(what: &str, actual: &[f64], expected: &[f64], tol: f64) -> std::result::Result<(), String> {
    let show = |v: &[f64]| format!("{:?}", &v[..v.len().min(16)]);
    match try_rel_err(actual, expected) {
        Ok(e) if e <= tol => Ok(()),
        Ok(e) => Err(format!(
            "{what}: relative error {e:e} > {tol:e} (seed {})\n actual:   {}\n expected: {}",
            run_seed(),
            show(actual),
            show(expected)
        )),
        Err(m) => Err(format!(
            "{what}: {m} (seed {})\n actual:   {}\n expected: {}",
            run_seed(),
            show(actual),
            show(expected)
        )),
    }
}

/// Asserts `rel_err(actual, expected) <= tol`, naming `what` and the run seed.
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
    let (atol, rtol) = (1e-5, 1e-3);
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
    let Some(gpu) = gpu() else { return };
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
            grads = xs.iter().map(|x| x.grad().map(|g| values(&g)).unwrap_or_default()).collect();
        }
        results.push((out.shape().to_vec(), values(&out), grads));
    }
    let (cpu, gpu) = (&results[0], &results[1]);
    assert_eq!(cpu.0, gpu.0, "{name}: shapes differ between CPU and GPU");
    assert_close(&format!("{name} forward GPU vs CPU"), &gpu.1, &cpu.1, tol);
    for (i, (g, c)) in gpu.2.iter().zip(&cpu.2).enumerate() {
        assert_close(&format!("{name} grad of input {i} GPU vs CPU"), g, c, tol.max(1e-5));
    }
}
