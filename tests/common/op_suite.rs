//! The op test suite, written once for every backend.
//!
//! A test binary instantiates it for one backend with `op_suite!(make_backend, config)` after
//! `mod common;`: `make_backend` is an expression evaluated inside each (async) test that yields
//! a `webdelegate::registry::SharedBackend` (it may `.await`); `config` is a
//! [`SuiteConfig`](crate::common::harness::SuiteConfig) giving tolerances and sizes. Every case
//! in [`crate::common::cases`] (declared there with [`op_case!`]) then runs as a `#[test]`
//! natively (driven by `pollster`) and as a `#[wasm_bindgen_test]` on wasm32.
//!
//! ```ignore
//! mod common;
//! op_suite!(std::sync::Arc::new(CpuBackend::new()), SuiteConfig::CPU);
//! ```

/// Instantiates the op suite for the backend `$make`, held to `$config`.
#[macro_export]
macro_rules! op_suite {
    ($make:expr, $config:expr) => {
        /// A fresh backend for one op-suite case.
        async fn suite_backend() -> webdelegate::registry::SharedBackend {
            $make
        }

        /// What the op suite holds this backend to.
        fn suite_config() -> $crate::common::harness::SuiteConfig {
            $config
        }
    };
}

/// Declares one op-suite case: `async fn name(backend: SharedBackend, config: SuiteConfig)
/// { .. }` becomes a test (native and wasm32) of the binary's `op_suite!` backend.
#[macro_export]
macro_rules! op_case {
    (
        $(#[$meta:meta])*
        pub async fn $name:ident($backend:ident: $backend_type:ty, $config:ident: $config_type:ty)
        $body:block
    ) => {
        $(#[$meta])*
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            pollster::block_on(async {
                let $backend: $backend_type = $crate::suite_backend().await;
                let $config: $config_type = $crate::suite_config();
                $body
            })
        }

        $(#[$meta])*
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() {
            let $backend: $backend_type = $crate::suite_backend().await;
            let $config: $config_type = $crate::suite_config();
            $body
        }
    };
}
