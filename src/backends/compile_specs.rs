//! Compile specs and runtime specs, read strictly: each backend names the keys it understands,
//! and any other key is reported (`InvalidArgument` naming every unknown key), never silently
//! ignored. Values are UTF-8 text.
//!
//! Keys shared by the backends:
//! - `precision`: the float precision kernels compute in. `"f32"` is the only value every backend
//!   supports; a backend that cannot honour another value refuses it with `NotSupported`.

use crate::error::{Error, ErrorCode, Result};
use crate::registry::{BackendOption, CompileSpec};

/// The `precision` compile spec key.
pub const PRECISION: &str = "precision";

/// Float precision kernels compute in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// 32-bit floats throughout (the default).
    #[default]
    F32,
    /// 16-bit floats where the device supports them.
    F16,
}

impl Precision {
    /// Parses a `precision` value (`"f32"` or `"f16"`).
    ///
    /// # Errors
    /// `InvalidArgument` for any other value.
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "f32" => Ok(Self::F32),
            "f16" => Ok(Self::F16),
            other => Err(Error::invalid_argument(format!(
                "compile spec {PRECISION:?} is {other:?}; expected \"f32\" or \"f16\""
            ))),
        }
    }

    /// The spec value, e.g. `"f32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
        }
    }
}

/// Compile specs after checking that `backend` understands every key.
#[derive(Clone, Copy, Debug)]
pub struct CompileSpecs<'a> {
    specs: &'a [CompileSpec],
}

impl<'a> CompileSpecs<'a> {
    /// Checks `specs` for `backend`, which understands `known` keys.
    ///
    /// # Errors
    /// `InvalidArgument` naming every key `backend` does not understand, or a key given twice.
    pub fn new(backend: &str, specs: &'a [CompileSpec], known: &[&str]) -> Result<Self> {
        let keys: Vec<&str> = specs.iter().map(|spec| spec.key.as_str()).collect();
        check_keys(backend, "compile spec", &keys, known)?;
        Ok(Self { specs })
    }

    /// The value of `key` as text, if given.
    ///
    /// # Errors
    /// `InvalidArgument` when the value is not UTF-8.
    pub fn text(&self, key: &str) -> Result<Option<&'a str>> {
        let Some(spec) = self.specs.iter().find(|spec| spec.key == key) else {
            return Ok(None);
        };
        std::str::from_utf8(&spec.value)
            .map(Some)
            .map_err(|_| Error::invalid_argument(format!("compile spec {key:?} is not UTF-8")))
    }

    /// The `precision` spec (default `f32`).
    ///
    /// # Errors
    /// As [`Precision::parse`] and [`CompileSpecs::text`].
    pub fn precision(&self) -> Result<Precision> {
        self.text(PRECISION)?
            .map_or(Ok(Precision::default()), Precision::parse)
    }
}

/// Checks that `backend` understands every runtime spec (load-time option) it was given.
///
/// # Errors
/// `InvalidArgument` naming every unknown key, or a key given twice.
pub fn check_runtime_specs(backend: &str, specs: &[BackendOption], known: &[&str]) -> Result<()> {
    let keys: Vec<&str> = specs.iter().map(BackendOption::key).collect();
    check_keys(backend, "runtime spec", &keys, known)
}

fn check_keys(backend: &str, what: &str, keys: &[&str], known: &[&str]) -> Result<()> {
    let unknown: Vec<String> = keys
        .iter()
        .filter(|key| !known.contains(key))
        .map(|key| format!("{key:?}"))
        .collect();
    if !unknown.is_empty() {
        let supported: Vec<String> = known.iter().map(|key| format!("{key:?}")).collect();
        return Err(Error::invalid_argument(format!(
            "backend {backend:?} does not understand {what} key(s) {}; it supports [{}]",
            unknown.join(", "),
            supported.join(", ")
        )));
    }
    for (index, key) in keys.iter().enumerate() {
        if keys[..index].contains(key) {
            return Err(Error::invalid_argument(format!(
                "{what} {key:?} is given more than once"
            )));
        }
    }
    Ok(())
}

/// `NotSupported` for a precision a backend cannot honour.
pub fn unsupported_precision(backend: &str, precision: Precision) -> Error {
    Error::new(
        ErrorCode::NotSupported,
        format!(
            "backend {backend:?} computes in f32 only; compile spec {PRECISION:?} is {:?}",
            precision.name()
        ),
    )
}
