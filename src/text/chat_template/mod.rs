//! A model's chat template (GGUF `tokenizer.chat_template`, a Jinja program) rendered the way
//! Hugging Face's `apply_chat_template` renders it with Python's jinja2, on the `minijinja`
//! engine:
//! - the environment transformers builds: `trim_blocks`, `lstrip_blocks`, loop controls
//!   (`break`/`continue`), `raise_exception(message)`, `strftime_now(format)`, `namespace`,
//!   `dict`, its `tojson` filter (`json.dumps(x, ensure_ascii=False)`, not the HTML-escaping
//!   one), Python's string, list and dict methods (`minijinja-contrib`'s pycompat), and
//!   Python's text forms when a value is printed (`True`, `None`, `{'a': 1}`; [`python`]);
//! - the variables transformers passes: `messages`, `tools` and `documents` (`None` when not
//!   given, as there), `add_generation_prompt`, the vocabulary's `bos_token`, `eos_token`,
//!   `unk_token` and `pad_token`, and any extra variables the caller adds
//!   (`enable_thinking`, ...).
//!
//! Templates come from files and servers, so they are untrusted programs: the source is at
//! most [`MAX_TEMPLATE_BYTES`], a render runs on a fuel budget ([`RENDER_FUEL`]: loops and
//! allocations are charged) with a recursion limit ([`RECURSION_LIMIT`]) and its output is at
//! most [`MAX_RENDERED_BYTES`]. Every failure is an `InvalidArgument` error naming the template
//! line where there is one; nothing panics.

pub mod python;

use crate::error::{Error, Result};
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, ErrorKind, State};
use python::{DumpOptions, from_json};
use std::collections::BTreeMap;

/// The longest template source accepted (the largest real templates are about 30 KB).
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;
/// The longest rendered prompt accepted (far beyond any context a browser model holds).
pub const MAX_RENDERED_BYTES: usize = 16 << 20;
/// The fuel of one render (minijinja charges instructions and allocations; real templates
/// over long conversations use a few thousand).
pub const RENDER_FUEL: u64 = 5_000_000;
/// Nested calls, loops and blocks a render may reach.
pub const RECURSION_LIMIT: usize = 100;

/// The name templates are compiled under (errors say "chat template line N").
const NAME: &str = "chat template";

/// The vocabulary's special-token texts a template sees (`None`: the variable is undefined).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// `bos_token`.
    pub bos: Option<String>,
    /// `eos_token`.
    pub eos: Option<String>,
    /// `unk_token`.
    pub unk: Option<String>,
    /// `pad_token`.
    pub pad: Option<String>,
}

/// One render: the conversation and what else the template sees.
#[derive(Clone, Debug, Default)]
pub struct ChatRender<'a> {
    /// The messages: an array of objects, each with a string `role` (`content` a string, a list
    /// of parts, or absent; any other fields, such as `tool_calls`, pass through).
    pub messages: Option<&'a serde_json::Value>,
    /// Tool definitions (JSON schemas), or `None`.
    pub tools: Option<&'a serde_json::Value>,
    /// Documents for retrieval templates, or `None`.
    pub documents: Option<&'a serde_json::Value>,
    /// Whether to end with the header of an assistant turn.
    pub add_generation_prompt: bool,
    /// Further variables (an object), e.g. `{"enable_thinking": false}`.
    pub extra: Option<&'a serde_json::Value>,
    /// The time `strftime_now` formats, in milliseconds since the Unix epoch (UTC); `None`:
    /// now.
    pub now_ms: Option<f64>,
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    specials: SpecialTokens,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("specials", &self.specials)
            .finish_non_exhaustive()
    }
}

/// Our error for a minijinja error: `InvalidArgument`, naming the line.
fn template_error(error: &minijinja::Error) -> Error {
    let what = match error.kind() {
        ErrorKind::OutOfFuel => {
            "the template ran out of its work budget (a loop that does not end?)".to_owned()
        }
        ErrorKind::WriteFailure => {
            format!("the rendered prompt is longer than {MAX_RENDERED_BYTES} bytes")
        }
        _ => match error.detail() {
            Some(detail) if error.kind() == ErrorKind::InvalidOperation => detail.to_owned(),
            Some(detail) => format!("{}: {detail}", error.kind()),
            None => error.kind().to_string(),
        },
    };
    let line = error
        .line()
        .map_or_else(String::new, |line| format!(" line {line}"));
    Error::invalid_argument(format!("{NAME}{line}: {what}"))
}

