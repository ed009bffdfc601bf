//! Streaming detokenization: token pieces are bytes (a byte-fallback token is one byte of a
//! character), so text is emitted only once a UTF-8 character is complete. An
//! [`IncrementalDecoder`] holds back the incomplete tail across tokens, replaces bytes that can
//! never start or continue a character with U+FFFD at once (as `String::from_utf8_lossy`), and
//! flushes a dangling incomplete tail as one U+FFFD at [`IncrementalDecoder::finish`].

use super::GgufTokenizer;

/// Turns a stream of token ids into text, one complete character at a time.
///
/// The concatenation of everything [`push`](Self::push) returns, plus
/// [`finish`](Self::finish), equals [`GgufTokenizer::decode`] of the same ids.
#[derive(Clone, Debug, Default)]
pub struct IncrementalDecoder {
    pending: Vec<u8>,
}

impl IncrementalDecoder {
    /// A decoder with nothing held back.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text that token `id` completes (possibly empty while a character is split).
    pub fn push(&mut self, tokenizer: &GgufTokenizer, id: u32) -> String {
        let piece = tokenizer.token_to_piece(id);
        self.push_bytes(&piece)
    }

    /// The text that `bytes` complete.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid` is UTF-8 by the error's own account.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            rest = &after[bad..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        out
    }

    /// Whether bytes of an incomplete character are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Flushes what is held back: U+FFFD for an incomplete character, else nothing.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_pushes_comes_out_whole() {
        let mut d = IncrementalDecoder::new();
        let smile = "😀".as_bytes();
        assert_eq!(d.push_bytes(b"a"), "a");
        assert_eq!(d.push_bytes(&smile[..1]), "");
        assert_eq!(d.push_bytes(&smile[1..3]), "");
        assert!(d.has_pending());
        assert_eq!(d.push_bytes(&[smile[3], b'b']), "😀b");
        assert_eq!(d.finish(), "");
    }

    #[test]
    fn invalid_bytes_are_replaced_at_once_and_a_dangling_prefix_at_finish() {
        let mut d = IncrementalDecoder::new();
        assert_eq!(d.push_bytes(&[0xFF, b'x']), "\u{FFFD}x");
        assert_eq!(d.push_bytes(&[0xE2, 0x82]), "");
        // A new lead byte ends the incomplete character: its bytes are replaced.
        assert_eq!(d.push_bytes(&[0xC3, 0xA9]), "\u{FFFD}é");
        assert_eq!(d.push_bytes(&[0xF0, 0x9F]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.finish(), "");
    }
}
