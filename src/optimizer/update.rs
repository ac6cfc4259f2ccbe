//! The fused in-place parameter updates: one kernel dispatch per parameter on the GPU, one
//! loop on the CPU, never through the host. Each rule is a registry entry (`sgd`,
//! `momentum`, `adam`, `rmsprop`, `adagrad`, `adadelta`, `adamax`, `lamb`) with inputs `[param, grad, states..., schedule?]`,
//! updating the parameter and the states in place.
//!
//! The optional `schedule` input is a tensor `[lr, beta1_pow, beta2_pow]` (the parameter's
//! dtype) holding the step-dependent factors, as Paddle's static `adam` op takes
//! `LearningRate` and `Beta1Pow`/`Beta2Pow` tensors: with it, the `lr` attribute is the
//! parameter's learning-rate multiplier and Adam's β powers come from the tensor. Static
//! `minimize` uses it, so a program's update ops keep fixed attributes from step to step
//! and an execution plan replays them like any other op.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::merge;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::registry::apply::apply;
use crate::ops::registry::op::{CpuCall, GpuCall, Op};
use crate::ops::registry::op_header;
use crate::ops::{AttrMap, Attrs};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

pub(crate) static SGD_KERNEL: Kernel =
    Kernel { file: "optim/sgd.wgsl", keys: merged_keys, variant: |k| merged_variant(k, &SGD_TENSORS, 4) };
pub(crate) static MOMENTUM_KERNEL: Kernel =
    Kernel { file: "optim/momentum.wgsl", keys: merged_keys, variant: |k| merged_variant(k, &MOMENTUM_TENSORS, 6) };
pub(crate) static ADAM_KERNEL: Kernel =
    Kernel { file: "optim/adam.wgsl", keys: merged_keys, variant: |k| merged_variant(k, &ADAM_TENSORS, 10) };
pub(crate) static RMSPROP_KERNEL: Kernel = Kernel::single("optim/rmsprop.wgsl");
pub(crate) static ADAGRAD_KERNEL: Kernel = Kernel::single("optim/adagrad.wgsl");
pub(crate) static ADADELTA_KERNEL: Kernel = Kernel::single("optim/adadelta.wgsl");
pub(crate) static ADAMAX_KERNEL: Kernel = Kernel::single("optim/adamax.wgsl");
pub(crate) static LAMB_KERNEL: Kernel = Kernel::single("optim/lamb.wgsl");

/// Most parameters one merged update dispatch takes.
const MERGED_MAX: usize = 16;

/// Each parameter's tensors in a mergeable update kernel, in binding order: the parameter,
/// its gradient (read-only) and its states.
static SGD_TENSORS: [&str; 2] = ["param", "grad"];
static MOMENTUM_TENSORS: [&str; 3] = ["param", "grad", "velocity"];
static ADAM_TENSORS: [&str; 4] = ["param", "grad", "moment1", "moment2"];

/// The merged form of each mergeable single update: (single op, merged op, tensors per
/// parameter, kernel).
static MERGED_FORMS: [(&str, &str, usize, &Kernel); 3] = [
    ("sgd", "merged_sgd", SGD_TENSORS.len(), &SGD_KERNEL),
    ("momentum", "merged_momentum", MOMENTUM_TENSORS.len(), &MOMENTUM_KERNEL),
    ("adam", "merged_adam", ADAM_TENSORS.len(), &ADAM_KERNEL),
];

/// The merged op of single update op `op` (`adam` → `merged_adam`) and the tensors each of
/// its parameters takes, if it has one.
pub(crate) fn merged_form(op: &str) -> Option<(&'static str, usize)> {
    MERGED_FORMS.iter().find(|f| f.0 == op).map(|f| (f.1, f.2))
}

/// Parameters merged update op `op` with `inputs` inputs updates, if it is one.
pub(crate) fn merged_members(op: &str, inputs: usize) -> Option<usize> {
    MERGED_FORMS.iter().find(|f| f.1 == op).map(|f| inputs / f.2)
}

/// The merged update kernels' files, each with the bindings a parameter adds: variant `key`
/// binds `own · key` storage buffers more than variant 0, and runs only where the device's
/// `max_storage_buffers_per_shader_stage` allows (for the shader-validation tests).
pub fn merged_kernel_files() -> Vec<(&'static str, usize)> {
    MERGED_FORMS.iter().map(|f| (f.3.file, f.2)).collect()
}

fn merged_keys() -> Vec<u32> {
    (0..MERGED_MAX as u32).collect()
}

