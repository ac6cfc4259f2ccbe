//! CPU shadow mode: `DYGRAPH_SHADOW=cpu` (or `set_flags(&[("FLAGS_shadow", "cpu")])`) runs
//! every op that ran on a GPU place again on the CPU, from copies of its inputs taken before
//! the GPU kernel, and compares the outputs (and what an in-place op wrote into its inputs)
//! element by element: `|gpu − cpu| ≤ atol + rtol·|cpu|` with the op sweep's widest GPU-vs-CPU
//! tolerance (float32: atol 2e-5, rtol 2e-4; float16: 0.04 both; `DYGRAPH_SHADOW_TOL=f`
//! scales them), integers and booleans exactly, NaN equal only to NaN.
//!
//! The first op outside the tolerance is an [`Error::ShadowMismatch`] naming the op
//! (`backward of <node>: <op>` inside a backward rule), the output, the first differing
//! element with both values, and a file holding the op's inputs, attributes and generator
//! state: [`replay`] runs that op again on both places from the file, so the mismatch becomes
//! a test. Files go to `DYGRAPH_SHADOW_DIR`, else `<temp dir>/dygraph-shadow`.
//!
//! Random ops draw the same numbers on both places: the CPU rerun draws from a private copy
//! of the generator at the state the GPU run started from (`random::with_private_generator`),
//! so shadowing changes no number the program draws, on this thread or another. An input
//! error the CPU rerun finds (an index out of range, which the GPU reports at the next
//! readback) is returned as the CPU gives it, not as a mismatch. The NaN check
//! (`FLAGS_check_nan_inf`) does not look at the shadow's own copies and rerun. Each shadowed
//! op waits for the device and reads its inputs and outputs back: a debugging mode.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Call, Mode, Next};
use crate::flags::shadow_enabled;
use crate::ops::AttrMap;
use crate::tensor::StateDict;
use crate::{DType, Error, Place, Result, Tensor};

/// Files written so far by this process (numbers the next one).
static FILES: AtomicUsize = AtomicUsize::new(0);
/// Ops compared so far by this process.
static CHECKED: AtomicUsize = AtomicUsize::new(0);

/// How many GPU ops this process has rerun on the CPU and compared so far.
pub fn checked_ops() -> usize {
    CHECKED.load(Ordering::Relaxed)
}

thread_local! {
    /// Set while a shadow's own ops run (copies, the CPU rerun), so they are not shadowed.
    static IN_SHADOW: Cell<bool> = const { Cell::new(false) };
}

const META_OP: &str = "dygraph.shadow.op";
const META_ATTRS: &str = "dygraph.shadow.attrs";
const META_GENERATOR: &str = "dygraph.shadow.generator";
const META_INPUTS: &str = "dygraph.shadow.inputs";
const META_MESSAGE: &str = "dygraph.shadow.message";

/// Runs `f` with shadowing suspended on this thread.
fn inside<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_SHADOW.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(IN_SHADOW.with(|c| c.replace(true)));
    let _no_grad = crate::tensor::grad_mode::no_grad_guard();
    super::check::without_checks(f)
}

/// The shadow mode: a call that runs on a GPU is run again on the CPU from copies of its
/// inputs taken before the GPU kernel, and the results compared.
pub(crate) struct ShadowMode;

pub(crate) static SHADOW: ShadowMode = ShadowMode;

impl Mode for ShadowMode {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        // Views run no kernel; moves between places have no CPU twin.
        if !shadow_enabled() || IN_SHADOW.with(Cell::get) || call.op().mixed_places() || call.op().view() {
            return next.run(call);
        }
        let place = match call.inputs().first() {
            Some(t) => t.place(),
            None => call.outs()?.first().map_or(Place::Cpu, |o| o.place),
        };
        if !place.is_gpu() || call.inputs().iter().any(|t| t.is_meta() || t.is_static_var()) {
            return next.run(call);
        }
        let shadow = Shadow::prepare(call)?;
        let values = next.run(call)?;
        shadow.check(call, &values)?;
        Ok(values)
    }
}

/// What a shadowed op needs from before its GPU kernel ran.
struct Shadow {
    /// CPU copies of the inputs, which the CPU rerun consumes (in-place ops write them).
    inputs: Vec<Tensor>,
    /// Pristine copies for the reproduction file, kept only for in-place ops.
    pristine: Option<Vec<Tensor>>,
    /// The generator's `(seed, offset)` before the GPU kernel.
    generator: (u64, u64),
}

impl Shadow {
    fn prepare(call: &dyn Call) -> Result<Shadow> {
        inside(|| {
            let copies: Vec<Tensor> = call.inputs().iter().map(|t| t.to(Place::Cpu)).collect::<Result<_>>()?;
            let pristine = if call.op().inplace(copies.len()).is_empty() {
                None
            } else {
                Some(copies.iter().map(Tensor::clone_data).collect::<Result<_>>()?)
            };
            Ok(Shadow { inputs: copies, pristine, generator: crate::random::get_seed_offset() })
        })
    }

