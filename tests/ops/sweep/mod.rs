//! The OpInfo sweep, driven by the op registry: every registered op has a spec here (sample
//! inputs, attributes and an independent float64 reference) or a written exemption, and
//! the sweep fails for an op without one. For every spec:
//!
//! - forward, on the CPU, for every dtype the op supports: against the float64 reference
//!   (separate implementations: loops, `libm` for transcendentals), element-wise
//!   (`|a − b| ≤ atol + rtol·|b|`, NaN equal only to NaN), on fresh random inputs plus the
//!   spec's edge shapes (0-d, empty, rank 5, broadcast) and special values;
//! - dtypes the op does not support give a typed error, never a panic;
//! - the GPU against the CPU for every GPU dtype and sample;
//! - a float64 finite-difference gradcheck of every differentiable op, GPU gradients against
//!   CPU gradients, and second order for a representative subset.
//!
//! Every failure names the op, sample, dtype and place, and the run seed
//! (`DYGRAPH_TEST_SEED` replays it).

use crate::common;
mod refs;
mod specs;

use common::{Rng, catch, gpu_or_skip, report, run_seed, values};
use dygraph::ops::{AttrMap, RegisteredOp, find_op, registry};
use dygraph::{DType, Error, Place, Tensor};

/// How one input of a sample follows the dtype under test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Takes the dtype under test.
    Data,
    /// Always this dtype (indices, masks, labels).
    Fixed(DType),
}

/// One input: its values (as f64), shape and kind.
#[derive(Clone, Debug)]
pub struct Input {
    pub values: Vec<f64>,
    pub shape: Vec<usize>,
    pub kind: Kind,
}

/// A data input.
pub fn data(values: Vec<f64>, shape: &[usize]) -> Input {
    assert_eq!(values.len(), shape.iter().product::<usize>(), "sample values for {shape:?}");
    Input { values, shape: shape.to_vec(), kind: Kind::Data }
}

/// An input of a fixed dtype.
pub fn fixed(values: Vec<f64>, shape: &[usize], dtype: DType) -> Input {
    assert_eq!(values.len(), shape.iter().product::<usize>(), "sample values for {shape:?}");
    Input { values, shape: shape.to_vec(), kind: Kind::Fixed(dtype) }
}

/// One call of an op: a label for messages, inputs and attributes. `grad` marks the samples
/// small and smooth enough for finite differences.
#[derive(Clone, Debug)]
pub struct Sample {
    pub label: String,
    pub inputs: Vec<Input>,
    pub attrs: AttrMap,
    pub grad: bool,
    /// Runs for these dtypes only (special values: NaN and ±∞ have no integer meaning;
    /// integers past float16's or float32's range); every dtype when `None`.
    pub only: Option<Vec<DType>>,
    /// Data inputs the gradient checks hold constant (statistics passed in as inputs).
    pub constant: Vec<usize>,
    /// `(j, i)`: input `j` is input `i`'s tensor itself (the same buffer twice), in the
    /// forward checks.
    pub alias: Vec<(usize, usize)>,
}

pub fn sample(label: impl Into<String>, inputs: Vec<Input>, attrs: AttrMap) -> Sample {
    Sample { label: label.into(), inputs, attrs, grad: false, only: None, constant: Vec::new(), alias: Vec::new() }
}

impl Sample {
    /// Marks the sample for the gradient checks.
    pub fn with_grad(mut self) -> Self {
        self.grad = true;
        self
    }

    /// Runs the sample for `dtypes` only.
    pub fn only(mut self, dtypes: &[DType]) -> Self {
        self.only = Some(dtypes.to_vec());
        self
    }

    /// Marks the sample as float-only.
    pub fn floats_only(self) -> Self {
        self.only(&[DType::Float16, DType::BFloat16, DType::Float32, DType::Float64])
    }

