//! [`AbortListener`]: a JavaScript `AbortSignal` (`loadToGpu`'s `options.signal`) bridged to a
//! load's [`AbortHandle`], for as long as the listener lives.

use crate::error::Status;
use crate::params::StatusResult;
use crate::params::http::AbortHandle;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// Calls `abort` when a JS `AbortSignal` fires; detaches on drop.
pub struct AbortListener {
    signal: web_sys::AbortSignal,
    callback: Closure<dyn FnMut()>,
}

impl AbortListener {
    /// Listens to `signal` (which must be an `AbortSignal`), aborting `abort` when it fires
    /// (at once if it already has).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `signal` is not an `AbortSignal`.
    pub fn attach(signal: JsValue, abort: &AbortHandle) -> StatusResult<Self> {
        let signal = signal
            .dyn_into::<web_sys::AbortSignal>()
            .map_err(|_| Status::invalid_argument("options.signal must be an AbortSignal"))?;
        if signal.aborted() {
            abort.abort();
        }
        let handle = abort.clone();
        let callback = Closure::<dyn FnMut()>::new(move || handle.abort());
        signal
            .add_event_listener_with_callback("abort", callback.as_ref().unchecked_ref())
            .map_err(|e| {
                Status::invalid_argument(format!("cannot listen to the AbortSignal: {e:?}"))
            })?;
        Ok(Self { signal, callback })
    }
}

impl Drop for AbortListener {
    fn drop(&mut self) {
        let _ = self
            .signal
            .remove_event_listener_with_callback("abort", self.callback.as_ref().unchecked_ref());
    }
}
