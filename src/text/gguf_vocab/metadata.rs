//! Reading `tokenizer.ggml.*` as llama.cpp's `llama_vocab::impl::load` does: the model type and
//! its defaults (special ids, `add_bos`, `add_space_prefix`), the pieces, scores and token
//! types, the merges of a BPE vocabulary, the special ids and flags the file sets, then the
//! text-based detection of end-of-turn, fill-in-the-middle and end-of-generation tokens (which
//! also forces such tokens to control type).
//!
//! Stricter than llama.cpp where it would only warn or guess (a bad id, a score or type array
//! of another length than the token list, a non-UTF-8 piece, a merge naming no token): each is
//! `InvalidArgument` naming the key, since such a file is broken and silently different
//! tokenization would be worse than an error.

use super::bpe::MergeRanks;
use super::pretokenize::PreType;
use super::vocab::{AddError, Vocab, attr};
use crate::error::{Error, Result};
use crate::params::formats::gguf::{GgufArray, GgufValue};

/// The tokenizer algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerModel {
    /// `tokenizer.ggml.model = "llama"`: SentencePiece-style, merges by score, byte fallback
    /// (Llama 2, Gemma).
    SentencePiece,
    /// `tokenizer.ggml.model = "gpt2"`: byte-level BPE with ranked merges (Llama 3, Qwen 2).
    BytePairEncoding,
}

/// Everything read from the metadata.
#[derive(Debug)]
pub(super) struct Loaded {
    pub model: TokenizerModel,
    pub pre: Option<PreType>,
    pub vocab: Vocab,
    pub merges: MergeRanks,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    /// Sorted ids that end generation.
    pub eog: Vec<u32>,
}

const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TYPES: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";

/// The metadata lookups, over a list of pairs.
struct Meta<'a>(&'a [(String, GgufValue)]);

impl<'a> Meta<'a> {
    fn get(&self, key: &str) -> Option<&'a GgufValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::String(bytes)) => std::str::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::invalid_argument(format!("{key} is not UTF-8"))),
            Some(other) => Err(ill_typed(key, "a string", other)),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ill_typed(key, "a bool", other)),
        }
    }

    /// A token id: a `u32` below `count`.
    fn id(&self, key: &str, count: usize) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::U32(id)) if (*id as usize) < count => Ok(Some(*id)),
            Some(GgufValue::U32(id)) => Err(Error::invalid_argument(format!(
                "{key} = {id} is not a token id (the vocabulary has {count} tokens)"
            ))),
            Some(other) => Err(ill_typed(key, "a u32", other)),
        }
    }

    fn array(&self, key: &str) -> Result<Option<&'a GgufArray>> {
        match self.get(key) {
            None => Ok(None),
            Some(GgufValue::Array(array)) => Ok(Some(array)),
            Some(other) => Err(ill_typed(key, "an array", other)),
        }
    }
}

fn type_name(value: &GgufValue) -> &'static str {
    match value {
        GgufValue::U8(_) => "u8",
        GgufValue::I8(_) => "i8",
        GgufValue::U16(_) => "u16",
        GgufValue::I16(_) => "i16",
        GgufValue::U32(_) => "u32",
        GgufValue::I32(_) => "i32",
        GgufValue::F32(_) => "f32",
        GgufValue::Bool(_) => "bool",
        GgufValue::String(_) => "string",
        GgufValue::Array(_) => "array",
        GgufValue::U64(_) => "u64",
        GgufValue::I64(_) => "i64",
        GgufValue::F64(_) => "f64",
    }
}

fn ill_typed(key: &str, want: &str, got: &GgufValue) -> Error {
    Error::invalid_argument(format!("{key} must be {want}, not {}", type_name(got)))
}

