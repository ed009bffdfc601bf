//! Conversions between JavaScript values and the runtime's Rust values.
//!
//! Input from JavaScript is untrusted: every shape is checked against its data with
//! overflow-safe arithmetic *before* anything is copied, so a lying shape costs an error, not an
//! allocation. Tensors cross as typed arrays (`Float32Array` for `float32`, `BigInt64Array` for
//! `int64`, ...), copied once.
//!
//! JavaScript shapes:
//! - EValue: `{tag: 'None'}`, `{tag: 'Int', value}`, `{tag: 'Double', value}`,
//!   `{tag: 'Bool', value}`, `{tag: 'String', value}`, `{tag: 'Tensor', dtype, shape, data}`.
//! - Option: `{key, value}` with a boolean, integral number or string value.
//! - Compile spec: `{key, value}` with a `Uint8Array` or string value.

use crate::error::{Error, Result};
use crate::evalue::{EValue, ScalarType, Tensor, TensorData, element_count};
use crate::registry::{BackendOption, CompileSpec, OptionValue};
use crate::web::edge::fields::MAX_SAFE_INTEGER;
use js_sys::{
    Array, BigInt64Array, Float32Array, Float64Array, Int32Array, Object, Reflect, Uint8Array,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

fn get(object: &JsValue, key: &str) -> Result<JsValue> {
    if !object.is_object() {
        return Err(Error::invalid_argument(format!(
            "expected an object with {key:?}, got {object:?}"
        )));
    }
    Reflect::get(object, &JsValue::from_str(key))
        .map_err(|e| Error::invalid_argument(format!("cannot read {key:?}: {e:?}")))
}

fn set(object: &Object, key: &str, value: &JsValue) -> Result<()> {
    Reflect::set(object, &JsValue::from_str(key), value)
        .map(|_| ())
        .map_err(|e| Error::internal(format!("cannot set {key:?}: {e:?}")))
}

/// The elements of a JS array, or `InvalidArgument` naming `what`.
pub fn array_items(value: &JsValue, what: &str) -> Result<Vec<JsValue>> {
    if !Array::is_array(value) {
        return Err(Error::invalid_argument(format!(
            "{what} must be an array, got {}",
            crate::web::edge::fields::js_text(value)
        )));
    }
    Ok(Array::from(value).iter().collect())
}

/// A JS number or BigInt that is an integer, as `i64`.
pub fn integer_from_js(value: &JsValue, what: &str) -> Result<i64> {
    if let Some(number) = value.as_f64() {
        if number.fract() == 0.0 && number.abs() <= MAX_SAFE_INTEGER {
            return Ok(number as i64);
        }
        return Err(Error::invalid_argument(format!(
            "{what} must be an integer within ±2^53, got {number}"
        )));
    }
    if value.is_bigint() {
        return i64::try_from(js_sys::BigInt::from(value.clone()))
            .map_err(|_| Error::invalid_argument(format!("{what} does not fit in 64 bits")));
    }
    Err(Error::invalid_argument(format!(
        "{what} must be an integer, got {}",
        crate::web::edge::fields::js_text(value)
    )))
}

/// An `i64` as a JS number when it is exactly representable, else as a BigInt.
pub fn integer_to_js(value: i64) -> JsValue {
    if (value as f64).abs() <= MAX_SAFE_INTEGER {
        JsValue::from_f64(value as f64)
    } else {
        js_sys::BigInt::from(value).into()
    }
}

fn shape_from_js(value: &JsValue) -> Result<Vec<usize>> {
    array_items(value, "tensor shape")?
        .iter()
        .map(|dim| {
            let dim = integer_from_js(dim, "tensor dimension")?;
            usize::try_from(dim).map_err(|_| {
                Error::invalid_argument(format!("tensor dimension {dim} is negative or too large"))
            })
        })
        .collect()
}

fn typed<T: JsCast>(data: &JsValue, dtype: ScalarType, class: &str) -> Result<T> {
    data.clone().dyn_into::<T>().map_err(|_| {
        Error::invalid_argument(format!(
            "{dtype} tensor data must be a {class}, got {data:?}"
        ))
    })
}

fn check_length(dtype: ScalarType, shape: &[usize], length: u32) -> Result<()> {
    let expected = element_count(shape)?;
    if usize::try_from(length).ok() != Some(expected) {
        return Err(Error::invalid_argument(format!(
            "{dtype} tensor of shape {shape:?} needs {expected} elements, got {length}"
        )));
    }
    Ok(())
}

fn tensor_from_js(value: &JsValue) -> Result<Tensor> {
    let dtype_name = get(value, "dtype")?
        .as_string()
        .ok_or_else(|| Error::invalid_argument("tensor dtype must be a string"))?;
    let dtype = ScalarType::from_name(&dtype_name)?;
    let shape = shape_from_js(&get(value, "shape")?)?;
    let data = get(value, "data")?;
    let data = match dtype {
        ScalarType::Float32 => {
            let array: Float32Array = typed(&data, dtype, "Float32Array")?;
            check_length(dtype, &shape, array.length())?;
            TensorData::Float32(array.to_vec())
        }
        ScalarType::Float64 => {
            let array: Float64Array = typed(&data, dtype, "Float64Array")?;
            check_length(dtype, &shape, array.length())?;
            TensorData::Float64(array.to_vec())
        }
        ScalarType::Int32 => {
            let array: Int32Array = typed(&data, dtype, "Int32Array")?;
            check_length(dtype, &shape, array.length())?;
            TensorData::Int32(array.to_vec())
        }
        ScalarType::Int64 => {
            let array: BigInt64Array = typed(&data, dtype, "BigInt64Array")?;
            check_length(dtype, &shape, array.length())?;
            TensorData::Int64(array.to_vec())
        }
        ScalarType::UInt8 | ScalarType::Bool => {
            let array: Uint8Array = typed(&data, dtype, "Uint8Array")?;
            check_length(dtype, &shape, array.length())?;
            let bytes = array.to_vec();
            if dtype == ScalarType::Bool {
                if bytes.iter().any(|&b| b > 1) {
                    return Err(Error::invalid_argument("bool tensor data must be 0 or 1"));
                }
                TensorData::Bool(bytes)
            } else {
                TensorData::UInt8(bytes)
            }
        }
    };
    Tensor::new(shape, data)
}

fn tensor_to_js(tensor: &Tensor) -> Result<JsValue> {
    let object = Object::new();
    set(&object, "tag", &JsValue::from_str("Tensor"))?;
    set(&object, "dtype", &JsValue::from_str(tensor.dtype().name()))?;
    let shape: Array = tensor
        .shape()
        .iter()
        .map(|&d| JsValue::from_f64(d as f64))
        .collect();
    set(&object, "shape", &shape)?;
    let data: JsValue = match tensor.data() {
        TensorData::Float32(values) => Float32Array::from(values.as_slice()).into(),
        TensorData::Float64(values) => Float64Array::from(values.as_slice()).into(),
        TensorData::Int32(values) => Int32Array::from(values.as_slice()).into(),
        TensorData::Int64(values) => BigInt64Array::from(values.as_slice()).into(),
        TensorData::UInt8(values) | TensorData::Bool(values) => {
            Uint8Array::from(values.as_slice()).into()
        }
    };
    set(&object, "data", &data)?;
    Ok(object.into())
}

/// An [`EValue`] from its tagged JavaScript object.
///
/// # Errors
/// `InvalidArgument` for an unknown tag, a value of the wrong type or an inconsistent tensor.
pub fn evalue_from_js(value: &JsValue) -> Result<EValue> {
    let tag = get(value, "tag")?
        .as_string()
        .ok_or_else(|| Error::invalid_argument("EValue tag must be a string"))?;
    let payload = || get(value, "value");
    Ok(match tag.as_str() {
        "None" => EValue::None,
        "Int" => EValue::Int(integer_from_js(&payload()?, "Int value")?),
        "Double" => EValue::Double(
            payload()?
                .as_f64()
                .ok_or_else(|| Error::invalid_argument("Double value must be a number"))?,
        ),
        "Bool" => EValue::Bool(
            payload()?
                .as_bool()
                .ok_or_else(|| Error::invalid_argument("Bool value must be a boolean"))?,
        ),
        "String" => EValue::String(
            payload()?
                .as_string()
                .ok_or_else(|| Error::invalid_argument("String value must be a string"))?,
        ),
        "Tensor" => EValue::Tensor(tensor_from_js(value)?),
        other => {
            return Err(Error::invalid_argument(format!(
                "unknown EValue tag {other:?}"
            )));
        }
    })
}

/// The tagged JavaScript object for an [`EValue`].
///
/// # Errors
/// `Internal` only if the JS engine refuses to set a property.
pub fn evalue_to_js(value: &EValue) -> Result<JsValue> {
    let scalar = |tag: &str, payload: JsValue| -> Result<JsValue> {
        let object = Object::new();
        set(&object, "tag", &JsValue::from_str(tag))?;
        if !payload.is_undefined() {
            set(&object, "value", &payload)?;
        }
        Ok(object.into())
    };
    match value {
        EValue::None => scalar("None", JsValue::UNDEFINED),
        EValue::Int(number) => scalar("Int", integer_to_js(*number)),
        EValue::Double(number) => scalar("Double", JsValue::from_f64(*number)),
        EValue::Bool(flag) => scalar("Bool", JsValue::from_bool(*flag)),
        EValue::String(text) => scalar("String", JsValue::from_str(text)),
        EValue::Tensor(tensor) => tensor_to_js(tensor),
    }
}

/// A list of EValues from a JS array.
///
/// # Errors
/// `InvalidArgument` naming the first bad element.
pub fn evalues_from_js(value: &JsValue) -> Result<Vec<EValue>> {
    array_items(value, "args")?
        .iter()
        .enumerate()
        .map(|(index, item)| {
            evalue_from_js(item)
                .map_err(|e| Error::new(e.code(), format!("args[{index}]: {}", e.message())))
        })
        .collect()
}

/// A JS array of EValues.
///
/// # Errors
/// As [`evalue_to_js`].
pub fn evalues_to_js(values: &[EValue]) -> Result<Array> {
    values.iter().map(evalue_to_js).collect()
}

/// An option as JavaScript writes it, before the runtime's limits are applied.
#[derive(serde::Deserialize)]
struct RawOption {
    key: String,
    value: RawOptionValue,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum RawOptionValue {
    Bool(bool),
    Int(i64),
    Number(f64),
    String(String),
}

/// Smallest and one past the largest `i64`, as exact doubles.
const I64_MIN_F64: f64 = -9_223_372_036_854_775_808.0;
const I64_END_F64: f64 = 9_223_372_036_854_775_808.0;

fn option_value(key: &str, raw: RawOptionValue) -> Result<OptionValue> {
    Ok(match raw {
        RawOptionValue::Bool(flag) => OptionValue::Bool(flag),
        RawOptionValue::Int(number) => OptionValue::Int(number),
        RawOptionValue::Number(number)
            if number.fract() == 0.0 && (I64_MIN_F64..I64_END_F64).contains(&number) =>
        {
            // Exact: an integral double in [-2^63, 2^63) is an i64.
            OptionValue::Int(number as i64)
        }
        RawOptionValue::Number(number) => {
            return Err(Error::invalid_argument(format!(
                "option {key:?}: {number} is not an integer in the 64-bit range"
            )));
        }
        RawOptionValue::String(text) => OptionValue::String(text),
    })
}

/// Backend options from a JS array of `{key, value}` (value: boolean, integral number or
/// BigInt in the `i64` range, or string).
///
/// # Errors
/// `InvalidArgument` naming the option for a bad key, value type, non-integral number or
/// over-long string.
pub fn options_from_js(value: &JsValue) -> Result<Vec<BackendOption>> {
    array_items(value, "options")?
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let raw: RawOption = serde_wasm_bindgen::from_value(item).map_err(|_| {
                Error::invalid_argument(format!(
                    "options[{index}] must be {{key: string, value: boolean | integer | string}}"
                ))
            })?;
            let value = option_value(&raw.key, raw.value)?;
            BackendOption::new(raw.key, value)
                .map_err(|e| Error::invalid_argument(format!("options[{index}]: {}", e.message())))
        })
        .collect()
}

