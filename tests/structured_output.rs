//! Structured output end to end: random JSON schemas compiled by llguidance
//! (`models::grammar`), applied by the decoder program's `token_mask` op where the token is
//! chosen, on the tiny random-weight GGUFs of tests/fixtures/decoders and on Gemma 3 270M.
//!
//! Oracle: every output is parsed by serde_json and validated by the `jsonschema` crate (formats
//! asserted), a validator independent of the engine that produced it. A random-weight model
//! left unconstrained writes no JSON at all (checked below, so the validation can fail); the
//! WebGPU backend's constrained tokens equal the CPU backend's (greedy, same knobs).
#![cfg(not(target_arch = "wasm32"))]

mod gemma_support;
mod tiny_support;

use pollster::block_on;
use serde_json::{Value, json};
use std::sync::Arc;
use webdelegate::ErrorCode;
use webdelegate::backends::CpuBackend;
use webdelegate::backends::WebGpuBackend;
use webdelegate::models::decoder_session::DecoderSession;
use webdelegate::models::generator::{FinishReason, GenerateOptions, TextGenerator};
use webdelegate::models::grammar::{Constraint, GrammarCompiler, MAX_SCHEMA_DEPTH};
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::text::GgufTokenizer;

/// Positions of the tiny sessions (their files' training context).
const TINY_CONTEXT: u64 = 256;

/// xorshift64*: the schemas are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Bytes of `s` as a JSON string literal.
fn literal_bytes(s: &str) -> usize {
    serde_json::to_string(s).unwrap().len()
}

/// A random schema and the most bytes a value matching it takes in the compact layout
/// (`", "` and `": "`; a string character at most 6 bytes, as `\uXXXX`).
fn schema(rng: &mut Rng, depth: u32) -> (Value, usize) {
    let compound = depth > 0 && rng.below(3) > 0;
    if !compound {
        return leaf(rng);
    }
    match rng.below(4) {
        0 | 1 => {
            let names = [
                "name", "age", "tags", "id", "größe", "x y", "_k", "a\"q", "日付",
            ];
            let n = 1 + rng.below(if depth > 1 { 3 } else { 4 }) as usize;
            let mut properties = serde_json::Map::new();
            let mut required = Vec::new();
            let mut bound = 2;
            for i in 0..n {
                let name = *rng.pick(&names);
                if properties.contains_key(name) {
                    continue;
                }
                let (child, child_bound) = schema(rng, depth - 1);
                properties.insert(name.to_owned(), child);
                if rng.below(3) > 0 {
                    required.push(json!(name));
                }
                bound += literal_bytes(name) + 2 + child_bound + if i > 0 { 2 } else { 0 };
            }
            (
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                }),
                bound,
            )
        }
        2 => {
            let (items, item_bound) = schema(rng, depth - 1);
            let max = 1 + rng.below(3) as usize;
            let min = rng.below(2).min(max as u64);
            (
                json!({"type": "array", "items": items, "minItems": min, "maxItems": max}),
                2 + max * item_bound + 2 * (max - 1),
            )
        }
        _ => {
            let (a, a_bound) = leaf(rng);
            let (b, b_bound) = leaf(rng);
            (json!({"anyOf": [a, b]}), a_bound.max(b_bound))
        }
    }
}