fn array_kind(array: &GgufArray) -> &'static str {
    match array {
        GgufArray::U8(_) => "u8",
        GgufArray::I8(_) => "i8",
        GgufArray::U16(_) => "u16",
        GgufArray::I16(_) => "i16",
        GgufArray::U32(_) => "u32",
        GgufArray::I32(_) => "i32",
        GgufArray::F32(_) => "f32",
        GgufArray::Bool(_) => "bool",
        GgufArray::String(_) => "string",
        GgufArray::Array(_) => "array",
        GgufArray::U64(_) => "u64",
        GgufArray::I64(_) => "i64",
        GgufArray::F64(_) => "f64",
    }
}

fn length_mismatch(key: &str, got: usize, tokens: usize) -> Error {
    Error::invalid_argument(format!("{key} has {got} entries but {TOKENS} has {tokens}"))
}

/// Texts llama.cpp takes for end-of-turn when `eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Fill-in-the-middle texts per role (pre, suf, mid, pad, rep, sep), when their ids are absent.
const FIM_TEXTS: [&[&str]; 6] = [
    &[
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ],
    &[
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ],
    &[
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ],
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    &[
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
    ],
    &["<|file_sep|>"],
];

/// Texts that end generation wherever they are (llama.cpp's EOG list).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Reads the tokenizer from GGUF metadata pairs.
pub(super) fn load(pairs: &[(String, GgufValue)]) -> Result<Loaded> {
    let meta = Meta(pairs);
    let model_name = meta
        .string("tokenizer.ggml.model")?
        .ok_or_else(|| Error::invalid_argument("tokenizer.ggml.model is missing"))?;
    let model = match model_name {
        "llama" => TokenizerModel::SentencePiece,
        "gpt2" => TokenizerModel::BytePairEncoding,
        other => {
            return Err(Error::not_supported(format!(
                "tokenizer.ggml.model '{other}' is not supported (only 'llama' and 'gpt2')"
            )));
        }
    };
    let pre = match model {
        TokenizerModel::SentencePiece => None,
        TokenizerModel::BytePairEncoding => Some(PreType::of(meta.string("tokenizer.ggml.pre")?)?),
    };

    // Defaults per model (llama.cpp's), before the file's own keys.
    let (mut bos, mut eos, mut unk): (Option<u32>, Option<u32>, Option<u32>) = match model {
        TokenizerModel::SentencePiece => (Some(1), Some(2), Some(0)),
        TokenizerModel::BytePairEncoding => (Some(11), Some(11), None),
    };
    let (mut add_bos, mut add_space_prefix) = match (model, pre) {
        (TokenizerModel::SentencePiece, _) => (true, true),
        (_, Some(pre)) => {
            if pre.no_bos {
                bos = None;
            }
            (pre.add_bos, false)
        }
        _ => (false, false),
    };
    let mut add_eos = false;
    if let Some(value) = meta.bool("tokenizer.ggml.add_space_prefix")? {
        add_space_prefix = value;
    }

    let vocab = read_vocab(&meta)?;
    let count = vocab.len();
    let merges = match model {
        TokenizerModel::SentencePiece => MergeRanks::default(),
        TokenizerModel::BytePairEncoding => match meta.array(MERGES)? {
            Some(GgufArray::String(entries)) => MergeRanks::new(&vocab, entries)?,
            Some(other) => {
                return Err(Error::invalid_argument(format!(
                    "{MERGES} must be an array of strings, not of {}",
                    array_kind(other)
                )));
            }
            None => return Err(Error::invalid_argument(format!("{MERGES} is missing"))),
        },
    };

    // Defaults out of range are disabled (llama.cpp warns and does the same).
    let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < count);
    bos = in_range(bos);
    eos = in_range(eos);
    unk = in_range(unk);
    let mut pad = None;
    let mut eot = None;
    let mut eom = None;
    let mut fim: [Option<u32>; 6] = [None; 6];
    for (key, slot) in [
        ("tokenizer.ggml.bos_token_id", &mut bos),
        ("tokenizer.ggml.eos_token_id", &mut eos),
        ("tokenizer.ggml.eot_token_id", &mut eot),
        ("tokenizer.ggml.eom_token_id", &mut eom),
        ("tokenizer.ggml.unknown_token_id", &mut unk),
        ("tokenizer.ggml.padding_token_id", &mut pad),
    ] {
        if let Some(id) = meta.id(key, count)? {
            *slot = Some(id);
        }
    }
    for key in [
        "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.mask_token_id",
    ] {
        meta.id(key, count)?;
    }
    let fim_keys = [
        [
            "tokenizer.ggml.fim_pre_token_id",
            "tokenizer.ggml.prefix_token_id",
        ],
        [
            "tokenizer.ggml.fim_suf_token_id",
            "tokenizer.ggml.suffix_token_id",
        ],
        [
            "tokenizer.ggml.fim_mid_token_id",
            "tokenizer.ggml.middle_token_id",
        ],
        ["tokenizer.ggml.fim_pad_token_id", ""],
        ["tokenizer.ggml.fim_rep_token_id", ""],
        ["tokenizer.ggml.fim_sep_token_id", ""],
    ];
    for (slot, keys) in fim.iter_mut().zip(fim_keys) {
        for key in keys.into_iter().filter(|k| !k.is_empty()) {
            if let Some(id) = meta.id(key, count)? {
                *slot = Some(id);
            }
        }
    }
    if let Some(value) = meta.bool("tokenizer.ggml.add_bos_token")? {
        add_bos = value;
    }
    if let Some(value) = meta.bool("tokenizer.ggml.add_eos_token")? {
        add_eos = value;
    }
    if add_bos && bos.is_none() {
        return Err(Error::invalid_argument(
            "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set",
        ));
    }
    if add_eos && eos.is_none() {
        return Err(Error::invalid_argument(
            "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set",
        ));
    }

    let mut vocab = vocab;
    let force_control = |vocab: &mut Vocab, id: u32| {
        let bits = vocab.attr(id);
        vocab.set_attr(id, bits | attr::CONTROL);
    };
    // Text-based detection. llama.cpp walks a hash map (an unspecified order) and keeps the
    // first match per role; here the lowest id wins, which only differs for a vocabulary with
    // two candidates for one role.
    let first_of =
        |vocab: &Vocab, texts: &[&str]| texts.iter().filter_map(|t| vocab.id(t.as_bytes())).min();
    if eot.is_none() {
        eot = first_of(&vocab, EOT_TEXTS);
        if let Some(id) = eot {
            force_control(&mut vocab, id);
        }
    }
    if eom.is_none() {
        eom = first_of(&vocab, &["<|eom_id|>"]);
        if let Some(id) = eom {
            force_control(&mut vocab, id);
        }
    }
    for (slot, texts) in fim.iter_mut().zip(FIM_TEXTS) {
        if slot.is_none() {
            *slot = first_of(&vocab, texts);
            if let Some(id) = *slot {
                force_control(&mut vocab, id);
            }
        }
    }
    let mut eog: Vec<u32> = fim[3..].iter().flatten().copied().collect();
    for text in EOG_TEXTS {
        if let Some(id) = vocab.id(text.as_bytes()) {
            eog.push(id);
            force_control(&mut vocab, id);
        }
    }
    // gpt-oss: these always render.
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = vocab.id(text.as_bytes()) {
            vocab.set_attr(id, attr::USER_DEFINED);
        }
    }
    eog.extend([eos, eot, eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    // o200k_harmony and solar-open: "<|end|>" is not the end when "<|return|>" and "<|call|>"
    // (or "<|calls|>" and "<|flush|>") are there.
    let in_eog = |vocab: &Vocab, eog: &[u32], text: &str| {
        vocab
            .id(text.as_bytes())
            .filter(|id| eog.binary_search(id).is_ok())
    };
    if let Some(end) = in_eog(&vocab, &eog, "<|end|>") {
        let has = |t| in_eog(&vocab, &eog, t).is_some();
        let call = has("<|call|>") || has("<|calls|>");
        if call && (has("<|return|>") || has("<|flush|>")) {
            eog.retain(|&id| id != end);
            vocab.set_attr(end, attr::USER_DEFINED);
        }
    }
    // Gemma 4, PaddleOCR and PLaMo: "</s>" is a normal token when "<|tool_response>" or
    // "<|plamo:eos|>" ends generation.
    if (in_eog(&vocab, &eog, "<|tool_response>").is_some()
        || in_eog(&vocab, &eog, "<|plamo:eos|>").is_some())
        && let Some(s) = in_eog(&vocab, &eog, "</s>")
    {
        eog.retain(|&id| id != s);
        vocab.set_attr(s, attr::NORMAL);
    }

    Ok(Loaded {
        model,
        pre,
        vocab,
        merges,
        bos,
        eos,
        eot,
        unk,
        pad,
        add_bos,
        add_eos,
        add_space_prefix,
        eog,
    })
}

/// Pieces, scores and types, checked.
fn read_vocab(meta: &Meta<'_>) -> Result<Vocab> {
    let tokens = match meta.array(TOKENS)? {
        Some(GgufArray::String(tokens)) => tokens,
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "{TOKENS} must be an array of strings, not of {}",
                array_kind(other)
            )));
        }
        None => return Err(Error::invalid_argument(format!("{TOKENS} is missing"))),
    };
    let count = tokens.len();
    if count == 0 {
        return Err(Error::invalid_argument(format!("{TOKENS} is empty")));
    }
    let scores: Option<Vec<f32>> = match meta.array(SCORES)? {
        None => None,
        Some(GgufArray::F32(s)) if s.len() == count => Some(s.clone()),
        Some(GgufArray::I32(s)) if s.len() == count => Some(s.iter().map(|&v| v as f32).collect()),
        Some(GgufArray::F32(s)) => return Err(length_mismatch(SCORES, s.len(), count)),
        Some(GgufArray::I32(s)) => return Err(length_mismatch(SCORES, s.len(), count)),
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "{SCORES} must be an array of f32 or i32, not of {}",
                array_kind(other)
            )));
        }
    };
    let types: Option<&Vec<i32>> = match meta.array(TYPES)? {
        None => None,
        Some(GgufArray::I32(t)) if t.len() == count => Some(t),
        Some(GgufArray::I32(t)) => return Err(length_mismatch(TYPES, t.len(), count)),
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "{TYPES} must be an array of i32, not of {}",
                array_kind(other)
            )));
        }
    };
    let total: usize = tokens.iter().map(Vec::len).fold(0, usize::saturating_add);
    let mut vocab = Vocab::with_capacity(count, total);
    for (i, piece) in tokens.iter().enumerate() {
        if std::str::from_utf8(piece).is_err() {
            return Err(Error::invalid_argument(format!(
                "{TOKENS}[{i}] is not UTF-8"
            )));
        }
        let score = scores.as_ref().map_or(0.0, |s| s[i]);
        if score.is_nan() {
            return Err(Error::invalid_argument(format!("{SCORES}[{i}] is NaN")));
        }
        // Adding +0.0 turns -0.0 into +0.0, so that `total_cmp` orders as llama.cpp's `<`.
        let score = score + 0.0;
        let bits = types.map_or(attr::NORMAL, |t| attr::of_token_type(t[i]));
        let empty;
        let piece: &[u8] = if piece.is_empty() {
            // llama.cpp's stand-in for an empty piece.
            empty = format!("[EMPTY_{i}]");
            empty.as_bytes()
        } else {
            piece
        };
        match vocab.push(piece, score, bits) {
            Ok(_) => {}
            Err(AddError::Duplicate(first)) => {
                return Err(Error::invalid_argument(format!(
                    "{TOKENS}[{i}] {:?} repeats token {first}",
                    String::from_utf8_lossy(piece)
                )));
            }
            Err(AddError::TooLarge) => {
                return Err(Error::invalid_argument(format!(
                    "{TOKENS}: pieces past 4 GiB in all"
                )));
            }
        }
    }
    vocab.shrink_to_fit();
    Ok(vocab)
}
