//! Weights placed once at init, where the program uses them ([`Placement`], the CPU
//! backend's [`ParamSink`]):
//! - a 2-D f32 parameter that every op reading it uses as the right operand `b` of a matmul
//!   (with the same `transpose_b`), or as the weight of a `linear` (a `b` transposed: `[n, k]`
//!   rows), is packed into the GEMM's panel order and its raw values are dropped, so executions
//!   neither pack it nor keep two copies;
//! - with a worker pool, the block-format weights the pool reads are gathered by the provider
//!   straight into its shared memory ([`Threaded::place_direct`]), and packed weights moved
//!   there;
//! - a large parameter (at least [`DIRECT_HOST_BYTES`]) is gathered straight into its final
//!   host vector (block bytes, or f32 values on a little-endian target), so the host never
//!   holds it twice; smaller ones arrive through the provider's staging batches and are
//!   copied out of them.

use crate::backends::cpu::gemm::PackedB;
use crate::backends::cpu::threaded::Threaded;
use crate::backends::cpu::values::{Values, filled};
use crate::backends::parameters::{Landing, ParamSink};
use crate::error::{Error, Result};
use crate::params::{HostBuffer, ParameterBuffer, StatusResult, check_span};
use crate::program::ops;
use crate::program::{DType, Dim, Op, Program, TensorId};
use crate::send_sync::LocalBoxFuture;
use std::any::Any;
use std::sync::{Arc, Mutex};

/// The smallest parameter gathered straight into its own host vector: larger ones would be
/// held twice (staged, then copied) if they went through the staging batches; smaller ones
/// are batched so that a remote provider fetches many with one request.
pub const DIRECT_HOST_BYTES: u64 = 4 << 20;

/// The `transpose_b` every reader of `id` uses it with, if every reader is a matmul taking it as
/// `b` (and not also as `a` or bias) or a linear taking it as its weight (transposed).
fn sole_matmul_use(program: &Program, id: TensorId) -> Option<bool> {
    let mut flag = None;
    for op in &program.ops {
        if !op.inputs().contains(&id) {
            continue;
        }
        match op {
            Op::MatMul(ops::MatMul {
                a,
                b,
                bias,
                transpose_b,
                ..
            }) if *b == id && *a != id && *bias != Some(id) => match flag {
                None => flag = Some(*transpose_b),
                Some(previous) if previous == *transpose_b => {}
                Some(_) => return None,
            },
            Op::Linear(ops::Linear {
                x, weight, bias, ..
            }) if *weight == id && *x != id && *bias != Some(id) => match flag {
                None | Some(true) => flag = Some(true),
                Some(false) => return None,
            },
            _ => return None,
        }
    }
    flag
}

/// `values` of parameter `id` packed for matmul, if it qualifies (see the module docs); the
/// caller then drops the raw values.
///
/// # Errors
/// `Internal` when the values disagree with the declaration.
pub fn pack_param(program: &Program, id: TensorId, values: &Values) -> Result<Option<PackedB>> {
    let Some(decl) = program.tensors.get(id as usize) else {
        return Ok(None);
    };
    let shape = match decl.shape.as_slice() {
        [Dim::Fixed(rows), Dim::Fixed(cols)] if decl.dtype == DType::F32 => {
            [*rows as usize, *cols as usize]
        }
        _ => return Ok(None),
    };
    let (Some(transposed), Values::F32(values)) = (sole_matmul_use(program, id), values) else {
        return Ok(None);
    };
    PackedB::pack(values, shape, transposed).map(Some)
}

/// A parameter gathered straight into its destination, until it has landed.
enum Pending {
    /// Block-format bytes in a host vector of their own.
    Blocks(Arc<HostBuffer>),
    /// f32 values in a host vector of their own.
    F32(Arc<F32HostBuffer>),
    /// In the worker pool's shared memory (already recorded there).
    Shared,
}

/// The parameters of one CPU program as they arrive at init (see the module docs): the host
/// values, the packed right operands and the pool's shared weights, by tensor id.
pub struct Placement<'p> {
    program: &'p Program,
    /// Host values of the parameters kept on the host, by tensor id.
    pub params: Vec<Option<Values>>,
    /// Packed right operands kept on the host, by tensor id.
    pub packed: Vec<Option<PackedB>>,
    /// The weights in the pool's shared memory, when a pool runs this program.
    pub threaded: Option<Threaded>,
    pending: Vec<Option<Pending>>,
}

