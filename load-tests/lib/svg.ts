// Grouped bar chart of CPU-normalised throughput relative to bare h3, as a plain SVG string.
import type { SummaryRow } from "./types.js";

const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f"];
const WIDTH = 960;
const HEIGHT = 480;
const PLOT = { left: 70, right: 20, top: 70, bottom: 110 };

const escape = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function niceStep(max: number): number {
  return max <= 1.5 ? 0.25 : max <= 3 ? 0.5 : 1;
}

export function ratioChart(rows: SummaryRow[], targets: string[], scenarios: string[], subtitle: string): string {
  const plotted = targets.filter((t) => rows.some((r) => r.target === t && r.ratioVsH3 !== null));
  const maxRatio = Math.max(1.2, ...rows.map((r) => r.ratioVsH3 ?? 0)) * 1.1;
  const step = niceStep(maxRatio);
  const top = Math.ceil(maxRatio / step) * step;
  const plotW = WIDTH - PLOT.left - PLOT.right;
  const plotH = HEIGHT - PLOT.top - PLOT.bottom;
  const y = (v: number): number => PLOT.top + plotH - (v / top) * plotH;
  const groupW = plotW / Math.max(1, scenarios.length);
  const barW = Math.min(48, (groupW * 0.8) / Math.max(1, plotted.length));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="system-ui, sans-serif">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="28" text-anchor="middle" font-size="18" font-weight="600">Requests per server CPU-second, relative to bare h3 (higher is better)</text>`,
    `<text x="${WIDTH / 2}" y="50" text-anchor="middle" font-size="12" fill="#555">${escape(subtitle)}</text>`,
  ];
  for (let v = 0; v <= top + 1e-9; v += step) {
    out.push(
      `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`,
      `<text x="${PLOT.left - 8}" y="${y(v) + 4}" text-anchor="end" font-size="11" fill="#555">${v.toFixed(2)}</text>`,
    );
  }
  scenarios.forEach((scenario, gi) => {
    const groupX = PLOT.left + gi * groupW;
    const startX = groupX + (groupW - barW * plotted.length) / 2;
    plotted.forEach((target, ti) => {
      const ratio = rows.find((r) => r.target === target && r.scenario === scenario)?.ratioVsH3;
      if (ratio === null || ratio === undefined) return;
      const x = startX + ti * barW;
      const color = COLORS[ti % COLORS.length] ?? "#888";
      out.push(
        `<rect x="${x + 2}" y="${y(ratio)}" width="${barW - 4}" height="${y(0) - y(ratio)}" fill="${color}"><title>${escape(`${target} ${scenario}: ${ratio.toFixed(3)}`)}</title></rect>`,
        `<text x="${x + barW / 2}" y="${y(ratio) - 4}" text-anchor="middle" font-size="10">${ratio.toFixed(2)}</text>`,
      );
    });
    out.push(
      `<text x="${groupX + groupW / 2}" y="${y(0) + 20}" text-anchor="middle" font-size="13" font-weight="600">${escape(scenario)}</text>`,
    );
  });
  // The reference line goes on top of the bars so it stays visible across all groups.
  out.push(
    `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(1)}" y2="${y(1)}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 4"/>`,
    `<text x="${WIDTH - PLOT.right - 4}" y="${y(1) - 5}" text-anchor="end" font-size="11" fill="#d62728">bare h3 = 1.0</text>`,
    `<text transform="translate(18 ${PLOT.top + plotH / 2}) rotate(-90)" text-anchor="middle" font-size="12" fill="#333">req per CPU-second / bare h3's, same round</text>`,
    `<line x1="${PLOT.left}" x2="${PLOT.left}" y1="${PLOT.top}" y2="${y(0)}" stroke="#333"/>`,
    `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`,
  );
  const legendY = HEIGHT - 45;
  const itemW = Math.min(140, plotW / Math.max(1, plotted.length));
  const legendX = PLOT.left + (plotW - itemW * plotted.length) / 2;
  plotted.forEach((target, ti) => {
    const x = legendX + ti * itemW;
    out.push(
      `<rect x="${x}" y="${legendY - 10}" width="12" height="12" fill="${COLORS[ti % COLORS.length] ?? "#888"}"/>`,
      `<text x="${x + 17}" y="${legendY}" font-size="12">${escape(target)}</text>`,
    );
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
