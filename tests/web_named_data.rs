//! ExecuTorch's `NamedDataMap` as a JavaScript backend sees it, inside headless Chromium: a
//! backend written in JavaScript reads its weights in `init` through `context.namedDataMap`
//! (a GGUF fixture served by nginx through an `HttpParameterProvider`, named by
//! `DelegateInitOptions.namedDataScope`) and returns one of them from `execute`. Oracle: the
//! fixture's own bytes (`include_bytes!`) at the offsets its index names; layouts as the GGUF
//! file declares them (shape reversed to outermost first); error codes as upstream's. Exact.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod web_script;

use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::convert::TryFromJsValue;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use webdelegate::ErrorCode;
use webdelegate::params::EntryStorage;
use webdelegate::params::formats::{Format, parse_index_in_memory};
use webdelegate::web::providers::http::HttpParameterProvider;
use webdelegate::web::registry::api;
use webdelegate::web::registry::named_data::JsNamedDataMap;

wasm_bindgen_test_configure!(run_in_browser);

const FIXTURES_URL: Option<&str> = option_env!("WEBDELEGATE_TEST_FIXTURES_URL");
const GGUF: &[u8] = include_bytes!("fixtures/formats/mixed_v3.gguf");

const SCRIPT: &str = r#"
async function codeOf(action) {
  try { await action(); return 'no error'; } catch (e) { return e.code; }
}

function makeWeightsBackend(log) {
  // A backend whose weights are its named data: init reads them all, execute returns one.
  return {
    isAvailable() { return true; },
    async init(processed, compileSpecs, context) {
      const map = context.namedDataMap;
      log.hadMap = 'namedDataMap' in context;
      if (!log.hadMap) { return null; }
      log.scope = map.scope;
      const n = map.numKeys();
      log.keys = [];
      for (let i = 0; i < n; i++) { log.keys.push(map.key(i)); }
      log.embd = map.tensorLayout('token_embd.weight');
      log.q8 = map.tensorLayout('blk.0.q8_0');
      const q8 = new Uint8Array(log.q8.nbytes + 4).fill(0xAA);
      await map.loadInto('blk.0.q8_0', q8);
      log.q8Bytes = q8;
      log.errors = {
        keyOutOfRange: await codeOf(() => map.key(n)),
        keyNotInteger: await codeOf(() => map.key(0.5)),
        layoutMissing: await codeOf(() => map.tensorLayout('nope')),
        layoutQ4_1: await codeOf(() => map.tensorLayout('blk.0.q4_1')),
        dataMissing: await codeOf(() => map.data('nope')),
        loadMissing: await codeOf(() => map.loadInto('nope', new Uint8Array(4))),
        loadSmall: await codeOf(() => map.loadInto('blk.0.q8_0', new Uint8Array(log.q8.nbytes - 1))),
      };
      const bytes = await map.data('token_embd.weight');
      return { shape: log.embd.sizes, weights: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4) };
    },
    execute(handle, args) {
      args[0] = { tag: 'Tensor', dtype: 'float32', shape: handle.shape, data: handle.weights };
    },
  };
}
"#;

thread_local! {
    static JS: web_script::Script = web_script::Script::new(SCRIPT, &["codeOf", "makeWeightsBackend"]);
}

fn make_weights_backend(log: &Object) -> JsValue {
    JS.with(|js| js.call("makeWeightsBackend", &[log.into()]))
}

fn prop(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(key)).unwrap()
}

fn numbers(value: &JsValue) -> Vec<f64> {
    Array::from(value)
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// The fixture's bytes of `key`.
fn file_bytes(key: &str) -> &'static [u8] {
    let index = parse_index_in_memory(Format::Gguf, GGUF).unwrap();
    let entry = index.get(key).unwrap();
    let EntryStorage::Data { offset } = entry.storage else {
        panic!("GGUF has no splats")
    };
    &GGUF[offset as usize..(offset + entry.length) as usize]
}

async fn provider() -> JsValue {
    let base = FIXTURES_URL.expect(
        "WEBDELEGATE_TEST_FIXTURES_URL is unset: run this test through scripts/test-wasm.sh, \
         which serves tests/fixtures with nginx",
    );
    let provider = HttpParameterProvider::new(None).unwrap();
    let url = format!("{base}/formats/mixed_v3.gguf");
    JsFuture::from(provider.add_scope("gguf".into(), url.clone(), None))
        .await
        .unwrap_or_else(|e| panic!("the index of {url}: {e:?}"));
    provider.into()
}

async fn init(name: &str, provider: &JsValue, scope: Option<&str>) -> Result<JsValue, JsValue> {
    let options = Object::new();
    if let Some(scope) = scope {
        Reflect::set(&options, &"namedDataScope".into(), &scope.into()).unwrap();
    }
    JsFuture::from(api::Delegate::init_with_parameters(
        name.into(),
        Uint8Array::from(&[1u8][..]).into(),
        provider.clone(),
        Some(options.into()),
    ))
    .await
}

