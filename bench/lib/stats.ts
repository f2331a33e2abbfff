/** Latency and spread statistics, the markdown table and the SVG plot of a bench run. */

export interface LatencySummary {
  n: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array (p in 0..100); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  if (p <= 0) return sorted[0]!;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

export function summarize(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  const sum = sorted.reduce((s, v) => s + v, 0);
  return {
    n: sorted.length,
    mean: sorted.length ? sum / sorted.length : NaN,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
  };
}

/** Median and range of per-round figures: the spread the noise of a shared machine leaves. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  /** (max - min) / median, as a fraction. */
  relRange: number;
}

export function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const median =
    sorted.length === 0
      ? NaN
      : sorted.length % 2
        ? sorted[(sorted.length - 1) / 2]!
        : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  const min = sorted[0] ?? NaN;
  const max = sorted[sorted.length - 1] ?? NaN;
  return { median, min, max, relRange: median > 0 ? (max - min) / median : NaN };
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two points. */
export function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** A markdown table; numbers are printed as given (format them first). */
export function markdownTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => (c ?? '').padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...rows.map(line)].join('\n');
}

export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return '-';
  return value.toFixed(digits);
}

export interface PlotSeries {
  name: string;
  color: string;
  /** [x, y] points; x is a category index into PlotOptions.xLabels. */
  points: ReadonlyArray<readonly [number, number]>;
}

export interface PlotPanel {
  title: string;
  yLabel: string;
  series: readonly PlotSeries[];
}

const escapeXml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least max. */
export function niceCeil(max: number): number {
  if (!(max > 0)) return 1;
  const pow = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * pow >= max) return m * pow;
  return 10 * pow;
}

/** Side-by-side line charts sharing categorical x labels (e.g. concurrency 1, 16, 64). */
export function svgPlot(
  panels: readonly PlotPanel[],
  xLabels: readonly string[],
  xTitle: string,
  caption: string,
): string {
  const pw = 420;
  const ph = 300;
  const m = { l: 64, r: 16, t: 36, b: 48 };
  const width = panels.length * pw;
  const legendH = 24;
  const height = ph + legendH + 24;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
  ];
  panels.forEach((panel, pi) => {
    const x0 = pi * pw + m.l;
    const y0 = m.t;
    const w = pw - m.l - m.r;
    const h = ph - m.t - m.b;
    const ys = panel.series.flatMap((s) => s.points.map(([, y]) => y)).filter(Number.isFinite);
    const yMax = niceCeil(Math.max(0, ...ys));
    const xAt = (i: number) => x0 + (xLabels.length <= 1 ? w / 2 : (i * w) / (xLabels.length - 1));
    const yAt = (v: number) => y0 + h - (v / yMax) * h;
    out.push(
      `<text x="${x0 + w / 2}" y="20" text-anchor="middle" font-weight="bold">${escapeXml(panel.title)}</text>`,
    );
    out.push(`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
    for (let t = 0; t <= 4; t++) {
      const v = (yMax * t) / 4;
      const y = yAt(v);
      out.push(`<line x1="${x0}" y1="${y}" x2="${x0 + w}" y2="${y}" stroke="#eee"/>`);
      out.push(`<text x="${x0 - 6}" y="${y + 4}" text-anchor="end">${escapeXml(formatTick(v))}</text>`);
    }
    xLabels.forEach((label, i) => {
      out.push(`<text x="${xAt(i)}" y="${y0 + h + 16}" text-anchor="middle">${escapeXml(label)}</text>`);
    });
    out.push(`<text x="${x0 + w / 2}" y="${y0 + h + 34}" text-anchor="middle">${escapeXml(xTitle)}</text>`);
    out.push(
      `<text transform="translate(${x0 - 48},${y0 + h / 2}) rotate(-90)" text-anchor="middle">${escapeXml(panel.yLabel)}</text>`,
    );
    for (const s of panel.series) {
      const pts = s.points.filter(([, y]) => Number.isFinite(y));
      if (pts.length === 0) continue;
      const d = pts.map(([x, y], i) => `${i ? 'L' : 'M'}${xAt(x).toFixed(1)},${yAt(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
      for (const [x, y] of pts) {
        out.push(`<circle cx="${xAt(x).toFixed(1)}" cy="${yAt(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
      }
    }
  });
  const names = panels[0]?.series ?? [];
  names.forEach((s, i) => {
    const x = m.l + i * 170;
    const y = ph + 8;
    out.push(`<rect x="${x}" y="${y}" width="14" height="4" fill="${s.color}"/>`);
    out.push(`<text x="${x + 20}" y="${y + 6}">${escapeXml(s.name)}</text>`);
  });
  out.push(`<text x="${m.l}" y="${height - 6}" fill="#555">${escapeXml(caption)}</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function formatTick(v: number): string {
  if (v >= 10_000) return `${(v / 1000).toFixed(0)}k`;
  if (v >= 100 || Number.isInteger(v)) return v.toFixed(0);
  return v.toFixed(1);
}
