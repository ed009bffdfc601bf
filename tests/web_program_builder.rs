//! The JavaScript `ProgramBuilder`, driven from real JavaScript in headless Chromium: build a
//! program with symbols, inputs, params and ops, encode it, run it on the CPU backend and check
//! the numbers; bad arguments throw `WebDelegateError`s with the right codes.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod web_script;

use js_sys::{Array, Reflect, Uint8Array};
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;
use webdelegate::backends::CpuBackend;
use webdelegate::params::MemoryProvider;
use webdelegate::program::{self, DType, Dim};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use webdelegate::web::programs::program_builder::JsProgramBuilder;
use webdelegate::{EValue, Tensor};

wasm_bindgen_test_configure!(run_in_browser);

const SCRIPT: &str = r#"
function buildMlp(b) {
  // y = relu(x @ w^T + bias) for x [batch, 2], w [3, 2] (nn.Linear layout), then softmax.
  const x = b.input('x', 'float32', ['batch', 2]);
  const w = b.param('w', 'float32', [3, 2], 'weights', 'dense.weight');
  const bias = b.param('bias', 'f32', [3], 'weights', 'dense.bias');
  const h = b.relu(b.matmul(x, w, bias, false, true));
  b.setName(h, 'hidden');
  const probs = b.softmax(h);
  b.output(h);
  b.output(probs);
  const result = { blob: b.encode(), dump: b.dump(), shape: b.shapeOf(h), count: b.tensorCount };
  b.free();
  return result;
}

function captureError(f) {
  try { f(); return null; } catch (e) {
    return { isError: e instanceof Error, name: e.name, code: e.code, codeValue: e.codeValue, message: e.message };
  }
}

function badCalls(b) {
  const x = b.input('x', 'float32', ['n', 4]);
  const results = {
    dtype: captureError(() => b.input('y', 'float16', [1])),
    negative: captureError(() => b.input('y', 'float32', [-1])),
    fraction: captureError(() => b.input('y', 'float32', [1.5])),
    notArray: captureError(() => b.input('y', 'float32', 7)),
    object: captureError(() => b.input('y', 'float32', [{}])),
    matmul: captureError(() => b.matmul(x, x, undefined, false, false)),
    missing: captureError(() => b.relu(99)),
    output: captureError(() => b.output(99)),
    slice: captureError(() => b.slice(x, 1, 3, 9)),
    permute: captureError(() => b.permute(x, [0, 0])),
    reshape: captureError(() => b.reshape(x, ['n', 3])),
    negativeId: captureError(() => b.relu(-1)),
    fractionId: captureError(() => b.add(x, 0.5)),
    fractionAxis: captureError(() => b.concat([x, x], 0.5)),
    negativePerm: captureError(() => b.permute(x, [1, -1])),
    symbolicParam: (() => { b.param('p', 'float32', ['free', 2], 's', 'k'); return captureError(() => b.encode()); })(),
  };
  results.count = b.tensorCount;
  b.free();
  return results;
}
"#;

thread_local! {
    static JS: web_script::Script = web_script::Script::new(SCRIPT, &["buildMlp", "captureError", "badCalls"]);
}

fn build_mlp(builder: JsProgramBuilder) -> JsValue {
    JS.with(|js| js.call("buildMlp", &[builder.into()]))
}

fn bad_calls(builder: JsProgramBuilder) -> JsValue {
    JS.with(|js| js.call("badCalls", &[builder.into()]))
}

