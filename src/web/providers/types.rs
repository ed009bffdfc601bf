//! TypeScript declarations shared by the parameter provider classes: what `gather`/`scatter`
//! spans, `MemoryParameterProvider`'s options and `initWithParameters` take.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const PROVIDER_TYPES: &'static str = r#"
/** Any parameter provider: what `Delegate.initWithParameters` and `ParameterProviderList` take. */
export type ParameterProvider = HttpParameterProvider | MemoryParameterProvider | ParameterProviderList;

/**
 * A span of a parameter and where it lies in a host buffer: `length` bytes (default: to the
 * parameter's end) from `offset` (default 0) of `key`, at `bufferOffset` in the buffer (default:
 * right after the previous span).
 */
export interface BufferSpanSpec {
  key: string;
  offset?: number;
  length?: number;
  bufferOffset?: number;
}

/** Options of `MemoryParameterProvider.addScope`. */
export interface MemoryScopeOptions {
  /** Whether `write` and `scatter` may change the scope's parameters (default false). */
  writable?: boolean;
}

/** Options of `MemoryParameterProvider.insert`: what `describe` reports. */
export interface ParameterInsertOptions {
  dtype?: string;
  shape?: number[];
}
"#;