/// A random scalar schema and its byte bound (see [`schema`]).
fn leaf(rng: &mut Rng) -> (Value, usize) {
    match rng.below(11) {
        0 => {
            let max = 1 + rng.below(6) as usize;
            let min = rng.below(2) as usize;
            (
                json!({"type": "string", "minLength": min, "maxLength": max}),
                2 + 6 * max,
            )
        }
        1 => (json!({"type": "string", "pattern": "^[a-z]{1,5}$"}), 7),
        2 => (
            json!({"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,3}$"}),
            8,
        ),
        3 => {
            let words = [
                "red",
                "grün",
                "青い",
                "a b",
                "say \"hi\"",
                "",
                "line\nbreak",
            ];
            let n = 1 + rng.below(4) as usize;
            let chosen: Vec<&str> = (0..n).map(|_| *rng.pick(&words)).collect();
            let bound = chosen.iter().map(|w| literal_bytes(w)).max().unwrap();
            (json!({"type": "string", "enum": chosen}), bound)
        }
        4 => {
            let low = rng.below(100) as i64 - 50;
            let high = low + rng.below(2000) as i64;
            (
                json!({"type": "integer", "minimum": low, "maximum": high}),
                5,
            )
        }
        5 => (json!({"type": "boolean"}), 5),
        6 => (json!({"type": "null"}), 4),
        7 => (json!({"enum": [1, "two", null, true, 2.5]}), 5),
        8 => (json!({"const": "fixed"}), 7),
        9 => (json!({"type": "string", "format": "date"}), 12),
        _ => (
            json!({"type": "string", "enum": ["alpha", "beta", "gamma", "delta"]}),
            7,
        ),
    }
}

/// `count` random object schemas whose values fit `budget` bytes.
fn schemas(seed: u64, count: usize, budget: usize) -> Vec<Value> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let (mut schema, bound) = schema(&mut rng, 3);
        if schema.get("type") != Some(&json!("object")) || bound > budget {
            continue;
        }
        if out.len() % 7 == 3 {
            // A definition used through `$ref`, as generated schemas (pydantic) write them.
            schema = json!({"$defs": {"item": schema}, "$ref": "#/$defs/item"});
        }
        out.push(schema);
    }
    out
}

/// The validator of `schema`, formats asserted.
fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("the validator refused {schema}: {e}"))
}

/// One generation: its tokens, its text and why it ended.
struct Output {
    tokens: Vec<u32>,
    text: String,
    finish: Option<FinishReason>,
}

fn generate(
    generator: &mut TextGenerator,
    compiler: Option<&GrammarCompiler>,
    constraint: &Constraint,
    prompt: &[u32],
    options: GenerateOptions,
) -> Output {
    let matcher = compiler.map(|c| {
        c.compile(constraint, generator.session().mask_words())
            .unwrap()
    });
    let mut generation = block_on(generator.start_constrained(prompt, options, matcher)).unwrap();
    let (mut tokens, mut text) = (Vec::new(), String::new());
    while let Some(piece) = block_on(generator.next_piece(&mut generation)).unwrap() {
        tokens.push(piece.token);
        text.push_str(&piece.text);
    }
    Output {
        tokens,
        text,
        finish: generation.finish_reason(),
    }
}

fn tiny(file: &str, backend_id: &str) -> (Arc<GgufTokenizer>, TextGenerator) {
    let bytes = std::fs::read(tiny_support::fixture(file)).unwrap();
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    let tokenizer = Arc::new(GgufTokenizer::from_gguf(&header).unwrap());
    let backend: Arc<dyn webdelegate::registry::BackendInterface> = match backend_id {
        "cpu" => Arc::new(CpuBackend::new()),
        _ => Arc::new(block_on(WebGpuBackend::new())),
    };
    let (_, session, _) = tiny_support::session(file, backend_id, backend, TINY_CONTEXT);
    (tokenizer.clone(), TextGenerator::new(tokenizer, session))
}

fn options(max_new_tokens: u32, temperature: f32, seed: u64) -> GenerateOptions {
    GenerateOptions {
        max_new_tokens,
        temperature,
        top_k: 0,
        top_p: 1.0,
        seed,
        ..GenerateOptions::default()
    }
}

