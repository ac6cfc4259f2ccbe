//! Checkpoints in the safetensors format: the state dicts of models and optimizers,
//! readable by Python's `safetensors` + numpy. Files are written atomically (temporary file,
//! fsync, rename, fsync of the directory), so a crash never leaves a half-written checkpoint
//! under the final name; the temporary files of writes killed midway are removed by a later
//! save of the same file once they have been left a minute (where `/proc` tells which
//! processes still run).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::backend::cpu::CpuData;
use crate::tensor::StateDict;
use crate::{DType, Error, Place, Result, Tensor};

/// The keys in order, each escaped (`\\` and `\n`) and ended by a newline, so that any key
/// (empty, or holding newlines) keeps its place.
const ORDER_KEY: &str = "dygraph.order.v2";
/// The first format: keys joined by newlines (read for older checkpoints).
const ORDER_KEY_V1: &str = "dygraph.order";

fn escape(key: &str) -> String {
    key.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn to_st(dtype: DType) -> Dtype {
    match dtype {
        DType::Bool => Dtype::BOOL,
        DType::Int32 => Dtype::I32,
        DType::Int64 => Dtype::I64,
        DType::Float16 => Dtype::F16,
        DType::Float32 => Dtype::F32,
        DType::Float64 => Dtype::F64,
        DType::BFloat16 => Dtype::BF16,
    }
}

fn host_bytes(d: &CpuData) -> Vec<u8> {
    match d {
        CpuData::Bool(v) => v.iter().map(|&b| b as u8).collect(),
        CpuData::I32(v) => bytemuck::cast_slice(v).to_vec(),
        CpuData::I64(v) => bytemuck::cast_slice(v).to_vec(),
        CpuData::F16(v) => bytemuck::cast_slice(v).to_vec(),
        CpuData::F32(v) => bytemuck::cast_slice(v).to_vec(),
        CpuData::F64(v) => bytemuck::cast_slice(v).to_vec(),
        CpuData::BF16(v) => bytemuck::cast_slice(v).to_vec(),
    }
}

/// The safetensors bytes of `state` (for targets without a filesystem).
pub fn save_to_bytes(state: &StateDict) -> Result<Vec<u8>> {
    save_to_bytes_with(state, &[])
}

/// [`save_to_bytes`] with extra entries in the file's metadata (read back by [`metadata`]).
pub(crate) fn save_to_bytes_with(state: &StateDict, extra: &[(&str, String)]) -> Result<Vec<u8>> {
    let mut blobs = Vec::with_capacity(state.len());
    for (name, t) in state.iter() {
        blobs.push((name.to_string(), t.dtype(), t.shape().to_vec(), host_bytes(&t.to_cpu_data("save")?)));
    }
    let views: Vec<(String, TensorView<'_>)> = blobs
        .iter()
        .map(|(n, d, s, b)| {
            TensorView::new(to_st(*d), s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| Error::invalid("save", format!("{n}: {e}")))
        })
        .collect::<Result<_>>()?;
    let order: String = state.keys().iter().map(|k| escape(k) + "\n").collect();
    let mut meta = HashMap::from([(ORDER_KEY.to_string(), order)]);
    meta.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    safetensors::serialize(views, Some(meta)).map_err(|e| Error::invalid("save", e.to_string()))
}

/// Writes `state` to `path` atomically (Paddle's `paddle.save`).
pub fn save(state: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    write_atomic(path.as_ref(), &save_to_bytes(state)?)
}

/// Writes `bytes` to `path` through a temporary file in the same directory, synced and
/// renamed over it: a reader sees the old file or the new one, never a part.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file_name =
        path.file_name().ok_or_else(|| Error::invalid("save", format!("{} is not a file path", path.display())))?;
    remove_stale_temps(dir, &file_name.to_string_lossy());
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let tmp = dir.join(format!(".{}.{}.{nonce}.tmp", file_name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // Persist the rename itself.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Io(std::io::Error::new(e.kind(), format!("save {}: {e}", path.display())))
    })
}

/// How long a temporary file must have been left unchanged before a later save removes it:
/// a write in progress keeps changing its file, while a writer this machine cannot see (over
/// a network filesystem, or in another PID namespace) may not be in its `/proc`.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes the temporary files that writes of `file_name` left in `dir` when their process
/// was killed mid-write: named `.<file_name>.<pid>.<nonce>.tmp`, `pid` not running here, and
/// unchanged for [`STALE_AFTER`]. Where a process's liveness cannot be read (no `/proc`, as
/// on macOS and Windows), they stay.
fn remove_stale_temps(dir: &Path, file_name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{file_name}.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Some((pid, nonce)) =
            name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".tmp")).and_then(|r| r.split_once('.'))
        else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), nonce.parse::<u128>()) else { continue };
        let unchanged = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        if unchanged && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn from_st(op: &'static str, name: &str, v: &TensorView<'_>) -> Result<CpuData> {
    let b = v.data();
    fn pod<T: bytemuck::Pod>(b: &[u8]) -> Vec<T> {
        b.chunks_exact(std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).collect()
    }
    Ok(match v.dtype() {
        Dtype::BOOL => CpuData::Bool(b.iter().map(|&x| x != 0).collect()),
        Dtype::I32 => CpuData::I32(pod(b)),
        Dtype::I64 => CpuData::I64(pod(b)),
        Dtype::F16 => CpuData::F16(pod(b)),
        Dtype::F32 => CpuData::F32(pod(b)),
        Dtype::F64 => CpuData::F64(pod(b)),
        Dtype::BF16 => CpuData::BF16(pod(b)),
        other => {
            return Err(Error::invalid(
                op,
                format!("tensor {name:?} has dtype {other:?}, which dygraph does not support"),
            ));
        }
    })
}

