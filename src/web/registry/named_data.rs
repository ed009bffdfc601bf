//! ExecuTorch's `NamedDataMap` for JavaScript: the class a JavaScript backend's `init` finds as
//! `context.namedDataMap` (the delegate's named-data scope, `DelegateInitOptions.namedDataScope`,
//! over the provider given to `Delegate.initWithParameters`), and that `NamedDataMap.open(provider,
//! scope)` makes over any provider scope. Semantics and error codes are the Rust map's
//! (`registry::NamedDataMap`); errors are `WebDelegateError`s with ExecuTorch codes.
//!
//! | upstream | JavaScript |
//! |---|---|
//! | `get_num_keys()` | `numKeys(): number` |
//! | `get_key(i)` | `key(i): string` (`InvalidArgument` for an index out of range or not an integer) |
//! | `get_tensor_layout(key)` | `tensorLayout(key): TensorLayout` |
//! | `get_data(key)` | `data(key): Promise<Uint8Array>` (a copy the caller owns) |
//! | `load_data_into(key, buffer, size)` | `loadInto(key, target: Uint8Array): Promise<void>` (`size` is `target.length`; bytes past the data are left as they were) |

use crate::error::Error;
use crate::registry::{NamedDataMap, TensorLayout};
use crate::web::edge::errors::to_js_error;
use crate::web::providers::handle::shared_provider_of;
use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use std::rc::Rc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/**
 * ExecuTorch's `TensorLayout` of one named tensor. Sizes are outermost first (a GGUF shape,
 * innermost first in the file, is reversed); `dimOrder` is `0..rank` (dense row-major).
 * `scalarType` is ExecuTorch's name (`'Float'`, `'Half'`, `'BFloat16'`, `'Long'`, ...) and
 * `scalarTypeCode` its number; both are null for a ggml block format (`blockFormat`: `'Q8_0'`,
 * `'Q4_K'`, ...), whose `nbytes` are the packed blocks. `fileDtype` is the file's own name.
 */
export interface TensorLayout {
  sizes: number[];
  dimOrder: number[];
  scalarType: string | null;
  scalarTypeCode: number | null;
  blockFormat: string | null;
  fileDtype: string;
  nbytes: number;
}
"#;

/// ExecuTorch's `NamedDataMap` over one provider scope, for JavaScript.
#[wasm_bindgen(js_name = NamedDataMap)]
pub struct JsNamedDataMap {
    map: Rc<NamedDataMap>,
}

impl JsNamedDataMap {
    /// Wraps `map`.
    pub fn new(map: NamedDataMap) -> Self {
        Self { map: Rc::new(map) }
    }
}

fn set(object: &Object, key: &str, value: &JsValue) -> JsResult<()> {
    Reflect::set(object, &JsValue::from_str(key), value)
        .map(|_| ())
        .map_err(|e| to_js_error(Error::internal(format!("cannot build {key}: {e:?}"))))
}

fn layout_to_js(layout: &TensorLayout) -> JsResult<JsValue> {
    let object = Object::new();
    let numbers = |values: Vec<f64>| -> JsValue {
        values
            .into_iter()
            .map(JsValue::from_f64)
            .collect::<Array>()
            .into()
    };
    set(
        &object,
        "sizes",
        &numbers(layout.sizes().iter().map(|&s| f64::from(s)).collect()),
    )?;
    set(
        &object,
        "dimOrder",
        &numbers(layout.dim_order().iter().map(|&d| f64::from(d)).collect()),
    )?;
    let scalar = layout.scalar_type();
    set(
        &object,
        "scalarType",
        &scalar.map_or(JsValue::NULL, |s| JsValue::from_str(s.name())),
    )?;
    set(
        &object,
        "scalarTypeCode",
        &scalar.map_or(JsValue::NULL, |s| JsValue::from_f64(f64::from(s.code()))),
    )?;
    set(
        &object,
        "blockFormat",
        &layout
            .block_format()
            .map_or(JsValue::NULL, |f| JsValue::from_str(f.name())),
    )?;
    set(
        &object,
        "fileDtype",
        &JsValue::from_str(layout.file_dtype()),
    )?;
    set(
        &object,
        "nbytes",
        &JsValue::from_f64(layout.nbytes() as f64),
    )?;
    Ok(object.into())
}

#[wasm_bindgen(js_class = NamedDataMap)]
impl JsNamedDataMap {
    /// The named data of `scope` in `provider` (an `HttpParameterProvider`, a
    /// `MemoryParameterProvider` or a `ParameterProviderList`); its keys are listed now.
    /// Throws `InvalidArgument` for any other provider, `NotFound` when it does not serve
    /// `scope`.
    pub fn open(
        #[wasm_bindgen(unchecked_param_type = "ParameterProvider")] provider: JsValue,
        scope: &str,
    ) -> JsResult<JsNamedDataMap> {
        let provider = shared_provider_of(&provider, "provider")
            .map_err(|status| to_js_error(Error::invalid_argument(status.message().to_owned())))?;
        NamedDataMap::new(provider, scope)
            .map(Self::new)
            .map_err(to_js_error)
    }

    /// The provider scope this map reads.
    #[wasm_bindgen(getter)]
    pub fn scope(&self) -> String {
        self.map.scope().to_owned()
    }

    /// How many keys the scope has (`NotImplemented` when the provider cannot list them).
    #[wasm_bindgen(js_name = numKeys)]
    pub fn num_keys(&self) -> JsResult<u32> {
        self.map.get_num_keys().map_err(to_js_error)
    }

    /// The key at `index` (`InvalidArgument` when out of range or not an integer).
    pub fn key(&self, index: f64) -> JsResult<String> {
        if index.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&index) {
            return Err(to_js_error(Error::invalid_argument(format!(
                "named data: index {index} is not an integer from 0 to 2^32 - 1"
            ))));
        }
        self.map
            .get_key(index as u32)
            .map(str::to_owned)
            .map_err(to_js_error)
    }

    /// The layout of `key` (`NotFound`, `NotImplemented`, `NotSupported`,
    /// `InvalidExternalData` as the Rust map says).
    #[wasm_bindgen(js_name = tensorLayout, unchecked_return_type = "TensorLayout")]
    pub fn tensor_layout(&self, key: &str) -> JsResult<JsValue> {
        let layout = self.map.get_tensor_layout(key).map_err(to_js_error)?;
        layout_to_js(&layout)
    }

    /// Resolves to a copy of all bytes of `key`.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn data(&self, key: String) -> Promise {
        let map = self.map.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let buffer = map.get_data(&key).await.map_err(to_js_error)?;
            Ok(Uint8Array::from(buffer.data()).into())
        })
    }

    /// Loads the bytes of `key` into the start of `target` (`InvalidArgument` when `target` is
    /// shorter than the data; bytes past the data keep their values).
    #[wasm_bindgen(js_name = loadInto, unchecked_return_type = "Promise<void>")]
    pub fn load_into(&self, key: String, target: Uint8Array) -> Promise {
        let map = self.map.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut bytes = target.to_vec();
            map.load_data_into(&key, &mut bytes)
                .await
                .map_err(to_js_error)?;
            // The caller may have detached or shrunk the buffer meanwhile (`copy_from` would
            // panic on a length mismatch).
            if target.length() as usize != bytes.len() {
                return Err(to_js_error(Error::invalid_state(format!(
                    "named data {key:?}: the target changed length while loading"
                ))));
            }
            target.copy_from(&bytes);
            Ok(JsValue::UNDEFINED)
        })
    }
}
