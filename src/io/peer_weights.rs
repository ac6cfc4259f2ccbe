//! Weights saved by the peers: Paddle's `.pdparams` (`paddle.save` of a state dict: a pickled
//! dict of numpy arrays) and PyTorch's `torch.save` of a `state_dict` (a zip holding
//! `data.pkl` and one file per storage). Both are read with the restricted pickle reader, so
//! a file can describe tensors but never run code; anything else in it is a typed error.
//!
//! Paddle's layouts are dygraph's, so `load_paddle` gives a state dict that `set_state_dict`
//! takes as it is. PyTorch differs in two ways, which [`from_torch`] maps: `Linear.weight`
//! is `[out, in]` (Paddle: `[in, out]`), and batch norms keep `running_mean` / `running_var` /
//! `num_batches_tracked` (Paddle: `_mean` / `_variance`, no counter).

use std::io::Read;
use std::path::Path;

use half::{bf16, f16};

use super::pickle::{Obj, Pickle};
use crate::backend::cpu::CpuData;
use crate::nn::{Layer, StateDict};
use crate::{Error, Place, Result, Tensor};

/// Reading results before the file's name is known: a message.
pub(crate) type Parse<T> = std::result::Result<T, String>;

/// The key `paddle.save` adds beside the arrays (structured name → parameter name).
const PADDLE_NAME_TABLE: &str = "StructuredToParameterName@@";

