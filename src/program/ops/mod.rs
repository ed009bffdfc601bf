//! The op set: one file per op holds its definition (semantics, fields, dtype and shape rules,
//! text form), and [`with_op_list!`] names every op once, in blob order.
//!
//! [`Op`] is an enum of newtype variants, `Op::LayerNorm(LayerNorm)`, generated from that list;
//! postcard encodes a newtype variant holding a struct exactly like a struct variant, so blobs
//! are the same bytes as when the fields were inline. New ops go at the end of the list (the
//! variant index is the wire tag). Each backend derives its own dispatch from the same list
//! (`with_op_list!(its_macro)`), so adding an op means adding its files and one line here.

mod argmax;
mod attention;
mod binary;
mod cast;
mod concat;
mod gather;
mod l2_normalize;
mod layer_norm;
mod linear;
mod matmul;
mod mean_pool;
mod permute;
mod range;
mod reshape;
mod rms_norm;
mod rope;
mod sample;
mod scale;
mod slice;
mod softmax;
pub mod support;
mod token_mask;
mod unary;

pub use argmax::{Argmax, order_key};
pub use attention::Attention;
pub use binary::{Binary, BinaryOp};
pub use cast::Cast;
pub use concat::Concat;
pub use gather::Gather;
pub use l2_normalize::L2Normalize;
pub use layer_norm::LayerNorm;
pub use linear::{Linear, is_weight_dtype};
pub use matmul::MatMul;
pub use mean_pool::MeanPool;
pub use permute::Permute;
pub use range::Range;
pub use reshape::Reshape;
pub use rms_norm::RmsNorm;
pub use rope::{Rope, RopeScaling, RopeStyle};
pub use sample::{Sample, SampleKnobs};
pub use scale::Scale;
pub use slice::Slice;
pub use softmax::Softmax;
pub use support::OpDef;
pub use token_mask::TokenMask;
pub use unary::{Unary, UnaryOp};

use crate::program::infer::InferResult;
use crate::program::ops::support::Operands;
use crate::program::tensor::{TensorDecl, TensorId};
use serde::{Deserialize, Serialize};

/// Invokes `$callback! { Gather, Binary, ... }` with every op, in blob order: the one list of
/// the op set. Each name is both the `Op` variant and the op's struct.
macro_rules! with_op_list {
    ($callback:ident) => {
        $callback! {
            Gather,
            Binary,
            Scale,
            Unary,
            MatMul,
            LayerNorm,
            Softmax,
            Reshape,
            Permute,
            Slice,
            Concat,
            Cast,
            Range,
            MeanPool,
            L2Normalize,
            RmsNorm,
            Attention,
            Rope,
            Argmax,
            Sample,
            Linear,
            TokenMask,
        }
    };
}
pub(crate) use with_op_list;

macro_rules! define_op_enum {
    ($($op:ident,)*) => {
        /// One operation. All inputs are read before `out` is written; `out` is never an input
        /// of the same op and is produced by exactly one op.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub enum Op {
            $(
                #[doc = concat!("See [`", stringify!($op), "`].")]
                $op($op),
            )*
        }

        $(
            impl From<$op> for Op {
                fn from(op: $op) -> Self {
                    Self::$op(op)
                }
            }
        )*

        impl Op {
            /// The op's definition.
            pub fn definition(&self) -> &dyn OpDef {
                match self {
                    $(Self::$op(op) => op,)*
                }
            }
        }
    };
}
with_op_list!(define_op_enum);

impl Op {
    /// The tensors this op reads, in a fixed order.
    pub fn inputs(&self) -> Vec<TensorId> {
        self.definition().inputs()
    }

    /// The tensor this op writes.
    pub fn output(&self) -> TensorId {
        self.definition().output()
    }

    /// The state tensors this op writes in place (see [`OpDef::state_writes`]).
    pub fn state_writes(&self) -> Vec<TensorId> {
        self.definition().state_writes()
    }

