//! `paddle.matmul` semantics: vector·vector, matrix·vector, vector·matrix, batched N-D with
//! broadcast batch dimensions and `transpose_x` / `transpose_y` (one registry entry); and
//! the compositions `linear` and `dot`.

mod coop;
pub(crate) mod epilogue;

use crate::backend::cpu::CpuData;
use crate::backend::cpu::float_kernel;
use crate::backend::cpu::matmul::{MatView, batched_matmul};
use crate::ops::registry::{AmpList, EpilogueHost, Facts};
use std::sync::{Arc, OnceLock};

use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel, Variant, grid};
use crate::ops::epilogue::Epilogue;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::{split_k, wgsl};
use crate::shape::{broadcast_shapes, broadcast_strides, collapse};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

/// Variant 0 stores the product; the others apply an interned epilogue
/// (`epilogue.rs` of this folder). The plain product (no epilogue) also has float16
/// variants ([`wgsl::f16_product_keys`]) for devices with `SHADER_F16`.
pub(crate) static MATMUL: Kernel = Kernel { file: "matmul.wgsl", keys: kernel_keys, variant: kernel_variant };

fn kernel_keys() -> Vec<u32> {
    let mut keys = epilogue::keys();
    keys.extend(wgsl::f16_product_keys(0));
    keys
}

fn kernel_variant(key: u32) -> Variant {
    let (number, mut v, operands, result) = wgsl::f16_product_types(key);
    v.extend(epilogue::variant(number));
    v.push(("AS", operands.into()));
    v.push(("CS", result.into()));
    v
}

/// `matmul`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct MatmulAttrs {
    pub transpose_x: bool,
    pub transpose_y: bool,
}

registry_entry!(
    /// The matrix product.
    MATMUL_OP: MatmulOp = "matmul", MatmulAttrs, MatmulPlan
);

/// A batched product: `(m, n, k)`, the broadcast batch shape, each operand's batch strides
/// and matrix view, and the operands' shapes after promoting vectors to matrices.
pub(crate) struct MatmulPlan {
    m: usize,
    n: usize,
    k: usize,
    batch: Vec<usize>,
    sa: Vec<isize>,
    sb: Vec<isize>,
    av: MatView,
    bv: MatView,
    /// x, y and the output with vectors promoted (the shapes the gradient works in).
    x2: Vec<usize>,
    y2: Vec<usize>,
    out2: Vec<usize>,
    tx: bool,
    ty: bool,
}

impl Op for MatmulOp {
    fn infer(&self, xs: &[&TensorMeta], a: &MatmulAttrs) -> Result<(Vec<TensorMeta>, MatmulPlan)> {
        const OP: &str = "matmul";
        let [x, y] = inputs(OP, xs)?;
        if x.dtype != y.dtype {
            return Err(Error::DTypeMismatch { op: OP, lhs: x.dtype, rhs: y.dtype });
        }
        x.expect_float(OP, "the input")?;
        if x.rank() == 0 || y.rank() == 0 {
            return Err(Error::shape(
                OP,
                format!("0-d operands have no matrix product: {:?} and {:?}", x.dims(), y.dims()),
            ));
        }
        let (xv, yv) = (x.rank() == 1, y.rank() == 1);
        let x2: Vec<usize> = if xv { vec![1, x.dims()[0]] } else { x.dims().to_vec() };
        let y2: Vec<usize> = if yv { vec![y.dims()[0], 1] } else { y.dims().to_vec() };
        let (tx, ty) = (a.transpose_x && !xv, a.transpose_y && !yv);
        let (xr, xc) = (x2[x2.len() - 2], x2[x2.len() - 1]);
        let (yr, yc) = (y2[y2.len() - 2], y2[y2.len() - 1]);
        let (m, k) = if tx { (xc, xr) } else { (xr, xc) };
        let (k2, n) = if ty { (yc, yr) } else { (yr, yc) };
        if k != k2 {
            return Err(Error::shape(
                OP,
                format!(
                    "inner dimensions differ: x {:?} (transpose_x={tx}) gives K={k}, y {:?} (transpose_y={ty}) gives K={k2}",
                    x.dims(),
                    y.dims()
                ),
            ));
        }
        let bx = &x2[..x2.len() - 2];
        let by = &y2[..y2.len() - 2];
        let batch = broadcast_shapes(OP, bx, by)?;
        let sa: Vec<isize> = broadcast_strides(bx, &batch).iter().map(|&s| (s * xr * xc) as isize).collect();
        let sb: Vec<isize> = broadcast_strides(by, &batch).iter().map(|&s| (s * yr * yc) as isize).collect();
        let av = if tx { MatView { rs: 1, cs: xc as isize } } else { MatView { rs: xc as isize, cs: 1 } };
        let bv = if ty { MatView { rs: 1, cs: yc as isize } } else { MatView { rs: yc as isize, cs: 1 } };
        let mut out2 = batch.clone();
        out2.extend([m, n]);
        let mut shape = out2.clone();
        if xv {
            shape.remove(shape.len() - 2);
        }
        if yv {
            shape.pop();
        }
        let plan = MatmulPlan { m, n, k, batch, sa, sb, av, bv, x2, y2, out2, tx, ty };
        Ok((vec![TensorMeta::new(shape, x.dtype, x.place)], plan))
    }

