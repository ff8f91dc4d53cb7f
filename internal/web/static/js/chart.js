// uPlot helpers shared by the trend and system views. uPlot is the
// vendored build loaded by index.html as a classic script (window.uPlot).

export const palette = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

export function uPlotLib() {
  const u = globalThis.uPlot;
  if (!u) throw new Error('uPlot did not load');
  return u;
}

// alpha turns '#rrggbb' into an rgba() string.
export function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${a})`;
}

// isDigital reports whether every value of the arrays is 0 or 1 (or
// null): such tags are drawn as steps, not slopes.
export function isDigital(...arrays) {
  let seen = false;
  for (const a of arrays) {
    for (const v of a) {
      if (v == null) continue;
      if (v !== 0 && v !== 1) return false;
      seen = true;
    }
  }
  return seen;
}

// bucketsFor returns the number of buckets to ask for a plot of width
// px: one per pixel column. With the min/max band that gives each column
// its exact extremes, which is all a line that wide can show; the issue
// allows up to two per pixel, which doubles the server's work (and, on
// long windows, crosses into a finer rollup tier) for no visible gain.
export function bucketsFor(px) {
  return Math.max(50, Math.min(8000, Math.round(px)));
}
