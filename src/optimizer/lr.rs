//! Learning-rate schedulers (`paddle.optimizer.lr`). A scheduler is a cheap-clone handle:
//! give one clone to the optimizer and call `step()` on another, as in Paddle.

use std::sync::{Arc, Mutex};

pub use super::lr_schedules::{
    Anneal, CyclicLR, CyclicMode, LambdaDecay, NoamDecay, OneCycleLR, OneCycleOptions, PiecewiseDecay, PolynomialDecay,
};

/// How a schedule computes the learning rate of an epoch.
pub trait Schedule: Send {
    /// The learning rate at `epoch` (0 after construction).
    fn lr_at(&mut self, epoch: i64) -> f64;
    /// Feeds a metric (only `ReduceOnPlateau` uses it).
    fn observe(&mut self, _metric: f64) {}
}

struct State {
    schedule: Box<dyn Schedule>,
    epoch: i64,
    lr: f64,
}

/// A shared learning-rate schedule.
#[derive(Clone)]
pub struct LrScheduler(Arc<Mutex<State>>);

impl LrScheduler {
    /// Wraps a custom schedule.
    pub fn new(mut schedule: impl Schedule + 'static) -> Self {
        let lr = schedule.lr_at(0);
        LrScheduler(Arc::new(Mutex::new(State { schedule: Box::new(schedule), epoch: 0, lr })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current learning rate.
    pub fn get_lr(&self) -> f64 {
        self.state().lr
    }

    /// The current epoch (0 after construction).
    pub fn last_epoch(&self) -> i64 {
        self.state().epoch
    }

    /// Advances one epoch.
    pub fn step(&self) {
        let mut s = self.state();
        s.epoch += 1;
        let e = s.epoch;
        s.lr = s.schedule.lr_at(e);
    }

    /// Advances one epoch after observing `metric` (for `ReduceOnPlateau`).
    pub fn step_with(&self, metric: f64) {
        let mut s = self.state();
        s.schedule.observe(metric);
        s.epoch += 1;
        let e = s.epoch;
        s.lr = s.schedule.lr_at(e);
    }

    /// Sets the epoch (restoring a checkpoint).
    pub fn set_epoch(&self, epoch: i64) {
        let mut s = self.state();
        s.epoch = epoch;
        s.lr = s.schedule.lr_at(epoch);
    }
}

/// `lr · gamma^⌊epoch / step_size⌋`.
pub struct StepDecay {
    pub learning_rate: f64,
    pub step_size: i64,
    pub gamma: f64,
}

impl StepDecay {
    /// Paddle's `StepDecay(learning_rate, step_size, gamma=0.1)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, step_size: i64, gamma: f64) -> LrScheduler {
        LrScheduler::new(StepDecay { learning_rate, step_size: step_size.max(1), gamma })
    }
}

impl Schedule for StepDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        self.learning_rate * self.gamma.powi((epoch / self.step_size) as i32)
    }
}

/// `lr · gamma^(milestones passed)`.
pub struct MultiStepDecay {
    pub learning_rate: f64,
    pub milestones: Vec<i64>,
    pub gamma: f64,
}

impl MultiStepDecay {
    /// Paddle's `MultiStepDecay(learning_rate, milestones, gamma=0.1)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, milestones: &[i64], gamma: f64) -> LrScheduler {
        LrScheduler::new(MultiStepDecay { learning_rate, milestones: milestones.to_vec(), gamma })
    }
}

impl Schedule for MultiStepDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let passed = self.milestones.iter().filter(|&&m| epoch >= m).count();
        self.learning_rate * self.gamma.powi(passed as i32)
    }
}

/// `lr · gamma^epoch`.
pub struct ExponentialDecay {
    pub learning_rate: f64,
    pub gamma: f64,
}

impl ExponentialDecay {
    /// Paddle's `ExponentialDecay(learning_rate, gamma)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, gamma: f64) -> LrScheduler {
        LrScheduler::new(ExponentialDecay { learning_rate, gamma })
    }
}

impl Schedule for ExponentialDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        self.learning_rate * self.gamma.powi(epoch as i32)
    }
}

/// `eta_min + (lr − eta_min)·(1 + cos(π·epoch/T_max))/2`.
pub struct CosineAnnealingDecay {
    pub learning_rate: f64,
    pub t_max: i64,
    pub eta_min: f64,
}

