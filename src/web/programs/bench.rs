//! The matmul fixture the benchmark page times (`bench/suites/matmul.mjs`).
//!
//! `MatmulBench` builds a program of `repeats` independent `[M, K] x [K, N]` matmuls, every one
//! an output (a backend that skips ops whose results nobody reads still computes them all),
//! initialises it on any registered backend, and executes it `iterations` times; the page
//! measures the wall time around `run` and divides `flopsPerRun * iterations` by it.

use crate::error::Error;
use crate::evalue::{EValue, Tensor};
use crate::params::MemoryProvider;
use crate::program::ops;
use crate::program::{DType, Dim, Op, ProgramBuilder};
use crate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use crate::web::edge::convert::compile_specs_from_js;
use crate::web::edge::errors::to_js_error;
use js_sys::Promise;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Largest M, K or N a bench program may have.
const MAX_EXTENT: u32 = 16_384;
/// Most matmuls one bench program may chain.
const MAX_REPEATS: u32 = 256;
/// Most elements of any operand or output (64 MiB of f32).
const MAX_ELEMENTS: usize = 1 << 24;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Deterministic values in [-1, 1) (a linear congruential generator), so runs are comparable.
fn values(count: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

struct BenchState {
    delegate: LoadedDelegate,
    args: Vec<EValue>,
}

/// A matmul program initialised on one backend, executed on demand (see the module docs).
#[wasm_bindgen]
pub struct MatmulBench {
    state: Rc<RefCell<Option<BenchState>>>,
    destroyed: Rc<Cell<bool>>,
    flops: f64,
}

#[wasm_bindgen]
impl MatmulBench {
    /// Builds `repeats` matmuls of `[m, k] x [k, n]` (B comes from an in-memory parameter
    /// provider) and initialises them on the registered backend `backendName` with
    /// `compileSpecs` (`[{key, value}]`, e.g. `matmul_kernel: "naive"` on WebGPU).
    pub async fn create(
        #[wasm_bindgen(js_name = backendName)] backend_name: String,
        m: u32,
        k: u32,
        n: u32,
        repeats: u32,
        #[wasm_bindgen(js_name = compileSpecs, unchecked_param_type = "CompileSpecEntry[] | undefined")]
        compile_specs: Option<JsValue>,
    ) -> JsResult<MatmulBench> {
        if m == 0 || k == 0 || n == 0 || repeats == 0 {
            return Err(to_js_error(Error::invalid_argument(
                "matmul bench extents and repeats must be positive",
            )));
        }
        if m.max(k).max(n) > MAX_EXTENT || repeats > MAX_REPEATS {
            return Err(to_js_error(Error::invalid_argument(format!(
                "matmul bench extents are at most {MAX_EXTENT} and repeats at most {MAX_REPEATS} \
                 (got {m}x{k}x{n}, {repeats} repeats)"
            ))));
        }
        // Each operand and output must fit a wasm32 allocation with room to spare.
        let elements = |a: u32, b: u32| (a as usize).checked_mul(b as usize);
        if [elements(m, k), elements(k, n), elements(m, n)]
            .iter()
            .any(|e| e.is_none_or(|e| e > MAX_ELEMENTS))
        {
            return Err(to_js_error(Error::invalid_argument(format!(
                "matmul bench operands hold at most {MAX_ELEMENTS} elements (got {m}x{k}x{n})"
            ))));
        }
        let specs = match compile_specs {
            Some(specs) if !specs.is_undefined() => {
                compile_specs_from_js(&specs).map_err(to_js_error)?
            }
            _ => Vec::new(),
        };
        let (m, k, n) = (m as usize, k as usize, n as usize);
        let fixed = |dims: &[usize]| dims.iter().map(|&d| Dim::Fixed(d as u64)).collect();
        let mut b = ProgramBuilder::new();
        let a = b.input("a", DType::F32, fixed(&[m, k]));
        let weight = b.param("b", DType::F32, fixed(&[k, n]), "bench", "b");
        for r in 0..repeats {
            let out = b.tensor(&format!("out{r}"), DType::F32, fixed(&[m, n]));
            b.op(Op::MatMul(ops::MatMul {
                a,
                b: weight,
                bias: None,
                transpose_a: false,
                transpose_b: false,
                out,
            }))
            .output(out);
        }
        let blob = b.encode().map_err(to_js_error)?;
        let provider = MemoryProvider::new();
        provider.insert(
            "bench",
            "b",
            values(k * n, 2)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let delegate =
            LoadedDelegate::init(&backend_name, FreeableBuffer::new(blob), &specs, &context)
                .await
                .map_err(to_js_error)?;
        let input = Tensor::from_f32(vec![m, k], values(m * k, 1)).map_err(to_js_error)?;
        Ok(MatmulBench {
            state: Rc::new(RefCell::new(Some(BenchState {
                delegate,
                args: std::iter::once(EValue::Tensor(input))
                    .chain((0..repeats).map(|_| EValue::None))
                    .collect(),
            }))),
            destroyed: Rc::new(Cell::new(false)),
            flops: 2.0 * m as f64 * k as f64 * n as f64 * f64::from(repeats),
        })
    }

    /// Floating-point operations of one execution (2 M K N per matmul).
    #[wasm_bindgen(getter, js_name = flopsPerRun)]
    pub fn flops_per_run(&self) -> f64 {
        self.flops
    }

    /// Executes the program `iterations` times in sequence (each reads its output back).
    /// Rejects with `InvalidState` while another `run` is going or after `destroy`.
    pub fn run(&self, iterations: u32) -> Promise {
        let Some(mut state) = self.state.borrow_mut().take() else {
            return Promise::reject(&to_js_error(Error::invalid_state(
                "the bench is running or destroyed",
            )));
        };
        let slot = Rc::clone(&self.state);
        let destroyed = Rc::clone(&self.destroyed);
        wasm_bindgen_futures::future_to_promise(async move {
            let mut outcome = Ok(());
            for _ in 0..iterations {
                outcome = state.delegate.execute(&mut state.args).await;
                if outcome.is_err() {
                    break;
                }
            }
            if !destroyed.get() {
                *slot.borrow_mut() = Some(state);
            }
            outcome.map(|()| JsValue::UNDEFINED).map_err(to_js_error)
        })
    }

    /// Destroys the program (its backend's `destroy`, at once or when a running `run` ends);
    /// later `run`s reject.
    pub fn destroy(&self) {
        self.destroyed.set(true);
        self.state.borrow_mut().take();
    }
}