/// The metadata entries of safetensors bytes (empty when the file has none).
pub(crate) fn metadata(op: &'static str, bytes: &[u8]) -> Result<HashMap<String, String>> {
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| Error::invalid(op, format!("not a safetensors file: {e}")))?;
    Ok(header.metadata().clone().unwrap_or_default())
}

/// Reads a state dict from safetensors bytes, onto `place`.
pub fn load_from_bytes(bytes: &[u8], place: Place) -> Result<StateDict> {
    const OP: &str = "load";
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::invalid(OP, format!("not a valid safetensors checkpoint: {e}")))?;
    let meta = SafeTensors::read_metadata(bytes).ok().and_then(|(_, m)| m.metadata().clone()).unwrap_or_default();
    let order: Vec<String> = match (meta.get(ORDER_KEY), meta.get(ORDER_KEY_V1)) {
        (Some(s), _) => s.split_terminator('\n').map(unescape).collect(),
        (None, Some(s)) => s.split('\n').filter(|n| !n.is_empty()).map(str::to_string).collect(),
        (None, None) => Vec::new(),
    };
    let mut names: Vec<String> = order.into_iter().filter(|n| st.names().contains(&n.as_str())).collect();
    let mut rest: Vec<String> =
        st.names().into_iter().filter(|n| !names.iter().any(|m| m == n)).map(str::to_string).collect();
    rest.sort();
    names.extend(rest);
    let mut out = StateDict::new();
    for name in names {
        let v = st.tensor(&name).map_err(|e| Error::invalid(OP, format!("{name}: {e}")))?;
        let data = from_st(OP, &name, &v)?;
        out.insert(name, Tensor::from_data_on(data, v.shape().to_vec(), place)?);
    }
    Ok(out)
}

/// Reads a checkpoint written by `save` (or by Python's safetensors) onto the CPU (Paddle's
/// `paddle.load`). Truncated or corrupt files are an error naming the file.
pub fn load(path: impl AsRef<Path>) -> Result<StateDict> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("load {}: {e}", path.display()))))?;
    load_from_bytes(&bytes, Place::Cpu).map_err(|e| match e {
        Error::InvalidArgument { op, msg } => Error::InvalidArgument { op, msg: format!("{}: {msg}", path.display()) },
        other => other,
    })
}
