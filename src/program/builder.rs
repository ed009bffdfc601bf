//! Building programs in code: declare symbols and tensors, append ops, mark outputs, then
//! `finish` (which validates) or `encode`.

use crate::error::Result;
use crate::program::ir::{DType, Dim, Op, ParamRef, Program, TensorDecl, TensorId};

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

    /// Appends an op (its output tensor must already be declared).
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

    /// The program, encoded as a blob (unvalidated).
    ///
    /// # Errors
    /// As [`crate::program::encode`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::program::encode(&self.program)
    }
}
