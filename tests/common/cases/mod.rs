//! The suite's cases, each written once as `op_case! { async fn name(backend, config) { .. } }`
//! in the file of its concept: the macro makes it a test of whichever binary instantiates the
//! suite (`op_suite!`), so adding a case is writing it. Each case gets a fresh backend from
//! that binary and panics on failure.

mod activations;
mod aliasing;
pub mod argmax;
mod attention;
mod chains;
mod elementwise;
mod f16_activations;
mod layout;
mod lifecycle;
mod linear;
mod matmul;
mod model;
mod normalize;
mod rms_norm;
mod rope;
mod sample;
