//! The WGSL module builder every kernel is written with ([`Wgsl`]): the one place that writes
//! binding declarations, element types and the shared prologues.
//!
//! - [`Wgsl::uniforms`] declares binding 0 from a [`Field`] list (see `uniforms.rs`: the same
//!   list packs the dispatch's words); [`Wgsl::storage`] declares the next storage binding and
//!   returns its number, so no kernel computes a binding number.
//! - Element types are a [`Precision`]: every module starts with `alias Act = ..;` (activations),
//!   `alias Kv = ..;` (the KV cache) and `alias Acc = ..;` (accumulators), and bindings of
//!   [`Elem::Act`] / [`Elem::Kv`] / [`Elem::Acc`] are arrays of them; any `f16` adds
//!   `enable f16;`. Kernel code converts explicitly (`Acc(x[i])`, `Act(v)`), which is the
//!   identity where all three are `f32`.
//! - The shared prologues: [`Wgsl::reduce`] (the workgroup tree reduction), [`Wgsl::row_main`]
//!   (one workgroup per row of `p.head.y` values), [`Wgsl::element_main`] (one invocation per
//!   element over a folded 1-D grid).
//! - Template text is filled by [`fill`] / [`Wgsl::template`] (`{{NAME}}` placeholders); what
//!   [`Wgsl::finish`] returns is checked for any placeholder left unfilled, and for
//!   duplicate binding names, as an `Internal` error.

use crate::backends::webgpu::kernels::uniforms::{Field, wgsl_struct};
use crate::error::{Error, Result};
use crate::program::DType;
use std::fmt::{Display, Write as _};

const COMMON: &str = include_str!("common.wgsl");
const REDUCE: &str = include_str!("reduce.wgsl");

/// A float element type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum Float {
    /// 32-bit float (the reference; every adapter).
    #[default]
    F32,
    /// 16-bit float (adapters with `shader-f16`).
    F16,
}

impl Float {
    /// The WGSL type name.
    pub(crate) const fn wgsl(self) -> &'static str {
        match self {
            Float::F32 => "f32",
            Float::F16 => "f16",
        }
    }
}

/// The element types of one kernel variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Precision {
    /// Activations (`Act`).
    pub act: Float,
    /// The KV cache (`Kv`).
    pub kv: Float,
    /// Accumulators: sums, norms, softmax statistics (`Acc`).
    pub acc: Float,
}

impl Precision {
    /// Everything in f32 (the reference).
    pub(crate) const F32: Self = Self {
        act: Float::F32,
        kv: Float::F32,
        acc: Float::F32,
    };

    /// f32 activations and accumulators over an f16 KV cache.
    pub(crate) const KV_F16: Self = Self {
        act: Float::F32,
        kv: Float::F16,
        acc: Float::F32,
    };

    /// f16 activations and cache, f32 accumulation.
    pub(crate) const F16: Self = Self {
        act: Float::F16,
        kv: Float::F16,
        acc: Float::F32,
    };

    /// Whether any element type is f16 (the module needs `enable f16;`).
    pub(crate) const fn uses_f16(self) -> bool {
        matches!(self.act, Float::F16)
            || matches!(self.kv, Float::F16)
            || matches!(self.acc, Float::F16)
    }
}

/// The element type of one storage binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// Activations: `array<Act>`.
    Act,
    /// The KV cache: `array<Kv>`.
    Kv,
    /// Accumulator-precision values (partial results): `array<Acc>`.
    Acc,
    /// Always f32, whatever the precision (e.g. sampling knobs).
    F32,
    /// 32-bit words (ids, raw weight bytes, u8 / i32 / i64 tensors).
    U32,
    /// A tensor of `dtype` as its words (f32 as f32, every other dtype as u32 words; see
    /// `kernels::words_per_element`).
    Word(DType),
    /// The status word: `array<atomic<u32>>`.
    Atomic,
    /// A float type named directly (an `f16` one enables the extension).
    Float(Float),
    /// A kernel-local alias declared by [`Wgsl::alias`].
    Named(&'static str),
}

impl Elem {
    /// The WGSL array element type.
    fn wgsl(self) -> &'static str {
        match self {
            Elem::Act => "Act",
            Elem::Kv => "Kv",
            Elem::Acc => "Acc",
            Elem::F32 => "f32",
            Elem::U32 => "u32",
            Elem::Word(DType::F32) => "f32",
            Elem::Word(DType::I32 | DType::I64 | DType::U8 | DType::Block(_)) => "u32",
            Elem::Atomic => "atomic<u32>",
            Elem::Float(float) => float.wgsl(),
            Elem::Named(name) => name,
        }
    }
}

