//! The execution plan, computed once at init: which ops run (those whose results reach an
//! output; dead ops are skipped) and, after each, which intermediates die (their last reader
//! has run and they are not outputs), so their buffers return to the pool at once.

use crate::program::{Program, TensorId};

/// One op to run and the intermediates to release after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Index into `Program::ops`.
    pub op: usize,
    /// Tensors whose last use is this op (never outputs, inputs or params).
    pub release: Vec<TensorId>,
}

/// The ordered steps of one program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps in execution order.
    pub steps: Vec<Step>,
}

impl Plan {
    /// Plans a *validated* program (ids are in range).
    pub fn new(program: &Program) -> Self {
        let count = program.tensors.len();
        let mut needed = vec![false; count];
        let mut is_output = vec![false; count];
        for &id in &program.outputs {
            if let Some(flag) = needed.get_mut(id as usize) {
                *flag = true;
            }
            if let Some(flag) = is_output.get_mut(id as usize) {
                *flag = true;
            }
        }
        // Backwards: an op runs if its output is needed; then its inputs are needed.
        let mut runs = vec![false; program.ops.len()];
        for (index, op) in program.ops.iter().enumerate().rev() {
            if needed.get(op.output() as usize).copied().unwrap_or(false) {
                runs[index] = true;
                for id in op.inputs() {
                    if let Some(flag) = needed.get_mut(id as usize) {
                        *flag = true;
                    }
                }
            }
        }
        // Last reader of each op-produced tensor among the ops that run.
        let mut produced = vec![false; count];
        let mut last_use: Vec<Option<usize>> = vec![None; count];
        for (index, op) in program.ops.iter().enumerate() {
            if !runs[index] {
                continue;
            }
            if let Some(flag) = produced.get_mut(op.output() as usize) {
                *flag = true;
            }
            for id in op.inputs() {
                if let Some(slot) = last_use.get_mut(id as usize) {
                    *slot = Some(index);
                }
            }
        }
        let mut releases: Vec<Vec<TensorId>> = vec![Vec::new(); program.ops.len()];
        for (id, last) in last_use.iter().enumerate() {
            if let Some(index) = *last
                && produced[id]
                && !is_output[id]
            {
                releases[index].push(id as TensorId);
            }
        }
        let steps = releases
            .into_iter()
            .enumerate()
            .filter(|(index, _)| runs[*index])
            .map(|(op, mut release)| {
                release.sort_unstable();
                release.dedup();
                Step { op, release }
            })
            .collect();
        Self { steps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{DType, Dim::Fixed as F, ProgramBuilder};

    #[test]
    fn dead_ops_are_skipped_and_intermediates_released_after_last_use() {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(4)]);
        let h = b.relu(x).unwrap(); // op 0
        let dead = b.tanh(h).unwrap(); // op 1: never read
        let g = b.gelu(h).unwrap(); // op 2: last use of h
        let y = b.add(g, h).unwrap(); // op 3: last use of g and h
        let z = b.scale(y, 2.0, 0.0).unwrap(); // op 4
        b.output(z).output(y);
        let _ = dead;
        let plan = Plan::new(&b.finish().unwrap());
        let ops: Vec<usize> = plan.steps.iter().map(|s| s.op).collect();
        assert_eq!(ops, vec![0, 2, 3, 4]);
        assert_eq!(plan.steps[0].release, Vec::<TensorId>::new());
        assert_eq!(plan.steps[2].release, vec![h, g]);
        // y is an output: never released.
        assert!(plan.steps.iter().all(|s| !s.release.contains(&y)));
    }
}
