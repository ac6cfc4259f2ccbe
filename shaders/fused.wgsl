// Generated elementwise chains: the bindings, one function per op (the table rows' WGSL
// expressions) and the entry points come from src/ops/fused.rs, one variant per chain.
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

{{BODY}}
