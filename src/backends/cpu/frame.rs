//! What a CPU op kernel runs with: the tensors of one execution ([`Frame`], whose slots borrow
//! inputs and parameters, own intermediates computed on the calling thread, and hold the
//! pool's results in its shared memory), the state reused across executions
//! ([`Scratch`]), and the [`CpuOp`] trait every op implements in its file under `ops/`.

use crate::backends::cpu::gemm::{GemmScratch, PackedB};
use crate::backends::cpu::plan::Step;
use crate::backends::cpu::threaded::{F32Operand, SharedScratch, SharedValues, Threaded};
use crate::backends::cpu::values::{BufferPool, Element, Values, ValuesRef, filled};
use crate::error::{Error, Result};
use crate::program::{DType, Program, TensorId};

/// One op's CPU kernel: computes the op's output from the frame.
pub(crate) trait CpuOp {
    /// Runs the op and returns its output's slot.
    ///
    /// # Errors
    /// `InvalidArgument` for bad data (out-of-range gather ids); `Internal` if an invariant
    /// validation established does not hold; `MemoryAllocationFailed` when a result cannot be
    /// allocated.
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>>;
}

/// Everything an op kernel may read or reuse.
pub(crate) struct RunContext<'c, 'a> {
    /// The validated program.
    pub program: &'c Program,
    /// Weights packed for matmul, by tensor id.
    pub packed: &'c [Option<PackedB>],
    /// The program's weights in a worker pool's shared memory, if any.
    pub threaded: Option<&'c Threaded>,
    /// Whether block-format `linear`s quantize their activation rows to int8.
    pub int8_activations: bool,
    /// The step being run (its releases tell which inputs die here).
    pub step: &'c Step,
    /// The tensors of this execution.
    pub frame: &'c mut Frame<'a>,
    /// Buffers and GEMM scratch reused across executions.
    pub scratch: &'c mut Scratch,
}

impl RunContext<'_, '_> {
    /// The declared dtype of `id` (the result dtype of cast and range).
    pub(crate) fn declared_dtype(&self, id: TensorId) -> Result<DType> {
        self.program
            .tensors
            .get(id as usize)
            .map(|decl| decl.dtype)
            .ok_or_else(|| Error::internal(format!("tensor {id} is not declared")))
    }

    /// An f32 result of `out`'s length filled by `kernel` from the frame.
    pub(crate) fn f32_result(
        &mut self,
        out: TensorId,
        kernel: impl FnOnce(&Frame<'_>, &mut [f32]) -> Result<()>,
    ) -> Result<Slot<'static>> {
        let len = self.frame.numel(out)?;
        let mut values = self.scratch.pool.take(len)?;
        kernel(self.frame, &mut values)?;
        Ok(Slot::Owned(Values::F32(values)))
    }
}

/// State reused across executions.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Recycled f32 buffers.
    pub(crate) pool: BufferPool,
    /// GEMM packing buffers.
    pub(crate) gemm: GemmScratch,
    /// Where threaded ops stage their rows in the pool's shared memory.
    pub(crate) shared: SharedScratch,
}

/// A program's state tensors between executions (see `Program::states`): zero at init, lent
/// to each execution's frame and taken back when it ends, whatever its outcome.
#[derive(Debug, Default)]
pub struct States {
    /// Per state (in `Program::states` order); `None` after an execution lost it, which only
    /// a kernel that fails to put a state back could do.
    values: Vec<Option<Values>>,
}

impl States {
    /// Zeroed states of `program`.
    ///
    /// # Errors
    /// `MemoryAllocationFailed` when a state cannot be allocated.
    pub fn new(program: &Program) -> Result<Self> {
        let mut values = Vec::with_capacity(program.states.len());
        for &id in &program.states {
            values.push(Some(zeros(program, id)?));
        }
        Ok(Self { values })
    }

    /// Sets every state back to zero, in place (a state an execution lost is allocated again),
    /// so a reset never holds two copies of the KV cache.
    ///
    /// # Errors
    /// As [`States::new`].
    pub fn reset(&mut self, program: &Program) -> Result<()> {
        if self.values.len() != program.states.len() {
            *self = Self::new(program)?;
            return Ok(());
        }
        for (slot, &id) in self.values.iter_mut().zip(&program.states) {
            match slot {
                Some(Values::F32(v)) => v.fill(0.0),
                Some(Values::I32(v)) => v.fill(0),
                Some(Values::I64(v)) => v.fill(0),
                Some(Values::U8(v)) => v.fill(0),
                _ => *slot = Some(zeros(program, id)?),
            }
        }
        Ok(())
    }

    /// Bytes the states hold.
    pub fn bytes(&self) -> usize {
        self.values.iter().flatten().map(Values::byte_len).sum()
    }

