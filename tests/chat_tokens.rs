//! Rendered chats tokenize to llama.cpp's ids.
//!
//! Oracle: llama.cpp's own tokenizer (`llama-tokenize --no-bos`, parse_special, from the
//! llama.cpp sources vendored in llama-cpp-python 0.3.36), recorded in
//! `tests/fixtures/chat/llamacpp_chat_tokens.json` by `scripts/make-chat-token-fixtures.py` over
//! the conversations jinja2 renders with real templates (fetched at setup) and the vocabularies
//! of Gemma 3 270M (SentencePiece) and tiny-qwen2 (byte-level BPE with `<|im_start|>`-style
//! control tokens). Each render's SHA-256 is checked first, so a render difference is told
//! apart from a tokenization one. Also runs of whitespace, where Hugging Face's conversion of
//! Gemma's vocabulary disagrees with llama.cpp (40 spaces: llama.cpp `[167, 145]`, HF
//! `[152, 160]`): we follow llama.cpp.
#![cfg(not(target_arch = "wasm32"))]

use pollster::block_on;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::path::Path;
use webdelegate::models::chat::ChatPrompt;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::text::{ChatRender, GgufTokenizer};

fn ids(value: &Json) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| u32::try_from(v.as_u64().unwrap()).unwrap())
        .collect()
}

fn tokenizer(root: &Path, model: &str) -> GgufTokenizer {
    let path = root.join(model);
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; `npm run setup` fetches it", path.display()));
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    GgufTokenizer::from_gguf(&header).unwrap()
}

#[test]
fn rendered_chats_tokenize_as_llama_cpp_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| -> Json {
        serde_json::from_slice(&std::fs::read(root.join(p)).unwrap()).unwrap()
    };
    let fixture = read("tests/fixtures/chat/llamacpp_chat_tokens.json");
    let conversations = read("tests/fixtures/chat/conversations.json");
    let now_ms = fixture["fixed_ms"].as_f64();
    let mut compared = 0;
    for set in fixture["sets"].as_array().unwrap() {
        let model = set["model"].as_str().unwrap();
        let template = set["template"].as_str().unwrap();
        let tokenizer = tokenizer(root, model);
        let source_path = root.join(format!(".cache/chat-templates/templates/{template}.jinja"));
        let source = std::fs::read_to_string(&source_path).unwrap_or_else(|e| {
            panic!("{}: {e}; `npm run setup` fetches it", source_path.display())
        });
        let prompt = ChatPrompt::new(Some(&source), &[], &tokenizer).unwrap();
        for case in set["cases"].as_array().unwrap() {
            let id = case["id"].as_u64().unwrap() as usize;
            let conversation = &conversations[id];
            let request = ChatRender {
                messages: Some(&conversation["messages"]),
                tools: conversation.get("tools"),
                documents: None,
                add_generation_prompt: conversation["add_generation_prompt"].as_bool().unwrap(),
                extra: conversation.get("extra"),
                now_ms,
            };
            let text = prompt.render(&request).unwrap();
            let sha = format!("{:x}", Sha256::digest(text.as_bytes()));
            assert_eq!(
                sha,
                case["text_sha256"].as_str().unwrap(),
                "{model} x {template} / conversation {id}: the render differs from jinja2's"
            );
            let want = ids(&case["ids"]);
            let got = tokenizer.encode(&text, false, true).unwrap();
            if got != want {
                let at = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
                let context = |ids: &[u32]| {
                    tokenizer.decode(&ids[at.saturating_sub(3)..(at + 6).min(ids.len())])
                };
                panic!(
                    "{model} x {template} / conversation {id}: first difference at token {at}: \
                     ours {:?} ({:?}), llama.cpp {:?} ({:?})",
                    &got[at.saturating_sub(3)..(at + 6).min(got.len())],
                    context(&got),
                    &want[at.saturating_sub(3)..(at + 6).min(want.len())],
                    context(&want)
                );
            }
            // The chat prompt's ids: the same, with one BOS where the vocabulary adds it.
            let prompt_ids = prompt.token_ids(&tokenizer, &request).unwrap();
            let bos = tokenizer.bos().filter(|_| tokenizer.add_bos_default());
            match bos {
                Some(bos) if want.first() != Some(&bos) => {
                    assert_eq!(prompt_ids[0], bos);
                    assert_eq!(&prompt_ids[1..], want.as_slice());
                }
                _ => assert_eq!(prompt_ids, want),
            }
            compared += 1;
        }
    }
    assert!(compared >= 60, "only {compared} chats compared");
    let whitespace = fixture["whitespace"].as_array().unwrap();
    let tokenizer = tokenizer(root, whitespace[0]["model"].as_str().unwrap());
    for case in whitespace {
        assert_eq!(case["model"], whitespace[0]["model"]);
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        assert_eq!(
            tokenizer.encode(text, false, true).unwrap(),
            want,
            "{text:?}"
        );
    }
}