/// Variant `key` of a mergeable update kernel (`lib/merged_update.wgsl`): `key + 1`
/// parameters, each binding `tensors`, loaded into and stored from one vector (parameter,
/// gradient, states) by a switch case each around one call of the kernel's `update`; the
/// members' ranges start at parameter word `at`.
fn merged_variant(key: u32, tensors: &[&str], at: usize) -> Variant {
    let k = key as usize + 1;
    let n = tensors.len();
    let lanes = ["x", "y", "z", "w"];
    let (mut decls, mut loads, mut stores) = (String::new(), String::new(), String::new());
    for t in 0..k {
        for (j, name) in tensors.iter().enumerate() {
            let access = if j == 1 { "read" } else { "read_write" };
            decls += &format!("@group(0) @binding({}) var<storage, {access}> {name}_{t}: array<f32>;\n", n * t + j);
        }
        let values: Vec<String> = tensors.iter().map(|name| format!("{name}_{t}[e]")).collect();
        let zeros = vec!["0.0"; 4 - n].join(", ");
        let sep = if zeros.is_empty() { "" } else { ", " };
        loads += &format!("        case {t}u: {{ x = vec4<f32>({}{sep}{zeros}); }}\n", values.join(", "));
        let written: Vec<String> =
            (0..n).filter(|&j| j != 1).map(|j| format!("{}_{t}[e] = r.{};", tensors[j], lanes[j])).collect();
        stores += &format!("        case {t}u: {{ {} }}\n", written.join(" "));
    }
    vec![
        ("K", k.to_string()),
        ("AT", at.to_string()),
        ("TENSORS", decls),
        ("LOADS", loads),
        ("STORES", stores),
        ("SCHEDULE", (n * k).to_string()),
        ("PARAMS", (n * k + 1).to_string()),
    ]
}

/// One update rule with its hyper-parameters for this step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    Sgd,
    Momentum {
        mu: f64,
        nesterov: bool,
    },
    Adam {
        beta1: f64,
        beta2: f64,
        eps: f64,
        beta1_pow: f64,
        beta2_pow: f64,
        decoupled_wd: f64,
    },
    RmsProp {
        rho: f64,
        eps: f64,
        momentum: f64,
        centered: bool,
    },
    Adagrad {
        eps: f64,
    },
    Adadelta {
        rho: f64,
        eps: f64,
    },
    Adamax {
        beta1: f64,
        beta2: f64,
        eps: f64,
        beta1_pow: f64,
    },
    /// Lamb's moments and its update direction `r` (the third state); the trust-ratio step
    /// on the parameter follows as tensor ops (it needs the norms of `p` and `r`).
    Lamb {
        beta1: f64,
        beta2: f64,
        eps: f64,
        beta1_pow: f64,
        beta2_pow: f64,
        lamb_wd: f64,
    },
}

impl Rule {
    /// Optimizer state tensors the rule keeps per parameter.
    pub(crate) fn n_states(&self) -> usize {
        match self {
            Rule::Sgd => 0,
            Rule::Momentum { .. } => 1,
            Rule::Adam { .. } => 2,
            Rule::RmsProp { .. } => 3,
            Rule::Adagrad { .. } => 1,
            Rule::Adadelta { .. } | Rule::Adamax { .. } => 2,
            Rule::Lamb { .. } => 3,
        }
    }

    /// The registry entry that applies this rule.
    fn op(&self) -> &'static UpdateOp {
        match self {
            Rule::Sgd => &SGD,
            Rule::Momentum { .. } => &MOMENTUM,
            Rule::Adam { .. } => &ADAM,
            Rule::RmsProp { .. } => &RMSPROP,
            Rule::Adagrad { .. } => &ADAGRAD,
            Rule::Adadelta { .. } => &ADADELTA,
            Rule::Adamax { .. } => &ADAMAX,
            Rule::Lamb { .. } => &LAMB,
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
        Rule::Adagrad { eps } => {
            let g = g + wd * p;
            s[0] += g * g;
            p - lr * g / (s[0].sqrt() + eps)
        }
        Rule::Adadelta { rho, eps } => {
            let g = g + wd * p;
            s[0] = rho * s[0] + (1.0 - rho) * g * g;
            let update = -((s[1] + eps) / (s[0] + eps)).sqrt() * g;
            s[1] = rho * s[1] + (1.0 - rho) * update * update;
            p + lr * update
        }
        Rule::Adamax { beta1, beta2, eps, beta1_pow } => {
            let g = g + wd * p;
            s[0] = beta1 * s[0] + (1.0 - beta1) * g;
            s[1] = (beta2 * s[1] + eps).max(g.abs());
            p - lr / (1.0 - beta1_pow) * s[0] / s[1]
        }
        Rule::Lamb { beta1, beta2, eps, beta1_pow, beta2_pow, lamb_wd } => {
            let g = g + wd * p;
            s[0] = beta1 * s[0] + (1.0 - beta1) * g;
            s[1] = beta2 * s[1] + (1.0 - beta2) * g * g;
            let (m_hat, v_hat) = (s[0] / (1.0 - beta1_pow), s[1] / (1.0 - beta2_pow));
            s[2] = m_hat / (v_hat.sqrt() + eps) + lamb_wd * p;
            p
        }
    }
}

