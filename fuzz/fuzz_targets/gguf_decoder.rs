//! Fuzzes what a GGUF header reaches at a Generator's load past the index parser: the decoder
//! config, the tokenizer, the vocabulary check, the decoder program and a chat prompt. Any
//! input must load or give an error; never a panic, a hang or a huge allocation. Seed it with
//! tests/fixtures/decoders/*.gguf and the first MiB of the setup's Gemma 3 GGUF. Its
//! counterpart in `cargo test`: tests/decoder_mutation.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webdelegate::models::chat::ChatPrompt;
use webdelegate::models::decoder::{
    DecoderConfig, DecoderProgramOptions, check_vocabulary, decoder_program,
};
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::text::{ChatRender, GgufTokenizer};

fuzz_target!(|data: &[u8]| {
    let Ok(header) = pollster::block_on(GgufIndex::parse(data)) else {
        return;
    };
    let Ok(tokenizer) = GgufTokenizer::from_gguf(&header) else {
        return;
    };
    if let Ok(config) = DecoderConfig::from_gguf(header.metadata())
        && check_vocabulary(header.index(), tokenizer.vocab_size() as u64).is_ok()
    {
        let options = DecoderProgramOptions {
            context: config.train_context.min(64),
            logits: false,
        };
        let _ = decoder_program(&config, header.index(), "model", options);
    }
    // The file's own template, if it has one (else a small fixed one).
    let fallback = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
    let source = webdelegate::models::chat::template_source(header.metadata())
        .ok()
        .flatten()
        .map(str::to_owned);
    let Ok(prompt) = ChatPrompt::new(Some(source.as_deref().unwrap_or(fallback)), &[], &tokenizer)
    else {
        return;
    };
    let messages = serde_json::json!([
        {"role": "system", "content": "s"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"}
    ]);
    let request = ChatRender {
        messages: Some(&messages),
        add_generation_prompt: true,
        now_ms: Some(0.0),
        ..ChatRender::default()
    };
    if let Ok(ids) = prompt.token_ids(&tokenizer, &request) {
        let _ = tokenizer.decode(&ids);
    }
});
