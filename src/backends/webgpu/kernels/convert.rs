//! Dtype conversion (`Cast`) and position ids (`Range`): planning and the WGSL bodies that store
//! element `i` for each dtype pair (the kernel helpers are in `convert.wgsl`).
//!
//! Semantics (the IR's): float -> int truncates toward zero and saturates (NaN -> 0), as Rust's
//! `as`; int -> int saturates (i64 -> i32 clamps to the i32 range, any int -> u8 to 0..=255);
//! int -> f32 rounds to nearest (exactly for values that fit i32; beyond, through two
//! roundings, see `common.wgsl`).

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::{Cast, Range};
use crate::program::{DType, TensorDecl, TensorId};

const CONVERT: &str = include_str!("convert.wgsl");

/// Both kernels' uniform block.
const CONVERT_PARAMS: [Field; 1] = [Field::vec4("head", "x: element count")];

/// A conversion module: `bindings` (name, dtype) after the uniforms, the helpers, then `body`
/// per element.
fn convert_source(wg: u32, bindings: &[(&str, DType)], body: &str) -> Wgsl {
    let mut w = Wgsl::f32();
    w.uniforms(&CONVERT_PARAMS);
    for &(name, dtype) in bindings {
        w.storage(name, Elem::Word(dtype));
    }
    w.push(CONVERT);
    w.element_main(wg, "p.head.x", body);
    w
}

/// Dtype conversion kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CastKey {
    /// The input's dtype.
    pub from: DType,
    /// The output's dtype.
    pub to: DType,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for CastKey {
    fn storage_bindings(&self) -> u32 {
        2
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        convert_source(
            self.wg,
            &[("x", self.from), ("out", self.to)],
            &cast_body(self.from, self.to),
        )
    }
}

/// `0..n` kernel in the given dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RangeKey {
    /// The output's dtype.
    pub to: DType,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for RangeKey {
    fn storage_bindings(&self) -> u32 {
        1
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        convert_source(self.wg, &[("out", self.to)], &range_body(self.to))
    }
}

impl GpuOp for Cast {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        cast(ctx, self.x, self.out)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let dtype = |id: TensorId| tensors.get(id as usize).map(|t| t.dtype);
        let wg = config.workgroup_size;
        match (dtype(self.x), dtype(self.out)) {
            (Some(from), Some(to)) => vec![KernelKey::new(CastKey { from, to, wg })],
            _ => Vec::new(),
        }
    }
}

impl GpuOp for Range {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        range(ctx, self.out)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        tensors
            .get(self.out as usize)
            .map(|out| KernelKey::new(RangeKey { to: out.dtype, wg }))
            .into_iter()
            .collect()
    }
}

/// The WGSL statements that convert `x[i]` (of `from`) into `out` (of `to`).
fn cast_body(from: DType, to: DType) -> String {
    // Integer sources are first read as (low, high) words of their i64 value.
    let int_words = match from {
        DType::I64 => Some("let lo = x[2u * i];\n    let hi = x[2u * i + 1u];"),
        DType::I32 => {
            Some("let lo = x[i];\n    let hi = select(0u, 0xffffffffu, bitcast<i32>(lo) < 0);")
        }
        // Casts take dense dtypes only (validation); a block format reads like u8.
        DType::U8 | DType::Block(_) => Some("let lo = x[i];\n    let hi = 0u;"),
        DType::F32 => None,
    };
    let store = match (int_words, to) {
        (None, DType::F32) => "out[i] = x[i];".to_owned(),
        (None, DType::I32) => "out[i] = f32_to_i32(x[i]);".to_owned(),
        (None, DType::U8 | DType::Block(_)) => "out[i] = f32_to_u8(x[i]);".to_owned(),
        (None, DType::I64) => {
            "let w = f32_to_i64(x[i]);\n    out[2u * i] = w.x;\n    out[2u * i + 1u] = w.y;"
                .to_owned()
        }
        (Some(read), DType::F32) => format!("{read}\n    out[i] = i64_to_f32(lo, hi);"),
        (Some(read), DType::I32) => format!("{read}\n    out[i] = i64_to_i32(lo, hi);"),
        (Some(read), DType::U8 | DType::Block(_)) => {
            format!("{read}\n    out[i] = i64_to_u8(lo, hi);")
        }
        (Some(read), DType::I64) => {
            format!("{read}\n    out[2u * i] = lo;\n    out[2u * i + 1u] = hi;")
        }
    };
    format!("    {store}")
}

/// The WGSL statements that store `i` as element `i` of `out` (u8 wraps at 256).
fn range_body(to: DType) -> String {
    match to {
        DType::F32 => "    out[i] = f32(i);",
        DType::I32 => "    out[i] = i;",
        DType::U8 | DType::Block(_) => "    out[i] = i & 0xffu;",
        DType::I64 => "    out[2u * i] = i;\n    out[2u * i + 1u] = 0u;",
    }
    .to_owned()
}

/// `out = x` converted to `out`'s dtype.
///
/// # Errors
/// `InvalidProgram` when the element counts differ; `OutOfResources` for grids too large.
fn cast(ctx: &PlanContext<'_>, x: TensorId, out: TensorId) -> Result<Vec<Dispatch>> {
    let n = ctx.numel(out)?;
    if ctx.numel(x)? != n {
        return Err(Error::invalid_program(format!(
            "cast: input has {} elements, output {n}",
            ctx.numel(x)?
        )));
    }
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(CastKey {
            from: ctx.dtype(x)?,
            to: ctx.dtype(out)?,
            wg: ctx.config.workgroup_size,
        }),
        uniforms: Uniforms::new(&CONVERT_PARAMS)
            .vec4("head", [to_u32(n, "element count")?, 0, 0, 0])
            .finish()?,
        bindings: vec![Binding::Tensor(x), Binding::Tensor(out)],
        workgroups,
    }])
}

/// `out = 0, 1, ..., n-1`.
///
/// # Errors
/// `InvalidProgram` when `out` is not 1-D; `OutOfResources` for grids too large.
fn range(ctx: &PlanContext<'_>, out: TensorId) -> Result<Vec<Dispatch>> {
    let [n] = *ctx.shape(out)? else {
        return Err(Error::invalid_program(format!(
            "range: out has shape {:?}, expected 1-D",
            ctx.shape(out)?
        )));
    };
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(RangeKey {
            to: ctx.dtype(out)?,
            wg: ctx.config.workgroup_size,
        }),
        uniforms: Uniforms::new(&CONVERT_PARAMS)
            .vec4("head", [to_u32(n, "element count")?, 0, 0, 0])
            .finish()?,
        bindings: vec![Binding::Tensor(out)],
        workgroups,
    }])
}
