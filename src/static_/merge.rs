//! The update-merging pass: in a GPU program's global block, adjacent optimizer updates of
//! one rule, one set of attributes and one schedule become a single `merged_sgd` /
//! `merged_momentum` / `merged_adam` op, which updates all their parameters in one kernel
//! dispatch where the device's bindings allow (Paddle's `merged_adam`, PyTorch's foreach
//! Adam; the op splits a longer run into dispatches of the device's size, so the program
//! does not depend on the device); the interpreted Executor and a replayed plan run the same
//! ops.
//!
//! Only float32 updates merge (the merged kernels' type), and a run never takes a variable
//! twice: each parameter updates once, and the ops keep their order.

use std::collections::HashSet;

use super::fusion::Fused;
use super::program::{OpDesc, VarDesc, VarId};
use crate::DType;

/// The merged ops replacing runs of adjacent single updates of block 0's `ops`.
pub(super) fn merge_updates(ops: &[OpDesc], vars: &[VarDesc]) -> Vec<Fused> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < ops.len() {
        let Some((name, per)) = single_update(&ops[at], vars) else {
            at += 1;
            continue;
        };
        let mut taken: HashSet<VarId> = ops[at].inputs[..per].iter().copied().collect();
        let mut end = at + 1;
        while end < ops.len() && joins(&ops[at], &ops[end], vars) {
            let own = &ops[end].inputs[..per];
            if own.iter().any(|v| taken.contains(v)) {
                break;
            }
            taken.extend(own);
            end += 1;
        }
        if end - at > 1 {
            let first = &ops[at];
            let mut inputs: Vec<VarId> = ops[at..end].iter().flat_map(|o| o.inputs[..per].iter().copied()).collect();
            inputs.extend(first.inputs.get(per));
            let desc = OpDesc {
                op_type: name.to_string(),
                inputs,
                outputs: Vec::new(),
                attrs: first.attrs.clone(),
                sub_blocks: Vec::new(),
                role: first.role,
            };
            out.push(Fused { root: at, desc, members: (at + 1..end).collect() });
        }
        at = end;
    }
    out
}

/// The merged op and tensors per parameter of `op`, when it is a single float32 update with a
/// merged form whose own tensors are distinct variables.
fn single_update(op: &OpDesc, vars: &[VarDesc]) -> Option<(&'static str, usize)> {
    let update = op.facts().update?;
    let (name, per) = (update.merged?.name(), update.per_param);
    let own = op.inputs.get(..per)?;
    let distinct = own.iter().collect::<HashSet<_>>().len() == per;
    let float32 = op.inputs.iter().all(|&v| vars[v].dtype == DType::Float32);
    (op.outputs.is_empty() && op.sub_blocks.is_empty() && op.inputs.len() <= per + 1 && distinct && float32)
        .then_some((name, per))
}

/// True when `op` may join the run `first` starts: the same update with the same
/// attributes, schedule and role.
fn joins(first: &OpDesc, op: &OpDesc, vars: &[VarDesc]) -> bool {
    let Some((_, per)) = single_update(op, vars) else { return false };
    op.op_type == first.op_type
        && op.attrs == first.attrs
        && op.inputs.get(per) == first.inputs.get(per)
        && op.inputs.len() == first.inputs.len()
        && op.role == first.role
}

/// The single updates `op` stands for beyond the first (0 for any other op).
pub(super) fn merged_away(op: &OpDesc) -> usize {
    op.facts().merged_update.map_or(0, |per| (op.inputs.len() / per).saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{AttrMap, AttrValue};
    use crate::static_::{OpRole, VarKind};

    fn var(dtype: DType) -> VarDesc {
        VarDesc {
            name: String::new(),
            shape: vec![4],
            dtype,
            persistable: true,
            stop_gradient: false,
            kind: VarKind::Plain,
            block: 0,
        }
    }

    fn update(op: &str, inputs: &[VarId], lr: f64) -> OpDesc {
        let mut attrs = AttrMap::default();
        attrs.set("lr", AttrValue::Float(lr));
        OpDesc {
            op_type: op.into(),
            inputs: inputs.to_vec(),
            outputs: Vec::new(),
            attrs,
            sub_blocks: Vec::new(),
            role: OpRole::Optimize,
        }
    }

    #[test]
    fn runs_stop_at_another_rule_setting_schedule_dtype_or_a_repeated_variable() {
        // Variables 0..20 float32, 20 float64; 19 is the schedule.
        let mut vars: Vec<VarDesc> = (0..20).map(|_| var(DType::Float32)).collect();
        vars.push(var(DType::Float64));
        let ops = vec![
            update("sgd", &[0, 1, 19], 0.1),
            update("sgd", &[2, 3, 19], 0.1),
            update("sgd", &[0, 4, 19], 0.1), // parameter 0 again: a new run
            update("sgd", &[5, 6, 19], 0.1),
            update("sgd", &[7, 8, 19], 0.5), // other settings
            update("sgd", &[9, 10], 0.5),    // no schedule
            update("adam", &[11, 12, 13, 14, 19], 0.5),
            update("adam", &[15, 16, 17, 18, 19], 0.5),
            update("sgd", &[20, 1], 0.5), // float64
            update("sgd", &[2, 3], 0.5),
        ];
        let runs: Vec<(usize, String, Vec<usize>, Vec<VarId>)> = merge_updates(&ops, &vars)
            .into_iter()
            .map(|f| (f.root, f.desc.op_type, f.members, f.desc.inputs))
            .collect();
        assert_eq!(
            runs,
            vec![
                (0, "merged_sgd".to_string(), vec![1], vec![0, 1, 2, 3, 19]),
                (2, "merged_sgd".to_string(), vec![3], vec![0, 4, 5, 6, 19]),
                (6, "merged_adam".to_string(), vec![7], vec![11, 12, 13, 14, 15, 16, 17, 18, 19]),
            ]
        );
        assert_eq!(merged_away(&update("merged_adam", &[11, 12, 13, 14, 15, 16, 17, 18, 19], 0.5)), 1);
        // A run stops at a repeated variable and at another role.
        let mut ops: Vec<OpDesc> = (0..9).map(|k| update("sgd", &[2 * k, 2 * k + 1], 0.1)).collect();
        ops.extend((0..9).map(|k| update("sgd", &[2 * k, 2 * k + 1], 0.1)));
        let mut other = update("sgd", &[18, 19], 0.1);
        other.role = OpRole::Forward;
        ops.push(other);
        // Nine distinct, then a repeat of variable 0: runs of 9 and 9; the last op, of another
        // role, alone.
        let sizes: Vec<(usize, usize)> =
            merge_updates(&ops, &vars).iter().map(|f| (f.root, f.members.len() + 1)).collect();
        assert_eq!(sizes, vec![(0, 9), (9, 9)]);
        let vars: Vec<VarDesc> = (0..40).map(|_| var(DType::Float32)).collect();
        let ops: Vec<OpDesc> = (0..17).map(|k| update("sgd", &[2 * k, 2 * k + 1], 0.1)).collect();
        let sizes: Vec<(usize, usize)> =
            merge_updates(&ops, &vars).iter().map(|f| (f.root, f.members.len() + 1)).collect();
        assert_eq!(sizes, vec![(0, 17)], "seventeen updates: one merged op (its dispatches split by the device)");
        assert_eq!(merged_away(&ops[0]), 0);
    }
}