/// `template` with each `{{NAME}}` of `subs` replaced by its value (placeholders not named
/// stay; [`Wgsl::finish`] refuses any that reach a module).
pub(crate) fn fill(template: &str, subs: &[(&str, &dyn Display)]) -> String {
    subs.iter()
        .fold(template.to_owned(), |text, (name, value)| {
            text.replace(&format!("{{{{{name}}}}}"), &value.to_string())
        })
}

/// One WGSL module under construction (see the module docs).
#[derive(Debug)]
pub(crate) struct Wgsl {
    precision: Precision,
    enables: Vec<&'static str>,
    decls: String,
    body: String,
    storage: Vec<String>,
    uniforms: Vec<&'static str>,
    error: Option<String>,
}

impl Wgsl {
    /// An empty module over `precision`'s element types.
    pub(crate) fn new(precision: Precision) -> Self {
        Self {
            precision,
            enables: Vec::new(),
            decls: String::new(),
            body: String::new(),
            storage: Vec::new(),
            uniforms: Vec::new(),
            error: None,
        }
    }

    /// An empty all-f32 module.
    pub(crate) fn f32() -> Self {
        Self::new(Precision::F32)
    }

    fn fail(&mut self, message: String) {
        self.error.get_or_insert(message);
    }

    /// Adds `enable <extension>;` (once).
    pub(crate) fn enable(&mut self, extension: &'static str) -> &mut Self {
        if !self.enables.contains(&extension) {
            self.enables.push(extension);
        }
        self
    }

    /// Declares the uniform block (binding 0) laid out as `fields`; returns its binding.
    pub(crate) fn uniforms(&mut self, fields: &[Field]) -> u32 {
        if !self.uniforms.is_empty() {
            self.fail("the uniform block is declared twice".to_owned());
        }
        self.uniforms = fields.iter().map(|f| f.name).collect();
        self.decls.push_str(&wgsl_struct(fields));
        0
    }

    /// Declares `alias name = <elem>;` (a kernel-local element type, e.g. one binding that is
    /// activations in one variant and accumulators in another).
    pub(crate) fn alias(&mut self, name: &'static str, elem: Elem) -> &mut Self {
        if elem == Elem::Float(Float::F16) {
            self.enable("f16");
        }
        let _ = writeln!(self.decls, "alias {name} = {};", elem.wgsl());
        self
    }

    /// Declares the next storage binding, `name: array<elem>`; returns its binding number.
    pub(crate) fn storage(&mut self, name: &str, elem: Elem) -> u32 {
        if elem == Elem::Float(Float::F16) {
            self.enable("f16");
        }
        if self.storage.iter().any(|n| n == name) {
            self.fail(format!("storage binding `{name}` is declared twice"));
        }
        self.storage.push(name.to_owned());
        let binding = self.storage.len() as u32;
        let _ = writeln!(
            self.decls,
            "@group(0) @binding({binding}) var<storage, read_write> {name}: array<{}>;",
            elem.wgsl()
        );
        binding
    }

    /// Declares `name` as a storage binding where `wanted`; returns its binding number.
    pub(crate) fn storage_if(&mut self, wanted: bool, name: &str, elem: Elem) -> Option<u32> {
        wanted.then(|| self.storage(name, elem))
    }

    /// How many storage bindings are declared.
    pub(crate) fn storage_count(&self) -> u32 {
        self.storage.len() as u32
    }

    /// Appends `code` verbatim.
    pub(crate) fn push(&mut self, code: &str) -> &mut Self {
        self.body.push_str(code);
        if !code.ends_with('\n') {
            self.body.push('\n');
        }
        self
    }

    /// Appends `template` filled with `subs` (see [`fill`]).
    pub(crate) fn template(&mut self, template: &str, subs: &[(&str, &dyn Display)]) -> &mut Self {
        let text = fill(template, subs);
        self.push(&text)
    }

    /// Appends `const NAME: u32 = value;`.
    pub(crate) fn constant(&mut self, name: &str, value: u32) -> &mut Self {
        let line = format!("const {name}: u32 = {value}u;");
        self.push(&line)
    }

    fn require_uniform(&mut self, field: &str, what: &str) {
        if !self.uniforms.contains(&field) {
            self.fail(format!(
                "{what} reads p.{field}, which the uniform block lacks"
            ));
        }
    }

    /// The workgroup tree reduction over `wg` threads (a power of two): `scratch`, then
    /// `reduce_sum(lid, v)` and `reduce_max(lid, v)` over `Acc` (every thread calls them; they
    /// contain barriers).
    pub(crate) fn reduce(&mut self, wg: u32) -> &mut Self {
        self.template(REDUCE, &[("WG", &wg)])
    }

