//! Building programs in code: declare symbols, inputs and params, append ops (the methods in
//! `builder_ops` infer each output's shape; [`ProgramBuilder::op`] appends a hand-made op),
//! mark outputs, then [`finish`](ProgramBuilder::finish) or [`encode`](ProgramBuilder::encode)
//! (both validate).

use crate::error::{Error, Result};
use crate::program::ir::{ParamRef, Program};
use crate::program::ops::Op;
use crate::program::tensor::{DType, Dim, TensorDecl, TensorId};

/// Builds a [`Program`] step by step.
#[derive(Clone, Debug, Default)]
pub struct ProgramBuilder {
    program: Program,
}

impl ProgramBuilder {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a symbolic dim (e.g. `"batch"`) and returns it; the same name twice returns the
    /// same symbol.
    pub fn symbol(&mut self, name: &str) -> Dim {
        let index = match self.program.symbols.iter().position(|s| s == name) {
            Some(index) => index,
            None => {
                self.program.symbols.push(name.to_owned());
                self.program.symbols.len() - 1
            }
        };
        Dim::Symbol(index as u32)
    }

    /// Declares a tensor and returns its id.
    pub fn tensor(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> TensorId {
        self.program.tensors.push(TensorDecl {
            name: name.to_owned(),
            dtype,
            shape,
        });
        (self.program.tensors.len() - 1) as TensorId
    }

    /// Declares an input tensor (inputs are passed in declaration order).
    pub fn input(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> TensorId {
        let id = self.tensor(name, dtype, shape);
        self.program.inputs.push(id);
        id
    }

    /// Declares a tensor filled from the parameter provider (`key` in `scope`).
    pub fn param(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<Dim>,
        scope: &str,
        key: &str,
    ) -> TensorId {
        let id = self.tensor(name, dtype, shape);
        self.program.params.push(ParamRef {
            tensor: id,
            scope: scope.to_owned(),
            key: key.to_owned(),
        });
        id
    }

    /// Declares a state tensor (see [`Program::states`]): zero at init, kept across
    /// executions, written in place by the ops that declare it (e.g. attention's KV cache).
    pub fn state(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> TensorId {
        let id = self.tensor(name, dtype, shape);
        self.program.states.push(id);
        id
    }

    /// Renames tensor `id` (names appear in messages and dumps).
    ///
    /// # Errors
    /// `InvalidArgument` when `id` does not exist.
    pub fn set_name(&mut self, id: TensorId, name: &str) -> Result<()> {
        let decl = self
            .program
            .tensors
            .get_mut(id as usize)
            .ok_or_else(|| Error::invalid_argument(format!("tensor {id} does not exist")))?;
        decl.name = name.to_owned();
        Ok(())
    }

    /// Renames a tensor the builder itself just declared.
    pub(crate) fn rename(&mut self, id: TensorId, name: String) {
        if let Some(decl) = self.program.tensors.get_mut(id as usize) {
            decl.name = name;
        }
    }

    /// Removes the last declared tensor (undoing a failed op method).
    pub(crate) fn pop_tensor(&mut self) {
        self.program.tensors.pop();
    }

    /// Appends an op whose output tensor is already declared (unchecked until
    /// [`finish`](ProgramBuilder::finish); the op methods check at once).
    pub fn op(&mut self, op: Op) -> &mut Self {
        self.program.ops.push(op);
        self
    }

    /// Marks `id` as the next output.
    pub fn output(&mut self, id: TensorId) -> &mut Self {
        self.program.outputs.push(id);
        self
    }

    /// The declared shape of `id`, if it exists.
    pub fn shape_of(&self, id: TensorId) -> Option<&[Dim]> {
        self.program
            .tensors
            .get(id as usize)
            .map(|t| t.shape.as_slice())
    }

    /// The program so far, unvalidated.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The program, unvalidated (for tests that build bad programs on purpose).
    pub fn into_program(self) -> Program {
        self.program
    }

    /// The program, validated.
    ///
    /// # Errors
    /// `InvalidProgram` as [`crate::program::validate`] finds.
    pub fn finish(&self) -> Result<Program> {
        crate::program::validate(&self.program)?;
        Ok(self.program.clone())
    }

    /// The program, validated and encoded as a blob.
    ///
    /// # Errors
    /// `InvalidProgram` as [`crate::program::validate`] finds.
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::program::validate(&self.program)?;
        crate::program::encode(&self.program)
    }

    /// The program encoded without validation (for tests that make bad blobs on purpose).
    ///
    /// # Errors
    /// As [`crate::program::encode`].
    pub fn encode_unchecked(&self) -> Result<Vec<u8>> {
        crate::program::encode(&self.program)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::program::tensor::Dim::Fixed as F;

    #[test]
    fn op_methods_infer_shapes_and_name_outputs() {
        let mut b = ProgramBuilder::new();
        let seq = b.symbol("seq");
        assert_eq!(b.symbol("seq"), seq);
        let x = b.input("x", DType::F32, vec![seq, F(4)]);
        let w = b.param("w", DType::F32, vec![F(3), F(4)], "s", "w");
        let y = b.matmul(x, w, None, false, true).unwrap();
        assert_eq!(b.shape_of(y), Some(&[seq, F(3)][..]));
        assert_eq!(b.program().tensors[y as usize].name, "matmul.0");
        let ids = b.input("ids", DType::I32, vec![seq]);
        let positions = b.range(seq, DType::I64).unwrap();
        assert_eq!(b.shape_of(positions), Some(&[seq][..]));
        let cast = b.cast(ids, DType::F32).unwrap();
        let joined = b.concat(vec![cast, cast], 0).err().map(|e| e.code());
        assert_eq!(joined, Some(ErrorCode::InvalidArgument));
        b.output(y);
        let program = b.finish().unwrap();
        assert_eq!(program.ops.len(), 3);
    }

    #[test]
    fn failed_op_methods_leave_the_builder_unchanged() {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2), F(3)]);
        let ids = b.input("ids", DType::I64, vec![F(2)]);
        let before = b.program().clone();
        let failures = [
            b.matmul(x, x, None, false, false),
            b.gelu(ids),
            b.add(x, 77),
            b.range(F(4), DType::U8),
            b.layer_norm(x, x, x, 1e-5),
            b.l2_normalize(x, -1.0),
            b.reshape(x, vec![F(5)]),
            b.concat(vec![], 0),
        ];
        for failure in failures {
            let error = failure.unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        }
        assert_eq!(b.program(), &before);
        assert!(b.set_name(99, "x").is_err());
    }

    #[test]
    fn encode_validates_and_encode_unchecked_does_not() {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2)]);
        let orphan = b.tensor("orphan", DType::F32, vec![F(2)]);
        b.output(x);
        let _ = orphan;
        assert_eq!(b.encode().unwrap_err().code(), ErrorCode::InvalidProgram);
        let blob = b.encode_unchecked().unwrap();
        assert_eq!(
            crate::program::load(&blob).unwrap_err().code(),
            ErrorCode::InvalidProgram
        );
        assert_eq!(crate::program::decode(&blob).unwrap(), b.into_program());
    }
}
