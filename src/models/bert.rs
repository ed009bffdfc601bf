//! BERT-family encoders (BERT, MiniLM, all-MiniLM-L6-v2, ...) as webdelegate programs that
//! produce sentence embeddings: embeddings -> N encoder layers -> masked mean pooling -> L2
//! normalisation.
//!
//! The program references every weight by (scope, key) in the checkpoint's own names
//! (`embeddings.word_embeddings.weight`, `encoder.layer.0.attention.self.query.weight`, ...), so a
//! parameter provider streams exactly the tensors the program uses. The builder checks the
//! checkpoint's tensors (a weights file's index, or a provider serving it: any
//! [`TensorCatalog`]) against the config before emitting anything: a missing tensor, a wrong
//! shape or a non-f32 dtype is `InvalidExternalData` naming the key.

use crate::error::{Error, ErrorCode, Result};
use crate::models::catalog::TensorCatalog;
use crate::program::ops;
use crate::program::{BinaryOp, DType, Dim, Op, Program, ProgramBuilder, TensorId, UnaryOp};
use serde::Deserialize;

/// The fields of a Hugging Face `config.json` that shape a BERT encoder.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    /// Vocabulary size (rows of the word embedding table).
    pub vocab_size: u64,
    /// Hidden size `H`.
    pub hidden_size: u64,
    /// Number of encoder layers.
    pub num_hidden_layers: u64,
    /// Attention heads per layer (must divide `hidden_size`).
    pub num_attention_heads: u64,
    /// Feed-forward inner size.
    pub intermediate_size: u64,
    /// Longest sequence the position table covers.
    pub max_position_embeddings: u64,
    /// Number of token types (segment ids).
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: u64,
    /// Layer-norm epsilon.
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    /// Feed-forward activation; only `"gelu"` (the erf form) is supported.
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
}

fn default_type_vocab_size() -> u64 {
    2
}

fn default_layer_norm_eps() -> f64 {
    1e-12
}

fn default_hidden_act() -> String {
    "gelu".to_owned()
}

/// Largest accepted extent of any config field, far above real models, so a hostile config
/// cannot make the builder declare absurd tensors.
const MAX_EXTENT: u64 = 1 << 20;

impl BertConfig {
    /// Parses and checks a `config.json`.
    ///
    /// # Errors
    /// `InvalidArgument` for malformed JSON, zero or absurd sizes, heads not dividing the hidden
    /// size, or an unsupported activation.
    pub fn from_json(json: &str) -> Result<Self> {
        let config: Self = serde_json::from_str(json)
            .map_err(|e| Error::invalid_argument(format!("bad BERT config.json: {e}")))?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<()> {
        let extents = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (name, value) in extents {
            if value == 0 || value > MAX_EXTENT {
                return Err(Error::invalid_argument(format!(
                    "config {name} = {value} is outside 1..={MAX_EXTENT}"
                )));
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(Error::invalid_argument(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            )));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(Error::invalid_argument(
                "layer_norm_eps must be a positive number",
            ));
        }
        if self.hidden_act != "gelu" {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "activation {:?} is not supported (only \"gelu\")",
                    self.hidden_act
                ),
            ));
        }
        Ok(())
    }

    /// Size of one attention head.
    pub fn head_dim(&self) -> u64 {
        self.hidden_size / self.num_attention_heads
    }
}

/// Names of the program's inputs and output, in argument order.
pub const INPUT_IDS: &str = "input_ids";
/// The attention mask input (`[batch, seq]`, 1 = token, 0 = padding).
pub const ATTENTION_MASK: &str = "attention_mask";
/// The output: L2-normalised sentence embeddings `[batch, hidden]`.
pub const EMBEDDINGS: &str = "sentence_embedding";

/// Additive attention-mask value for padding positions (as the original BERT).
const MASK_NEGATIVE: f32 = 10_000.0;
/// Pooled vectors shorter than this are not scaled up (PyTorch `F.normalize`'s default eps).
const L2_EPS: f32 = 1e-12;

/// Builds the sentence-embedding program of a BERT encoder.
struct Encoder<'a> {
    b: ProgramBuilder,
    config: &'a BertConfig,
    index: &'a dyn TensorCatalog,
    scope: &'a str,
    prefix: String,
    batch: Dim,
    seq: Dim,
}

fn fixed(extents: &[u64]) -> Vec<Dim> {
    extents.iter().map(|&e| Dim::Fixed(e)).collect()
}