    /// Whether the sample runs for `dtype`.
    pub fn runs_on(&self, dtype: DType) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&dtype))
    }

    /// Passes input `i`'s tensor again as input `j` (their values must be equal).
    pub fn same_tensor(mut self, j: usize, i: usize) -> Self {
        assert_eq!(self.inputs[j].values, self.inputs[i].values, "{}: aliased inputs differ", self.label);
        self.alias.push((j, i));
        self
    }

    /// Holds data inputs `idx` constant in the gradient checks.
    pub fn constant(mut self, idx: &[usize]) -> Self {
        self.constant = idx.to_vec();
        self
    }
}

/// A host array: values and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub v: Vec<f64>,
    pub shape: Vec<usize>,
}

impl Host {
    pub fn new(v: Vec<f64>, shape: &[usize]) -> Host {
        Host { v, shape: shape.to_vec() }
    }
}

/// The float64 reference: the outputs (or, for in-place ops, the updated inputs) from the
/// inputs (already rounded to the dtype under test), the attributes and that dtype.
pub type RefFn = Box<dyn Fn(&[Host], &AttrMap, DType) -> Vec<Host>>;

/// Sample inputs of a spec.
pub type SampleFn = Box<dyn Fn(&mut Rng) -> Vec<Sample>>;

/// What the forward check compares against.
pub enum Reference {
    /// A float64 implementation of the op's own.
    Of(RefFn),
    /// A random op: values in range, the same draws on every place under one seed (integers
    /// bit for bit, floats to one unit of precision; the distributions are checked
    /// statistically in `tests/random.rs`).
    Random,
}

/// One op's spec.
pub struct Spec {
    pub name: &'static str,
    /// The dtypes the op supports for its data inputs (every other dtype must be an error);
    /// empty for ops without data inputs (creation ops: the dtype is an attribute).
    pub dtypes: Vec<DType>,
    pub samples: SampleFn,
    pub reference: Reference,
    /// Tolerance factor over the dtype's base tolerance (sums, products, transcendentals).
    pub tol: f64,
    /// Runs a float64 gradcheck on the `grad` samples (differentiable ops).
    pub gradcheck: bool,
    /// Also checks second-order gradients.
    pub second_order: bool,
    /// The dtype of compared output `i` for the dtype under test and the attributes.
    pub out_dtype: OutDType,
    /// The GPU must match the CPU bit for bit (data movement: nothing is computed).
    pub exact: bool,
    /// Also compares the auxiliary outputs (the reference returns them too).
    pub check_aux: bool,
}

/// A spec's output dtype: from the dtype under test, the attributes and the output's index.
pub type OutDType = fn(DType, &AttrMap, usize) -> DType;

/// The output follows the dtype under test (the default).
pub fn same_dtype(d: DType, _: &AttrMap, _: usize) -> DType {
    d
}

/// Registered ops the sweep does not run, each with its reason (none today: every
/// registered op has a spec).
const EXEMPT: &[(&str, &str)] = &[];

/// `(atol, rtol)` of a float dtype.
fn base_tol(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::Float64 => (1e-12, 1e-10),
        DType::Float32 => (1e-6, 1e-5),
        DType::Float16 => (2e-3, 2e-3),
        DType::BFloat16 => (1.6e-2, 1.6e-2),
        _ => (0.0, 0.0),
    }
}

/// The gap between 1 and the next value of a float dtype: one unit of its precision.
fn base_eps(dtype: DType) -> f64 {
    match dtype {
        DType::Float64 => f64::EPSILON,
        DType::Float16 => 2f64.powi(-10),
        DType::BFloat16 => 2f64.powi(-7),
        _ => f32::EPSILON as f64,
    }
}

/// Every dtype, for the "unsupported dtypes are errors" check.
const ALL: [DType; 7] = DType::ALL;

