//! TypeScript declarations for the shapes the lifecycle's JavaScript API returns.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const LIFECYCLE_TYPES: &'static str = r#"
/** What one lifecycle signal released, summed over providers and backends. */
export interface LifecycleReleased {
  /** GPU memory freed: activations and plans on suspend; parameters too on lowMemory. */
  gpuBytes: number;
  /** Host memory freed (staging buffers). */
  hostBytes: number;
  /** HTTP requests aborted; each resumes from its first byte not yet committed. */
  requestsAborted: number;
}

/** Why the runtime is suspended. */
export type SuspendReasonName = 'hidden' | 'frozen' | 'pagehide' | 'app';

/** What `lifecycleNotify` returns. */
export interface LifecycleReport {
  /** The signal sent, or null when nothing changed (a second suspend, a resume without one). */
  signal: 'suspend' | 'resume' | 'lowMemory' | null;
  suspended: boolean;
  reasons: SuspendReasonName[];
  released: LifecycleReleased;
}

/** One signal sent, as lifecycle listeners receive it. */
export interface LifecycleEvent {
  signal: 'suspend' | 'resume' | 'lowMemory';
  /** The event behind it: 'hidden', 'visible', 'freeze', 'resume', 'pagehide', 'pageshow',
   * 'suspend' / 'app-resume' (the app's), or 'lowMemory'. */
  event: string;
  suspended: boolean;
  reasons: SuspendReasonName[];
  released: LifecycleReleased;
}

/** What `lifecycleState` returns. */
export interface LifecycleState {
  suspended: boolean;
  reasons: SuspendReasonName[];
  /** Whether the page's events are wired automatically. */
  automatic: boolean;
  suspends: number;
  resumes: number;
  lowMemory: number;
  lastSuspend: LifecycleReleased;
  lastLowMemory: LifecycleReleased;
  /** Providers attached (alive). */
  providers: number;
}
"#;