    /// Runs the call again on the CPU and compares with what the GPU computed: `outputs`,
    /// and the in-place inputs as the call's inputs now hold them.
    fn check(self, call: &dyn Call, outputs: &[Tensor]) -> Result<()> {
        let op = call.op();
        let inputs = call.inputs();
        let name = match crate::tensor::graph::current_backward_node() {
            Some(node) => format!("backward of {node}: {}", op.name()),
            None => op.name().to_string(),
        };
        let Shadow { inputs: cpu_inputs, pristine, generator } = self;
        let saved_inputs = pristine.as_ref().unwrap_or(&cpu_inputs).clone();
        let (cpu_outputs, _) = crate::random::with_private_generator(generator.0, generator.1, || {
            inside(|| {
                let refs: Vec<&Tensor> = cpu_inputs.iter().collect();
                call.rerun(&refs, Place::Cpu)
            })
        });
        // The CPU validates eagerly what the GPU reports at the next readback (indices).
        let cpu_outputs = cpu_outputs?;
        let difference = {
            inside(|| {
                let mut gpu: Vec<(String, &Tensor)> =
                    outputs.iter().enumerate().map(|(i, t)| (format!("output {i}"), t)).collect();
                let mut cpu: Vec<&Tensor> = cpu_outputs.iter().collect();
                for i in op.inplace(inputs.len()) {
                    gpu.push((format!("input {i} (written in place)"), inputs[i]));
                    cpu.push(&cpu_inputs[i]);
                }
                first_difference(&gpu, &cpu)
            })?
        };
        CHECKED.fetch_add(1, Ordering::Relaxed);
        let Some(difference) = difference else { return Ok(()) };
        let mut attrs = call.attr_map();
        if attrs.get("place").is_some() {
            attrs = attrs.with("place", Place::Cpu);
        }
        let file = inside(|| save_case(op.name(), &attrs, &saved_inputs, generator, &name, &difference));
        let (msg, file) = match file {
            Ok(path) => (
                format!(
                    "{difference}; inputs saved to {} (dygraph::shadow::replay reruns the op from it)",
                    path.display()
                ),
                Some(path),
            ),
            Err(e) => (format!("{difference}; saving the inputs failed: {e}"), None),
        };
        Err(Error::ShadowMismatch { op: name, msg, file })
    }
}

/// `(atol, rtol)` for comparing a dtype across places.
fn tolerance(dtype: DType) -> (f64, f64) {
    let factor = std::env::var("DYGRAPH_SHADOW_TOL").ok().and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(1.0);
    let (atol, rtol) = match dtype {
        DType::Float16 => (0.04, 0.04),
        // 8 bits of mantissa: one rounding is up to 2^-8 relative.
        DType::BFloat16 => (0.1, 0.1),
        DType::Float32 => (2e-5, 2e-4),
        DType::Float64 => (2e-11, 2e-9),
        _ => (0.0, 0.0),
    };
    (atol * factor, rtol * factor)
}

/// The first element where `actual` (named) and `expected` differ beyond the tolerance of
/// their dtype, described; `None` when all agree.
fn first_difference(actual: &[(String, &Tensor)], expected: &[&Tensor]) -> Result<Option<String>> {
    if actual.len() != expected.len() {
        return Ok(Some(format!("{} results on the GPU, {} on the CPU", actual.len(), expected.len())));
    }
    for ((what, a), e) in actual.iter().zip(expected) {
        if a.shape() != e.shape() || a.dtype() != e.dtype() {
            return Ok(Some(format!("{what}: GPU {:?} {}, CPU {:?} {}", a.shape(), a.dtype(), e.shape(), e.dtype())));
        }
        let (av, ev) = (a.to_f64_vec()?, e.to_f64_vec()?);
        let (atol, rtol) = tolerance(e.dtype());
        for (k, (&x, &y)) in av.iter().zip(&ev).enumerate() {
            let same = if x.is_nan() || y.is_nan() {
                x.is_nan() && y.is_nan()
            } else if x.is_infinite() || y.is_infinite() {
                x == y
            } else {
                (x - y).abs() <= atol + rtol * y.abs()
            };
            if !same {
                return Ok(Some(format!(
                    "{what} {:?} {}: element {k} (index {:?}) is {x:e} on the GPU and {y:e} on the CPU \
                     (|Δ| = {:e} > atol {atol:e} + rtol {rtol:e}·|cpu|)",
                    e.shape(),
                    e.dtype(),
                    unravel(k, e.shape()),
                    (x - y).abs()
                )));
            }
        }
    }
    Ok(None)
}

fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = k % n;
        k /= n;
    }
    idx
}

