//! The fused in-place parameter updates: one kernel dispatch per parameter on the GPU, one
//! loop on the CPU, never through the host.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, GpuBuffer, Kernel};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

pub(crate) static SGD: Kernel = Kernel { file: "optim/sgd.wgsl", variants: || vec![vec![]] };
pub(crate) static MOMENTUM: Kernel = Kernel { file: "optim/momentum.wgsl", variants: || vec![vec![]] };
pub(crate) static ADAM: Kernel = Kernel { file: "optim/adam.wgsl", variants: || vec![vec![]] };
pub(crate) static RMSPROP: Kernel = Kernel { file: "optim/rmsprop.wgsl", variants: || vec![vec![]] };

/// One update rule with its hyper-parameters for this step.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    Sgd,
    Momentum { mu: f64, nesterov: bool },
    Adam { beta1: f64, beta2: f64, eps: f64, beta1_pow: f64, beta2_pow: f64, decoupled_wd: f64 },
    RmsProp { rho: f64, eps: f64, momentum: f64, centered: bool },
}

impl Rule {
    /// Optimizer state tensors the rule keeps per parameter.
    pub(crate) fn n_states(&self) -> usize {
        match self {
            Rule::Sgd => 0,
            Rule::Momentum { .. } => 1,
            Rule::Adam { .. } => 2,
            Rule::RmsProp { .. } => 3,
        }
    }
}

/// The scalar form of every rule, shared by the CPU loop (and mirrored by the WGSL files).
/// `s` holds the parameter's states; returns the new parameter value.
fn step_scalar(rule: &Rule, p: f64, g: f64, s: &mut [f64], lr: f64, wd: f64) -> f64 {
    match *rule {
        Rule::Sgd => p - lr * (g + wd * p),
        Rule::Momentum { mu, nesterov } => {
            let g = g + wd * p;
            let v = mu * s[0] + g;
            s[0] = v;
            if nesterov { p - lr * (g + mu * v) } else { p - lr * v }
        }
        Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd } => {
            let p = p - lr * decoupled_wd * p;
            let g = g + wd * p;
            let m = beta1 * s[0] + (1.0 - beta1) * g;
            let v = beta2 * s[1] + (1.0 - beta2) * g * g;
            s[0] = m;
            s[1] = v;
            let c2 = (1.0 - beta2_pow).sqrt();
            p - lr * c2 / (1.0 - beta1_pow) * (m / (v.sqrt() + eps * c2))
        }
        Rule::RmsProp { rho, eps, momentum, centered } => {
            let g = g + wd * p;
            let ms = rho * s[0] + (1.0 - rho) * g * g;
            s[0] = ms;
            let mut denom = ms;
            if centered {
                let mg = rho * s[1] + (1.0 - rho) * g;
                s[1] = mg;
                denom = ms - mg * mg;
            }
            let mom = momentum * s[2] + lr * g / (denom + eps).sqrt();
            s[2] = mom;
            p - mom
        }
    }
}

fn f(v: f64) -> u32 {
    (v as f32).to_bits()
}

fn gpu(t: &Tensor) -> Result<&std::sync::Arc<GpuBuffer>> {
    match t.backend() {
        Backend::Gpu(b) => Ok(b),
        Backend::Cpu(_) => Err(Error::PlaceMismatch { op: "optimizer", lhs: t.place(), rhs: t.place() }),
    }
}

/// Applies `rule` to `param` in place with gradient `grad` and state tensors `states`
/// (created by the caller as zeros like the parameter), learning rate `lr` and L2 weight
/// decay `wd`.
pub(crate) fn apply(rule: &Rule, param: &Tensor, grad: &Tensor, states: &[Tensor], lr: f64, wd: f64) -> Result<()> {
    const OP: &str = "optimizer.step";
    param.same_place(OP, grad)?;
    param.same_dtype(OP, grad)?;
    if grad.shape() != param.shape() {
        return Err(Error::shape(OP, format!("gradient {:?} for parameter {:?}", grad.shape(), param.shape())));
    }
    let n = param.numel();
    if param.place().is_gpu() {
        if param.dtype() != DType::Float32 {
            return Err(Error::unsupported(
                OP,
                param.dtype(),
                "for GPU parameters (float32 parameters are updated in place)",
            ));
        }
        let (p, g) = (gpu(param)?, gpu(grad)?);
        let ctx = &p.ctx;
        let st: Vec<&std::sync::Arc<GpuBuffer>> = states.iter().map(gpu).collect::<Result<_>>()?;
        let mut binds = vec![Bind::write(p), Bind::read(g)];
        binds.extend(st.iter().map(|b| Bind::write(b)));
        let (kernel, params): (&Kernel, Vec<u32>) = match *rule {
            Rule::Sgd => (&SGD, vec![n as u32, f(lr), f(wd)]),
            Rule::Momentum { mu, nesterov } => (&MOMENTUM, vec![n as u32, f(lr), f(wd), f(mu), nesterov as u32]),
            Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd } => (
                &ADAM,
                vec![n as u32, f(lr), f(wd), f(decoupled_wd), f(beta1), f(beta2), f(eps), f(beta1_pow), f(beta2_pow)],
            ),
            Rule::RmsProp { rho, eps, momentum, centered } => {
                (&RMSPROP, vec![n as u32, f(lr), f(wd), f(rho), f(eps), f(momentum), centered as u32])
            }
        };
        return ctx.dispatch_1d(kernel, &vec![], "main", &binds, &params, n as u64);
    }
    let grad_data = grad.to_cpu_data(OP)?;
    let mut state_guards: Vec<_> = states.iter().map(|s| s.cpu_write().expect("CPU state")).collect();
    let mut pw = param.cpu_write().expect("CPU parameter");
    let k = rule.n_states();
    let mut s = vec![0.0f64; k];
    macro_rules! run {
        ($p:expr, $g:expr, $variant:ident, $t:ty) => {{
            for i in 0..n {
                for (j, st) in state_guards.iter().enumerate() {
                    let CpuData::$variant(v) = &**st else { unreachable!("states share the parameter dtype") };
                    s[j] = v[i] as f64;
                }
                $p[i] = step_scalar(rule, $p[i] as f64, $g[i] as f64, &mut s, lr, wd) as $t;
                for (j, st) in state_guards.iter_mut().enumerate() {
                    let CpuData::$variant(v) = &mut **st else { unreachable!("states share the parameter dtype") };
                    v[i] = s[j] as $t;
                }
            }
        }};
    }
    match (&mut *pw, &grad_data) {
        (CpuData::F32(p), CpuData::F32(g)) => run!(p, g, F32, f32),
        (CpuData::F64(p), CpuData::F64(g)) => run!(p, g, F64, f64),
        _ => {
            return Err(Error::unsupported(OP, param.dtype(), "(parameters must be float32 or float64)"));
        }
    }
    Ok(())
}
