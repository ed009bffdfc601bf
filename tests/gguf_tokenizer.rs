//! The GGUF tokenizer on real vocabularies, against llama.cpp.
//!
//! - Gemma 3 270M (`.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf`, fetched by
//!   scripts/setup.sh): hand-checked ids from DECODER-FACTS §0, then the llama.cpp oracle
//!   `tests/fixtures/gemma/tokenize.json` (scripts/make-gemma-llamacpp-fixtures.py, llama-cpp-python
//!   over the same file): every case's ids, every listed piece and every detokenization must be
//!   identical (no tolerance: ids are integers); and the prompts of `gemma/prompts.json`.
//! - Every tiny decoder GGUF of scripts/make-tiny-decoders.py (SentencePiece and byte-level BPE
//!   with several pre-tokenizers) with its `tiny-*.llamacpp.json` tokenizations.
//!
//! Also measured (printed, not asserted beyond a generous bound): the heap the Gemma tokenizer
//! holds, counted by a counting global allocator, its build time and its encode speed.
#![cfg(not(target_arch = "wasm32"))]

mod counting_alloc;

use counting_alloc::{live, peak, reset_peak};
use std::sync::Mutex;
use std::time::Instant;
use webdelegate::params::RangeRead;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::send_sync::LocalBoxFuture;
use webdelegate::text::{GgufTokenizer, IncrementalDecoder, TokenizerModel};

/// Serialises the measuring test with the other Gemma builds.
static MEASURE: Mutex<()> = Mutex::new(());

/// A local file read by ranges.
struct FileReader {
    file: Mutex<std::fs::File>,
    size: u64,
}

impl FileReader {
    fn open(path: &str) -> Self {
        let file = std::fs::File::open(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (scripts/setup.sh fetches it)"));
        let size = file.metadata().unwrap().len();
        Self {
            file: Mutex::new(file),
            size,
        }
    }
}

impl RangeRead for FileReader {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read_range(
        &self,
        offset: u64,
        length: u64,
    ) -> LocalBoxFuture<'_, webdelegate::params::StatusResult<Vec<u8>>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.file.lock().unwrap();
        let mut bytes = vec![0u8; length as usize];
        let result = file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map(|_| bytes)
            .map_err(|e| webdelegate::error::Status::out_of_range(format!("read: {e}")));
        Box::pin(async move { result })
    }
}

fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

fn parse(path: &str) -> GgufIndex {
    pollster::block_on(GgufIndex::parse(&FileReader::open(path))).expect("GGUF header")
}

fn gemma_path() -> String {
    format!(
        "{}/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf",
        root()
    )
}