impl CosineAnnealingDecay {
    /// Paddle's `CosineAnnealingDecay(learning_rate, T_max, eta_min=0)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(learning_rate: f64, t_max: i64, eta_min: f64) -> LrScheduler {
        LrScheduler::new(CosineAnnealingDecay { learning_rate, t_max: t_max.max(1), eta_min })
    }
}

impl Schedule for CosineAnnealingDecay {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        let t = std::f64::consts::PI * epoch as f64 / self.t_max as f64;
        self.eta_min + (self.learning_rate - self.eta_min) * (1.0 + t.cos()) / 2.0
    }
}

/// The learning rate after a warm-up: a constant or another scheduler.
#[derive(Clone)]
pub enum AfterWarmup {
    /// A constant learning rate.
    Constant(f64),
    /// A scheduler, stepped from epoch 0 when the warm-up ends.
    Scheduler(LrScheduler),
}

/// Linear warm-up from `start_lr` to `end_lr` over `warmup_steps`, then `after`.
pub struct LinearWarmup {
    pub after: AfterWarmup,
    pub warmup_steps: i64,
    pub start_lr: f64,
    pub end_lr: f64,
}

impl LinearWarmup {
    /// Paddle's `LinearWarmup(learning_rate, warmup_steps, start_lr, end_lr)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(after: AfterWarmup, warmup_steps: i64, start_lr: f64, end_lr: f64) -> LrScheduler {
        LrScheduler::new(LinearWarmup { after, warmup_steps: warmup_steps.max(1), start_lr, end_lr })
    }
}

impl Schedule for LinearWarmup {
    fn lr_at(&mut self, epoch: i64) -> f64 {
        if epoch < self.warmup_steps {
            return self.start_lr + (self.end_lr - self.start_lr) * epoch as f64 / self.warmup_steps as f64;
        }
        match &self.after {
            AfterWarmup::Constant(lr) => *lr,
            AfterWarmup::Scheduler(s) => {
                s.set_epoch(epoch - self.warmup_steps);
                s.get_lr()
            }
        }
    }
}

/// Whether a smaller or a larger metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better (a loss).
    Min,
    /// Higher is better (an accuracy).
    Max,
}

/// Multiplies the learning rate by `factor` when the metric stops improving for `patience`
/// epochs (relative threshold), then waits `cooldown` epochs; never below `min_lr`.
pub struct ReduceOnPlateau {
    pub lr: f64,
    pub mode: PlateauMode,
    pub factor: f64,
    pub patience: i64,
    pub threshold: f64,
    pub cooldown: i64,
    pub min_lr: f64,
    best: Option<f64>,
    bad_epochs: i64,
    cooldown_left: i64,
}

impl ReduceOnPlateau {
    /// Paddle's `ReduceOnPlateau(learning_rate, mode, factor=0.1, patience=10,
    /// threshold=1e-4, cooldown=0, min_lr=0)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        learning_rate: f64,
        mode: PlateauMode,
        factor: f64,
        patience: i64,
        threshold: f64,
        cooldown: i64,
        min_lr: f64,
    ) -> LrScheduler {
        LrScheduler::new(ReduceOnPlateau {
            lr: learning_rate,
            mode,
            factor,
            patience,
            threshold,
            cooldown,
            min_lr,
            best: None,
            bad_epochs: 0,
            cooldown_left: 0,
        })
    }
}

impl Schedule for ReduceOnPlateau {
    fn lr_at(&mut self, _epoch: i64) -> f64 {
        self.lr
    }

    fn observe(&mut self, metric: f64) {
        let better = match (self.best, self.mode) {
            (None, _) => true,
            (Some(b), PlateauMode::Min) => metric < b * (1.0 - self.threshold),
            (Some(b), PlateauMode::Max) => metric > b * (1.0 + self.threshold),
        };
        if better {
            self.best = Some(metric);
            self.bad_epochs = 0;
        } else {
            self.bad_epochs += 1;
        }
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            self.bad_epochs = 0;
        }
        if self.bad_epochs > self.patience {
            let new = (self.lr * self.factor).max(self.min_lr);
            if self.lr - new > 1e-8 {
                self.lr = new;
            }
            self.cooldown_left = self.cooldown;
            self.bad_epochs = 0;
        }
    }
}