/// The inputs as tensors on `place` with data inputs in `dtype`.
fn tensors(s: &Sample, dtype: DType, place: Place) -> Vec<Tensor> {
    let mut v: Vec<Tensor> = s
        .inputs
        .iter()
        .map(|i| {
            let d = match i.kind {
                Kind::Data => dtype,
                Kind::Fixed(d) => d,
            };
            common::tensor(&i.values, &i.shape, d, place)
        })
        .collect();
    for &(j, i) in &s.alias {
        v[j] = v[i].clone();
    }
    v
}

/// The inputs rounded to what the tensors hold, as host arrays (the reference's inputs).
fn rounded(s: &Sample, dtype: DType) -> Vec<Host> {
    tensors(s, dtype, Place::Cpu).iter().map(|t| Host::new(values(t), t.shape())).collect()
}

/// Runs `op` on `inputs`: its outputs, or for in-place ops the updated inputs.
fn run(op: &'static dyn RegisteredOp, inputs: &[Tensor], attrs: &AttrMap) -> dygraph::Result<Vec<Tensor>> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outs = op.run(&refs, attrs)?;
    let inplace = op.inplace(inputs.len());
    if inplace.is_empty() { Ok(outs) } else { Ok(inplace.into_iter().map(|i| inputs[i].clone()).collect()) }
}

/// The outputs compared by the sweep: all but the auxiliary ones, unless `aux`.
fn compared(op: &'static dyn RegisteredOp, inputs: usize, outs: Vec<Tensor>, aux: bool) -> Vec<Tensor> {
    let keep =
        if op.inplace(inputs).is_empty() && !aux { outs.len() - op.aux_outputs().min(outs.len()) } else { outs.len() };
    outs.into_iter().take(keep).collect()
}

/// `Err` unless `actual` holds `expected` bit for bit (NaN equal to NaN, −0 apart from +0).
fn check_bits(what: &str, actual: &Tensor, expected: &Host) -> Result<(), String> {
    if actual.shape() != expected.shape.as_slice() {
        return Err(format!("{what}: shape {:?}, expected {:?}", actual.shape(), expected.shape));
    }
    let got = values(actual);
    match got.iter().zip(&expected.v).position(|(a, e)| !(a.to_bits() == e.to_bits() || a.is_nan() && e.is_nan())) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {} but expected exactly {} (seed {})",
            got[i],
            expected.v[i],
            run_seed()
        )),
    }
}

/// The second-order function of `f`: `Σ_x w_x·∂L/∂x` for `L = Σ y·y·v`, kept
/// differentiable (a loss nonlinear in `y`, so piecewise-linear ops have a second
/// derivative), with fixed, varied weights `v` and `w_x` built on the inputs' place.
fn second_order<'a>(
    f: &'a dyn Fn(&[Tensor]) -> dygraph::Result<Tensor>,
) -> impl Fn(&[Tensor]) -> dygraph::Result<Tensor> + 'a {
    let weights = |n: usize, like: &Tensor, k: usize| -> Tensor {
        let v: Vec<f64> = (0..n).map(|i| 0.4 + 0.15 * ((i * 5 + k * 3) % 7) as f64).collect();
        common::tensor(&v, like.shape(), like.dtype(), like.place())
    };
    move |xs: &[Tensor]| {
        let y = f(xs)?;
        let v = weights(y.numel(), &y, 0);
        let gs = dygraph::grad(&[y.mul(&y)?.mul(&v)?.sum(&[], false)?], xs, None, true, true, true)?;
        let mut total = xs[0].zeros_like()?.sum(&[], false)?;
        for (k, (gx, x)) in gs.iter().zip(xs).enumerate() {
            if let Some(gx) = gx {
                total = total.add(&gx.mul(&weights(x.numel(), x, k + 1))?.sum(&[], false)?)?;
            }
        }
        Ok(total)
    }
}

