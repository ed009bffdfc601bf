//! Runs a prepared program on one set of arguments: checks and binds the arguments, runs the
//! planned ops in order (each through its kernel in `ops/`), releases intermediates after their last use, and moves the results
//! into the output slots.
//!
//! Inputs and parameters are read in place (borrowed, never copied); a reshape of a borrowed
//! or dying tensor shares or moves its buffer instead of copying it. With a worker pool,
//! threaded ops leave their results in the pool's shared memory (`Slot::Shared`), where the
//! next threaded op reads them; an op on the calling thread reads a host copy made once.

use crate::backends::arguments::{bind_arguments, store_output};
use crate::backends::cpu::frame::{Frame, RunContext, Scratch, Slot, States};
use crate::backends::cpu::gemm::PackedB;
use crate::backends::cpu::ops;
use crate::backends::cpu::plan::{Plan, Step};
use crate::backends::cpu::threaded::Threaded;
use crate::backends::cpu::values::{Values, ValuesRef};
use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::program::{Op, Program};

/// A program ready to run: validated, parameters converted, plan computed.
#[derive(Debug)]
pub struct PreparedProgram {
    /// The validated program.
    pub program: Program,
    /// Parameter values, by tensor id (`None` for tensors that are not params, and for
    /// weights kept only packed).
    pub params: Vec<Option<Values>>,
    /// Weights packed for matmul, by tensor id.
    pub packed: Vec<Option<PackedB>>,
    /// The weights in a worker pool's shared memory, when the program was initialised with
    /// one installed.
    pub threaded: Option<Threaded>,
    /// What to run.
    pub plan: Plan,
    /// Whether block-format `linear`s quantize their activation rows to int8 (the
    /// `activations` compile spec).
    pub int8_activations: bool,
}

/// Runs `prepared` on `args` (inputs, then output slots).
///
/// # Errors
/// `InvalidArgument` for bad arguments or out-of-range gather ids; `Internal` if an invariant
/// validation established does not hold.
pub fn execute(
    prepared: &PreparedProgram,
    scratch: &mut Scratch,
    states: &mut States,
    args: &mut [EValue],
) -> Result<()> {
    let program = &prepared.program;
    let bound = bind_arguments(program, args)?;
    let (inputs, outputs) = args.split_at_mut(program.inputs.len());
    let mut frame = Frame {
        slots: (0..program.tensors.len()).map(|_| Slot::Empty).collect(),
        shapes: bound.shapes,
    };
    for (id, values) in prepared.params.iter().enumerate() {
        if let (Some(values), Some(slot)) = (values, frame.slots.get_mut(id)) {
            *slot = Slot::Borrowed(values.as_ref());
        }
    }
    for (value, &id) in inputs.iter().zip(&program.inputs) {
        let data = value
            .as_tensor()
            .and_then(|tensor| ValuesRef::from_tensor_data(tensor.data()))
            .ok_or_else(|| Error::internal("input changed type after binding"))?;
        if let Some(slot) = frame.slots.get_mut(id as usize) {
            *slot = Slot::Borrowed(data);
        }
    }
    states.lend(program, &mut frame)?;
    let ran = run_steps(prepared, &mut frame, scratch);
    scratch.pool.end_execution();
    states.take_back(program, &mut frame);
    ran?;
    for (position, (slot, &id)) in outputs.iter_mut().zip(&program.outputs).enumerate() {
        let used_again = program.outputs[position + 1..].contains(&id);
        let values = match frame.take(id) {
            Slot::Owned(values) if !used_again => values,
            Slot::Owned(values) => {
                let copy = values.clone();
                if let Some(target) = frame.slots.get_mut(id as usize) {
                    *target = Slot::Owned(values);
                }
                copy
            }
            Slot::Borrowed(values) => {
                if let Some(target) = frame.slots.get_mut(id as usize) {
                    *target = Slot::Borrowed(values);
                }
                values.to_owned()
            }
            Slot::Shared(values) if !used_again => Values::F32(values.into_host()?),
            Slot::Shared(values) => {
                let copy = values.host()?.to_vec();
                if let Some(target) = frame.slots.get_mut(id as usize) {
                    *target = Slot::Shared(values);
                }
                Values::F32(copy)
            }
            Slot::Empty => {
                return Err(Error::internal(format!(
                    "output {position} was not computed"
                )));
            }
        };
        store_output(slot, frame.shape(id)?.to_vec(), values.into_tensor_data())?;
    }
    Ok(())
}

fn run_steps(
    prepared: &PreparedProgram,
    frame: &mut Frame<'_>,
    scratch: &mut Scratch,
) -> Result<()> {
    for step in &prepared.plan.steps {
        let op = prepared
            .program
            .ops
            .get(step.op)
            .ok_or_else(|| Error::internal("plan names a missing op"))?;
        let result = run_op(prepared, op, step, frame, scratch)?;
        if let Some(slot) = frame.slots.get_mut(op.output() as usize) {
            *slot = result;
        }
        for &id in &step.release {
            match frame.take(id) {
                Slot::Owned(values) => scratch.pool.recycle(values),
                // Frees its region and its host copy. Host copies are not recycled: they are
                // allocated afresh (a value's first host read has no buffer pool at hand), so
                // on the worker pool, where most results live in the shared memory and few ops
                // take a buffer back out, recycled copies only piled up to the pool's cap for
                // the rest of the execution (24 MiB of module memory in an 80-token Gemma
                // prefill); freed, the allocator hands their bytes to the next copy.
                Slot::Shared(_) | Slot::Empty | Slot::Borrowed(_) => {}
            }
        }
    }
    Ok(())
}

fn run_op<'a>(
    prepared: &PreparedProgram,
    op: &Op,
    step: &Step,
    frame: &mut Frame<'a>,
    scratch: &mut Scratch,
) -> Result<Slot<'a>> {
    let mut cx = RunContext {
        program: &prepared.program,
        packed: &prepared.packed,
        threaded: prepared.threaded.as_ref(),
        int8_activations: prepared.int8_activations,
        step,
        frame,
        scratch,
    };
    ops::kernel(op).run(&mut cx)
}