/// The CPU update of every element: `step_scalar` in float64, with the rule chosen once per
/// call rather than per element, and Adam's step-constant factors computed once (the same
/// operations in the same order, so the same bits).
fn update_cpu<T: UpdateFloat>(rule: &Rule, p: &mut [T], g: &[T], states: Vec<&mut [T]>, lr: f64, wd: f64) {
    match (*rule, <[&mut [T]; 2]>::try_from(states)) {
        (Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd }, Ok(states)) => {
            let c2 = (1.0 - beta2_pow).sqrt();
            let (decay, step, eps_hat) = (lr * decoupled_wd, lr * c2 / (1.0 - beta1_pow), eps * c2);
            let (keep1, keep2) = (1.0 - beta1, 1.0 - beta2);
            sweep(p, g, states, &|p, g, s| {
                let p = p - decay * p;
                let g = g + wd * p;
                let m = beta1 * s[0] + keep1 * g;
                let v = beta2 * s[1] + keep2 * g * g;
                s[0] = m;
                s[1] = v;
                p - step * (m / (v.sqrt() + eps_hat))
            })
        }
        (_, Ok(states)) => sweep(p, g, states, &|p, g, s| step_scalar(rule, p, g, s, lr, wd)),
        (_, Err(states)) => match <[&mut [T]; 3]>::try_from(states) {
            Ok(states) => sweep(p, g, states, &|p, g, s| step_scalar(rule, p, g, s, lr, wd)),
            Err(states) => match <[&mut [T]; 1]>::try_from(states) {
                Ok(states) => sweep(p, g, states, &|p, g, s| step_scalar(rule, p, g, s, lr, wd)),
                Err(_) => sweep(p, g, [], &|p, g, s| step_scalar(rule, p, g, s, lr, wd)),
            },
        },
    }
}

/// Elements below which a sweep stays on one thread.
#[cfg(not(target_arch = "wasm32"))]
const SWEEP_SPLIT: usize = 1 << 15;