fn get(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(key)).unwrap()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[wasm_bindgen_test]
async fn a_program_built_in_javascript_runs_on_the_cpu_backend() {
    let builder = JsProgramBuilder::new();
    let built = build_mlp(builder);
    let blob = Uint8Array::new(&get(&built, "blob")).to_vec();
    let dump = get(&built, "dump").as_string().unwrap();
    assert!(dump.contains("symbol $0 \"batch\""), "{dump}");
    assert!(
        dump.contains("param 0 %1 scope \"weights\" key \"dense.weight\""),
        "{dump}"
    );
    assert!(dump.contains("tensor %4 f32 [$0, 3] \"hidden\""), "{dump}");
    let shape = Array::from(&get(&built, "shape"));
    assert_eq!(shape.get(0).as_string().as_deref(), Some("batch"));
    assert_eq!(shape.get(1).as_f64(), Some(3.0));
    assert_eq!(get(&built, "count").as_f64(), Some(6.0));

    // The blob decodes to what the builder described.
    let program = program::load(&blob).unwrap();
    assert_eq!(
        program.tensors[0].shape,
        vec![Dim::Symbol(0), Dim::Fixed(2)]
    );
    assert_eq!(program.tensors[2].dtype, DType::F32);

    let provider = MemoryProvider::new();
    provider.insert(
        "weights",
        "dense.weight",
        f32_bytes(&[1.0, 0.0, 0.0, 1.0, 1.0, -1.0]),
    );
    provider.insert("weights", "dense.bias", f32_bytes(&[0.0, 0.5, 0.0]));
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let mut delegate = LoadedDelegate::init_with_backend(
        "cpu",
        Arc::new(CpuBackend::new()),
        FreeableBuffer::new(blob),
        &[],
        &context,
    )
    .await
    .unwrap();
    let x = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, -1.0]).unwrap();
    let mut args = vec![EValue::Tensor(x), EValue::None, EValue::None];
    delegate.execute(&mut args).await.unwrap();
    // Row [1, 2]: [1, 2 + 0.5, 1 - 2 -> 0]; row [3, -1]: [3, -1 + 0.5 -> 0, 3 + 1].
    let hidden = args[1].as_tensor().unwrap();
    assert_eq!(hidden.shape(), &[2, 3]);
    assert_eq!(hidden.as_f32().unwrap(), &[1.0, 2.5, 0.0, 3.0, 0.0, 4.0]);
    let probs = args[2].as_tensor().unwrap().as_f32().unwrap();
    let e = |v: f64| v.exp();
    let first = e(1.0) / (e(1.0) + e(2.5) + e(0.0));
    assert!((f64::from(probs[0]) - first).abs() < 1e-6, "{probs:?}");
}

#[wasm_bindgen_test]
fn bad_arguments_throw_web_delegate_errors() {
    let builder = JsProgramBuilder::new();
    let results = bad_calls(builder);
    let expect = |key: &str, code: &str, part: &str| {
        let error = get(&results, key);
        assert!(!error.is_null(), "{key}: did not throw");
        assert_eq!(get(&error, "isError").as_bool(), Some(true), "{key}");
        assert_eq!(
            get(&error, "name").as_string().as_deref(),
            Some("WebDelegateError"),
            "{key}"
        );
        assert_eq!(
            get(&error, "code").as_string().as_deref(),
            Some(code),
            "{key}"
        );
        let message = get(&error, "message").as_string().unwrap();
        assert!(message.contains(part), "{key}: {message:?} lacks {part:?}");
    };
    expect("dtype", "InvalidArgument", "float16");
    expect("negative", "InvalidArgument", "shape entry 0");
    expect("fraction", "InvalidArgument", "1.5");
    expect("notArray", "InvalidArgument", "array");
    expect("object", "InvalidArgument", "shape entry 0");
    expect("matmul", "InvalidArgument", "matmul");
    expect("missing", "InvalidArgument", "tensor 99");
    expect("output", "InvalidArgument", "tensor 99");
    expect("slice", "InvalidArgument", "slice");
    expect("permute", "InvalidArgument", "permutation");
    expect("reshape", "InvalidArgument", "same number of elements");
    // Ids and axes are not wrapped or truncated into another tensor's id.
    expect("negativeId", "InvalidArgument", "got -1");
    expect("fractionId", "InvalidArgument", "got 0.5");
    expect("fractionAxis", "InvalidArgument", "axis");
    expect("negativePerm", "InvalidArgument", "perm entry");
    expect("symbolicParam", "InvalidProgram", "fixed shapes");
    // Failed calls left nothing behind: the input "x" and the param "p" only.
    assert_eq!(get(&results, "count").as_f64(), Some(2.0));
}