/// A JS array of `{key, value}`; integers outside ±2^53 become BigInts so they stay exact.
///
/// # Errors
/// `Internal` only if the JS engine refuses to set a property.
pub fn options_to_js(options: &[BackendOption]) -> Result<JsValue> {
    let array = Array::new();
    for option in options {
        let object = Object::new();
        set(&object, "key", &JsValue::from_str(option.key()))?;
        let value = match option.value() {
            OptionValue::Bool(flag) => JsValue::from_bool(*flag),
            OptionValue::Int(number) => integer_to_js(*number),
            OptionValue::String(text) => JsValue::from_str(text),
        };
        set(&object, "value", &value)?;
        array.push(&object);
    }
    Ok(array.into())
}

/// Compile specs from a JS array of `{key, value}` (value: `Uint8Array` or string).
///
/// # Errors
/// `InvalidArgument` for a missing key or a value of another type.
pub fn compile_specs_from_js(value: &JsValue) -> Result<Vec<CompileSpec>> {
    array_items(value, "compileSpecs")?
        .iter()
        .map(|spec| {
            let key = get(spec, "key")?
                .as_string()
                .ok_or_else(|| Error::invalid_argument("compile spec key must be a string"))?;
            let raw = get(spec, "value")?;
            let bytes = if let Some(text) = raw.as_string() {
                text.into_bytes()
            } else if let Some(array) = raw.dyn_ref::<Uint8Array>() {
                array.to_vec()
            } else {
                return Err(Error::invalid_argument(format!(
                    "compile spec {key:?} value must be a Uint8Array or string"
                )));
            };
            Ok(CompileSpec::new(key, bytes))
        })
        .collect()
}

/// A JS array of `{key, value: Uint8Array}`.
///
/// # Errors
/// `Internal` only if the JS engine refuses to set a property.
pub fn compile_specs_to_js(specs: &[CompileSpec]) -> Result<Array> {
    specs
        .iter()
        .map(|spec| {
            let object = Object::new();
            set(&object, "key", &JsValue::from_str(&spec.key))?;
            set(&object, "value", &Uint8Array::from(spec.value.as_slice()))?;
            Ok(JsValue::from(object))
        })
        .collect()
}