/// `p[i] = f(p[i], g[i], states at i)` in float64 for every element, writing the states back;
/// large parameters in halves on both sides of a `rayon::join` (each element is independent,
/// so the result does not depend on the split).
fn sweep<T: UpdateFloat, const S: usize>(
    p: &mut [T],
    g: &[T],
    mut states: [&mut [T]; S],
    f: &(impl Fn(f64, f64, &mut [f64; S]) -> f64 + Sync),
) {
    #[cfg(not(target_arch = "wasm32"))]
    if p.len().min(g.len()) > SWEEP_SPLIT {
        return sweep_split(p, g, states, f);
    }
    for i in 0..p.len().min(g.len()) {
        let mut s = [0.0f64; S];
        for (v, st) in s.iter_mut().zip(&states) {
            *v = st[i].to_f64();
        }
        p[i] = T::from_f64(f(p[i].to_f64(), g[i].to_f64(), &mut s));
        for (v, st) in s.iter().zip(states.iter_mut()) {
            st[i] = T::from_f64(*v);
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn sweep_split<T: UpdateFloat, const S: usize>(
    p: &mut [T],
    g: &[T],
    states: [&mut [T]; S],
    f: &(impl Fn(f64, f64, &mut [f64; S]) -> f64 + Sync),
) {
    let mid = p.len().min(g.len()) / 2;
    let (p0, p1) = p.split_at_mut(mid);
    let (g0, g1) = g.split_at(mid);
    let mut halves = states.map(|s| {
        let (a, b) = s.split_at_mut(mid);
        (Some(a), Some(b))
    });
    let s0 = std::array::from_fn(|k| halves[k].0.take().unwrap_or_default());
    let s1 = std::array::from_fn(|k| halves[k].1.take().unwrap_or_default());
    rayon::join(|| sweep(p0, g0, s0, f), || sweep(p1, g1, s1, f));
}

/// The parameter types the CPU updates (the arithmetic is float64 for both).
trait UpdateFloat: Copy + Send + Sync {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl UpdateFloat for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl UpdateFloat for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

fn f(v: f64) -> u32 {
    (v as f32).to_bits()
}

/// An update's attributes: the rule with its hyper-parameters, the learning rate and the L2
/// weight decay.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UpdateAttrs {
    pub rule: Rule,
    pub lr: f64,
    pub wd: f64,
}

impl Attrs for UpdateAttrs {
    fn to_map(&self) -> AttrMap {
        let m = AttrMap::new().with("lr", self.lr).with("weight_decay", self.wd);
        match self.rule {
            Rule::Sgd => m,
            Rule::Momentum { mu, nesterov } => m.with("mu", mu).with("nesterov", nesterov),
            Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd } => m
                .with("beta1", beta1)
                .with("beta2", beta2)
                .with("epsilon", eps)
                .with("beta1_pow", beta1_pow)
                .with("beta2_pow", beta2_pow)
                .with("decoupled_weight_decay", decoupled_wd),
            Rule::RmsProp { rho, eps, momentum, centered } => {
                m.with("rho", rho).with("epsilon", eps).with("momentum", momentum).with("centered", centered)
            }
            Rule::Adagrad { eps } => m.with("epsilon", eps),
            Rule::Adadelta { rho, eps } => m.with("rho", rho).with("epsilon", eps),
            Rule::Adamax { beta1, beta2, eps, beta1_pow } => {
                m.with("beta1", beta1).with("beta2", beta2).with("epsilon", eps).with("beta1_pow", beta1_pow)
            }
            Rule::Lamb { beta1, beta2, eps, beta1_pow, beta2_pow, lamb_wd } => m
                .with("beta1", beta1)
                .with("beta2", beta2)
                .with("epsilon", eps)
                .with("beta1_pow", beta1_pow)
                .with("beta2_pow", beta2_pow)
                .with("lamb_weight_decay", lamb_wd),
        }
    }

    fn from_map(op: &'static str, m: &AttrMap) -> Result<Self> {
        // A merged op's attributes are its rule's.
        let rule = match op.trim_start_matches("merged_") {
            "sgd" => Rule::Sgd,
            "momentum" => Rule::Momentum { mu: m.field(op, "mu")?, nesterov: m.field(op, "nesterov")? },
            "adam" => Rule::Adam {
                beta1: m.field(op, "beta1")?,
                beta2: m.field(op, "beta2")?,
                eps: m.field(op, "epsilon")?,
                beta1_pow: m.field(op, "beta1_pow")?,
                beta2_pow: m.field(op, "beta2_pow")?,
                decoupled_wd: m.field(op, "decoupled_weight_decay")?,
            },
            "rmsprop" => Rule::RmsProp {
                rho: m.field(op, "rho")?,
                eps: m.field(op, "epsilon")?,
                momentum: m.field(op, "momentum")?,
                centered: m.field(op, "centered")?,
            },
            "adagrad" => Rule::Adagrad { eps: m.field(op, "epsilon")? },
            "adadelta" => Rule::Adadelta { rho: m.field(op, "rho")?, eps: m.field(op, "epsilon")? },
            "adamax" => Rule::Adamax {
                beta1: m.field(op, "beta1")?,
                beta2: m.field(op, "beta2")?,
                eps: m.field(op, "epsilon")?,
                beta1_pow: m.field(op, "beta1_pow")?,
            },
            "lamb" => Rule::Lamb {
                beta1: m.field(op, "beta1")?,
                beta2: m.field(op, "beta2")?,
                eps: m.field(op, "epsilon")?,
                beta1_pow: m.field(op, "beta1_pow")?,
                beta2_pow: m.field(op, "beta2_pow")?,
                lamb_wd: m.field(op, "lamb_weight_decay")?,
            },
            other => return Err(Error::invalid(other, "not an update rule")),
        };
        let a = UpdateAttrs { rule, lr: m.field(op, "lr")?, wd: m.field(op, "weight_decay")? };
        let known: Vec<String> = a.to_map().iter().map(|(n, _)| n.to_string()).collect();
        m.check_known(op, &known.iter().map(String::as_str).collect::<Vec<_>>())?;
        Ok(a)
    }
}

impl UpdateAttrs {
    /// Errors for settings that would turn parameters into NaN or move them uphill: a NaN,
    /// infinite or negative learning rate or weight decay, betas or rho outside [0, 1), a
    /// non-finite or negative epsilon or momentum.
    fn validate(&self, op: &'static str) -> Result<()> {
        let check = |name: &str, v: f64, ok: bool| -> Result<()> {
            if ok && v.is_finite() {
                Ok(())
            } else {
                Err(Error::invalid(op, format!("{name} must be {}, got {v}", range_of(name))))
            }
        };
        check("learning_rate", self.lr, self.lr >= 0.0)?;
        check("weight_decay", self.wd, self.wd >= 0.0)?;
        let unit = |v: f64| (0.0..1.0).contains(&v);
        match self.rule {
            Rule::Sgd => Ok(()),
            Rule::Momentum { mu, .. } => check("momentum", mu, mu >= 0.0),
            Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd } => {
                check("beta1", beta1, unit(beta1))?;
                check("beta2", beta2, unit(beta2))?;
                check("epsilon", eps, eps >= 0.0)?;
                check("weight_decay", decoupled_wd, decoupled_wd >= 0.0)?;
                check("beta1_pow", beta1_pow, unit(beta1_pow))?;
                check("beta2_pow", beta2_pow, unit(beta2_pow))
            }
            Rule::RmsProp { rho, eps, momentum, .. } => {
                check("rho", rho, unit(rho))?;
                check("epsilon", eps, eps >= 0.0)?;
                check("momentum", momentum, momentum >= 0.0)
            }
            Rule::Adagrad { eps } => check("epsilon", eps, eps >= 0.0),
            Rule::Adadelta { rho, eps } => {
                check("rho", rho, unit(rho))?;
                check("epsilon", eps, eps >= 0.0)
            }
            Rule::Adamax { beta1, beta2, eps, beta1_pow } => {
                check("beta1", beta1, unit(beta1))?;
                check("beta2", beta2, unit(beta2))?;
                check("epsilon", eps, eps >= 0.0)?;
                check("beta1_pow", beta1_pow, unit(beta1_pow))
            }
            Rule::Lamb { beta1, beta2, eps, beta1_pow, beta2_pow, lamb_wd } => {
                check("beta1", beta1, unit(beta1))?;
                check("beta2", beta2, unit(beta2))?;
                check("epsilon", eps, eps >= 0.0)?;
                check("beta1_pow", beta1_pow, unit(beta1_pow))?;
                check("beta2_pow", beta2_pow, unit(beta2_pow))?;
                check("lamb_weight_decay", lamb_wd, lamb_wd >= 0.0)
            }
        }
    }
}

fn range_of(name: &str) -> &'static str {
    match name {
        "beta1" | "beta2" | "rho" | "beta1_pow" | "beta2_pow" => "in [0, 1)",
        _ => "finite and non-negative",
    }
}

