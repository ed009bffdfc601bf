//! `ChatTemplate`: a Jinja chat template rendered as transformers' `apply_chat_template`
//! renders it ([`crate::text::chat_template`]), on its own (for a template that is not in a
//! model file, or to compare renders); `Generator.applyChatTemplate` shares its options.

use crate::error::{Error, Result};
use crate::text::{ChatRender, SpecialTokens};
use crate::web::edge::errors::to_js_error;
use crate::web::edge::fields::{boolean, optional, string};
use wasm_bindgen::prelude::*;

fn json(value: Option<JsValue>, what: &str) -> Result<Option<serde_json::Value>> {
    match value {
        None => Ok(None),
        Some(value) if value.is_undefined() || value.is_null() => Ok(None),
        Some(value) => serde_wasm_bindgen::from_value(value)
            .map(Some)
            .map_err(|e| Error::invalid_argument(format!("{what} must be plain JSON data: {e}"))),
    }
}

fn invalid(status: crate::error::Status) -> Error {
    Error::invalid_argument(status.message().to_owned())
}

/// Renders `messages` with `options` (`addGenerationPrompt`, default true; `tools`;
/// `chatTemplateKwargs`; `now`, milliseconds since the epoch for `strftime_now`) through
/// `render`.
pub(super) fn render_messages(
    messages: JsValue,
    options: &JsValue,
    render: impl FnOnce(&ChatRender<'_>) -> Result<String>,
) -> Result<String> {
    let messages = json(Some(messages), "messages")?;
    let tools = json(optional(options, "tools"), "tools")?;
    let extra = json(
        optional(options, "chatTemplateKwargs"),
        "chatTemplateKwargs",
    )?;
    let add = boolean(options, "addGenerationPrompt")
        .map_err(invalid)?
        .unwrap_or(true);
    let now_ms = optional(options, "now")
        .map(|v| {
            v.as_f64()
                .filter(|n| n.is_finite())
                .ok_or_else(|| Error::invalid_argument("now must be a number of milliseconds"))
        })
        .transpose()?;
    render(&ChatRender {
        messages: messages.as_ref(),
        tools: tools.as_ref(),
        documents: None,
        add_generation_prompt: add,
        extra: extra.as_ref(),
        now_ms,
    })
}

/// A compiled chat template.
#[wasm_bindgen(js_name = ChatTemplate)]
pub struct JsChatTemplate {
    template: crate::text::ChatTemplate,
}

#[wasm_bindgen(js_class = ChatTemplate)]
impl JsChatTemplate {
    /// Compiles `source`; `specialTokens` gives `bos_token`, `eos_token`, `unk_token`,
    /// `pad_token` (strings; absent ones are undefined in the template). Throws
    /// `InvalidArgument` for a template that does not compile (naming its line) or is over
    /// 1 MiB.
    #[wasm_bindgen(constructor)]
    pub fn new(
        source: &str,
        #[wasm_bindgen(js_name = specialTokens, unchecked_param_type = "ChatSpecialTokens")]
        special_tokens: Option<JsValue>,
    ) -> std::result::Result<JsChatTemplate, JsValue> {
        let tokens = special_tokens.unwrap_or(JsValue::UNDEFINED);
        let text = |key: &str| string(&tokens, key).map_err(|s| to_js_error(invalid(s)));
        let specials = SpecialTokens {
            bos: text("bos_token")?,
            eos: text("eos_token")?,
            unk: text("unk_token")?,
            pad: text("pad_token")?,
        };
        crate::text::ChatTemplate::new(source, specials)
            .map(|template| Self { template })
            .map_err(to_js_error)
    }

    /// The prompt text for `messages` (OpenAI-shaped `{role, content, ...}` objects).
    /// `options`: `addGenerationPrompt` (default true), `tools`, `chatTemplateKwargs`, `now`
    /// (milliseconds since the epoch that `strftime_now` formats; default: now). Throws
    /// `InvalidArgument` for bad messages or a template that refuses them.
    pub fn render(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatMessage[]")] messages: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ApplyChatTemplateOptions")] options: Option<JsValue>,
    ) -> std::result::Result<String, JsValue> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        render_messages(messages, &options, |request| self.template.render(request))
            .map_err(to_js_error)
    }
}
