//! Backend options: ExecuTorch's `BackendOption`, `BackendOptions<N>` and
//! `LoadBackendOptionsMap`.
//!
//! An option is a key (at most [`MAX_OPTION_KEY_BYTES`] bytes) and a value that is a bool, an
//! integer or a string (at most [`MAX_OPTION_STRING_BYTES`] bytes). Upstream stores keys in a
//! `char[64]` and strings in a `char[256]` and silently truncates longer input; we refuse it with
//! `InvalidArgument` instead, because truncation can make two distinct keys collide and hand a
//! backend a value nobody wrote. Everything else follows upstream: setting an existing key
//! overwrites it (the type may change), a full list refuses new keys with `InvalidArgument`, a
//! missing key reads as `NotFound` and a read of the wrong type as `InvalidArgument`.

use crate::error::{Error, ErrorCode, Result};
use serde::{Deserialize, Serialize};

/// Longest option key, in bytes (upstream's `kMaxOptionKeyLength` minus the NUL).
pub const MAX_OPTION_KEY_BYTES: usize = 63;
/// Longest string option value, in bytes (upstream's `kMaxOptionValueLength` minus the NUL).
pub const MAX_OPTION_STRING_BYTES: usize = 255;
/// Most backends a [`LoadBackendOptionsMap`] holds (upstream's `kMaxBackends`).
pub const MAX_LOAD_OPTION_BACKENDS: usize = 8;
/// Longest backend id in a [`LoadBackendOptionsMap`], in bytes (upstream: `< 64`).
pub const MAX_BACKEND_ID_BYTES: usize = 63;

/// The value of one option.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OptionValue {
    /// A boolean flag.
    Bool(bool),
    /// An integer (upstream's `int` and `int64_t` arms, held as `i64`).
    Int(i64),
    /// A string of at most [`MAX_OPTION_STRING_BYTES`] bytes.
    String(String),
}

impl OptionValue {
    /// The name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::String(_) => "string",
        }
    }
}

