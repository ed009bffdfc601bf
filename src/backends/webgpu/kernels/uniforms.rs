//! A kernel's uniform block, declared once: one list of named [`Field`]s emits the WGSL
//! `struct Params` (binding 0, see [`wgsl_struct`]) and checks the words a dispatch packs for
//! it ([`Uniforms`]), so no layout is written twice. Every field is a whole number of
//! `vec4`s (16 bytes), so the WGSL uniform layout has no padding to mirror; floats travel as
//! their bits where a field is `vec4<u32>`.

use crate::backends::webgpu::kernels::{MAX_DIMS, to_u32};
use crate::error::{Error, Result};
use std::fmt::Write as _;

/// The WGSL type of one uniform field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FieldType {
    /// `vec4<u32>`.
    U32x4,
    /// `array<vec4<u32>, 2>`: up to [`MAX_DIMS`] dims (extents or strides).
    Dims8,
    /// `array<vec4<f32>, n>`: a table of `4 n` floats.
    F32Table(u32),
}

impl FieldType {
    /// Words the field occupies.
    fn words(self) -> usize {
        match self {
            FieldType::U32x4 => 4,
            FieldType::Dims8 => MAX_DIMS,
            FieldType::F32Table(n) => 4 * n as usize,
        }
    }

    /// The WGSL type.
    fn wgsl(self) -> String {
        match self {
            FieldType::U32x4 => "vec4<u32>".to_owned(),
            FieldType::Dims8 => "array<vec4<u32>, 2>".to_owned(),
            FieldType::F32Table(n) => format!("array<vec4<f32>, {}>", n.max(1)),
        }
    }
}

/// One named field of a uniform block, with the comment that says what its lanes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Field {
    /// The WGSL field name (`p.<name>` in the kernel).
    pub name: &'static str,
    /// Its type.
    pub ty: FieldType,
    /// What the lanes hold (emitted as a comment above the field; empty for none).
    pub doc: &'static str,
}

impl Field {
    /// A `vec4<u32>` field.
    pub(crate) const fn vec4(name: &'static str, doc: &'static str) -> Self {
        Self {
            name,
            ty: FieldType::U32x4,
            doc,
        }
    }

    /// An `array<vec4<u32>, 2>` field of up to [`MAX_DIMS`] dims.
    pub(crate) const fn dims8(name: &'static str, doc: &'static str) -> Self {
        Self {
            name,
            ty: FieldType::Dims8,
            doc,
        }
    }

    /// An `array<vec4<f32>, vec4s>` table.
    pub(crate) const fn f32_table(name: &'static str, vec4s: u32, doc: &'static str) -> Self {
        Self {
            name,
            ty: FieldType::F32Table(vec4s),
            doc,
        }
    }
}

/// The WGSL `struct Params` of `fields` and its binding, `p` at binding 0.
pub(crate) fn wgsl_struct(fields: &[Field]) -> String {
    let mut text = String::from("struct Params {\n");
    for field in fields {
        for line in field.doc.lines().filter(|line| !line.is_empty()) {
            let _ = writeln!(text, "    // {line}");
        }
        let _ = writeln!(text, "    {}: {},", field.name, field.ty.wgsl());
    }
    text.push_str("}\n\n@group(0) @binding(0) var<uniform> p: Params;\n");
    text
}

/// The words of one uniform block, packed field by field in the order of its [`Field`] list:
/// each call names the field it fills and must match the next one in name and type
/// (`finish` reports the first mismatch, or a field left unfilled).
pub(crate) struct Uniforms<'a> {
    fields: &'a [Field],
    next: usize,
    words: Vec<u32>,
    error: Option<Error>,
}

impl<'a> Uniforms<'a> {
    /// An empty block laid out as `fields`.
    pub(crate) fn new(fields: &'a [Field]) -> Self {
        Self {
            fields,
            next: 0,
            words: Vec::with_capacity(fields.iter().map(|f| f.ty.words()).sum()),
            error: None,
        }
    }