fn gemma() -> GgufTokenizer {
    let _guard = MEASURE.lock().unwrap_or_else(|e| e.into_inner());
    GgufTokenizer::from_gguf(&parse(&gemma_path())).expect("Gemma tokenizer")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn ids_of(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

fn fixture(path: &str) -> serde_json::Value {
    let full = format!("{}/tests/fixtures/{path}", root());
    let bytes = std::fs::read(&full).unwrap_or_else(|e| {
        panic!("{full}: {e} (written with llama.cpp by the scripts named in this file's docs)")
    });
    serde_json::from_slice(&bytes).expect("fixture JSON")
}

/// DECODER-FACTS §0, read off the file's header by hand.
#[test]
fn gemma_hand_checked_ids() {
    let t = gemma();
    assert_eq!(t.model(), TokenizerModel::SentencePiece);
    assert_eq!(t.vocab_size(), 262_144);
    assert_eq!(
        (t.bos(), t.eos(), t.unk(), t.pad()),
        (Some(2), Some(1), Some(3), Some(0))
    );
    assert!(t.add_bos_default() && !t.add_eos_default() && !t.add_space_prefix());
    assert_eq!(t.token_text(2), Some("<bos>"));
    assert_eq!(t.token_text(105), Some("<start_of_turn>"));
    assert_eq!(t.token_text(106), Some("<end_of_turn>"));
    assert_eq!(t.encode("\n", false, false).unwrap(), [107]);
    assert_eq!(t.encode("\n\n", false, false).unwrap(), [108]);
    // Newline runs up to 31 are user-defined pieces (107 + n - 1), matched longest first.
    assert_eq!(t.encode("\n\n\n", false, false).unwrap(), [109]);
    assert_eq!(
        t.encode(&"\n".repeat(33), false, false).unwrap(),
        [137, 108]
    );
    assert_eq!(t.encode("", true, true).unwrap(), [2]);
    // Control pieces only with parse_special.
    let turn = t.encode("<start_of_turn>user", true, true).unwrap();
    assert_eq!(&turn[..2], [2, 105]);
    assert!(
        !t.encode("<start_of_turn>", false, false)
            .unwrap()
            .contains(&105)
    );
    // Byte fallback: U+10FFFD (supplementary private use) is no piece; its bytes F4 8F BF BD are
    // the byte tokens <0xF4>... at 238 + byte.
    assert_eq!(t.token_text(238), Some("<0x00>"));
    assert_eq!(t.token_id("\u{10FFFD}"), None);
    assert_eq!(
        t.encode("\u{10FFFD}", false, false).unwrap(),
        [238 + 0xF4, 238 + 0x8F, 238 + 0xBF, 238 + 0xBD]
    );
    // End of generation: <eos> and <end_of_turn>.
    assert!(t.is_end_of_generation(1) && t.is_end_of_generation(106));
    assert!(!t.is_end_of_generation(105) && !t.is_end_of_generation(2));
    assert_eq!(t.eot(), Some(106));
    // Pieces: ▁ is a space, control tokens as written.
    assert_eq!(t.token_to_piece(107), b"\n");
    assert_eq!(t.token_to_piece(2), b"<bos>");
    assert_eq!(t.token_to_piece_with(2, false), b"");
    let hello = t.encode("Hello world", true, true).unwrap();
    assert_eq!(t.decode(&hello), "<bos>Hello world");
}

/// No two special pieces of equal length can overlap (a proper suffix of one being a prefix of
/// the other), so the partition does not depend on how llama.cpp's unstable `std::sort` orders
/// pieces of equal length.
#[test]
fn gemma_special_pieces_of_equal_length_never_overlap() {
    use std::collections::{HashMap, HashSet};
    let t = gemma();
    let specials = t.special_tokens();
    assert!(specials.len() > 6000, "{}", specials.len());
    let mut by_len: HashMap<usize, Vec<&[u8]>> = HashMap::new();
    for &id in specials {
        let piece = t.token_text(id).unwrap().as_bytes();
        by_len.entry(piece.len()).or_default().push(piece);
    }
    for (len, pieces) in by_len {
        let prefixes: HashSet<&[u8]> = pieces
            .iter()
            .flat_map(|p| (1..len).map(move |k| &p[..k]))
            .collect();
        for a in &pieces {
            for k in 1..len {
                let suffix = &a[len - k..];
                let clash = prefixes.contains(suffix)
                    && pieces.iter().any(|b| b != a && b.starts_with(suffix));
                assert!(
                    !clash,
                    "{:?} overlaps another piece of length {len}",
                    String::from_utf8_lossy(a)
                );
            }
        }
    }
}

/// A character split over byte-fallback tokens streams out whole.
#[test]
fn gemma_streams_a_character_split_over_byte_tokens() {
    let t = gemma();
    let ids = t.encode("a\u{10FFFD}b", false, false).unwrap();
    let mut decoder = IncrementalDecoder::new();
    let pieces: Vec<String> = ids.iter().map(|&id| decoder.push(&t, id)).collect();
    assert_eq!(pieces.concat() + &decoder.finish(), "a\u{10FFFD}b");
    // The four byte tokens give nothing, nothing, nothing, then the character.
    let first_byte = ids.iter().position(|&id| id == 238 + 0xF4).unwrap();
    assert_eq!(&pieces[first_byte..first_byte + 3], ["", "", ""]);
    assert!(pieces[first_byte + 3].starts_with('\u{10FFFD}'));
    // Cut after two of the four bytes: one U+FFFD at the end.
    let mut d = IncrementalDecoder::new();
    for &id in &ids[..first_byte + 2] {
        d.push(&t, id);
    }
    assert_eq!(d.finish(), "\u{FFFD}");
}

/// Memory, build time and encode speed of the Gemma vocabulary (printed for the report).
#[test]
fn gemma_memory_build_time_and_speed() {
    let _guard = MEASURE.lock().unwrap_or_else(|e| e.into_inner());
    let index = parse(&gemma_path());
    let before = live();
    reset_peak();
    let start = Instant::now();
    let t = GgufTokenizer::from_gguf(&index).unwrap();
    let build = start.elapsed();
    let held = live() - before;
    let peak = peak() - before;
    let with_index = live();
    drop(index);
    let index_bytes = with_index - live();
    // A long mixed text: the oracle prompts (prose, code, HTML, eleven languages) repeated.
    let prompts = fixture("gemma/prompts.json");
    let one: String = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n\n");
    let text = one.repeat(20);
    let start = Instant::now();
    let ids = t.encode(&text, true, true).unwrap();
    let encode = start.elapsed();
    let rate = ids.len() as f64 / encode.as_secs_f64();
    println!(
        "gemma tokenizer: heap held {held} B ({:.2} MiB; own estimate {} B), build peak {peak} B, \
         build {:.1} ms; encode {} bytes -> {} tokens in {:.1} ms = {rate:.0} tokens/s; \
         the parsed GGUF index (all metadata) held {index_bytes} B",
        held as f64 / 1048576.0,
        t.heap_bytes(),
        build.as_secs_f64() * 1e3,
        text.len(),
        ids.len(),
        encode.as_secs_f64() * 1e3,
    );
    // The design target: well under 10 MiB for 262,144 tokens (the arena layout's ~6.5 MiB).
    assert!(held < 10 << 20, "{held} bytes held");
    assert_eq!(t.decode(&ids[1..]), text, "round trip");
}

fn check_cases(t: &GgufTokenizer, cases: &[serde_json::Value], what: &str) -> usize {
    let mut bad = Vec::new();
    for case in cases {
        let add = case["add_bos"].as_bool().unwrap();
        let special = case["parse_special"].as_bool().unwrap();
        let want = ids_of(&case["ids"]);
        let (label, got) = match case.get("text") {
            Some(text) => {
                let text = text.as_str().unwrap();
                (format!("{text:?}"), t.encode(text, add, special).unwrap())
            }
            None => {
                let bytes = unhex(case["hex"].as_str().unwrap());
                (
                    format!("bytes {}", case["hex"]),
                    t.encode_bytes(&bytes, add, special).unwrap(),
                )
            }
        };
        if got != want {
            bad.push(format!(
                "{label} add_bos={add} special={special}: got {got:?}, llama.cpp {want:?}"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{what}: {} of {} cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
    cases.len()
}

#[test]
fn gemma_tokenizes_pieces_and_detokenizes_like_llama_cpp() {
    let doc = fixture("gemma/tokenize.json");
    let t = gemma();
    let n = check_cases(&t, doc["cases"].as_array().unwrap(), "gemma cases");
    assert!(n >= 200, "{n} cases");
    if let Some(bytes) = doc.get("byte_cases") {
        check_cases(&t, bytes.as_array().unwrap(), "gemma byte cases");
    }
    let mut bad = Vec::new();
    for piece in doc["pieces"].as_array().unwrap() {
        let id = piece["id"].as_u64().unwrap() as u32;
        let got = hex(&t.token_to_piece(id));
        if got != piece["hex"].as_str().unwrap() {
            bad.push(format!("piece {id}: {got} vs {}", piece["hex"]));
        }
    }
    for piece in doc["pieces_nonspecial"].as_array().into_iter().flatten() {
        let id = piece["id"].as_u64().unwrap() as u32;
        let got = hex(&t.token_to_piece_with(id, false));
        if got != piece["hex"].as_str().unwrap() {
            bad.push(format!("non-special piece {id}: {got} vs {}", piece["hex"]));
        }
    }
    for case in doc["detokenize"].as_array().into_iter().flatten() {
        let ids = ids_of(&case["ids"]);
        let rs = case["remove_special"].as_bool().unwrap();
        let us = case["unparse_special"].as_bool().unwrap();
        let got = hex(&t.detokenize(&ids, rs, us));
        if got != case["hex"].as_str().unwrap() {
            bad.push(format!(
                "detokenize {ids:?} {rs} {us}: {got} vs {}",
                case["hex"]
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The prompts of the generation oracles (5 to ~700 tokens, prose, code, lists, HTML, eleven
/// languages), tokenized by llama.cpp with BOS and special parsing.
#[test]
fn gemma_prompts_tokenize_like_llama_cpp() {
    let doc = fixture("gemma/prompts.json");
    let t = gemma();
    let mut n = 0;
    for prompt in doc["prompts"].as_array().unwrap() {
        let text = prompt["text"].as_str().unwrap();
        let got = t.encode(text, true, true).unwrap();
        assert_eq!(got, ids_of(&prompt["ids"]), "prompt {}", prompt["name"]);
        n += got.len();
    }
    assert!(n > 1000, "{n} tokens");
}

fn tiny(arch: &str, model: TokenizerModel) {
    let path = format!("{}/tests/fixtures/decoders/tiny-{arch}.gguf", root());
    let t = GgufTokenizer::from_gguf(&parse(&path)).expect("tiny tokenizer");
    assert_eq!(t.model(), model);
    let doc = fixture(&format!("decoders/tiny-{arch}.llamacpp.json"));
    let n = check_cases(&t, doc["tokenize"].as_array().unwrap(), arch);
    assert!(n >= 600, "{arch}: {n} cases (200 strings in three modes)");
}

/// Every tiny decoder's vocabulary (SentencePiece: llama, phi3, gemma2, gemma3; byte-level
/// BPE with the `llama-bpe`, `smollm` and `qwen2` pre-tokenizers: llama3, smollm, qwen2, qwen3;
/// mistral) against llama.cpp on the fixture's strings, each in three modes.
#[test]
fn every_tiny_decoder_tokenizes_like_llama_cpp() {
    use TokenizerModel::{BytePairEncoding as Bpe, SentencePiece as Spm};
    for (variant, model) in [
        ("llama", Spm),
        ("llama3", Bpe),
        ("smollm", Bpe),
        ("mistral", Spm),
        ("qwen2", Bpe),
        ("qwen3", Bpe),
        ("phi3", Spm),
        ("gemma2", Spm),
        ("gemma3", Spm),
    ] {
        tiny(variant, model);
    }
}
