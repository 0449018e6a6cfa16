import { useEffect, useRef } from 'react';
import './locale-guard';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** One time series as a uPlot line chart (loaded only on the Analytics page). */
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
