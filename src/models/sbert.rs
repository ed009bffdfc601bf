//! sentence-transformers' settings of a model directory that the builder's program does not
//! hold: the truncation length (`max_seq_length` in `sentence_bert_config.json`) and how it is
//! chosen against a caller's request and the model's position table.

use crate::error::{Error, ErrorCode, Result};
use crate::models::bert::BertConfig;

/// Truncation length when neither the caller nor the model directory say
/// (sentence-transformers' value for all-MiniLM-L6-v2).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// `max_seq_length` of a `sentence_bert_config.json` (`None` when the file does not set it).
///
/// # Errors
/// `InvalidExternalData` for malformed JSON or a value that is not an integer >= 2 (room for
/// `[CLS]` and `[SEP]`).
pub fn max_seq_length(json: &[u8]) -> Result<Option<usize>> {
    let bad = |what: String| {
        Error::new(
            ErrorCode::InvalidExternalData,
            format!("sentence_bert_config.json: {what}"),
        )
    };
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
    let Some(n) = value.get("max_seq_length") else {
        return Ok(None);
    };
    n.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n >= 2)
        .map(Some)
        .ok_or_else(|| bad(format!("max_seq_length {n} is not an integer >= 2")))
}

/// The truncation length: `asked` when given (it must fit the model's position table), else
/// the directory's (capped by the table), else [`DEFAULT_MAX_TOKENS`] (capped too).
///
/// # Errors
/// `InvalidArgument` when `asked` exceeds `config.max_position_embeddings`.
pub fn truncation_length(
    asked: Option<usize>,
    directory: Option<usize>,
    config: &BertConfig,
) -> Result<usize> {
    let positions = usize::try_from(config.max_position_embeddings).unwrap_or(usize::MAX);
    match asked {
        Some(n) if n > positions => Err(Error::invalid_argument(format!(
            "maxTokens {n} exceeds the model's max_position_embeddings {positions}"
        ))),
        Some(n) => Ok(n),
        None => Ok(directory.unwrap_or(DEFAULT_MAX_TOKENS).min(positions)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_positions: u64) -> BertConfig {
        BertConfig::from_json(&format!(
            r#"{{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 16,
                "max_position_embeddings": {max_positions}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn truncation_prefers_the_request_and_respects_the_model() {
        let c = config(512);
        assert_eq!(truncation_length(Some(128), Some(256), &c).unwrap(), 128);
        assert_eq!(truncation_length(Some(512), None, &c).unwrap(), 512);
        assert_eq!(truncation_length(None, Some(256), &c).unwrap(), 256);
        assert_eq!(truncation_length(None, Some(4096), &c).unwrap(), 512);
        assert_eq!(truncation_length(None, None, &c).unwrap(), 256);
        assert_eq!(truncation_length(None, None, &config(128)).unwrap(), 128);
        let e = truncation_length(Some(513), None, &c).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("513"), "{e}");
    }

    #[test]
    fn max_seq_length_is_checked() {
        let parse = |s: &str| max_seq_length(s.as_bytes());
        assert_eq!(parse(r#"{"max_seq_length": 256}"#).unwrap(), Some(256));
        assert_eq!(parse(r#"{"do_lower_case": false}"#).unwrap(), None);
        for bad in [
            r#"{"max_seq_length": 1}"#,
            r#"{"max_seq_length": -3}"#,
            r#"{"max_seq_length": 2.5}"#,
            r#"{"max_seq_length": "256"}"#,
            r#"{"max_seq_length": 18446744073709551616}"#,
            "{",
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidExternalData, "{bad}");
        }
    }
}
