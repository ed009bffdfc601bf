//! The page's lifecycle as `notify(Suspend | Resume | LowMemory)` for every attached parameter
//! provider and every registered backend.
//!
//! What it promises:
//! - **Automatic wiring**, installed when the module starts: in a window, `visibilitychange`
//!   (hidden / visible), `freeze` / `resume`, and `pagehide` / `pageshow` (back/forward-cache
//!   restores included); in a dedicated worker, the messages a page's [`forward_lifecycle`]
//!   posts. `setLifecycleAutomatic(false)` removes it (and clears the reasons it had set).
//! - **Reasons, not toggles** (`crate::lifecycle::SuspendReasons`): the runtime is suspended
//!   while any reason holds (hidden, frozen, pagehide, app), so signals are idempotent and
//!   ordered — a second `Suspend` is no suspend, a `Resume` without one is a no-op, and a
//!   frozen-while-hidden page does not resume when unfrozen but still hidden.
//! - The app adds its own reason with `lifecycleNotify('suspend' | 'resume')`, and can send
//!   `'lowMemory'` (not a state: each one releases what it can). Every transition reaches each
//!   attached provider (every `HttpParameterProvider`, `Embedder`, `Generator` and `Module`
//!   attaches its provider when made; one made while suspended starts suspended) and every
//!   registered backend.
//! - Listeners (`addLifecycleListener`) get one event per signal sent: the signal, the DOM or
//!   app event behind it, the reasons now held, and what was released.
//!
//! Nothing here holds the state borrowed while it calls out (providers, backends, listeners), so
//! a listener may call back into the lifecycle. Its TypeScript shapes are in `types`.

mod types;

use crate::lifecycle::{Released, Signal, SuspendReason, SuspendReasons, Transition};
use crate::params::http::HttpProvider;
use crate::registry;
use crate::web::edge::errors::to_js_error;
use js_sys::{Function, Object, Reflect};
use std::cell::RefCell;
use std::sync::{Arc, Weak};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::EventTarget;

type JsResult<T> = std::result::Result<T, JsValue>;

/// The key of the messages a page posts to a worker (`{webdelegateLifecycle: event}`).
pub const MESSAGE_KEY: &str = "webdelegateLifecycle";

/// What one event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Set(SuspendReason),
    Clear(SuspendReason),
    LowMemory,
}

/// The events understood (DOM-derived names, and the app's signals).
fn effect_of(event: &str) -> Option<Effect> {
    Some(match event {
        "hidden" => Effect::Set(SuspendReason::Hidden),
        "visible" => Effect::Clear(SuspendReason::Hidden),
        "freeze" => Effect::Set(SuspendReason::Frozen),
        "resume" => Effect::Clear(SuspendReason::Frozen),
        "pagehide" => Effect::Set(SuspendReason::PageHidden),
        "pageshow" => Effect::Clear(SuspendReason::PageHidden),
        "suspend" => Effect::Set(SuspendReason::App),
        "app-resume" => Effect::Clear(SuspendReason::App),
        "lowMemory" => Effect::LowMemory,
        _ => return None,
    })
}

#[derive(Default)]
struct Hub {
    reasons: SuspendReasons,
    providers: Vec<Weak<HttpProvider>>,
    listeners: Vec<Function>,
    wiring: Option<Wiring>,
    suspends: u32,
    resumes: u32,
    low_memory: u32,
    last_suspend: Released,
    last_low_memory: Released,
}

thread_local! {
    static HUB: RefCell<Hub> = RefCell::new(Hub::default());
}

fn with_hub<R>(f: impl FnOnce(&mut Hub) -> R) -> R {
    HUB.with(|hub| f(&mut hub.borrow_mut()))
}

/// A JavaScript event listener made from a Rust closure.
type Listener = Closure<dyn FnMut(JsValue)>;

