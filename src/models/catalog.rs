//! [`TensorCatalog`]: what a model builder needs to know of a checkpoint's tensors — for a
//! key, its byte length and, when the weights format records them, its dtype and shape. A
//! weights file's [`ParameterIndex`] answers directly; [`ProviderCatalog`] answers from any
//! [`ParameterProvider`] serving the file (its `describe`), so a program can be built from the
//! provider the page already made.

use crate::params::{ParameterIndex, ParameterInfo, ParameterProvider};

/// Tensors of one checkpoint, by key.
pub trait TensorCatalog {
    /// What is known of `key`, or `None` when the checkpoint has no such tensor.
    fn tensor_info(&self, key: &str) -> Option<ParameterInfo>;
}

impl TensorCatalog for ParameterIndex {
    fn tensor_info(&self, key: &str) -> Option<ParameterInfo> {
        self.info(key)
    }
}

/// The tensors `provider` serves in `scope`.
pub struct ProviderCatalog<'a> {
    provider: &'a dyn ParameterProvider,
    scope: &'a str,
}

impl<'a> ProviderCatalog<'a> {
    /// The catalog of `scope` in `provider`.
    pub fn new(provider: &'a dyn ParameterProvider, scope: &'a str) -> Self {
        Self { provider, scope }
    }
}

impl TensorCatalog for ProviderCatalog<'_> {
    fn tensor_info(&self, key: &str) -> Option<ParameterInfo> {
        self.provider.describe(self.scope, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{EntryStorage, IndexEntry, MemoryProvider};

    #[test]
    fn index_and_provider_answer_alike() {
        let entry = IndexEntry {
            key: "w".into(),
            length: 24,
            storage: EntryStorage::Data { offset: 8 },
            dtype: Some("F32".into()),
            shape: Some(vec![2, 3]),
        };
        let index = ParameterIndex::new(vec![entry], Some(32));
        let info = index.tensor_info("w").unwrap();
        assert_eq!(info.length, 24);
        assert_eq!(info.dtype.as_deref(), Some("F32"));
        assert_eq!(info.shape, Some(vec![2, 3]));
        assert!(index.tensor_info("x").is_none());

        let provider = MemoryProvider::new();
        provider.insert_described("s", "w", vec![0; 24], Some("F32".into()), Some(vec![2, 3]));
        let catalog = ProviderCatalog::new(&provider, "s");
        assert_eq!(catalog.tensor_info("w"), Some(info));
        assert!(catalog.tensor_info("x").is_none());
        assert!(
            ProviderCatalog::new(&provider, "other")
                .tensor_info("w")
                .is_none()
        );
    }
}
