//! From an `Op` to its WebGPU planning: the [`GpuOp`] each op implements in its kernel file,
//! looked up by a `match` derived from the program's one op list (`with_op_list!`), so no
//! central code here learns about a new op.

use crate::backends::webgpu::kernels::GpuOp;
use crate::program::Op;
use crate::program::ops::with_op_list;

macro_rules! gpu_ops {
    ($($op:ident,)*) => {
        /// The WebGPU planning of `op`.
        pub(crate) fn gpu_op(op: &Op) -> &dyn GpuOp {
            match op {
                $(Op::$op(op) => op,)*
            }
        }
    };
}
with_op_list!(gpu_ops);
