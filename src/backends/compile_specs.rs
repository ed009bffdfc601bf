//! Compile specs and runtime specs, read strictly: each backend names the keys it understands,
//! and any other key is reported (`InvalidArgument` naming every unknown key), never silently
//! ignored. Values are UTF-8 text.
//!
//! Keys shared by the backends:
//! - `precision`: the float precision kernels compute in: `"auto"` (the default: the backend
//!   picks, and picks f16 only where it is safe and available), `"f32"` or `"f16"`. `"f32"` is
//!   the only explicit value every backend supports; a backend that cannot honour `"f16"`
//!   refuses it with `NotSupported`, and `"auto"` is f32 there.
//!
//! Export-time keys ([`EXPORT_TIME_KEYS`]: `external_tag`, `alignment`) are accepted by every
//! backend and mean nothing at run time: the webdelegate partitioner hands them to its
//! `preprocess` (which `.ptd` the weights go to, their alignment), and ExecuTorch embeds a
//! delegate's compile specs in the `.pte`, so `init` receives them too.

use crate::error::{Error, Result};
use crate::registry::{BackendOption, CompileSpec};

/// The `precision` compile spec key.
pub const PRECISION: &str = "precision";

/// Float precision kernels compute in, as asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// The backend's choice (the default): f16 only where the backend judges it safe and the
    /// device has it, else f32.
    #[default]
    Auto,
    /// 32-bit floats throughout.
    F32,
    /// 16-bit floats where the backend uses them (refused where the device lacks them).
    F16,
}

impl Precision {
    /// Parses a `precision` value (`"auto"`, `"f32"` or `"f16"`).
    ///
    /// # Errors
    /// `InvalidArgument` for any other value.
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "auto" => Ok(Self::Auto),
            "f32" => Ok(Self::F32),
            "f16" => Ok(Self::F16),
            other => Err(Error::invalid_argument(format!(
                "compile spec {PRECISION:?} is {other:?}; expected \"auto\", \"f32\" or \"f16\""
            ))),
        }
    }

    /// The spec value, e.g. `"f32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::F32 => "f32",
            Self::F16 => "f16",
        }
    }
}

/// Compile-spec keys the webdelegate partitioner uses ahead of time and ExecuTorch keeps in the
/// `.pte`; every backend accepts and ignores them.
pub const EXPORT_TIME_KEYS: [&str; 2] = ["external_tag", "alignment"];

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
        let keys: Vec<&str> = specs
            .iter()
            .map(|spec| spec.key.as_str())
            .filter(|key| !EXPORT_TIME_KEYS.contains(key))
            .collect();
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

    /// The `precision` spec (default `auto`).
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
    Error::not_supported(format!(
        "backend {backend:?} computes in f32 only; compile spec {PRECISION:?} is {:?}",
        precision.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn unknown_and_repeated_keys_are_reported_by_name() {
        let specs = [
            CompileSpec::new("precision", "f32"),
            CompileSpec::new("tile", "8"),
            CompileSpec::new("workgroup", "64"),
        ];
        let error = CompileSpecs::new("cpu", &specs, &[PRECISION]).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        assert!(
            error.message().contains("\"tile\", \"workgroup\""),
            "{error}"
        );
        assert!(error.message().contains("[\"precision\"]"), "{error}");
        let twice = [
            CompileSpec::new("precision", "f32"),
            CompileSpec::new("precision", "f16"),
        ];
        let error = CompileSpecs::new("cpu", &twice, &[PRECISION]).unwrap_err();
        assert!(error.message().contains("more than once"), "{error}");
    }

    #[test]
    fn precision_values() {
        let specs = CompileSpecs::new("cpu", &[], &[PRECISION]).unwrap();
        assert_eq!(specs.precision().unwrap(), Precision::Auto);
        let given = [CompileSpec::new("precision", "f32")];
        let specs = CompileSpecs::new("gpu", &given, &[PRECISION]).unwrap();
        assert_eq!(specs.precision().unwrap(), Precision::F32);
        let given = [CompileSpec::new("precision", "f16")];
        let specs = CompileSpecs::new("gpu", &given, &[PRECISION]).unwrap();
        assert_eq!(specs.precision().unwrap(), Precision::F16);
        let odd = [CompileSpec::new("precision", "bf16")];
        let specs = CompileSpecs::new("gpu", &odd, &[PRECISION]).unwrap();
        assert_eq!(
            specs.precision().unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        let binary = [CompileSpec::new("precision", vec![0xFF, 0xFE])];
        let specs = CompileSpecs::new("gpu", &binary, &[PRECISION]).unwrap();
        assert!(specs.precision().unwrap_err().message().contains("UTF-8"));
        let error = unsupported_precision("cpu", Precision::F16);
        assert_eq!(error.code(), ErrorCode::NotSupported);
    }

    #[test]
    fn runtime_specs_are_checked_too() {
        let options = [BackendOption::new("power", "high").unwrap()];
        check_runtime_specs("gpu", &options, &["power"]).unwrap();
        let error = check_runtime_specs("cpu", &options, &[]).unwrap_err();
        assert!(
            error.message().contains("runtime spec key(s) \"power\""),
            "{error}"
        );
    }
}
