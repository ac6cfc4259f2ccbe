//! float16 products on cooperative matrices (tensor cores): `matmul_coop.wgsl`, one subgroup
//! of 32 per 32×32 block of C, 16×16×16 f16 → f32 multiply-adds. Chosen per adapter (wgpu's
//! `EXPERIMENTAL_COOPERATIVE_MATRIX` with that configuration and subgroups of 32:
//! `GpuInfo::cooperative_matrix_f16`; `FLAGS_use_cooperative_matrix` on) for the shapes whose
//! tiles all lie inside the operands; everything else runs the plain kernels.

use std::sync::Arc;

use super::MatmulPlan;
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel};
use crate::{DType, Result};

/// The one variant: float16 operands and output.
pub(crate) static MATMUL_COOP: Kernel = Kernel {
    file: "matmul_coop.wgsl",
    keys: || vec![0],
    variant: |_| vec![("ENABLE", "f16".into()), ("ENABLE", "wgpu_cooperative_matrix".into()), ("CS", "f16".into())],
};

/// True when the cooperative kernel can run a product of `dtype` operands on `ctx`: float16,
/// both operands row-major, M and N multiples of 32 and K of 16 (whole tiles, 16-element
/// aligned rows), no epilogue.
pub(crate) fn fits(ctx: &GpuContext, p: &MatmulPlan, dtype: DType, epilogue: u32) -> bool {
    dtype == DType::Float16
        && epilogue == 0
        && ctx.has_cooperative_f16()
        && crate::flags::cooperative_matrix_enabled()
        && p.av.cs == 1
        && p.bv.cs == 1
        && p.m.is_multiple_of(32)
        && p.n.is_multiple_of(32)
        && p.k.is_multiple_of(16)
        && p.k > 0
}

/// Dispatches the product over `batches` matrices (`params` as `matmul.wgsl` takes them,
/// unsplit), at most `max_z` per dispatch.
pub(crate) fn dispatch(
    ctx: &Arc<GpuContext>,
    [a, b, out]: [&GpuBuffer; 3],
    p: &MatmulPlan,
    batches: usize,
    params: &mut [u32],
) -> Result<()> {
    let max_z = ctx.limits.max_compute_workgroups_per_dimension.max(1) as usize;
    let mut z0 = 0;
    while z0 < batches {
        let zn = (batches - z0).min(max_z);
        params[7] = z0 as u32;
        let binds = [Bind::read(a), Bind::read(b), Bind::write(out)];
        ctx.dispatch(&MATMUL_COOP, 0, "main", &binds, params, [(p.n / 32) as u32, (p.m / 32) as u32, zn as u32])?;
        z0 += zn;
    }
    Ok(())
}
