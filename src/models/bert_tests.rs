//! Tests of the BERT program builder: every checkpoint tensor referenced once, prefixes,
//! checkpoint disagreements and bad configs refused.
use super::*;
use crate::params::{EntryStorage, IndexEntry, ParameterIndex};

const TINY: &str = r#"{"vocab_size": 11, "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16,
    "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#;

/// An index holding every tensor a BERT with `config` needs, under `prefix`.
fn index_for(config: &BertConfig, prefix: &str) -> Vec<IndexEntry> {
    let (h, i) = (config.hidden_size, config.intermediate_size);
    let mut tensors = vec![
        (
            "embeddings.word_embeddings.weight".to_owned(),
            vec![config.vocab_size, h],
        ),
        (
            "embeddings.position_embeddings.weight".to_owned(),
            vec![config.max_position_embeddings, h],
        ),
        (
            "embeddings.token_type_embeddings.weight".to_owned(),
            vec![config.type_vocab_size, h],
        ),
        ("embeddings.LayerNorm.weight".to_owned(), vec![h]),
        ("embeddings.LayerNorm.bias".to_owned(), vec![h]),
    ];
    for layer in 0..config.num_hidden_layers {
        let p = format!("encoder.layer.{layer}.");
        for (name, shape) in [
            ("attention.self.query", vec![h, h]),
            ("attention.self.key", vec![h, h]),
            ("attention.self.value", vec![h, h]),
            ("attention.output.dense", vec![h, h]),
            ("intermediate.dense", vec![i, h]),
            ("output.dense", vec![h, i]),
        ] {
            tensors.push((format!("{p}{name}.bias"), vec![shape[0]]));
            tensors.push((format!("{p}{name}.weight"), shape));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push((format!("{p}{norm}.weight"), vec![h]));
            tensors.push((format!("{p}{norm}.bias"), vec![h]));
        }
    }
    let mut offset = 0;
    tensors
        .into_iter()
        .map(|(key, shape)| {
            let length = 4 * shape.iter().product::<u64>();
            let entry = IndexEntry {
                key: format!("{prefix}{key}"),
                length,
                storage: EntryStorage::Data { offset },
                dtype: Some("F32".into()),
                shape: Some(shape),
            };
            offset += length;
            entry
        })
        .collect()
}

#[test]
fn builds_a_program_referencing_every_checkpoint_tensor() {
    let config = BertConfig::from_json(TINY).unwrap();
    let entries = index_for(&config, "");
    let index = ParameterIndex::new(entries.clone(), None);
    let program = sentence_embedding_program(&config, &index, "weights").unwrap();
    assert_eq!(program.params.len(), entries.len());
    let mut keys: Vec<&str> = program.params.iter().map(|p| p.key.as_str()).collect();
    keys.sort_unstable();
    let mut expected: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
    expected.sort_unstable();
    assert_eq!(keys, expected, "each tensor referenced exactly once");
    assert!(program.params.iter().all(|p| p.scope == "weights"));
    assert_eq!(program.inputs.len(), 2);
    assert_eq!(program.outputs.len(), 1);
    assert_eq!(program.symbols, ["batch", "seq"]);
    let gelus = program.ops.iter().filter(|op| op.name() == "gelu").count();
    assert_eq!(gelus, 2, "one GELU per layer");
    let blob = crate::program::encode(&program).unwrap();
    assert_eq!(crate::program::decode(&blob).unwrap(), program);
}

#[test]
fn finds_prefixed_checkpoints() {
    let config = BertConfig::from_json(TINY).unwrap();
    let index = ParameterIndex::new(index_for(&config, "bert."), None);
    let program = sentence_embedding_program(&config, &index, "s").unwrap();
    assert!(program.params.iter().all(|p| p.key.starts_with("bert.")));
}

#[test]
fn checkpoint_disagreements_are_invalid_external_data() {
    let config = BertConfig::from_json(TINY).unwrap();
    let mut entries = index_for(&config, "");
    entries.retain(|e| e.key != "encoder.layer.1.output.dense.bias");
    let missing =
        sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s").unwrap_err();
    assert_eq!(missing.code(), ErrorCode::InvalidExternalData);
    assert!(
        missing
            .message()
            .contains("encoder.layer.1.output.dense.bias")
    );

    let mut entries = index_for(&config, "");
    entries[0].shape = Some(vec![12, 8]);
    let shape =
        sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s").unwrap_err();
    assert_eq!(shape.code(), ErrorCode::InvalidExternalData);

    let mut entries = index_for(&config, "");
    entries[3].dtype = Some("F16".into());
    let dtype =
        sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s").unwrap_err();
    assert_eq!(dtype.code(), ErrorCode::InvalidExternalData);

    let mut entries = index_for(&config, "");
    entries[4].length += 4;
    let length =
        sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s").unwrap_err();
    assert_eq!(length.code(), ErrorCode::InvalidExternalData);
}

#[test]
fn bad_configs_are_refused() {
    for (json, code) in [
        (
            TINY.replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3"),
            ErrorCode::InvalidArgument,
        ),
        (
            TINY.replace("\"hidden_size\": 8", "\"hidden_size\": 0"),
            ErrorCode::InvalidArgument,
        ),
        (
            TINY.replace("\"vocab_size\": 11", "\"vocab_size\": 99999999999"),
            ErrorCode::InvalidArgument,
        ),
        (
            TINY.replace("\"gelu\"", "\"swish\""),
            ErrorCode::NotSupported,
        ),
        (TINY.replace("1e-12", "-1"), ErrorCode::InvalidArgument),
        ("{".to_owned(), ErrorCode::InvalidArgument),
    ] {
        assert_eq!(
            BertConfig::from_json(&json).unwrap_err().code(),
            code,
            "{json}"
        );
    }
}

#[test]
fn minilm_config_parses() {
    let json = r#"{"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
      "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false, "hidden_act": "gelu",
      "hidden_dropout_prob": 0.1, "hidden_size": 384, "initializer_range": 0.02,
      "intermediate_size": 1536, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
      "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
      "position_embedding_type": "absolute", "transformers_version": "4.8.2", "type_vocab_size": 2,
      "use_cache": true, "vocab_size": 30522}"#;
    let config = BertConfig::from_json(json).unwrap();
    assert_eq!(config.head_dim(), 32);
    let index = ParameterIndex::new(index_for(&config, ""), None);
    let program = sentence_embedding_program(&config, &index, "minilm").unwrap();
    assert_eq!(program.params.len(), 5 + 6 * 16);
}
