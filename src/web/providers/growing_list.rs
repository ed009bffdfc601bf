//! [`GrowingList`]: the provider behind a `ParameterProviderList` — IREE's list of providers
//! (each scope from the first member supporting it) that can grow while programs use it, and
//! that refuses to contain itself. A leaf: both the list class and the provider handle (which
//! carries a list to check for cycles) use it.

use crate::error::Status;
use crate::params::{
    BufferAllocator, LoadedSpan, ParameterBuffer, ParameterInfo, ParameterProvider, ProviderList,
    SharedProvider, Signal, SpanRequest, StatusResult,
};
use crate::send_sync::LocalBoxFuture;
use std::sync::{Arc, Mutex, MutexGuard};

/// A [`ProviderList`] that can grow while programs use it: every call works on the members of
/// the moment (the lock is never held across an await).
#[derive(Default)]
pub struct GrowingList {
    list: Mutex<ProviderList>,
    /// Members that are lists themselves (to refuse a list that would contain itself).
    sublists: Mutex<Vec<Arc<GrowingList>>>,
}

/// Every critical section is one clone or one push: a poisoned lock is consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl GrowingList {
    /// Whether `other` is this list or (transitively) one of its members. Terminates: the
    /// lists form a DAG, as [`push`](Self::push) refuses cycles.
    fn contains(self: &Arc<Self>, other: &Arc<GrowingList>) -> bool {
        Arc::ptr_eq(self, other)
            || lock(&self.sublists)
                .clone()
                .iter()
                .any(|sublist| sublist.contains(other))
    }

    fn snapshot(&self) -> ProviderList {
        lock(&self.list).clone()
    }

    /// How many providers the list holds.
    pub fn len(&self) -> usize {
        self.snapshot().len()
    }

    /// Whether the list holds no provider.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `provider` (lowest priority); `as_list` is the same provider's list when it is
    /// one.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `as_list` is this list or contains it (nothing is appended).
    pub fn push(
        self: &Arc<Self>,
        provider: SharedProvider,
        as_list: Option<&Arc<GrowingList>>,
    ) -> StatusResult<()> {
        if let Some(member) = as_list {
            if member.contains(self) {
                return Err(Status::invalid_argument(
                    "a ParameterProviderList cannot contain itself",
                ));
            }
            lock(&self.sublists).push(member.clone());
        }
        lock(&self.list).push(provider);
        Ok(())
    }
}

impl ParameterProvider for GrowingList {
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        self.snapshot().notify(signal)
    }

    fn query_support(&self, scope: &str) -> bool {
        self.snapshot().query_support(scope)
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        self.snapshot().describe(scope, key)
    }

    fn list_keys(&self, scope: &str) -> Option<Vec<String>> {
        self.snapshot().list_keys(scope)
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.load(allocator, scope, requests).await
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.gather(scope, target, requests).await
        })
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.scatter(source, scope, requests).await
        })
    }
}