/// Event listeners added to DOM targets; removed when dropped.
struct Wiring {
    added: Vec<(EventTarget, &'static str, Listener)>,
}

impl Wiring {
    fn listen(&mut self, target: &JsValue, event: &'static str, f: impl FnMut(JsValue) + 'static) {
        let Some(target) = target.dyn_ref::<EventTarget>() else {
            return;
        };
        let closure = Listener::new(f);
        if target
            .add_event_listener_with_callback(event, closure.as_ref().unchecked_ref())
            .is_ok()
        {
            self.added.push((target.clone(), event, closure));
        }
    }
}

impl Drop for Wiring {
    fn drop(&mut self) {
        for (target, event, closure) in &self.added {
            let _ =
                target.remove_event_listener_with_callback(event, closure.as_ref().unchecked_ref());
        }
    }
}

fn get(object: &JsValue, key: &str) -> Option<JsValue> {
    Reflect::get(object, &JsValue::from_str(key))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

fn document_hidden(document: &JsValue) -> bool {
    get(document, "visibilityState")
        .and_then(|v| v.as_string())
        .as_deref()
        == Some("hidden")
}

/// Listens to the window's lifecycle events, calling `on(event name)` for each.
fn wire_window(on: impl Fn(&'static str) + Clone + 'static) -> Option<Wiring> {
    let global = js_sys::global();
    let document = get(&global, "document")?;
    let mut wiring = Wiring { added: Vec::new() };
    let doc = document.clone();
    let f = on.clone();
    wiring.listen(&document, "visibilitychange", move |_| {
        f(if document_hidden(&doc) {
            "hidden"
        } else {
            "visible"
        })
    });
    for event in ["freeze", "resume"] {
        let f = on.clone();
        wiring.listen(&document, event, move |_| f(event));
    }
    for event in ["pagehide", "pageshow"] {
        let f = on.clone();
        wiring.listen(&global, event, move |_| f(event));
    }
    if document_hidden(&document) {
        on("hidden");
    }
    Some(wiring)
}

/// In a worker: listens to the messages [`forward_lifecycle`] posts.
fn wire_worker() -> Option<Wiring> {
    let global = js_sys::global();
    get(&global, "WorkerGlobalScope")?;
    let mut wiring = Wiring { added: Vec::new() };
    wiring.listen(&global, "message", |event| {
        let name = get(&event, "data")
            .and_then(|data| get(&data, MESSAGE_KEY))
            .and_then(|v| v.as_string());
        if let Some(name) = name {
            handle(&name);
        }
    });
    Some(wiring)
}

/// Installs the automatic wiring (at module start).
pub(crate) fn install_automatic() {
    let wiring = wire_window(|event| {
        handle(event);
    })
    .or_else(wire_worker);
    with_hub(|hub| hub.wiring = wiring);
}

/// Attaches `provider`: it gets every later signal (weakly held), and `Suspend` at once when
/// the runtime is suspended now.
pub(crate) fn attach(provider: &Arc<HttpProvider>) {
    let suspended = with_hub(|hub| {
        hub.providers.retain(|p| p.strong_count() > 0);
        hub.providers.push(Arc::downgrade(provider));
        hub.reasons.is_suspended()
    });
    if suspended {
        provider.signal(Signal::Suspend);
    }
}

/// Applies one event; returns the signal it sent (if any) and what that released.
fn handle(event: &str) -> Option<(Signal, Released)> {
    let effect = effect_of(event)?;
    let (signal, providers) = with_hub(|hub| {
        let signal = match effect {
            Effect::Set(reason) => match hub.reasons.set(reason) {
                Transition::Suspend => Some(Signal::Suspend),
                _ => None,
            },
            Effect::Clear(reason) => match hub.reasons.clear(reason) {
                Transition::Resume => Some(Signal::Resume),
                _ => None,
            },
            Effect::LowMemory => Some(Signal::LowMemory),
        };
        hub.providers.retain(|p| p.strong_count() > 0);
        let providers: Vec<Arc<HttpProvider>> =
            hub.providers.iter().filter_map(Weak::upgrade).collect();
        signal.map(|signal| (signal, providers))
    })?;
    let mut released = Released::default();
    for provider in &providers {
        released.add(provider.signal(signal));
    }
    released.add(registry::notify_backends(signal));
    let listeners = with_hub(|hub| {
        match signal {
            Signal::Suspend => {
                hub.suspends += 1;
                hub.last_suspend = released;
            }
            Signal::Resume => hub.resumes += 1,
            Signal::LowMemory => {
                hub.low_memory += 1;
                hub.last_low_memory = released;
            }
        }
        hub.listeners.clone()
    });
    let detail = event_object(signal, event, &released);
    for listener in listeners {
        // A throwing listener must not stop the others (nor the signal).
        let _ = listener.call1(&JsValue::NULL, &detail);
    }
    Some((signal, released))
}

fn signal_name(signal: Signal) -> &'static str {
    match signal {
        Signal::Suspend => "suspend",
        Signal::Resume => "resume",
        Signal::LowMemory => "lowMemory",
    }
}

fn set(object: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(object, &JsValue::from_str(key), &value.into());
}

fn released_object(released: &Released) -> Object {
    let object = Object::new();
    set(&object, "gpuBytes", released.gpu_bytes as f64);
    set(&object, "hostBytes", released.host_bytes as f64);
    set(&object, "requestsAborted", released.requests_aborted as f64);
    object
}

fn reasons_array() -> js_sys::Array {
    with_hub(|hub| hub.reasons.names())
        .into_iter()
        .map(JsValue::from_str)
        .collect()
}

fn event_object(signal: Signal, event: &str, released: &Released) -> JsValue {
    let object = Object::new();
    set(&object, "signal", signal_name(signal));
    set(&object, "event", event);
    set(
        &object,
        "suspended",
        with_hub(|hub| hub.reasons.is_suspended()),
    );
    set(&object, "reasons", reasons_array());
    set(&object, "released", released_object(released));
    object.into()
}

/// The event name of an app signal (`'resume'` is the app's own, not the DOM's `resume`).
fn app_event(signal: &str) -> JsResult<&'static str> {
    match signal {
        "suspend" => Ok("suspend"),
        "lowMemory" => Ok("lowMemory"),
        "resume" => Ok("app-resume"),
        other => Err(to_js_error(crate::error::Error::invalid_argument(format!(
            "unknown signal {other:?} (suspend | resume | lowMemory)"
        )))),
    }
}

/// Sends an app signal: `'suspend'` (adds the app's reason), `'resume'` (clears it; the runtime
/// resumes when no page reason holds either) or `'lowMemory'` (releases what can be fetched
/// again: staging memory, GPU activations and parameters). Resolves to
/// `{signal, suspended, reasons, released}`; `signal` is `null` when nothing changed (e.g. a
/// second `'suspend'`). Throws `INVALID_ARGUMENT` for another name.
#[wasm_bindgen(js_name = lifecycleNotify, unchecked_return_type = "LifecycleReport")]
pub fn lifecycle_notify(signal: &str) -> JsResult<JsValue> {
    let outcome = handle(app_event(signal)?);
    let object = Object::new();
    set(
        &object,
        "signal",
        outcome.map_or(JsValue::NULL, |(s, _)| signal_name(s).into()),
    );
    set(
        &object,
        "suspended",
        with_hub(|hub| hub.reasons.is_suspended()),
    );
    set(&object, "reasons", reasons_array());
    set(
        &object,
        "released",
        released_object(&outcome.map(|(_, r)| r).unwrap_or_default()),
    );
    Ok(object.into())
}

/// The lifecycle now: `{suspended, reasons, automatic, suspends, resumes, lowMemory,
/// lastSuspend: {gpuBytes, hostBytes, requestsAborted}, lastLowMemory: {...}, providers}`.
#[wasm_bindgen(js_name = lifecycleState, unchecked_return_type = "LifecycleState")]
pub fn lifecycle_state() -> JsValue {
    let object = Object::new();
    let reasons = reasons_array();
    with_hub(|hub| {
        hub.providers.retain(|p| p.strong_count() > 0);
        set(&object, "suspended", hub.reasons.is_suspended());
        set(&object, "reasons", reasons);
        set(&object, "automatic", hub.wiring.is_some());
        set(&object, "suspends", hub.suspends);
        set(&object, "resumes", hub.resumes);
        set(&object, "lowMemory", hub.low_memory);
        set(&object, "lastSuspend", released_object(&hub.last_suspend));
        set(
            &object,
            "lastLowMemory",
            released_object(&hub.last_low_memory),
        );
        set(&object, "providers", hub.providers.len() as u32);
    });
    object.into()
}

/// Turns the automatic wiring on or off. Off removes the listeners and clears the reasons they
/// had set (resuming unless the app's own reason holds); on installs them again (a hidden page
/// suspends at once).
#[wasm_bindgen(js_name = setLifecycleAutomatic)]
pub fn set_lifecycle_automatic(on: bool) {
    let had = with_hub(|hub| hub.wiring.take());
    drop(had);
    if on {
        install_automatic();
    } else {
        for event in ["visible", "resume", "pageshow"] {
            handle(event);
        }
    }
}

/// Calls `listener(event)` for every signal sent (see the module docs for the event's fields).
#[wasm_bindgen(js_name = addLifecycleListener)]
pub fn add_lifecycle_listener(
    #[wasm_bindgen(unchecked_param_type = "(event: LifecycleEvent) => void")] listener: Function,
) {
    with_hub(|hub| hub.listeners.push(listener));
}

/// Stops calling `listener`.
#[wasm_bindgen(js_name = removeLifecycleListener)]
pub fn remove_lifecycle_listener(
    #[wasm_bindgen(unchecked_param_type = "(event: LifecycleEvent) => void")] listener: &Function,
) {
    with_hub(|hub| hub.listeners.retain(|l| l != listener));
}

/// Forwards this page's lifecycle to a dedicated worker that runs webdelegate: the worker's
/// copy of the module (which wires itself to such messages when it starts) then suspends and
/// resumes with the page. Posts `{webdelegateLifecycle: event}` messages; the worker's own
/// `message` handlers see them too and should ignore that key.
#[wasm_bindgen]
pub struct LifecycleForwarder {
    worker: JsValue,
    wiring: Option<Wiring>,
}

fn post(worker: &JsValue, event: &str) {
    let message = Object::new();
    set(&message, MESSAGE_KEY, event);
    if let Some(post) = get(worker, "postMessage").and_then(|f| f.dyn_into::<Function>().ok()) {
        let _ = post.call1(worker, &message);
    }
}

/// Starts forwarding this page's lifecycle events to `worker` (a `Worker`, or anything with
/// `postMessage`). Throws `INVALID_ARGUMENT` when it has no `postMessage`, `NOT_SUPPORTED`
/// outside a window.
#[wasm_bindgen(js_name = forwardLifecycle)]
pub fn forward_lifecycle(
    #[wasm_bindgen(unchecked_param_type = "Worker | { postMessage(message: unknown): void }")]
    worker: JsValue,
) -> JsResult<LifecycleForwarder> {
    if get(&worker, "postMessage").is_none_or(|f| !f.is_function()) {
        return Err(to_js_error(crate::error::Error::invalid_argument(
            "forwardLifecycle needs a Worker (an object with postMessage)",
        )));
    }
    let target = worker.clone();
    let wiring = wire_window(move |event| post(&target, event)).ok_or_else(|| {
        to_js_error(crate::error::Error::not_supported(
            "forwardLifecycle runs in a window (it listens to the page's events)",
        ))
    })?;
    Ok(LifecycleForwarder {
        worker,
        wiring: Some(wiring),
    })
}

#[wasm_bindgen]
impl LifecycleForwarder {
    /// Sends an app signal to the worker (`'suspend'`, `'resume'` or `'lowMemory'`), as
    /// `lifecycleNotify` there would.
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        post(&self.worker, app_event(signal)?);
        Ok(())
    }

    /// Stops forwarding, and clears in the worker the page reasons forwarded so far.
    pub fn stop(&mut self) {
        if self.wiring.take().is_some() {
            for event in ["visible", "resume", "pageshow"] {
                post(&self.worker, event);
            }
        }
    }
}
