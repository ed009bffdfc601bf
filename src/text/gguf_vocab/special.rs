//! Special-token partitioning, llama.cpp's `tokenizer_st_partition`: before any model runs, the
//! text is cut at the pieces of control, user-defined and unknown tokens, longest piece first
//! over the whole text (not leftmost-longest): each piece, in turn, splits every still-raw
//! fragment at all of its non-overlapping occurrences, left to right. Without `parse_special`
//! only user-defined pieces are matched (control and unknown ones stay text). `LSTRIP` /
//! `RSTRIP` tokens eat the ASCII whitespace (C `isspace`) beside them.
//!
//! A piece is searched for only if each of its adjacent byte pairs occurs somewhere in the text
//! (a bitmap of the text's byte pairs): the result is the same, and a prompt need not be scanned
//! once per each of Gemma's 6,400 special pieces.

use super::vocab::{Vocab, attr};

/// A piece of the partitioned text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fragment {
    /// Raw text, a byte range of the input.
    Text(usize, usize),
    /// A special token matched in the text.
    Token(u32),
}

/// C `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Which byte pairs (and bytes) occur in a text.
struct PairSet {
    pairs: Vec<u64>,
    bytes: [u64; 4],
}

impl PairSet {
    fn of(text: &[u8]) -> Self {
        let mut set = Self {
            pairs: vec![0; 65536 / 64],
            bytes: [0; 4],
        };
        for &b in text {
            set.bytes[usize::from(b) / 64] |= 1 << (b % 64);
        }
        for w in text.windows(2) {
            let i = usize::from(w[0]) << 8 | usize::from(w[1]);
            set.pairs[i / 64] |= 1 << (i % 64);
        }
        set
    }

    /// Whether `piece` can occur in the text.
    fn may_contain(&self, piece: &[u8]) -> bool {
        match piece {
            [] => false,
            [b] => self.bytes[usize::from(*b) / 64] & (1 << (b % 64)) != 0,
            _ => piece.windows(2).all(|w| {
                let i = usize::from(w[0]) << 8 | usize::from(w[1]);
                self.pairs[i / 64] & (1 << (i % 64)) != 0
            }),
        }
    }
}

/// First occurrence of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() == 1 {
        return haystack.iter().position(|&b| b == needle[0]);
    }
    let first = needle[0];
    let last_start = haystack.len().checked_sub(needle.len())?;
    let mut at = 0;
    while at <= last_start {
        let offset = haystack[at..=last_start].iter().position(|&b| b == first)?;
        at += offset;
        if &haystack[at..at + needle.len()] == needle {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Partitions `text` at the pieces of `specials` (already in llama.cpp's order: longest first).
pub(super) fn partition(
    vocab: &Vocab,
    specials: &[u32],
    bytes: &[u8],
    parse_special: bool,
) -> Vec<Fragment> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let present = PairSet::of(bytes);
    let mut fragments = vec![Fragment::Text(0, bytes.len())];
    for &id in specials {
        let bits = vocab.attr(id);
        if !parse_special && bits & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let piece = vocab.piece(id);
        if !present.may_contain(piece) {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            let Fragment::Text(mut start, end) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(found) = find(&bytes[start..end], piece) {
                let at = start + found;
                let mut left_end = at;
                if bits & attr::LSTRIP != 0 {
                    while left_end > start && is_c_space(bytes[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > start {
                    next.push(Fragment::Text(start, left_end));
                }
                next.push(Fragment::Token(id));
                start = at + piece.len();
                if bits & attr::RSTRIP != 0 {
                    while start < end && is_c_space(bytes[start]) {
                        start += 1;
                    }
                }
            }
            if start < end {
                next.push(Fragment::Text(start, end));
            }
        }
        fragments = next;
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(pieces: &[(&str, u16)]) -> Vocab {
        let mut v = Vocab::with_capacity(pieces.len(), 64);
        for (p, a) in pieces {
            v.push(p.as_bytes(), 0.0, *a).unwrap();
        }
        v
    }

    #[test]
    fn longest_piece_first_over_the_whole_text_and_control_only_when_parsing_special() {
        // 0 "\n" user-defined, 1 "\n\n" user-defined, 2 "<b>" control.
        let v = vocab(&[
            ("\n", attr::USER_DEFINED),
            ("\n\n", attr::USER_DEFINED),
            ("<b>", attr::CONTROL),
        ]);
        let specials = [2, 1, 0];
        use Fragment::*;
        assert_eq!(
            partition(&v, &specials, b"a\n\n\nb<b>c", false),
            [Text(0, 1), Token(1), Token(0), Text(4, 9)]
        );
        assert_eq!(
            partition(&v, &specials, b"a\n\n\nb<b>c", true),
            [
                Text(0, 1),
                Token(1),
                Token(0),
                Text(4, 5),
                Token(2),
                Text(8, 9)
            ]
        );
        assert_eq!(
            partition(&v, &specials, b"<b><b>", true),
            [Token(2), Token(2)]
        );
        assert_eq!(partition(&v, &specials, b"", true), []);
    }

    #[test]
    fn strip_attributes_eat_ascii_whitespace() {
        let v = vocab(&[("<m>", attr::CONTROL | attr::LSTRIP | attr::RSTRIP)]);
        use Fragment::*;
        assert_eq!(
            partition(&v, &[0], b"a \t<m>\n b", true),
            [Text(0, 1), Token(0), Text(8, 9)]
        );
        assert_eq!(partition(&v, &[0], b" <m> ", true), [Token(0)]);
    }

    #[test]
    fn find_is_a_substring_search() {
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"xxa", b"a"), Some(2));
    }
}
