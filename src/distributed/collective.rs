//! Collectives on tensors of either place (`paddle.distributed.all_reduce` and friends). A
//! GPU tensor is read back to the host, communicated, and written back into its buffer. Every
//! collective first exchanges the tensors' shapes and dtypes, so ranks that disagree get a
//! typed error naming both sides instead of a truncated or garbled result.

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::env::{State, state};
use crate::backend::cpu::CpuData;
use crate::{DType, Result, Tensor, no_grad};

/// How `all_reduce` and `reduce` combine the ranks' values (Paddle's `ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Elementwise sum (logical or for bool).
    Sum,
    /// Elementwise maximum (logical or for bool).
    Max,
    /// Elementwise minimum (logical and for bool).
    Min,
    /// Elementwise product (logical and for bool).
    Prod,
    /// The sum divided by the number of ranks (floating dtypes only).
    Avg,
}

/// A host buffer in a type MPI reduces natively; float16 travels as float32 and bool as
/// bytes.
pub(crate) enum MpiBuf {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

macro_rules! with_buf {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            MpiBuf::U8($v) => $body,
            MpiBuf::I32($v) => $body,
            MpiBuf::I64($v) => $body,
            MpiBuf::F32($v) => $body,
            MpiBuf::F64($v) => $body,
        }
    };
}

/// `$body` over two buffers of one element type, bound as `$a` and `$b`; `$other` when their
/// types differ (never, for a buffer made by `zeros_like` of the other).
macro_rules! with_pair {
    ($x:expr, $y:expr, ($a:ident, $b:ident) => $body:expr, _ => $other:expr) => {
        match ($x, $y) {
            (MpiBuf::U8($a), MpiBuf::U8($b)) => $body,
            (MpiBuf::I32($a), MpiBuf::I32($b)) => $body,
            (MpiBuf::I64($a), MpiBuf::I64($b)) => $body,
            (MpiBuf::F32($a), MpiBuf::F32($b)) => $body,
            (MpiBuf::F64($a), MpiBuf::F64($b)) => $body,
            _ => $other,
        }
    };
}

impl MpiBuf {
    fn from_data(data: CpuData) -> MpiBuf {
        match data {
            CpuData::Bool(v) => MpiBuf::U8(v.into_iter().map(u8::from).collect()),
            CpuData::I32(v) => MpiBuf::I32(v),
            CpuData::I64(v) => MpiBuf::I64(v),
            CpuData::F16(v) => MpiBuf::F32(v.into_iter().map(f32::from).collect()),
            CpuData::F32(v) => MpiBuf::F32(v),
            CpuData::F64(v) => MpiBuf::F64(v),
            CpuData::BF16(v) => MpiBuf::F32(v.into_iter().map(f32::from).collect()),
        }
    }

    fn into_data(self, dtype: DType) -> CpuData {
        match (self, dtype) {
            (MpiBuf::U8(v), _) => CpuData::Bool(v.into_iter().map(|b| b != 0).collect()),
            (MpiBuf::I32(v), _) => CpuData::I32(v),
            (MpiBuf::I64(v), _) => CpuData::I64(v),
            (MpiBuf::F32(v), DType::Float16) => CpuData::F16(v.into_iter().map(half::f16::from_f32).collect()),
            (MpiBuf::F32(v), DType::BFloat16) => CpuData::BF16(v.into_iter().map(half::bf16::from_f32).collect()),
            (MpiBuf::F32(v), _) => CpuData::F32(v),
            (MpiBuf::F64(v), _) => CpuData::F64(v),
        }
    }

    /// An empty buffer of the same type with `n` elements.
    fn zeros_like(&self, n: usize) -> MpiBuf {
        match self {
            MpiBuf::U8(_) => MpiBuf::U8(vec![0; n]),
            MpiBuf::I32(_) => MpiBuf::I32(vec![0; n]),
            MpiBuf::I64(_) => MpiBuf::I64(vec![0; n]),
            MpiBuf::F32(_) => MpiBuf::F32(vec![0.0; n]),
            MpiBuf::F64(_) => MpiBuf::F64(vec![0.0; n]),
        }
    }

    fn len(&self) -> usize {
        with_buf!(self, v => v.len())
    }

