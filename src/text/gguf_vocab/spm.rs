//! llama.cpp's SentencePiece-style tokenizer (`llm_tokenizer_spm_session`): the text's UTF-8
//! characters are the first symbols; repeatedly the adjacent pair whose concatenation is a token
//! with the highest score (leftmost on ties) merges; each final symbol is its token, or its bytes
//! as byte tokens (`<0xNN>`) when it is not one.
//!
//! Written here rather than taken from Hugging Face `tokenizers`: its BPE model needs the merges
//! as a list, which a score-only SentencePiece vocabulary (Gemma: 262,144 pieces) would have to
//! expand into hundreds of thousands of String pairs in wasm memory, and its tie-breaking is not
//! llama.cpp's. The priority queue is llama.cpp's: higher score first, then smaller left index;
//! stale pairs (a side merged away or grown since) are skipped by their byte size.

use super::vocab::Vocab;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One symbol: a byte range of the text, linked to its neighbours (`-1`: none).
#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

/// A candidate merge of symbols `left` and `left`'s next.
#[derive(Clone, Copy, Debug)]
struct Bigram {
    score: f32,
    left: i32,
    right: i32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The max-heap's top is the highest score, then the smallest left index (llama.cpp's
    /// `llm_bigram_spm::comparator`). Scores are never NaN (the loader refuses them) and
    /// negative zero was made positive, so `total_cmp` is `<`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Bytes of the UTF-8 sequence a lead byte starts, llama.cpp's `unicode_len_utf8` (1 for a
/// continuation byte: invalid input is cut byte by byte, never rejected).
fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

/// Appends the tokens of `text` (already space-escaped; any bytes, as llama.cpp takes them) to
/// `out`. `byte_token(b)` is the token of byte `b` when a piece is not a token (llama.cpp's
/// `byte_to_token`), `None` to skip it.
pub(super) fn tokenize(
    vocab: &Vocab,
    bytes: &[u8],
    byte_token: &dyn Fn(u8) -> Option<u32>,
    out: &mut Vec<u32>,
) {
    if bytes.is_empty() {
        return;
    }
    let mut symbols: Vec<Symbol> = Vec::with_capacity(bytes.len());
    let mut start = 0usize;
    while start < bytes.len() {
        let len = utf8_len(bytes[start]).min(bytes.len() - start);
        let i = symbols.len() as i32;
        symbols.push(Symbol {
            start: start as u32,
            len: len as u32,
            prev: i - 1,
            next: i + 1,
        });
        start += len;
    }
    if let Some(last) = symbols.last_mut() {
        last.next = -1;
    }
    let piece = |s: &Symbol| &bytes[s.start as usize..(s.start + s.len) as usize];
    let mut queue = BinaryHeap::with_capacity(symbols.len());
    let try_add = |symbols: &[Symbol], queue: &mut BinaryHeap<Bigram>, left: i32, right: i32| {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        let size = l.len + r.len;
        let text = &bytes[l.start as usize..(l.start + size) as usize];
        if let Some(id) = vocab.id(text) {
            queue.push(Bigram {
                score: vocab.score(id),
                left,
                right,
                size,
            });
        }
    };
    for i in 1..symbols.len() as i32 {
        try_add(&symbols, &mut queue, i - 1, i);
    }
    while let Some(bigram) = queue.pop() {
        let (left, right) = (bigram.left as usize, bigram.right as usize);
        let (l, r) = (symbols[left], symbols[right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != bigram.size {
            continue;
        }
        symbols[left].len += r.len;
        symbols[right].len = 0;
        symbols[left].next = r.next;
        if r.next >= 0 {
            symbols[r.next as usize].prev = bigram.left;
        }
        let (prev, next) = (symbols[left].prev, symbols[left].next);
        try_add(&symbols, &mut queue, prev, bigram.left);
        try_add(&symbols, &mut queue, bigram.left, next);
    }
    let mut i = 0i32;
    while i >= 0 {
        let symbol = symbols[i as usize];
        let text = piece(&symbol);
        match vocab.id(text) {
            Some(id) => out.push(id),
            None => out.extend(text.iter().filter_map(|&b| byte_token(b))),
        }
        i = symbol.next;
    }
}
