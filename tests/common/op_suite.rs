//! The op test suite, written once for every backend.
//!
//! `op_suite!(make_backend, config)` expands to one test per case in [`crate::common::cases`]:
//! `#[test]` natively (driven by `pollster`), `#[wasm_bindgen_test]` on wasm32. `make_backend`
//! is an expression evaluated inside each (async) test that yields a
//! `webdelegate::registry::SharedBackend` (it may `.await`); `config` is a
//! [`SuiteConfig`](crate::common::harness::SuiteConfig) giving tolerances and sizes.
//!
//! ```ignore
//! mod common;
//! op_suite!(std::sync::Arc::new(CpuBackend::new()), SuiteConfig::CPU);
//! ```

/// Expands to one test per op-suite case for the backend `$make`.
#[macro_export]
macro_rules! op_suite {
    ($make:expr, $config:expr) => {
        $crate::op_suite!(@cases $make, $config;
            gather_by_hand_with_i32_ids,
            gather_by_hand_with_i64_ids_and_bad_ids,
            binary_ops_by_hand_with_broadcasting,
            scale_and_activations_by_hand,
            binary_ops_random_broadcasts,
            scale_and_activations_random,
            matmul_by_hand_all_transposes_and_bias,
            matmul_by_hand_batch_broadcast,
            matmul_random_shapes,
            layer_norm_by_hand,
            softmax_by_hand_with_and_without_mask,
            l2_normalize_and_mean_pool_by_hand,
            reductions_random,
            reshape_permute_slice_concat_by_hand,
            cast_and_range_by_hand,
            layout_random,
            gather_random,
            bert_block_end_to_end,
            lifecycle_init_execute_many_destroy,
            bad_blobs_get_the_right_codes,
            wrong_inputs_are_invalid_arguments,
            parameter_errors,
            compile_specs_are_checked,
            one_tensor_read_through_two_operands,
        );
    };
    (@cases $make:expr, $config:expr; $($case:ident),* $(,)?) => {
        $(
            #[cfg(not(target_arch = "wasm32"))]
            #[test]
            fn $case() {
                pollster::block_on(async {
                    let backend: webdelegate::registry::SharedBackend = $make;
                    $crate::common::cases::$case(backend, $config).await;
                });
            }

            #[cfg(target_arch = "wasm32")]
            #[wasm_bindgen_test::wasm_bindgen_test]
            async fn $case() {
                let backend: webdelegate::registry::SharedBackend = $make;
                $crate::common::cases::$case(backend, $config).await;
            }
        )*
    };
}
