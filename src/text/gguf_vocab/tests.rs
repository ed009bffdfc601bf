//! Small hand-made vocabularies whose llama.cpp tokenization is worked out by hand from
//! llama-vocab.cpp's algorithms, and malformed metadata that must be refused with the key named.

use super::*;
use crate::error::ErrorCode;
use crate::params::formats::gguf::GgufArray;

fn s(text: &str) -> GgufValue {
    GgufValue::String(text.as_bytes().to_vec())
}

fn strings(items: &[&str]) -> GgufValue {
    GgufValue::Array(GgufArray::String(
        items.iter().map(|t| t.as_bytes().to_vec()).collect(),
    ))
}

/// An SPM vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then `pieces` (normal, with
/// their scores), then `extra` (text, type).
fn spm(pieces: &[(&str, f32)], extra: &[(&str, i32)]) -> Vec<(String, GgufValue)> {
    let mut tokens = vec!["<unk>".to_owned(), "<s>".to_owned(), "</s>".to_owned()];
    let mut scores = vec![0.0f32; 3];
    let mut types = vec![2, 3, 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        scores.push(0.0);
        types.push(6);
    }
    for (p, sc) in pieces {
        tokens.push((*p).to_owned());
        scores.push(*sc);
        types.push(1);
    }
    for (p, t) in extra {
        tokens.push((*p).to_owned());
        scores.push(0.0);
        types.push(*t);
    }
    vec![
        ("tokenizer.ggml.model".into(), s("llama")),
        (
            "tokenizer.ggml.tokens".into(),
            GgufValue::Array(GgufArray::String(
                tokens.into_iter().map(String::into_bytes).collect(),
            )),
        ),
        (
            "tokenizer.ggml.scores".into(),
            GgufValue::Array(GgufArray::F32(scores)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            GgufValue::Array(GgufArray::I32(types)),
        ),
        ("tokenizer.ggml.bos_token_id".into(), GgufValue::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), GgufValue::U32(2)),
        ("tokenizer.ggml.unknown_token_id".into(), GgufValue::U32(0)),
    ]
}

const FIRST: u32 = 3 + 256;

fn set(meta: &mut Vec<(String, GgufValue)>, key: &str, value: GgufValue) {
    meta.retain(|(k, _)| k != key);
    meta.push((key.to_owned(), value));
}

#[test]
fn spm_merges_the_highest_scoring_pair_first_leftmost_on_ties() {
    // "▁a"=F, "ab"=F+1, "▁ab"=F+2, "b"=F+3, "a"=F+4, "▁"=F+5, "bb" = F+6.
    let meta = spm(
        &[
            ("▁a", -1.0),
            ("ab", -0.5),
            ("▁ab", -2.0),
            ("b", -3.0),
            ("a", -3.0),
            ("▁", -3.0),
            ("bb", -0.5),
        ],
        &[],
    );
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    assert_eq!(t.model(), TokenizerModel::SentencePiece);
    assert!(t.add_bos_default() && t.add_space_prefix());
    // "▁ab": pairs ▁a (-1) and ab (-0.5): ab first, then ▁+ab = ▁ab.
    assert_eq!(t.encode("ab", true, false).unwrap(), [1, FIRST + 2]);
    // "▁abb": ab and bb tie at -0.5: the left one (ab) wins, then ▁ab; b stays.
    assert_eq!(
        t.encode("abb", false, false).unwrap(),
        [FIRST + 2, FIRST + 3]
    );
    // Without the prefix space (and no BOS): "ab".
    let mut no_prefix = meta.clone();
    set(
        &mut no_prefix,
        "tokenizer.ggml.add_space_prefix",
        GgufValue::Bool(false),
    );
    let t2 = GgufTokenizer::from_metadata(&no_prefix).unwrap();
    assert_eq!(t2.encode("ab", false, false).unwrap(), [FIRST + 1]);
    // An unseen character falls back to its UTF-8 bytes: "é" = C3 A9.
    assert_eq!(t2.encode("é", false, false).unwrap(), [3 + 0xC3, 3 + 0xA9]);
    // A space inside the text is ▁ too: "a b" -> ▁a ▁ b? "▁a▁b": ▁a, then ▁ and b stay apart.
    assert_eq!(
        t.encode("a b", false, false).unwrap(),
        [FIRST, FIRST + 5, FIRST + 3]
    );
    assert_eq!(t.encode("", true, false).unwrap(), [1]);
    assert_eq!(t.encode("", false, false).unwrap(), Vec::<u32>::new());
}

