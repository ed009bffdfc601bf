//! The tokenizer a GGUF file carries in its own metadata (`tokenizer.ggml.*`), reproducing
//! llama.cpp's `llama_tokenize` and `llama_token_to_piece` (src/llama-vocab.cpp), so that a
//! model runs on exactly the token ids llama.cpp would give it.
//!
//! - `tokenizer.ggml.model = "llama"` (Gemma, Llama 2): special pieces cut out first, then
//!   spaces become `▁` (after a leading space when `add_space_prefix`), then llama.cpp's
//!   score-driven SentencePiece merge with byte fallback ([`spm`]).
//! - `tokenizer.ggml.model = "gpt2"` (Llama 3, Qwen 2, SmolLM): special pieces cut out first,
//!   then the regex list of `tokenizer.ggml.pre` ([`pretokenize`], on Hugging Face
//!   `tokenizers`' `Split`), GPT-2's byte-to-character mapping, then ranked merges ([`bpe`]).
//!
//! Pieces live in one byte arena ([`vocab`]): Gemma 3's 262,144-token vocabulary takes about
//! 6.5 MiB of heap, which matters in a wasm module whose whole generator should stay near
//! 32 MiB. Decoding goes through [`GgufTokenizer::token_to_piece`] (llama.cpp's
//! `token_to_piece(id, special = true)`) and an [`IncrementalDecoder`] that emits only complete
//! UTF-8 characters while a character is split across byte tokens.
//!
//! llama.cpp's model-name rule for Phi-3 (`general.name` containing `phi-3` or `phi3`: every
//! special token eats the whitespace after it, except `<unk>`, `<s>` and `<|endoftext|>`) is
//! reproduced ([`apply_model_name_rules`]). Not reproduced: the jina `LSTRIP` rules, the
//! UGM/WPM/RWKV vocabularies, and `llama_detokenize`'s clean-up of spaces.
//! Where llama.cpp would throw while tokenizing (an SPM byte without a byte token) the unknown
//! token is emitted instead.

mod bpe;
mod detokenize;
mod metadata;
mod pretokenize;
mod special;
mod spm;
mod vocab;

pub use detokenize::IncrementalDecoder;
pub use metadata::TokenizerModel;

use crate::error::{Error, ErrorCode, Result};
use crate::params::formats::gguf::{GgufIndex, GgufValue};
use bpe::MergeRanks;
use pretokenize::{PreTokenizerList, byte_to_char_table, char_to_byte};
use special::Fragment;
use vocab::{Vocab, attr};

/// The model-specific half of the tokenizer.
#[derive(Debug)]
enum Model {
    /// SentencePiece-style: the token of each byte for the fallback.
    Spm {
        byte_tokens: Box<[Option<u32>; 256]>,
    },
    /// Byte-level BPE.
    Bpe {
        merges: MergeRanks,
        pre: PreTokenizerList,
        ignore_merges: bool,
        byte_chars: Box<[char; 256]>,
    },
}

/// A tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata, giving llama.cpp's ids.
#[derive(Debug)]
pub struct GgufTokenizer {
    vocab: Vocab,
    model: Model,
    kind: TokenizerModel,
    /// Control, user-defined and unknown tokens, longest piece first (the partition order).
    specials: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    eog: Vec<u32>,
}

impl GgufTokenizer {
    /// The tokenizer of a parsed GGUF header (it must have been parsed with
    /// [`GgufIndex::parse`], which keeps the metadata).
    ///
    /// # Errors
    /// As [`GgufTokenizer::from_metadata`].
    pub fn from_gguf(index: &GgufIndex) -> Result<Self> {
        Self::from_metadata(index.metadata())
    }