    /// Checks that the next field is `name` of type `ty` and moves past it.
    fn field(&mut self, name: &str, ty: fn(FieldType) -> bool) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.fields.get(self.next) {
            Some(field) if field.name == name && ty(field.ty) => {
                self.next += 1;
                true
            }
            other => {
                self.error = Some(Error::internal(format!(
                    "uniform field `{name}` packed where the block declares {}",
                    other.map_or("no more fields".to_owned(), |f| format!(
                        "`{}: {}`",
                        f.name,
                        f.ty.wgsl()
                    ))
                )));
                false
            }
        }
    }

    /// Fills the `vec4<u32>` field `name`.
    pub(crate) fn vec4(mut self, name: &str, v: [u32; 4]) -> Self {
        if self.field(name, |ty| ty == FieldType::U32x4) {
            self.words.extend_from_slice(&v);
        }
        self
    }

    /// Fills the dims field `name` with up to [`MAX_DIMS`] values (zero-padded); `what` names
    /// them in errors (`NotSupported` for more dims, `OutOfResources` for a value over u32).
    pub(crate) fn dims8(mut self, name: &str, values: &[usize], what: &str) -> Self {
        if !self.field(name, |ty| ty == FieldType::Dims8) {
            return self;
        }
        if values.len() > MAX_DIMS {
            self.error = Some(Error::not_supported(format!(
                "{what} needs {} dims; the WebGPU kernels handle {MAX_DIMS}",
                values.len()
            )));
            return self;
        }
        let mut packed = [0u32; MAX_DIMS];
        for (slot, &value) in packed.iter_mut().zip(values) {
            match to_u32(value, what) {
                Ok(v) => *slot = v,
                Err(e) => {
                    self.error = Some(e);
                    return self;
                }
            }
        }
        self.words.extend_from_slice(&packed);
        self
    }

    /// Fills the table field `name` with `values` (zero-padded to the table's length).
    pub(crate) fn table(mut self, name: &str, values: &[f32]) -> Self {
        let Some(field) = self.fields.get(self.next).copied() else {
            self.field(name, |_| false);
            return self;
        };
        if !self.field(name, |ty| matches!(ty, FieldType::F32Table(_))) {
            return self;
        }
        let len = field.ty.words();
        if values.len() > len {
            self.error = Some(Error::internal(format!(
                "uniform table `{name}` holds {len} values, given {}",
                values.len()
            )));
            return self;
        }
        self.words.extend(values.iter().map(|v| v.to_bits()));
        self.words
            .extend(std::iter::repeat_n(0, len - values.len()));
        self
    }

    /// The words.
    ///
    /// # Errors
    /// The first packing error; `Internal` when a field was left unfilled.
    pub(crate) fn finish(self) -> Result<Vec<u32>> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if let Some(field) = self.fields.get(self.next) {
            return Err(Error::internal(format!(
                "uniform field `{}` left unfilled",
                field.name
            )));
        }
        Ok(self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    const BLOCK: [Field; 3] = [
        Field::vec4("head", "x: rows"),
        Field::dims8("shape", ""),
        Field::f32_table("table", 1, ""),
    ];

    #[test]
    fn packs_in_declared_order() {
        let words = Uniforms::new(&BLOCK)
            .vec4("head", [1, 2, 3, 4])
            .dims8("shape", &[5, 6], "x")
            .table("table", &[1.0])
            .finish()
            .unwrap();
        assert_eq!(words.len(), 16);
        assert_eq!(&words[..6], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(&words[12..], &[1.0f32.to_bits(), 0, 0, 0]);
        let text = wgsl_struct(&BLOCK);
        assert!(
            text.contains("    // x: rows\n    head: vec4<u32>,"),
            "{text}"
        );
        assert!(text.contains("shape: array<vec4<u32>, 2>,"));
        assert!(text.contains("table: array<vec4<f32>, 1>,"));
    }

    #[test]
    fn refuses_wrong_order_missing_fields_and_too_many_dims() {
        let wrong = Uniforms::new(&BLOCK).dims8("shape", &[1], "x").finish();
        assert_eq!(wrong.unwrap_err().code(), ErrorCode::Internal);
        let short = Uniforms::new(&BLOCK).vec4("head", [0; 4]).finish();
        assert_eq!(short.unwrap_err().code(), ErrorCode::Internal);
        let dims = Uniforms::new(&BLOCK)
            .vec4("head", [0; 4])
            .dims8("shape", &[1; 9], "copy")
            .finish();
        assert_eq!(dims.unwrap_err().code(), ErrorCode::NotSupported);
        let extra = Uniforms::new(&BLOCK[..1])
            .vec4("head", [0; 4])
            .vec4("tail", [0; 4])
            .finish();
        assert_eq!(extra.unwrap_err().code(), ErrorCode::Internal);
    }
}
