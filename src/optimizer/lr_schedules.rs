//! More learning-rate schedules (`paddle.optimizer.lr`): `PolynomialDecay`, `NoamDecay`,
//! `PiecewiseDecay`, `LambdaDecay`, `OneCycleLR` and `CyclicLR`, with Paddle's formulas.
//! Each constructor returns the shared [`LrScheduler`] handle; an "epoch" is one `step()`.

use super::lr::{LrScheduler, Schedule};
use crate::{Error, Result};

/// `(lr − end_lr)·(1 − epoch/decay_steps)^power + end_lr`; with `cycle`, `decay_steps`
/// grows to the next multiple past the epoch, else the epoch stops at `decay_steps`.
pub struct PolynomialDecay {
    pub learning_rate: f64,
    pub decay_steps: i64,
    pub end_lr: f64,
    pub power: f64,
    pub cycle: bool,
}

impl PolynomialDecay {
    /// Paddle's `PolynomialDecay(learning_rate, decay_steps, end_lr=1e-4, power=1.0, cycle=False)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, decay_steps: i64, end_lr: f64, power: f64, cycle: bool) -> LrScheduler {
        LrScheduler::new(PolynomialDecay { learning_rate, decay_steps: decay_steps.max(1), end_lr, power, cycle })
    }
}

impl Schedule for PolynomialDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let (epoch, steps) = if self.cycle {
            let div = if epoch == 0 { 1 } else { (epoch as f64 / self.decay_steps as f64).ceil() as i64 };
            (epoch as f64, (self.decay_steps * div) as f64)
        } else {
            (epoch.min(self.decay_steps) as f64, self.decay_steps as f64)
        };
        (self.learning_rate - self.end_lr) * (1.0 - epoch / steps).powf(self.power) + self.end_lr
    }
}

/// The Transformer paper's schedule: `lr · d_model^−0.5 · min(epoch^−0.5,
/// epoch · warmup_steps^−1.5)` (epoch 0 counts as 1 in the first term).
pub struct NoamDecay {
    pub d_model: f64,
    pub warmup_steps: f64,
    pub learning_rate: f64,
}

impl NoamDecay {
    /// Paddle's `NoamDecay(d_model, warmup_steps, learning_rate=1.0)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(d_model: usize, warmup_steps: usize, learning_rate: f64) -> LrScheduler {
        LrScheduler::new(NoamDecay { d_model: d_model as f64, warmup_steps: warmup_steps.max(1) as f64, learning_rate })
    }
}

impl Schedule for NoamDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let e = epoch as f64;
        let a = if epoch == 0 { 1.0 } else { e.powf(-0.5) };
        let b = self.warmup_steps.powf(-1.5) * e;
        self.learning_rate * self.d_model.powf(-0.5) * a.min(b)
    }
}

/// `values[i]` for the first boundary `i` the epoch is below, else the last value.
pub struct PiecewiseDecay {
    pub boundaries: Vec<i64>,
    pub values: Vec<f64>,
}

impl PiecewiseDecay {
    /// Paddle's `PiecewiseDecay(boundaries, values)`: `values` has one more entry than
    /// `boundaries`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(boundaries: &[i64], values: &[f64]) -> Result<LrScheduler> {
        if values.len() != boundaries.len() + 1 {
            return Err(Error::invalid(
                "PiecewiseDecay",
                format!("{} values for {} boundaries (need one more value)", values.len(), boundaries.len()),
            ));
        }
        Ok(LrScheduler::new(PiecewiseDecay { boundaries: boundaries.to_vec(), values: values.to_vec() }))
    }
}

impl Schedule for PiecewiseDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let i = self.boundaries.iter().position(|&b| epoch < b).unwrap_or(self.boundaries.len());
        self.values[i]
    }
}

/// `lr · f(epoch)` for a user function.
pub struct LambdaDecay {
    pub learning_rate: f64,
    pub lr_lambda: Box<dyn Fn(i64) -> f64 + Send>,
}

impl LambdaDecay {
    /// Paddle's `LambdaDecay(learning_rate, lr_lambda)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, lr_lambda: impl Fn(i64) -> f64 + Send + 'static) -> LrScheduler {
        LrScheduler::new(LambdaDecay { learning_rate, lr_lambda: Box::new(lr_lambda) })
    }
}

impl Schedule for LambdaDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        self.learning_rate * (self.lr_lambda)(epoch)
    }
}

/// How a cyclic schedule moves between two rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anneal {
    /// Half a cosine.
    Cos,
    /// A straight line.
    Linear,
}

impl Anneal {
    fn at(self, start: f64, end: f64, pct: f64) -> f64 {
        match self {
            Anneal::Cos => end + (start - end) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0),
            Anneal::Linear => (end - start) * pct + start,
        }
    }
}

/// The one-cycle policy: from `max_lr / divide_factor` up to `max_lr` over the first
/// `phase_pct` of `total_steps`, then down to `end_lr` (three-phase: back to the initial
/// rate first, then down to `end_lr`).
pub struct OneCycleLR {
    /// `(end step, start rate, end rate)` of each phase.
    phases: Vec<(f64, f64, f64)>,
    total_steps: i64,
    anneal: Anneal,
}

