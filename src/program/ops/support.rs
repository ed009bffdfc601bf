//! What every op definition is written with: the [`OpDef`] trait each op implements, operand
//! lookup with the checks ops share (dtype sets, declared shapes, finite constants), and the
//! text helpers of the dump.
//!
//! Lookups use `get`, so a program whose ids were not checked yet gets an error, not a panic.

use crate::program::infer::{InferResult, shape_text};
use crate::program::tensor::{DType, Dim, TensorDecl, TensorId};

/// One op's definition: its operands, how it checks against the tensors it touches, and its
/// text form. Each op file implements it; `Op` forwards to it.
pub trait OpDef {
    /// The op's name in dumps and messages, e.g. `"matmul"`.
    fn name(&self) -> &'static str;

    /// The tensors this op reads, in a fixed order.
    fn inputs(&self) -> Vec<TensorId>;

    /// The tensor this op writes.
    fn output(&self) -> TensorId;

    /// The state tensors this op writes in place (see `Program::states`), besides `output`;
    /// none for most ops. They are also among its `inputs` (it reads them).
    fn state_writes(&self) -> Vec<TensorId> {
        Vec::new()
    }

    /// The output's dtype and shape computed from the inputs' declarations, after checking
    /// the inputs' dtypes and the op's attributes.
    ///
    /// # Errors
    /// A message naming the operand or attribute at fault; ops whose output shape or dtype is
    /// a choice of the program (reshape, cast, range) say so.
    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)>;

    /// Checks the op against the declared output: by default, that it has the dtype and the
    /// shape [`OpDef::infer`] computes.
    ///
    /// # Errors
    /// A message naming the operand and what is wrong with it.
    fn check(&self, operands: &Operands<'_>) -> InferResult<()> {
        let out = operands.get("out", self.output())?;
        let (dtype, shape) = self.infer(operands)?;
        out.expect_dtype(&[dtype])?;
        out.expect_shape(&shape)
    }

    /// The attribute list of the dump (everything after the name, before `->`), in the order
    /// of the op's fields, as `name=value`.
    fn attributes(&self) -> String;
}

/// The tensor declarations an op is checked against.
#[derive(Clone, Copy)]
pub struct Operands<'a> {
    tensors: &'a [TensorDecl],
}

impl<'a> Operands<'a> {
    /// Operands looked up in `tensors`.
    pub fn new(tensors: &'a [TensorDecl]) -> Self {
        Self { tensors }
    }

    /// The declaration of `id`, playing `role` in the op.
    ///
    /// # Errors
    /// When `id` does not exist.
    pub fn get(&self, role: &'static str, id: TensorId) -> InferResult<Operand<'a>> {
        let decl = self
            .tensors
            .get(id as usize)
            .ok_or_else(|| format!("{role} names tensor {id}, which does not exist"))?;
        Ok(Operand { role, id, decl })
    }
}

/// A tensor's declaration, looked up for an op.
pub struct Operand<'a> {
    role: &'static str,
    id: TensorId,
    /// The declaration.
    pub decl: &'a TensorDecl,
}

impl Operand<'_> {
    /// The declared shape.
    pub fn shape(&self) -> &[Dim] {
        &self.decl.shape
    }

    /// The declared dtype.
    pub fn dtype(&self) -> DType {
        self.decl.dtype
    }

    /// `x (tensor 3 "hidden")`.
    pub fn describe(&self) -> String {
        format!("{} (tensor {} {:?})", self.role, self.id, self.decl.name)
    }

    /// Checks that the dtype is one of `allowed`.
    ///
    /// # Errors
    /// A message naming the operand, its dtype and the allowed ones.
    pub fn expect_dtype(&self, allowed: &[DType]) -> InferResult<()> {
        if allowed.contains(&self.decl.dtype) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        Err(format!(
            "{} is {}, expected {}",
            self.describe(),
            self.decl.dtype.name(),
            names.join(" or ")
        ))
    }

    /// Checks that the declared shape is `computed`.
    ///
    /// # Errors
    /// A message with both shapes.
    pub fn expect_shape(&self, computed: &[Dim]) -> InferResult<()> {
        if self.shape() == computed {
            return Ok(());
        }
        Err(format!(
            "{} is declared {}, but the op computes {}",
            self.describe(),
            shape_text(self.shape()),
            shape_text(computed)
        ))
    }
}

/// The float dtypes (f32).
pub const FLOAT: &[DType] = &[DType::F32];
/// The dtypes of ids (i32, i64).
pub const IDS: &[DType] = &[DType::I32, DType::I64];
/// The dtypes of masks (u8, i32, i64, f32).
pub const MASK: &[DType] = &[DType::U8, DType::I32, DType::I64, DType::F32];

/// Checks that every operand is f32.
///
/// # Errors
/// A message naming the first that is not.
pub fn expect_float(operands: &[&Operand<'_>]) -> InferResult<()> {
    operands.iter().try_for_each(|o| o.expect_dtype(FLOAT))
}

/// Checks an attribute constant: finite, and `>= 0` when `non_negative`.
///
/// # Errors
/// A message naming `what` and the value.
pub fn expect_constant(what: &str, value: f32, non_negative: bool) -> InferResult<()> {
    if !value.is_finite() || (non_negative && value < 0.0) {
        let kind = if non_negative {
            "finite and >= 0"
        } else {
            "finite"
        };
        return Err(format!("{what} is {value}, expected {kind}"));
    }
    Ok(())
}

/// `%3`: a tensor in the dump.
pub fn tensor_text(id: TensorId) -> String {
    format!("%{id}")
}

/// `%3`, or `none` for an absent optional tensor.
pub fn optional_text(id: Option<TensorId>) -> String {
    id.map_or_else(|| "none".to_owned(), tensor_text)
}
