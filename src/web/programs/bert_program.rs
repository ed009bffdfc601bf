//! `bertProgram(provider, scope, configJson)`: the sentence-embedding program of a BERT-family
//! checkpoint, built in the browser from its `config.json` and the tensors a parameter provider
//! (`HttpParameterProvider`, `MemoryParameterProvider` or `ParameterProviderList`) serves in
//! `scope` (for HTTP, the weights file's index, read by `addScope`) —
//! the same program `Embedder.load` runs and the `bert-program` CLI writes. The blob references
//! the checkpoint's own keys in `scope`, so `Delegate.initWithParameters(backend, blob,
//! provider, {methodName: 'sentence_embedding'})` streams exactly the tensors it uses.
//!
//! ```js
//! const provider = new HttpParameterProvider();
//! await provider.addScope('model', `${dir}/model.safetensors`);
//! const config = await (await fetch(`${dir}/config.json`)).text();
//! const blob = bertProgram(provider, 'model', config);
//! const delegate = await Delegate.initWithParameters('webgpu', blob, provider,
//!                                                    { methodName: 'sentence_embedding' });
//! ```

use crate::error::Error;
use crate::models::bert::{BertConfig, sentence_embedding_program};
use crate::models::catalog::ProviderCatalog;
use crate::program;
use crate::web::edge::errors::to_js_error;
use crate::web::providers::handle::shared_provider_of;
use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;

/// The sentence-embedding program (inputs `input_ids`, `attention_mask`: int64 `[batch, seq]`;
/// output `sentence_embedding`: float32 `[batch, hidden]`) of the BERT checkpoint whose
/// `config.json` is `configJson` and whose weights `provider` serves in `scope`.
///
/// Throws a `WebDelegateError`: `InvalidArgument` for a `provider` of another kind or a
/// `config.json` that is not a supported BERT config, `NotFound` when `provider` does not serve `scope` (await its `addScope`
/// first), `InvalidExternalData` when the checkpoint lacks a tensor the config implies or
/// disagrees on its shape, dtype or size.
#[wasm_bindgen(js_name = bertProgram)]
pub fn bert_program(
    #[wasm_bindgen(unchecked_param_type = "ParameterProvider")] provider: JsValue,
    scope: &str,
    #[wasm_bindgen(js_name = configJson)] config_json: &str,
) -> Result<Uint8Array, JsValue> {
    let shared = shared_provider_of(&provider, "provider")
        .map_err(|status| to_js_error(Error::invalid_argument(status.message().to_owned())))?;
    let config = BertConfig::from_json(config_json).map_err(to_js_error)?;
    if !shared.query_support(scope) {
        return Err(to_js_error(Error::not_found(format!(
            "the provider does not serve scope {scope:?}; await addScope first"
        ))));
    }
    let catalog = ProviderCatalog::new(shared.as_ref(), scope);
    let program = sentence_embedding_program(&config, &catalog, scope).map_err(to_js_error)?;
    let blob = program::encode(&program).map_err(to_js_error)?;
    Ok(Uint8Array::from(blob.as_slice()))
}
