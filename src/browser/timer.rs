//! A sleep that works on any executor: `setTimeout` in the browser (window or worker), a
//! sleeping helper thread natively. Used for retry backoff and idle timeouts, never on a hot
//! path. Also a wall clock in milliseconds on both platforms (`now_ms`: idle timeouts, the
//! generator's timings), and in the browser `setTimeout`'s limit (`MAX_TIMEOUT_MS`).

use crate::send_sync::LocalBoxFuture;
use std::time::Duration;

#[cfg(web)]
pub use platform::MAX_TIMEOUT_MS;
pub use platform::now_ms;

#[cfg(web)]
mod platform {
    use crate::send_sync::LocalBoxFuture;
    use std::time::Duration;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        /// The global `setTimeout` (window and worker scopes alike).
        #[wasm_bindgen(js_name = setTimeout)]
        fn set_timeout(handler: &js_sys::Function, milliseconds: f64) -> JsValue;
    }

    /// The longest delay one `setTimeout` honours (a signed 32-bit count of milliseconds; a
    /// longer one overflows and fires at once).
    pub const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;

    pub fn sleep(duration: Duration) -> LocalBoxFuture<'static, ()> {
        let mut left = duration.as_secs_f64() * 1000.0;
        Box::pin(async move {
            loop {
                let step = left.min(MAX_TIMEOUT_MS);
                let promise = js_sys::Promise::new(&mut |resolve, _reject| {
                    set_timeout(&resolve, step);
                });
                let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
                left -= step;
                if left <= 0.0 {
                    break;
                }
            }
        })
    }

    /// Milliseconds on the browser's clock, for idle timeouts.
    pub fn now_ms() -> f64 {
        js_sys::Date::now()
    }
}

#[cfg(native)]
mod platform {
    use crate::send_sync::LocalBoxFuture;
    use std::time::Duration;

    pub fn sleep(duration: Duration) -> LocalBoxFuture<'static, ()> {
        let (done, wait) = futures_channel::oneshot::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("webdelegate-timer".into())
            .spawn(move || {
                std::thread::sleep(duration);
                let _ = done.send(());
            });
        Box::pin(async move {
            match spawned {
                // A dropped sender (cannot happen short of a panic in the thread) also ends
                // the wait.
                Ok(_) => {
                    let _ = wait.await;
                }
                // No thread to be had: block instead of returning early and retrying at once.
                Err(_) => std::thread::sleep(duration),
            }
        })
    }

    /// Milliseconds since the Unix epoch, like the browser's `Date.now()`.
    pub fn now_ms() -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Resolves after `duration` (in the browser, a duration past `MAX_TIMEOUT_MS` waits through
/// several timers).
pub fn sleep(duration: Duration) -> LocalBoxFuture<'static, ()> {
    platform::sleep(duration)
}