/// Element-wise comparison of `actual` against `expected` for an output of `dtype`.
fn compare(what: &str, actual: &Tensor, expected: &Host, dtype: DType, tol: f64) -> Result<(), String> {
    if actual.shape() != expected.shape.as_slice() {
        return Err(format!("{what}: shape {:?}, expected {:?}", actual.shape(), expected.shape));
    }
    let got = values(actual);
    if !dtype.is_float() {
        return common::check_exact(what, &got, &expected.v);
    }
    // The reference rounded to the output dtype (round to nearest even, overflow to ±∞) by
    // Rust and the `half` crate, not by the library's own cast.
    let expected: Vec<f64> = expected.v.iter().map(|&v| refs::held_as(v, dtype)).collect();
    let (atol, rtol) = base_tol(dtype);
    common::check_allclose(what, &got, &expected, atol * tol, rtol * tol)
}

/// `attrs` with its `place` attribute (creation ops) set to `place`.
fn with_place(attrs: &AttrMap, place: Place) -> AttrMap {
    let mut a = attrs.clone();
    if a.get("place").is_some() {
        a = a.with("place", place);
    }
    a
}

/// Samples whose attributes ask for float64 (creation ops) stay on the CPU.
fn on_cpu_only(s: &Sample) -> bool {
    s.attrs.get("dtype").is_some_and(|d| *d == dygraph::ops::AttrValue::DType(DType::Float64))
}

fn specs_by_name() -> Vec<Spec> {
    specs::all()
}

#[test]
fn every_registered_op_has_a_spec_or_an_exemption() {
    let _generator = common::generator_lock();
    let specs = specs_by_name();
    let mut failures = Vec::new();
    for op in registry() {
        let has = specs.iter().any(|s| s.name == op.name());
        let exempt = EXEMPT.iter().any(|(n, _)| *n == op.name());
        if !has && !exempt {
            failures.push(format!("{}: no sweep spec (add one to tests/ops/sweep/specs.rs)", op.name()));
        }
        if has && exempt {
            failures.push(format!("{}: both a spec and an exemption", op.name()));
        }
    }
    for s in &specs {
        if find_op(s.name).is_err() {
            failures.push(format!("{}: a spec for an op that is not registered", s.name));
        }
        if specs.iter().filter(|t| t.name == s.name).count() > 1 {
            failures.push(format!("{}: more than one spec", s.name));
        }
        let mut rng = Rng::new(1);
        if (s.samples)(&mut rng).is_empty() {
            failures.push(format!("{}: no samples", s.name));
        }
        if s.gradcheck && !(s.samples)(&mut rng).iter().any(|x| x.grad) {
            failures.push(format!("{}: gradcheck without a gradient sample", s.name));
        }
        if find_op(s.name).is_ok_and(|o| o.differentiable()) != s.gradcheck {
            failures.push(format!("{}: gradcheck flag differs from the registry's differentiable flag", s.name));
        }
        // The op's declared facts agree with its spec: random draws are checked as draws.
        if find_op(s.name).is_ok_and(|o| o.facts().random) != matches!(s.reference, Reference::Random) {
            failures.push(format!("{}: the op's `random` fact differs from its spec's reference", s.name));
        }
    }
    // With the checks above, the specs and exemptions name the registered ops one to one: an
    // op that stops being registered (or one left out of its family's `OPS`) fails here.
    for (name, _) in EXEMPT {
        if find_op(name).is_err() {
            failures.push(format!("{name}: an exemption for an op that is not registered"));
        }
    }
    report("sweep coverage", &failures);
}