impl From<bool> for OptionValue {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<i64> for OptionValue {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<i32> for OptionValue {
    fn from(value: i32) -> Self {
        Self::Int(value.into())
    }
}

impl From<&str> for OptionValue {
    fn from(value: &str) -> Self {
        Self::String(value.to_owned())
    }
}

impl From<String> for OptionValue {
    fn from(value: String) -> Self {
        Self::String(value)
    }
}

/// One `key = value` option, validated on construction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackendOption {
    key: String,
    value: OptionValue,
}

impl BackendOption {
    /// An option, after checking the key and value sizes.
    ///
    /// # Errors
    /// `InvalidArgument` when the key is empty or longer than [`MAX_OPTION_KEY_BYTES`], or a
    /// string value is longer than [`MAX_OPTION_STRING_BYTES`].
    pub fn new(key: impl Into<String>, value: impl Into<OptionValue>) -> Result<Self> {
        let key = key.into();
        let value = value.into();
        check_key(&key)?;
        check_value(&key, &value)?;
        Ok(Self { key, value })
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value.
    pub fn value(&self) -> &OptionValue {
        &self.value
    }

    /// Replaces the value (a backend filling in a `get_option` request does this).
    ///
    /// # Errors
    /// `InvalidArgument` when a string value is longer than [`MAX_OPTION_STRING_BYTES`].
    pub fn set_value(&mut self, value: impl Into<OptionValue>) -> Result<()> {
        let value = value.into();
        check_value(&self.key, &value)?;
        self.value = value;
        Ok(())
    }
}

impl<'de> Deserialize<'de> for BackendOption {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            key: String,
            value: OptionValue,
        }
        let raw = Raw::deserialize(deserializer)?;
        BackendOption::new(raw.key, raw.value).map_err(serde::de::Error::custom)
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid_argument("option key is empty"));
    }
    if key.len() > MAX_OPTION_KEY_BYTES {
        return Err(Error::invalid_argument(format!(
            "option key is {} bytes; the limit is {MAX_OPTION_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

fn check_value(key: &str, value: &OptionValue) -> Result<()> {
    if let OptionValue::String(text) = value
        && text.len() > MAX_OPTION_STRING_BYTES
    {
        return Err(Error::invalid_argument(format!(
            "string value of option {key:?} is {} bytes; the limit is {MAX_OPTION_STRING_BYTES}",
            text.len()
        )));
    }
    Ok(())
}

/// A value type that can be read out of a [`BackendOptions`] list.
pub trait OptionType: Sized {
    /// Extracts `Self` from a value of the right arm, `None` for any other arm.
    fn from_value(value: &OptionValue) -> Option<Self>;
}

impl OptionType for bool {
    fn from_value(value: &OptionValue) -> Option<Self> {
        match value {
            OptionValue::Bool(flag) => Some(*flag),
            _ => None,
        }
    }
}

impl OptionType for i64 {
    fn from_value(value: &OptionValue) -> Option<Self> {
        match value {
            OptionValue::Int(number) => Some(*number),
            _ => None,
        }
    }
}

impl OptionType for String {
    fn from_value(value: &OptionValue) -> Option<Self> {
        match value {
            OptionValue::String(text) => Some(text.clone()),
            _ => None,
        }
    }
}

/// A bounded list of options with unique keys (upstream's `BackendOptions<N>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    capacity: usize,
    options: Vec<BackendOption>,
}

impl BackendOptions {
    /// An empty list that holds at most `capacity` options.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity,
            options: Vec::new(),
        }
    }

    /// Sets `key` to `value`: overwrites an existing key (whatever its type) or appends.
    ///
    /// # Errors
    /// `InvalidArgument` when the key or value is too long, or the list is full.
    pub fn set_option(&mut self, key: &str, value: impl Into<OptionValue>) -> Result<()> {
        let option = BackendOption::new(key, value)?;
        if let Some(existing) = self.options.iter_mut().find(|o| o.key == key) {
            existing.value = option.value;
            return Ok(());
        }
        if self.options.len() >= self.capacity {
            return Err(Error::invalid_argument(format!(
                "backend options are full ({} of {}); cannot add {key:?}",
                self.options.len(),
                self.capacity
            )));
        }
        self.options.push(option);
        Ok(())
    }

    /// Reads `key` as a `T`.
    ///
    /// # Errors
    /// `NotFound` when no option has this key; `InvalidArgument` when it holds another type.
    pub fn get_option<T: OptionType>(&self, key: &str) -> Result<T> {
        let option = self
            .options
            .iter()
            .find(|o| o.key == key)
            .ok_or_else(|| Error::not_found(format!("no option {key:?}")))?;
        T::from_value(&option.value).ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidArgument,
                format!(
                    "option {key:?} holds a {}, not the requested type",
                    option.value.type_name()
                ),
            )
        })
    }

    /// The options, in insertion order.
    pub fn view(&self) -> &[BackendOption] {
        &self.options
    }

    /// The options, mutable (to pass to `get_option`, which fills values in).
    pub fn view_mut(&mut self) -> &mut [BackendOption] {
        &mut self.options
    }

    /// How many options are set.
    pub fn len(&self) -> usize {
        self.options.len()
    }

    /// Whether no option is set.
    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
    }
}

/// Per-backend runtime specs for loading a program (upstream's `LoadBackendOptionsMap`): each
/// backend id maps to the options its `init` receives as `BackendInitContext::runtime_specs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadBackendOptionsMap {
    entries: Vec<(String, Vec<BackendOption>)>,
}

