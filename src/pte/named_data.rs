//! The named data a method's delegates read: the `.pte`'s own named data merged with the
//! `.ptd`'s, under one provider scope ([`NAMED_DATA_SCOPE`]), as upstream's method loader
//! merges the program's `NamedDataMap` with the external one.
//!
//! [`NamedDataUnion`] is a parameter provider over two others: a key the `.pte` holds is served
//! from its bytes (held once, in a `MemoryProvider`), every other key from the external
//! provider (e.g. the HTTP provider streaming the `.ptd` by Range into GPU buffers). A request
//! naming keys of both is split, each part served by its own provider, and the results put back
//! in request order. The `.pte` wins when both hold a key (upstream looks in the program first).

use crate::error::{Status, StatusCode};
use crate::params::{
    BufferAllocator, LoadedSpan, MemoryProvider, ParameterBuffer, ParameterInfo, ParameterProvider,
    SharedProvider, Signal, SpanRequest, StatusResult,
};
use crate::send_sync::LocalBoxFuture;
use std::sync::Arc;

/// The provider scope a program's parameters name for ExecuTorch named data (the Python
/// partitioner writes every weight as `ParamRef { scope: "named_data", key }`).
pub const NAMED_DATA_SCOPE: &str = "named_data";

/// The `.pte`'s named data over an optional external provider (see the module docs).
pub struct NamedDataUnion {
    inline: Arc<MemoryProvider>,
    external: Option<SharedProvider>,
}

impl NamedDataUnion {
    /// The union of `inline` (serving [`NAMED_DATA_SCOPE`]) and `external`.
    pub fn new(inline: Arc<MemoryProvider>, external: Option<SharedProvider>) -> Self {
        Self { inline, external }
    }

    /// Whether the `.pte` itself holds `key`.
    fn inline_has(&self, scope: &str, key: &str) -> bool {
        scope == NAMED_DATA_SCOPE && self.inline.describe(scope, key).is_some()
    }

    fn external(&self, scope: &str) -> StatusResult<&SharedProvider> {
        self.external.as_ref().ok_or_else(|| {
            Status::new(
                StatusCode::NotFound,
                format!(
                    "scope {scope:?}: the key is not in the .pte's named data and no external \
                     data (.ptd) was given"
                ),
            )
        })
    }

    /// Splits `requests` into the `.pte`'s and the external provider's, with each one's
    /// positions in the original order.
    fn split(
        &self,
        scope: &str,
        requests: &[SpanRequest],
    ) -> (Vec<usize>, Vec<SpanRequest>, Vec<usize>, Vec<SpanRequest>) {
        let (mut inline_at, mut inline, mut external_at, mut external) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (at, request) in requests.iter().enumerate() {
            if self.inline_has(scope, &request.key) {
                inline_at.push(at);
                inline.push(request.clone());
            } else {
                external_at.push(at);
                external.push(request.clone());
            }
        }
        (inline_at, inline, external_at, external)
    }
}

impl ParameterProvider for NamedDataUnion {
    /// Notifies both providers; the first error after notifying both.
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        let inline = self.inline.notify(signal);
        let external = self.external.as_ref().map_or(Ok(()), |e| e.notify(signal));
        inline.and(external)
    }

    /// The named-data scope always (a key either resolves or is `NOT_FOUND` naming where it
    /// was looked for); other scopes as the external provider says.
    fn query_support(&self, scope: &str) -> bool {
        scope == NAMED_DATA_SCOPE
            || self.inline.query_support(scope)
            || self
                .external
                .as_ref()
                .is_some_and(|e| e.query_support(scope))
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        if self.inline_has(scope, key) {
            return self.inline.describe(scope, key);
        }
        self.external.as_ref()?.describe(scope, key)
    }

    /// The `.pte`'s keys, then the external provider's that the `.pte` does not hold.
    fn list_keys(&self, scope: &str) -> Option<Vec<String>> {
        let inline = self.inline.list_keys(scope);
        let external = self.external.as_ref().and_then(|e| e.list_keys(scope));
        match (inline, external) {
            (None, None) => None,
            (inline, external) => {
                let mut keys = inline.unwrap_or_default();
                let seen: std::collections::HashSet<String> = keys.iter().cloned().collect();
                keys.extend(external.into_iter().flatten().filter(|k| !seen.contains(k)));
                Some(keys)
            }
        }
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            let (inline_at, inline, external_at, external) = self.split(scope, requests);
            let mut slots: Vec<Option<LoadedSpan>> = vec![None; requests.len()];
            if !inline.is_empty() {
                let loaded = self.inline.load(allocator, scope, &inline).await?;
                for (at, span) in inline_at.into_iter().zip(loaded) {
                    slots[at] = Some(span);
                }
            }
            if !external.is_empty() {
                let loaded = self
                    .external(scope)?
                    .load(allocator, scope, &external)
                    .await?;
                for (at, span) in external_at.into_iter().zip(loaded) {
                    slots[at] = Some(span);
                }
            }
            slots
                .into_iter()
                .map(|slot| {
                    slot.ok_or_else(|| {
                        Status::new(StatusCode::Internal, "a provider returned too few spans")
                    })
                })
                .collect()
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let (_, inline, _, external) = self.split(scope, requests);
            if !inline.is_empty() {
                self.inline.gather(scope, target, &inline).await?;
            }
            if !external.is_empty() {
                self.external(scope)?
                    .gather(scope, target, &external)
                    .await?;
            }
            Ok(())
        })
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let (_, inline, _, external) = self.split(scope, requests);
            if !inline.is_empty() {
                self.inline.scatter(source, scope, &inline).await?;
            }
            if !external.is_empty() {
                self.external(scope)?
                    .scatter(source, scope, &external)
                    .await?;
            }
            Ok(())
        })
    }
}