/// Forward on the CPU against the reference, and unsupported dtypes as typed errors.
#[test]
fn forward_against_the_float64_reference() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for (k, spec) in specs_by_name().into_iter().enumerate() {
        let op = find_op(spec.name).expect("registered");
        let mut rng = Rng::new(1000 + k as u64);
        let samples = (spec.samples)(&mut rng);
        let dtypes: Vec<DType> = if spec.dtypes.is_empty() { vec![DType::Float32] } else { ALL.to_vec() };
        for dtype in dtypes {
            for s in samples.iter().filter(|s| s.runs_on(dtype)) {
                let what = format!("{} [{}] {dtype} on CPU", spec.name, s.label);
                let r = catch(&what, || {
                    let inputs = tensors(s, dtype, Place::Cpu);
                    let result = run(op, &inputs, &s.attrs);
                    if !spec.dtypes.is_empty() && !spec.dtypes.contains(&dtype) {
                        match result {
                            Err(e @ (Error::UnsupportedDType { .. } | Error::DTypeMismatch { .. })) => {
                                // The op, or the public op it derives from (`softmax` for
                                // `softmax_grad`, `conv2d` for `conv2d_epilogue`).
                                let m = e.to_string();
                                let named = m.split(':').next().unwrap_or_default();
                                let ok = named == spec.name || spec.name.starts_with(&format!("{named}_"));
                                assert!(ok, "{what}: the error does not name the op: {e}")
                            }
                            Err(e) => panic!("{what}: an unsupported dtype gave {e:?}, not UnsupportedDType"),
                            Ok(_) => panic!("{what}: the dtype is not in the spec's list but the op accepted it"),
                        }
                        return;
                    }
                    let outs =
                        compared(op, inputs.len(), result.unwrap_or_else(|e| panic!("{what}: {e}")), spec.check_aux);
                    for (i, o) in outs.iter().enumerate() {
                        let want = (spec.out_dtype)(dtype, &s.attrs, i);
                        assert_eq!(o.dtype(), want, "{what}: output {i} is {}, expected {want}", o.dtype());
                    }
                    match &spec.reference {
                        Reference::Of(f) => {
                            let expected = f(&rounded(s, dtype), &s.attrs, dtype);
                            assert_eq!(outs.len(), expected.len(), "{what}: output count");
                            for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
                                if let Err(m) = compare(&format!("{what} output {i}"), o, e, o.dtype(), spec.tol) {
                                    panic!("{m}");
                                }
                            }
                        }
                        Reference::Random => {
                            let all = run(op, &tensors(s, dtype, Place::Cpu), &s.attrs)
                                .unwrap_or_else(|e| panic!("{what}: {e}"));
                            specs::check_random(spec.name, &all, &rounded(s, dtype), &s.attrs)
                        }
                    }
                });
                checked += 1;
                failures.extend(r);
            }
        }
    }
    eprintln!("forward sweep: {checked} (op, sample, dtype) checks, seed {}", run_seed());
    report("forward sweep", &failures);
}