impl LoadBackendOptionsMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or replaces) the options for `backend_id`.
    ///
    /// # Errors
    /// `InvalidArgument` when the id is empty or longer than [`MAX_BACKEND_ID_BYTES`], or when
    /// the map already holds [`MAX_LOAD_OPTION_BACKENDS`] other backends.
    pub fn set_options(&mut self, backend_id: &str, options: &[BackendOption]) -> Result<()> {
        if backend_id.is_empty() || backend_id.len() > MAX_BACKEND_ID_BYTES {
            return Err(Error::invalid_argument(format!(
                "backend id must be 1..={MAX_BACKEND_ID_BYTES} bytes, got {}",
                backend_id.len()
            )));
        }
        if let Some(entry) = self.entries.iter_mut().find(|(id, _)| id == backend_id) {
            entry.1 = options.to_vec();
            return Ok(());
        }
        if self.entries.len() >= MAX_LOAD_OPTION_BACKENDS {
            return Err(Error::invalid_argument(format!(
                "load options hold {MAX_LOAD_OPTION_BACKENDS} backends already; cannot add {backend_id:?}"
            )));
        }
        self.entries.push((backend_id.to_owned(), options.to_vec()));
        Ok(())
    }

    /// The options for `backend_id`; empty when none were set.
    pub fn get_options(&self, backend_id: &str) -> &[BackendOption] {
        self.entries
            .iter()
            .find(|(id, _)| id == backend_id)
            .map(|(_, options)| options.as_slice())
            .unwrap_or(&[])
    }

    /// Whether `backend_id` has an entry.
    pub fn has_options(&self, backend_id: &str) -> bool {
        self.entries.iter().any(|(id, _)| id == backend_id)
    }

    /// How many backends have an entry.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no backend has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_string_limits_are_inclusive() {
        assert!(BackendOption::new("k".repeat(63), true).is_ok());
        let long_key = BackendOption::new("k".repeat(64), true).unwrap_err();
        assert_eq!(long_key.code(), ErrorCode::InvalidArgument);
        assert_eq!(
            BackendOption::new("", 1).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert!(BackendOption::new("s", "v".repeat(255)).is_ok());
        let long_value = BackendOption::new("s", "v".repeat(256)).unwrap_err();
        assert_eq!(long_value.code(), ErrorCode::InvalidArgument);
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        let wide = BackendOption::new("s", "é".repeat(128)).unwrap_err();
        assert_eq!(wide.code(), ErrorCode::InvalidArgument);
    }

    #[test]
    fn set_overwrites_existing_key_even_with_another_type() {
        let mut options = BackendOptions::with_capacity(2);
        options.set_option("threads", 4).unwrap();
        options.set_option("threads", "auto").unwrap();
        assert_eq!(options.len(), 1);
        assert_eq!(options.get_option::<String>("threads").unwrap(), "auto");
        assert_eq!(
            options.get_option::<i64>("threads").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn full_list_refuses_new_keys_but_accepts_updates() {
        let mut options = BackendOptions::with_capacity(2);
        options.set_option("a", true).unwrap();
        options.set_option("b", 2).unwrap();
        let full = options.set_option("c", false).unwrap_err();
        assert_eq!(full.code(), ErrorCode::InvalidArgument);
        options.set_option("a", false).unwrap();
        assert!(!options.get_option::<bool>("a").unwrap());
        assert_eq!(
            options.view().iter().map(|o| o.key()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn get_reports_missing_and_wrong_type() {
        let mut options = BackendOptions::with_capacity(4);
        options.set_option("flag", true).unwrap();
        options.set_option("count", 7).unwrap();
        options.set_option("name", "gpu").unwrap();
        assert!(options.get_option::<bool>("flag").unwrap());
        assert_eq!(options.get_option::<i64>("count").unwrap(), 7);
        assert_eq!(options.get_option::<String>("name").unwrap(), "gpu");
        assert_eq!(
            options.get_option::<bool>("nope").unwrap_err().code(),
            ErrorCode::NotFound
        );
        assert_eq!(
            options.get_option::<bool>("count").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            options.get_option::<String>("flag").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn too_long_key_is_refused_before_lookup() {
        let mut options = BackendOptions::with_capacity(1);
        let error = options.set_option(&"x".repeat(64), 1).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        assert!(options.is_empty());
    }

    #[test]
    fn set_value_checks_string_length() {
        let mut option = BackendOption::new("name", false).unwrap();
        option.set_value("ok").unwrap();
        assert_eq!(option.value(), &OptionValue::String("ok".into()));
        assert_eq!(
            option.set_value("x".repeat(256)).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(option.value(), &OptionValue::String("ok".into()));
    }

    #[test]
    fn load_options_map_limits() {
        let mut map = LoadBackendOptionsMap::new();
        let specs = [BackendOption::new("precision", "f32").unwrap()];
        for index in 0..MAX_LOAD_OPTION_BACKENDS {
            map.set_options(&format!("backend{index}"), &specs).unwrap();
        }
        assert_eq!(
            map.set_options("one-more", &specs).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        map.set_options("backend0", &[]).unwrap();
        assert!(map.get_options("backend0").is_empty());
        assert_eq!(map.get_options("backend1"), &specs);
        assert!(map.get_options("unknown").is_empty());
        assert_eq!(
            LoadBackendOptionsMap::new()
                .set_options(&"b".repeat(64), &specs)
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
    }
}
