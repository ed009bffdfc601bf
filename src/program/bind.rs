//! Execute-time shapes: binds each symbol to the extent the inputs give it, then gives every
//! tensor its concrete shape.
//!
//! Validation (at init) proved that the ops agree with the declared shapes *symbolically*;
//! substituting one consistent value per symbol therefore yields shapes every op accepts, with
//! one exception that depends on the values: a slice with an explicit end along a symbolic dim
//! needs the symbol to be at least that end. Binding checks that too, so a successful bind means
//! every op can run.

use crate::error::{Error, Result};
use crate::evalue::element_count;
use crate::program::ir::Program;
use crate::program::ops;
use crate::program::ops::Op;
use crate::program::tensor::Dim;

/// Concrete shapes for one execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundShapes {
    /// The value of each symbol.
    pub symbols: Vec<usize>,
    /// The shape of each tensor, by tensor id.
    pub shapes: Vec<Vec<usize>>,
}

impl BoundShapes {
    /// Number of elements of tensor `id` (overflow was ruled out when binding).
    pub fn numel(&self, id: u32) -> usize {
        self.shapes
            .get(id as usize)
            .map_or(0, |shape| shape.iter().product())
    }
}

/// Binds the program's symbols from the shapes of its inputs, in input order.
///
/// # Errors
/// `InvalidArgument` when the number of inputs, a rank or a fixed extent differs from the
/// declaration, when one symbol receives two different extents, when a symbol is never bound,
/// or when a tensor's element count or byte size overflows.
pub fn bind_shapes(program: &Program, input_shapes: &[&[usize]]) -> Result<BoundShapes> {
    if input_shapes.len() != program.inputs.len() {
        return Err(Error::invalid_argument(format!(
            "program takes {} inputs, got {}",
            program.inputs.len(),
            input_shapes.len()
        )));
    }
    let mut symbols: Vec<Option<usize>> = vec![None; program.symbols.len()];
    for (position, (&id, actual)) in program.inputs.iter().zip(input_shapes).enumerate() {
        let decl = program
            .tensors
            .get(id as usize)
            .ok_or_else(|| Error::internal(format!("input {position} names tensor {id}")))?;
        if decl.shape.len() != actual.len() {
            return Err(Error::invalid_argument(format!(
                "input {position} ({}) has rank {}, expected {}",
                decl.name,
                actual.len(),
                decl.shape.len()
            )));
        }
        for (axis, (dim, &extent)) in decl.shape.iter().zip(actual.iter()).enumerate() {
            match *dim {
                Dim::Fixed(fixed) if fixed as usize == extent && fixed <= usize::MAX as u64 => {}
                Dim::Fixed(fixed) => {
                    return Err(Error::invalid_argument(format!(
                        "input {position} ({}) dim {axis} is {extent}, expected {fixed}",
                        decl.name
                    )));
                }
                Dim::Symbol(symbol) => {
                    let slot = symbols.get_mut(symbol as usize).ok_or_else(|| {
                        Error::internal(format!("symbol {symbol} is not declared"))
                    })?;
                    match slot {
                        Some(bound) if *bound != extent => {
                            return Err(Error::invalid_argument(format!(
                                "symbol {:?} is {bound} in one input and {extent} in input {position} ({}) dim {axis}",
                                program.symbols[symbol as usize], decl.name
                            )));
                        }
                        _ => *slot = Some(extent),
                    }
                }
            }
        }
    }
    let symbols = symbols
        .into_iter()
        .enumerate()
        .map(|(index, value)| {
            value.ok_or_else(|| {
                Error::invalid_argument(format!(
                    "symbol {:?} is not bound by any input",
                    program.symbols[index]
                ))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let shapes = program
        .tensors
        .iter()
        .map(|decl| {
            let shape = decl
                .shape
                .iter()
                .map(|dim| match *dim {
                    Dim::Fixed(extent) => usize::try_from(extent).map_err(|_| {
                        Error::invalid_argument(format!(
                            "{}: extent {extent} is too large",
                            decl.name
                        ))
                    }),
                    Dim::Symbol(symbol) => symbols
                        .get(symbol as usize)
                        .copied()
                        .ok_or_else(|| Error::internal(format!("symbol {symbol} is not declared"))),
                })
                .collect::<Result<Vec<usize>>>()?;
            let count = element_count(&shape)?;
            count
                .checked_mul(decl.dtype.size().unwrap_or(1))
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{} of shape {shape:?} is too large",
                        decl.name
                    ))
                })?;
            Ok(shape)
        })
        .collect::<Result<Vec<_>>>()?;
    check_slices(program, &shapes)?;
    Ok(BoundShapes { symbols, shapes })
}

/// Slices along symbolic dims: the bound extent must reach the slice's end.
fn check_slices(program: &Program, shapes: &[Vec<usize>]) -> Result<()> {
    for (index, op) in program.ops.iter().enumerate() {
        let Op::Slice(ops::Slice {
            x,
            axis,
            start,
            end,
            ..
        }) = op
        else {
            continue;
        };
        let extent = shapes
            .get(*x as usize)
            .and_then(|shape| shape.get(*axis as usize))
            .copied()
            .ok_or_else(|| Error::internal(format!("op {index} (slice) names a missing dim")))?;
        let end = end.unwrap_or(extent as u64);
        if *start > end || end > extent as u64 {
            return Err(Error::invalid_argument(format!(
                "op {index} (slice) takes {start}..{end} of dim {axis} of tensor {x}, whose extent is {extent} for these inputs"
            )));
        }
    }
    Ok(())
}