impl Encoder<'_> {
    /// Declares the parameter `name` with its expected shape, after checking the index agrees.
    fn weight(&mut self, name: &str, shape: &[u64]) -> Result<TensorId> {
        let key = format!("{}{name}", self.prefix);
        let entry = self.index.tensor_info(&key).ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidExternalData,
                format!("checkpoint has no tensor {key:?}"),
            )
        })?;
        if let Some(dtype) = &entry.dtype
            && dtype != "F32"
        {
            return Err(Error::new(
                ErrorCode::InvalidExternalData,
                format!("{key:?} is {dtype}; this builder reads F32 checkpoints"),
            ));
        }
        if let Some(actual) = &entry.shape
            && actual.as_slice() != shape
        {
            return Err(Error::new(
                ErrorCode::InvalidExternalData,
                format!("{key:?} has shape {actual:?}; the config implies {shape:?}"),
            ));
        }
        let bytes = shape.iter().try_fold(4u64, |acc, &e| acc.checked_mul(e));
        if bytes != Some(entry.length) {
            return Err(Error::new(
                ErrorCode::InvalidExternalData,
                format!(
                    "{key:?} holds {} bytes; shape {shape:?} of f32 needs {bytes:?}",
                    entry.length
                ),
            ));
        }
        Ok(self
            .b
            .param(name, DType::F32, fixed(shape), self.scope, &key))
    }

    fn tensor(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> TensorId {
        self.b.tensor(name, dtype, shape)
    }

    fn bsh(&self, last: u64) -> Vec<Dim> {
        vec![self.batch, self.seq, Dim::Fixed(last)]
    }

    /// `x @ W^T + bias` for a `[out, in]` weight (PyTorch `Linear`).
    fn linear(&mut self, name: &str, x: TensorId, inputs: u64, outputs: u64) -> Result<TensorId> {
        let weight = self.weight(&format!("{name}.weight"), &[outputs, inputs])?;
        let bias = self.weight(&format!("{name}.bias"), &[outputs])?;
        let out = self.tensor(name, DType::F32, self.bsh(outputs));
        self.b.op(Op::MatMul(ops::MatMul {
            a: x,
            b: weight,
            bias: Some(bias),
            transpose_a: false,
            transpose_b: true,
            out,
        }));
        Ok(out)
    }

    fn layer_norm(&mut self, name: &str, x: TensorId) -> Result<TensorId> {
        let h = self.config.hidden_size;
        let gamma = self.weight(&format!("{name}.weight"), &[h])?;
        let beta = self.weight(&format!("{name}.bias"), &[h])?;
        let out = self.tensor(name, DType::F32, self.bsh(h));
        let eps = self.config.layer_norm_eps as f32;
        self.b.op(Op::LayerNorm(ops::LayerNorm {
            x,
            gamma,
            beta,
            eps,
            out,
        }));
        Ok(out)
    }

    fn add(&mut self, name: &str, a: TensorId, b: TensorId, shape: Vec<Dim>) -> TensorId {
        let out = self.tensor(name, DType::F32, shape);
        self.b.op(Op::Binary(ops::Binary {
            op: BinaryOp::Add,
            a,
            b,
            out,
        }));
        out
    }

    /// `[B, S, H]` -> `[B, heads, S, head_dim]`.
    fn split_heads(&mut self, name: &str, x: TensorId) -> TensorId {
        let (heads, dim) = (self.config.num_attention_heads, self.config.head_dim());
        let split = self.tensor(
            &format!("{name}.split"),
            DType::F32,
            vec![self.batch, self.seq, Dim::Fixed(heads), Dim::Fixed(dim)],
        );
        self.b.op(Op::Reshape(ops::Reshape { x, out: split }));
        let out = self.tensor(
            &format!("{name}.heads"),
            DType::F32,
            vec![self.batch, Dim::Fixed(heads), self.seq, Dim::Fixed(dim)],
        );
        self.b.op(Op::Permute(ops::Permute {
            x: split,
            perm: vec![0, 2, 1, 3],
            out,
        }));
        out
    }

    fn embeddings(&mut self, ids: TensorId) -> Result<TensorId> {
        let c = self.config;
        let h = c.hidden_size;
        let words = self.weight("embeddings.word_embeddings.weight", &[c.vocab_size, h])?;
        let positions = self.weight(
            "embeddings.position_embeddings.weight",
            &[c.max_position_embeddings, h],
        )?;
        let types = self.weight(
            "embeddings.token_type_embeddings.weight",
            &[c.type_vocab_size, h],
        )?;

        let word = self.tensor("embeddings.word", DType::F32, self.bsh(h));
        self.b.op(Op::Gather(ops::Gather {
            table: words,
            ids,
            out: word,
        }));
        let position_ids = self.tensor("embeddings.position_ids", DType::I32, vec![self.seq]);
        self.b.op(Op::Range(ops::Range { out: position_ids }));
        let position = self.tensor(
            "embeddings.position",
            DType::F32,
            vec![self.seq, Dim::Fixed(h)],
        );
        self.b.op(Op::Gather(ops::Gather {
            table: positions,
            ids: position_ids,
            out: position,
        }));
        // Every token has type 0 in single-sentence embedding: add row 0 of the type table.
        let type0 = self.tensor("embeddings.token_type0", DType::F32, fixed(&[1, h]));
        self.b.op(Op::Slice(ops::Slice {
            x: types,
            axis: 0,
            start: 0,
            end: Some(1),
            out: type0,
        }));

        let sum = self.add("embeddings.word+position", word, position, self.bsh(h));
        let sum = self.add("embeddings.sum", sum, type0, self.bsh(h));
        self.layer_norm("embeddings.LayerNorm", sum)
    }

    fn encoder_layer(&mut self, layer: u64, x: TensorId, mask: TensorId) -> Result<TensorId> {
        let c = self.config;
        let (h, heads, dim) = (c.hidden_size, c.num_attention_heads, c.head_dim());
        let p = format!("encoder.layer.{layer}.");
        let query = self.linear(&format!("{p}attention.self.query"), x, h, h)?;
        let key = self.linear(&format!("{p}attention.self.key"), x, h, h)?;
        let value = self.linear(&format!("{p}attention.self.value"), x, h, h)?;
        // Scale the queries (S x H values) rather than the scores (heads x S x S values).
        let scaled = self.tensor(
            &format!("{p}attention.query.scaled"),
            DType::F32,
            self.bsh(h),
        );
        self.b.op(Op::Scale(ops::Scale {
            x: query,
            scale: 1.0 / (dim as f32).sqrt(),
            bias: 0.0,
            out: scaled,
        }));
        let q = self.split_heads(&format!("{p}attention.q"), scaled);
        let k = self.split_heads(&format!("{p}attention.k"), key);
        let v = self.split_heads(&format!("{p}attention.v"), value);

        let square = vec![self.batch, Dim::Fixed(heads), self.seq, self.seq];
        let scores = self.tensor(&format!("{p}attention.scores"), DType::F32, square.clone());
        self.b.op(Op::MatMul(ops::MatMul {
            a: q,
            b: k,
            bias: None,
            transpose_a: false,
            transpose_b: true,
            out: scores,
        }));
        let probs = self.tensor(&format!("{p}attention.probs"), DType::F32, square);
        self.b.op(Op::Softmax(ops::Softmax {
            x: scores,
            mask: Some(mask),
            out: probs,
        }));
        let heads_shape = vec![self.batch, Dim::Fixed(heads), self.seq, Dim::Fixed(dim)];
        let context = self.tensor(&format!("{p}attention.context"), DType::F32, heads_shape);
        self.b.op(Op::MatMul(ops::MatMul {
            a: probs,
            b: v,
            bias: None,
            transpose_a: false,
            transpose_b: false,
            out: context,
        }));
        let merged = self.tensor(
            &format!("{p}attention.context.merged"),
            DType::F32,
            vec![self.batch, self.seq, Dim::Fixed(heads), Dim::Fixed(dim)],
        );
        self.b.op(Op::Permute(ops::Permute {
            x: context,
            perm: vec![0, 2, 1, 3],
            out: merged,
        }));
        let context = self.tensor(
            &format!("{p}attention.context.flat"),
            DType::F32,
            self.bsh(h),
        );
        self.b.op(Op::Reshape(ops::Reshape {
            x: merged,
            out: context,
        }));

        let attention = self.linear(&format!("{p}attention.output.dense"), context, h, h)?;
        let residual = self.add(&format!("{p}attention.residual"), attention, x, self.bsh(h));
        let x = self.layer_norm(&format!("{p}attention.output.LayerNorm"), residual)?;

        let inner = self.linear(&format!("{p}intermediate.dense"), x, h, c.intermediate_size)?;
        let activated = self.tensor(
            &format!("{p}intermediate.gelu"),
            DType::F32,
            self.bsh(c.intermediate_size),
        );
        self.b.op(Op::Unary(ops::Unary {
            op: UnaryOp::Gelu,
            x: inner,
            out: activated,
        }));
        let output = self.linear(
            &format!("{p}output.dense"),
            activated,
            c.intermediate_size,
            h,
        )?;
        let residual = self.add(&format!("{p}output.residual"), output, x, self.bsh(h));
        self.layer_norm(&format!("{p}output.LayerNorm"), residual)
    }
}