/// Generates every schema and checks each output: complete, parsed, valid.
fn check_schemas(
    generator: &mut TextGenerator,
    compiler: &GrammarCompiler,
    prompt: &[u32],
    schemas: &[Value],
    max_new_tokens: u32,
    temperature_of: impl Fn(usize) -> f32,
) -> Vec<Output> {
    let mut outputs = Vec::new();
    for (i, schema) in schemas.iter().enumerate() {
        let constraint = Constraint::JsonSchema(schema.clone());
        let options = options(max_new_tokens, temperature_of(i), i as u64);
        let out = generate(generator, Some(compiler), &constraint, prompt, options);
        assert_eq!(
            out.finish,
            Some(FinishReason::EndOfGeneration),
            "schema {i} {schema}: ended by {:?} after {} tokens: {:?}",
            out.finish,
            out.tokens.len(),
            out.text
        );
        let value: Value = serde_json::from_str(&out.text)
            .unwrap_or_else(|e| panic!("schema {i} {schema}: {:?} does not parse: {e}", out.text));
        let validator = validator(schema);
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "schema {i} {schema}: {value} is invalid: {errors:?}"
        );
        outputs.push(out);
    }
    outputs
}

/// 200 random schemas on the tiny llama (SentencePiece vocabulary with byte fallback), half
/// greedy and half at temperature 0.9 over the whole distribution; every output valid.
#[test]
fn two_hundred_random_schemas_on_a_tiny_model() {
    let (tokenizer, mut generator) = tiny("tiny-llama.gguf", "cpu");
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let prompt = tokenizer.encode("the cat", true, false).unwrap();
    let budget = (TINY_CONTEXT as usize) - prompt.len() - 8;
    let schemas = schemas(0x5eed_0001, 200, budget);
    let outputs = check_schemas(
        &mut generator,
        &compiler,
        &prompt,
        &schemas,
        budget as u32,
        |i| if i % 2 == 0 { 0.0 } else { 0.9 },
    );
    let tokens: usize = outputs.iter().map(|o| o.tokens.len()).sum();
    let stats = generator.stats();
    println!(
        "200 schemas, {tokens} tokens; last generation: {} masks in {:.2} ms",
        stats.masks, stats.mask_ms
    );
    assert!(stats.masks > 0, "the last generation computed no mask");
    // Distinct outputs: the sampled half explores (a mask that allowed one token only would
    // make every output of a schema the same).
    let distinct: std::collections::HashSet<&str> =
        outputs.iter().map(|o| o.text.as_str()).collect();
    assert!(distinct.len() > 150, "{} distinct outputs", distinct.len());

    // The same model unconstrained writes no JSON: the checks above can fail.
    let unconstrained = (0..20)
        .map(|seed| {
            generate(
                &mut generator,
                None,
                &Constraint::json_object(),
                &prompt,
                options(40, 0.9, seed),
            )
        })
        .filter(|o| serde_json::from_str::<Value>(&o.text).is_ok())
        .count();
    assert_eq!(unconstrained, 0, "unconstrained outputs that parse");
}

/// The byte-level BPE vocabulary (tiny qwen2, `gpt2` tokenizer model): 50 schemas at
/// temperature 0.7.
#[test]
fn random_schemas_on_a_byte_level_bpe_vocabulary() {
    let (tokenizer, mut generator) = tiny("tiny-qwen2.gguf", "cpu");
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let prompt = tokenizer.encode("the cat", true, false).unwrap();
    let budget = (TINY_CONTEXT as usize) - prompt.len() - 8;
    let schemas = schemas(0x5eed_0002, 50, budget);
    check_schemas(
        &mut generator,
        &compiler,
        &prompt,
        &schemas,
        budget as u32,
        |_| 0.7,
    );
}

/// The WebGPU backend (its `token_mask` kernel, then `Sample`) chooses the CPU's tokens under
/// the same masks and knobs (oracle: the CPU backend), greedy and sampled.
#[test]
fn webgpu_constrained_tokens_equal_the_cpus() {
    let (tokenizer, mut cpu) = tiny("tiny-llama.gguf", "cpu");
    let (_, mut gpu) = tiny("tiny-llama.gguf", "webgpu");
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let prompt = tokenizer.encode("the cat", true, false).unwrap();
    let budget = (TINY_CONTEXT as usize) - prompt.len() - 8;
    for (i, schema) in schemas(0x5eed_0003, 12, budget).iter().enumerate() {
        let constraint = Constraint::JsonSchema(schema.clone());
        let temperature = if i % 2 == 0 { 0.0 } else { 0.8 };
        let knobs = options(budget as u32, temperature, i as u64);
        let a = generate(
            &mut cpu,
            Some(&compiler),
            &constraint,
            &prompt,
            knobs.clone(),
        );
        let b = generate(&mut gpu, Some(&compiler), &constraint, &prompt, knobs);
        assert_eq!(a.tokens, b.tokens, "schema {i} {schema}");
        assert!(serde_json::from_str::<Value>(&a.text).is_ok(), "{}", a.text);
    }
}