    fn cpu(&self, c: &mut CpuCall<'_>, _: &MatmulAttrs, p: &MatmulPlan) -> Result<Vec<CpuData>> {
        Ok(vec![product_cpu(c.x(0), c.x(1), p)?])
    }

    fn gpu(&self, c: &GpuCall<'_>, _: &MatmulAttrs, p: &MatmulPlan) -> Result<()> {
        product_gpu(c.ctx, [c.x(0), c.x(1)], c.y(0), c.ins[0].dtype, p, Epilogue::default())
    }

    fn half(&self) -> Half {
        Half::GpuFloat16
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn facts(&self) -> Facts {
        let host = EpilogueHost { fused: &epilogue::MATMUL_EPILOGUE, inputs: (2, 2), fits: epilogue::fits };
        Facts { epilogue: Some(host), amp: AmpList::White, ..Facts::NONE }
    }

    fn backward(&self, g: &GradCall<'_>, _: &MatmulAttrs, p: &MatmulPlan) -> Result<Vec<Option<Tensor>>> {
        let dims = |v: &[usize]| crate::shape::reshape_target(v);
        let (x, y) = (crate::reshape(g.x(0), &dims(&p.x2))?, crate::reshape(g.x(1), &dims(&p.y2))?);
        let dy = crate::reshape(g.g(), &dims(&p.out2))?;
        let back = |t: Tensor, promoted: &[usize], orig: &Tensor| -> Result<Tensor> {
            crate::reshape(&crate::ops::shape::sum_to_shape(&t, promoted)?, &dims(orig.shape()))
        };
        let gx = || {
            let t = match (p.tx, p.ty) {
                (false, false) => matmul(&dy, &y, false, true),
                (true, false) => matmul(&y, &dy, false, true),
                (false, true) => matmul(&dy, &y, false, false),
                (true, true) => matmul(&y, &dy, true, true),
            }?;
            back(t, &p.x2, g.x(0))
        };
        let gy = || {
            let t = match (p.tx, p.ty) {
                (false, false) => matmul(&x, &dy, true, false),
                (true, false) => matmul(&x, &dy, false, false),
                (false, true) => matmul(&dy, &x, true, false),
                (true, true) => matmul(&dy, &x, true, true),
            }?;
            back(t, &p.y2, g.x(1))
        };
        Ok(vec![g.grad_if(0, gx)?, g.grad_if(1, gy)?])
    }
}

/// The product on the CPU.
pub(crate) fn product_cpu(a: &CpuData, b: &CpuData, p: &MatmulPlan) -> Result<CpuData> {
    let batches: usize = p.batch.iter().product();
    let offsets = |s: &[isize]| -> Vec<usize> {
        (0..batches)
            .map(|z| {
                let (mut rem, mut off) = (z, 0isize);
                for d in (0..p.batch.len()).rev() {
                    off += (rem % p.batch[d]) as isize * s[d];
                    rem /= p.batch[d];
                }
                off as usize
            })
            .collect()
    };
    let (oa, ob) = (offsets(&p.sa), offsets(&p.sb));
    let mnk = (p.m, p.n, p.k);
    float_kernel!("matmul"; a = a, b = b => batched_matmul(a, p.av, &oa, b, p.bv, &ob, mnk, 1.0, 0.0))
}

/// The product of operands `[a, b]` of `dtype` on the GPU into `out`, through `epi`
/// (float16 reaches here only on devices with `SHADER_F16`, without an epilogue).
pub(crate) fn product_gpu(
    ctx: &Arc<GpuContext>,
    [a, b]: [&GpuBuffer; 2],
    out: &GpuBuffer,
    dtype: DType,
    p: &MatmulPlan,
    epi: Epilogue<'_>,
) -> Result<()> {
    let half = dtype == DType::Float16;
    if half && epi.number != 0 {
        return Err(Error::unsupported("matmul_epilogue", dtype, "(float32 and float64)"));
    }
    let (m, n, k) = (p.m, p.n, p.k);
    let batches: usize = p.batch.iter().product();
    let (cs, st) = collapse(&p.batch, &[p.sa.clone(), p.sb.clone()]);
    let max_z = ctx.limits.max_compute_workgroups_per_dimension.max(1) as usize;
    let entry = entry(ctx, p, batches, coop::fits(ctx, p, dtype, epi.number));
    let tile = if entry.starts_with("wide") { 128 } else { 64 };
    let tiles = n.div_ceil(tile).max(1) * m.div_ceil(tile).max(1);
    let outputs = batches * m * n;
    // `direct`: a flat grid of 4 × 8 blocks, 256 per workgroup.
    let direct_groups = (m.div_ceil(4) * n.div_ceil(8)).div_ceil(256);
    let direct = entry.starts_with("direct");
    let wanted = match entry {
        "main" => split_k::slices(ctx, tiles * batches, k, outputs, 1),
        // A 128×128 workgroup counts as eight of `main`'s toward the split target: about one
        // per multiprocessor of an H100 is enough (1024³: 2 slices ran as fast as 4, 8 slower),
        // so products of 128 or more tiles stay unsplit.
        "wide" | "wide4" => split_k::slices(ctx, 8 * tiles * batches, k, outputs, 1),
        _ if direct && direct_groups * batches < DIRECT_MIN_GROUPS => {
            DIRECT_MIN_GROUPS.div_ceil(direct_groups.max(1) * batches).min(k / split_k::MIN_SPLIT_DEPTH).max(1)
        }
        _ => 1,
    };
    let split = split_k::Split::new(ctx, "matmul", wanted, k, 16, outputs)?;
    let dst = split.target(out);
    let (key, finish_key) = wgsl::product_keys(epi.number, dtype, dtype, split.partial.is_some());
    let mut params = vec![
        m as u32,
        n as u32,
        k as u32,
        p.av.rs as u32,
        p.av.cs as u32,
        p.bv.rs as u32,
        p.bv.cs as u32,
        0,
        split.slices as u32,
        split.k_chunk as u32,
        outputs as u32,
        cs.len() as u32,
    ];
    params.extend(cs.iter().map(|&d| d as u32));
    for s in &st {
        params.extend(s.iter().map(|&d| d as u32));
    }
    epi.append_params("matmul", &mut params)?;
    if entry == "coop" {
        return coop::dispatch(ctx, [a, b, out], p, batches, &mut params);
    }
    let extras = || epi.extras.iter().map(|x| Bind::read(x));
    let total_z = batches * split.slices;
    let mut z0 = 0;
    while z0 < total_z {
        let zn = (total_z - z0).min(max_z);
        params[7] = z0 as u32;
        let groups = if direct {
            let [gx, gy, _] = grid(ctx, direct_groups as u64)?;
            [gx, gy, zn as u32]
        } else {
            [n.div_ceil(tile).max(1) as u32, m.div_ceil(tile).max(1) as u32, zn as u32]
        };
        let binds: Vec<Bind> = [Bind::read(a), Bind::read(b), Bind::write(dst)].into_iter().chain(extras()).collect();
        ctx.dispatch(&MATMUL, key, entry, &binds, &params, groups)?;
        z0 += zn;
    }
    if let Some(partial) = &split.partial {
        let binds: Vec<Bind> =
            [Bind::read(partial), Bind::unused(ctx), Bind::write(out)].into_iter().chain(extras()).collect();
        ctx.dispatch(&MATMUL, finish_key, "finish", &binds, &params, outputs as u64)?;
    }
    Ok(())
}

/// The workgroups a `direct` product aims for: a few per core of a software adapter, which
/// runs each workgroup on one thread. Fewer split K (the MNIST FC layer's 64×800·800×10 is
/// one workgroup unsplit).
const DIRECT_MIN_GROUPS: usize = 8;

/// The kernel entry for a product over `batches` matrices:
/// - `direct` on software adapters, which emulate workgroup barriers slowly (4.8× faster
///   there without them: lavapipe, 64×256·256×256, 1.8 ms vs 8.5 ms), in 4 × 8 blocks per
///   invocation, `direct4` there where `wide4` may run (loading vec4s: lavapipe loads a
///   vec4 lane by lane as it does a float, so four values cost about two);
/// - `wide4` (128×128 tiles, 8×8 per invocation, operands read as vec4) where there are
///   enough such tiles to fill a large GPU and both operands are row-major with K and N
///   multiples of 4 (so every vec4 lies inside one row; batch strides are then multiples of 4
///   too), `wide` (the same reading floats) for other layouts;
/// - `main` (64×64 tiles, 4×4 per invocation) otherwise.
///
/// - `coop` (`coop.rs`, cooperative matrices) for float16 products where the adapter has
///   them and the shape fits (`coop_fits`), unless another entry is forced.
///
/// `DYGRAPH_MATMUL_KERNEL=main|wide|wide4|direct|direct4|coop` forces one (to exercise and
/// time each anywhere); a forced `wide4` or `direct4` falls back to `wide` or `direct` where
/// the layout does not allow it, a forced `coop` to the adapter's choice where it does not fit.
fn entry(ctx: &GpuContext, p: &MatmulPlan, batches: usize, coop_fits: bool) -> &'static str {
    static FORCED: OnceLock<Option<&'static str>> = OnceLock::new();
    let forced = FORCED.get_or_init(|| match std::env::var("DYGRAPH_MATMUL_KERNEL").as_deref() {
        Ok("main") => Some("main"),
        Ok("wide") => Some("wide"),
        Ok("wide4") => Some("wide4"),
        Ok("direct") => Some("direct"),
        Ok("direct4") => Some("direct4"),
        Ok("coop") => Some("coop"),
        _ => None,
    });
    let vec4 = p.av.cs == 1 && p.bv.cs == 1 && p.k.is_multiple_of(4) && p.n.is_multiple_of(4);
    let wide = if vec4 { "wide4" } else { "wide" };
    let direct = if vec4 { "direct4" } else { "direct" };
    match forced {
        None | Some("coop") if coop_fits => "coop",
        Some("wide4") => wide,
        Some("direct4") => direct,
        Some(e) if *e != "coop" => e,
        _ if ctx.is_software() => direct,
        _ if p.m.div_ceil(128) * p.n.div_ceil(128) * batches >= WIDE_MIN_TILES => wide,
        _ => "main",
    }
}