/// One update rule as a registry entry.
pub(crate) struct UpdateOp {
    name: &'static str,
    kernel: &'static Kernel,
    states: usize,
}

pub(crate) static SGD: UpdateOp = UpdateOp { name: "sgd", kernel: &SGD_KERNEL, states: 0 };
pub(crate) static MOMENTUM: UpdateOp = UpdateOp { name: "momentum", kernel: &MOMENTUM_KERNEL, states: 1 };
pub(crate) static ADAM: UpdateOp = UpdateOp { name: "adam", kernel: &ADAM_KERNEL, states: 2 };
pub(crate) static RMSPROP: UpdateOp = UpdateOp { name: "rmsprop", kernel: &RMSPROP_KERNEL, states: 3 };
pub(crate) static ADAGRAD: UpdateOp = UpdateOp { name: "adagrad", kernel: &ADAGRAD_KERNEL, states: 1 };
pub(crate) static ADADELTA: UpdateOp = UpdateOp { name: "adadelta", kernel: &ADADELTA_KERNEL, states: 2 };
pub(crate) static ADAMAX: UpdateOp = UpdateOp { name: "adamax", kernel: &ADAMAX_KERNEL, states: 2 };
pub(crate) static LAMB: UpdateOp = UpdateOp { name: "lamb", kernel: &LAMB_KERNEL, states: 3 };

/// Which input positions the update writes: the parameter and every state.
static INPLACE: [usize; 4] = [0, 2, 3, 4];

op_header!(UpdateOp: UpdateAttrs, (); |op| op.name);

impl Op for UpdateOp {
    fn infer(&self, xs: &[&TensorMeta], a: &UpdateAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let op = self.name;
        if a.rule.n_states() != self.states {
            return Err(Error::invalid(op, format!("the rule {:?} is not {op}'s", a.rule)));
        }
        if xs.len() != 2 + self.states && xs.len() != 3 + self.states {
            return Err(Error::invalid(
                op,
                format!(
                    "takes the parameter, its gradient, {} states and an optional schedule, got {} tensors",
                    self.states,
                    xs.len()
                ),
            ));
        }
        check_member(op, self.states, xs, a)?;
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &UpdateAttrs, _: &()) -> Result<Vec<CpuData>> {
        update_cpu_members(self.name, self.states, k, a)
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &UpdateAttrs, _: &()) -> Result<()> {
        let n = k.ins[0].numel();
        let scheduled = k.ins.len() == 3 + self.states;
        let mut binds = vec![Bind::write(k.x(0)), Bind::read(k.x(1))];
        binds.extend((2..2 + self.states).map(|i| Bind::write(k.x(i))));
        binds.push(if scheduled { Bind::read(k.x(2 + self.states)) } else { Bind::unused(k.ctx) });
        let mut params = vec![n as u32];
        params.extend(settings_words(a, scheduled));
        if mergeable(&a.rule) {
            // The one parameter's first workgroup and elements (`merged_variant`).
            params.extend([0, n as u32]);
        }
        k.ctx.dispatch(self.kernel, 0, "main", &binds, &params, n as u64)
    }