/// Lark grammars and regular expressions, and the token budget: a constrained output cut by
/// `max_new_tokens` ends with `Length` and is a prefix of a match.
#[test]
fn lark_regex_and_the_token_budget() {
    let (tokenizer, mut generator) = tiny("tiny-llama.gguf", "cpu");
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let prompt = tokenizer.encode("the cat", true, false).unwrap();
    let lark = Constraint::Lark(
        "start: answer \" because \" reason\nanswer: \"yes\" | \"no\"\nreason: /[a-z]{1,8}/"
            .to_owned(),
    );
    for seed in 0..10 {
        let out = generate(
            &mut generator,
            Some(&compiler),
            &lark,
            &prompt,
            options(60, 0.9, seed),
        );
        assert_eq!(out.finish, Some(FinishReason::EndOfGeneration));
        let (answer, reason) = out
            .text
            .split_once(" because ")
            .unwrap_or_else(|| panic!("{:?}", out.text));
        assert!(answer == "yes" || answer == "no", "{:?}", out.text);
        assert!(
            (1..=8).contains(&reason.len()) && reason.bytes().all(|b| b.is_ascii_lowercase()),
            "{:?}",
            out.text
        );
    }
    let regex = Constraint::Regex("[A-Z]{3}-[0-9]{4}".to_owned());
    for seed in 0..10 {
        let out = generate(
            &mut generator,
            Some(&compiler),
            &regex,
            &prompt,
            options(60, 0.9, seed),
        );
        let b = out.text.as_bytes();
        assert!(
            b.len() == 8
                && b[..3].iter().all(u8::is_ascii_uppercase)
                && b[3] == b'-'
                && b[4..].iter().all(u8::is_ascii_digit),
            "{:?}",
            out.text
        );
    }
    // Cut short: `Length`, and the text is where a valid value was heading.
    let long = Constraint::JsonSchema(json!({
        "type": "object",
        "properties": {"words": {"type": "array", "items": {"type": "string", "minLength": 5, "maxLength": 5}, "minItems": 6, "maxItems": 6}},
        "required": ["words"],
        "additionalProperties": false
    }));
    let out = generate(
        &mut generator,
        Some(&compiler),
        &long,
        &prompt,
        options(12, 0.0, 0),
    );
    assert_eq!(out.finish, Some(FinishReason::Length));
    assert_eq!(out.tokens.len(), 12);
    assert!(out.text.starts_with("{\"words\": [\""), "{:?}", out.text);
    assert!(serde_json::from_str::<Value>(&out.text).is_err());
    // Stop strings are refused with a grammar (it decides where the output ends).
    let matcher = compiler
        .compile(&long, generator.session().mask_words())
        .unwrap();
    let stop = GenerateOptions {
        stop: vec!["}".to_owned()],
        ..options(12, 0.0, 0)
    };
    let err = block_on(generator.start_constrained(&prompt, stop, Some(matcher))).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

/// Hostile and broken constraints are clear `InvalidArgument` errors, never a panic: bad types,
/// unsatisfiable bounds, dangling and remote references, broken patterns, deep nesting, huge
/// sources, non-schemas.
#[test]
fn bad_constraints_are_refused_with_a_reason() {
    let (tokenizer, generator) = tiny("tiny-llama.gguf", "cpu");
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let words = generator.session().mask_words();
    let mut deep = json!({"type": "string"});
    for _ in 0..(MAX_SCHEMA_DEPTH + 4) {
        deep = json!({"type": "array", "items": deep});
    }
    let huge = "a".repeat((1 << 20) + 1);
    let cases = [
        Constraint::JsonSchema(json!({"type": 5})),
        Constraint::JsonSchema(json!({"type": "strin"})),
        Constraint::JsonSchema(json!({"type": "string", "minLength": 10, "maxLength": 2})),
        Constraint::JsonSchema(json!({"$ref": "#/$defs/missing"})),
        Constraint::JsonSchema(json!({"$ref": "https://example.com/schema.json"})),
        Constraint::JsonSchema(json!({"type": "string", "pattern": "(a|b"})),
        Constraint::JsonSchema(json!({"type": "integer", "minimum": 5, "maximum": 1})),
        Constraint::JsonSchema(json!({"allOf": [{"type": "string"}, {"type": "integer"}]})),
        Constraint::JsonSchema(json!(false)),
        Constraint::JsonSchema(json!("not a schema")),
        Constraint::JsonSchema(json!([1, 2])),
        Constraint::JsonSchema(deep),
        Constraint::JsonSchema(json!({"type": "string", "pattern": huge.clone()})),
        Constraint::Lark("start: undefined_rule".to_owned()),
        Constraint::Lark("start: \"a".to_owned()),
        Constraint::Lark(String::new()),
        Constraint::Lark(huge),
        Constraint::Regex("(unclosed".to_owned()),
    ];
    for case in &cases {
        match compiler.compile(case, words) {
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::InvalidArgument, "{case:?}: {e}");
                assert!(!e.message().is_empty());
            }
            Ok(_) => panic!("{case:?} compiled"),
        }
    }
    // Recursive definitions are fine (a linked list), and too narrow a mask is refused.
    let list = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9}, "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}, "required": ["v", "next"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    assert!(
        compiler
            .compile(&Constraint::JsonSchema(list), words)
            .is_ok()
    );
    let narrow = compiler.compile(&Constraint::json_object(), 1).unwrap_err();
    assert_eq!(narrow.code(), ErrorCode::InvalidArgument);
}