#[test]
fn spm_special_pieces_split_first_and_restart_the_space_prefix() {
    let meta = spm(
        &[("▁a", -1.0), ("a", -2.0), ("▁", -3.0)],
        &[("<t>", 3), ("\n", 4)],
    );
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    let ctl = FIRST + 3;
    let nl = FIRST + 4;
    // parse_special: <t> is a token, the text after it gets a prefix space again.
    assert_eq!(t.encode("a<t>a", false, true).unwrap(), [FIRST, ctl, FIRST]);
    // Without parse_special, "<t>" is text: bytes (no pieces for < t >).
    let plain = t.encode("<t>", false, false).unwrap();
    assert_eq!(
        plain,
        [FIRST + 2, 3 + b'<' as u32, 3 + b't' as u32, 3 + b'>' as u32]
    );
    // User-defined pieces are matched either way.
    assert_eq!(t.encode("a\na", false, false).unwrap(), [FIRST, nl, FIRST]);
    // Decoding: control and user-defined as written, ▁ as space, bytes as bytes.
    assert_eq!(t.decode(&[1, FIRST, ctl, nl, 3 + 0x41]), "<s> a<t>\nA");
}

#[test]
fn spm_pieces_decode_like_llama_cpp_and_stream_split_characters_whole() {
    let mut meta = spm(&[("▁hi", -1.0)], &[("<unused0>", 5), ("odd", 0)]);
    set(
        &mut meta,
        "tokenizer.ggml.add_space_prefix",
        GgufValue::Bool(false),
    );
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    assert_eq!(t.token_to_piece(FIRST), b" hi");
    assert_eq!(t.token_to_piece(0), b"<unk>");
    assert_eq!(t.token_to_piece(3 + 0x0A), b"\n");
    // Unused and undefined types, and ids out of range: nothing.
    assert_eq!(t.token_to_piece(FIRST + 1), b"");
    assert_eq!(t.token_to_piece(FIRST + 2), b"");
    assert_eq!(t.token_to_piece(u32::MAX), b"");
    // 😀 = F0 9F 98 80, one byte token each.
    let ids: Vec<u32> = "😀".bytes().map(|b| 3 + u32::from(b)).collect();
    assert_eq!(t.encode("😀", false, false).unwrap(), ids);
    let mut decoder = IncrementalDecoder::new();
    let mut streamed = Vec::new();
    for &id in [FIRST].iter().chain(&ids) {
        streamed.push(decoder.push(&t, id));
    }
    assert_eq!(streamed, [" hi", "", "", "", "😀"]);
    assert_eq!(decoder.finish(), "");
    // A dangling prefix at the end: U+FFFD.
    assert_eq!(decoder.push(&t, ids[0]), "");
    assert_eq!(decoder.finish(), "\u{FFFD}");
    assert_eq!(t.decode(&ids[..2]), "\u{FFFD}");
}

/// A byte-level BPE vocabulary over the characters of "hello world" with merges.
fn bpe(pre: &str) -> Vec<(String, GgufValue)> {
    let tokens = [
        "h",
        "e",
        "l",
        "o",
        "Ġ",
        "w",
        "r",
        "d",
        "he",
        "ll",
        "hell",
        "hello",
        "Ġw",
        "or",
        "Ġwor",
        "Ġworld",
        "ld",
        "<|endoftext|>",
        "!",
        "1",
        "2",
        "12",
        "Ċ",
    ];
    let merges = [
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "1 2",
    ];
    let mut types = vec![1i32; tokens.len()];
    types[17] = 3;
    vec![
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s(pre)),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            GgufValue::Array(GgufArray::I32(types)),
        ),
        ("tokenizer.ggml.merges".into(), strings(&merges)),
        ("tokenizer.ggml.eos_token_id".into(), GgufValue::U32(17)),
        ("tokenizer.ggml.bos_token_id".into(), GgufValue::U32(17)),
    ]
}

