import { useEffect, useRef } from 'react';
import './locale-guard';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** One time series as a uPlot line chart (loaded only on the pages that draw one). */
export default function Chart({ title, series, unit }: { title: string; series: { start: string; value: number | null }[]; unit: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = series.map((p) => Date.parse(p.start) / 1000);
    const ys = series.map((p) => p.value);
    const dark = matchMedia('(prefers-color-scheme: dark)').matches;
    const axis = { stroke: dark ? '#ddd' : '#222', grid: { stroke: dark ? '#444' : '#ddd' } };
    const plot = new uPlot(
      {
        width: Math.max(280, Math.min(el.clientWidth || 600, 900)),
        height: 200,
        legend: { show: false },
        cursor: { show: false },
        axes: [axis, { ...axis, label: unit }],
        series: [{}, { label: title, stroke: dark ? '#6cb6ff' : '#0a58ca', width: 2, spanGaps: false, points: { show: true } }],
      },
      [xs, ys],
      el,
    );
    return () => plot.destroy();
  }, [series, title, unit]);
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: ${series.filter((p) => p.value !== null).length} of ${series.length} buckets with data`} />
    </figure>
  );
}

export interface BandPoint {
  at: string;
  lower: number | null;
  upper: number | null;
}

/**
 * An interval over time as a band (lower and upper bound, points at each look) with the 0 line:
 * where the band leaves 0 the difference is significant. Used by the A/B results.
 */
export function BandChart({ title, points, unit, description }: { title: string; points: BandPoint[]; unit: string; description: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = points.map((p) => Date.parse(p.at) / 1000);
    const dark = matchMedia('(prefers-color-scheme: dark)').matches;
    const axis = { stroke: dark ? '#ddd' : '#222', grid: { stroke: dark ? '#444' : '#ddd' } };
    const line = dark ? '#6cb6ff' : '#0a58ca';
    const plot = new uPlot(
      {
        width: Math.max(280, Math.min(el.clientWidth || 600, 900)),
        height: 220,
        legend: { show: false },
        cursor: { show: false },
        // One look alone still gets a day of width on either side.
        scales: { x: { time: true, range: (_u, min, max) => (min === max ? [min - 86_400, max + 86_400] : [min, max]) } },
        axes: [axis, { ...axis, label: unit }],
        series: [
          {},
          { label: 'Upper bound', stroke: line, width: 2, spanGaps: false, points: { show: true } },
          { label: 'Lower bound', stroke: line, width: 2, spanGaps: false, points: { show: true } },
          { label: '0', stroke: dark ? '#ffc46b' : '#8a5300', width: 1, dash: [6, 4], points: { show: false } },
        ],
        bands: [{ series: [1, 2], fill: dark ? 'rgba(108,182,255,0.25)' : 'rgba(10,88,202,0.15)' }],
      },
      [xs, points.map((p) => p.upper), points.map((p) => p.lower), points.map(() => 0)],
      el,
    );
    return () => plot.destroy();
  }, [points, unit]);
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: ${description}`} />
    </figure>
  );
}