    fn inplace(&self, _: usize) -> Vec<usize> {
        let i = INPLACE.iter().position(|&i| i >= 2 + self.states).unwrap_or(INPLACE.len());
        INPLACE[..i].to_vec()
    }
}

/// The parameter words of an update after its element count: the rule's settings, then
/// whether a schedule tensor is bound.
fn settings_words(a: &UpdateAttrs, scheduled: bool) -> Vec<u32> {
    let (lr, wd) = (a.lr, a.wd);
    let mut words: Vec<u32> = match a.rule {
        Rule::Sgd => vec![f(lr), f(wd)],
        Rule::Momentum { mu, nesterov } => vec![f(lr), f(wd), f(mu), nesterov as u32],
        Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd } => {
            vec![f(lr), f(wd), f(decoupled_wd), f(beta1), f(beta2), f(eps), f(beta1_pow), f(beta2_pow)]
        }
        Rule::RmsProp { rho, eps, momentum, centered } => {
            vec![f(lr), f(wd), f(rho), f(eps), f(momentum), centered as u32]
        }
        Rule::Adagrad { eps } => vec![f(lr), f(wd), f(eps)],
        Rule::Adadelta { rho, eps } => vec![f(lr), f(wd), f(rho), f(eps)],
        Rule::Adamax { beta1, beta2, eps, beta1_pow } => vec![f(lr), f(wd), f(beta1), f(beta2), f(eps), f(beta1_pow)],
        Rule::Lamb { beta1, beta2, eps, beta1_pow, beta2_pow, lamb_wd } => {
            vec![f(lr), f(wd), f(beta1), f(beta2), f(eps), f(beta1_pow), f(beta2_pow), f(lamb_wd)]
        }
    };
    words.push(scheduled as u32);
    words
}

/// True for the rules whose kernels update several parameters in one dispatch.
fn mergeable(rule: &Rule) -> bool {
    matches!(rule, Rule::Sgd | Rule::Momentum { .. } | Rule::Adam { .. })
}

/// The checks of one parameter's tensors `xs` (`[param, grad, states..., schedule?]`).
fn check_member(op: &'static str, states: usize, xs: &[&TensorMeta], a: &UpdateAttrs) -> Result<()> {
    let p = xs[0];
    if let Some(s) = xs.get(2 + states) {
        if s.dtype != p.dtype {
            return Err(Error::DTypeMismatch { op, lhs: p.dtype, rhs: s.dtype });
        }
        if s.dims() != [3] {
            return Err(Error::shape(op, format!("schedule {:?}, expected [3] (lr, beta1_pow, beta2_pow)", s.dims())));
        }
    }
    for (i, t) in xs.iter().enumerate().skip(1).take(1 + states) {
        if t.dtype != p.dtype {
            return Err(Error::DTypeMismatch { op, lhs: p.dtype, rhs: t.dtype });
        }
        if t.shape != p.shape {
            let what = if i == 1 { "gradient" } else { "state" };
            return Err(Error::shape(op, format!("{what} {:?} for parameter {:?}", t.dims(), p.dims())));
        }
    }
    a.validate(op)?;
    if !matches!(p.dtype, DType::Float32 | DType::Float64) || (p.place.is_gpu() && p.dtype != DType::Float32) {
        return Err(Error::unsupported(
            op,
            p.dtype,
            "for parameters (float32 parameters are updated in place; float64 on the CPU)",
        ));
    }
    Ok(())
}

/// The CPU update of a call's parameters: inputs `[param, grad, states...]` per parameter,
/// then the optional schedule (one parameter for the single ops).
fn update_cpu_members(op: &'static str, states: usize, k: &mut CpuCall<'_>, a: &UpdateAttrs) -> Result<Vec<CpuData>> {
    let (mut rule, mut lr, wd) = (a.rule, a.lr, a.wd);
    let per = 2 + states;
    let scheduled = k.ins.len() % per == 1;
    let mut args = k.split();
    if scheduled {
        let s = match args.pop() {
            Some(Err(CpuData::F32(s))) => s.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            Some(Err(CpuData::F64(s))) => s.clone(),
            _ => return Err(Error::invalid(op, "the schedule must be a read-only float tensor")),
        };
        lr *= s[0];
        match &mut rule {
            Rule::Adam { beta1_pow, beta2_pow, .. } | Rule::Lamb { beta1_pow, beta2_pow, .. } => {
                (*beta1_pow, *beta2_pow) = (s[1], s[2]);
            }
            Rule::Adamax { beta1_pow, .. } => *beta1_pow = s[1],
            _ => {}
        }
    }
    let rule = &rule;
    let mut args = args.into_iter();
    while args.len() >= per {
        let mut member: Vec<_> = args.by_ref().take(per).collect();
        let grad = match member.remove(1) {
            Err(g) => g,
            Ok(_) => return Err(Error::invalid(op, "the gradient is not read-only")),
        };
        let mut written: Vec<&mut CpuData> = member.into_iter().filter_map(|a| a.ok()).collect();
        if written.len() != 1 + states {
            return Err(Error::invalid(op, "the parameter and states must be writable"));
        }
        let (param, states) = written.split_at_mut(1);
        macro_rules! run {
            ($variant:ident) => {{
                let (CpuData::$variant(p), CpuData::$variant(g)) = (&mut *param[0], grad) else {
                    return Err(Error::unsupported(op, grad.dtype(), "(parameters must be float32 or float64)"));
                };
                let mut st = Vec::with_capacity(states.len());
                for s in states.iter_mut() {
                    match &mut **s {
                        CpuData::$variant(v) => st.push(v.as_mut_slice()),
                        other => {
                            return Err(Error::DTypeMismatch { op, lhs: grad.dtype(), rhs: other.dtype() });
                        }
                    }
                }
                update_cpu(rule, p, g, st, lr, wd);
            }};
        }
        match grad {
            CpuData::F32(_) => run!(F32),
            _ => run!(F64),
        }
    }
    Ok(Vec::new())
}