/// The fewest 128×128 tiles for which `wide` beats `main`'s four times as many 64×64 ones:
/// 64 (a 1024² product) on an H100, 14.4 TFLOP/s against `main`'s 12.4.
const WIDE_MIN_TILES: usize = 64;

/// Matrix product with numpy/Paddle broadcasting. 1-D operands are promoted to matrices
/// (a row for `x`, a column for `y`) and the added axis is removed from the result.
pub fn matmul(x: &Tensor, y: &Tensor, transpose_x: bool, transpose_y: bool) -> Result<Tensor> {
    apply1(&MATMUL_OP, &[x, y], MatmulAttrs { transpose_x, transpose_y })
}

/// `x · weight + bias` with Paddle's `[in, out]` weight layout (`paddle.nn.functional.linear`).
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let y = matmul(x, weight, false, false)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// Dot product of two vectors (or row-wise of two matrices), Paddle's `paddle.dot`.
pub fn dot(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if x.ndim() == 1 && y.ndim() == 1 {
        return matmul(x, y, false, false);
    }
    x.mul(y)?.sum(&[-1], false)
}

impl Tensor {
    /// `matmul(self, y, false, false)`.
    pub fn matmul(&self, y: &Tensor) -> Result<Tensor> {
        matmul(self, y, false, false)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&MATMUL_OP, &epilogue::MATMUL_EPILOGUE],
    kernels: &[&MATMUL, &coop::MATMUL_COOP],
};
