//! JavaScript for the in-browser tests without a JavaScript module of their own.
//!
//! `#[wasm_bindgen(inline_js = ...)]` would add one more ES module to the page that
//! wasm-bindgen-test-runner serves, on top of the crate's own JavaScript snippets. The runner's
//! HTTP server (rouille over tiny_http 0.12) starts four worker threads and, when several
//! connections arrive at once, can queue a connection behind the four that Chromium keeps
//! alive: the page then waits for that module until the renderer times out (300 s; seen as
//! "Loading scripts..." and `Timed out receiving message from renderer`). Five modules fetched
//! in parallel hit it about one load in three. So the tests build their JavaScript with
//! `new Function` instead: the page fetches the crate's snippets only.
#![allow(dead_code)]

use js_sys::{Array, Function, Reflect};
use wasm_bindgen::prelude::*;

/// Functions defined by a piece of JavaScript source (plain `function` declarations, no
/// `export`), looked up by name.
pub struct Script(JsValue);

impl Script {
    /// Evaluates `source` once and keeps the functions `names` it declares.
    pub fn new(source: &str, names: &[&str]) -> Self {
        let body = format!("{source}\nreturn {{ {} }};", names.join(", "));
        let functions = Function::new_no_args(&body)
            .call0(&JsValue::NULL)
            .expect("the test's JavaScript evaluates");
        Script(functions)
    }

    /// Calls the function `name` with `args` and returns its result.
    pub fn call(&self, name: &str, args: &[JsValue]) -> JsValue {
        let function: Function = Reflect::get(&self.0, &JsValue::from_str(name))
            .expect("the function exists")
            .dyn_into()
            .expect("it is a function");
        let args: Array = args.iter().collect();
        function
            .apply(&JsValue::NULL, &args)
            .expect("the test's JavaScript does not throw")
    }
}