/// The current time in milliseconds since the Unix epoch.
fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: &Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let invalid = |message: String| minijinja::Error::new(ErrorKind::InvalidOperation, message);
    let mut options = DumpOptions::default();
    if let Some(ascii) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        options.ensure_ascii = ascii;
    }
    if let Some(indent) = kwargs.get::<Option<Value>>("indent")? {
        options.indent = match indent.kind() {
            ValueKind::None | ValueKind::Undefined => None,
            ValueKind::String => Some(indent.as_str().unwrap_or_default().to_owned()),
            ValueKind::Number => {
                let n = i64::try_from(indent.clone())
                    .map_err(|_| invalid("tojson: indent must be an integer".into()))?;
                Some(" ".repeat(usize::try_from(n.clamp(0, 64)).unwrap_or(0)))
            }
            _ => {
                return Err(invalid(
                    "tojson: indent must be an integer or a string".into(),
                ));
            }
        };
    }
    if let Some(separators) = kwargs.get::<Option<Value>>("separators")?
        && !separators.is_none()
    {
        let parts: Vec<String> = separators
            .try_iter()
            .map_err(|_| invalid("tojson: separators must be a pair of strings".into()))?
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| invalid("tojson: separators must be a pair of strings".into()))?;
        let [item, key] = <[String; 2]>::try_from(parts)
            .map_err(|_| invalid("tojson: separators must be a pair of strings".into()))?;
        options.separators = Some((item, key));
    }
    if let Some(sort) = kwargs.get::<Option<bool>>("sort_keys")? {
        options.sort_keys = sort;
    }
    kwargs.assert_all_used()?;
    python::dumps(value, &options)
        .map(Value::from)
        .map_err(invalid)
}

/// A writer that refuses to grow past [`MAX_RENDERED_BYTES`].
struct BoundedWriter(Vec<u8>);

