//! Capturing eager tensors while a Layer is traced into a program (`jit::to_static`): an
//! eager tensor an op reads (a parameter, a constant) becomes a persistable variable of the
//! program, bound in the traced program's scope to that same tensor, so the program and the
//! layer share parameters. Outside tracing, mixing eager tensors with static variables is
//! an error.

use std::cell::RefCell;

use super::program::{VarDesc, VarId, VarKind};
use super::{current_programs, var_tensor};
use crate::{Result, Tensor};

/// One captured tensor: the variable standing for it.
#[derive(Clone)]
pub(crate) struct TraceInput {
    pub name: String,
    pub eager: Tensor,
    pub var: Tensor,
}

thread_local! {
    static CAPTURES: RefCell<Option<Vec<TraceInput>>> = const { RefCell::new(None) };
}

/// True while a trace captures eager tensors.
pub(crate) fn active() -> bool {
    CAPTURES.with(|c| c.borrow().is_some())
}

/// Runs `f` capturing eager inputs (reusing the variables of `known`); returns its value
/// and everything captured so far.
pub(crate) fn capturing<T>(known: Vec<TraceInput>, f: impl FnOnce() -> T) -> (T, Vec<TraceInput>) {
    super::build_mode::install_capture();
    let outer = CAPTURES.with(|c| c.borrow_mut().replace(known));
    let out = f();
    let caught = CAPTURES.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer)).unwrap_or_default();
    (out, caught)
}

/// Runs `f` with no trace capturing on this thread (an Executor run inside a trace computes),
/// the trace's captures restored after, also on a panic.
pub(crate) fn suspended<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Vec<TraceInput>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            CAPTURES.with(|c| *c.borrow_mut() = outer);
        }
    }
    let _restore = Restore(CAPTURES.with(|c| c.borrow_mut().take()));
    f()
}

/// The variable already standing for the captured eager tensor `t`.
pub(crate) fn id_of(t: &Tensor) -> Option<VarId> {
    CAPTURES.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|v| v.iter().find(|k| k.eager.same_tensor(t)).and_then(|k| k.var.var_ref().map(|r| r.id)))
    })
}

/// The variable of the current main program standing for the eager tensor `t`, created on
/// first use; `None` when no trace is capturing.
pub(crate) fn capture(t: &Tensor) -> Result<Option<VarId>> {
    if !active() {
        return Ok(None);
    }
    if let Some(id) = CAPTURES.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|v| v.iter().find(|k| k.eager.same_tensor(t)).and_then(|k| k.var.var_ref().map(|r| r.id)))
    }) {
        return Ok(Some(id));
    }
    let (main, _) = current_programs();
    let base = t.name().unwrap_or_else(|| "captured".into());
    let name = if main.var(&base).is_none() { base } else { main.unique_name(&format!("{base}.captured")) };
    let trainable = t.requires_grad();
    let id = main.add_var(VarDesc {
        name: name.clone(),
        shape: t.shape().iter().map(|&d| d as i64).collect(),
        dtype: t.dtype(),
        persistable: true,
        stop_gradient: !trainable,
        kind: if trainable { VarKind::Parameter } else { VarKind::Plain },
        block: 0,
    })?;
    let var = var_tensor(&main, id, t.shape(), t.dtype());
    CAPTURES.with(|c| {
        if let Some(v) = c.borrow_mut().as_mut() {
            v.push(TraceInput { name, eager: t.clone(), var });
        }
    });
    Ok(Some(id))
}
