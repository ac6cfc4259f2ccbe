//! Grad mode: whether ops record the graph. Thread-local, like PyTorch's and Paddle's.

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True when ops record the autograd graph on this thread.
pub fn is_grad_enabled() -> bool {
    ENABLED.with(|e| e.get())
}

/// Restores the previous grad mode when dropped.
#[must_use = "grad mode is restored when the guard drops"]
pub struct NoGradGuard {
    prev: bool,
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.prev));
    }
}

pub(crate) fn set_grad_enabled(enabled: bool) -> NoGradGuard {
    let prev = ENABLED.with(|e| e.replace(enabled));
    NoGradGuard { prev }
}

/// Disables graph recording until the guard drops (`with paddle.no_grad():`).
pub fn no_grad_guard() -> NoGradGuard {
    set_grad_enabled(false)
}

/// Re-enables graph recording inside a `no_grad` region until the guard drops.
pub fn enable_grad() -> NoGradGuard {
    set_grad_enabled(true)
}

/// Runs `f` without recording the graph (`paddle.no_grad()` as a closure).
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = no_grad_guard();
    f()
}