/// Every sample on the GPU against the CPU, for each GPU dtype.
#[test]
fn gpu_against_cpu() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let mut failures = Vec::new();
    for (k, spec) in specs_by_name().into_iter().enumerate() {
        let op = find_op(spec.name).expect("registered");
        let mut rng = Rng::new(2000 + k as u64);
        let samples = (spec.samples)(&mut rng);
        let dtypes: Vec<DType> = if spec.dtypes.is_empty() { vec![DType::Float32] } else { spec.dtypes.clone() };
        for &dtype in dtypes.iter().filter(|&&d| d != DType::Float64) {
            for s in samples.iter().filter(|s| !on_cpu_only(s) && s.runs_on(dtype)) {
                let what = format!("{} [{}] {dtype}", spec.name, s.label);
                failures.extend(catch(&what, || {
                    let seed = 7 + k as u64;
                    let mut outs = Vec::new();
                    for place in [Place::Cpu, g] {
                        let _lock = common::generator_lock();
                        dygraph::seed(seed);
                        let inputs = tensors(s, dtype, place);
                        let attrs = with_place(&s.attrs, place);
                        let o = run(op, &inputs, &attrs).unwrap_or_else(|e| panic!("{what} on {place}: {e}"));
                        outs.push(compared(op, inputs.len(), o, spec.check_aux));
                    }
                    let (cpu, gpu) = (&outs[0], &outs[1]);
                    assert_eq!(cpu.len(), gpu.len());
                    for (i, (c, d)) in cpu.iter().zip(gpu).enumerate() {
                        let what = format!("{what} output {i}: GPU vs CPU");
                        assert_eq!(d.dtype(), c.dtype(), "{what}: dtype");
                        assert_eq!(d.place(), g, "{what}: the GPU's output is on {}", d.place());
                        let expected = Host::new(values(c), c.shape());
                        // Random ops draw the same bits on every place under one seed: integer
                        // outputs are identical. Float ones map a draw u to `u·scale + shift`,
                        // which a GPU may fuse into one multiply-add (one rounding, not two):
                        // within one unit of the dtype's precision of the largest value.
                        // Otherwise each place is within `tol` of the truth, so within twice
                        // that of the other.
                        // (gaussian's Box–Muller transform runs through each place's own log
                        // and cos, so only its uniform draws are shared).
                        let result = if spec.exact {
                            check_bits(&what, d, &expected)
                        } else if matches!(spec.reference, Reference::Random) && spec.name != "gaussian" {
                            if c.dtype().is_float() {
                                let eps = base_eps(c.dtype());
                                let largest = expected.v.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                                common::check_allclose(&what, &values(d), &expected.v, eps * largest, eps)
                            } else {
                                common::check_exact(&what, &values(d), &expected.v)
                            }
                        } else {
                            compare(&what, d, &expected, c.dtype(), 2.0 * spec.tol)
                        };
                        if let Err(m) = result {
                            panic!("{m}");
                        }
                    }
                }));
            }
        }
    }
    // test.sh runs this again with DYGRAPH_NATIVE_FLOAT16=0: float16 through float32, the
    // path of devices without SHADER_F16.
    let native = dygraph::get_flags(&["FLAGS_native_float16"]).unwrap()[0].1 == "1"
        && dygraph::gpu_info(0).is_ok_and(|i| i.shader_f16);
    eprintln!("GPU vs CPU sweep: float16 {}", if native { "in native kernels" } else { "through float32" });
    report("GPU vs CPU sweep", &failures);
}

/// The data inputs of a gradient sample as float64 gradcheck inputs, the others fixed.
/// Gradcheck inputs (values and shapes) and their positions among the op's inputs.
type GradParts = (Vec<(Vec<f64>, Vec<usize>)>, Vec<usize>);

fn grad_parts(s: &Sample) -> GradParts {
    let data: Vec<usize> =
        (0..s.inputs.len()).filter(|&i| s.inputs[i].kind == Kind::Data && !s.constant.contains(&i)).collect();
    (data.iter().map(|&i| (s.inputs[i].values.clone(), s.inputs[i].shape.clone())).collect(), data)
}

/// The op as a function of its data inputs (the others from the sample), output 0.
fn as_function(op: &'static dyn RegisteredOp, s: &Sample, data: &[usize], xs: &[Tensor]) -> dygraph::Result<Tensor> {
    let mut inputs = tensors(s, DType::Float64, xs.first().map_or(Place::Cpu, |x| x.place()));
    for (k, &i) in data.iter().enumerate() {
        inputs[i] = xs[k].clone();
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    Ok(op.run(&refs, &s.attrs)?.swap_remove(0))
}

/// The gradient of `Σ f(x)·v` built for differentiation (create_graph: the ops' backward
/// rules as tensor ops) against the fused backward kernels, in float64 on the CPU.
fn create_graph_matches_fused(
    name: &str,
    f: &dyn Fn(&[Tensor]) -> dygraph::Result<Tensor>,
    inputs: &[(Vec<f64>, Vec<usize>)],
) -> Result<(), String> {
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|(v, s)| {
            let t = Tensor::from_vec_on(v.clone(), s, Place::Cpu).unwrap();
            t.set_stop_gradient(false);
            t
        })
        .collect();
    let run = |create_graph: bool| -> dygraph::Result<Vec<Option<Tensor>>> {
        let y = f(&xs)?;
        let v: Vec<f64> = (0..y.numel()).map(|i| 0.3 + 0.2 * ((i * 3) % 5) as f64).collect();
        let loss = y.mul(&common::tensor(&v, y.shape(), y.dtype(), Place::Cpu))?.sum(&[], false)?;
        dygraph::grad(&[loss], &xs, None, true, create_graph, true)
    };
    let (fused, composite) = (run(false).map_err(|e| e.to_string())?, run(true).map_err(|e| e.to_string())?);
    for (i, (a, b)) in fused.iter().zip(&composite).enumerate() {
        match (a, b) {
            (Some(a), Some(b)) => {
                common::check_allclose(&format!("{name}: input {i}"), &values(b), &values(a), 1e-12, 1e-12)?
            }
            (None, None) => {}
            _ => return Err(format!("{name}: input {i} has a gradient one way only")),
        }
    }
    Ok(())
}