/// The element types the two formats store, with the dtype each becomes here.
#[derive(Clone, Copy, Debug)]
enum Elem {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U8,
    U16,
    U32,
    U64,
    Bool,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::F64 | Elem::I64 | Elem::U64 => 8,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::F16 | Elem::BF16 | Elem::I16 | Elem::U16 => 2,
            Elem::I8 | Elem::U8 | Elem::Bool => 1,
        }
    }

    /// numpy's type code without its byte order (`f4`, `i8`, `b1`, ...).
    fn from_numpy(code: &str) -> Option<Elem> {
        Some(match code {
            "f8" => Elem::F64,
            "f4" => Elem::F32,
            "f2" => Elem::F16,
            "i8" => Elem::I64,
            "i4" => Elem::I32,
            "i2" => Elem::I16,
            "i1" => Elem::I8,
            "u1" => Elem::U8,
            "u2" => Elem::U16,
            "u4" => Elem::U32,
            "u8" => Elem::U64,
            "b1" => Elem::Bool,
            _ => return None,
        })
    }

    /// PyTorch's storage class (`FloatStorage`, ...).
    fn from_torch(storage: &str) -> Option<Elem> {
        Some(match storage {
            "DoubleStorage" => Elem::F64,
            "FloatStorage" => Elem::F32,
            "HalfStorage" => Elem::F16,
            "BFloat16Storage" => Elem::BF16,
            "LongStorage" => Elem::I64,
            "IntStorage" => Elem::I32,
            "ShortStorage" => Elem::I16,
            "CharStorage" => Elem::I8,
            "ByteStorage" => Elem::U8,
            "BoolStorage" => Elem::Bool,
            _ => return None,
        })
    }

    /// The elements at `indices` of `bytes`, converted to dygraph's storage.
    fn decode(self, bytes: &[u8], little: bool, indices: &[usize]) -> Parse<CpuData> {
        fn read<const N: usize>(b: &[u8], i: usize, little: bool) -> [u8; N] {
            let mut a: [u8; N] = b[i * N..(i + 1) * N].try_into().expect("N bytes");
            if !little {
                a.reverse();
            }
            a
        }
        Ok(match self {
            Elem::F64 => CpuData::F64(indices.iter().map(|&j| f64::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::F32 => CpuData::F32(indices.iter().map(|&j| f32::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::F16 => CpuData::F16(indices.iter().map(|&j| f16::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::BF16 => CpuData::BF16(indices.iter().map(|&j| bf16::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::I64 => CpuData::I64(indices.iter().map(|&j| i64::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::I32 => CpuData::I32(indices.iter().map(|&j| i32::from_le_bytes(read(bytes, j, little))).collect()),
            Elem::I16 => {
                CpuData::I32(indices.iter().map(|&j| i16::from_le_bytes(read(bytes, j, little)) as i32).collect())
            }
            Elem::I8 => CpuData::I32(indices.iter().map(|&j| bytes[j] as i8 as i32).collect()),
            Elem::U8 => CpuData::I32(indices.iter().map(|&j| bytes[j] as i32).collect()),
            Elem::U16 => {
                CpuData::I32(indices.iter().map(|&j| u16::from_le_bytes(read(bytes, j, little)) as i32).collect())
            }
            Elem::U32 => {
                CpuData::I64(indices.iter().map(|&j| u32::from_le_bytes(read(bytes, j, little)) as i64).collect())
            }
            Elem::U64 => CpuData::I64(
                indices
                    .iter()
                    .map(|&j| i64::try_from(u64::from_le_bytes(read(bytes, j, little))))
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| "a uint64 value above int64's range".to_string())?,
            ),
            Elem::Bool => CpuData::Bool(indices.iter().map(|&j| bytes[j] != 0).collect()),
        })
    }
}

/// The storage positions of a strided view's elements in row-major order, every one checked
/// to lie inside a storage of `len` elements.
fn strided_positions(offset: usize, size: &[usize], stride: &[usize], len: usize) -> Parse<Vec<usize>> {
    let numel = size.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the element count overflows")?;
    if numel == 0 {
        return Ok(Vec::new());
    }
    let last = size
        .iter()
        .zip(stride)
        .try_fold(offset, |a, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| x.checked_add(a)))
        .ok_or("the view's extent overflows")?;
    if last >= len {
        return Err(format!(
            "a view of size {size:?}, stride {stride:?}, offset {offset} reaches element {last} of a storage of {len}"
        ));
    }
    let mut out = Vec::with_capacity(numel);
    let mut idx = vec![0usize; size.len()];
    for _ in 0..numel {
        out.push(offset + idx.iter().zip(stride).map(|(i, s)| i * s).sum::<usize>());
        for d in (0..size.len()).rev() {
            idx[d] += 1;
            if idx[d] < size[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

fn usizes(pk: &Pickle, i: usize, what: &str) -> Parse<Vec<usize>> {
    let items = pk.items(i).ok_or_else(|| format!("{what} is {}, not a tuple", pk.describe(i)))?;
    items
        .iter()
        .map(|&j| {
            pk.int(j).and_then(|v| usize::try_from(v).ok()).ok_or_else(|| format!("{what} holds {}", pk.describe(j)))
        })
        .collect()
}

fn is_global(pk: &Pickle, i: usize, modules: &[&str], name: &str) -> bool {
    pk.global(i).is_some_and(|(m, n)| n == name && modules.contains(&m))
}

/// The entries of the top-level dict, keys as strings.
fn top_dict(pk: &Pickle) -> Parse<Vec<(String, usize)>> {
    let Obj::Dict(entries) = pk.get(pk.root) else {
        return Err(format!("the file holds {}, not a dict of tensors", pk.describe(pk.root)));
    };
    entries
        .iter()
        .map(|&(k, v)| Ok((pk.str(k).ok_or_else(|| format!("a key is {}", pk.describe(k)))?.to_string(), v)))
        .collect()
}

fn state_dict(op: &'static str, tensors: Vec<(String, CpuData, Vec<usize>)>, place: Place) -> Result<StateDict> {
    let mut out = StateDict::new();
    for (name, data, shape) in tensors {
        let t = Tensor::from_data_on(data, shape, place).map_err(|e| Error::invalid(op, format!("{name}: {e}")))?;
        out.insert(name, t);
    }
    Ok(out)
}

// ---------------------------------------------------------------- Paddle

/// numpy's `ndarray.__reduce__` form: `_reconstruct(ndarray, (0,), b'b')` built with the
/// state `(version, shape, dtype, is_fortran, raw bytes)`.
pub(crate) fn numpy_array(pk: &Pickle, i: usize) -> Parse<(CpuData, Vec<usize>)> {
    const MODULES: &[&str] = &["numpy.core.multiarray", "numpy._core.multiarray"];
    let Obj::Call { func, state, .. } = pk.get(i) else {
        return Err(format!("{} is not a numpy array", pk.describe(i)));
    };
    if !is_global(pk, *func, MODULES, "_reconstruct") {
        return Err(format!("{} is not a numpy array", pk.describe(*func)));
    }
    let state = state.ok_or("a numpy array without its state")?;
    let s = pk.items(state).filter(|s| s.len() == 5).ok_or("a numpy array state that is not 5 items")?;
    let shape = usizes(pk, s[1], "the array's shape")?;
    let (elem, little) = numpy_dtype(pk, s[2])?;
    let fortran = pk.int(s[3]).ok_or("the array's order flag is not a bool")? != 0;
    let data = pk.raw(s[4]).ok_or_else(|| format!("the array's data is {}, not raw bytes", pk.describe(s[4])))?;
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the element count overflows")?;
    if numel.checked_mul(elem.size()) != Some(data.len()) {
        return Err(format!(
            "shape {shape:?} of {elem:?} needs {numel} elements but the data has {} bytes",
            data.len()
        ));
    }
    let positions = if fortran && shape.len() > 1 {
        let mut stride = vec![1usize; shape.len()];
        for d in 1..shape.len() {
            stride[d] = stride[d - 1] * shape[d - 1];
        }
        strided_positions(0, &shape, &stride, numel)?
    } else {
        (0..numel).collect()
    };
    Ok((elem.decode(&data, little, &positions)?, shape))
}

/// `numpy.dtype(code, False, True)` built with `(3, byte order, ...)`.
fn numpy_dtype(pk: &Pickle, i: usize) -> Parse<(Elem, bool)> {
    let Obj::Call { func, args, state } = pk.get(i) else {
        return Err(format!("the array's dtype is {}", pk.describe(i)));
    };
    if !is_global(pk, *func, &["numpy"], "dtype") {
        return Err(format!("the array's dtype is {}", pk.describe(*func)));
    }
    let code = pk.items(*args).and_then(|a| a.first()).and_then(|&c| pk.str(c)).ok_or("a dtype without its code")?;
    let elem = Elem::from_numpy(code).ok_or_else(|| format!("numpy dtype {code:?} is not a number or bool type"))?;
    let order = state.and_then(|s| pk.items(s)).and_then(|s| s.get(1)).and_then(|&o| pk.str(o)).unwrap_or("|");
    let little = match order {
        "<" | "|" => true,
        ">" => false,
        "=" => cfg!(target_endian = "little"),
        other => return Err(format!("byte order {other:?}")),
    };
    Ok((elem, little))
}

/// Reads a Paddle parameter file (`paddle.save(layer.state_dict(), "m.pdparams")`, any
/// pickle protocol) from its bytes onto `place`. Names and layouts are Paddle's, which are
/// dygraph's: the result goes to `set_state_dict` as it is.
pub fn load_paddle_from_bytes(bytes: &[u8], place: Place) -> Result<StateDict> {
    const OP: &str = "load_paddle";
    let read = || -> Parse<Vec<(String, CpuData, Vec<usize>)>> {
        if bytes.starts_with(b"PK\x03\x04") {
            return Err("a zip archive is not supported here (PyTorch's format: use load_torch)".into());
        }
        let pk = Pickle::parse(bytes)?;
        let mut out = Vec::new();
        for (name, v) in top_dict(&pk)? {
            if name == PADDLE_NAME_TABLE {
                continue;
            }
            let (data, shape) = numpy_array(&pk, v).map_err(|e| format!("{name:?}: {e}"))?;
            out.push((name, data, shape));
        }
        Ok(out)
    };
    state_dict(OP, read().map_err(|e| Error::invalid(OP, e))?, place)
}

/// Reads a Paddle `.pdparams` file onto the CPU; see [`load_paddle_from_bytes`].
pub fn load_paddle(path: impl AsRef<Path>) -> Result<StateDict> {
    load_file("load_paddle", path.as_ref(), load_paddle_from_bytes)
}

// ---------------------------------------------------------------- PyTorch

/// One `_rebuild_tensor_v2(storage, offset, size, stride, ...)` (or a `_rebuild_parameter`
/// around one): the data read from its storage file.
fn torch_tensor(
    pk: &Pickle,
    i: usize,
    storage: &mut dyn FnMut(&str) -> Parse<Vec<u8>>,
    budget: &mut usize,
) -> Parse<(CpuData, Vec<usize>)> {
    const UTILS: &[&str] = &["torch._utils"];
    let Obj::Call { func, args, .. } = pk.get(i) else {
        return Err(format!("{} is not a tensor", pk.describe(i)));
    };
    let args = pk.items(*args).ok_or("a call without an argument tuple")?;
    if is_global(pk, *func, UTILS, "_rebuild_parameter") || is_global(pk, *func, UTILS, "_rebuild_parameter_with_state")
    {
        let inner = *args.first().ok_or("_rebuild_parameter without its tensor")?;
        return torch_tensor(pk, inner, storage, budget);
    }
    if !is_global(pk, *func, UTILS, "_rebuild_tensor_v2") {
        return Err(format!("{} is not a supported tensor constructor", pk.describe(*func)));
    }
    if args.len() < 4 {
        return Err("_rebuild_tensor_v2 with fewer than 4 arguments".into());
    }
    let Obj::Persistent(pid) = pk.get(args[0]) else {
        return Err(format!("the tensor's storage is {}", pk.describe(args[0])));
    };
    let pid = pk.items(*pid).filter(|p| p.len() >= 3).ok_or("a storage id that is not a 5-tuple")?;
    if pk.str(pid[0]) != Some("storage") {
        return Err(format!("a persistent id of kind {}", pk.describe(pid[0])));
    }
    let elem = match pk.global(pid[1]) {
        Some(("torch", n)) => Elem::from_torch(n).ok_or_else(|| format!("storage type torch.{n} is not supported"))?,
        _ => return Err(format!("storage type {}", pk.describe(pid[1]))),
    };
    let key = pk.str(pid[2]).ok_or("a storage key that is not a string")?;
    let offset = pk.int(args[1]).and_then(|v| usize::try_from(v).ok()).ok_or("a negative storage offset")?;
    let size = usizes(pk, args[2], "the tensor's size")?;
    let stride = usizes(pk, args[3], "the tensor's stride")?;
    if size.len() != stride.len() {
        return Err(format!("size {size:?} and stride {stride:?} differ in rank"));
    }
    let numel = size.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the element count overflows")?;
    // Views may repeat storage elements (stride 0); never let one make us allocate more
    // elements than the file has bytes.
    *budget = budget.checked_sub(numel).ok_or("the tensors hold more elements than the file has bytes")?;
    let bytes = storage(key)?;
    let positions = strided_positions(offset, &size, &stride, bytes.len() / elem.size())?;
    Ok((elem.decode(&bytes, true, &positions)?, size))
}

/// Reads a PyTorch `state_dict` file (`torch.save(model.state_dict(), "m.pt")`, the zip
/// format of PyTorch ≥ 1.6) from its bytes onto `place`, with PyTorch's names and layouts;
/// [`from_torch`] maps them to a dygraph model's. bfloat16 becomes float32 exactly, int8/16
/// and uint8 become int32.
pub fn load_torch_from_bytes(bytes: &[u8], place: Place) -> Result<StateDict> {
    const OP: &str = "load_torch";
    let read = || -> Parse<Vec<(String, CpuData, Vec<usize>)>> {
        if !bytes.starts_with(b"PK") {
            return Err("not a zip archive: files from PyTorch before 1.6 (or saved with \
                 _use_new_zipfile_serialization=False) are not supported; re-save with torch.save"
                .into());
        }
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("zip: {e}"))?;
        let pkl_name = zip
            .file_names()
            .filter_map(|n| n.ok())
            .find(|n| n.ends_with("data.pkl") && n.matches('/').count() <= 1)
            .ok_or("the archive has no data.pkl")?
            .to_string();
        let prefix = pkl_name.trim_end_matches("data.pkl").to_string();
        // Entries are read through one budget: a compressed entry may claim any size, and
        // none may make the reader hold more than 64 times the archive (PyTorch stores its
        // entries uncompressed, so real files use at most 1×).
        let mut budget_bytes = 64 * bytes.len() as u64;
        let mut read_entry = |name: &str| -> Parse<Vec<u8>> {
            let f = zip.by_name(name).map_err(|e| format!("{name}: {e}"))?;
            if f.size() > budget_bytes {
                return Err(format!("{name} claims {} bytes, more than the archive's bytes allow", f.size()));
            }
            let mut out = Vec::with_capacity((f.size() as usize).min(bytes.len()));
            f.take(budget_bytes + 1).read_to_end(&mut out).map_err(|e| format!("{name}: {e}"))?;
            budget_bytes = budget_bytes
                .checked_sub(out.len() as u64)
                .ok_or_else(|| format!("{name} inflates past 64 times the archive's size"))?;
            Ok(out)
        };
        let pkl = read_entry(&pkl_name)?;
        let pk = Pickle::parse(&pkl)?;
        let mut storages: std::collections::HashMap<String, Vec<u8>> = Default::default();
        let mut storage = |key: &str| -> Parse<Vec<u8>> {
            if let Some(b) = storages.get(key) {
                return Ok(b.clone());
            }
            let b = read_entry(&format!("{prefix}data/{key}"))?;
            storages.insert(key.to_string(), b.clone());
            Ok(b)
        };
        let mut budget = bytes.len();
        let mut out = Vec::new();
        for (name, v) in top_dict(&pk)? {
            let (data, shape) =
                torch_tensor(&pk, v, &mut storage, &mut budget).map_err(|e| format!("{name:?}: {e}"))?;
            out.push((name, data, shape));
        }
        Ok(out)
    };
    state_dict(OP, read().map_err(|e| Error::invalid(OP, e))?, place)
}

/// Reads a PyTorch state-dict file onto the CPU; see [`load_torch_from_bytes`].
pub fn load_torch(path: impl AsRef<Path>) -> Result<StateDict> {
    load_file("load_torch", path.as_ref(), load_torch_from_bytes)
}

/// Maps a PyTorch state dict onto `model`'s names and layouts: every `Linear` weight is
/// transposed (`[out, in]` → `[in, out]`), `running_mean` / `running_var` become `_mean` /
/// `_variance` and `num_batches_tracked` is dropped. Other names pass unchanged, so a model
/// whose sublayers carry PyTorch's names loads with `set_state_dict(&from_torch(..)?)`.
pub fn from_torch(state: &StateDict, model: &dyn Layer) -> Result<StateDict> {
    let mut linear_weights = Vec::new();
    fn walk(l: &dyn Layer, prefix: &str, out: &mut Vec<String>) {
        if l.type_name().rsplit("::").next() == Some("Linear") {
            out.push(format!("{prefix}weight"));
        }
        l.visit_sublayers(&mut |name, s| walk(s, &format!("{prefix}{name}."), out));
    }
    walk(model, "", &mut linear_weights);
    let mut out = StateDict::new();
    for (name, t) in state.iter() {
        let (stem, leaf) = name.rsplit_once('.').unwrap_or(("", name));
        let join = |leaf: &str| if stem.is_empty() { leaf.to_string() } else { format!("{stem}.{leaf}") };
        let mapped = match leaf {
            "num_batches_tracked" => continue,
            "running_mean" => join("_mean"),
            "running_var" => join("_variance"),
            _ => name.to_string(),
        };
        let value = if linear_weights.contains(&mapped) {
            if t.shape().len() != 2 {
                return Err(Error::invalid(
                    "from_torch",
                    format!("{name}: a Linear weight of shape {:?}, expected [out, in]", t.shape()),
                ));
            }
            crate::no_grad(|| t.t())?
        } else {
            t.clone()
        };
        out.insert(mapped, value);
    }
    Ok(out)
}

/// Reads `path` onto the CPU with `from_bytes`, naming the file in every error.
fn load_file(op: &str, path: &Path, from_bytes: fn(&[u8], Place) -> Result<StateDict>) -> Result<StateDict> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{op} {}: {e}", path.display()))))?;
    from_bytes(&bytes, Place::Cpu).map_err(|e| match e {
        Error::InvalidArgument { op, msg } => Error::InvalidArgument { op, msg: format!("{}: {msg}", path.display()) },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::strided_positions;

    #[test]
    fn strided_positions_follow_row_major_order_and_stay_inside() {
        assert_eq!(strided_positions(1, &[2, 2], &[1, 3], 6).unwrap(), vec![1, 4, 2, 5]);
        assert!(strided_positions(0, &[2, 3], &[3, 1], 5).unwrap_err().contains("reaches element 5"));
        assert!(strided_positions(0, &[usize::MAX, 2], &[1, 1], 5).is_err());
        assert!(strided_positions(0, &[0, 7], &[9, 9], 0).unwrap().is_empty());
    }
}