/// Detects the checkpoint's key prefix: `""` for sentence-transformers exports, `"bert."` for
/// `BertForPreTraining`-style checkpoints.
fn key_prefix(index: &dyn TensorCatalog) -> Result<String> {
    for prefix in ["", "bert.", "model."] {
        if index
            .tensor_info(&format!("{prefix}embeddings.word_embeddings.weight"))
            .is_some()
        {
            return Ok(prefix.to_owned());
        }
    }
    Err(Error::new(
        ErrorCode::InvalidExternalData,
        "checkpoint has no embeddings.word_embeddings.weight (tried prefixes \"\", \"bert.\", \"model.\")",
    ))
}

/// The sentence-embedding program for `config`, with weights referenced in `scope` under the
/// keys `index` lists (a weights file's [`ParameterIndex`](crate::params::ParameterIndex) or a
/// [`ProviderCatalog`](crate::models::catalog::ProviderCatalog)). Inputs: `input_ids` i64
/// `[batch, seq]`, `attention_mask` i64 `[batch, seq]`; output: `sentence_embedding` f32
/// `[batch, hidden]`.
///
/// # Errors
/// `InvalidExternalData` when the index lacks a tensor or disagrees with the config on its
/// shape, dtype or size.
pub fn sentence_embedding_program(
    config: &BertConfig,
    index: &dyn TensorCatalog,
    scope: &str,
) -> Result<Program> {
    config.check()?;
    let mut b = ProgramBuilder::new();
    let batch = b.symbol("batch");
    let seq = b.symbol("seq");
    let mut encoder = Encoder {
        b,
        config,
        index,
        scope,
        prefix: key_prefix(index)?,
        batch,
        seq,
    };

    let ids = encoder.b.input(INPUT_IDS, DType::I64, vec![batch, seq]);
    let mask = encoder
        .b
        .input(ATTENTION_MASK, DType::I64, vec![batch, seq]);
    let mask_f32 = encoder.tensor("attention_mask.f32", DType::F32, vec![batch, seq]);
    encoder.b.op(Op::Cast(ops::Cast {
        x: mask,
        out: mask_f32,
    }));
    // (mask - 1) * 10000: 0 for tokens, -10000 for padding; [B, 1, 1, S] broadcasts over heads
    // and query positions.
    let additive = encoder.tensor("attention_mask.additive", DType::F32, vec![batch, seq]);
    encoder.b.op(Op::Scale(ops::Scale {
        x: mask_f32,
        scale: MASK_NEGATIVE,
        bias: -MASK_NEGATIVE,
        out: additive,
    }));
    let mask4 = encoder.tensor(
        "attention_mask.4d",
        DType::F32,
        vec![batch, Dim::Fixed(1), Dim::Fixed(1), seq],
    );
    encoder.b.op(Op::Reshape(ops::Reshape {
        x: additive,
        out: mask4,
    }));

    let mut x = encoder.embeddings(ids)?;
    for layer in 0..config.num_hidden_layers {
        x = encoder.encoder_layer(layer, x, mask4)?;
    }
    let h = Dim::Fixed(config.hidden_size);
    let pooled = encoder.tensor("pooled", DType::F32, vec![batch, h]);
    encoder.b.op(Op::MeanPool(ops::MeanPool {
        x,
        mask,
        out: pooled,
    }));
    let embedding = encoder.tensor(EMBEDDINGS, DType::F32, vec![batch, h]);
    encoder.b.op(Op::L2Normalize(ops::L2Normalize {
        x: pooled,
        eps: L2_EPS,
        out: embedding,
    }));
    encoder.b.output(embedding);
    Ok(encoder.b.into_program())
}

#[cfg(test)]
mod tests {
    // The BERT program builder: every checkpoint tensor referenced once, prefixes, checkpoint
    // disagreements and bad configs refused.
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
        let missing = sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s")
            .unwrap_err();
        assert_eq!(missing.code(), ErrorCode::InvalidExternalData);
        assert!(
            missing
                .message()
                .contains("encoder.layer.1.output.dense.bias")
        );

        let mut entries = index_for(&config, "");
        entries[0].shape = Some(vec![12, 8]);
        let shape = sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s")
            .unwrap_err();
        assert_eq!(shape.code(), ErrorCode::InvalidExternalData);

        let mut entries = index_for(&config, "");
        entries[3].dtype = Some("F16".into());
        let dtype = sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s")
            .unwrap_err();
        assert_eq!(dtype.code(), ErrorCode::InvalidExternalData);

        let mut entries = index_for(&config, "");
        entries[4].length += 4;
        let length = sentence_embedding_program(&config, &ParameterIndex::new(entries, None), "s")
            .unwrap_err();
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
}