    /// The tokenizer of GGUF metadata pairs.
    ///
    /// # Errors
    /// `InvalidExternalData` naming the key when `tokenizer.ggml.*` is missing, ill-typed or
    /// inconsistent (token, score and type counts that differ, a non-UTF-8 or repeated piece, a
    /// NaN score, a special id out of range, a merge naming a piece that is not a token,
    /// `add_bos_token` without a BOS id, an unknown `pre`): the file is malformed, as for the
    /// rest of its header; `NotSupported` for a tokenizer model other than `llama` and `gpt2`.
    pub fn from_metadata(metadata: &[(String, GgufValue)]) -> Result<Self> {
        Self::build(metadata).map_err(|error| {
            if error.code() == ErrorCode::InvalidArgument {
                Error::new(ErrorCode::InvalidExternalData, error.message().to_owned())
            } else {
                error
            }
        })
    }

    /// [`from_metadata`](Self::from_metadata), its errors as the parts give them.
    fn build(metadata: &[(String, GgufValue)]) -> Result<Self> {
        let loaded = metadata::load(metadata)?;
        let mut vocab = loaded.vocab;
        apply_model_name_rules(&mut vocab, metadata);
        let model = match (loaded.model, loaded.pre) {
            (TokenizerModel::BytePairEncoding, Some(pre)) => Model::Bpe {
                merges: loaded.merges,
                pre: PreTokenizerList::new(pre.regexes)?,
                ignore_merges: pre.ignore_merges,
                byte_chars: Box::new(byte_to_char_table()),
            },
            _ => {
                let mut byte_tokens = Box::new([None; 256]);
                for (b, slot) in byte_tokens.iter_mut().enumerate() {
                    let hex = format!("<0x{b:02X}>");
                    *slot = vocab
                        .id(hex.as_bytes())
                        .or_else(|| vocab.id(&[b as u8]))
                        .or(loaded.unk);
                }
                Model::Spm { byte_tokens }
            }
        };
        let mut specials: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| {
                vocab.attr(id) & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        specials.sort_by_key(|&id| std::cmp::Reverse(vocab.piece(id).len()));
        Ok(Self {
            vocab,
            model,
            kind: loaded.model,
            specials,
            bos: loaded.bos,
            eos: loaded.eos,
            eot: loaded.eot,
            unk: loaded.unk,
            pad: loaded.pad,
            add_bos: loaded.add_bos,
            add_eos: loaded.add_eos,
            add_space_prefix: loaded.add_space_prefix,
            clean_spaces: loaded.pre.is_some_and(|p| p.clean_spaces),
            eog: loaded.eog,
        })
    }

    /// The token ids of `text`, as llama.cpp's `llama_tokenize(text, add_special,
    /// parse_special)`: with `add_special`, BOS first when the vocabulary adds it
    /// ([`add_bos_default`](Self::add_bos_default)) and EOS last when it adds that; with
    /// `parse_special`, control-token pieces in the text (`<start_of_turn>`) become their
    /// tokens, otherwise only user-defined pieces do.
    ///
    /// # Errors
    /// `InvalidArgument` only when a BPE pre-tokenizer regex gives up on a pathological input
    /// (fancy-regex's backtracking limit); SentencePiece encoding cannot fail.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        self.encode_bytes(text.as_bytes(), add_special, parse_special)
    }

