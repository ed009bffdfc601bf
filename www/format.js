// Number formatting shared by the demo's panels.
export const MB = 1024 * 1024;
export const fmtMB = (bytes) => `${(bytes / MB).toFixed(1)} MB`;
export const fmtMs = (ms) => (Number.isFinite(ms) ? `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms` : '–');
export const fmtRate = (mbps) => (Number.isFinite(mbps) ? `${mbps.toFixed(1)} MB/s` : '–');
export const fmtScore = (s) => s.toFixed(3);
