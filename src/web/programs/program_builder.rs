//! `ProgramBuilder` for JavaScript: the Rust [`crate::program::ProgramBuilder`] with JS-friendly
//! arguments. Shapes are arrays whose entries are extents (non-negative safe integers) or
//! symbol names (strings; a new name declares the symbol). Dtypes are `"float32"`, `"int32"`,
//! `"int64"`, `"uint8"` (or `"f32"`, `"i32"`, `"i64"`, `"u8"`), and for parameters a ggml weight
//! format (`"f16"`, `"bf16"`, `"q4_0"`, `"q5_0"`, `"q8_0"`, `"q4_k"`, `"q5_k"`, `"q6_k"`). Every op method returns the id of
//! the tensor it creates; every failure throws a `WebDelegateError` (`InvalidArgument` for bad
//! arguments, `InvalidProgram` from `encode` for a program that does not validate).
//!
//! ```js
//! const b = new ProgramBuilder();
//! const x = b.input('x', 'float32', ['batch', 384]);
//! const w = b.param('w', 'float32', [384, 384], 'model', 'dense.weight');
//! b.output(b.gelu(b.matmul(x, w, undefined, false, true)));
//! const blob = b.encode(); // Uint8Array for Delegate.init
//! ```

use crate::error::{Error, Result};
use crate::program::{self, DType, Dim, ProgramBuilder as RustBuilder, TensorId};
use crate::web::edge::errors::to_js_error;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Builds a program blob from JavaScript.
#[wasm_bindgen(js_name = ProgramBuilder)]
#[derive(Default)]
pub struct JsProgramBuilder {
    inner: RustBuilder,
}

fn js<T>(result: Result<T>) -> JsResult<T> {
    result.map_err(to_js_error)
}

/// A program dtype from its JS name.
///
/// # Errors
/// `InvalidArgument` for an unknown name.
pub fn dtype_from_name(name: &str) -> Result<DType> {
    match name {
        "float32" | "f32" => Ok(DType::F32),
        "int32" | "i32" => Ok(DType::I32),
        "int64" | "i64" => Ok(DType::I64),
        "uint8" | "u8" => Ok(DType::U8),
        other => DType::from_name(&other.to_ascii_lowercase()).ok_or_else(|| {
            Error::invalid_argument(format!(
                "unknown dtype {other:?}; expected \"float32\", \"int32\", \"int64\", \"uint8\" \
                 or, for parameters, a ggml weight format (\"f16\", \"bf16\", \"q4_0\", \"q5_0\", \
                 \"q8_0\", \"q4_k\", \"q5_k\", \"q6_k\")"
            ))
        }),
    }
}

fn safe_integer(value: f64, what: &str) -> Result<u64> {
    if value.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&value) {
        Ok(value as u64)
    } else {
        Err(Error::invalid_argument(format!(
            "{what} must be a non-negative integer, got {value}"
        )))
    }
}

/// A tensor id from JavaScript: a number that is a non-negative integer within `u32` (so `-1`
/// or `1.5` are refused instead of wrapping or truncating to another tensor).
fn tensor_arg(value: f64, what: &str) -> Result<TensorId> {
    index_arg(value, what)
}

/// An axis, permutation entry or other small index from JavaScript (see [`tensor_arg`]).
fn index_arg(value: f64, what: &str) -> Result<u32> {
    if value.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&value) {
        Ok(value as u32)
    } else {
        Err(Error::invalid_argument(format!(
            "{what} must be a non-negative integer below 2^32, got {value}"
        )))
    }
}

