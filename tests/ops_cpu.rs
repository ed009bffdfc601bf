//! The op suite on the CPU backend, natively.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::harness::SuiteConfig;
use std::sync::Arc;
use webdelegate::backends::cpu::CpuBackend;

op_suite!(Arc::new(CpuBackend::new()), SuiteConfig::CPU);
