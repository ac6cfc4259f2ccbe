//! Inference models (Paddle's `save_inference_model` / `load_inference_model`): the program
//! pruned to what the fetch targets need, written as `{prefix}.pdmodel` (the versioned text
//! format of `serialize.rs`), and the persistable values it reads as `{prefix}.pdiparams`
//! (safetensors). Loading needs none of the model's Rust code.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::executor::{Executor, FetchTarget};
use super::program::{Program, VarKind};
use super::serialize::{read_program, write_program};
use crate::tensor::StateDict;
use crate::{Error, Result, Tensor};

/// A loaded inference model: its program and the names to feed and fetch.
#[derive(Clone, Debug)]
pub struct InferenceModel {
    /// The pruned program.
    pub program: Program,
    /// The data variables to feed, in order.
    pub feed_names: Vec<String>,
    /// The variables to fetch, in order.
    pub fetch_names: Vec<String>,
}

fn files(prefix: &Path) -> (PathBuf, PathBuf) {
    let p = prefix.as_os_str().to_owned();
    let mut model = p.clone();
    model.push(".pdmodel");
    let mut params = p;
    params.push(".pdiparams");
    (PathBuf::from(model), PathBuf::from(params))
}

/// Saves the part of `program` that computes `fetch_vars` from `feed_vars`, with the
/// values of its parameters from `exe`'s scope (`paddle.static.save_inference_model`).
pub fn save_inference_model(
    path_prefix: impl AsRef<Path>,
    feed_vars: &[&Tensor],
    fetch_vars: &[&Tensor],
    exe: &Executor,
    program: &Program,
) -> Result<()> {
    const OP: &str = "save_inference_model";
    let feeds: Vec<String> = feed_vars.iter().map(|t| t.fetch_name()).collect::<Result<_>>()?;
    let fetches: Vec<String> = fetch_vars.iter().map(|t| t.fetch_name()).collect::<Result<_>>()?;
    for f in &feeds {
        if program.var(f).is_none_or(|v| v.kind != VarKind::Data) {
            return Err(Error::invalid(OP, format!("feed {f:?} is not a data variable of the program")));
        }
    }
    let refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let pruned = program.prune(&refs)?;
    let used = pruned.used_vars();
    let mut state = StateDict::new();
    {
        let d = pruned.data();
        for &id in &used {
            let v = &d.vars[id];
            if v.kind == VarKind::Data && !feeds.contains(&v.name) {
                return Err(Error::invalid(
                    OP,
                    format!("the fetch targets need data variable {:?}, which is not in feed_vars", v.name),
                ));
            }
            if v.persistable {
                let t = exe.scope().var(&v.name).ok_or_else(|| {
                    Error::invalid(
                        OP,
                        format!("the scope has no value for {:?}: run the startup program first", v.name),
                    )
                })?;
                state.insert(v.name.clone(), t);
            }
        }
    }
    let (model, params) = files(path_prefix.as_ref());
    crate::tensor::checkpoint::save(&state, &params)?;
    crate::tensor::checkpoint::write_atomic(&model, write_program(&pruned, &feeds, &fetches).as_bytes())
}

/// Loads a model saved by [`save_inference_model`], putting its parameters into `exe`'s
/// scope on `exe`'s place (`paddle.static.load_inference_model`).
pub fn load_inference_model(path_prefix: impl AsRef<Path>, exe: &Executor) -> Result<InferenceModel> {
    const OP: &str = "load_inference_model";
    let (model, params) = files(path_prefix.as_ref());
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{OP}: {}: {e}", p.display()))))
    };
    load_inference_model_from_bytes(&read(&model)?, &read(&params)?, exe)
}

/// [`load_inference_model`] from the two files' contents (a browser fetches them).
pub fn load_inference_model_from_bytes(model: &[u8], params: &[u8], exe: &Executor) -> Result<InferenceModel> {
    const OP: &str = "load_inference_model";
    let text = std::str::from_utf8(model).map_err(|_| Error::invalid(OP, "the program file is not UTF-8 text"))?;
    let (program, feed_names, fetch_names) = read_program(text)?;
    let state = crate::tensor::checkpoint::load_from_bytes(params, crate::Place::Cpu)?;
    let params = "the parameter file";
    let mut expected = HashSet::new();
    for v in program.vars().into_iter().filter(|v| v.persistable) {
        let t = state
            .get(&v.name)
            .ok_or_else(|| Error::invalid(OP, format!("{params} holds no value for parameter {:?}", v.name)))?;
        let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
        if shape != v.shape || t.dtype() != v.dtype {
            return Err(Error::invalid(
                OP,
                format!(
                    "{:?} is {} {:?} in {params} but the program declares {} {:?}",
                    v.name,
                    t.dtype(),
                    t.shape(),
                    v.dtype,
                    v.shape
                ),
            ));
        }
        expected.insert(v.name.clone());
        exe.scope().set_var(&v.name, t.to(exe.place())?);
    }
    if let Some(extra) = state.keys().into_iter().find(|k| !expected.contains(k)) {
        return Err(Error::invalid(OP, format!("{params} holds {extra:?}, which the program does not use")));
    }
    Ok(InferenceModel { program, feed_names, fetch_names })
}
