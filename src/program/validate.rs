//! Program validation: everything a backend may rely on without checking again.
//!
//! A program that passes [`validate`]:
//! - stays within [`Limits`] (so validation itself, and anything linear in the program, is
//!   cheap);
//! - names only tensors and symbols that exist;
//! - gives every tensor exactly one role: an input, a parameter, or the output of exactly one op;
//!   outputs are inputs or op outputs;
//! - orders its ops so that each reads only inputs, parameters and outputs of earlier ops (which
//!   rules out cycles and use before definition);
//! - has, for every op, the dtypes the op takes and a declared output shape equal to the shape
//!   [`infer`](super::infer) computes (symbolically, so for every binding of the symbols);
//! - gives parameters fully fixed shapes, binds every symbol from some input dim, and has no
//!   tensor whose fixed dims alone overflow `u64`/`usize` bytes.
//!
//! Every failure is `InvalidProgram` with a message naming the op (index and name) or tensor
//! (id and name).

use crate::error::{Error, Result};
use crate::program::infer::{MAX_RANK, shape_text};
use crate::program::ir::Program;
use crate::program::ops::Op;
use crate::program::tensor::{DType, Dim, TensorId};
use crate::quant::BlockFormat;

/// Caps that keep a hostile program from making validation or execution planning explode.
pub struct Limits;

impl Limits {
    /// Most tensors a program may declare.
    pub const MAX_TENSORS: usize = 1 << 20;
    /// Most ops a program may have.
    pub const MAX_OPS: usize = 1 << 20;
    /// Most symbols a program may declare.
    pub const MAX_SYMBOLS: usize = 1 << 16;
    /// Most tensor reads, summed over all ops (concat may read many).
    pub const MAX_OP_READS: usize = 1 << 22;
    /// Most dims a tensor may have.
    pub const MAX_RANK: usize = MAX_RANK;
}

/// `tensor 5 "hidden"` (or just `tensor 5` when it does not exist).
fn tensor_label(program: &Program, id: TensorId) -> String {
    match program.tensors.get(id as usize) {
        Some(decl) => format!("tensor {id} {:?}", decl.name),
        None => format!("tensor {id}"),
    }
}

fn op_label(index: usize, op: &Op) -> String {
    format!("op {index} ({})", op.name())
}

/// The role a tensor plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Undefined,
    Input(usize),
    Param(usize),
    Produced(usize),
}

impl Role {
    fn describe(self) -> String {
        match self {
            Self::Undefined => "undefined".into(),
            Self::Input(position) => format!("input {position}"),
            Self::Param(position) => format!("param {position}"),
            Self::Produced(op) => format!("the output of op {op}"),
        }
    }
}

/// Validates `program` (see the module docs for what that proves).
///
/// # Errors
/// `InvalidProgram` naming the first problem found.
pub fn validate(program: &Program) -> Result<()> {
    check_limits(program)?;
    check_declarations(program)?;
    let roles = assign_roles(program)?;
    check_order(program, &roles)?;
    for (index, op) in program.ops.iter().enumerate() {
        op.check(&program.tensors).map_err(|message| {
            Error::invalid_program(format!("{}: {message}", op_label(index, op)))
        })?;
    }
    check_outputs(program, &roles)?;
    check_symbols_bound(program)
}

fn check_limits(program: &Program) -> Result<()> {
    let counts = [
        ("symbols", program.symbols.len(), Limits::MAX_SYMBOLS),
        ("tensors", program.tensors.len(), Limits::MAX_TENSORS),
        ("ops", program.ops.len(), Limits::MAX_OPS),
        ("inputs", program.inputs.len(), Limits::MAX_TENSORS),
        ("outputs", program.outputs.len(), Limits::MAX_TENSORS),
        ("params", program.params.len(), Limits::MAX_TENSORS),
    ];
    for (what, count, limit) in counts {
        if count > limit {
            return Err(Error::invalid_program(format!(
                "program has {count} {what}, more than the limit {limit}"
            )));
        }
    }
    let mut reads: usize = 0;
    for op in &program.ops {
        if let Op::Concat(concat) = op {
            reads = reads.saturating_add(concat.inputs.len());
        } else {
            reads = reads.saturating_add(3);
        }
    }
    if reads > Limits::MAX_OP_READS {
        return Err(Error::invalid_program(format!(
            "ops read {reads} tensors in total, more than the limit {}",
            Limits::MAX_OP_READS
        )));
    }
    Ok(())
}

