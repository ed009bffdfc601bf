//! The suite's cases: each is `async fn(SharedBackend, SuiteConfig)` and panics on failure.
//! `op_suite!` lists them; a case missing from that list is reported as dead code.

mod aliasing;
mod elementwise;
mod layout;
mod lifecycle;
mod matmul;
mod model;
mod normalize;

pub use aliasing::*;
pub use elementwise::*;
pub use layout::*;
pub use lifecycle::*;
pub use matmul::*;
pub use model::*;
pub use normalize::*;