/// `OneCycleLR`'s settings beyond the maximum rate and the step count (Paddle's defaults).
#[derive(Clone, Copy, Debug)]
pub struct OneCycleOptions {
    /// The initial rate is `max_lr / divide_factor` (25).
    pub divide_factor: f64,
    /// The final rate (1e-4).
    pub end_learning_rate: f64,
    /// The share of the steps spent rising (0.3).
    pub phase_pct: f64,
    /// Cosine (default) or linear.
    pub anneal: Anneal,
    /// Rise, fall to the initial rate, then fall to the end rate.
    pub three_phase: bool,
}

impl Default for OneCycleOptions {
    fn default() -> Self {
        OneCycleOptions {
            divide_factor: 25.0,
            end_learning_rate: 1e-4,
            phase_pct: 0.3,
            anneal: Anneal::Cos,
            three_phase: false,
        }
    }
}

impl OneCycleLR {
    /// Paddle's `OneCycleLR(max_learning_rate, total_steps, ...)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(max_learning_rate: f64, total_steps: i64, o: OneCycleOptions) -> Result<LrScheduler> {
        if total_steps < 1 || !(0.0..1.0).contains(&o.phase_pct) || o.divide_factor <= 0.0 {
            return Err(Error::invalid(
                "OneCycleLR",
                format!(
                    "total_steps {total_steps} must be positive, phase_pct {} in [0, 1), divide_factor {} positive",
                    o.phase_pct, o.divide_factor
                ),
            ));
        }
        let (initial, total, pct) = (max_learning_rate / o.divide_factor, total_steps as f64, o.phase_pct);
        let phases = if o.three_phase {
            vec![
                (pct * total - 1.0, initial, max_learning_rate),
                (2.0 * pct * total - 2.0, max_learning_rate, initial),
                (total - 1.0, initial, o.end_learning_rate),
            ]
        } else {
            vec![(pct * total - 1.0, initial, max_learning_rate), (total - 1.0, max_learning_rate, o.end_learning_rate)]
        };
        Ok(LrScheduler::new(OneCycleLR { phases, total_steps, anneal: o.anneal }))
    }
}

impl Schedule for OneCycleLR {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        // Past the last step the rate stays at the end rate (Paddle raises instead).
        let step = epoch.min(self.total_steps - 1) as f64;
        let mut start_step = 0.0;
        for (i, &(end_step, start, end)) in self.phases.iter().enumerate() {
            if step <= end_step || i == self.phases.len() - 1 {
                let span = end_step - start_step;
                let pct = if span > 0.0 { (step - start_step) / span } else { 1.0 };
                return self.anneal.at(start, end, pct);
            }
            start_step = end_step;
        }
        self.phases[self.phases.len() - 1].2
    }
}

/// How `CyclicLR` scales each cycle's amplitude.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CyclicMode {
    /// The full amplitude every cycle.
    Triangular,
    /// Halved each cycle.
    Triangular2,
    /// Multiplied by `gamma^iteration`.
    ExpRange { gamma: f64 },
}

/// A triangle wave between `base_lr` and `max_lr`: `step_size_up` steps up, then
/// `step_size_down` (default the same) down, its amplitude scaled per `mode`.
pub struct CyclicLR {
    pub base_lr: f64,
    pub max_lr: f64,
    pub step_size_up: f64,
    pub step_size_down: f64,
    pub mode: CyclicMode,
}

impl CyclicLR {
    /// Paddle's `CyclicLR(base_learning_rate, max_learning_rate, step_size_up,
    /// step_size_down=None, mode='triangular', exp_gamma=1.0)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        base_learning_rate: f64,
        max_learning_rate: f64,
        step_size_up: usize,
        step_size_down: Option<usize>,
        mode: CyclicMode,
    ) -> Result<LrScheduler> {
        let down = step_size_down.unwrap_or(step_size_up);
        if step_size_up == 0 && down == 0 {
            return Err(Error::invalid("CyclicLR", "a cycle needs at least one step"));
        }
        Ok(LrScheduler::new(CyclicLR {
            base_lr: base_learning_rate,
            max_lr: max_learning_rate,
            step_size_up: step_size_up as f64,
            step_size_down: down as f64,
            mode,
        }))
    }
}

impl Schedule for CyclicLR {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let size = self.step_size_up + self.step_size_down;
        let up_ratio = self.step_size_up / size;
        let it = epoch as f64;
        let cycle = 1.0 + (it / size).floor();
        let pct = 1.0 + it / size - cycle;
        let factor = if pct <= up_ratio { pct / up_ratio } else { (1.0 - pct) / (1.0 - up_ratio) };
        let scale = match self.mode {
            CyclicMode::Triangular => 1.0,
            CyclicMode::Triangular2 => 1.0 / 2f64.powf(cycle - 1.0),
            CyclicMode::ExpRange { gamma } => gamma.powf(it),
        };
        self.base_lr + (self.max_lr - self.base_lr) * factor * scale
    }
}