/// Ranks, symbol indices and the byte size of each tensor's fixed dims.
fn check_declarations(program: &Program) -> Result<()> {
    for (id, decl) in program.tensors.iter().enumerate() {
        let label = || tensor_label(program, id as TensorId);
        if decl.shape.len() > Limits::MAX_RANK {
            return Err(Error::invalid_program(format!(
                "{} has rank {}, more than {}",
                label(),
                decl.shape.len(),
                Limits::MAX_RANK
            )));
        }
        if let DType::Block(format) = decl.dtype {
            check_block_declaration(program, id as TensorId, format)?;
            continue;
        }
        let mut bytes = decl.dtype.size().map_or(0, |size| size as u64);
        for dim in &decl.shape {
            match *dim {
                Dim::Fixed(extent) => {
                    bytes = bytes.checked_mul(extent).ok_or_else(|| {
                        Error::invalid_program(format!(
                            "{} of shape {} has a byte size that overflows 64 bits",
                            label(),
                            shape_text(&decl.shape)
                        ))
                    })?;
                }
                Dim::Symbol(symbol) if (symbol as usize) < program.symbols.len() => {}
                Dim::Symbol(symbol) => {
                    return Err(Error::invalid_program(format!(
                        "{} uses symbol {symbol}, but the program declares {} symbols",
                        label(),
                        program.symbols.len()
                    )));
                }
            }
        }
        if usize::try_from(bytes).is_err() {
            return Err(Error::invalid_program(format!(
                "{} of shape {} needs {bytes} bytes, more than this platform can address",
                label(),
                shape_text(&decl.shape)
            )));
        }
    }
    Ok(())
}

/// A block-format tensor: fixed dims, a last dim that is a whole number of blocks, a byte size
/// this platform addresses. (That it is a parameter is checked with the roles.)
fn check_block_declaration(program: &Program, id: TensorId, format: BlockFormat) -> Result<()> {
    let decl = &program.tensors[id as usize];
    let label = || tensor_label(program, id);
    let fixed: Option<Vec<u64>> = decl
        .shape
        .iter()
        .map(|dim| match *dim {
            Dim::Fixed(extent) => Some(extent),
            Dim::Symbol(_) => None,
        })
        .collect();
    let Some(fixed) = fixed else {
        return Err(Error::invalid_program(format!(
            "{} of shape {} is {}: block formats are for parameters, which need fixed shapes",
            label(),
            shape_text(&decl.shape),
            format.name()
        )));
    };
    let bytes = decl.dtype.tensor_bytes(&fixed).ok_or_else(|| {
        Error::invalid_program(format!(
            "{} of shape {} is {}, whose blocks hold {} values: its last dim (the row) must be a \
             multiple of {} and its byte size must fit 64 bits",
            label(),
            shape_text(&decl.shape),
            format.name(),
            format.block_elements(),
            format.block_elements()
        ))
    })?;
    if usize::try_from(bytes).is_err() {
        return Err(Error::invalid_program(format!(
            "{} of shape {} needs {bytes} bytes, more than this platform can address",
            label(),
            shape_text(&decl.shape)
        )));
    }
    Ok(())
}

