// Summary statistics the benchmark suites report: interpolated quantiles, the median, and the
// spread ((max - min) / median) that goes beside every median.

/** The `q` quantile of `xs` (linear interpolation between the closest ranks). */
export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (at - lo);
}

/** The median (the mean of the middle two for an even count). */
export const median = (xs) => quantile(xs, 0.5);

/** (max - min) / median. */
export const spread = (xs) => (Math.max(...xs) - Math.min(...xs)) / median(xs);

/** The lowest cosine similarity between row `i` of `got` and row `i` of `want`. */
export function minCosine(got, want) {
  let worst = 1;
  got.forEach((row, i) => {
    let dot = 0; let ng = 0; let nw = 0;
    for (let k = 0; k < row.length; k++) { dot += row[k] * want[i][k]; ng += row[k] ** 2; nw += want[i][k] ** 2; }
    worst = Math.min(worst, dot / Math.sqrt(ng * nw));
  });
  return worst;
}