    /// The op's name in dumps and messages, e.g. `"matmul"`.
    pub fn name(&self) -> &'static str {
        self.definition().name()
    }

    /// Checks the op against the declarations of the tensors it touches: input and output
    /// dtypes, attribute values, and that the declared output shape is the computed one.
    ///
    /// # Errors
    /// A message naming the operand and what is wrong with it.
    pub fn check(&self, tensors: &[TensorDecl]) -> InferResult<()> {
        self.definition().check(&Operands::new(tensors))
    }

    /// The dump's attribute list (see [`OpDef::attributes`]).
    pub fn attributes(&self) -> String {
        self.definition().attributes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form of an op: its variant index in [`with_op_list!`] order, then its fields in
    /// order (u32 as varints, f32 as 4 little-endian bytes): what struct variants encoded before
    /// the ops moved into their files, so old blobs still load.
    #[test]
    fn newtype_variants_encode_like_struct_variants() {
        let layer_norm = Op::LayerNorm(LayerNorm {
            x: 1,
            gamma: 2,
            beta: 3,
            eps: 0.5,
            out: 300,
        });
        let bytes = postcard::to_allocvec(&layer_norm).unwrap();
        assert_eq!(bytes, [5, 1, 2, 3, 0, 0, 0, 0x3f, 0xac, 0x02]);
        let binary = Op::Binary(Binary {
            op: BinaryOp::Div,
            a: 0,
            b: 1,
            out: 2,
        });
        assert_eq!(postcard::to_allocvec(&binary).unwrap(), [1, 3, 0, 1, 2]);
        let slice = Op::Slice(Slice {
            x: 4,
            axis: 1,
            start: 2,
            end: None,
            out: 5,
        });
        assert_eq!(postcard::to_allocvec(&slice).unwrap(), [9, 4, 1, 2, 0, 5]);
        // New ops take the next index.
        let rms_norm = Op::RmsNorm(RmsNorm {
            x: 0,
            weight: Some(1),
            eps: 0.5,
            out: 2,
        });
        assert_eq!(
            postcard::to_allocvec(&rms_norm).unwrap(),
            [15, 0, 1, 1, 0, 0, 0, 0x3f, 2]
        );
        for op in [layer_norm, binary, slice, rms_norm] {
            let bytes = postcard::to_allocvec(&op).unwrap();
            assert_eq!(postcard::from_bytes::<Op>(&bytes).unwrap(), op);
        }
    }

    /// The decoder ops take the next indices after attention (17, 18, 19) and the new unary functions the next
    /// `UnaryOp` tags (3, 4), so blobs made before them keep their bytes.
    #[test]
    fn decoder_ops_take_the_next_tags() {
        let rope = Op::Rope(Rope {
            x: 0,
            positions: 1,
            dims: 4,
            base: 0.5,
            style: RopeStyle::GptJ,
            out: 2,
            scaling: Default::default(),
        });
        assert_eq!(
            postcard::to_allocvec(&rope).unwrap(),
            // ... then the scaling (format 4): no factors, freq_scale 1.0, attn_factor 1.0.
            [
                17, 0, 1, 4, 0, 0, 0, 0x3f, 1, 2, 0, 0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f
            ]
        );
        let argmax = Op::Argmax(Argmax { x: 3, out: 4 });
        assert_eq!(postcard::to_allocvec(&argmax).unwrap(), [18, 3, 4]);
        let sample = Op::Sample(Sample {
            logits: 0,
            knobs: 1,
            out: 2,
        });
        assert_eq!(postcard::to_allocvec(&sample).unwrap(), [19, 0, 1, 2]);
        for (op, tag) in [(UnaryOp::GeluTanh, 3), (UnaryOp::Silu, 4)] {
            let unary = Op::Unary(Unary { op, x: 0, out: 1 });
            assert_eq!(postcard::to_allocvec(&unary).unwrap(), [3, tag, 0, 1]);
        }
    }

    /// Every byte of a blob holding the decoder ops, replaced by several values: loading
    /// (decode + validation) returns an error or a program, never panics.
    #[test]
    fn mutated_decoder_op_blobs_never_panic() {
        use crate::program::{DType, Dim, ProgramBuilder, load};
        let mut b = ProgramBuilder::new();
        let x = b.input(
            "x",
            DType::F32,
            vec![Dim::Fixed(3), Dim::Fixed(2), Dim::Fixed(8)],
        );
        let positions = b.input("positions", DType::I32, vec![Dim::Fixed(3)]);
        let knobs = b.input("knobs", DType::F32, vec![Dim::Fixed(6), Dim::Fixed(4)]);
        let rotated = b
            .push(|out| Rope {
                x,
                positions,
                dims: 6,
                base: 1e4,
                style: RopeStyle::Neox,
                out,
                scaling: Default::default(),
            })
            .unwrap();
        let activated = b.unary(UnaryOp::Silu, rotated).unwrap();
        let flat = b
            .reshape(activated, vec![Dim::Fixed(6), Dim::Fixed(8)])
            .unwrap();
        let picked = b
            .push(|out| Sample {
                logits: flat,
                knobs,
                out,
            })
            .unwrap();
        let greedy = b.push(|out| Argmax { x: flat, out }).unwrap();
        b.output(picked).output(greedy);
        let blob = b.encode().unwrap();
        assert!(load(&blob).is_ok());
        for i in 0..blob.len() {
            for value in [0u8, 1, 2, 3, 5, 0x7f, 0x80, 0xff] {
                let mut mutated = blob.clone();
                mutated[i] = value;
                let _ = load(&mutated);
            }
        }
    }
}
