//! The place new tensors go to: the process-wide default (`set_device`, else
//! `DYGRAPH_DEVICE`, else a hardware GPU if there is one, else the CPU) and the scoped
//! override `guard` (Paddle 1.x `fluid.dygraph.guard`).

use std::cell::RefCell;
use std::sync::Mutex;

use crate::backend::gpu;
use crate::{Place, Result};

static DEFAULT_PLACE: Mutex<Option<Place>> = Mutex::new(None);

thread_local! {
    static GUARDS: RefCell<Vec<Place>> = const { RefCell::new(Vec::new()) };
}

/// Sets the process-wide default place from `"cpu"`, `"gpu"` or `"gpu:N"`. Asking for a GPU
/// opens that adapter (a software one such as lavapipe included) and fails if it is absent.
pub fn set_device(device: &str) -> Result<Place> {
    let place: Place = device.parse()?;
    set_place(place)?;
    Ok(place)
}

/// Sets the process-wide default place.
pub fn set_place(place: Place) -> Result<()> {
    if let Place::Gpu(i) = place {
        gpu::context(i)?;
    }
    *DEFAULT_PLACE.lock().unwrap_or_else(|e| e.into_inner()) = Some(place);
    Ok(())
}

/// The current place as Paddle spells it: `"cpu"` or `"gpu:0"`.
pub fn get_device() -> String {
    match current_place() {
        Ok(Place::Gpu(i)) => format!("gpu:{i}"),
        _ => "cpu".to_string(),
    }
}

/// The place new tensors are created on: the innermost `guard`, else the default set by
/// `set_device`, else `DYGRAPH_DEVICE`, else a hardware GPU if there is one, else the CPU.
pub fn current_place() -> Result<Place> {
    if let Some(p) = GUARDS.with(|g| g.borrow().last().copied()) {
        return Ok(p);
    }
    let mut default = DEFAULT_PLACE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = *default {
        return Ok(p);
    }
    let place = match std::env::var("DYGRAPH_DEVICE") {
        Ok(s) if !s.trim().is_empty() => {
            let p: Place = s.parse()?;
            if let Place::Gpu(i) = p {
                gpu::context(i)?;
            }
            p
        }
        _ => {
            if gpu::hardware_adapter_available() {
                Place::Gpu(0)
            } else {
                Place::Cpu
            }
        }
    };
    *default = Some(place);
    Ok(place)
}

/// Runs `f` with `place` as the current place on this thread (Paddle's `fluid.dygraph.guard`),
/// restoring the previous place afterwards, also when `f` unwinds.
pub fn guard<R>(place: Place, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            GUARDS.with(|g| g.borrow_mut().pop());
        }
    }
    GUARDS.with(|g| g.borrow_mut().push(place));
    let _pop = Pop;
    f()
}