/// Gemma 3 270M (262,144 tokens) on the CPU backend: schemas a user writes and random ones,
/// greedy and at temperature 0.7, every output valid. (The 200-schema run on Gemma is the
/// `chat` bench suite's `json_schema_valid_fraction`, in the browser.)
#[test]
fn gemma_writes_valid_json_for_schemas() {
    let model = gemma_support::model();
    let tokenizer = Arc::new(GgufTokenizer::from_gguf(&model.header).unwrap());
    let started = std::time::Instant::now();
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    println!(
        "compiler for {} tokens: {:?}",
        tokenizer.vocab_size(),
        started.elapsed()
    );
    let session: DecoderSession =
        gemma_support::session("cpu", Arc::new(CpuBackend::new()), 512, false);
    let mut generator = TextGenerator::new(tokenizer.clone(), session);
    let prompt = tokenizer
        .encode(
            "<start_of_turn>user\nDescribe a person as JSON.<end_of_turn>\n<start_of_turn>model\n",
            true,
            true,
        )
        .unwrap();
    let mut all = vec![
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "email": {"type": "string", "format": "email"}}, "required": ["name", "age"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}}, "required": ["city", "tags"], "additionalProperties": false}),
        json!({"type": "object"}),
    ];
    all.extend(schemas(0x5eed_0004, 2, 200));
    let outputs = check_schemas(&mut generator, &compiler, &prompt, &all, 160, |i| {
        if i % 2 == 0 { 0.0 } else { 0.7 }
    });
    let masks: f64 = generator.stats().mask_ms / generator.stats().masks.max(1) as f64;
    let lengths: Vec<usize> = outputs.iter().map(|o| o.tokens.len()).collect();
    println!(
        "{} outputs of {lengths:?} tokens, e.g. {:?}; last generation {:.3} ms per mask",
        outputs.len(),
        outputs[0].text,
        masks
    );
}