impl<'p> Placement<'p> {
    /// An empty placement for `program`, on the pool when `threaded` is given.
    pub fn new(program: &'p Program, threaded: Option<Threaded>) -> Self {
        Self {
            program,
            params: (0..program.tensors.len()).map(|_| None).collect(),
            packed: (0..program.tensors.len()).map(|_| None).collect(),
            threaded,
            pending: (0..program.params.len()).map(|_| None).collect(),
        }
    }

    /// The declared dtype and tensor of parameter `position`.
    fn param(&self, position: usize) -> Result<(TensorId, DType)> {
        let param = self
            .program
            .params
            .get(position)
            .ok_or_else(|| Error::internal("parameter position out of range"))?;
        let dtype = self
            .program
            .tensors
            .get(param.tensor as usize)
            .map(|decl| decl.dtype)
            .ok_or_else(|| Error::internal("parameter names a missing tensor"))?;
        Ok((param.tensor, dtype))
    }

    /// Keeps parameter `id`'s `values` where the program uses them: packed (on the host or in
    /// the pool), in the pool, and on the host when something there reads them.
    fn keep(&mut self, id: TensorId, values: Values) -> Result<()> {
        if let Some(weight) = pack_param(self.program, id, &values)? {
            drop(values);
            match self.threaded.as_mut() {
                Some(threaded) => threaded.place_packed(id, weight)?,
                None => {
                    if let Some(slot) = self.packed.get_mut(id as usize) {
                        *slot = Some(weight);
                    }
                }
            }
            return Ok(());
        }
        let kept = match self.threaded.as_mut() {
            Some(threaded) => threaded.place_param(self.program, id, values)?,
            None => Some(values),
        };
        if let Some(slot) = self.params.get_mut(id as usize) {
            *slot = kept;
        }
        Ok(())
    }
}

impl ParamSink for Placement<'_> {
    fn place(&mut self, lengths: &[u64]) -> Result<Vec<Landing>> {
        let shared = match self.threaded.as_mut() {
            Some(threaded) => threaded.place_direct(self.program, lengths)?,
            None => lengths.iter().map(|_| None).collect(),
        };
        let mut landings = Vec::with_capacity(lengths.len());
        for (position, (&length, shared)) in lengths.iter().zip(shared).enumerate() {
            let (_, dtype) = self.param(position)?;
            let (landing, pending) = match (shared, dtype) {
                (Some((buffer, offset)), _) => {
                    (Landing::Direct { buffer, offset }, Pending::Shared)
                }
                (None, DType::Block(_)) if length >= DIRECT_HOST_BYTES => {
                    let buffer = Arc::new(HostBuffer::zeroed(length).map_err(|status| {
                        Error::memory_allocation_failed(status.message().to_owned())
                    })?);
                    let landing = Landing::Direct {
                        buffer: buffer.clone(),
                        offset: 0,
                    };
                    (landing, Pending::Blocks(buffer))
                }
                (None, DType::F32)
                    if length >= DIRECT_HOST_BYTES && cfg!(target_endian = "little") =>
                {
                    let count = usize::try_from(length / 4).map_err(|_| {
                        Error::memory_allocation_failed("an f32 parameter overflows")
                    })?;
                    let buffer = Arc::new(F32HostBuffer {
                        values: Mutex::new(filled(count, 0.0f32)?),
                    });
                    let landing = Landing::Direct {
                        buffer: buffer.clone(),
                        offset: 0,
                    };
                    (landing, Pending::F32(buffer))
                }
                _ => {
                    landings.push(Landing::Staged);
                    continue;
                }
            };
            landings.push(landing);
            if let Some(slot) = self.pending.get_mut(position) {
                *slot = Some(pending);
            }
        }
        Ok(landings)
    }

    fn staged(&mut self, position: usize, bytes: &[u8]) -> Result<()> {
        let (id, dtype) = self.param(position)?;
        let values = Values::from_le_bytes(dtype, bytes)?;
        self.keep(id, values)
    }

    fn landed(&mut self, position: usize) -> Result<()> {
        let (id, dtype) = self.param(position)?;
        let pending = self.pending.get_mut(position).and_then(Option::take);
        let values = match pending {
            Some(Pending::Shared) => return Ok(()),
            Some(Pending::Blocks(buffer)) => {
                let DType::Block(format) = dtype else {
                    return Err(Error::internal("block bytes landed for a dense parameter"));
                };
                let buffer = Arc::try_unwrap(buffer)
                    .map_err(|_| Error::internal("a landed parameter's buffer is still shared"))?;
                Values::from_block_bytes(format, buffer.into_bytes())?
            }
            Some(Pending::F32(buffer)) => {
                let buffer = Arc::try_unwrap(buffer)
                    .map_err(|_| Error::internal("a landed parameter's buffer is still shared"))?;
                Values::F32(
                    buffer
                        .values
                        .into_inner()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()),
                )
            }
            None => return Err(Error::internal("a parameter landed that was not placed")),
        };
        self.keep(id, values)
    }
}

