//! The program file of an inference model (`.pdmodel`): a versioned, line-based text
//! format, readable and diffable.
//!
//! ```text
//! dygraph-program 1
//! feed pixel
//! fetch softmax_0.tmp_0
//! var <name> <dtype> <dims, comma-separated, -1 unknown; "-" for a 0-d> <kind> <persistable> <stop_gradient> <block>
//! block <idx> <parent | -> <params> <results>
//! op <block> <role> <type> <inputs> <outputs> <sub_blocks>
//! attr <name> <type> <value...>
//! end
//! ```
//!
//! Names and string values are percent-encoded (every byte outside `A-Z a-z 0-9 . _ @ -`
//! becomes `%XX`), lists are comma-separated (`-` for an empty one), floats use Rust's
//! shortest round-trip form. Every `attr` line belongs to the op above it. Loading checks
//! the version, every name, every op type against the registry and every attribute map
//! against its op, so a corrupt or mismatched file is a typed error.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::program::{Block, OpDesc, OpRole, Program, ProgramData, VarDesc, VarKind};
use crate::ops::AttrMap;
use crate::ops::registry::attr_text::{attr_line, bad, dec, enc, list, parse_attr, parse_list};
use crate::{Error, Result};

const OP: &str = "load_inference_model";

const MAGIC: &str = "dygraph-program";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

fn role_name(r: OpRole) -> &'static str {
    match r {
        OpRole::Forward => "forward",
        OpRole::Backward => "backward",
        OpRole::Optimize => "optimize",
    }
}

fn kind_name(k: VarKind) -> &'static str {
    match k {
        VarKind::Data => "data",
        VarKind::Parameter => "param",
        VarKind::Plain => "plain",
    }
}

/// The text of `program` with its feed and fetch names.
pub(crate) fn write_program(program: &Program, feeds: &[String], fetches: &[String]) -> String {
    let used: std::collections::HashSet<usize> = program.used_vars().into_iter().collect();
    let d = program.data();
    let mut s = format!("{MAGIC} {FORMAT_VERSION}\n");
    for f in feeds {
        let _ = writeln!(s, "feed {}", enc(f));
    }
    for f in fetches {
        let _ = writeln!(s, "fetch {}", enc(f));
    }
    for (id, v) in d.vars.iter().enumerate() {
        if !used.contains(&id) && !feeds.contains(&v.name) && !fetches.contains(&v.name) {
            continue;
        }
        let dims = if v.shape.is_empty() { "-".into() } else { list(&v.shape) };
        let _ = writeln!(
            s,
            "var {} {} {dims} {} {} {} {}",
            enc(&v.name),
            v.dtype,
            kind_name(v.kind),
            v.persistable,
            v.stop_gradient,
            v.block
        );
    }
    let names = |ids: &[usize]| -> String {
        if ids.is_empty() {
            "-".into()
        } else {
            ids.iter().map(|&i| enc(&d.vars[i].name)).collect::<Vec<_>>().join(",")
        }
    };
    for b in &d.blocks {
        let parent = b.parent.map_or("-".to_string(), |p| p.to_string());
        let _ = writeln!(s, "block {} {parent} {} {}", b.idx, names(&b.params), names(&b.results));
    }
    for b in &d.blocks {
        for op in &b.ops {
            let _ = writeln!(
                s,
                "op {} {} {} {} {} {}",
                b.idx,
                role_name(op.role),
                enc(&op.op_type),
                names(&op.inputs),
                names(&op.outputs),
                list(&op.sub_blocks)
            );
            for (n, v) in op.attrs.iter() {
                let _ = writeln!(s, "{}", attr_line(n, v));
            }
        }
    }
    s.push_str("end\n");
    s
}