    /// The row kernel: `main` over `wg` threads per row (row `flat_group`, rows `p.head.x`,
    /// `h = p.head.y` values from `base = row * h`), then `body` (which may use `WG`, `row`,
    /// `h`, `base`, `lid`; and the tree reduction where [`Wgsl::reduce`] added it).
    pub(crate) fn row_main(&mut self, wg: u32, body: &str) -> &mut Self {
        self.require_uniform("head", "a row kernel");
        self.constant("WG", wg);
        self.push(
            "
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;",
        );
        self.push(body);
        self.push("}")
    }

    /// The element kernel: `main` over `wg` invocations per workgroup, `i` the flat element
    /// index of a folded 1-D grid, returning at or past `count` (a WGSL expression), then
    /// `body` (which may use `WG`, `i`, `lid`).
    pub(crate) fn element_main(&mut self, wg: u32, count: &str, body: &str) -> &mut Self {
        self.constant("WG", wg);
        let head = format!(
            "
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let i = flat_group(wid, nwg) * WG + lid;
    if (i >= {count}) {{
        return;
    }}"
        );
        self.push(&head);
        self.push(body);
        self.push("}")
    }

    /// The complete module: enables, the shared helpers (`common.wgsl`), the element type
    /// aliases, the uniform block and bindings, then the kernel's code.
    ///
    /// # Errors
    /// `Internal` for a placeholder left unfilled, a binding declared twice, or a prologue
    /// missing the uniform field it reads.
    pub(crate) fn finish(mut self) -> Result<String> {
        if self.precision.uses_f16() && !self.enables.contains(&"f16") {
            self.enables.insert(0, "f16");
        }
        let mut text = String::new();
        for extension in &self.enables {
            let _ = writeln!(text, "enable {extension};");
        }
        text.push_str(COMMON);
        let Precision { act, kv, acc } = self.precision;
        let _ = write!(
            text,
            "\nalias Act = {};\nalias Kv = {};\nalias Acc = {};\n\n{}\n{}",
            act.wgsl(),
            kv.wgsl(),
            acc.wgsl(),
            self.decls,
            self.body
        );
        if let Some(error) = self.error {
            return Err(Error::internal(format!("WGSL module: {error}")));
        }
        if let Some(at) = text.find("{{") {
            let name: String = text[at..]
                .chars()
                .take_while(|&c| c != '\n')
                .take(40)
                .collect();
            return Err(Error::internal(format!(
                "WGSL module: unfilled placeholder {name}"
            )));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    const HEAD: [Field; 1] = [Field::vec4("head", "x: rows, y: H")];

    #[test]
    fn bindings_count_up_from_one() {
        let mut w = Wgsl::f32();
        assert_eq!(w.uniforms(&HEAD), 0);
        assert_eq!(w.storage("x", Elem::Act), 1);
        assert_eq!(w.storage_if(false, "skipped", Elem::Act), None);
        assert_eq!(w.storage("out", Elem::U32), 2);
        let text = w.finish().unwrap();
        assert!(text.contains("@group(0) @binding(1) var<storage, read_write> x: array<Act>;"));
        assert!(text.contains("alias Act = f32;"));
        assert!(!text.contains("enable f16"));
    }

    #[test]
    fn f16_enables_the_extension() {
        let text = Wgsl::new(Precision::KV_F16).finish().unwrap();
        assert!(text.starts_with("enable f16;\n"), "{text}");
        assert!(text.contains("alias Kv = f16;"));
        assert!(text.contains("alias Act = f32;"));
        let text = Wgsl::new(Precision::F16).finish().unwrap();
        assert!(text.contains("alias Act = f16;") && text.contains("alias Acc = f32;"));
    }

    #[test]
    fn refuses_leftover_placeholders_and_duplicates() {
        let mut w = Wgsl::f32();
        w.template("let a = {{A}}u; let b = {{B}}u;", &[("A", &1)]);
        let err = w.finish().unwrap_err();
        assert_eq!(err.code(), ErrorCode::Internal);
        assert!(err.message().contains("{{B}}"), "{}", err.message());
        let mut w = Wgsl::f32();
        w.storage("x", Elem::Act);
        w.storage("x", Elem::Act);
        assert_eq!(w.finish().unwrap_err().code(), ErrorCode::Internal);
        let mut w = Wgsl::f32();
        w.element_main(32, "p.head.x", "");
        w.row_main(32, "");
        assert_eq!(w.finish().unwrap_err().code(), ErrorCode::Internal);
    }
}