    /// Elements `[start, start + n)` as their own buffer.
    fn slice(&self, start: usize, n: usize) -> MpiBuf {
        match self {
            MpiBuf::U8(v) => MpiBuf::U8(v[start..start + n].to_vec()),
            MpiBuf::I32(v) => MpiBuf::I32(v[start..start + n].to_vec()),
            MpiBuf::I64(v) => MpiBuf::I64(v[start..start + n].to_vec()),
            MpiBuf::F32(v) => MpiBuf::F32(v[start..start + n].to_vec()),
            MpiBuf::F64(v) => MpiBuf::F64(v[start..start + n].to_vec()),
        }
    }

    fn extend(&mut self, other: MpiBuf) {
        with_pair!(self, other, (a, b) => a.extend(b), _ => {})
    }

    /// Divides every element by `n` (the mean of a sum over `n` ranks).
    fn divide(&mut self, n: usize) {
        match self {
            MpiBuf::F32(v) => v.iter_mut().for_each(|x| *x /= n as f32),
            MpiBuf::F64(v) => v.iter_mut().for_each(|x| *x /= n as f64),
            _ => {}
        }
    }
}

fn system_op(op: ReduceOp, bytes: bool) -> SystemOperation {
    match (op, bytes) {
        (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Avg, true) => SystemOperation::max(),
        (ReduceOp::Min | ReduceOp::Prod, true) => SystemOperation::min(),
        (ReduceOp::Sum | ReduceOp::Avg, false) => SystemOperation::sum(),
        (ReduceOp::Max, false) => SystemOperation::max(),
        (ReduceOp::Min, false) => SystemOperation::min(),
        (ReduceOp::Prod, false) => SystemOperation::product(),
    }
}

const DESC_DIMS: usize = 8;
/// Slots before the dims: status (1 = this rank's arguments are valid), root rank, dtype,
/// ndim.
const DESC_HEAD: usize = 4;

/// `[status, root, dtype, ndim, dims...]`, dims past the eighth folded into the last slot.
fn descriptor(t: &Tensor, root: usize, valid: bool) -> [i64; DESC_HEAD + DESC_DIMS] {
    let mut d = [0i64; DESC_HEAD + DESC_DIMS];
    d[0] = i64::from(valid);
    d[1] = root as i64;
    d[2] = DType::ALL.iter().position(|&x| x == t.dtype()).unwrap_or(0) as i64;
    d[3] = t.shape().len() as i64;
    for (i, &n) in t.shape().iter().enumerate() {
        let slot = DESC_HEAD + i.min(DESC_DIMS - 1);
        d[slot] = if i < DESC_DIMS { n as i64 } else { d[slot].wrapping_mul(1_000_003).wrapping_add(n as i64) };
    }
    d
}

fn describe(d: &[i64]) -> String {
    let dtype = DType::ALL.get(d[2] as usize).map_or("?".to_string(), |t| t.to_string());
    let ndim = d[3] as usize;
    if ndim > DESC_DIMS {
        return format!("a {ndim}-d {dtype} tensor");
    }
    format!("{:?} {dtype}", &d[DESC_HEAD..DESC_HEAD + ndim])
}

/// Exchanges every rank's view of the call (its tensor's shape and dtype, the root rank, and
/// whether its own arguments passed `local`'s checks), so that all ranks fail together, with
/// the same cause, when any rank's arguments are wrong or the ranks disagree, instead of
/// some ranks waiting forever or reading a truncated message.
fn agree(
    s: &State,
    comm: &SimpleCommunicator,
    op: &'static str,
    t: &Tensor,
    root: usize,
    local: Result<()>,
) -> Result<()> {
    let mine = descriptor(t, root, local.is_ok());
    let mut all = vec![0i64; mine.len() * s.size];
    comm.all_gather_into(&mine[..], &mut all[..]);
    local?;
    for (r, d) in all.chunks(mine.len()).enumerate() {
        if d[0] == 0 {
            return Err(s.error(op, format!("rank {r} rejected its arguments (its own error says why)")));
        }
        if d[1] != mine[1] {
            return Err(s.error(
                op,
                format!("ranks disagree on the root: rank {} passed {root}, rank {r} passed {}", s.rank, d[1]),
            ));
        }
        if d[2..] != mine[2..] {
            return Err(s.error(
                op,
                format!(
                    "ranks disagree on the tensor: rank {} has {}, rank {r} has {}",
                    s.rank,
                    describe(&mine),
                    describe(d)
                ),
            ));
        }
    }
    Ok(())
}