#[wasm_bindgen_test]
async fn a_javascript_backend_reads_its_weights_through_the_named_data_map() {
    let log = Object::new();
    api::register_backend("web-named-data", make_weights_backend(&log)).unwrap();
    let provider = provider().await;
    let delegate = init("web-named-data", &provider, Some("gguf"))
        .await
        .unwrap_or_else(|e| panic!("init: {e:?}"));
    let delegate = api::Delegate::try_from_js_value(delegate).unwrap();
    assert_eq!(prop(&log, "scope").as_string().unwrap(), "gguf");

    let index = parse_index_in_memory(Format::Gguf, GGUF).unwrap();
    let keys: Vec<String> = Array::from(&prop(&log, "keys"))
        .iter()
        .map(|k| k.as_string().unwrap())
        .collect();
    let wanted: Vec<String> = index.entries().iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys, wanted, "every key, in file order");

    // GGUF lists [5, 3] and [64, 2] innermost first: outermost first they are [3, 5], [2, 64].
    let embd = prop(&log, "embd");
    assert_eq!(numbers(&prop(&embd, "sizes")), [3.0, 5.0]);
    assert_eq!(numbers(&prop(&embd, "dimOrder")), [0.0, 1.0]);
    assert_eq!(prop(&embd, "scalarType").as_string().unwrap(), "Float");
    assert_eq!(prop(&embd, "scalarTypeCode").as_f64(), Some(6.0));
    assert!(prop(&embd, "blockFormat").is_null());
    assert_eq!(prop(&embd, "nbytes").as_f64(), Some(60.0));
    let q8 = prop(&log, "q8");
    assert_eq!(numbers(&prop(&q8, "sizes")), [2.0, 64.0]);
    assert!(prop(&q8, "scalarType").is_null() && prop(&q8, "scalarTypeCode").is_null());
    assert_eq!(prop(&q8, "blockFormat").as_string().unwrap(), "Q8_0");
    assert_eq!(prop(&q8, "fileDtype").as_string().unwrap(), "Q8_0");
    assert_eq!(prop(&q8, "nbytes").as_f64(), Some(136.0));
    let loaded = Uint8Array::from(prop(&log, "q8Bytes")).to_vec();
    assert_eq!(&loaded[..136], file_bytes("blk.0.q8_0"));
    assert_eq!(&loaded[136..], [0xAA; 4], "bytes past the data are kept");

    let errors = prop(&log, "errors");
    for (what, code) in [
        ("keyOutOfRange", ErrorCode::InvalidArgument),
        ("keyNotInteger", ErrorCode::InvalidArgument),
        ("layoutMissing", ErrorCode::NotFound),
        ("layoutQ4_1", ErrorCode::NotSupported),
        ("dataMissing", ErrorCode::NotFound),
        ("loadMissing", ErrorCode::NotFound),
        ("loadSmall", ErrorCode::InvalidArgument),
    ] {
        assert_eq!(
            prop(&errors, what).as_string().as_deref(),
            Some(code.name()),
            "{what}"
        );
    }

    // execute returns the weights init read: the file's f32 values, in its shape.
    let placeholder = Object::new();
    Reflect::set(&placeholder, &"tag".into(), &"None".into()).unwrap();
    let args = Array::of1(&placeholder);
    let out = JsFuture::from(delegate.execute(args.into())).await.unwrap();
    let tensor = Array::from(&out).get(0);
    assert_eq!(numbers(&prop(&tensor, "shape")), [3.0, 5.0]);
    let got = js_sys::Float32Array::from(prop(&tensor, "data")).to_vec();
    let want: Vec<f32> = file_bytes("token_embd.weight")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(got, want);
    delegate.destroy();
}

#[wasm_bindgen_test]
async fn without_a_named_scope_there_is_no_map_and_an_unserved_one_is_not_found() {
    let log = Object::new();
    api::register_backend("web-named-data-none", make_weights_backend(&log)).unwrap();
    let provider = provider().await;
    let delegate = init("web-named-data-none", &provider, None).await.unwrap();
    let delegate = api::Delegate::try_from_js_value(delegate).unwrap();
    assert_eq!(prop(&log, "hadMap").as_bool(), Some(false));
    delegate.destroy();
    let error = init("web-named-data-none", &provider, Some("nope"))
        .await
        .unwrap_err();
    assert_eq!(
        prop(&error, "code").as_string().as_deref(),
        Some(ErrorCode::NotFound.name())
    );

    // NamedDataMap.open over the provider directly; anything else is InvalidArgument.
    let map = JsNamedDataMap::open(provider.clone(), "gguf").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(map.key(0.0).unwrap(), "token_embd.weight");
    let bytes = Uint8Array::from(JsFuture::from(map.data("blk.0.bf16".into())).await.unwrap());
    assert_eq!(bytes.to_vec(), file_bytes("blk.0.bf16"));
    let error = JsNamedDataMap::open(JsValue::from(1), "gguf")
        .err()
        .unwrap();
    assert_eq!(
        prop(&error, "code").as_string().as_deref(),
        Some(ErrorCode::InvalidArgument.name())
    );
}