/// The directory reproduction files go to.
fn directory() -> PathBuf {
    std::env::var_os("DYGRAPH_SHADOW_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("dygraph-shadow"))
}

/// Writes one op's case: its inputs as safetensors, its name, attributes, generator state
/// and the mismatch in the metadata.
fn save_case(
    op: &str,
    attrs: &AttrMap,
    inputs: &[Tensor],
    generator: (u64, u64),
    name: &str,
    difference: &str,
) -> Result<PathBuf> {
    let mut state = StateDict::new();
    for (i, t) in inputs.iter().enumerate() {
        state.insert(format!("input.{i}"), t.clone());
    }
    let bytes = crate::tensor::checkpoint::save_to_bytes_with(
        &state,
        &[
            (META_OP, op.to_string()),
            (META_ATTRS, crate::ops::registry::attr_text::write_attrs(attrs)),
            (META_GENERATOR, format!("{} {}", generator.0, generator.1)),
            (META_INPUTS, inputs.len().to_string()),
            (META_MESSAGE, format!("{name}: {difference}")),
        ],
    )?;
    let dir = directory();
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("shadow: create {}: {e}", dir.display()))))?;
    let n = FILES.fetch_add(1, Ordering::Relaxed);
    let safe: String = op.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let path = dir.join(format!("{safe}-{}-{n:04}.safetensors", std::process::id()));
    crate::tensor::checkpoint::write_atomic(&path, &bytes)?;
    Ok(path)
}

/// What [`replay`] found.
#[derive(Debug)]
pub struct Replay {
    /// The op's name.
    pub op: String,
    /// The mismatch as the file recorded it when it was written.
    pub recorded: String,
    /// The first difference between the places now, or `None` when they agree.
    pub difference: Option<String>,
    /// The op's results on the CPU and on the GPU (outputs, then in-place inputs).
    pub cpu: Vec<Tensor>,
    /// See `cpu`.
    pub gpu: Vec<Tensor>,
}

/// Reruns the op a shadow file recorded, on the CPU and on `gpu`, from the same inputs and
/// generator state, and compares them as shadow mode does.
pub fn replay(path: impl AsRef<Path>, gpu: Place) -> Result<Replay> {
    const OP: &str = "shadow::replay";
    let path = path.as_ref();
    if !gpu.is_gpu() {
        return Err(Error::invalid(OP, format!("compares the CPU with a GPU place, got {gpu}")));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{OP}: read {}: {e}", path.display()))))?;
    let meta = crate::tensor::checkpoint::metadata(OP, &bytes)?;
    let get = |k: &str| {
        meta.get(k)
            .cloned()
            .ok_or_else(|| Error::invalid(OP, format!("{} is not a shadow file: no {k}", path.display())))
    };
    let op = crate::ops::registry::find_op(&get(META_OP)?)?;
    let attrs = crate::ops::registry::attr_text::read_attrs(&get(META_ATTRS)?)
        .map_err(|e| Error::invalid(OP, format!("{}: bad attributes: {e}", path.display())))?;
    let generator: Vec<u64> = get(META_GENERATOR)?.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [seed, offset] = generator[..] else {
        return Err(Error::invalid(OP, format!("{}: bad generator state", path.display())));
    };
    let count: usize = get(META_INPUTS)?.parse().map_err(|_| Error::invalid(OP, "bad input count"))?;
    let state = crate::tensor::checkpoint::load_from_bytes(&bytes, Place::Cpu)?;
    let inputs: Vec<Tensor> = (0..count)
        .map(|i| {
            state.get(&format!("input.{i}")).cloned().ok_or_else(|| Error::invalid(OP, format!("input.{i} is missing")))
        })
        .collect::<Result<_>>()?;
    let run = |place: Place| -> Result<Vec<Tensor>> {
        inside(|| {
            let ins: Vec<Tensor> =
                inputs.iter().map(|t| t.to(place).and_then(|t| t.clone_data())).collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = ins.iter().collect();
            let mut a = attrs.clone();
            if a.get("place").is_some() {
                a = a.with("place", place);
            }
            let (outs, _) = crate::random::with_private_generator(seed, offset, || op.run(&refs, &a));
            let mut outs = outs?;
            outs.extend(op.inplace(ins.len()).into_iter().map(|i| ins[i].clone()));
            Ok(outs)
        })
    };
    let cpu = run(Place::Cpu)?;
    let on_gpu = run(gpu)?;
    let named: Vec<(String, &Tensor)> = on_gpu.iter().enumerate().map(|(i, t)| (format!("result {i}"), t)).collect();
    let difference = first_difference(&named, &cpu.iter().collect::<Vec<_>>())?;
    Ok(Replay { op: op.name().to_string(), recorded: get(META_MESSAGE)?, difference, cpu, gpu: on_gpu })
}