#[test]
fn bpe_merges_by_rank_within_pre_tokenized_words() {
    let t = GgufTokenizer::from_metadata(&bpe("qwen2")).unwrap();
    assert_eq!(t.model(), TokenizerModel::BytePairEncoding);
    assert!(!t.add_bos_default());
    // "hello" | " world" | "!" ; Qwen 2 splits digits one by one: "1" "2" (no 12 merge across).
    assert_eq!(
        t.encode("hello world!12", true, false).unwrap(),
        [11, 15, 18, 19, 20]
    );
    // llama3: digits in threes, so "12" merges; it also adds BOS by default.
    let l3 = GgufTokenizer::from_metadata(&bpe("llama-bpe")).unwrap();
    assert!(l3.add_bos_default());
    assert_eq!(l3.encode("12", true, false).unwrap(), [17, 21]);
    // Special tokens only with parse_special; the control piece as text is split into bytes'
    // tokens where they exist ("<", "|" ... are not tokens here, so they vanish as in llama.cpp).
    assert_eq!(
        t.encode("hello<|endoftext|>", false, true).unwrap(),
        [11, 17]
    );
    // A character without a token is dropped (llama.cpp keeps only single-byte tokens found).
    assert_eq!(t.encode("hé", false, false).unwrap(), [0]);
    assert_eq!(t.decode(&[11, 15, 17, 22]), "hello world<|endoftext|>\n");
    assert!(t.is_end_of_generation(17));
    assert!(!t.is_end_of_generation(11));
}

#[test]
fn eog_and_eot_come_from_ids_and_from_text() {
    let meta = spm(&[], &[("<end_of_turn>", 3), ("<start_of_turn>", 3)]);
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    assert_eq!(t.eot(), Some(FIRST));
    assert_eq!(t.end_of_generation(), [2, FIRST]);
    assert!(!t.is_end_of_generation(FIRST + 1));
}

fn err(meta: &[(String, GgufValue)]) -> String {
    let e = GgufTokenizer::from_metadata(meta).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidExternalData, "{e}");
    e.message().to_owned()
}

#[test]
fn malformed_metadata_is_refused_naming_the_key() {
    let good = spm(&[("▁a", -1.0)], &[]);
    let mut m = good.clone();
    m.retain(|(k, _)| k != "tokenizer.ggml.tokens");
    assert!(err(&m).contains("tokenizer.ggml.tokens is missing"));

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.scores",
        GgufValue::Array(GgufArray::F32(vec![0.0; 3])),
    );
    assert!(
        err(&m).contains("tokenizer.ggml.scores has 3 entries"),
        "{}",
        err(&m)
    );

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.token_type",
        GgufValue::Array(GgufArray::I32(vec![1; 5])),
    );
    assert!(err(&m).contains("tokenizer.ggml.token_type has 5 entries"));

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.token_type",
        GgufValue::Array(GgufArray::U8(vec![1; 5])),
    );
    assert!(err(&m).contains("tokenizer.ggml.token_type must be an array of i32"));

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.bos_token_id",
        GgufValue::U32(100_000),
    );
    assert!(err(&m).contains("tokenizer.ggml.bos_token_id = 100000 is not a token id"));

    let mut m = good.clone();
    set(&mut m, "tokenizer.ggml.eos_token_id", GgufValue::I32(2));
    assert!(err(&m).contains("tokenizer.ggml.eos_token_id must be a u32, not i32"));

    let mut m = good.clone();
    set(&mut m, "tokenizer.ggml.model", GgufValue::U32(1));
    assert!(err(&m).contains("tokenizer.ggml.model must be a string"));

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.tokens",
        GgufValue::Array(GgufArray::String(vec![b"ok".to_vec(), vec![0xFF, 0xFE]])),
    );
    m.retain(|(k, _)| !k.ends_with("scores") && !k.ends_with("token_type") && !k.ends_with("_id"));
    assert!(err(&m).contains("tokenizer.ggml.tokens[1] is not UTF-8"));

    let mut m = good.clone();
    set(&mut m, "tokenizer.ggml.tokens", strings(&["a", "b", "a"]));
    m.retain(|(k, _)| !k.ends_with("scores") && !k.ends_with("token_type") && !k.ends_with("_id"));
    assert!(err(&m).contains("tokenizer.ggml.tokens[2] \"a\" repeats token 0"));

    let mut m = good.clone();
    let mut scores = vec![0.0f32; 3 + 256 + 1];
    scores[4] = f32::NAN;
    set(
        &mut m,
        "tokenizer.ggml.scores",
        GgufValue::Array(GgufArray::F32(scores)),
    );
    assert!(err(&m).contains("tokenizer.ggml.scores[4] is NaN"));

    let mut m = good.clone();
    set(
        &mut m,
        "tokenizer.ggml.add_bos_token",
        GgufValue::Bool(true),
    );
    m.retain(|(k, _)| k != "tokenizer.ggml.bos_token_id");
    set(&mut m, "tokenizer.ggml.tokens", strings(&["x"]));
    m.retain(|(k, _)| !k.ends_with("scores") && !k.ends_with("token_type") && !k.ends_with("_id"));
    assert!(err(&m).contains("add_bos_token is true, but tokenizer.ggml.bos_token_id is not set"));

    let mut m = bpe("qwen2");
    set(&mut m, "tokenizer.ggml.merges", strings(&["h e", "h zz"]));
    assert!(
        err(&m).contains("tokenizer.ggml.merges[1] \"h zz\" names \"zz\", which is not a token")
    );

    let mut m = bpe("qwen2");
    set(&mut m, "tokenizer.ggml.merges", strings(&["he"]));
    assert!(err(&m).contains("tokenizer.ggml.merges[0] \"he\" has no space"));

    let mut m = bpe("qwen2");
    m.retain(|(k, _)| k != "tokenizer.ggml.merges");
    assert!(err(&m).contains("tokenizer.ggml.merges is missing"));

    let mut m = bpe("no-such-pre");
    assert!(err(&m).contains("pre-tokenizer 'no-such-pre' is not supported"));
    m.clear();
    assert!(err(&m).contains("tokenizer.ggml.model is missing"));

    let mut m = good;
    set(&mut m, "tokenizer.ggml.model", s("bert"));
    let e = GgufTokenizer::from_metadata(&m).unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotSupported);
}

