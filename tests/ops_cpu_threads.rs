//! The op suite on the CPU backend on a worker pool, inside headless Chromium (wasm32):
//! wasm-bindgen-test-runner serves its page cross-origin isolated (COOP/COEP), so the test
//! starts the package's `CpuThreadPool` (pkg/cpu-threads/pool.js and the kernel module, served
//! by the fixture nginx; `npm test` builds the package first) with 3 threads, installs it with
//! `useCpuThreads`, and sets `pool_min_work` to 0, so every op the pool has a kernel for runs
//! on it however small the suite's shapes. Each case gets the next thread count of 1, 2, 3 in
//! turn (odd shapes, splits that neither the tiles nor the thread count divide); the oracles
//! and tolerances are the plain CPU suite's (f64 references). A page that is not isolated, or
//! a pool that fails to start, fails every case with the reason.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod common;
mod web_script;

use common::harness::SuiteConfig;
use std::cell::Cell;
use std::sync::Arc;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use web_script::Script;
use webdelegate::backends::cpu::CpuBackend;
use webdelegate::registry::{BackendInterface, BackendOption, BackendOptionContext, OptionValue};

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

const FIXTURES_URL: Option<&str> = option_env!("WEBDELEGATE_TEST_FIXTURES_URL");

const SCRIPT: &str = r#"
function workerShares(pool) {
  return pool.workers.reduce((sum, w) => sum + w.sequence, 0);
}
async function startPool(pkg) {
  if (!crossOriginIsolated) throw new Error('the test page is not cross-origin isolated');
  const { CpuThreadPool } = await import(pkg + '/cpu-threads/pool.js');
  // A worker's script must be same-origin: the worker runs from a blob of the served file.
  const source = await (await fetch(pkg + '/cpu-threads/worker.js')).text();
  const workerUrl = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  return CpuThreadPool.start({ threads: 3, kernelsUrl: pkg + '/webdelegate_kernels.wasm', workerUrl, taskTimeoutMs: 10000 });
}
"#;

thread_local! {
    static POOL: std::cell::RefCell<Option<(Script, JsValue)>> = const { std::cell::RefCell::new(None) };
    static CASES: Cell<i64> = const { Cell::new(0) };
}

/// The CPU backend with the pool installed, on the next thread count of 1, 2, 3.
async fn threaded_backend() -> webdelegate::registry::SharedBackend {
    if POOL.with_borrow(Option::is_none) {
        let fixtures = FIXTURES_URL.expect(
            "WEBDELEGATE_TEST_FIXTURES_URL is unset: run this test through scripts/test-wasm.sh",
        );
        let pkg = fixtures.trim_end_matches("/fixtures").to_owned() + "/pkg";
        let script = Script::new(SCRIPT, &["startPool", "workerShares"]);
        let started = script.call("startPool", &[JsValue::from_str(&pkg)]);
        let pool = JsFuture::from(js_sys::Promise::from(started))
            .await
            .expect("the CPU thread pool starts (is pkg/ built? `npm run build:pkg`)");
        webdelegate::web::registry::backends::use_cpu_threads(pool.clone())
            .expect("the pool is installed");
        POOL.set(Some((script, pool)));
    }
    // The suite must reach the workers, not only this thread: by the tenth case (three of
    // them on 2 or 3 threads), the workers have run shares.
    if CASES.get() == 10 {
        let shares = POOL.with_borrow(|pool| {
            let (script, pool) = pool.as_ref().expect("started");
            script
                .call("workerShares", std::slice::from_ref(pool))
                .as_f64()
        });
        assert!(
            shares.is_some_and(|n| n > 0.0),
            "the pool's workers ran no share: {shares:?}"
        );
    }
    let backend = CpuBackend::new();
    let threads = CASES.get() % 3 + 1;
    CASES.set(CASES.get() + 1);
    let options = [
        BackendOption::new("threads", OptionValue::Int(threads)).expect("an option"),
        BackendOption::new("pool_min_work", OptionValue::Int(0)).expect("an option"),
    ];
    backend
        .set_option(&mut BackendOptionContext::default(), &options)
        .expect("the pool takes 1 to 3 threads");
    Arc::new(backend)
}

op_suite!(threaded_backend().await, SuiteConfig::CPU.small());