#[test]
fn gradcheck_in_float64() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    for (k, spec) in specs_by_name().into_iter().enumerate().filter(|(_, s)| s.gradcheck) {
        let op = find_op(spec.name).expect("registered");
        let mut rng = Rng::new(3000 + k as u64);
        for s in (spec.samples)(&mut rng).into_iter().filter(|s| s.grad) {
            let (inputs, data) = grad_parts(&s);
            let name = format!("{} [{}]", spec.name, s.label);
            let f = |xs: &[Tensor]| as_function(op, &s, &data, xs);
            failures.extend(catch(&name, || {
                if let Err(m) = common::gradcheck(&name, &f, &inputs) {
                    panic!("{m}");
                }
            }));
            if spec.second_order {
                let name3 = format!("{name} create_graph");
                failures.extend(catch(&name3, || {
                    if let Err(m) = create_graph_matches_fused(&name3, &f, &inputs) {
                        panic!("{m}");
                    }
                }));
                let g = second_order(&f);
                let name2 = format!("{name} second order");
                failures.extend(catch(&name2, || {
                    if let Err(m) = common::gradcheck(&name2, &g, &inputs) {
                        panic!("{m}");
                    }
                }));
            }
        }
    }
    report("float64 gradcheck sweep", &failures);
}

#[test]
fn gpu_gradients_against_cpu() {
    let _generator = common::generator_lock();
    let Some(_) = gpu_or_skip() else { return };
    let mut failures = Vec::new();
    for (k, spec) in specs_by_name().into_iter().enumerate().filter(|(_, s)| s.gradcheck) {
        let op = find_op(spec.name).expect("registered");
        let mut rng = Rng::new(4000 + k as u64);
        for s in (spec.samples)(&mut rng).into_iter().filter(|s| s.grad && !on_cpu_only(s)) {
            let (inputs, data) = grad_parts(&s);
            let name = format!("{} [{}]", spec.name, s.label);
            let f = move |xs: &[Tensor]| -> dygraph::Result<Tensor> {
                let mut all = tensors(&s, DType::Float32, xs[0].place());
                for (k, &i) in data.iter().enumerate() {
                    all[i] = xs[k].clone();
                }
                let refs: Vec<&Tensor> = all.iter().collect();
                Ok(op.run(&refs, &with_place(&s.attrs, xs[0].place()))?.swap_remove(0))
            };
            let tol = 1e-4 * spec.tol;
            failures.extend(catch(&name, || common::gpu_matches_cpu(&name, &f, &inputs, true, tol)));
            if spec.second_order {
                let name2 = format!("{name} second order");
                let g = second_order(&f);
                failures.extend(catch(&name2, || common::gpu_matches_cpu(&name2, &g, &inputs, true, tol)));
            }
        }
    }
    report("GPU gradient sweep", &failures);
}
