//! TypeScript declarations of `Module`'s options and metadata.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/** Options of `Module.load`: these, plus every `HttpParameterProvider` option (`onProgress`,
 * `concurrency`, `persistentCache`, `retries`, ...) for the `.ptd`. */
export interface ModuleLoadOptions extends HttpProviderOptions {
  /** URL of the `.ptd` holding the program's external weights (streamed by Range). */
  data?: string;
  /** Where the webdelegate partitioner's delegates run: `'auto'` (default: WebGPU, else the
   * CPU), `'webgpu'`, `'cpu'`, or the name of any registered backend (a JavaScript one too). */
  backend?: string;
  /** Aborts the load (rejects with `InvalidState`, every request stopped). */
  signal?: AbortSignal;
}

/** A method input: a tagged EValue, or a tensor whose `dtype` may be read from its typed array. */
export type ModuleInput =
  | EValue
  | { dtype?: DType; shape: number[]; data: Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array };

/** One input or output of a method, as the `.pte` declares it. */
export interface ValueMeta {
  /** ExecuTorch's tag: 'Tensor', 'Int', 'Double', 'Bool', ... */
  tag: string;
  dtype?: DType;
  /** Extents (upper bounds when `dynamism` is 'dynamic_bound'). */
  shape?: number[];
  dynamism?: 'static' | 'dynamic_bound' | 'dynamic_unbound';
  /** ExecuTorch's ScalarType code. */
  scalarType?: number;
}

/** What `Module.methodMeta(name)` returns. */
export interface MethodMeta {
  name: string;
  inputs: ValueMeta[];
  outputs: ValueMeta[];
  /** Each delegate's id in the `.pte` and the registered backend that runs it. */
  delegates: { id: string; backend: string }[];
  /** Instructions in the method's chains. */
  instructions: number;
}
"#;
