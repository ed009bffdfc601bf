//! The JavaScript edge, tested inside headless Chromium (wasm-bindgen-test): errors, value
//! conversions, and backends written in JavaScript running through the Rust registry and loader.
//!
//! All tests of this file share one wasm instance and therefore one registry (16 slots, no
//! unregister): each test registers under its own name, and fewer than 16 in total.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod web_script;

use js_sys::{Array, Float32Array, Int32Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use webdelegate::registry::{
    self, BackendInitContext, BackendOption, FreeableBuffer, LoadedDelegate, OptionValue,
};
use webdelegate::web::edge::convert;
use webdelegate::web::registry::api;
use webdelegate::{EValue, ErrorCode, ScalarType, Tensor, TensorData};

wasm_bindgen_test_configure!(run_in_browser);

const SCRIPT: &str = r#"
function makeScaleBackend(log) {
  // A backend that multiplies a float32 tensor by the factor in compile spec "scale".
  return {
    isAvailable() { log.available = (log.available || 0) + 1; return true; },
    async init(processed, compileSpecs, context) {
      log.inits = (log.inits || 0) + 1;
      log.methodName = context.methodName;
      log.runtimeSpecs = context.runtimeSpecs;
      log.blob = Array.from(processed);
      const spec = compileSpecs.find((s) => s.key === 'scale');
      if (!spec) { throw { code: 'DelegateInvalidCompatibility', message: 'no scale spec' }; }
      return { scale: Number(new TextDecoder().decode(spec.value)), id: log.inits };
    },
    async execute(handle, args, context) {
      log.executes = (log.executes || 0) + 1;
      log.executeMethod = context.methodName;
      const input = args[0];
      args[1] = { tag: 'Tensor', dtype: 'float32', shape: input.shape.slice(),
                  data: input.data.map((v) => v * handle.scale) };
    },
    setOption(options) {
      for (const o of options) {
        if (o.key === 'locked') { throw { code: 'InvalidState', message: 'options are locked' }; }
        if (o.key === 'boom') { throw new TypeError('kaboom'); }
        log[o.key] = o.value;
      }
    },
    getOption(options) {
      return options.map((o) => ({ key: o.key, value: o.key in log ? log[o.key] : o.value }));
    },
    destroy(handle) { log.destroyed = (log.destroyed || []).concat([handle.id]); },
  };
}

function makeLyingBackend(mode) {
  return {
    isAvailable() { return true; },
    init() { return 1; },
    execute(handle, args) {
      if (mode === 'short') {
        args[1] = { tag: 'Tensor', dtype: 'float32', shape: [4], data: new Float32Array(3) };
      } else if (mode === 'count') {
        return [args[0]];
      } else if (mode === 'slow') {
        return new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
  };
}
"#;

thread_local! {
    static JS: web_script::Script = web_script::Script::new(SCRIPT, &["makeScaleBackend", "makeLyingBackend"]);
}

fn make_scale_backend(log: &Object) -> JsValue {
    JS.with(|js| js.call("makeScaleBackend", &[log.into()]))
}

fn make_lying_backend(mode: &str) -> JsValue {
    JS.with(|js| js.call("makeLyingBackend", &[mode.into()]))
}

fn prop(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(key)).unwrap()
}

fn assert_js_error(error: &JsValue, code: ErrorCode) {
    assert!(
        error.is_instance_of::<js_sys::Error>(),
        "not an Error: {error:?}"
    );
    assert_eq!(prop(error, "name").as_string().unwrap(), "WebDelegateError");
    assert_eq!(
        prop(error, "code").as_string().unwrap(),
        code.name(),
        "{error:?}"
    );
    assert_eq!(
        prop(error, "codeValue").as_f64().unwrap(),
        f64::from(code as u32)
    );
}

fn float_tensor(values: &[f32]) -> EValue {
    EValue::Tensor(Tensor::from_f32(vec![values.len()], values.to_vec()).unwrap())
}

fn scale_specs(scale: &str) -> Vec<webdelegate::registry::CompileSpec> {
    vec![webdelegate::registry::CompileSpec::new(
        "scale",
        scale.as_bytes(),
    )]
}

#[wasm_bindgen_test]
fn errors_are_web_delegate_errors_with_codes() {
    let error = api::register_backend("bad-object", JsValue::from(1)).unwrap_err();
    assert_js_error(&error, ErrorCode::InvalidArgument);
    let missing = api::is_backend_available("nobody-here").unwrap_err();
    assert_js_error(&missing, ErrorCode::NotFound);
    assert!(
        prop(&missing, "message")
            .as_string()
            .unwrap()
            .contains("nobody-here")
    );
    let index = api::backend_name(1e6).unwrap_err();
    assert_js_error(&index, ErrorCode::InvalidArgument);
    assert_js_error(
        &api::backend_name(-1.0).unwrap_err(),
        ErrorCode::InvalidArgument,
    );
    assert_js_error(
        &api::backend_name(0.5).unwrap_err(),
        ErrorCode::InvalidArgument,
    );
}

#[wasm_bindgen_test]
fn every_dtype_round_trips_through_js() {
    let tensors = [
        TensorData::Float32(vec![1.5, -2.0, 3.25, 0.0, f32::MAX, f32::MIN_POSITIVE]),
        TensorData::Float64(vec![1e300, -0.5, 2.0, 3.0, 4.0, 5.0]),
        TensorData::Int32(vec![i32::MIN, -1, 0, 1, 2, i32::MAX]),
        TensorData::Int64(vec![i64::MIN, -1, 0, 1, 1 << 60, i64::MAX]),
        TensorData::UInt8(vec![0, 1, 2, 254, 255, 7]),
        TensorData::Bool(vec![0, 1, 1, 0, 1, 0]),
    ];
    for data in tensors {
        let value = EValue::Tensor(Tensor::new(vec![2, 3], data).unwrap());
        let js = convert::evalue_to_js(&value).unwrap();
        assert_eq!(convert::evalue_from_js(&js).unwrap(), value);
    }
    for value in [
        EValue::None,
        EValue::Int(-42),
        EValue::Int(i64::MAX),
        EValue::Double(0.125),
        EValue::Bool(true),
        EValue::String("héllo".into()),
    ] {
        let js = convert::evalue_to_js(&value).unwrap();
        assert_eq!(convert::evalue_from_js(&js).unwrap(), value);
    }
    let big = convert::evalue_to_js(&EValue::Int(i64::MAX)).unwrap();
    assert!(
        prop(&big, "value").is_bigint(),
        "unsafe integers cross as BigInt"
    );
}

fn js_tensor(dtype: &str, shape: &[f64], data: &JsValue) -> JsValue {
    let object = Object::new();
    Reflect::set(&object, &"tag".into(), &"Tensor".into()).unwrap();
    Reflect::set(&object, &"dtype".into(), &dtype.into()).unwrap();
    let shape: Array = shape.iter().map(|&d| JsValue::from_f64(d)).collect();
    Reflect::set(&object, &"shape".into(), &shape).unwrap();
    Reflect::set(&object, &"data".into(), data).unwrap();
    object.into()
}

#[wasm_bindgen_test]
fn inconsistent_js_tensors_are_refused() {
    let six = Float32Array::new_with_length(6);
    let cases = [
        js_tensor("float32", &[2.0, 4.0], &six),
        js_tensor("float32", &[-1.0, -6.0], &six),
        js_tensor("float32", &[2.5, 2.4], &six),
        js_tensor("float32", &[4294967296.0, 4294967296.0, 0.0], &six),
        js_tensor("int32", &[6.0], &six),
        js_tensor("float16", &[6.0], &six),
        js_tensor("float32", &[6.0], &Array::new()),
        js_tensor("bool", &[2.0], &Uint8Array::from(&[1u8, 2][..])),
    ];
    for case in &cases {
        let error = convert::evalue_from_js(case).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::InvalidArgument,
            "{case:?}: {error}"
        );
    }
    let tagless = Object::new();
    assert_eq!(
        convert::evalue_from_js(&tagless).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        convert::evalue_from_js(&JsValue::from_str("Tensor"))
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    let ok = js_tensor("int32", &[2.0, 1.0], &Int32Array::from(&[5, 6][..]));
    let value = convert::evalue_from_js(&ok).unwrap();
    assert_eq!(value.as_tensor().unwrap().dtype(), ScalarType::Int32);
}

fn js_options(pairs: &[(&str, JsValue)]) -> JsValue {
    pairs
        .iter()
        .map(|(key, value)| {
            let object = Object::new();
            Reflect::set(&object, &"key".into(), &(*key).into()).unwrap();
            Reflect::set(&object, &"value".into(), value).unwrap();
            JsValue::from(object)
        })
        .collect::<Array>()
        .into()
}

#[wasm_bindgen_test]
fn options_cross_with_their_limits() {
    let parsed = convert::options_from_js(&js_options(&[
        ("flag", true.into()),
        ("count", 3.0.into()),
        ("name", "gpu".into()),
        (&"k".repeat(63), 1.0.into()),
        ("min", (-9_223_372_036_854_775_808.0).into()),
        ("big", 4_611_686_018_427_387_904.0.into()),
        ("bigint", js_sys::BigInt::from(i64::MAX).into()),
        ("text", "v".repeat(255).into()),
    ]))
    .unwrap();
    assert_eq!(parsed[0].value(), &OptionValue::Bool(true));
    assert_eq!(parsed[1].value(), &OptionValue::Int(3));
    assert_eq!(parsed[2].value(), &OptionValue::String("gpu".into()));
    assert_eq!(parsed[4].value(), &OptionValue::Int(i64::MIN));
    assert_eq!(parsed[5].value(), &OptionValue::Int(1 << 62));
    assert_eq!(parsed[6].value(), &OptionValue::Int(i64::MAX));
    let back = convert::options_from_js(&convert::options_to_js(&parsed).unwrap()).unwrap();
    assert_eq!(back, parsed);
    for bad in [
        js_options(&[("fraction", 3.5.into())]),
        js_options(&[("too-big", 9_223_372_036_854_775_808.0.into())]),
        js_options(&[("nan", f64::NAN.into())]),
        js_options(&[(&"k".repeat(64), 1.0.into())]),
        js_options(&[("text", "v".repeat(256).into())]),
        js_options(&[("null", JsValue::NULL)]),
        JsValue::from_str("not an array"),
    ] {
        let error = convert::options_from_js(&bad).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{bad:?}: {error}");
    }
}

#[wasm_bindgen_test]
async fn js_backend_runs_through_the_rust_loader() {
    let log = Object::new();
    api::register_backend("web-edge-scale", make_scale_backend(&log)).unwrap();
    assert!(api::list_backends().contains(&"web-edge-scale".to_owned()));
    assert!(api::is_backend_available("web-edge-scale").unwrap());

    let context = BackendInitContext::new()
        .with_method_name("forward")
        .with_runtime_specs(vec![BackendOption::new("precision", "f32").unwrap()]);
    let mut delegate = LoadedDelegate::init(
        "web-edge-scale",
        FreeableBuffer::new(vec![9, 8, 7]),
        &scale_specs("2.5"),
        &context,
    )
    .await
    .unwrap();
    assert_eq!(prop(&log, "methodName").as_string().unwrap(), "forward");
    let blob: Vec<f64> = Array::from(&prop(&log, "blob"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(blob, [9.0, 8.0, 7.0]);
    let specs = convert::options_from_js(&prop(&log, "runtimeSpecs")).unwrap();
    assert_eq!(specs[0].value(), &OptionValue::String("f32".into()));

    for round in 1..=3 {
        let mut args = vec![float_tensor(&[1.0, -2.0, round as f32]), EValue::None];
        delegate.execute(&mut args).await.unwrap();
        let out = args[1].as_tensor().unwrap().as_f32().unwrap();
        assert_eq!(out, &[2.5, -5.0, 2.5 * round as f32]);
    }
    assert_eq!(prop(&log, "executes").as_f64().unwrap(), 3.0);
    assert!(prop(&log, "destroyed").is_undefined());
    drop(delegate);
    let destroyed: Vec<f64> = Array::from(&prop(&log, "destroyed"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(
        destroyed,
        [1.0],
        "destroy got the handle init returned, once"
    );
}

#[wasm_bindgen_test]
async fn js_backend_errors_keep_their_codes() {
    let log = Object::new();
    api::register_backend("web-edge-errors", make_scale_backend(&log)).unwrap();
    let no_spec = LoadedDelegate::init(
        "web-edge-errors",
        FreeableBuffer::new(vec![]),
        &[],
        &BackendInitContext::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(no_spec.code(), ErrorCode::DelegateInvalidCompatibility);
    assert!(
        prop(&log, "destroyed").is_undefined(),
        "failed init is never destroyed"
    );

    let locked = registry::set_option(
        "web-edge-errors",
        &[BackendOption::new("locked", true).unwrap()],
    )
    .unwrap_err();
    assert_eq!(locked.code(), ErrorCode::InvalidState);
    assert_eq!(locked.message(), "options are locked");
    let boom = registry::set_option("web-edge-errors", &[BackendOption::new("boom", 1).unwrap()])
        .unwrap_err();
    assert_eq!(boom.code(), ErrorCode::Internal);
    assert!(boom.message().contains("kaboom"), "{boom}");

    registry::set_option(
        "web-edge-errors",
        &[BackendOption::new("level", 7).unwrap()],
    )
    .unwrap();
    let mut wanted = [
        BackendOption::new("level", 0).unwrap(),
        BackendOption::new("other", "x").unwrap(),
    ];
    registry::get_option("web-edge-errors", &mut wanted).unwrap();
    assert_eq!(wanted[0].value(), &OptionValue::Int(7));
    assert_eq!(wanted[1].value(), &OptionValue::String("x".into()));
}

#[wasm_bindgen_test]
async fn lying_backends_cannot_corrupt_outputs() {
    api::register_backend("web-edge-short", make_lying_backend("short")).unwrap();
    api::register_backend("web-edge-count", make_lying_backend("count")).unwrap();
    for name in ["web-edge-short", "web-edge-count"] {
        let mut delegate = LoadedDelegate::init(
            name,
            FreeableBuffer::new(vec![]),
            &[],
            &BackendInitContext::new(),
        )
        .await
        .unwrap();
        let original = vec![float_tensor(&[1.0]), float_tensor(&[0.0, 0.0, 0.0, 0.0])];
        let mut args = original.clone();
        let error = delegate.execute(&mut args).await.unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{name}: {error}");
        assert_eq!(args, original, "{name}: args untouched on error");
    }
}

#[wasm_bindgen_test]
async fn delegate_class_lifecycle_and_states() {
    api::register_backend("web-edge-slow", make_lying_backend("slow")).unwrap();
    let delegate = api::Delegate::init(
        "web-edge-slow".into(),
        Uint8Array::new_with_length(0).into(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(delegate.backend_name(), "web-edge-slow");
    let args: JsValue = convert::evalues_to_js(&[EValue::Int(1)]).unwrap().into();
    let first = delegate.execute(args.clone());
    let second = JsFuture::from(delegate.execute(args.clone()))
        .await
        .unwrap_err();
    assert_js_error(&second, ErrorCode::InvalidState);
    let result = JsFuture::from(first).await.unwrap();
    assert_eq!(convert::evalues_from_js(&result).unwrap(), [EValue::Int(1)]);

    let pending = delegate.execute(args.clone());
    delegate.destroy();
    assert!(
        !delegate.destroyed(),
        "destroy waits for the running execute"
    );
    JsFuture::from(pending).await.unwrap();
    assert!(delegate.destroyed());
    let after = JsFuture::from(delegate.execute(args)).await.unwrap_err();
    assert_js_error(&after, ErrorCode::InvalidState);
    delegate.destroy();

    let missing = api::Delegate::init(
        "web-edge-nobody".into(),
        Uint8Array::new_with_length(0).into(),
        None,
    )
    .await
    .err()
    .unwrap();
    assert_js_error(&missing, ErrorCode::NotFound);
    // A program that is not bytes is refused with a code, not a TypeError.
    let not_bytes = api::Delegate::init("web-edge-slow".into(), JsValue::from_str("blob"), None)
        .await
        .err()
        .unwrap();
    assert_js_error(&not_bytes, ErrorCode::InvalidArgument);
}
