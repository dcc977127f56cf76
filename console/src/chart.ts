import uPlot from 'uplot';
import { useEffect, useRef } from 'preact/hooks';
import { html } from './ui.js';

export interface Series {
  label: string;
  values: Array<number | null>;
  stroke: string;
}

/** A uPlot line chart over per-minute buckets (x in seconds, as uPlot expects). */
export function LineChart({
  id,
  title,
  summary,
  x,
  series,
  unit,
}: {
  id: string;
  title: string;
  summary: string;
  x: number[];
  series: Series[];
  unit: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data = [x, ...series.map((s) => s.values)] as uPlot.AlignedData;
  useEffect(() => {
    if (!host.current) return;
    plot.current = new uPlot(
      {
        width: 460,
        height: 200,
        legend: { show: true },
        cursor: { show: true },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{}, { label: unit, size: 50 }],
        // Minutes without a finished order have no rate: join the points across them.
        series: [
          {},
          ...series.map((s) => ({
            label: s.label,
            stroke: s.stroke,
            width: 2,
            spanGaps: true,
            points: { show: true, size: 5 },
          })),
        ],
      },
      data,
      host.current,
    );
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  });
  return html`<figure
    class="chart"
    id=${id}
    aria-labelledby=${`${id}-title`}
    aria-describedby=${`${id}-summary`}
  >
    <figcaption id=${`${id}-title`}>${title}</figcaption>
    <div ref=${host} role="img" aria-label=${`${title}: ${summary}`}></div>
    <p id=${`${id}-summary`} class="summary">${summary}</p>
  </figure>`;
}