/// Parses a program file: the program and its feed and fetch names.
pub(crate) fn read_program(text: &str) -> Result<(Program, Vec<String>, Vec<String>)> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    match head.as_slice() {
        [MAGIC, v] => {
            let v: u32 = v.parse().map_err(|_| bad("bad version"))?;
            if v != FORMAT_VERSION {
                return Err(Error::invalid(
                    OP,
                    format!("program file version {v}; this build reads version {FORMAT_VERSION}"),
                ));
            }
        }
        _ => return Err(bad(format!("not a dygraph program (first line should be \"{MAGIC} {FORMAT_VERSION}\")"))),
    }
    let (mut feeds, mut fetches) = (Vec::new(), Vec::new());
    let mut vars: Vec<VarDesc> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut ended = false;
    for (no, line) in lines.enumerate() {
        let at = |e: Error| match e {
            Error::InvalidArgument { op, msg } => Error::InvalidArgument { op, msg: format!("line {}: {msg}", no + 2) },
            other => other,
        };
        let f: Vec<&str> = line.split(' ').collect();
        let ids = |s: &str| -> Result<Vec<usize>> {
            if s == "-" {
                return Ok(Vec::new());
            }
            s.split(',')
                .map(|n| {
                    let n = dec(n)?;
                    names.get(&n).copied().ok_or_else(|| bad(format!("unknown variable {n:?}")))
                })
                .collect()
        };
        match f.as_slice() {
            ["feed", n] => feeds.push(dec(n).map_err(at)?),
            ["fetch", n] => fetches.push(dec(n).map_err(at)?),
            ["var", name, dtype, dims, kind, persistable, stop, block] => {
                let name = dec(name).map_err(at)?;
                let kind = match *kind {
                    "data" => VarKind::Data,
                    "param" => VarKind::Parameter,
                    "plain" => VarKind::Plain,
                    k => return Err(at(bad(format!("unknown variable kind {k:?}")))),
                };
                let parse_bool = |s: &str| s.parse::<bool>().map_err(|_| at(bad(format!("bad flag {s:?}"))));
                let desc = VarDesc {
                    name: name.clone(),
                    shape: parse_list(dims).map_err(at)?,
                    dtype: dtype.parse().map_err(|_| at(bad(format!("bad dtype {dtype:?}"))))?,
                    persistable: parse_bool(persistable)?,
                    stop_gradient: parse_bool(stop)?,
                    kind,
                    block: block.parse().map_err(|_| at(bad("bad block index")))?,
                };
                if desc.shape.iter().any(|&d| d < -1) || names.insert(name.clone(), vars.len()).is_some() {
                    return Err(at(bad(format!("variable {name:?} is repeated or has a bad shape"))));
                }
                vars.push(desc);
            }
            ["block", idx, parent, params, results] => {
                let idx: usize = idx.parse().map_err(|_| at(bad("bad block index")))?;
                if idx != blocks.len() {
                    return Err(at(bad("blocks out of order")));
                }
                let parent = if *parent == "-" {
                    None
                } else {
                    Some(parent.parse::<usize>().map_err(|_| at(bad("bad parent")))?).filter(|&p| p < idx)
                };
                if idx > 0 && parent.is_none() {
                    return Err(at(bad("a sub-block needs an earlier parent")));
                }
                blocks.push(Block {
                    idx,
                    parent,
                    ops: Vec::new(),
                    params: ids(params).map_err(at)?,
                    results: ids(results).map_err(at)?,
                });
            }
            ["op", block, role, ty, inputs, outputs, subs] => {
                let b: usize = block.parse().map_err(|_| at(bad("bad block index")))?;
                let role = match *role {
                    "forward" => OpRole::Forward,
                    "backward" => OpRole::Backward,
                    "optimize" => OpRole::Optimize,
                    r => return Err(at(bad(format!("unknown op role {r:?}")))),
                };
                let sub_blocks: Vec<usize> = parse_list(subs).map_err(at)?;
                let op = OpDesc {
                    op_type: dec(ty).map_err(at)?,
                    inputs: ids(inputs).map_err(at)?,
                    outputs: ids(outputs).map_err(at)?,
                    attrs: AttrMap::new(),
                    sub_blocks,
                    role,
                };
                blocks.get_mut(b).ok_or_else(|| at(bad(format!("op in unknown block {b}"))))?.ops.push(op);
            }
            ["attr", name, kind, rest @ ..] => {
                let v = parse_attr(kind, rest).map_err(at)?;
                let op = blocks
                    .iter_mut()
                    .rev()
                    .find_map(|b| b.ops.last_mut())
                    .ok_or_else(|| at(bad("attribute before any op")))?;
                op.attrs.set(dec(name).map_err(at)?, v);
            }
            ["end"] => {
                ended = true;
                break;
            }
            _ => return Err(at(bad(format!("unexpected line {line:?}")))),
        }
    }
    if !ended {
        return Err(bad("the file is truncated (no \"end\" line)"));
    }
    validate(&blocks)?;
    for n in feeds.iter().chain(&fetches) {
        if !names.contains_key(n) {
            return Err(bad(format!("feed or fetch {n:?} is not a variable")));
        }
    }
    let program = Program::new();
    {
        let mut d: std::sync::MutexGuard<'_, ProgramData> = program.data();
        d.vars = vars;
        d.names = names;
        d.blocks = blocks;
        d.version = 1;
    }
    Ok((program, feeds, fetches))
}

/// Every op is a registry op with a valid attribute map (or control flow with its blocks),
/// and every sub-block index exists.
fn validate(blocks: &[Block]) -> Result<()> {
    if blocks.is_empty() {
        return Err(bad("no blocks"));
    }
    for b in blocks {
        for op in &b.ops {
            if let Some(&s) = op.sub_blocks.iter().find(|&&s| s >= blocks.len() || blocks[s].parent != Some(b.idx)) {
                return Err(bad(format!(
                    "{} op in block {} names block {s}, which is not its child",
                    op.op_type, b.idx
                )));
            }
            if super::control::Control::of(&op.op_type).is_some() {
                if op.sub_blocks.len() != 2 || op.sub_blocks.iter().any(|&s| s == 0 || s >= blocks.len()) {
                    return Err(bad(format!("{} op with bad sub-blocks {:?}", op.op_type, op.sub_blocks)));
                }
                continue;
            }
            if !op.sub_blocks.is_empty() {
                return Err(bad(format!("{} op has sub-blocks", op.op_type)));
            }
            let entry = crate::ops::registry::find_op(&op.op_type)
                .map_err(|_| bad(format!("unknown op type {:?}", op.op_type)))?;
            entry.normalize_attrs(&op.attrs).map_err(|e| bad(format!("{}: {e}", op.op_type)))?;
        }
    }
    Ok(())
}
