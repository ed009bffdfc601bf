//! The vocabulary's storage: every piece's bytes in one arena with `u32` offsets, an
//! open-addressing table from piece to id (ids only, the bytes stay in the arena), `f32` scores
//! and `u16` attribute bits per token. Gemma 3's 262,144 pieces take about 6.5 MiB this way,
//! against roughly four times that for a `HashMap<String, u32>` plus a `Vec<String>`.

/// llama.cpp's `llama_token_attr` bits (llama.h), which the tokenizer and detokenizer test.
pub(super) mod attr {
    /// `LLAMA_TOKEN_ATTR_UNKNOWN`.
    pub const UNKNOWN: u16 = 1 << 0;
    /// `LLAMA_TOKEN_ATTR_UNUSED`.
    pub const UNUSED: u16 = 1 << 1;
    /// `LLAMA_TOKEN_ATTR_NORMAL`.
    pub const NORMAL: u16 = 1 << 2;
    /// `LLAMA_TOKEN_ATTR_CONTROL`.
    pub const CONTROL: u16 = 1 << 3;
    /// `LLAMA_TOKEN_ATTR_USER_DEFINED`.
    pub const USER_DEFINED: u16 = 1 << 4;
    /// `LLAMA_TOKEN_ATTR_BYTE`.
    pub const BYTE: u16 = 1 << 5;
    /// `LLAMA_TOKEN_ATTR_LSTRIP`.
    pub const LSTRIP: u16 = 1 << 7;
    /// `LLAMA_TOKEN_ATTR_RSTRIP`.
    pub const RSTRIP: u16 = 1 << 8;

    /// The attribute of a GGUF `token_type` value (llama.cpp's `llama_token_type` → attr
    /// switch: 0 undefined and unknown values give no bits).
    pub fn of_token_type(kind: i32) -> u16 {
        match kind {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => 0,
        }
    }
}

/// Sentinel of an empty table slot.
const EMPTY: u32 = u32::MAX;

/// 64-bit FNV-1a: cheap, and fine for a read-only table whose contents the input cannot choose.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Pieces, scores and attributes of every token, looked up by id or by piece.
#[derive(Clone, Debug)]
pub(super) struct Vocab {
    arena: Vec<u8>,
    /// `len + 1` offsets into `arena`; piece `i` is `arena[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    scores: Vec<f32>,
    attrs: Vec<u16>,
    /// Open addressing, linear probing; a power-of-two length at least twice the token count.
    slots: Vec<u32>,
}

/// Why a piece could not be added.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AddError {
    /// The piece is already the token with this id.
    Duplicate(u32),
    /// The arena would pass `u32::MAX` bytes.
    TooLarge,
}

impl Vocab {
    /// An empty vocabulary with room for `count` tokens of `bytes` piece bytes in all.
    pub fn with_capacity(count: usize, bytes: usize) -> Self {
        let slots = count.saturating_mul(2).max(16).next_power_of_two();
        let mut offsets = Vec::with_capacity(count + 1);
        offsets.push(0);
        Self {
            arena: Vec::with_capacity(bytes),
            offsets,
            scores: Vec::with_capacity(count),
            attrs: Vec::with_capacity(count),
            slots: vec![EMPTY; slots],
        }
    }

    /// Appends a token; its id is the number of tokens before it.
    ///
    /// # Errors
    /// [`AddError::Duplicate`] when the piece is already in the vocabulary (llama.cpp refuses
    /// such a file), [`AddError::TooLarge`] past 4 GiB of pieces or `u32::MAX - 1` tokens.
    pub fn push(&mut self, piece: &[u8], score: f32, attr: u16) -> Result<u32, AddError> {
        let id = u32::try_from(self.len()).map_err(|_| AddError::TooLarge)?;
        if id == EMPTY {
            return Err(AddError::TooLarge);
        }
        let end = u32::try_from(self.arena.len() + piece.len()).map_err(|_| AddError::TooLarge)?;
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut slot = hash(piece) as usize & mask;
        loop {
            let existing = self.slots[slot];
            if existing == EMPTY {
                break;
            }
            if self.piece(existing) == piece {
                return Err(AddError::Duplicate(existing));
            }
            slot = (slot + 1) & mask;
        }
        self.slots[slot] = id;
        self.arena.extend_from_slice(piece);
        self.offsets.push(end);
        self.scores.push(score);
        self.attrs.push(attr);
        Ok(id)
    }

    /// Doubles the table and reinserts every id.
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(16);
        self.slots = vec![EMPTY; size];
        let mask = size - 1;
        for id in 0..self.len() as u32 {
            let mut slot = hash(self.piece(id)) as usize & mask;
            while self.slots[slot] != EMPTY {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = id;
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// The piece of `id` (empty for an id out of range).
    pub fn piece(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&start), Some(&end)) => &self.arena[start as usize..end as usize],
            _ => &[],
        }
    }

    /// The id of `piece`, if it is a token (llama.cpp's `text_to_token`).
    pub fn id(&self, piece: &[u8]) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut slot = hash(piece) as usize & mask;
        loop {
            let id = self.slots[slot];
            if id == EMPTY {
                return None;
            }
            if self.piece(id) == piece {
                return Some(id);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The score of `id` (0 out of range).
    pub fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    /// The attribute bits of `id` (0 out of range).
    pub fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// Sets attribute bits of `id` (ignored out of range).
    pub fn set_attr(&mut self, id: u32, value: u16) {
        if let Some(a) = self.attrs.get_mut(id as usize) {
            *a = value;
        }
    }

    /// Heap bytes held (capacities, not lengths).
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.offsets.capacity() * 4
            + self.scores.capacity() * 4
            + self.attrs.capacity() * 2
            + self.slots.capacity() * 4
    }

    /// Releases spare capacity once every token is in.
    pub fn shrink_to_fit(&mut self) {
        self.arena.shrink_to_fit();
        self.offsets.shrink_to_fit();
        self.scores.shrink_to_fit();
        self.attrs.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_round_trip_through_the_table_across_growth() {
        let mut vocab = Vocab::with_capacity(2, 4);
        for i in 0..1000u32 {
            let piece = format!("p{i}");
            assert_eq!(vocab.push(piece.as_bytes(), i as f32, 4), Ok(i));
        }
        for i in 0..1000u32 {
            let piece = format!("p{i}");
            assert_eq!(vocab.id(piece.as_bytes()), Some(i));
            assert_eq!(vocab.piece(i), piece.as_bytes());
            assert_eq!(vocab.score(i), i as f32);
        }
        assert_eq!(vocab.id(b"p1000"), None);
        assert_eq!(vocab.id(b""), None);
        assert_eq!(vocab.piece(1000), b"");
        assert_eq!(vocab.push(b"p7", 0.0, 0), Err(AddError::Duplicate(7)));
    }
}