/// One rule's update of several parameters in one kernel dispatch, as Paddle's
/// `merged_momentum` / `merged_adam`: inputs `[param, grad, states...]` for each parameter,
/// then the optional schedule; the attributes are the single op's, for every parameter. The
/// eager optimizers use them on a GPU, and a GPU program's fusion pass turns adjacent single
/// updates into them (`static_::merge`). On a GPU the parameters run in as few dispatches as
/// the device's storage buffers allow (at most 16 each), in order: the one place that knows
/// the device's limit. A tensor updated in place that shares
/// memory with another input is an error on both places (each parameter updates once);
/// gradients may share memory.
pub(crate) struct MergedUpdateOp {
    name: &'static str,
    single: &'static UpdateOp,
}

pub(crate) static MERGED_SGD: MergedUpdateOp = MergedUpdateOp { name: "merged_sgd", single: &SGD };
pub(crate) static MERGED_MOMENTUM: MergedUpdateOp = MergedUpdateOp { name: "merged_momentum", single: &MOMENTUM };
pub(crate) static MERGED_ADAM: MergedUpdateOp = MergedUpdateOp { name: "merged_adam", single: &ADAM };

op_header!(MergedUpdateOp: UpdateAttrs, (); |op| op.name);

impl MergedUpdateOp {
    /// Parameters a call with `inputs` inputs updates.
    fn members(&self, inputs: usize) -> usize {
        inputs / (2 + self.single.states)
    }

    /// One dispatch updating the parameters `group` of call `k` (their bindings by `member`).
    fn dispatch<'a>(
        &self,
        k: &'a GpuCall<'_>,
        a: &UpdateAttrs,
        group: &[usize],
        member: &dyn Fn(usize) -> Vec<Bind<'a>>,
    ) -> Result<()> {
        let per = 2 + self.single.states;
        let scheduled = k.ins.len() % per == 1;
        let mut binds: Vec<Bind<'a>> = group.iter().flat_map(|&m| member(m)).collect();
        binds.push(if scheduled { Bind::read(k.x(k.ins.len() - 1)) } else { Bind::unused(k.ctx) });
        let (ranges, groups) = merge::member_words(group.iter().map(|&m| k.ins[m * per].numel() as u32))
            .ok_or_else(|| Error::invalid(self.name, "more than 2^32 invocations in one dispatch"))?;
        let mut params = vec![(groups * crate::backend::gpu::WORKGROUP as u64) as u32];
        params.extend(settings_words(a, scheduled));
        params.extend(ranges);
        let grid = crate::backend::gpu::grid(k.ctx, groups)?;
        k.ctx.dispatch(self.single.kernel, group.len() as u32 - 1, "main", &binds, &params, grid)
    }
}

