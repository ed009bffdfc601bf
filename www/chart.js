// Minimal canvas charts (no library): a time-series line chart with one or more series, each on
// its own y-scale (labelled in its colour), and a bar chart. Both redraw on demand, sized to the
// canvas' CSS box at the device pixel ratio.

function setup(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600;
  const h = canvas.clientHeight || 160;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = '11px system-ui, sans-serif';
  return { ctx, w, h };
}

const niceMax = (v) => {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
};

/** series: [{label, color, unit, points: [[t, y], ...]}]; x is seconds. */
export function drawLines(canvas, series, { xLabel = 's' } = {}) {
  const { ctx, w, h } = setup(canvas);
  const pad = { l: 44, r: 44, t: 34, b: 22 };
  const all = series.flatMap((s) => s.points);
  const tMax = Math.max(1, ...all.map((p) => p[0]));
  const X = (t) => pad.l + (t / tMax) * (w - pad.l - pad.r);
  ctx.strokeStyle = '#dde2e8';
  ctx.fillStyle = '#5b6673';
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = pad.t + (i / 4) * (h - pad.t - pad.b);
    ctx.beginPath(); ctx.moveTo(pad.l, y); ctx.lineTo(w - pad.r, y); ctx.stroke();
  }
  ctx.textAlign = 'center';
  ctx.fillText(`0 ${xLabel}`, pad.l, h - 6);
  ctx.fillText(`${tMax.toFixed(1)} ${xLabel}`, w - pad.r, h - 6);
  series.forEach((s, idx) => {
    const yMax = niceMax(s.pinMax ?? Math.max(0, ...s.points.map((p) => p[1])));
    const Y = (v) => h - pad.b - (v / yMax) * (h - pad.t - pad.b);
    ctx.fillStyle = s.color;
    ctx.textAlign = idx === 0 ? 'left' : 'right';
    const xText = idx === 0 ? 2 : w - 2;
    if (s.pinMax !== undefined && idx > 1) ctx.fillStyle = '#5b6673'; // shared memory scale
    ctx.fillText(`${yMax} ${s.unit}`, xText, pad.t + 4);
    ctx.fillText('0', xText, h - pad.b);
    if (s.points.length === 0) return;
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    s.points.forEach(([t, v], i) => (i ? ctx.lineTo(X(t), Y(v)) : ctx.moveTo(X(t), Y(v))));
    ctx.stroke();
  });
  // Legend.
  ctx.textAlign = 'left';
  let x = pad.l;
  for (const s of series) {
    ctx.fillStyle = s.color;
    ctx.fillRect(x, 8, 12, 3);
    ctx.fillStyle = '#1d232b';
    ctx.fillText(s.label, x + 16, 13);
    x += ctx.measureText(s.label).width + 30;
  }
}

/** values: numbers drawn as bars, left to right, with the max labelled. */
export function drawBars(canvas, values, { color = '#3b6fd4', unit = 'ms' } = {}) {
  const { ctx, w, h } = setup(canvas);
  const pad = { l: 44, r: 8, t: 8, b: 16 };
  const yMax = niceMax(Math.max(0, ...values));
  ctx.fillStyle = '#5b6673';
  ctx.textAlign = 'left';
  ctx.fillText(`${yMax} ${unit}`, 2, pad.t + 8);
  ctx.fillText('0', 2, h - pad.b);
  ctx.strokeStyle = '#dde2e8';
  ctx.beginPath(); ctx.moveTo(pad.l, h - pad.b + 0.5); ctx.lineTo(w - pad.r, h - pad.b + 0.5); ctx.stroke();
  if (values.length === 0) return;
  const slot = (w - pad.l - pad.r) / values.length;
  ctx.fillStyle = color;
  values.forEach((v, i) => {
    const bh = (v / yMax) * (h - pad.t - pad.b);
    ctx.fillRect(pad.l + i * slot + slot * 0.15, h - pad.b - bh, Math.max(1, slot * 0.7), bh);
  });
  ctx.fillStyle = '#5b6673';
  ctx.textAlign = 'center';
  ctx.fillText(`batch 1…${values.length}`, pad.l + (w - pad.l - pad.r) / 2, h - 3);
}
