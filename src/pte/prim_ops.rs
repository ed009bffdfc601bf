//! The operators a `.pte` may call outside its delegates that this runtime runs itself:
//! ExecuTorch's prim ops for dynamic shapes (`aten::sym_size.int`, `aten::sym_numel`) and the
//! scalar arithmetic of `executorch_prim` (`add`, `sub`, `mul`, `floordiv`, `truediv`, `mod`,
//! comparisons, `neg`, `sym_float`, `sym_max`, `sym_min`, `ceil`, `round`, `trunc`), with
//! upstream's argument layout: the operands, then the one output value.
//!
//! Integers follow Python (SymInt) semantics as upstream's `register_prim_ops.cpp` does:
//! `floordiv` and `mod` round toward negative infinity, an integer op on two `Int`s stays an
//! `Int` (wrapping is refused: overflow is `InvalidArgument`), anything with a `Double` is a
//! `Double`, `truediv` is always a `Double`. Division by zero is `InvalidArgument`.

use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::pte::plan::OperatorName;

/// A prim op this runtime runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimOp {
    /// `aten::sym_size.int(Tensor, int dim) -> int`.
    SymSize,
    /// `aten::sym_numel(Tensor) -> int`.
    SymNumel,
    /// A binary scalar op.
    Binary(BinaryScalar),
    /// A unary scalar op.
    Unary(UnaryScalar),
}

/// Binary scalar ops of `executorch_prim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryScalar {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `floor(a / b)`.
    FloorDiv,
    /// `a / b` as a double.
    TrueDiv,
    /// `a mod b`, the sign of `b`.
    Mod,
    /// The larger.
    Max,
    /// The smaller.
    Min,
    /// `a == b`.
    Eq,
    /// `a > b`.
    Gt,
    /// `a < b`.
    Lt,
    /// `a >= b`.
    Ge,
    /// `a <= b`.
    Le,
}

/// Unary scalar ops of `executorch_prim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryScalar {
    /// `-a`.
    Neg,
    /// `a` as a double.
    SymFloat,
    /// Round up to an integer.
    Ceil,
    /// Round half to even to an integer.
    Round,
    /// Round toward zero to an integer.
    Trunc,
}

impl PrimOp {
    /// The prim op `operator` names, or `None` when this runtime does not run it.
    pub fn lookup(operator: &OperatorName) -> Option<Self> {
        use BinaryScalar as B;
        use UnaryScalar as U;
        let name = operator.name.as_str();
        if name == "aten::sym_size" && matches!(operator.overload.as_str(), "int" | "") {
            return Some(Self::SymSize);
        }
        if name == "aten::sym_numel" {
            return Some(Self::SymNumel);
        }
        let op = name.strip_prefix("executorch_prim::")?;
        Some(match op {
            "add" => Self::Binary(B::Add),
            "sub" => Self::Binary(B::Sub),
            "mul" => Self::Binary(B::Mul),
            "floordiv" => Self::Binary(B::FloorDiv),
            "truediv" => Self::Binary(B::TrueDiv),
            "mod" => Self::Binary(B::Mod),
            "sym_max" => Self::Binary(B::Max),
            "sym_min" => Self::Binary(B::Min),
            "eq" => Self::Binary(B::Eq),
            "gt" => Self::Binary(B::Gt),
            "lt" => Self::Binary(B::Lt),
            "ge" => Self::Binary(B::Ge),
            "le" => Self::Binary(B::Le),
            "neg" => Self::Unary(U::Neg),
            "sym_float" => Self::Unary(U::SymFloat),
            "ceil" => Self::Unary(U::Ceil),
            "round" => Self::Unary(U::Round),
            "trunc" => Self::Unary(U::Trunc),
            _ => return None,
        })
    }

    /// How many values the op takes, its output included.
    pub fn arity(self) -> usize {
        match self {
            Self::SymNumel | Self::Unary(_) => 2,
            Self::SymSize | Self::Binary(_) => 3,
        }
    }