/// Gives each tensor its one role; fails on a second role or none.
fn assign_roles(program: &Program) -> Result<Vec<Role>> {
    let mut roles = vec![Role::Undefined; program.tensors.len()];
    let mut claim = |id: TensorId, role: Role, what: &str| -> Result<()> {
        let slot = roles.get_mut(id as usize).ok_or_else(|| {
            Error::invalid_program(format!(
                "{what} names tensor {id}, but the program declares {} tensors",
                program.tensors.len()
            ))
        })?;
        if *slot != Role::Undefined {
            return Err(Error::invalid_program(format!(
                "{what} names {}, which is already {}",
                tensor_label(program, id),
                slot.describe()
            )));
        }
        *slot = role;
        Ok(())
    };
    for (position, &id) in program.inputs.iter().enumerate() {
        claim(id, Role::Input(position), &format!("input {position}"))?;
    }
    for (position, param) in program.params.iter().enumerate() {
        claim(
            param.tensor,
            Role::Param(position),
            &format!("param {position}"),
        )?;
        if param.key.is_empty() {
            return Err(Error::invalid_program(format!(
                "param {position} has an empty key"
            )));
        }
        let shape = program
            .tensors
            .get(param.tensor as usize)
            .map_or(&[][..], |decl| decl.shape.as_slice());
        if shape.iter().any(|dim| matches!(dim, Dim::Symbol(_))) {
            return Err(Error::invalid_program(format!(
                "param {position} ({}) has shape {}; parameters need fixed shapes",
                tensor_label(program, param.tensor),
                shape_text(shape)
            )));
        }
    }
    for (index, op) in program.ops.iter().enumerate() {
        claim(
            op.output(),
            Role::Produced(index),
            &format!("{} output", op_label(index, op)),
        )?;
    }
    for (id, decl) in program.tensors.iter().enumerate() {
        if decl.dtype.is_block() && !matches!(roles.get(id), Some(Role::Param(_))) {
            return Err(Error::invalid_program(format!(
                "{} is {}, but only parameters may have a block format (inputs, outputs and \
                 activations are f32, i32, i64 or u8)",
                tensor_label(program, id as TensorId),
                decl.dtype.name()
            )));
        }
    }
    if let Some(id) = roles.iter().position(|role| *role == Role::Undefined) {
        return Err(Error::invalid_program(format!(
            "{} is never defined: it is not an input, a param or an op's output",
            tensor_label(program, id as TensorId)
        )));
    }
    Ok(roles)
}

/// Each op reads only tensors defined before it.
fn check_order(program: &Program, roles: &[Role]) -> Result<()> {
    let mut defined: Vec<bool> = roles
        .iter()
        .map(|role| matches!(role, Role::Input(_) | Role::Param(_)))
        .collect();
    for (index, op) in program.ops.iter().enumerate() {
        for id in op.inputs() {
            match defined.get(id as usize) {
                Some(true) => {}
                Some(false) => return Err(order_error(program, roles, index, op, id)),
                None => {
                    return Err(Error::invalid_program(format!(
                        "{} reads tensor {id}, but the program declares {} tensors",
                        op_label(index, op),
                        program.tensors.len()
                    )));
                }
            }
        }
        if let Some(flag) = defined.get_mut(op.output() as usize) {
            *flag = true;
        }
    }
    Ok(())
}

/// Says whether reading `id` at op `index` closes a cycle or merely uses it too early.
fn order_error(program: &Program, roles: &[Role], index: usize, op: &Op, id: TensorId) -> Error {
    let reader = op_label(index, op);
    let tensor = tensor_label(program, id);
    let Some(Role::Produced(producer)) = roles.get(id as usize).copied() else {
        return Error::invalid_program(format!("{reader} reads {tensor}, which is never defined"));
    };
    if producer == index {
        return Error::invalid_program(format!("cycle: {reader} reads its own output {tensor}"));
    }
    if depends_on(program, roles, producer, index) {
        return Error::invalid_program(format!(
            "cycle: {reader} reads {tensor}, which op {producer} produces from {reader}'s output"
        ));
    }
    Error::invalid_program(format!(
        "use before definition: {reader} reads {tensor}, which op {producer} produces later"
    ))
}

/// Whether op `from` depends (transitively) on the output of op `target`.
fn depends_on(program: &Program, roles: &[Role], from: usize, target: usize) -> bool {
    let mut visited = vec![false; program.ops.len()];
    let mut stack = vec![from];
    while let Some(index) = stack.pop() {
        let Some(op) = program.ops.get(index) else {
            continue;
        };
        for id in op.inputs() {
            if let Some(Role::Produced(producer)) = roles.get(id as usize).copied() {
                if producer == target {
                    return true;
                }
                if let Some(seen) = visited.get_mut(producer)
                    && !*seen
                {
                    *seen = true;
                    stack.push(producer);
                }
            }
        }
    }
    false
}