/// Checks that every rank passed the same `values` (one per name in `fields`), naming the
/// first field and rank that differ.
pub(crate) fn agree_values(s: &State, op: &'static str, fields: &[&str], values: &[i64]) -> Result<()> {
    let mut all = vec![0i64; values.len() * s.size];
    s.blocking(op, |comm| comm.all_gather_into(values, &mut all[..]));
    for (r, theirs) in all.chunks(values.len()).enumerate() {
        if let Some(i) = (0..values.len()).find(|&i| theirs[i] != values[i]) {
            return Err(s.error(
                op,
                format!(
                    "ranks disagree on the {}: rank {} has {}, rank {r} has {}",
                    fields[i], s.rank, values[i], theirs[i]
                ),
            ));
        }
    }
    Ok(())
}

fn check_rank(s: &State, op: &'static str, what: &str, r: usize) -> Result<()> {
    if r >= s.size {
        return Err(s.error(op, format!("{what} rank {r} is out of range for a world of {} ranks", s.size)));
    }
    Ok(())
}

fn host(t: &Tensor, op: &'static str) -> Result<MpiBuf> {
    Ok(MpiBuf::from_data(t.to_cpu_data(op)?))
}

/// Writes `buf` into `t`'s memory (on its place), outside autograd.
fn write_back(t: &Tensor, buf: MpiBuf) -> Result<()> {
    let value = Tensor::from_cpu(buf.into_data(t.dtype()), t.shape_ref().clone());
    no_grad(|| t.assign_from(&value))
}

/// Combines `tensor` across all ranks with `op`, in place on every rank
/// (`paddle.distributed.all_reduce`).
pub fn all_reduce(tensor: &Tensor, op: ReduceOp) -> Result<()> {
    const OP: &str = "all_reduce";
    let s = state(OP)?;
    let local = check_avg(s, OP, tensor, op);
    let send = host(tensor, OP)?;
    let mut recv = send.zeros_like(send.len());
    let bytes = matches!(send, MpiBuf::U8(_));
    s.blocking(OP, |comm| -> Result<()> {
        agree(s, comm, OP, tensor, 0, local)?;
        let sop = system_op(op, bytes);
        with_pair!(&send, &mut recv, (a, b) => comm.all_reduce_into(&a[..], &mut b[..], sop), _ => {});
        Ok(())
    })?;
    if op == ReduceOp::Avg {
        recv.divide(s.size);
    }
    write_back(tensor, recv)
}

/// Combines `tensor` across all ranks with `op` into rank `dst`'s tensor; the others are
/// left unchanged (`paddle.distributed.reduce`).
pub fn reduce(tensor: &Tensor, dst: usize, op: ReduceOp) -> Result<()> {
    const OP: &str = "reduce";
    let s = state(OP)?;
    check_rank(s, OP, "destination", dst)?;
    let local = check_avg(s, OP, tensor, op);
    let send = host(tensor, OP)?;
    let mut recv = send.zeros_like(send.len());
    let bytes = matches!(send, MpiBuf::U8(_));
    let root = s.rank == dst;
    s.blocking(OP, |comm| -> Result<()> {
        agree(s, comm, OP, tensor, dst, local)?;
        let sop = system_op(op, bytes);
        let p = comm.process_at_rank(dst as i32);
        if root {
            with_pair!(&send, &mut recv, (a, b) => p.reduce_into_root(&a[..], &mut b[..], sop), _ => {});
        } else {
            with_buf!(&send, v => p.reduce_into(&v[..], sop));
        }
        Ok(())
    })?;
    if !root {
        return Ok(());
    }
    if op == ReduceOp::Avg {
        recv.divide(s.size);
    }
    write_back(tensor, recv)
}

/// Copies rank `src`'s `tensor` into every rank's `tensor` (`paddle.distributed.broadcast`).
pub fn broadcast(tensor: &Tensor, src: usize) -> Result<()> {
    const OP: &str = "broadcast";
    let s = state(OP)?;
    check_rank(s, OP, "source", src)?;
    let mut buf = host(tensor, OP)?;
    s.blocking(OP, |comm| -> Result<()> {
        agree(s, comm, OP, tensor, src, Ok(()))?;
        let p = comm.process_at_rank(src as i32);
        with_buf!(&mut buf, v => p.broadcast_into(&mut v[..]));
        Ok(())
    })?;
    if s.rank != src {
        write_back(tensor, buf)?;
    }
    Ok(())
}