impl std::io::Write for BoundedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len().saturating_add(buf.len()) > MAX_RENDERED_BYTES {
            return Err(std::io::Error::other("rendered prompt too long"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `source` with transformers' `{% generation %}` / `{% endgeneration %}` block tags (which mark
/// the assistant's text for a training mask and render their body unchanged) turned into
/// `{% if true %}` / `{% endif %}`, keeping the tags' whitespace control.
fn without_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find("{%") {
        out.push_str(&rest[..at + 2]);
        rest = &rest[at + 2..];
        let control = rest.len() - rest.trim_start_matches(['-', '+']).len();
        let (marks, after) = rest.split_at(control.min(1));
        let body = after.trim_start();
        let spaces = &after[..after.len() - body.len()];
        let word_end = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(body.len());
        let replacement = match &body[..word_end] {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        if let Some(replacement) = replacement {
            out.push_str(marks);
            out.push_str(spaces);
            out.push_str(replacement);
            rest = &body[word_end..];
        }
    }
    out.push_str(rest);
    out
}

impl ChatTemplate {
    /// Compiles `source`, the template seeing `specials`.
    ///
    /// # Errors
    /// `InvalidArgument` for a source over [`MAX_TEMPLATE_BYTES`] or with a syntax error
    /// (naming its line).
    pub fn new(source: &str, specials: SpecialTokens) -> Result<Self> {
        if source.len() > MAX_TEMPLATE_BYTES {
            return Err(Error::invalid_argument(format!(
                "the chat template has {} bytes; at most {MAX_TEMPLATE_BYTES} are accepted",
                source.len()
            )));
        }
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(|e| template_error(&e))?,
        );
        env.set_fuel(Some(RENDER_FUEL));
        env.set_recursion_limit(RECURSION_LIMIT);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_formatter(
            |out: &mut minijinja::Output<'_>, _state: &mut State<'_, '_>, value: &Value| {
                let mut text = String::new();
                python::write_str(value, &mut text);
                out.write_str(&text).map_err(minijinja::Error::from)
            },
        );
        env.add_filter("tojson", tojson);
        // Python's iter(): None is not iterable (minijinja iterates it as empty); jinja2's
        // Undefined is.
        env.add_test("iterable", |value: &Value| {
            !value.is_none() && value.try_iter().is_ok()
        });
        env.add_function(
            "raise_exception",
            |message: Value| -> std::result::Result<Value, minijinja::Error> {
                let mut text = String::new();
                python::write_str(&message, &mut text);
                Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    format!("the template refused the conversation: {text}"),
                ))
            },
        );
        env.add_function("dict", |kwargs: Kwargs| -> Value {
            Value::from(
                kwargs
                    .args()
                    .map(|key| {
                        (
                            key.to_owned(),
                            kwargs.peek::<Value>(key).unwrap_or_default(),
                        )
                    })
                    .collect::<BTreeMap<_, _>>(),
            )
        });
        env.add_template_owned(NAME, without_generation_tags(source))
            .map_err(|e| template_error(&e))?;
        Ok(Self { env, specials })
    }

    /// Renders one conversation.
    ///
    /// # Errors
    /// `InvalidArgument` for messages that are not an array of objects with a string `role`,
    /// `extra` that is not an object, or a render that fails (`raise_exception`, an undefined
    /// value used as a mapping, the work budget or the output bound), naming the template line.
    pub fn render(&self, request: &ChatRender<'_>) -> Result<String> {
        let empty = serde_json::Value::Array(Vec::new());
        let messages = request.messages.unwrap_or(&empty);
        let list = messages
            .as_array()
            .ok_or_else(|| Error::invalid_argument("messages must be an array"))?;
        for (i, message) in list.iter().enumerate() {
            let role = message.get("role").and_then(serde_json::Value::as_str);
            if !message.is_object() || role.is_none() {
                return Err(Error::invalid_argument(format!(
                    "messages[{i}] must be an object with a string role"
                )));
            }
        }
        let none = Value::from(());
        let json = |v: Option<&serde_json::Value>| v.map_or_else(|| none.clone(), from_json);
        let text = |v: &Option<String>| v.as_deref().map_or(Value::UNDEFINED, Value::from);
        let now = request.now_ms.unwrap_or_else(now_ms);
        let strftime_now =
            Value::from_function(move |format: String| python::strftime(&format, now));
        let mut context: Vec<(String, Value)> = vec![
            ("messages".into(), from_json(messages)),
            ("tools".into(), json(request.tools)),
            ("documents".into(), json(request.documents)),
            (
                "add_generation_prompt".into(),
                Value::from(request.add_generation_prompt),
            ),
            ("bos_token".into(), text(&self.specials.bos)),
            ("eos_token".into(), text(&self.specials.eos)),
            ("unk_token".into(), text(&self.specials.unk)),
            ("pad_token".into(), text(&self.specials.pad)),
            ("strftime_now".into(), strftime_now),
        ];
        if let Some(extra) = request.extra {
            let object = extra.as_object().ok_or_else(|| {
                Error::invalid_argument("the extra template variables must be an object")
            })?;
            for (key, value) in object {
                context.push((key.clone(), from_json(value)));
            }
        }
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| template_error(&e))?;
        let mut writer = BoundedWriter(Vec::new());
        template
            .render_captured_to(
                Value::from(context.into_iter().collect::<BTreeMap<_, _>>()),
                &mut writer,
            )
            .map_err(|e| template_error(&e))?;
        String::from_utf8(writer.0).map_err(|_| Error::internal("the rendered prompt is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use serde_json::json;

    fn specials() -> SpecialTokens {
        SpecialTokens {
            bos: Some("<bos>".into()),
            eos: Some("<eos>".into()),
            ..SpecialTokens::default()
        }
    }

    fn render(source: &str, messages: &serde_json::Value) -> Result<String> {
        ChatTemplate::new(source, specials())?.render(&ChatRender {
            messages: Some(messages),
            add_generation_prompt: true,
            now_ms: Some(0.0),
            ..ChatRender::default()
        })
    }

    #[test]
    fn a_template_renders_with_transformers_environment() {
        let source = "{{ bos_token }}{% for m in messages %}\n{{ m['role'] | upper }}: {{ m.content.strip() }}\n{% endfor %}\n{% if add_generation_prompt %}ASSISTANT:{% endif %}{{ tools is none }} {{ strftime_now('%Y') }}";
        let out = render(source, &json!([{"role": "user", "content": " hi "}])).unwrap();
        assert_eq!(out, "<bos>USER: hi\nASSISTANT:True 1970");
    }

    #[test]
    fn template_failures_are_coded_and_name_the_line() {
        let error = render("a\n{% if %}", &json!([])).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        assert!(error.message().contains("line 2"), "{error}");
        let error = render(
            "x\n{{ raise_exception('roles must alternate') }}",
            &json!([]),
        )
        .unwrap_err();
        assert!(error.message().contains("roles must alternate"), "{error}");
        assert!(error.message().contains("line 2"), "{error}");
        let error = render(
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
            &json!([]),
        )
        .unwrap_err();
        assert!(
            error.message().contains("budget") || error.message().contains("longer"),
            "{error}"
        );
        let error = render(
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            &json!([]),
        )
        .unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        let error = render("{{ 'x' * 100000000 }}", &json!([])).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        let error = render("{{ m }}", &json!([{"content": "no role"}])).unwrap_err();
        assert!(error.message().contains("messages[0]"), "{error}");
        let deep = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(
            render(&deep, &json!([])).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn generation_tags_render_their_body() {
        let source = "a{%- generation -%} b {% endgeneration %}c{% if x %}{% endif %}";
        assert_eq!(
            without_generation_tags(source),
            "a{%- if true -%} b {% endif %}c{% if x %}{% endif %}"
        );
        assert_eq!(render(source, &json!([])).unwrap(), "ab c");
    }

    #[test]
    fn tojson_is_pythons_json_dumps() {
        let out = render(
            "{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}|{{ messages[0].content | tojson(ensure_ascii=True) }}",
            &json!([{"role": "user", "content": "<é>"}]),
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"role\": \"user\", \"content\": \"<é>\"}|{\n  \"role\": \"user\",\n  \"content\": \"<é>\"\n}|\"<\\u00e9>\""
        );
    }
}
