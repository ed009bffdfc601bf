//! Byte-level BPE pre-tokenization as llama.cpp does it: the regex list that
//! `tokenizer.ggml.pre` selects (llama-vocab.cpp, `llm_tokenizer_bpe`), applied one after
//! another, each splitting every piece the previous one left (matches and the gaps between them
//! both become words: `unicode_regex_split`), then every byte of a word mapped to GPT-2's
//! printable characters (`unicode_byte_to_utf8`).
//!
//! The splitting runs on Hugging Face `tokenizers`' `Split` pre-tokenizer (fancy-regex, Unicode
//! classes). llama.cpp runs the GPT-2 and Llama 3 lists through hand-written matchers and the
//! others through `std::regex` over text whose non-ASCII code points are collapsed to one byte
//! per Unicode category; both are meant to equal the regex, and the oracle tests check that they
//! do on the strings that matter (letters, digits, punctuation, emoji, whitespace runs).

use crate::error::{Error, Result};
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer, SplitDelimiterBehavior,
};

/// The GPT-2 list (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_GPT2` and friends).
const GPT2: &[&str] = &[r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"];

/// llama.cpp's default list (`LLAMA_VOCAB_PRE_TYPE_DEFAULT`, `pre = "default"` or absent).
const DEFAULT: &[&str] = &[
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
];

/// Llama 3 (the case-insensitive contractions spelled out, as llama.cpp adapts them).
const LLAMA3: &[&str] = &[
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// Qwen 2: Llama 3's list with single digits.
const QWEN2: &[&str] = &[
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// Qwen 3.5: letters take their combining marks.
const QWEN35: &[&str] = &[
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// StarCoder, SmolLM, Command-R and friends: digits one by one, then GPT-2.
const STARCODER: &[&str] = &[
    r"\p{N}",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
];

/// Falcon.
const FALCON: &[&str] = &[
    r"[\p{P}\$\+<=>\^~\|`]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"[0-9][0-9][0-9]",
];

/// DeepSeek Coder.
const DEEPSEEK_CODER: &[&str] = &[
    "[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    r"\p{N}",
];

/// GPT-4o, Llama 4.
const GPT4O: &[&str] = &[
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// Tekken (Mistral Nemo).
const TEKKEN: &[&str] = &[
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// BLOOM, Poro, GPT-3 Finnish.
const BLOOM: &[&str] = &[r" ?[^(\s|.,!?…。，、।۔،)]+"];

/// ChatGLM 4 (also its BOS: none).
const CHATGLM4: &[&str] = LLAMA3;

/// What a `tokenizer.ggml.pre` value sets, as llama.cpp's `llama_vocab::impl::load` does.
#[derive(Clone, Copy, Debug)]
pub(super) struct PreType {
    /// The regex list.
    pub regexes: &'static [&'static str],
    /// `ignore_merges`: a word that is a token is taken whole.
    pub ignore_merges: bool,
    /// The `add_bos` default before `tokenizer.ggml.add_bos_token` overrides it.
    pub add_bos: bool,
    /// The BOS id default is none (ChatGLM).
    pub no_bos: bool,
    /// `clean_spaces`: `llama_detokenize` removes spaces before `?!.,` and in contractions.
    pub clean_spaces: bool,
}

impl PreType {
    /// The pre-tokenizer type of `name` (`None` when absent: llama.cpp warns and uses default).
    ///
    /// # Errors
    /// `InvalidArgument` naming the value when this implementation does not know it (llama.cpp
    /// refuses unknown values too; the ones it knows and this one does not are listed there).
    pub fn of(name: Option<&str>) -> Result<Self> {
        let base = |regexes| Self {
            regexes,
            ignore_merges: false,
            add_bos: false,
            no_bos: false,
            clean_spaces: true,
        };
        let unclean = |regexes| Self {
            clean_spaces: false,
            ..base(regexes)
        };
        let Some(name) = name else {
            return Ok(base(DEFAULT));
        };
        Ok(match name {
            "default" => base(DEFAULT),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => Self {
                ignore_merges: true,
                add_bos: true,
                ..base(LLAMA3)
            },
            "dbrx" | "smaug-bpe" => base(LLAMA3),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo"
            | "jais" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => base(GPT2),
            "trillion" | "granite-docling" => unclean(GPT2),
            "megrez" | "stablelm2" => base(QWEN2),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
                unclean(QWEN2)
            }
            "qwen35" => unclean(QWEN35),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
                base(STARCODER)
            }
            "command-r" | "smollm" => unclean(STARCODER),
            "falcon" => base(FALCON),
            "deepseek-coder" => unclean(DEEPSEEK_CODER),
            "gpt-4o" | "llama4" | "kanana2" | "talkie" => unclean(GPT4O),
            "tekken" => Self {
                ignore_merges: true,
                add_bos: true,
                ..unclean(TEKKEN)
            },
            "poro-chat" => unclean(BLOOM),
            "bloom" | "gpt3-finnish" => base(BLOOM),
            "glm4" | "chatglm-bpe" => Self {
                no_bos: true,
                ..base(CHATGLM4)
            },
            other => {
                return Err(Error::invalid_argument(format!(
                    "tokenizer.ggml.pre: pre-tokenizer '{other}' is not supported"
                )));
            }
        })
    }
}

/// A compiled regex list.
pub(super) struct PreTokenizerList {
    splits: Vec<Split>,
}

impl std::fmt::Debug for PreTokenizerList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreTokenizerList")
            .field("regexes", &self.splits.len())
            .finish()
    }
}

impl PreTokenizerList {
    /// Compiles `regexes`.
    ///
    /// # Errors
    /// `Internal` if a regex does not compile (they are constants; a test compiles them all).
    pub fn new(regexes: &[&str]) -> Result<Self> {
        let splits = regexes
            .iter()
            .map(|r| {
                Split::new(
                    SplitPattern::Regex((*r).to_owned()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .map_err(|e| Error::internal(format!("pre-tokenizer regex {r:?}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { splits })
    }

    /// The words of `text`, as byte ranges into it, in order.
    ///
    /// # Errors
    /// `InvalidArgument` when the regex engine gives up (fancy-regex's backtracking limit on a
    /// pathological input).
    pub fn words(&self, text: &str) -> Result<Vec<(usize, usize)>> {
        let mut pre = PreTokenizedString::from(text);
        for split in &self.splits {
            split
                .pre_tokenize(&mut pre)
                .map_err(|e| Error::invalid_argument(format!("pre-tokenization failed: {e}")))?;
        }
        Ok(pre
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(_, offsets, _)| offsets)
            .collect())
    }
}

/// GPT-2's byte → printable character table (`bytes_to_unicode`): the printable Latin-1 bytes
/// map to themselves, the other 68 to U+0100 upwards in byte order.
pub(super) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for (byte, slot) in table.iter_mut().enumerate() {
        let b = byte as u32;
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        let code = if printable {
            b
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(code).unwrap_or('\u{FFFD}');
    }
    table
}

/// The byte a GPT-2 printable character stands for (the inverse of [`byte_to_char_table`]).
pub(super) fn char_to_byte(c: char) -> Option<u8> {
    let code = c as u32;
    if (0x21..=0x7E).contains(&code)
        || (0xA1..=0xAC).contains(&code)
        || (0xAE..=0xFF).contains(&code)
    {
        return Some(code as u8);
    }
    // U+0100 + n is the n-th byte (in byte order) that is not printable.
    let n = code.checked_sub(256)?;
    (0u32..256)
        .filter(|&b| !((0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE))
        .nth(n as usize)
        .map(|b| b as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_gpt2s_and_inverts() {
        let table = byte_to_char_table();
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[b'a' as usize], 'a');
        assert_eq!(table[0], 'Ā');
        assert_eq!(table[0xAD], 'Ń');
        for (b, &c) in table.iter().enumerate() {
            assert_eq!(char_to_byte(c), Some(b as u8), "{b}");
        }
        assert_eq!(char_to_byte('€'), None);
    }

    #[test]
    fn every_listed_regex_compiles() {
        for list in [
            GPT2,
            DEFAULT,
            LLAMA3,
            QWEN2,
            QWEN35,
            STARCODER,
            FALCON,
            DEEPSEEK_CODER,
            GPT4O,
            TEKKEN,
            BLOOM,
        ] {
            PreTokenizerList::new(list).unwrap();
        }
    }

    fn split(list: &[&str], text: &str) -> Vec<String> {
        let pre = PreTokenizerList::new(list).unwrap();
        pre.words(text)
            .unwrap()
            .into_iter()
            .map(|(a, b)| text[a..b].to_owned())
            .collect()
    }

    /// Hand-worked against the regexes' definitions (and llama.cpp's hand-written matchers).
    #[test]
    fn llama3_and_qwen2_split_like_their_regexes() {
        assert_eq!(
            split(LLAMA3, "Hello world's 12345  \n\n x!!\n"),
            [
                "Hello", " world", "'s", " ", "123", "45", "  \n\n", " x", "!!\n"
            ]
        );
        assert_eq!(split(QWEN2, "ab 123"), ["ab", " ", "1", "2", "3"]);
        assert_eq!(split(GPT2, "a  b\tc"), ["a", " ", " b", "\t", "c"]);
        assert_eq!(split(DEFAULT, "x=1234,y"), ["x", "=", "123", "4", ",", "y"]);
    }
}