#[wasm_bindgen(js_class = ProgramBuilder)]
impl JsProgramBuilder {
    /// An empty program.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    fn dim(&mut self, entry: &JsValue, axis: usize) -> Result<Dim> {
        if let Some(name) = entry.as_string() {
            return Ok(self.inner.symbol(&name));
        }
        match entry.as_f64() {
            Some(value) => safe_integer(value, &format!("shape entry {axis}")).map(Dim::Fixed),
            None => Err(Error::invalid_argument(format!(
                "shape entry {axis} must be a number or a symbol name"
            ))),
        }
    }

    fn shape(&mut self, shape: &JsValue) -> Result<Vec<Dim>> {
        if !Array::is_array(shape) {
            return Err(Error::invalid_argument(
                "a shape must be an array of numbers and symbol names",
            ));
        }
        Array::from(shape)
            .iter()
            .enumerate()
            .map(|(axis, entry)| self.dim(&entry, axis))
            .collect()
    }

    fn check_tensor(&self, id: TensorId) -> Result<()> {
        if self.inner.shape_of(id).is_some() {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "tensor {id} does not exist"
            )))
        }
    }

    /// Declares the symbolic dim `name` (e.g. `"batch"`) and returns its index.
    pub fn symbol(&mut self, name: &str) -> u32 {
        match self.inner.symbol(name) {
            Dim::Symbol(index) => index,
            Dim::Fixed(_) => 0,
        }
    }

    /// Declares an input (inputs are passed to `execute` in declaration order).
    pub fn input(
        &mut self,
        name: &str,
        dtype: &str,
        #[wasm_bindgen(unchecked_param_type = "(number | string)[]")] shape: JsValue,
    ) -> JsResult<u32> {
        let dtype = js(dtype_from_name(dtype))?;
        let shape = js(self.shape(&shape))?;
        Ok(self.inner.input(name, dtype, shape))
    }

    /// Declares a parameter fetched from the provider (`key` in `scope`); its shape must be fixed.
    pub fn param(
        &mut self,
        name: &str,
        dtype: &str,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        scope: &str,
        key: &str,
    ) -> JsResult<u32> {
        let dtype = js(dtype_from_name(dtype))?;
        let shape = js(self.shape(&shape))?;
        Ok(self.inner.param(name, dtype, shape, scope, key))
    }

    /// Declares a state tensor (zero at init, kept across executions, written in place by the
    /// op that declares it, e.g. `attention`'s KV cache): a fixed shape, the maximum it needs.
    pub fn state(
        &mut self,
        name: &str,
        dtype: &str,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<u32> {
        let dtype = js(dtype_from_name(dtype))?;
        let shape = js(self.shape(&shape))?;
        Ok(self.inner.state(name, dtype, shape))
    }

    /// Causal attention over a KV cache: stores `k` (`[S, Hkv, D]`) and `v` (`[S, Hkv, Dv]`)
    /// into the state tensors `kCache` (`[C, Hkv, D]`) and `vCache` at `positions` (i32
    /// `[S]`), then attends `q` (`[S, Hq, D]`) over cache positions up to each row's own
    /// (the last `window` of them when `window > 0`), logits `scale * q.k`, soft-capped when
    /// `softcap > 0`. Returns `[S, Hq, Dv]`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &mut self,
        q: f64,
        k: f64,
        v: f64,
        #[wasm_bindgen(js_name = kCache)] k_cache: f64,
        #[wasm_bindgen(js_name = vCache)] v_cache: f64,
        positions: f64,
        scale: f32,
        window: u32,
        softcap: f32,
    ) -> JsResult<u32> {
        let op = crate::program::ops::Attention {
            q: js(tensor_arg(q, "q"))?,
            k: js(tensor_arg(k, "k"))?,
            v: js(tensor_arg(v, "v"))?,
            k_cache: js(tensor_arg(k_cache, "kCache"))?,
            v_cache: js(tensor_arg(v_cache, "vCache"))?,
            positions: js(tensor_arg(positions, "positions"))?,
            scale,
            window,
            softcap,
            out: 0,
        };
        js(self
            .inner
            .push(|out| crate::program::ops::Attention { out, ..op }))
    }

    /// Embedding lookup: rows of `table` (`[V, H]`) picked by `ids`.
    pub fn gather(&mut self, table: f64, ids: f64) -> JsResult<u32> {
        let table = js(tensor_arg(table, "table"))?;
        let ids = js(tensor_arg(ids, "ids"))?;
        js(self.inner.gather(table, ids))
    }

    /// `a + b` with broadcasting.
    pub fn add(&mut self, a: f64, b: f64) -> JsResult<u32> {
        let a = js(tensor_arg(a, "a"))?;
        let b = js(tensor_arg(b, "b"))?;
        js(self.inner.add(a, b))
    }

    /// `a - b` with broadcasting.
    pub fn sub(&mut self, a: f64, b: f64) -> JsResult<u32> {
        let a = js(tensor_arg(a, "a"))?;
        let b = js(tensor_arg(b, "b"))?;
        js(self.inner.sub(a, b))
    }

    /// `a * b` with broadcasting.
    pub fn mul(&mut self, a: f64, b: f64) -> JsResult<u32> {
        let a = js(tensor_arg(a, "a"))?;
        let b = js(tensor_arg(b, "b"))?;
        js(self.inner.mul(a, b))
    }

    /// `a / b` with broadcasting.
    pub fn div(&mut self, a: f64, b: f64) -> JsResult<u32> {
        let a = js(tensor_arg(a, "a"))?;
        let b = js(tensor_arg(b, "b"))?;
        js(self.inner.div(a, b))
    }

    /// `x * scale + bias`.
    pub fn scale(&mut self, x: f64, scale: f32, bias: Option<f32>) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.scale(x, scale, bias.unwrap_or(0.0)))
    }

    /// GELU (erf form).
    pub fn gelu(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.gelu(x))
    }

    /// Hyperbolic tangent.
    pub fn tanh(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.tanh(x))
    }

    /// `max(x, 0)`.
    pub fn relu(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.relu(x))
    }

    /// GELU, tanh form (PyTorch `gelu(approximate='tanh')`, Gemma's activation).
    #[wasm_bindgen(js_name = geluTanh)]
    pub fn gelu_tanh(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.unary(program::UnaryOp::GeluTanh, x))
    }

    /// SiLU: `x * sigmoid(x)`.
    pub fn silu(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.unary(program::UnaryOp::Silu, x))
    }

    /// Batched `a @ b` (optionally transposed) plus an optional `[N]` bias.
    pub fn matmul(
        &mut self,
        a: f64,
        b: f64,
        bias: Option<f64>,
        #[wasm_bindgen(js_name = transposeA)] transpose_a: Option<bool>,
        #[wasm_bindgen(js_name = transposeB)] transpose_b: Option<bool>,
    ) -> JsResult<u32> {
        let a = js(tensor_arg(a, "a"))?;
        let b = js(tensor_arg(b, "b"))?;
        let bias = js(bias.map(|v| tensor_arg(v, "bias")).transpose())?;
        js(self.inner.matmul(
            a,
            b,
            bias,
            transpose_a.unwrap_or(false),
            transpose_b.unwrap_or(false),
        ))
    }

    /// Layer normalisation over the last dim.
    #[wasm_bindgen(js_name = layerNorm)]
    pub fn layer_norm(&mut self, x: f64, gamma: f64, beta: f64, eps: f32) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let gamma = js(tensor_arg(gamma, "gamma"))?;
        let beta = js(tensor_arg(beta, "beta"))?;
        js(self.inner.layer_norm(x, gamma, beta, eps))
    }

    /// RMS normalisation over the last dim: `x / sqrt(mean(x^2) + eps) * weight`, `weight`
    /// an optional `[H]` (`null` or `undefined`: no weight multiply).
    #[wasm_bindgen(js_name = rmsNorm)]
    pub fn rms_norm(&mut self, x: f64, weight: Option<f64>, eps: f32) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let weight = js(weight.map(|v| tensor_arg(v, "weight")).transpose())?;
        let op = |out| crate::program::ops::RmsNorm {
            x,
            weight,
            eps,
            out,
        };
        js(self.inner.push(op))
    }

    /// A linear layer `x @ weight^T (+ bias)`: `x` f32 `[..., K]`, `weight` `[N, K]` (f32 or a
    /// block format such as `"q8_0"`, decoded in the kernel), `bias` an optional f32 `[N]`.
    pub fn linear(&mut self, x: f64, weight: f64, bias: Option<f64>) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let weight = js(tensor_arg(weight, "weight"))?;
        let bias = js(bias.map(|v| tensor_arg(v, "bias")).transpose())?;
        let op = |out| crate::program::ops::Linear {
            x,
            weight,
            bias,
            out,
        };
        js(self.inner.push(op))
    }

    /// Rotary position embedding of `x` `[.., S, H, D]` by the i32 `positions` `[S]`:
    /// `dims` rotated dims, frequency `base`, `style` `"neox"` (rotate-half) or `"gptj"`
    /// (interleaved pairs).
    pub fn rope(
        &mut self,
        x: f64,
        positions: f64,
        dims: u32,
        base: f32,
        style: &str,
    ) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let positions = js(tensor_arg(positions, "positions"))?;
        let style = match style {
            "neox" => crate::program::ops::RopeStyle::Neox,
            "gptj" => crate::program::ops::RopeStyle::GptJ,
            other => {
                return Err(to_js_error(Error::invalid_argument(format!(
                    "unknown rope style {other:?}; expected \"neox\" or \"gptj\""
                ))));
            }
        };
        let op = |out| crate::program::ops::Rope {
            x,
            positions,
            dims,
            base,
            style,
            out,
            scaling: Default::default(),
        };
        js(self.inner.push(op))
    }

    /// Index (i32) of the largest element of each last-dim row of `x` (NaN ranks as
    /// `-Infinity`, ties go to the lowest index).
    pub fn argmax(&mut self, x: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self
            .inner
            .push(|out| crate::program::ops::Argmax { x, out }))
    }

    /// The token (i32 `[R]`) each row of `logits` `[R, V]` samples with its `knobs` `[R, 4]`
    /// = `(temperature, topK, topP, u)`; `u` from `sampleUniform(seed, step)`.
    pub fn sample(&mut self, logits: f64, knobs: f64) -> JsResult<u32> {
        let logits = js(tensor_arg(logits, "logits"))?;
        let knobs = js(tensor_arg(knobs, "knobs"))?;
        let op = |out| crate::program::ops::Sample { logits, knobs, out };
        js(self.inner.push(op))
    }

    /// Softmax over the last dim of `x` (plus an additive `mask`).
    pub fn softmax(&mut self, x: f64, mask: Option<f64>) -> JsResult<u32> {
        let mask = js(mask.map(|v| tensor_arg(v, "mask")).transpose())?;
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.softmax(x, mask))
    }

    /// `x` with a new shape of the same element count.
    pub fn reshape(
        &mut self,
        x: f64,
        #[wasm_bindgen(unchecked_param_type = "(number | string)[]")] shape: JsValue,
    ) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let shape = js(self.shape(&shape))?;
        js(self.inner.reshape(x, shape))
    }

    /// `x` with its dims reordered (`out` dim `i` = `x` dim `perm[i]`).
    pub fn permute(&mut self, x: f64, perm: Vec<f64>) -> JsResult<u32> {
        let perm = js(perm
            .into_iter()
            .map(|v| index_arg(v, "perm entry"))
            .collect::<Result<Vec<u32>>>())?;
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.permute(x, perm))
    }

    /// Elements `start..end` along `axis` (`end` omitted: to the end).
    pub fn slice(&mut self, x: f64, axis: f64, start: f64, end: Option<f64>) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let axis = js(index_arg(axis, "axis"))?;
        let start = js(safe_integer(start, "start"))?;
        let end = js(end.map(|end| safe_integer(end, "end")).transpose())?;
        js(self.inner.slice(x, axis, start, end))
    }

    /// Concatenation of `inputs` along `axis`.
    pub fn concat(&mut self, inputs: Vec<f64>, axis: f64) -> JsResult<u32> {
        let inputs = js(inputs
            .into_iter()
            .map(|v| tensor_arg(v, "input"))
            .collect::<Result<Vec<TensorId>>>())?;
        let axis = js(index_arg(axis, "axis"))?;
        js(self.inner.concat(inputs, axis))
    }

    /// `x` converted to `dtype`.
    pub fn cast(&mut self, x: f64, dtype: &str) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let dtype = js(dtype_from_name(dtype))?;
        js(self.inner.cast(x, dtype))
    }

    /// `0, 1, ..., extent - 1` (`extent` a number or a symbol name) as `dtype`.
    pub fn range(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "number | string")] extent: JsValue,
        dtype: &str,
    ) -> JsResult<u32> {
        let dtype = js(dtype_from_name(dtype))?;
        let extent = js(self.dim(&extent, 0))?;
        js(self.inner.range(extent, dtype))
    }

    /// Masked mean over the sequence: `x` `[B, S, H]`, `mask` `[B, S]` -> `[B, H]`.
    #[wasm_bindgen(js_name = meanPool)]
    pub fn mean_pool(&mut self, x: f64, mask: f64) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        let mask = js(tensor_arg(mask, "mask"))?;
        js(self.inner.mean_pool(x, mask))
    }

    /// `x / max(||x||, eps)` over the last dim.
    #[wasm_bindgen(js_name = l2Normalize)]
    pub fn l2_normalize(&mut self, x: f64, eps: f32) -> JsResult<u32> {
        let x = js(tensor_arg(x, "x"))?;
        js(self.inner.l2_normalize(x, eps))
    }

    /// Marks `id` as the next output.
    pub fn output(&mut self, id: f64) -> JsResult<()> {
        let id = js(tensor_arg(id, "id"))?;
        js(self.check_tensor(id))?;
        self.inner.output(id);
        Ok(())
    }

    /// Renames tensor `id`.
    #[wasm_bindgen(js_name = setName)]
    pub fn set_name(&mut self, id: f64, name: &str) -> JsResult<()> {
        let id = js(tensor_arg(id, "id"))?;
        js(self.inner.set_name(id, name))
    }

    /// The shape of tensor `id`: extents as numbers, symbols by name.
    #[wasm_bindgen(js_name = shapeOf, unchecked_return_type = "(number | string)[]")]
    pub fn shape_of(&self, id: f64) -> JsResult<JsValue> {
        let id = js(tensor_arg(id, "id"))?;
        let shape = js(self
            .inner
            .shape_of(id)
            .ok_or_else(|| Error::invalid_argument(format!("tensor {id} does not exist"))))?;
        let symbols = &self.inner.program().symbols;
        let array = Array::new();
        for dim in shape {
            match *dim {
                Dim::Fixed(extent) => array.push(&JsValue::from_f64(extent as f64)),
                Dim::Symbol(symbol) => array.push(&JsValue::from_str(
                    symbols.get(symbol as usize).map_or("?", String::as_str),
                )),
            };
        }
        Ok(array.into())
    }

    /// Number of tensors declared so far.
    #[wasm_bindgen(getter, js_name = tensorCount)]
    pub fn tensor_count(&self) -> u32 {
        self.inner.program().tensors.len() as u32
    }

    /// Validates and encodes the program (the blob `Delegate.init` takes).
    pub fn encode(&self) -> JsResult<Uint8Array> {
        let blob = js(self.inner.encode())?;
        Ok(Uint8Array::from(blob.as_slice()))
    }

    /// The program's stable text form (see `program::dump`).
    pub fn dump(&self) -> String {
        program::dump(self.inner.program())
    }
}

/// The sampling draw in `[0, 1)` for `step` of a generation seeded with `seed` (splitmix64,
/// counter-based: see `Sample::uniform`), the `u` knob of `ProgramBuilder.sample`.
#[wasm_bindgen(js_name = sampleUniform)]
pub fn sample_uniform(seed: u64, step: u64) -> f32 {
    crate::program::ops::Sample::uniform(seed, step)
}
