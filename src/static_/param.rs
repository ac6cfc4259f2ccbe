//! Parameters and other persistable variables in static mode: a variable of the main
//! program that lives in the Scope, whose initialiser ops go into the startup program.

use super::program::{VarDesc, VarKind};
use super::{BUILD_PLACE, current_programs, program_guard, var_tensor};
use crate::{DType, Error, Result, Tensor};

const OP: &str = "create_parameter";

/// How a parameter of a program is made: its name, whether it trains, its learning-rate
/// multiplier (a `ParamAttr`'s settings) and its initialiser, which builds the startup ops
/// on the place it is given.
pub(crate) struct ParamSpec<'a> {
    pub name: String,
    pub trainable: bool,
    pub learning_rate: f64,
    pub init: &'a dyn Fn(crate::Place) -> Result<Tensor>,
}

/// A parameter of the current main program initialised in the current startup program
/// (see `nn::create_parameter`). A name already used by a parameter of the same shape and
/// dtype returns that parameter (Paddle's sharing by `ParamAttr(name=...)`).
pub(crate) fn create_parameter(shape: &[usize], dtype: DType, spec: ParamSpec<'_>) -> Result<Tensor> {
    let ParamSpec { name, trainable, learning_rate, init } = spec;
    let (main, _) = current_programs();
    if let Some(existing) = main.var(&name) {
        let same = existing.kind == VarKind::Parameter
            && existing.dtype == dtype
            && existing.shape == shape.iter().map(|&d| d as i64).collect::<Vec<_>>();
        if let (true, Some(t)) =
            (same, main.parameter_handles().into_iter().find(|t| t.name().as_deref() == Some(&name)))
        {
            return Ok(t);
        }
        return Err(Error::invalid(
            OP,
            format!("the program already has a variable named {name:?} ({} {:?})", existing.dtype, existing.shape),
        ));
    }
    let t = create_persistable(&name, shape, dtype, VarKind::Parameter, || init(BUILD_PLACE))?;
    t.set_stop_gradient(!trainable);
    t.set_learning_rate_multiplier(learning_rate);
    {
        let mut d = main.data();
        if let Some(&id) = d.names.get(&name) {
            d.vars[id].stop_gradient = !trainable;
        }
    }
    main.register_param(&t);
    Ok(t)
}

/// A persistable variable `name` of the current main program, initialised by the ops `init`
/// appends to the current startup program.
pub(crate) fn create_persistable(
    name: &str,
    shape: &[usize],
    dtype: DType,
    kind: VarKind,
    init: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    let (main, startup) = current_programs();
    let value = program_guard(&startup, &startup, init)?;
    let id = match value.var_ref() {
        Some(v) if v.program.same_program(&startup) => v.id,
        _ => return Err(Error::invalid(OP, format!("the initialiser of {name:?} did not build a startup op"))),
    };
    startup.rename_var(id, name)?;
    {
        let mut d = startup.data();
        d.vars[id].persistable = true;
        d.vars[id].kind = kind;
    }
    let id = main.add_var(VarDesc {
        name: name.to_string(),
        shape: shape.iter().map(|&d| d as i64).collect(),
        dtype,
        persistable: true,
        stop_gradient: kind != VarKind::Parameter,
        kind,
        block: 0,
    })?;
    Ok(var_tensor(&main, id, shape, dtype))
}
