//! The dispatcher's static modes: building, where an op whose inputs are static variables
//! (or an op without inputs while static mode is on) appends to the program instead of
//! running, and tracing, where every op with inputs appends to the program a
//! `jit::to_static` trace builds (its eager inputs captured as the program's variables).
//! Both are installed into their slots when a program or a trace first exists.

use crate::ops::registry::dispatch::record::records;
use crate::ops::registry::dispatch::{self, Call, Mode, Next, Slot};
use crate::{Result, Tensor};

struct Build;

static BUILD: Build = Build;

struct Capture;

static CAPTURE: Capture = Capture;

/// Installs the building mode (before the first program is built).
pub(super) fn install_build() {
    dispatch::install(Slot::Build, &BUILD);
}

/// Installs the tracing mode (before the first trace).
pub(super) fn install_capture() {
    dispatch::install(Slot::Capture, &CAPTURE);
}

/// Appends `call` to its program: its outputs are static variables.
fn append(call: &mut dyn Call) -> Result<Vec<Tensor>> {
    let records = records(call);
    let outs = call.outs()?.to_vec();
    super::append(call.op().name(), call.inputs(), call.attr_map(), &outs, records)
}

impl Mode for Build {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        let inputs = call.inputs();
        if inputs.iter().any(|t| t.is_static_var()) || (inputs.is_empty() && super::in_static_mode()) {
            append(call)
        } else {
            next.run(call)
        }
    }
}

impl Mode for Capture {
    // While a trace captures, every op is recorded, even one that reads only eager tensors
    // (a parameter transposed, batch norm's running statistics): run now, it would freeze
    // their values into the program as constants.
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        if !call.inputs().is_empty() && super::trace::active() { append(call) } else { next.run(call) }
    }
}