fn check_outputs(program: &Program, roles: &[Role]) -> Result<()> {
    for (position, &id) in program.outputs.iter().enumerate() {
        match roles.get(id as usize) {
            Some(Role::Input(_) | Role::Produced(_)) => {}
            Some(role) => {
                return Err(Error::invalid_program(format!(
                    "output {position} names {}, which is {}; outputs must be inputs or op outputs",
                    tensor_label(program, id),
                    role.describe()
                )));
            }
            None => {
                return Err(Error::invalid_program(format!(
                    "output {position} names tensor {id}, but the program declares {} tensors",
                    program.tensors.len()
                )));
            }
        }
    }
    Ok(())
}

fn check_symbols_bound(program: &Program) -> Result<()> {
    let mut bound = vec![false; program.symbols.len()];
    for decl in program
        .inputs
        .iter()
        .filter_map(|&id| program.tensors.get(id as usize))
    {
        for dim in &decl.shape {
            if let Dim::Symbol(symbol) = *dim
                && let Some(flag) = bound.get_mut(symbol as usize)
            {
                *flag = true;
            }
        }
    }
    if let Some((symbol, name)) = program
        .symbols
        .iter()
        .enumerate()
        .find(|(symbol, _)| !bound.get(*symbol).copied().unwrap_or(false))
    {
        return Err(Error::invalid_program(format!(
            "symbol {symbol} {name:?} is not a dim of any input, so nothing binds it"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::program::builder::ProgramBuilder;
    use crate::program::ir::ParamRef;
    use crate::program::ops;
    use crate::program::ops::BinaryOp;
    use crate::program::tensor::{DType, Dim, Dim::Fixed as F, TensorDecl};

    /// `y = gelu(x @ w + b)` over `[batch, 4]` inputs, plus a softmax: a small valid program.
    fn valid() -> Program {
        let mut b = ProgramBuilder::new();
        let batch = b.symbol("batch");
        let x = b.input("x", DType::F32, vec![batch, F(4)]);
        let w = b.param("w", DType::F32, vec![F(4), F(3)], "s", "w");
        let bias = b.param("b", DType::F32, vec![F(3)], "s", "b");
        let h = b.matmul(x, w, Some(bias), false, false).unwrap();
        let g = b.gelu(h).unwrap();
        let y = b.softmax(g, None).unwrap();
        b.output(y);
        b.finish().unwrap()
    }

    fn message(program: &Program) -> String {
        let error = validate(program).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidProgram, "{error}");
        error.message().to_owned()
    }

    fn assert_mentions(program: &Program, parts: &[&str]) {
        let text = message(program);
        for part in parts {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
    }

    /// A program whose one param is `dtype` of `shape` (read by nothing: validation is about
    /// the declaration).
    fn with_param(dtype: DType, shape: Vec<Dim>) -> Program {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2)]);
        b.param("w", dtype, shape, "s", "w");
        let y = b.gelu(x).unwrap();
        b.output(y);
        b.into_program()
    }

    #[test]
    fn block_formats_are_parameters_with_whole_blocks_per_row() {
        use crate::quant::BlockFormat::{self, *};
        for format in BlockFormat::ALL {
            let n = format.block_elements() as u64;
            validate(&with_param(DType::Block(format), vec![F(3), F(2 * n)])).unwrap();
            validate(&with_param(DType::Block(format), vec![F(2 * n)])).unwrap();
            if n > 1 {
                assert_mentions(
                    &with_param(DType::Block(format), vec![F(3), F(n + 1)]),
                    &["tensor 1", format.name(), &format!("multiple of {n}")],
                );
                // A scalar is one row of one element.
                assert_mentions(&with_param(DType::Block(format), vec![]), &[format.name()]);
            }
        }
        // Symbols are refused for blocks (parameters need fixed shapes anyway).
        let mut p = with_param(DType::Block(Q8_0), vec![F(32)]);
        p.symbols.push("n".into());
        p.tensors[1].shape = vec![Dim::Symbol(0), F(32)];
        assert_mentions(&p, &["Q8_0", "fixed shapes"]);
        // Overflow of rows x row bytes is refused, not wrapped.
        assert_mentions(
            &with_param(DType::Block(Q4_K), vec![F(u64::MAX / 2), F(256)]),
            &["Q4_K", "64 bits"],
        );
        // Only parameters may have a block format: an input, or an op's output.
        let mut p = with_param(DType::F32, vec![F(2)]);
        p.tensors[0].dtype = DType::Block(F16);
        assert_mentions(&p, &["tensor 0", "f16", "only parameters"]);
        let mut p = with_param(DType::F32, vec![F(2)]);
        p.tensors[2].dtype = DType::Block(Q8_0);
        p.tensors[2].shape = vec![F(32)];
        assert_mentions(&p, &["tensor 2", "q8_0", "only parameters"]);
    }

    #[test]
    fn valid_program_passes() {
        validate(&valid()).unwrap();
        validate(&Program::default()).unwrap();
    }

    #[test]
    fn ids_out_of_range_are_named() {
        let mut p = valid();
        p.inputs.push(99);
        assert_mentions(&p, &["input 1", "tensor 99"]);

        let mut p = valid();
        p.outputs.push(42);
        assert_mentions(&p, &["output 1", "tensor 42"]);

        let mut p = valid();
        p.ops[1] = Op::Unary(ops::Unary {
            op: UnaryOp::Tanh,
            x: 77,
            out: 4,
        });
        assert_mentions(&p, &["op 1 (tanh)", "tensor 77"]);

        let mut p = valid();
        p.tensors[0].shape[0] = Dim::Symbol(5);
        assert_mentions(&p, &["tensor 0 \"x\"", "symbol 5"]);
    }

    use crate::program::ops::UnaryOp;

    #[test]
    fn every_tensor_has_exactly_one_role() {
        let mut p = valid();
        p.inputs.push(1);
        assert_mentions(&p, &["param 0 names tensor 1 \"w\"", "already input 1"]);

        let mut p = valid();
        p.params.push(ParamRef {
            tensor: 0,
            scope: "s".into(),
            key: "x".into(),
        });
        assert_mentions(&p, &["param 2", "already input 0"]);

        let mut p = valid();
        p.ops.push(Op::Unary(ops::Unary {
            op: UnaryOp::Relu,
            x: 3,
            out: 4,
        }));
        assert_mentions(&p, &["op 3 (relu) output", "already the output of op 1"]);

        let mut p = valid();
        p.tensors.push(TensorDecl {
            name: "orphan".into(),
            dtype: DType::F32,
            shape: vec![],
        });
        assert_mentions(&p, &["tensor 6 \"orphan\" is never defined"]);

        let mut p = valid();
        p.outputs.push(1);
        assert_mentions(&p, &["output 1", "param 0"]);
    }

    #[test]
    fn cycles_and_use_before_definition_are_told_apart() {
        // Self loop.
        let mut p = valid();
        p.ops[1] = Op::Unary(ops::Unary {
            op: UnaryOp::Gelu,
            x: 4,
            out: 4,
        });
        assert_mentions(&p, &["cycle", "op 1 (gelu) reads its own output"]);

        // Two ops reading each other's outputs.
        let mut p = valid();
        p.ops[1] = Op::Unary(ops::Unary {
            op: UnaryOp::Gelu,
            x: 5,
            out: 4,
        });
        assert_mentions(&p, &["cycle", "op 1 (gelu) reads tensor 5", "op 2"]);

        // Reading a later, independent op's output.
        let mut p = valid();
        p.ops.swap(1, 2);
        // Now op 1 is softmax(tensor 4), op 2 is gelu(tensor 3) -> tensor 4: no cycle.
        assert_mentions(&p, &["use before definition", "op 1 (softmax)", "op 2"]);
    }

    #[test]
    fn dtypes_are_checked_per_op() {
        let mut p = valid();
        p.tensors[0].dtype = DType::I32;
        assert_mentions(
            &p,
            &["op 0 (matmul)", "a (tensor 0 \"x\") is i32, expected f32"],
        );

        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2)]);
        let t = b.param("t", DType::F32, vec![F(4), F(2)], "s", "t");
        let out = b.tensor("e", DType::F32, vec![F(2), F(2)]);
        b.op(Op::Gather(ops::Gather {
            table: t,
            ids: x,
            out,
        }))
        .output(out);
        assert_mentions(
            &b.into_program(),
            &["op 0 (gather)", "ids", "expected i32 or i64"],
        );
    }

    #[test]
    fn declared_shapes_must_equal_inferred() {
        let mut p = valid();
        p.tensors[3].shape = vec![Dim::Symbol(0), F(4)];
        assert_mentions(
            &p,
            &["op 0 (matmul)", "declared [$0, 4]", "computes [$0, 3]"],
        );

        let mut b = ProgramBuilder::new();
        let s = b.symbol("s");
        let x = b.input("x", DType::F32, vec![s, F(6)]);
        let bad = b.tensor("r", DType::F32, vec![s, F(4)]);
        b.op(Op::Reshape(ops::Reshape { x, out: bad })).output(bad);
        assert_mentions(
            &b.into_program(),
            &["op 0 (reshape)", "same number of elements"],
        );

        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2), F(3)]);
        let out = b.tensor("p", DType::F32, vec![F(3), F(2)]);
        b.op(Op::Permute(ops::Permute {
            x,
            perm: vec![1, 1],
            out,
        }));
        assert_mentions(&b.into_program(), &["op 0 (permute)", "not a permutation"]);

        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2), F(3)]);
        let out = b.tensor("s", DType::F32, vec![F(2), F(2)]);
        b.op(Op::Slice(ops::Slice {
            x,
            axis: 1,
            start: 2,
            end: Some(4),
            out,
        }));
        assert_mentions(&b.into_program(), &["op 0 (slice)", "2..4"]);

        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(2), F(3)]);
        let out = b.tensor("c", DType::F32, vec![F(4), F(3)]);
        b.op(Op::Concat(ops::Concat {
            inputs: vec![x, x],
            axis: 2,
            out,
        }));
        assert_mentions(
            &b.into_program(),
            &["op 0 (concat)", "axis 2 is out of range"],
        );
    }

    #[test]
    fn params_need_fixed_shapes_and_keys() {
        let mut p = valid();
        p.tensors[1].shape = vec![Dim::Symbol(0), F(3)];
        assert_mentions(&p, &["param 0", "fixed shapes"]);

        let mut p = valid();
        p.params[1].key.clear();
        assert_mentions(&p, &["param 1 has an empty key"]);
    }

    #[test]
    fn symbols_must_be_bound_by_inputs() {
        let mut b = ProgramBuilder::new();
        let s = b.symbol("seq");
        let x = b.input("x", DType::F32, vec![F(3)]);
        let _ = s;
        b.output(x);
        assert_mentions(&b.into_program(), &["symbol 0 \"seq\"", "nothing binds it"]);
    }

    #[test]
    fn sizes_and_limits() {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(u64::MAX / 2), F(3)]);
        b.output(x);
        assert_mentions(&b.into_program(), &["tensor 0 \"x\"", "overflows 64 bits"]);

        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(1); 9]);
        b.output(x);
        assert_mentions(&b.into_program(), &["rank 9"]);

        let mut p = valid();
        p.symbols = vec![String::new(); Limits::MAX_SYMBOLS + 1];
        assert_mentions(&p, &["symbols", "limit"]);

        #[cfg(target_pointer_width = "32")]
        {
            let mut b = ProgramBuilder::new();
            let x = b.input("x", DType::F32, vec![F(1 << 31)]);
            b.output(x);
            assert_mentions(&b.into_program(), &["more than this platform can address"]);
        }
    }

    #[test]
    fn bad_constants_are_refused() {
        let mut p = valid();
        p.ops.push(Op::Scale(ops::Scale {
            x: 5,
            scale: f32::NAN,
            bias: 0.0,
            out: 6,
        }));
        p.tensors.push(TensorDecl {
            name: "s".into(),
            dtype: DType::F32,
            shape: vec![Dim::Symbol(0), F(3)],
        });
        assert_mentions(&p, &["op 3 (scale)", "scale is NaN"]);
        if let Some(Op::Scale(ops::Scale { scale, .. })) = p.ops.last_mut() {
            *scale = 2.0;
        }
        validate(&p).unwrap();
    }

    #[test]
    fn binary_broadcast_mismatch_names_op() {
        let mut b = ProgramBuilder::new();
        let s = b.symbol("s");
        let x = b.input("x", DType::F32, vec![s, F(4)]);
        let y = b.input("y", DType::F32, vec![F(4), F(4)]);
        let out = b.tensor("z", DType::F32, vec![s, F(4)]);
        b.op(Op::Binary(ops::Binary {
            op: BinaryOp::Sub,
            a: x,
            b: y,
            out,
        }));
        assert_mentions(&b.into_program(), &["op 0 (sub)", "do not broadcast"]);
    }
}
