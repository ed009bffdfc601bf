//! llama.cpp's byte-level BPE (`llm_tokenizer_bpe_session`) over one pre-tokenized, byte-encoded
//! word: its characters are the first symbols; repeatedly the adjacent pair with the lowest merge
//! rank (leftmost on ties) merges; each final symbol is its token, or else the tokens of its
//! single bytes where those exist (llama.cpp drops the rest).
//!
//! The merge loop is ours rather than Hugging Face `tokenizers`' BPE model: that model keeps the
//! vocabulary twice as `String` maps plus a `String`-pair merge map (about three times this
//! arena's memory for a 150,000-token vocabulary) and refuses merges whose result is not a
//! token, which llama.cpp accepts (such a symbol falls back to its bytes).

use super::vocab::Vocab;
use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Merge ranks by token pair, sorted by `(left << 32) | right` for binary search.
#[derive(Clone, Debug, Default)]
pub(super) struct MergeRanks {
    keys: Vec<u64>,
    ranks: Vec<u32>,
}

impl MergeRanks {
    /// Ranks from `tokenizer.ggml.merges` (`"left right"`, split at the first space after the
    /// first byte, as llama.cpp splits them); a pair listed twice keeps its first rank.
    ///
    /// # Errors
    /// `InvalidArgument` naming the entry when it has no space, is not UTF-8, or names a piece
    /// that is not a token.
    pub fn new(vocab: &Vocab, merges: &[Vec<u8>]) -> Result<Self> {
        const KEY: &str = "tokenizer.ggml.merges";
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(merges.len());
        for (rank, entry) in merges.iter().enumerate() {
            let text = std::str::from_utf8(entry)
                .map_err(|_| Error::invalid_argument(format!("{KEY}[{rank}] is not UTF-8")))?;
            // A byte search from byte 1: a space is never inside a multi-byte character.
            let split = entry
                .iter()
                .skip(1)
                .position(|&b| b == b' ')
                .map(|at| at + 1)
                .ok_or_else(|| {
                    Error::invalid_argument(format!("{KEY}[{rank}] {text:?} has no space"))
                })?;
            let (left, right) = (&text[..split], &text[split + 1..]);
            let id = |piece: &str| {
                vocab.id(piece.as_bytes()).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{KEY}[{rank}] {text:?} names {piece:?}, which is not a token"
                    ))
                })
            };
            let key = (u64::from(id(left)?) << 32) | u64::from(id(right)?);
            let rank = u32::try_from(rank)
                .map_err(|_| Error::invalid_argument(format!("{KEY}: too many merges")))?;
            pairs.push((key, rank));
        }
        pairs.sort_unstable();
        pairs.dedup_by_key(|pair| pair.0);
        let (keys, ranks) = pairs.into_iter().unzip();
        Ok(Self { keys, ranks })
    }

    /// The rank of merging `left` with `right`.
    pub fn rank(&self, left: u32, right: u32) -> Option<u32> {
        let key = (u64::from(left) << 32) | u64::from(right);
        self.keys.binary_search(&key).ok().map(|i| self.ranks[i])
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * 8 + self.ranks.capacity() * 4
    }
}

#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
    id: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: i32,
    right: i32,
    size: u32,
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The max-heap's top is the lowest rank, then the smallest left index
    /// (`llm_bigram_bpe::comparator`).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
            .then_with(|| other.size.cmp(&self.size))
    }
}

/// Appends the tokens of one byte-encoded `word` to `out`.
pub(super) fn tokenize_word(
    vocab: &Vocab,
    ranks: &MergeRanks,
    ignore_merges: bool,
    word: &str,
    out: &mut Vec<u32>,
) {
    let bytes = word.as_bytes();
    if bytes.is_empty() {
        return;
    }
    if ignore_merges && let Some(id) = vocab.id(bytes) {
        out.push(id);
        return;
    }
    let mut symbols: Vec<Symbol> = word
        .char_indices()
        .enumerate()
        .map(|(i, (start, c))| {
            let len = c.len_utf8();
            Symbol {
                start: start as u32,
                len: len as u32,
                prev: i as i32 - 1,
                next: i as i32 + 1,
                id: vocab.id(&bytes[start..start + len]),
            }
        })
        .collect();
    if let Some(last) = symbols.last_mut() {
        last.next = -1;
    }
    let mut queue = BinaryHeap::with_capacity(symbols.len());
    let add = |symbols: &[Symbol], queue: &mut BinaryHeap<Bigram>, left: i32, right: i32| {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        if let (Some(a), Some(b)) = (l.id, r.id)
            && let Some(rank) = ranks.rank(a, b)
        {
            queue.push(Bigram {
                rank,
                left,
                right,
                size: l.len + r.len,
            });
        }
    };
    for i in 1..symbols.len() as i32 {
        add(&symbols, &mut queue, i - 1, i);
    }
    while let Some(bigram) = queue.pop() {
        let (left, right) = (bigram.left as usize, bigram.right as usize);
        let (l, r) = (symbols[left], symbols[right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != bigram.size {
            continue;
        }
        let merged = &bytes[l.start as usize..(l.start + bigram.size) as usize];
        symbols[left].len = bigram.size;
        symbols[left].id = vocab.id(merged);
        symbols[right].len = 0;
        symbols[left].next = r.next;
        if r.next >= 0 {
            symbols[r.next as usize].prev = bigram.left;
        }
        let (prev, next) = (symbols[left].prev, symbols[left].next);
        add(&symbols, &mut queue, prev, bigram.left);
        add(&symbols, &mut queue, bigram.left, next);
    }
    let mut i = 0i32;
    while i >= 0 {
        let symbol = symbols[i as usize];
        match symbol.id {
            Some(id) => out.push(id),
            None => {
                let text = &bytes[symbol.start as usize..(symbol.start + symbol.len) as usize];
                out.extend(text.iter().filter_map(|&b| vocab.id(&[b])));
            }
        }
        i = symbol.next;
    }
}
