//! Weights files for the tests, written with a known layout so the expected index is known
//! without parsing: safetensors (8-byte little-endian header length, JSON header padded to 8,
//! then the data), with random tensor bytes of odd sizes.

use super::Rng;
use std::path::Path;
use webdelegate::params::{EntryStorage, IndexEntry, ParameterIndex};

/// One tensor: name, safetensors dtype, shape, bytes.
pub struct Tensor {
    pub name: String,
    pub dtype: &'static str,
    pub shape: Vec<u64>,
    pub bytes: Vec<u8>,
}

/// A written file: its bytes and the index a parser must find.
pub struct WrittenFile {
    pub bytes: Vec<u8>,
    pub index: ParameterIndex,
}

impl WrittenFile {
    /// The bytes of parameter `key`.
    pub fn tensor(&self, key: &str) -> &[u8] {
        let entry = self.index.get(key).expect("key in index");
        let EntryStorage::Data { offset } = entry.storage else {
            panic!("splat")
        };
        &self.bytes[offset as usize..(offset + entry.length) as usize]
    }

    pub fn keys(&self) -> Vec<String> {
        self.index.entries().iter().map(|e| e.key.clone()).collect()
    }
}

/// `count` tensors of random sizes (U8 with odd lengths, F32 with even ones) up to `max_len`.
pub fn random_tensors(rng: &mut Rng, count: usize, max_len: u64) -> Vec<Tensor> {
    (0..count)
        .map(|i| {
            if i % 3 == 0 {
                let length = 1 + rng.below(max_len);
                Tensor {
                    name: format!("layer{i}.bias"),
                    dtype: "U8",
                    shape: vec![length],
                    bytes: rng.bytes(length as usize),
                }
            } else {
                let rows = 1 + rng.below(16);
                let cols = 1 + rng.below((max_len / 4 / rows).max(1));
                Tensor {
                    name: format!("layer{i}.weight"),
                    dtype: "F32",
                    shape: vec![rows, cols],
                    bytes: rng.bytes((rows * cols * 4) as usize),
                }
            }
        })
        .collect()
}

/// Writes `tensors` as a safetensors file at `path`.
pub fn write_safetensors(path: &Path, tensors: &[Tensor]) -> WrittenFile {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut offset = 0u64;
    for t in tensors {
        let end = offset + t.bytes.len() as u64;
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        header.push_str(&format!(
            ",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            t.name,
            t.dtype,
            shape.join(",")
        ));
        offset = end;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let data_start = 8 + header.len() as u64;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    let mut entries = Vec::new();
    for t in tensors {
        entries.push(IndexEntry {
            key: t.name.clone(),
            length: t.bytes.len() as u64,
            storage: EntryStorage::Data {
                offset: bytes.len() as u64,
            },
            dtype: Some(t.dtype.to_owned()),
            shape: Some(t.shape.clone()),
        });
        bytes.extend_from_slice(&t.bytes);
    }
    let _ = data_start;
    std::fs::write(path, &bytes).expect("write safetensors file");
    let size = bytes.len() as u64;
    WrittenFile {
        bytes,
        index: ParameterIndex::new(entries, Some(size)),
    }
}
