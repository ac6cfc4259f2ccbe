// Generated elementwise chains: the bindings, one function per op (the table rows' WGSL
// expressions) and the entry points come from src/ops/fused.rs, one variant per chain.
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

{{BODY}}