    /// Computes the op on `operands` (the values before the output).
    ///
    /// # Errors
    /// `InvalidArgument` for operands of the wrong kind, a dim out of range, division by zero
    /// or integer overflow.
    pub fn run(self, operator: &OperatorName, operands: &[&EValue]) -> Result<EValue> {
        let bad = |what: &str| Error::invalid_argument(format!("{operator}: {what}"));
        match (self, operands) {
            (Self::SymSize, [EValue::Tensor(tensor), EValue::Int(dim)]) => {
                let rank = tensor.shape().len() as i64;
                let index = if *dim < 0 { dim + rank } else { *dim };
                usize::try_from(index)
                    .ok()
                    .and_then(|i| tensor.shape().get(i))
                    .map(|&size| EValue::Int(size as i64))
                    .ok_or_else(|| bad(&format!("dim {dim} of a rank-{rank} tensor")))
            }
            (Self::SymNumel, [EValue::Tensor(tensor)]) => Ok(EValue::Int(tensor.numel() as i64)),
            (Self::Binary(op), [a, b]) => binary(op, scalar(a), scalar(b))
                .ok_or_else(|| bad(&format!("cannot apply to {} and {}", a.tag(), b.tag())))?
                .map_err(&bad),
            (Self::Unary(op), [a]) => unary(op, scalar(a))
                .ok_or_else(|| bad(&format!("cannot apply to {}", a.tag())))?
                .map_err(&bad),
            _ => Err(bad(&format!(
                "expected {} operands, got [{}]",
                self.arity() - 1,
                operands
                    .iter()
                    .map(|v| v.tag())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// A scalar operand: integers (and booleans, as 0/1) or doubles.
#[derive(Clone, Copy)]
enum Scalar {
    Int(i64),
    Double(f64),
}

fn scalar(value: &EValue) -> Option<Scalar> {
    match value {
        EValue::Int(v) => Some(Scalar::Int(*v)),
        EValue::Bool(v) => Some(Scalar::Int(i64::from(*v))),
        EValue::Double(v) => Some(Scalar::Double(*v)),
        _ => None,
    }
}

fn as_double(value: Scalar) -> f64 {
    match value {
        Scalar::Int(v) => v as f64,
        Scalar::Double(v) => v,
    }
}

type Outcome = Option<std::result::Result<EValue, &'static str>>;

fn binary(op: BinaryScalar, a: Option<Scalar>, b: Option<Scalar>) -> Outcome {
    use BinaryScalar as B;
    let (a, b) = (a?, b?);
    let compare = |ordering: Option<std::cmp::Ordering>| {
        let ordering = ordering.ok_or("comparison with NaN")?;
        Ok(EValue::Bool(match op {
            B::Eq => ordering.is_eq(),
            B::Gt => ordering.is_gt(),
            B::Lt => ordering.is_lt(),
            B::Ge => ordering.is_ge(),
            _ => ordering.is_le(),
        }))
    };
    Some(match (op, a, b) {
        (B::Eq | B::Gt | B::Lt | B::Ge | B::Le, Scalar::Int(x), Scalar::Int(y)) => {
            compare(Some(x.cmp(&y)))
        }
        (B::Eq | B::Gt | B::Lt | B::Ge | B::Le, x, y) => {
            compare(as_double(x).partial_cmp(&as_double(y)))
        }
        (B::TrueDiv, x, y) => {
            let divisor = as_double(y);
            if divisor == 0.0 {
                Err("division by zero")
            } else {
                Ok(EValue::Double(as_double(x) / divisor))
            }
        }
        (_, Scalar::Int(x), Scalar::Int(y)) => int_binary(op, x, y).map(EValue::Int),
        (_, x, y) => double_binary(op, as_double(x), as_double(y)).map(EValue::Double),
    })
}

fn int_binary(op: BinaryScalar, x: i64, y: i64) -> std::result::Result<i64, &'static str> {
    use BinaryScalar as B;
    let overflow = "integer overflow";
    match op {
        B::Add => x.checked_add(y).ok_or(overflow),
        B::Sub => x.checked_sub(y).ok_or(overflow),
        B::Mul => x.checked_mul(y).ok_or(overflow),
        B::Max => Ok(x.max(y)),
        B::Min => Ok(x.min(y)),
        B::FloorDiv | B::Mod => {
            if y == 0 {
                return Err("division by zero");
            }
            let quotient = x.checked_div(y).ok_or(overflow)?;
            let remainder = x.checked_rem(y).ok_or(overflow)?;
            // Python: the remainder takes the divisor's sign; the quotient rounds down.
            let adjust = remainder != 0 && ((remainder < 0) != (y < 0));
            if op == B::Mod {
                Ok(if adjust { remainder + y } else { remainder })
            } else {
                Ok(if adjust { quotient - 1 } else { quotient })
            }
        }
        _ => Err("not an integer op"),
    }
}

fn double_binary(op: BinaryScalar, x: f64, y: f64) -> std::result::Result<f64, &'static str> {
    use BinaryScalar as B;
    match op {
        B::Add => Ok(x + y),
        B::Sub => Ok(x - y),
        B::Mul => Ok(x * y),
        B::Max => Ok(x.max(y)),
        B::Min => Ok(x.min(y)),
        B::FloorDiv if y == 0.0 => Err("division by zero"),
        B::FloorDiv => Ok((x / y).floor()),
        B::Mod if y == 0.0 => Err("division by zero"),
        B::Mod => Ok(x - (x / y).floor() * y),
        _ => Err("not a double op"),
    }
}

fn unary(op: UnaryScalar, a: Option<Scalar>) -> Outcome {
    use UnaryScalar as U;
    let a = a?;
    let to_int = |v: f64| {
        if v.is_finite() && v >= i64::MIN as f64 && v < i64::MAX as f64 {
            Ok(EValue::Int(v as i64))
        } else {
            Err("the result does not fit an integer")
        }
    };
    Some(match (op, a) {
        (U::Neg, Scalar::Int(x)) => x.checked_neg().map(EValue::Int).ok_or("integer overflow"),
        (U::Neg, Scalar::Double(x)) => Ok(EValue::Double(-x)),
        (U::SymFloat, x) => Ok(EValue::Double(as_double(x))),
        (U::Ceil | U::Round | U::Trunc, Scalar::Int(x)) => Ok(EValue::Int(x)),
        (U::Ceil, Scalar::Double(x)) => to_int(x.ceil()),
        (U::Round, Scalar::Double(x)) => to_int(x.round_ties_even()),
        (U::Trunc, Scalar::Double(x)) => to_int(x.trunc()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evalue::Tensor;

    fn op(name: &str, overload: &str) -> OperatorName {
        OperatorName {
            name: name.to_owned(),
            overload: overload.to_owned(),
        }
    }

    fn run(name: &str, operands: &[EValue]) -> Result<EValue> {
        let operator = op(name, "Scalar");
        let prim = PrimOp::lookup(&operator).expect("a prim op");
        prim.run(&operator, &operands.iter().collect::<Vec<_>>())
    }

    #[test]
    fn integer_division_rounds_like_python() {
        for (x, y, floor, modulo) in [
            (7, 2, 3, 1),
            (-7, 2, -4, 1),
            (7, -2, -4, -1),
            (-7, -2, 3, -1),
        ] {
            let q = run(
                "executorch_prim::floordiv",
                &[EValue::Int(x), EValue::Int(y)],
            )
            .unwrap();
            let r = run("executorch_prim::mod", &[EValue::Int(x), EValue::Int(y)]).unwrap();
            assert!(
                matches!(q, EValue::Int(v) if v == floor),
                "{x} // {y}: {q:?}"
            );
            assert!(
                matches!(r, EValue::Int(v) if v == modulo),
                "{x} % {y}: {r:?}"
            );
        }
    }

    #[test]
    fn bad_operands_are_errors_not_panics() {
        let zero = run(
            "executorch_prim::floordiv",
            &[EValue::Int(1), EValue::Int(0)],
        );
        assert_eq!(zero.unwrap_err().code(), crate::ErrorCode::InvalidArgument);
        let overflow = run(
            "executorch_prim::mul",
            &[EValue::Int(i64::MAX), EValue::Int(2)],
        );
        assert_eq!(
            overflow.unwrap_err().code(),
            crate::ErrorCode::InvalidArgument
        );
        let min_div = run(
            "executorch_prim::floordiv",
            &[EValue::Int(i64::MIN), EValue::Int(-1)],
        );
        assert!(min_div.is_err());
        let text = run(
            "executorch_prim::add",
            &[EValue::String("a".into()), EValue::Int(1)],
        );
        assert!(text.unwrap_err().message().contains("String"));
        assert!(run("executorch_prim::ceil", &[EValue::Double(f64::NAN)]).is_err());
    }

    #[test]
    fn mixed_operands_promote_and_compare() {
        let sum = run(
            "executorch_prim::add",
            &[EValue::Int(1), EValue::Double(0.5)],
        )
        .unwrap();
        assert!(matches!(sum, EValue::Double(v) if v == 1.5));
        let div = run(
            "executorch_prim::truediv",
            &[EValue::Int(3), EValue::Int(2)],
        )
        .unwrap();
        assert!(matches!(div, EValue::Double(v) if v == 1.5));
        let ge = run(
            "executorch_prim::ge",
            &[EValue::Int(3), EValue::Double(3.0)],
        )
        .unwrap();
        assert!(matches!(ge, EValue::Bool(true)));
    }

    #[test]
    fn sym_size_reads_the_runtime_shape() {
        let tensor = EValue::Tensor(Tensor::zeros(crate::ScalarType::Float32, vec![2, 5]).unwrap());
        let operator = op("aten::sym_size", "int");
        let prim = PrimOp::lookup(&operator).unwrap();
        let size = prim.run(&operator, &[&tensor, &EValue::Int(-1)]).unwrap();
        assert!(matches!(size, EValue::Int(5)));
        assert!(prim.run(&operator, &[&tensor, &EValue::Int(2)]).is_err());
        assert!(PrimOp::lookup(&op("aten::add", "out")).is_none());
    }
}