impl Op for MergedUpdateOp {
    fn infer(&self, xs: &[&TensorMeta], a: &UpdateAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let (op, per) = (self.name, 2 + self.single.states);
        let members = self.members(xs.len());
        if a.rule.n_states() != self.single.states || !mergeable(&a.rule) {
            return Err(Error::invalid(op, format!("the rule {:?} is not {op}'s", a.rule)));
        }
        if members == 0 || xs.len() % per > 1 {
            return Err(Error::invalid(
                op,
                format!(
                    "takes parameters, each with its gradient and {} states, and an optional \
                     schedule, got {} tensors",
                    self.single.states,
                    xs.len()
                ),
            ));
        }
        let schedule = (xs.len() % per == 1).then(|| xs[xs.len() - 1]);
        for m in 0..members {
            let mut member: Vec<&TensorMeta> = xs[m * per..(m + 1) * per].to_vec();
            member.extend(schedule);
            check_member(op, self.single.states, &member, a)?;
        }
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &UpdateAttrs, _: &()) -> Result<Vec<CpuData>> {
        update_cpu_members(self.name, self.single.states, k, a)
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &UpdateAttrs, _: &()) -> Result<()> {
        let per = 2 + self.single.states;
        // Each member's bindings: the parameter and states writable, the gradient read.
        let member = |m: usize| -> Vec<Bind<'_>> {
            let base = m * per;
            let mut b = vec![Bind::write(k.x(base)), Bind::read(k.x(base + 1))];
            b.extend((base + 2..base + per).map(|i| Bind::write(k.x(i))));
            b
        };
        let members = self.members(k.ins.len());
        // As on the CPU: a tensor updated in place shares memory with no other input (WebGPU
        // also forbids a buffer bound twice in one dispatch when either binding is writable);
        // inputs only read may repeat (two gradients that are views of one buffer).
        let writable: Vec<bool> = (0..k.ins.len()).map(|i| i < members * per && i % per != 1).collect();
        for i in (0..k.ins.len()).filter(|&i| writable[i]) {
            if let Some(j) = (0..k.ins.len()).find(|&j| j != i && k.x(j).id == k.x(i).id) {
                return Err(Error::invalid(
                    self.name,
                    format!("input {i} is updated in place and shares memory with input {j}"),
                ));
            }
        }
        // Dispatches of as many members as the device binds and 2³² invocations allow.
        let capacity = merge::capacity(k.ctx, per, 1, MERGED_MAX);
        let elements = |m: usize| k.ins[m * per].numel() as u32;
        let mut group: Vec<usize> = Vec::new();
        for m in 0..members {
            let fits = merge::member_words(group.iter().chain([&m]).map(|&g| elements(g))).is_some();
            if !group.is_empty() && (group.len() == capacity || !fits) {
                self.dispatch(k, a, &std::mem::take(&mut group), &member)?;
            }
            group.push(m);
        }
        self.dispatch(k, a, &group, &member)
    }

    fn inplace(&self, inputs: usize) -> Vec<usize> {
        let per = 2 + self.single.states;
        (0..self.members(inputs)).flat_map(|m| std::iter::once(m * per).chain(m * per + 2..(m + 1) * per)).collect()
    }
}

/// Errors for settings of `rule`, learning rate `lr` or weight decay `wd` that would turn
/// parameters into NaN or move them uphill (the optimizer's name in the error).
pub(crate) fn validate(rule: &Rule, lr: f64, wd: f64) -> Result<()> {
    UpdateAttrs { rule: *rule, lr, wd }.validate(rule.op().name)
}

/// Applies `rule` to `param` in place with gradient `grad` and state tensors `states`
/// (created by the caller as zeros like the parameter), learning rate `lr` (a multiplier of
/// the schedule's when there is one; see the module docs) and L2 weight decay `wd`.
pub(crate) fn apply_rule(
    rule: &Rule,
    param: &Tensor,
    grad: &Tensor,
    states: &[Tensor],
    schedule: Option<&Tensor>,
    lr: f64,
    wd: f64,
) -> Result<()> {
    let op = rule.op();
    let mut inputs = vec![param, grad];
    inputs.extend(states);
    inputs.extend(schedule);
    apply(op, &inputs, UpdateAttrs { rule: *rule, lr, wd })?;
    Ok(())
}

/// True when `param`'s `rule` update may join a merged one: a float32 parameter on a GPU
/// under SGD, momentum or Adam.
pub(crate) fn merges(rule: &Rule, param: &Tensor) -> bool {
    mergeable(rule) && param.place().is_gpu() && param.dtype() == DType::Float32
}

/// Applies `rule` to several parameters in one merged op: each `(param, grad, states)` as
/// `apply_rule` takes them, with one learning rate `lr` and weight decay `wd` for all.
pub(crate) fn apply_merged(rule: &Rule, members: &[(&Tensor, &Tensor, &[Tensor])], lr: f64, wd: f64) -> Result<()> {
    let op = match rule {
        Rule::Sgd => &MERGED_SGD,
        Rule::Momentum { .. } => &MERGED_MOMENTUM,
        Rule::Adam { .. } => &MERGED_ADAM,
        _ => return Err(Error::invalid(rule.op().name, "has no merged form")),
    };
    let mut inputs = Vec::with_capacity(members.len() * (2 + rule.n_states()));
    for (p, g, states) in members {
        inputs.extend([*p, *g]);
        inputs.extend(states.iter());
    }
    apply(op, &inputs, UpdateAttrs { rule: *rule, lr, wd })?;
    Ok(())
}