/// A host vector of f32 values that a provider writes the parameter's little-endian bytes
/// into (only made on little-endian targets, where those bytes are the values' own).
#[derive(Debug)]
struct F32HostBuffer {
    values: Mutex<Vec<f32>>,
}

impl F32HostBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<f32>> {
        // Every mutation is one `copy_from_slice`, so a poisoned lock holds consistent values.
        self.values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The bytes of `values` (f32 has no padding and every bit pattern is a value).
fn f32_bytes_mut(values: &mut [f32]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: the slice covers exactly `values`' initialised memory, u8 has alignment 1, and
    // any byte pattern written is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

impl ParameterBuffer for F32HostBuffer {
    fn size(&self) -> u64 {
        self.lock().len() as u64 * 4
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        let mut values = self.lock();
        let target = f32_bytes_mut(&mut values);
        check_span(
            "host buffer write",
            offset,
            bytes.len() as u64,
            target.len() as u64,
        )?;
        // In bounds: checked above.
        let start = offset as usize;
        target[start..start + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            let mut values = self.lock();
            let source = f32_bytes_mut(&mut values);
            check_span("host buffer read", offset, length, source.len() as u64)?;
            let start = offset as usize;
            let mut out = HostBuffer::zeroed(length)?.into_bytes();
            let end = start + out.len();
            out.copy_from_slice(&source[start..end]);
            Ok(out)
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ProgramBuilder;

    #[test]
    fn only_weights_used_solely_as_matmul_right_operands_are_packed() {
        let mut b = ProgramBuilder::new();
        let f = |n| Dim::Fixed(n);
        let x = b.input("x", DType::F32, vec![f(3), f(3)]);
        let linear = b.param("linear", DType::F32, vec![f(3), f(3)], "s", "linear");
        let shared = b.param("shared", DType::F32, vec![f(3), f(3)], "s", "shared");
        let mixed = b.param("mixed", DType::F32, vec![f(3), f(3)], "s", "mixed");
        let h = b.matmul(x, linear, None, false, true).unwrap();
        let h = b.matmul(h, linear, None, false, true).unwrap();
        let h = b.matmul(h, shared, None, false, false).unwrap();
        let h = b.add(h, shared).unwrap();
        let h = b.matmul(h, mixed, None, false, false).unwrap();
        let h = b.matmul(h, mixed, None, false, true).unwrap();
        b.output(h);
        let program = b.finish().unwrap();
        let values = Values::F32(vec![1.0; 9]);
        let packed = |id| pack_param(&program, id, &values).unwrap();
        assert!(packed(linear).is_some());
        assert!(packed(shared).is_none());
        assert!(packed(mixed).is_none());
    }

    #[test]
    fn linear_weights_pack_as_transposed_right_operands() {
        let mut b = ProgramBuilder::new();
        let f = |n| Dim::Fixed(n);
        let x = b.input("x", DType::F32, vec![f(2), f(3)]);
        let alone = b.param("alone", DType::F32, vec![f(3), f(3)], "s", "alone");
        let with_mm = b.param("with_mm", DType::F32, vec![f(3), f(3)], "s", "with_mm");
        let against = b.param("against", DType::F32, vec![f(3), f(3)], "s", "against");
        let mut linear = |x, weight| {
            b.push(|out| ops::Linear {
                x,
                weight,
                bias: None,
                out,
            })
            .unwrap()
        };
        let h = linear(x, alone);
        let h = linear(h, with_mm);
        let h = linear(h, against);
        let h = b.matmul(h, with_mm, None, false, true).unwrap();
        let h = b.matmul(h, against, None, false, false).unwrap();
        b.output(h);
        let program = b.finish().unwrap();
        let values = Values::F32(vec![1.0; 9]);
        let packed = |id| pack_param(&program, id, &values).unwrap();
        assert!(packed(alone).is_some());
        assert!(
            packed(with_mm).is_some(),
            "linear and a transposed matmul agree"
        );
        assert!(
            packed(against).is_none(),
            "linear and an untransposed matmul disagree"
        );
    }
}
