//! The CPU kernels of the op set: each op's [`CpuOp`] implementation lives in its file (family
//! files for ops that share a kernel: element-wise, layout, conversions), and [`kernel`] maps
//! an `Op` to it, derived from the program's one op list.

mod argmax;
mod attention;
mod convert;
pub(crate) mod elementwise;
mod l2_normalize;
mod layer_norm;
mod layout;
pub(crate) mod linear;
mod matmul;
mod mean_pool;
mod rms_norm;
mod rope;
mod sample;
mod softmax;
mod token_mask;

use crate::backends::cpu::frame::CpuOp;
use crate::program::Op;
use crate::program::ops::with_op_list;

macro_rules! cpu_kernels {
    ($($op:ident,)*) => {
        /// The CPU kernel of `op`.
        pub(crate) fn kernel(op: &Op) -> &dyn CpuOp {
            match op {
                $(Op::$op(op) => op,)*
            }
        }
    };
}
with_op_list!(cpu_kernels);
