//! The op suite on the CPU backend on a worker pool, inside headless Chromium (wasm32):
//! wasm-bindgen-test-runner serves its page cross-origin isolated (COOP/COEP), so the test
//! starts the package's `CpuThreadPool` (pkg/cpu-threads/pool.js and the kernel module, served
//! by the fixture nginx; `npm test` builds the package first) with 3 threads, installs it with
//! `useCpuThreads`, and sets `pool_min_work` to 0, so every op the pool has a kernel for runs
//! on it however small the suite's shapes. Each case gets the next thread count of 1, 2, 3 in
//! turn (odd shapes, splits that neither the tiles nor the thread count divide); the oracles
//! and tolerances are the plain CPU suite's (f64 references). A page that is not isolated, or
//! a pool that fails to start, fails every case with the reason; a pool that quietly runs
//! everything on the calling thread fails `the_pool_runs_shares_on_its_workers`.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod common;
mod web_script;

use common::harness::SuiteConfig;
use std::cell::Cell;
use std::sync::Arc;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use web_script::Script;
use webdelegate::backends::CpuBackend;
use webdelegate::registry::{BackendInterface, BackendOption, BackendOptionContext, OptionValue};

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

const FIXTURES_URL: Option<&str> = option_env!("WEBDELEGATE_TEST_FIXTURES_URL");

const SCRIPT: &str = r#"
function workerShares(pool) {
  return pool.workers.reduce((sum, w) => sum + w.sequence, 0);
}
function idleReason(pool) {
  return pool.idleReason;
}
// Workers a case's LowMemory ended start again in the background, on messages this page only
// reads between tasks: wait for them (at most 10 s) so that the next case runs on them.
async function awake(pool) {
  const deadline = new Promise((_, reject) => setTimeout(() => reject(new Error('the pool did not restart its workers within 10 s')), 10000));
  await Promise.race([pool.restore(), deadline]);
  if (pool.idleReason) throw new Error(`the pool stays idle: ${pool.idleReason}`);
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
    let threads = CASES.get() % 3 + 1;
    CASES.set(CASES.get() + 1);
    backend_on(threads).await
}

/// Starts the package's pool and installs it (once per page); waits until its workers run
/// (after a case's `LowMemory` ended them).
async fn start_pool() {
    if POOL.with_borrow(Option::is_none) {
        let fixtures = FIXTURES_URL.expect(
            "WEBDELEGATE_TEST_FIXTURES_URL is unset: run this test through scripts/test-wasm.sh",
        );
        let pkg = fixtures.trim_end_matches("/fixtures").to_owned() + "/pkg";
        let script = Script::new(
            SCRIPT,
            &["startPool", "workerShares", "idleReason", "awake"],
        );
        let started = script.call("startPool", &[JsValue::from_str(&pkg)]);
        let pool = JsFuture::from(js_sys::Promise::from(started))
            .await
            .expect("the CPU thread pool starts (is pkg/ built? `npm run build:pkg`)");
        webdelegate::web::registry::backends::use_cpu_threads(pool.clone())
            .expect("the pool is installed");
        POOL.set(Some((script, pool)));
    }
    let awake = POOL.with_borrow(|pool| {
        let (script, pool) = pool.as_ref().expect("the pool is started");
        script.call("awake", std::slice::from_ref(pool))
    });
    JsFuture::from(js_sys::Promise::from(awake))
        .await
        .expect("the pool's workers run");
}

/// The CPU backend with the pool installed (started on first use), on `threads` threads, every
/// op the pool has a kernel for on it.
async fn backend_on(threads: i64) -> webdelegate::registry::SharedBackend {
    start_pool().await;
    let backend = CpuBackend::new();
    let options = [
        BackendOption::new("threads", OptionValue::Int(threads)).expect("an option"),
        BackendOption::new("pool_min_work", OptionValue::Int(0)).expect("an option"),
    ];
    backend
        .set_option(&mut BackendOptionContext::default(), &options)
        .expect("the pool takes 1 to 3 threads");
    Arc::new(backend)
}

/// Shares the pool's workers have run so far (JS: the sum of their task sequence numbers).
fn worker_shares() -> f64 {
    POOL.with_borrow(|pool| {
        let (script, pool) = pool.as_ref().expect("the pool is started");
        script
            .call("workerShares", std::slice::from_ref(pool))
            .as_f64()
            .expect("a number of shares")
    })
}

/// The suite reaches the workers, not only this thread: a 48 x 40 by 40 x 36 matmul on 3
/// threads (the pool splits its rows, two shares going to workers) makes the workers' share
/// count grow, and its result is the f64 product within the suite's matmul tolerance. A pool that runs
/// everything on the calling thread would pass every case of the suite and fail here.
#[wasm_bindgen_test::wasm_bindgen_test]
async fn the_pool_runs_shares_on_its_workers() {
    use common::harness::{Model, assert_close, f32_tensor};
    use common::reference::Ref;
    let backend = backend_on(3).await;
    let (m_len, k_len, n_len) = (48, 40, 36);
    let a: Vec<f32> = (0..m_len * k_len)
        .map(|i| ((i * 7) % 13) as f32 - 6.0)
        .collect();
    let b: Vec<f32> = (0..k_len * n_len)
        .map(|i| ((i * 5) % 11) as f32 * 0.25 - 1.0)
        .collect();
    let mut model = Model::new();
    let x = model.input("a", &[m_len, k_len]);
    let w = model.param("b", &[k_len, n_len], &b);
    let out = model.b.matmul(x, w, None, false, false).expect("a matmul");
    model.b.output(out);
    let before = worker_shares();
    let got = model
        .run(&backend, vec![f32_tensor(&[m_len, k_len], a.clone())])
        .await;
    let after = worker_shares();
    let idle = POOL.with_borrow(|pool| {
        let (script, pool) = pool.as_ref().expect("the pool is started");
        script
            .call("idleReason", std::slice::from_ref(pool))
            .as_string()
    });
    assert!(
        after > before,
        "the pool's workers ran no share of a 3-thread matmul ({before} -> {after}; idle: {idle:?})"
    );
    let want: Vec<f64> = (0..m_len * n_len)
        .map(|i| {
            let (r, c) = (i / n_len, i % n_len);
            (0..k_len)
                .map(|k| f64::from(a[r * k_len + k]) * f64::from(b[k * n_len + c]))
                .sum::<f64>()
        })
        .collect();
    assert_close(
        "matmul on the pool",
        &got[0],
        &Ref::from_f64(&[m_len, n_len], want),
        SuiteConfig::CPU.matmul,
    );
}

op_suite!(threaded_backend().await, SuiteConfig::CPU.small());
