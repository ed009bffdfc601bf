//! TypeScript declarations for the shapes the HTTP parameter provider's JavaScript API takes and
//! returns.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const HTTP_PROVIDER_TYPES: &'static str = r#"
/** IREE status code names carried by `StatusError.code`. */
export type StatusCodeName =
  | 'OK' | 'CANCELLED' | 'UNKNOWN' | 'INVALID_ARGUMENT' | 'DEADLINE_EXCEEDED' | 'NOT_FOUND'
  | 'ALREADY_EXISTS' | 'PERMISSION_DENIED' | 'RESOURCE_EXHAUSTED' | 'FAILED_PRECONDITION'
  | 'ABORTED' | 'OUT_OF_RANGE' | 'UNIMPLEMENTED' | 'INTERNAL' | 'UNAVAILABLE' | 'DATA_LOSS'
  | 'UNAUTHENTICATED';

/** What parameter providers reject with: an IREE status (a WebDelegateError subclass). */
export interface StatusError extends Error {
  name: 'StatusError';
  /** The IREE code name, e.g. 'NOT_FOUND'. */
  code: StatusCodeName;
  /** The IREE code value, e.g. 5. */
  codeValue: number;
}

/** A progress event of a load. */
export interface LoadProgressEvent {
  scope: string;
  bytesDone: number;
  bytesTotal: number;
  requestsDone: number;
  requestsTotal: number;
}

/** Options of `new HttpParameterProvider(...)`. */
export interface HttpProviderOptions {
  /** Requests in flight at once, 1 to 8 (default 2). */
  concurrency?: number;
  /** Host staging buffer size in bytes (default 1 MiB). */
  chunkSize?: number;
  /** Most bytes in one Range request (default 64 MiB). */
  maxRequestSize?: number;
  /** Ranges at most this many bytes apart share a request (default 64 KiB). */
  gapThreshold?: number;
  /** Retries of a failed attempt without progress (default 4). */
  retries?: number;
  /** First retry delay in ms, doubled each time (default 100); at most 2147483647. */
  backoffMs?: number;
  /**
   * An attempt fails when nothing arrives for this many ms (default 30000). At most 2147483647
   * (setTimeout's limit): a larger value throws INVALID_ARGUMENT.
   */
  idleTimeoutMs?: number;
  /**
   * A Cache API cache name: data responses are stored there per file version and byte range,
   * so a later page load with the same requests reads them without the network (only the small
   * index read, which learns the file's current version, goes out). Entries are written while
   * the responses stream: the page holds at most 4 MiB more per request in flight (the load
   * waits for the Cache API when it falls that far behind).
   */
  persistentCache?: string;
  /**
   * With `persistentCache`: `false` keeps the index read in the cache too, so a second page load
   * sends no request at all; a file changed on the server is then not seen until
   * `clearPersistentCache()` (default `true`: the index read always goes out and learns the
   * file's current version).
   */
  persistentCacheRevalidate?: boolean;
  /** The fetch cache mode (default 'default'). */
  cache?: 'default' | 'no-store' | 'reload' | 'no-cache' | 'force-cache';
  onProgress?: (event: LoadProgressEvent) => void;
  /** Non-fatal conditions (a server ignoring Range, ...); default console.warn. */
  onWarning?: (message: string) => void;
}

/** One entry of an index the page already has. */
export interface IndexEntrySpec {
  key: string;
  /** Absolute file offset of the first byte. */
  offset: number;
  length: number;
  dtype?: string;
  shape?: number[];
}

/** Options of `addScope`. */
export interface ScopeOptions {
  format?: 'safetensors' | 'gguf' | 'irpa' | 'ptd';
  /** SHA-256 (hex) of the whole file: loads then stream the whole file through it. */
  sha256?: string;
  /** SHA-256 (hex) per parameter, checked when a whole parameter is loaded. */
  parameterSha256?: Record<string, string>;
  /** Use this index instead of reading the file's own. */
  index?: IndexEntrySpec[];
}

/** A span of a parameter: `length` bytes (default: to its end) from `offset` (default 0). */
export interface SpanSpec {
  key: string;
  offset?: number;
  length?: number;
}

/** Options of `loadToGpu`. */
export interface LoadOptions {
  /** Cancels the load: it rejects with CANCELLED and keeps no buffer. */
  signal?: AbortSignal;
  /**
   * One GPU buffer per span: a span larger than the largest buffer then rejects with
   * RESOURCE_EXHAUSTED (naming the size and the limit) before any byte is fetched (default
   * false: such a span is split at row boundaries into several buffers).
   */
  singleBuffer?: boolean;
  /**
   * The largest buffer to make, in bytes, below the device's `maxBufferSize` (default: that
   * limit). E.g. the device's `maxStorageBufferBindingSize`, so every piece binds whole.
   */
  maxBufferBytes?: number;
}

/** One GPU buffer of a `GpuParameter`: whole rows of the parameter, unless the span started or
 * ended inside a row. */
export interface GpuParameterPiece {
  /** The piece's first byte within the loaded span. */
  offset: number;
  /** The piece's first byte within the parameter. */
  parameterOffset: number;
  /** Bytes in the piece. */
  length: number;
  /** Its buffer's size (the length rounded up to 4 bytes). */
  bufferSize: number;
  /**
   * The parameter's rows it holds, [rowStart, rowEnd) (rows: the innermost dimension; their
   * count, the other dimensions multiplied), or null when the parameter records no shape.
   */
  rowStart: number | null;
  rowEnd: number | null;
}

/** What `describe` returns. */
export interface ParameterDescription {
  /** Length in bytes. */
  length: number;
  /** Element type as the file names it (`'F32'`, `'BF16'`, `'Q8_0'`, ...), or null. */
  dtype: string | null;
  /**
   * The shape in the order the weights file records it, or null when it records none:
   * row-major (outermost dimension first, as numpy and PyTorch) for safetensors, but
   * innermost first for GGUF (ggml's `ne` order: a `[rows, cols]` matrix is `[cols, rows]`;
   * reverse it for row-major); null for IRPA. A `MemoryParameterProvider` returns the shape
   * it was given at `insert`.
   */
  shape: number[] | null;
  /**
   * The same shape outermost first (reversed for GGUF), as programs declare it: what the
   * backends check a parameter's declaration against. Null when the file records none.
   */
  rowMajorShape: number[] | null;
}

/** Counts of the last load, gather or read (successful, failed or cancelled) and how it ended. */
export interface LoadStats {
  requestsPlanned: number;
  requestsSent: number;
  retries: number;
  bytesNeeded: number;
  bytesPlanned: number;
  bytesReceived: number;
  /** Bytes written from response chunks straight to GPUQueue.writeBuffer (never in wasm memory). */
  bytesWrittenDirect: number;
  /** Bytes written from wasm memory (carries across chunk boundaries, unaligned edges, splats). */
  bytesWrittenViaHost: number;
  /** 'OK', or the IREE code the load failed with ('CANCELLED' when aborted). */
  outcome: StatusCodeName;
  /** The failure's message, or null. */
  message: string | null;
}
"#;