/// Every rank's `tensor`, in rank order, on every rank (`paddle.distributed.all_gather`);
/// the results live on `tensor`'s place.
pub fn all_gather(tensor: &Tensor) -> Result<Vec<Tensor>> {
    const OP: &str = "all_gather";
    let s = state(OP)?;
    let send = host(tensor, OP)?;
    let n = send.len();
    let mut recv = send.zeros_like(n * s.size);
    s.blocking(OP, |comm| -> Result<()> {
        agree(s, comm, OP, tensor, 0, Ok(()))?;
        with_pair!(&send, &mut recv, (a, b) => comm.all_gather_into(&a[..], &mut b[..]), _ => {});
        Ok(())
    })?;
    (0..s.size)
        .map(|r| {
            Tensor::from_cpu(recv.slice(r * n, n).into_data(tensor.dtype()), tensor.shape_ref().clone())
                .to(tensor.place())
        })
        .collect()
}

/// Rank `src` sends `tensor_list[r]` to rank `r`, which writes it into its `tensor`
/// (`paddle.distributed.scatter`). Only `src` passes the list: one tensor per rank, each of
/// `tensor`'s shape and dtype.
pub fn scatter(tensor: &Tensor, tensor_list: Option<&[Tensor]>, src: usize) -> Result<()> {
    const OP: &str = "scatter";
    let s = state(OP)?;
    check_rank(s, OP, "source", src)?;
    let root = s.rank == src;
    let mut recv = host(tensor, OP)?;
    let (send, local) = if root {
        match scatter_source(s, OP, tensor, tensor_list) {
            Ok(all) => (Some(all), Ok(())),
            Err(e) => (None, Err(e)),
        }
    } else {
        (None, Ok(()))
    };
    s.blocking(OP, |comm| -> Result<()> {
        agree(s, comm, OP, tensor, src, local)?;
        let p = comm.process_at_rank(src as i32);
        match &send {
            Some(all) => with_pair!(all, &mut recv, (a, b) => p.scatter_into_root(&a[..], &mut b[..]), _ => {}),
            None => with_buf!(&mut recv, v => p.scatter_into(&mut v[..])),
        }
        Ok(())
    })?;
    write_back(tensor, recv)
}

/// The source rank's list, checked and concatenated in rank order.
fn scatter_source(s: &State, op: &'static str, tensor: &Tensor, tensor_list: Option<&[Tensor]>) -> Result<MpiBuf> {
    let list = tensor_list
        .ok_or_else(|| s.error(op, format!("rank {} is the source and must pass one tensor per rank", s.rank)))?;
    if list.len() != s.size {
        return Err(s.error(op, format!("{} tensors were given for a world of {} ranks", list.len(), s.size)));
    }
    let mut all: Option<MpiBuf> = None;
    for (r, t) in list.iter().enumerate() {
        if t.shape() != tensor.shape() || t.dtype() != tensor.dtype() {
            return Err(s.error(
                op,
                format!(
                    "tensor_list[{r}] is {:?} {} but the output is {:?} {}",
                    t.shape(),
                    t.dtype(),
                    tensor.shape(),
                    tensor.dtype()
                ),
            ));
        }
        let part = host(t, op)?;
        match &mut all {
            Some(a) => a.extend(part),
            None => all = Some(part),
        }
    }
    all.ok_or_else(|| s.error(op, "an empty world".into()))
}

fn check_avg(s: &State, op: &'static str, tensor: &Tensor, reduce: ReduceOp) -> Result<()> {
    if reduce == ReduceOp::Avg && !tensor.is_floating_point() {
        return Err(s.error(op, format!("ReduceOp::Avg needs a floating dtype, not {}", tensor.dtype())));
    }
    Ok(())
}

/// Waits until every rank has called `barrier` (`paddle.distributed.barrier`).
pub fn barrier() -> Result<()> {
    let s = state("barrier")?;
    s.blocking("barrier", |comm| comm.barrier());
    Ok(())
}
