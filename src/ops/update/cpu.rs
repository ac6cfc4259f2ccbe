//! The CPU kernel of every update: the rule's float64 step over each element, the states
//! loaded into and stored from a small array, large parameters in halves on both sides of
//! a `rayon::join` (each element is independent, so the result does not depend on the
//! split).

use super::UpdateAttrs;
use super::UpdateRule;
use crate::backend::cpu::CpuData;
use crate::ops::registry::op::CpuCall;
use crate::{Error, Result};

/// The most states a rule keeps per parameter.
const MAX_STATES: usize = 4;

/// Elements below which a sweep stays on one thread.
#[cfg(not(target_arch = "wasm32"))]
const SWEEP_SPLIT: usize = 1 << 15;

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

/// `p[i] = step(p[i], g[i], states at i)` for every element, writing the states back.
fn sweep<R: UpdateRule, T: UpdateFloat>(c: &R::Step, p: &mut [T], g: &[T], mut states: Vec<&mut [T]>) {
    #[cfg(not(target_arch = "wasm32"))]
    if p.len().min(g.len()) > SWEEP_SPLIT {
        let mid = p.len().min(g.len()) / 2;
        let (p0, p1) = p.split_at_mut(mid);
        let (g0, g1) = g.split_at(mid);
        let (s0, s1): (Vec<&mut [T]>, Vec<&mut [T]>) = states.into_iter().map(|s| s.split_at_mut(mid)).unzip();
        rayon::join(|| sweep::<R, T>(c, p0, g0, s0), || sweep::<R, T>(c, p1, g1, s1));
        return;
    }
    let n = R::STATES.len();
    for i in 0..p.len().min(g.len()) {
        let mut s = [0.0f64; MAX_STATES];
        for (v, st) in s.iter_mut().zip(&states) {
            *v = st[i].to_f64();
        }
        p[i] = T::from_f64(R::step(c, p[i].to_f64(), g[i].to_f64(), &mut s[..n]));
        for (v, st) in s.iter().zip(states.iter_mut()) {
            st[i] = T::from_f64(*v);
        }
    }
}

/// The CPU update of a call's parameters: inputs `[param, grad, states...]` per parameter,
/// then the optional schedule (one parameter for the single ops).
pub(super) fn update<R: UpdateRule>(op: &'static str, k: &mut CpuCall<'_>, a: &UpdateAttrs<R>) -> Result<Vec<CpuData>> {
    let states = R::STATES.len();
    debug_assert!(states <= MAX_STATES);
    let (mut rule, mut lr) = (a.rule.clone(), a.lr);
    let per = 2 + states;
    let scheduled = k.ins.len() % per == 1;
    let mut args = k.split();
    if scheduled {
        let s = match args.pop() {
            Some(Err(CpuData::F32(s))) => s.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            Some(Err(CpuData::F64(s))) => s.clone(),
            _ => return Err(Error::invalid(op, "the schedule must be a read-only float tensor")),
        };
        if s.get(3).is_some_and(|&skip| skip != 0.0) {
            return Ok(Vec::new());
        }
        lr *= s[0];
        rule.scheduled(s[1], s[2]);
    }
    let step = rule.prepare(lr, a.wd);
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
                sweep::<R, _>(&step, p, g, st);
            }};
        }
        match grad {
            CpuData::F32(_) => run!(F32),
            _ => run!(F64),
        }
    }
    Ok(Vec::new())
}