    /// Moves every state into its slot of `frame`.
    ///
    /// # Errors
    /// `InvalidState` when an earlier execution lost a state.
    pub(crate) fn lend(&mut self, program: &Program, frame: &mut Frame<'_>) -> Result<()> {
        if self.values.iter().any(Option::is_none) {
            return Err(Error::invalid_state(
                "the program's state (its KV cache) was lost by a failed execution; reset it",
            ));
        }
        for (value, &id) in self.values.iter_mut().zip(&program.states) {
            if let Some(values) = value.take() {
                frame.put(id, Slot::Owned(values));
            }
        }
        Ok(())
    }

    /// Moves every state back out of `frame`.
    pub(crate) fn take_back(&mut self, program: &Program, frame: &mut Frame<'_>) {
        for (value, &id) in self.values.iter_mut().zip(&program.states) {
            *value = match frame.take(id) {
                Slot::Owned(values) => Some(values),
                _ => None,
            };
        }
    }
}

/// Zeros of `id`'s declared dtype and fixed shape.
fn zeros(program: &Program, id: TensorId) -> Result<Values> {
    let decl = program
        .tensors
        .get(id as usize)
        .ok_or_else(|| Error::internal(format!("state tensor {id} is not declared")))?;
    let mut len = 1usize;
    for dim in &decl.shape {
        let crate::program::Dim::Fixed(n) = *dim else {
            return Err(Error::internal("a state has a symbolic shape"));
        };
        len = usize::try_from(n)
            .ok()
            .and_then(|n| len.checked_mul(n))
            .ok_or_else(|| Error::memory_allocation_failed("state size overflows"))?;
    }
    Ok(match decl.dtype {
        DType::F32 => Values::F32(filled(len, 0.0)?),
        DType::I32 => Values::I32(filled(len, 0)?),
        DType::I64 => Values::I64(filled(len, 0)?),
        DType::U8 => Values::U8(filled(len, 0)?),
        DType::Block(_) => return Err(Error::internal("a state has a block format")),
    })
}

/// Where a tensor's values are during an execution.
pub(crate) enum Slot<'a> {
    /// Not computed yet, or released.
    Empty,
    /// An input or parameter, read in place.
    Borrowed(ValuesRef<'a>),
    /// An intermediate or output this execution computed.
    Owned(Values),
    /// An f32 intermediate a threaded op computed, in the worker pool's shared memory.
    Shared(SharedValues),
}

/// The tensors of one execution.
pub(crate) struct Frame<'a> {
    /// Per tensor id.
    pub slots: Vec<Slot<'a>>,
    /// The bound shape of every tensor.
    pub shapes: Vec<Vec<usize>>,
}

impl<'a> Frame<'a> {
    /// The values of `id`.
    pub(crate) fn get(&self, id: TensorId) -> Result<ValuesRef<'_>> {
        match self.slots.get(id as usize) {
            Some(Slot::Borrowed(values)) => Ok(*values),
            Some(Slot::Owned(values)) => Ok(values.as_ref()),
            Some(Slot::Shared(values)) => Ok(ValuesRef::F32(values.host()?)),
            _ => Err(Error::internal(format!(
                "tensor {id} is read before it is computed or after it was released"
            ))),
        }
    }

    /// The f32 values of `id` as a threaded op's operand: in place when they are in the shared
    /// memory (no host copy is made), else on the host.
    pub(crate) fn operand(&self, id: TensorId) -> Result<F32Operand<'_>> {
        match self.slots.get(id as usize) {
            Some(Slot::Shared(values)) => Ok(F32Operand::Shared(values)),
            _ => Ok(F32Operand::Host(self.f32(id)?)),
        }
    }

    /// The f32 values of `id`.
    pub(crate) fn f32(&self, id: TensorId) -> Result<&[f32]> {
        self.get(id)?.f32()
    }

    /// The values of `id` as `T`.
    pub(crate) fn typed<T: Element>(&self, id: TensorId) -> Result<&[T]> {
        T::slice(self.get(id)?)
            .ok_or_else(|| Error::internal(format!("tensor {id} has an unexpected dtype")))
    }

    /// The bound shape of `id`.
    pub(crate) fn shape(&self, id: TensorId) -> Result<&[usize]> {
        self.shapes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| Error::internal(format!("tensor {id} has no bound shape")))
    }

    /// Element count of `id`.
    pub(crate) fn numel(&self, id: TensorId) -> Result<usize> {
        Ok(self.shape(id)?.iter().product())
    }

    /// The last dim of `id`.
    pub(crate) fn last_dim(&self, id: TensorId) -> Result<usize> {
        self.shape(id)?
            .last()
            .copied()
            .ok_or_else(|| Error::internal(format!("tensor {id} is a scalar")))
    }

    /// Puts `slot` back as `id`'s (after [`Frame::take`]).
    pub(crate) fn put(&mut self, id: TensorId, slot: Slot<'a>) {
        if let Some(target) = self.slots.get_mut(id as usize) {
            *target = slot;
        }
    }

    /// Takes `id`'s slot out, leaving it empty.
    pub(crate) fn take(&mut self, id: TensorId) -> Slot<'a> {
        self.slots
            .get_mut(id as usize)
            .map_or(Slot::Empty, |slot| std::mem::replace(slot, Slot::Empty))
    }
}
