//! The CPU backend's hot loops, written once: `#![no_std]`, no allocator, no I/O, every
//! operand a slice the caller owns. The main crate calls them directly (natively and on the
//! browser's main thread); built on its own for `wasm32` with shared memory, the same code
//! is the kernel module a pool of workers instantiates against one `WebAssembly.Memory`
//! ([`exports`], only with the `module` feature).
//!
//! - [`math`]: branch-free transcendental functions, eight-lane sums, and the two small
//!   vector types (simd128 in the browser, arrays natively).
//! - [`gemm`]: one blocked f32 matrix product over strided views or a pre-packed operand.
//! - [`blocks`]: ggml block-format rows dotted with an f32 activation row in registers.
//! - [`int8_dots`]: the same rows dotted with activation rows quantized to int8 blocks.
//! - [`rows`]: elementwise activations, binaries and scale, the per-row softmax and layer norm.
//! - [`layout`]: permutations of up to four dims, by output rows.
//!
//! Kernels check every length before their loops and report a [`KernelError`] instead of
//! indexing out of range.

#![no_std]

#[cfg(test)]
extern crate std;

pub mod blocks;
pub mod gemm;
pub mod int8_dots;
pub mod layout;
pub mod math;
pub mod rows;
#[cfg(test)]
mod test_rows;

#[cfg(all(target_arch = "wasm32", feature = "module"))]
pub mod exports;

/// Why a kernel refused its operands (a length or shape that does not fit): a fixed message,
/// since the kernels have no allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelError(pub &'static str);
