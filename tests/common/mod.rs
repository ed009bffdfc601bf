//! Test support shared by the integration tests: the backend-generic op suite (`op_suite!`,
//! `cases`), the harness that runs programs through the registry types (`harness`), the f64
//! reference implementations (`reference`) and a seeded RNG (`rng`).
#![allow(dead_code)]

pub mod cases;
pub mod harness;
pub mod op_suite;
pub mod reference;
pub mod rng;
