//! Execute-time arguments, checked the same way by every backend: `args` holds the program's
//! inputs (tensors) followed by one slot per output (`EValue::None`, or a tensor of the output's
//! dtype that is replaced by the result).
//!
//! Everything wrong with the arguments is `InvalidArgument` naming the argument: a wrong count,
//! a non-tensor input, a dtype, rank or fixed extent that differs from the declaration, one
//! symbol bound to two extents, or an output slot holding something else.

use crate::error::{Error, Result};
use crate::evalue::{EValue, ScalarType, Tensor, TensorData};
use crate::program::{BoundShapes, DType, Program, bind_shapes};

/// The `ScalarType` a program dtype is returned as. (Block formats, which validation keeps off
/// inputs and outputs, would travel as their raw bytes.)
pub const fn scalar_type(dtype: DType) -> ScalarType {
    match dtype {
        DType::F32 => ScalarType::Float32,
        DType::I32 => ScalarType::Int32,
        DType::I64 => ScalarType::Int64,
        DType::U8 | DType::Block(_) => ScalarType::UInt8,
    }
}

/// Whether a caller's tensor of `scalar` may stand for a program tensor of `dtype` (`u8` also
/// accepts `bool` tensors, which are one byte per element too).
pub fn accepts(dtype: DType, scalar: ScalarType) -> bool {
    scalar == scalar_type(dtype) || (dtype == DType::U8 && scalar == ScalarType::Bool)
}

fn tensor_name(program: &Program, id: u32) -> &str {
    program
        .tensors
        .get(id as usize)
        .map_or("?", |decl| decl.name.as_str())
}

fn dtype_of(program: &Program, id: u32) -> Result<DType> {
    program
        .tensors
        .get(id as usize)
        .map(|decl| decl.dtype)
        .ok_or_else(|| Error::internal(format!("tensor {id} is not declared")))
}

/// Checks `args` against `program` and binds its symbols from the inputs' shapes.
///
/// # Errors
/// `InvalidArgument` as described in the module docs.
pub fn bind_arguments(program: &Program, args: &[EValue]) -> Result<BoundShapes> {
    let expected = program.inputs.len() + program.outputs.len();
    if args.len() != expected {
        return Err(Error::invalid_argument(format!(
            "the program takes {} inputs and {} outputs ({expected} arguments), got {} arguments",
            program.inputs.len(),
            program.outputs.len(),
            args.len()
        )));
    }
    let (inputs, outputs) = args.split_at(program.inputs.len());
    let mut shapes: Vec<&[usize]> = Vec::with_capacity(inputs.len());
    for (position, (value, &id)) in inputs.iter().zip(&program.inputs).enumerate() {
        let dtype = dtype_of(program, id)?;
        let tensor = value.as_tensor().ok_or_else(|| {
            Error::invalid_argument(format!(
                "input {position} ({}) is {}, expected a {} tensor",
                tensor_name(program, id),
                value.tag(),
                scalar_type(dtype)
            ))
        })?;
        if !accepts(dtype, tensor.dtype()) {
            return Err(Error::invalid_argument(format!(
                "input {position} ({}) is a {} tensor, expected {}",
                tensor_name(program, id),
                tensor.dtype(),
                scalar_type(dtype)
            )));
        }
        shapes.push(tensor.shape());
    }
    for (position, (value, &id)) in outputs.iter().zip(&program.outputs).enumerate() {
        let dtype = dtype_of(program, id)?;
        match value {
            EValue::None => {}
            EValue::Tensor(tensor) if accepts(dtype, tensor.dtype()) => {}
            other => {
                let what = match other.as_tensor() {
                    Some(tensor) => format!("a {} tensor", tensor.dtype()),
                    None => other.tag().to_owned(),
                };
                return Err(Error::invalid_argument(format!(
                    "output slot {position} ({}) holds {what}; expected None or a {} tensor",
                    tensor_name(program, id),
                    scalar_type(dtype)
                )));
            }
        }
    }
    bind_shapes(program, &shapes)
}

/// Puts a result into an output slot (replacing what was there).
///
/// # Errors
/// `Internal` when `data` does not fit `shape`.
pub fn store_output(slot: &mut EValue, shape: Vec<usize>, data: TensorData) -> Result<()> {
    *slot =
        EValue::Tensor(Tensor::new(shape, data).map_err(|e| {
            Error::internal(format!("a backend produced an inconsistent output: {e}"))
        })?);
    Ok(())
}
