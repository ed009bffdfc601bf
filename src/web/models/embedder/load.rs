//! Loading a model directory for `Embedder.load`: `config.json` first (a missing directory fails
//! there, with a message naming the file), then `tokenizer.json`, `sentence_bert_config.json`
//! (optional) and the weights file's index at once; the program built from the config and the
//! index; the first backend that initialises it.
//!
//! The whole load races the caller's `AbortSignal`: once it aborts, the load rejects with
//! `InvalidState` ("load aborted") at once, the file fetches are aborted (they carry the
//! signal), the provider's Range requests are aborted (a suspend stops them all), and whatever
//! was half-built is dropped.
//!
//! The backend is chosen as every model load chooses it ([`crate::web::loading`]); the
//! reasons for skipping the preferred ones become the embedder's `fallbackReason`.

use super::options::LoadOptions;
use crate::error::{Error, Result};
use crate::models::bert::{BertConfig, sentence_embedding_program};
use crate::models::sbert::{max_seq_length, truncation_length};
use crate::params::http::{HttpProvider, ScopeOptions};
use crate::program;
use crate::registry::{BackendInitContext, LoadedDelegate};
use crate::text::TextTokenizer;
use crate::web::loading::{
    BackendLoadOptions, fetch_bytes, init_on_first, race_abort, status_error,
};
use std::sync::Arc;
use wasm_bindgen_futures::JsFuture;

/// The provider scope the model's weights are served under.
pub(super) const SCOPE: &str = "model";

/// A model ready to embed with.
pub(super) struct LoadedModel {
    pub backend: String,
    pub fallback: Option<String>,
    pub delegate: LoadedDelegate,
    pub dim: usize,
    pub max_tokens: usize,
    pub tokenizer: TextTokenizer,
}

fn resolve_url(base: &str, name: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

/// Loads the model in `base_url` with `provider` serving its weights, unless `options.signal`
/// aborts first.
///
/// # Errors
/// `InvalidState` when aborted; see `Embedder.load` for the rest.
pub(super) async fn load(
    base_url: &str,
    options: &LoadOptions,
    provider: &Arc<HttpProvider>,
) -> Result<LoadedModel> {
    race_abort(
        load_model(base_url, options, provider),
        options.signal.as_ref(),
        provider,
    )
    .await
}

async fn load_model(
    base_url: &str,
    options: &LoadOptions,
    provider: &Arc<HttpProvider>,
) -> Result<LoadedModel> {
    let signal = options.signal.as_ref();
    let _ = JsFuture::from(crate::web::registry::defaults::ready()).await;
    let config_bytes = fetch_bytes(&resolve_url(base_url, "config.json"), false, signal)
        .await?
        .unwrap_or_default();
    let config = BertConfig::from_json(&String::from_utf8_lossy(&config_bytes))?;
    let weights_url = resolve_url(base_url, &options.weights);
    let (tokenizer_json, sbert, ()) = futures_util::future::try_join3(
        fetch_bytes(&resolve_url(base_url, "tokenizer.json"), false, signal),
        fetch_bytes(
            &resolve_url(base_url, "sentence_bert_config.json"),
            true,
            signal,
        ),
        async {
            provider
                .add_scope(SCOPE, &weights_url, ScopeOptions::default())
                .await
                .map_err(status_error)
        },
    )
    .await?;
    let directory_max = sbert.as_deref().map(max_seq_length).transpose()?.flatten();
    let max_tokens = truncation_length(options.max_tokens, directory_max, &config)?;
    let tokenizer = TextTokenizer::from_json(&tokenizer_json.unwrap_or_default(), max_tokens)?;
    let index = provider
        .index(SCOPE)
        .ok_or_else(|| Error::internal("scope vanished"))?;
    let blob = program::encode(&sentence_embedding_program(&config, &index, SCOPE)?)?;
    let dim = usize::try_from(config.hidden_size)
        .map_err(|_| Error::invalid_argument("hidden_size does not fit in memory"))?;

    let context = BackendInitContext::new()
        .with_method_name("sentence_embedding")
        .with_parameters(Arc::clone(provider) as crate::params::SharedProvider);
    let specs = BackendLoadOptions {
        threads: options.threads,
        activations: None,
        gpu_precision: options.gpu_precision.clone(),
    };
    let placed = init_on_first(&options.backend, &blob, &context, &specs).await?;
    Ok(LoadedModel {
        backend: placed.backend,
        fallback: placed.fallback,
        delegate: placed.delegate,
        dim,
        max_tokens,
        tokenizer,
    })
}
