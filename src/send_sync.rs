//! The platform's thread bounds, in one leaf module every layer can use without importing
//! another layer for them.
//!
//! Natively the runtime's shared objects are `Send + Sync` (tests drive them from any thread);
//! in a browser nothing crosses threads and browser objects are neither, so the bound is empty.

use std::future::Future;
use std::pin::Pin;

/// A boxed future that may hold browser objects (so it is not `Send`).
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// `Send + Sync` natively, nothing on the web, where nothing crosses threads and browser objects
/// are neither.
#[cfg(native)]
pub trait MaybeSendSync: Send + Sync {}
#[cfg(native)]
impl<T: Send + Sync + ?Sized> MaybeSendSync for T {}

/// `Send + Sync` natively, nothing on the web, where nothing crosses threads and browser objects
/// are neither.
#[cfg(web)]
pub trait MaybeSendSync {}
#[cfg(web)]
impl<T: ?Sized> MaybeSendSync for T {}
