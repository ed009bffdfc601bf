//! An ordered list of providers: each scope goes to the first provider that supports it (IREE's
//! `io_parameters` module rule); a scope nobody supports is `NOT_FOUND`.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::buffer::{BufferAllocator, ParameterBuffer};
use crate::params::provider::{
    LoadedSpan, ParameterInfo, ParameterProvider, SharedProvider, Signal, SpanRequest,
};
use crate::send_sync::LocalBoxFuture;

/// Providers in priority order; itself a provider.
#[derive(Default, Clone)]
pub struct ProviderList {
    providers: Vec<SharedProvider>,
}

impl ProviderList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `provider` (lower priority than those already in the list).
    pub fn push(&mut self, provider: SharedProvider) {
        self.providers.push(provider);
    }

    /// The first provider that supports `scope`.
    ///
    /// # Errors
    /// `NOT_FOUND` when none does.
    pub fn provider_for(&self, scope: &str) -> StatusResult<&SharedProvider> {
        self.providers
            .iter()
            .find(|provider| provider.query_support(scope))
            .ok_or_else(|| {
                Status::new(
                    StatusCode::NotFound,
                    format!("no parameter provider supports scope {scope:?}"),
                )
            })
    }

    /// How many providers are in the list.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }
}

impl ParameterProvider for ProviderList {
    /// Notifies every provider; returns the first error after notifying all of them.
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        let mut first_error = None;
        for provider in &self.providers {
            if let Err(error) = provider.notify(signal) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn query_support(&self, scope: &str) -> bool {
        self.providers
            .iter()
            .any(|provider| provider.query_support(scope))
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        self.provider_for(scope).ok()?.describe(scope, key)
    }

    /// The keys of `scope` as the first provider serving it lists them.
    fn list_keys(&self, scope: &str) -> Option<Vec<String>> {
        self.provider_for(scope).ok()?.list_keys(scope)
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            self.provider_for(scope)?
                .load(allocator, scope, requests)
                .await
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            self.provider_for(scope)?
                .gather(scope, target, requests)
                .await
        })
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            self.provider_for(scope)?
                .scatter(source, scope, requests)
                .await
        })
    }
}