    /// As [`encode`](Self::encode), for bytes that need not be UTF-8, taken as llama.cpp takes
    /// them: SentencePiece cuts symbols at each byte's UTF-8 lead length and falls back to byte
    /// tokens; BPE reads each invalid byte as U+FFFD (llama.cpp's `unicode_cpts_from_utf8`; a
    /// decoded surrogate or a code point past U+10FFFF, which llama.cpp keeps or throws on, is
    /// U+FFFD here too).
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_bytes(
        &self,
        text: &[u8],
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let fragments = special::partition(&self.vocab, &self.specials, text, parse_special);
        match &self.model {
            Model::Spm { byte_tokens } => {
                let byte_token = |b: u8| byte_tokens[usize::from(b)];
                let mut prev_special = true;
                let mut buffer = Vec::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(start, end) => {
                            buffer.clear();
                            if self.add_space_prefix && prev_special {
                                buffer.extend_from_slice(SPACE_MARK);
                            }
                            for &b in &text[start..end] {
                                if b == b' ' {
                                    buffer.extend_from_slice(SPACE_MARK);
                                } else {
                                    buffer.push(b);
                                }
                            }
                            spm::tokenize(&self.vocab, &buffer, &byte_token, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
            Model::Bpe {
                merges,
                pre,
                ignore_merges,
                byte_chars,
            } => {
                let mut word = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(start, end) => {
                            let piece = llama_lossy(&text[start..end]);
                            for (a, b) in pre.words(&piece)? {
                                word.clear();
                                word.extend(
                                    piece.as_bytes()[a..b]
                                        .iter()
                                        .map(|&x| byte_chars[usize::from(x)]),
                                );
                                bpe::tokenize_word(
                                    &self.vocab,
                                    merges,
                                    *ignore_merges,
                                    &word,
                                    &mut out,
                                );
                            }
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        Ok(out)
    }

    /// The bytes token `id` stands for, as llama.cpp's `token_to_piece(id, special = true)`:
    /// control, unknown and user-defined tokens give their piece as written; normal tokens give
    /// their piece with `▁` as a space (SentencePiece) or mapped back from GPT-2's byte
    /// characters (BPE); byte tokens `<0xNN>` give that one byte; any other type (unused,
    /// undefined) and an id out of range give nothing.
    pub fn token_to_piece(&self, id: u32) -> Vec<u8> {
        self.token_to_piece_with(id, true)
    }

    /// As [`token_to_piece`](Self::token_to_piece), with llama.cpp's `special` flag: when
    /// false, control and unknown tokens give nothing (user-defined ones still their piece).
    pub fn token_to_piece_with(&self, id: u32, special: bool) -> Vec<u8> {
        let bits = self.vocab.attr(id);
        let piece = self.vocab.piece(id);
        if !special && bits & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Vec::new();
        }
        if bits & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return piece.to_vec();
        }
        if bits & attr::NORMAL != 0 {
            return match self.model {
                Model::Spm { .. } => {
                    let text = String::from_utf8_lossy(piece);
                    text.replace('▁', " ").into_bytes()
                }
                Model::Bpe { .. } => decode_byte_level(piece),
            };
        }
        if bits & attr::BYTE != 0 {
            return vec![byte_of_token(piece)];
        }
        Vec::new()
    }

    /// The text of `ids`: their pieces concatenated, invalid UTF-8 replaced by U+FFFD (what an
    /// [`IncrementalDecoder`] streams). For llama.cpp's `llama_detokenize`, which also strips a
    /// prefix space and cleans up spaces, see [`detokenize`](Self::detokenize).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.token_to_piece(id)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// llama.cpp's `llama_detokenize(ids, remove_special, unparse_special)`, as bytes: with
    /// `remove_special`, a leading BOS and a trailing EOS that the vocabulary adds are dropped;
    /// the first piece loses one leading space when `add_space_prefix` (unless a BOS was
    /// dropped); pieces as [`token_to_piece_with`](Self::token_to_piece_with)`(id,
    /// unparse_special)`; then, for BPE vocabularies that ask for it, llama.cpp's three passes
    /// of space clean-up (`" ?"`, `" ' "`, `" 's"`...).
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special
            && self.add_bos
            && let (Some(&first), Some(bos)) = (ids.first(), self.bos)
            && first == bos
        {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special
            && self.add_eos
            && let (Some(&last), Some(eos)) = (ids.last(), self.eos)
            && last == eos
        {
            ids = &ids[..ids.len() - 1];
        }
        let mut text = Vec::new();
        for &id in ids {
            let piece = self.token_to_piece_with(id, unparse_special);
            let skip = usize::from(remove_space && piece.first() == Some(&b' '));
            text.extend_from_slice(&piece[skip..]);
            remove_space = false;
        }
        if self.clean_spaces {
            clean_spaces(&mut text);
        }
        text
    }

    /// The piece of `id` as stored in the vocabulary (`▁` and byte characters unmapped), or
    /// `None` out of range.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        ((id as usize) < self.vocab.len())
            .then(|| std::str::from_utf8(self.vocab.piece(id)).ok())
            .flatten()
    }

    /// The id whose stored piece is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text.as_bytes())
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The tokenizer algorithm.
    pub fn model(&self) -> TokenizerModel {
        self.kind
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// The end-of-turn token (`tokenizer.ggml.eot_token_id`, or detected by its text such as
    /// `<end_of_turn>` or `<|im_end|>`).
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    /// The unknown token.
    pub fn unk(&self) -> Option<u32> {
        self.unk
    }

    /// The padding token.
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    /// Whether `id` ends generation: llama.cpp's end-of-generation set (EOS, EOT, EOM, the
    /// fill-in-the-middle pad/repo/separator tokens and the pieces llama.cpp lists by text,
    /// such as Gemma's `<end_of_turn>`).
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The control, user-defined and unknown tokens whose pieces are cut out of the text before
    /// tokenizing, in the order they are matched (longest piece first, then lower id; llama.cpp
    /// sorts by length alone, which only matters for two equal-length pieces that overlap).
    pub fn special_tokens(&self) -> &[u32] {
        &self.specials
    }

    /// The end-of-generation tokens, sorted.
    pub fn end_of_generation(&self) -> &[u32] {
        &self.eog
    }

    /// Whether [`encode`](Self::encode) with `add_special` starts with BOS
    /// (`tokenizer.ggml.add_bos_token`, else the model's default).
    pub fn add_bos_default(&self) -> bool {
        self.add_bos
    }

    /// Whether [`encode`](Self::encode) with `add_special` ends with EOS.
    pub fn add_eos_default(&self) -> bool {
        self.add_eos
    }

    /// Whether a space is put before text at the start and after special tokens
    /// (`tokenizer.ggml.add_space_prefix`; SentencePiece only).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// Heap bytes this tokenizer holds (from capacities; the compiled pre-tokenizer regexes of a
    /// BPE vocabulary are not counted).
    pub fn heap_bytes(&self) -> usize {
        let model = match &self.model {
            Model::Spm { .. } => 256 * std::mem::size_of::<Option<u32>>(),
            Model::Bpe { merges, .. } => merges.heap_bytes() + 256 * 4,
        };
        self.vocab.heap_bytes() + model + self.specials.capacity() * 4 + self.eog.capacity() * 4
    }
}

/// `▁` (U+2581), SentencePiece's space.
const SPACE_MARK: &[u8] = "\u{2581}".as_bytes();

/// Bytes to text as llama.cpp's `unicode_cpts_from_utf8` reads them: a byte that does not start
/// a complete sequence (lead byte and continuation bytes only, no check for overlong forms) is
/// one U+FFFD, and reading resumes at the next byte.
fn llama_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(text);
    }
    let cont = |i: usize| bytes.get(i).is_some_and(|&b| b & 0xC0 == 0x80);
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        let b0 = u32::from(bytes[i]);
        let (cpt, len) = if b0 & 0x80 == 0 {
            (Some(b0), 1)
        } else if b0 & 0x40 == 0 {
            (None, 1)
        } else if b0 & 0x20 == 0 {
            if cont(i + 1) {
                let c = ((b0 & 0x1F) << 6) | (u32::from(bytes[i + 1]) & 0x3F);
                (Some(c), 2)
            } else {
                (None, 1)
            }
        } else if b0 & 0x10 == 0 {
            if cont(i + 1) && cont(i + 2) {
                let c = ((b0 & 0x0F) << 12)
                    | ((u32::from(bytes[i + 1]) & 0x3F) << 6)
                    | (u32::from(bytes[i + 2]) & 0x3F);
                (Some(c), 3)
            } else {
                (None, 1)
            }
        } else if b0 & 0x08 == 0 {
            if cont(i + 1) && cont(i + 2) && cont(i + 3) {
                let c = ((b0 & 0x07) << 18)
                    | ((u32::from(bytes[i + 1]) & 0x3F) << 12)
                    | ((u32::from(bytes[i + 2]) & 0x3F) << 6)
                    | (u32::from(bytes[i + 3]) & 0x3F);
                (Some(c), 4)
            } else {
                (None, 1)
            }
        } else {
            (None, 1)
        };
        out.push(cpt.and_then(char::from_u32).unwrap_or('\u{FFFD}'));
        i += len;
    }
    std::borrow::Cow::Owned(out)
}

/// llama.cpp's `clean_spaces` passes of `llama_detokenize`, ported literally (in place).
fn clean_spaces(text: &mut Vec<u8>) {
    // First pass: " ?", " !", " .", " ," lose the space.
    let n1 = text.len();
    let mut total = usize::from(n1 > 0);
    for i in 1..n1 {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
    // Second pass: a single apostrophe between spaces loses both spaces.
    let n2 = text.len();
    let mut total = usize::from(n2 > 0);
    let mut i = 1;
    while i < n2 {
        let x = text[i];
        if x == b'\'' && i + 1 < n2 && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    text.truncate(total);
    // Third pass: " 's", " 'm", " 're", " 've" lose the space.
    let n3 = text.len();
    let mut total = usize::from(n3 > 0);
    for i in 1..n3 {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n3 {
            let x1 = text[i + 1];
            if x1 == b's' || x1 == b'm' {
                total -= 1;
            } else if i + 2 < n3 {
                let x2 = text[i + 2];
                if (x1 == b'r' || x1 == b'v') && x2 == b'e' {
                    total -= 1;
                }
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

/// The byte of a byte token `<0xNN>` (llama.cpp's `token_to_byte`: `strtol` of the two
/// characters after `<0x`, 0 when they are not hex).
fn byte_of_token(piece: &[u8]) -> u8 {
    let digits = piece.get(3..5).unwrap_or_default();
    let mut value = 0u8;
    for &d in digits {
        match (d as char).to_digit(16) {
            Some(v) => value = value.wrapping_mul(16).wrapping_add(v as u8),
            None => break,
        }
    }
    value
}

/// A byte-level BPE piece back to bytes (llama.cpp's `llama_decode_text`): each character is a
/// byte; a character outside GPT-2's table becomes `[UNK_BYTE_0x..]` as llama.cpp writes it.
fn decode_byte_level(piece: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(piece);
    let mut out = Vec::with_capacity(piece.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

/// llama.cpp's attributes set by model name (`llama_vocab::impl::load`, "set attributes by
/// model/tokenizer/architecture name"): for Phi-3 files every special token (control,
/// user-defined, unknown) and `</s>` get `RSTRIP`, then `<unk>`, `<s>` and `<|endoftext|>`
/// lose it.
fn apply_model_name_rules(vocab: &mut Vocab, metadata: &[(String, GgufValue)]) {
    let name = metadata
        .iter()
        .find(|(key, _)| key == "general.name")
        .and_then(|(_, value)| value.as_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if !(name.contains("phi-3") || name.contains("phi3")) {
        return;
    }
    for id in 0..vocab.len() as u32 {
        let bits = vocab.attr(id);
        if bits & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0 {
            vocab.set_attr(id, bits | attr::RSTRIP);
        }
    }
    for (piece, on) in [
        ("</s>", true),
        ("<unk>", false),
        ("<s>", false),
        ("<|endoftext|>", false),
    ] {
        if let Some(id) = vocab.id(piece.as_bytes()) {
            let bits = vocab.attr(id);
            vocab.set_attr(
                id,
                if on {
                    bits | attr::RSTRIP
                } else {
                    bits & !attr::RSTRIP
                },
            );
        }
    }
}
