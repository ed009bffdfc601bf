//! [`load`] and [`PreparedDecoder::prepare`]: the one way from a parsed GGUF file to a decoder
//! session — the config from its metadata, its tokenizer, the vocabulary check, the RoPE
//! factors read through the provider when the file has them, the program and its signature.
//! The web `Generator` prepares and then places the program on the first backend that takes
//! it; tests and benches [`load`] it on the backend they name.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::models::decoder::{
    DecoderConfig, DecoderProgramOptions, DecoderSignature, check_vocabulary, decoder_program,
};
use crate::models::decoder_session::DecoderSession;
use crate::params::formats::gguf::GgufIndex;
use crate::params::{HostBuffer, ParameterProvider, SharedProvider};
use crate::program::{self, Program};
use crate::registry::{BackendInitContext, BackendInterface, FreeableBuffer, LoadedDelegate};
use crate::text::GgufTokenizer;

/// How [`PreparedDecoder::prepare`] builds the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderLoadOptions {
    /// Positions the KV caches hold, at most the model's training context (`None`: the
    /// smaller of [`DEFAULT_CONTEXT`] and the training context; a larger value is clamped to
    /// the training context).
    pub context: Option<u64>,
    /// Whether the program also outputs the selected rows' logits.
    pub logits: bool,
}

/// The context a decoder gets when the caller names none.
pub const DEFAULT_CONTEXT: u64 = 2048;

/// A decoder ready to be placed on a backend: what the file says and the program built from
/// it.
pub struct PreparedDecoder {
    /// The hyper-parameters.
    pub config: DecoderConfig,
    /// The file's tokenizer.
    pub tokenizer: GgufTokenizer,
    /// The program.
    pub program: Program,
    /// Where the program's arguments are.
    pub signature: DecoderSignature,
}

/// The largest RoPE factor tensor read (real files: `head_dim / 2` values).
const MAX_FACTOR_BYTES: u64 = 1 << 16;

impl PreparedDecoder {
    /// Reads `header` (a GGUF file whose tensors `provider` serves in `scope`) into a
    /// program for `options`.
    ///
    /// # Errors
    /// As [`DecoderConfig::from_gguf`], [`GgufTokenizer::from_gguf`], [`check_vocabulary`] and
    /// [`decoder_program`]; a RoPE factor tensor that is not F32 of one value per rotary pair
    /// `InvalidExternalData`; the provider's errors reading it.
    pub async fn prepare(
        header: &GgufIndex,
        provider: &dyn ParameterProvider,
        scope: &str,
        options: DecoderLoadOptions,
    ) -> Result<Self> {
        let config = DecoderConfig::from_gguf(header.metadata())?;
        let tokenizer = GgufTokenizer::from_gguf(header)?;
        let index = header.index();
        check_vocabulary(index, tokenizer.vocab_size() as u64)?;
        let context = options
            .context
            .unwrap_or(DEFAULT_CONTEXT)
            .min(config.train_context);
        let mut program_options = DecoderProgramOptions::new(context, options.logits);
        if let Some(key) = config.rope.factors_key(context)
            && let Some(info) = index.info(key)
        {
            let bad = |message: String| Error::invalid_external_data(format!("{key:?}: {message}"));
            let pairs = u64::from(config.rope.dims / 2);
            if info.dtype.as_deref() != Some("F32") || info.length != pairs * 4 {
                return Err(bad(format!(
                    "is {:?} of {} bytes; F32 of {pairs} values (one per rotary pair) expected",
                    info.dtype, info.length
                )));
            }
            if info.length > MAX_FACTOR_BYTES {
                return Err(bad(format!("holds {} bytes", info.length)));
            }
            let buffer = HostBuffer::zeroed(info.length)
                .map_err(|s| Error::from_status(&s, "RoPE factors"))?;
            provider
                .read(scope, key, 0, &buffer, 0, info.length)
                .await
                .map_err(|s| Error::from_status(&s, &format!("reading {key:?}")))?;
            let values: Vec<f32> = buffer
                .into_bytes()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if let Some(bad_value) = values.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(bad(format!(
                    "holds {bad_value}; factors are finite and > 0"
                )));
            }
            program_options.rope_factors = Some(values);
        }
        let program = decoder_program(&config, index, scope, &program_options)?;
        let signature = DecoderSignature::of(&program)?;
        Ok(Self {
            config,
            tokenizer,
            program,
            signature,
        })
    }

    /// The program as a blob for a backend's `init`.
    ///
    /// # Errors
    /// As [`program::encode`].
    pub fn blob(&self) -> Result<Vec<u8>> {
        program::encode(&self.program)
    }

    /// A session over `delegate`, which runs this program.
    pub fn session(&self, delegate: LoadedDelegate) -> DecoderSession {
        DecoderSession::new(delegate, self.signature)
    }
}

/// A decoder placed on a backend: its config, tokenizer and session.
pub struct LoadedDecoder {
    /// The hyper-parameters.
    pub config: DecoderConfig,
    /// The file's tokenizer.
    pub tokenizer: GgufTokenizer,
    /// One sequence over the program.
    pub session: DecoderSession,
}

/// Prepares `header`'s decoder (tensors from `provider` in `scope`) and initialises it on
/// `backend` (registered as `backend_id`).
///
/// # Errors
/// As [`PreparedDecoder::prepare`], and the backend's `init` errors.
pub async fn load(
    header: &GgufIndex,
    provider: SharedProvider,
    scope: &str,
    options: DecoderLoadOptions,
    backend_id: &str,
    backend: Arc<dyn BackendInterface>,
) -> Result<LoadedDecoder> {
    let prepared = PreparedDecoder::prepare(header, provider.as_ref(), scope, options).await?;
    let init = BackendInitContext::new().with_parameters(provider);
    let delegate = LoadedDelegate::init_with_backend(
        backend_id,
        backend,
        FreeableBuffer::new(prepared.blob()?),
        &[],
        &init,
    )
    .await?;
    let session = prepared.session(delegate);
    Ok(LoadedDecoder {
        config: prepared.config,
        tokenizer: prepared.tokenizer,
        session,
    })
}
