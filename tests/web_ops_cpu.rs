//! The op suite on the CPU backend inside headless Chromium (wasm32, simd128), with the
//! suite's small shapes. Run with `bash scripts/test-wasm.sh --test web_ops_cpu`.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod common;

use common::harness::SuiteConfig;
use std::sync::Arc;
use webdelegate::backends::cpu::CpuBackend;

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

op_suite!(Arc::new(CpuBackend::new()), SuiteConfig::CPU.small());