#[test]
fn raw_bytes_are_cut_as_llama_cpp_cuts_them() {
    let mut meta = spm(&[("(", -1.0)], &[]);
    set(
        &mut meta,
        "tokenizer.ggml.add_space_prefix",
        GgufValue::Bool(false),
    );
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    // C3 is a two-byte lead: C3 28 is one symbol, no piece, so both bytes fall back, even the
    // '(' that is a piece of its own.
    assert_eq!(
        t.encode_bytes(b"\xc3\x28", false, false).unwrap(),
        [3 + 0xC3, 3 + 0x28]
    );
    assert_eq!(t.encode_bytes(b"(", false, false).unwrap(), [FIRST]);
    assert_eq!(t.encode_bytes(b"\xff", false, false).unwrap(), [3 + 0xFF]);
    // BPE: an invalid byte is U+FFFD, whose byte characters are no tokens here.
    let b = GgufTokenizer::from_metadata(&bpe("qwen2")).unwrap();
    assert_eq!(b.encode_bytes(b"h\xffe", false, false).unwrap(), [0, 1]);
    assert_eq!(
        llama_lossy(b"a\xe2\x82x\xed\xa0\x80"),
        "a\u{FFFD}\u{FFFD}x\u{FFFD}"
    );
}

#[test]
fn detokenize_strips_the_prefix_space_and_special_tokens_as_llama_cpp() {
    let meta = spm(&[("▁a", -1.0)], &[]);
    let t = GgufTokenizer::from_metadata(&meta).unwrap();
    assert_eq!(t.detokenize(&[1, FIRST], false, true), b"<s> a");
    assert_eq!(t.detokenize(&[1, FIRST], true, true), b" a");
    assert_eq!(t.detokenize(&[1, FIRST], false, false), b" a");
    assert_eq!(t.detokenize(&[FIRST, FIRST], false, false), b"a a");
    let mut text = b"Hello , world ! it 's ok ' x '".to_vec();
    clean_spaces(&mut text);
    assert_eq!(
        String::from_utf8(text).unwrap(),
        "Hello, world! it's ok'x '"
    );
    // GPT-2-style vocabularies clean up; Qwen 2 does not.
    let gpt2 = GgufTokenizer::from_metadata(&bpe("gpt-2")).unwrap();
    let qwen = GgufTokenizer::from_metadata(&bpe("qwen2")).unwrap();
    let ids = [11, 4, 18];
    assert_eq!(gpt2.detokenize(&ids, false, true), b"hello!");
    assert_eq!(qwen.detokenize(&ids, false, true), b"hello !");
}
