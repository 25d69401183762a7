"""A self-contained HTML report: inline CSS, charts embedded as base64 PNG data URIs,
no external resources; plus the PNGs and the CSV files it links, side by side.

The page reads the same at 16 partitions as at 1,000: partitions are drawn from the
compact tables of :mod:`floodmark.report.partition_views` (a heatmap, the top
partitions, idle spans), long tables are cut to their top rows in the page and written
whole as CSV beside it."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from floodmark.report import charts, partition_charts
from floodmark.report.figures import (
    column_sum,
    delay_stats,
    firing_delays,
    label,
    timeline_csv,
)
from floodmark.report.inputs import ReportInputs
from floodmark.report.partition_views import run_span, with_views
from floodmark.report.summary import partition_table, totals, worst_first

#: Partitions shown in the per-partition table and chart when there are more.
TOP = 20
#: The per-partition line chart is drawn for at most this many partitions.
FEW_PARTITIONS = 20

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1240px;color:#222;padding:0 1em}
h1{margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f2f2f2}
td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:14px;margin-top:.3em}.note{color:#444}
.data,.toc{font-size:14px;color:#444}
"""


@dataclass(frozen=True)
class Section:
    """One chart with its caption, the table shown under it and the CSV files beside
    the page (file name and table) that hold its figures in full."""

    name: str
    title: str
    caption: str
    png: Path | None
    table: pa.Table | None = None
    data: tuple[tuple[str, pa.Table], ...] = ()


def table_html(table: pa.Table, *, max_rows: int = 200) -> str:
    """An HTML table of at most ``max_rows`` rows (the rest counted)."""
    shown = table.slice(0, max_rows)
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    head = "".join(f"<th>{html.escape(n)}</th>" for n in table.column_names)
    columns = [shown.column(i).to_pylist() for i in range(shown.num_columns)]
    body = []
    for r in range(shown.num_rows):
        cells = "".join(
            f"<td{' class=num' if numeric[i] else ''}>{html.escape(label(col[r]))}</td>"
            for i, col in enumerate(columns)
        )
        body.append(f"<tr>{cells}</tr>")
    more = ""
    if table.num_rows > max_rows:
        more = f'<p class="note">{table.num_rows - max_rows:,} more rows in the CSV.</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def data_uri(png: Path) -> str:
    """A PNG file as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def data_links(section: Section) -> str:
    """A line linking the section's CSV files (relative links to files beside the page)."""
    if not section.data:
        return ""
    links = ", ".join(
        f'<a href="{html.escape(name)}">{html.escape(name)}</a> ({table.num_rows:,} rows)'
        for name, table in section.data
    )
    return f'<p class="data">Data (CSV, beside this page): {links}</p>'


def render_page(inputs: ReportInputs, sections: list[Section], *, max_rows: int = 200) -> str:
    """The whole page as one HTML string."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(inputs.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(inputs.title)}</h1>",
    ]
    if inputs.settings:
        settings = pa.table(
            {"setting": list(inputs.settings), "value": list(inputs.settings.values())}
        )
        parts.append(table_html(settings))
    rows = totals(inputs)
    if rows:
        parts.append("<h2>Summary</h2>")
        parts.append(
            table_html(
                pa.table({"figure": [n.strip() for n, _ in rows], "value": [v for _, v in rows]})
            )
        )
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in inputs.notes]
    if sections:
        toc = " &middot; ".join(f'<a href="#{s.name}">{html.escape(s.title)}</a>' for s in sections)
        parts.append(f'<p class="toc">{toc}</p>')
    for s in sections:
        parts.append(f'<h2 id="{s.name}">{html.escape(s.title)}</h2>')
        if s.png is not None:
            parts.append(
                f'<figure id="fig-{s.name}"><img alt="{html.escape(s.title)}" '
                f'src="{data_uri(s.png)}">'
                f"<figcaption>{html.escape(s.caption)}</figcaption></figure>"
            )
        else:
            parts.append(f'<p class="note">{html.escape(s.caption)}</p>')
        if s.table is not None:
            parts.append(table_html(s.table, max_rows=max_rows))
        parts.append(data_links(s))
    parts.append("</body></html>")
    return "\n".join(parts)


def shown_partitions(parts: pa.Table, top: int) -> pa.Table:
    """The per-partition table as the page shows it: every row if there are at most
    ``top``, else the ``top`` with the most late (then dropped, then Spark-dropped)
    records, then the largest lag; then a row of totals over all partitions."""
    rows = parts if parts.num_rows <= top else worst_first(parts).slice(0, top)
    rows = rows.set_column(0, "partition", rows.column(0).cast(pa.string()))
    total: dict[str, object] = {"partition": f"all {parts.num_rows:,}"}
    for f in parts.schema:
        if f.name != "partition" and pa.types.is_integer(f.type):
            total[f.name] = column_sum(parts, f.name)
    return pa.concat_tables([rows, pa.Table.from_pylist([total], schema=rows.schema)])


def _channels(emissions: pa.Table | None) -> int:
    if emissions is None or emissions.num_rows == 0:
        return 0
    return int(pc.count_distinct(emissions.column("channel")).as_py())


def _span(inputs: ReportInputs) -> tuple[int, int] | None:
    """The run's arrival span: the lag table's bins, else the timeline's times."""
    if inputs.lag is not None and inputs.lag.num_rows:
        return int(pc.min(inputs.lag["start"]).as_py()), int(pc.max(inputs.lag["end"]).as_py())
    return run_span(inputs.timeline, inputs.emissions)


def watermark_sections(inputs: ReportInputs, folder: Path, *, few: int) -> list[Section]:
    """The combined watermark, each partition's (few partitions only), the lag heatmap,
    the partitions holding the watermark back and the idle spans."""
    out: list[Section] = []
    span = _span(inputs)
    first, last = span if span is not None else (0, 0)
    ev, arr = inputs.event_unit, inputs.arrival_unit
    if inputs.timeline is not None:
        png = partition_charts.combined_chart(
            inputs.timeline,
            folder / "watermark.png",
            end=last,
            event_unit=ev,
            arrival_unit=arr,
            arrival_clock=inputs.arrival_clock,
        )
        trailed = (
            ", and how far it trailed the arrival clock (below, seconds)"
            if inputs.arrival_clock
            else " (arrival: row order, no clock)"
        )
        out.append(
            Section(
                "watermark",
                "Combined watermark over arrival time",
                "The combined watermark, the minimum over the active partitions (top)"
                f"{trailed}; blue shading: every "
                "partition idle. timeline.csv has every change of it (ticks and UTC dates).",
                png,
                data=(("timeline.csv", timeline_csv(inputs.timeline, ev, arr)),),
            )
        )
    channels = _channels(inputs.emissions)
    if inputs.timeline is not None and inputs.emissions is not None and 0 < channels <= few:
        png = charts.watermark_chart(
            inputs.timeline,
            inputs.emissions,
            folder / "watermarks.png",
            event_unit=ev,
            arrival_unit=arr,
            idle_spans=inputs.idle_spans,
        )
        out.append(
            Section(
                "watermarks",
                "Each partition's watermark",
                "Each partition's watermark (thin lines) and the combined watermark (thick "
                "line). Below: when each partition was idle (blue) and when it held the "
                f"minimum, i.e. when time waited for it (red). Drawn for up to {few} "
                "partitions; the charts below read at any number.",
                png,
            )
        )
    if inputs.lag is not None and inputs.lag.num_rows:
        bins = int(pc.max(inputs.lag["bin"]).as_py()) + 1
        png = partition_charts.lag_heatmap(
            inputs.lag, folder / "lag.png", event_unit=ev, arrival_unit=arr
        )
        out.append(
            Section(
                "lag",
                "Lag behind the leading partition",
                f"One row per partition, worst first (by mean lag), {bins} columns of "
                "arrival time. Colour: how far the partition's watermark trailed the "
                "highest watermark among the active partitions at the end of the column "
                "(seconds; the partition holding the combined watermark back trails the "
                "most). Blue: idle (left out of the combined watermark). Purple: back "
                "from idle behind the combined watermark, left out of it until it catches "
                "up (its records meanwhile can be late). Grey: no watermark yet. With "
                "many partitions each is a pixel row, and the 15 with the most lag are "
                "drawn again above, one labelled row each.",
                png,
                data=(("lag.csv", inputs.lag),),
            )
        )
    if inputs.holding is not None and inputs.holding.num_rows:
        png = partition_charts.holding_chart(
            inputs.holding, folder / "holding.png", span=last - first, arrival_unit=arr
        )
        out.append(
            Section(
                "holding",
                "Partitions holding the watermark back",
                "Arrival time during which each partition held the combined watermark "
                "(it was the minimum, so time waited for it), and its share of the run.",
                png,
                data=(("holding.csv", inputs.holding),),
            )
        )
    if inputs.idle_spans is not None and span is not None:
        png = partition_charts.idle_chart(
            inputs.idle_spans, folder / "idle.png", first=first, last=last, arrival_unit=arr
        )
        out.append(
            Section(
                "idle",
                "Idle partitions",
                "When partitions were idle (no record for longer than the idle timeout): "
                "the combined watermark moved on without them.",
                png,
                data=(("idle_spans.csv", inputs.idle_spans),),
            )
        )
    return out


def build_sections(
    inputs: ReportInputs,
    folder: Path,
    *,
    max_late: float | None = None,
    top: int = TOP,
    few: int = FEW_PARTITIONS,
) -> list[Section]:
    """Draw every chart the inputs allow into ``folder``; return the sections.

    Args:
        inputs: the collected tables (the partition views are computed from the
            timeline and emissions when missing).
        folder: where the PNGs go.
        max_late: the late-fraction target drawn on the bounds chart.
        top: partitions shown in the per-partition table and chart when there are more.
        few: the per-partition line chart is drawn up to this many partitions.
    """
    inputs = with_views(inputs)
    out = watermark_sections(inputs, folder, few=few)
    parts = partition_table(inputs)
    if parts is not None:
        cut = parts.num_rows > top
        chart_rows = worst_first(parts).slice(0, top) if cut else parts
        png = charts.partition_chart(
            chart_rows,
            folder / "partitions.png",
            title=(
                f"Late and dropped records: the {top} partitions with the most, of "
                f"{parts.num_rows:,}"
                if cut
                else None
            ),
        )
        out.append(
            Section(
                "partitions",
                "Late and dropped records per partition",
                (
                    f"The {top} partitions with the most late records (then dropped, then "
                    f"Spark drops, then the largest lag) of {parts.num_rows:,}, and the "
                    "totals over all; every "
                    "partition is in partitions.csv. "
                    if cut
                    else ""
                )
                + "Late: too late for every window (Flink's late side output). Dropped: in "
                "no window. Spark drops: records Spark's single global watermark would have "
                "dropped. Lag: how far the partition's watermark trailed the leading "
                "partition's (seconds, median and maximum over the columns of the lag chart).",
                png,
                shown_partitions(parts, top),
                data=(("partitions.csv", parts),),
            )
        )
    if inputs.firings is not None and inputs.arrival_clock:
        delays = firing_delays(inputs.firings, inputs.event_unit, inputs.arrival_unit)
        png = charts.delay_chart(delays, folder / "firing_delay.png")
        stats = delay_stats(delays).table()
        out.append(
            Section(
                "delay",
                "Window firing delay",
                "Arrival time of the input that fired each on-time window minus the window's "
                "end: how long results wait for the watermark.",
                png,
                stats,
                data=(("delay.csv", stats),),
            )
        )
    if inputs.analysis is not None:
        png = charts.analysis_chart(inputs.analysis, folder / "bounds.png", max_late=max_late)
        out.append(
            Section(
                "bounds",
                "Late fraction and firing delay against the bound",
                "A larger out-of-orderness bound makes fewer records late but fires windows later.",
                png,
                inputs.analysis,
                data=(("bounds.csv", inputs.analysis),),
            )
        )
    return out


def write_csv(table: pa.Table, path: Path) -> Path:
    """Write ``table`` as CSV (durations as seconds, for spreadsheets)."""
    cols = []
    for f, col in zip(table.schema, table.columns, strict=False):
        if pa.types.is_duration(f.type):
            col = pa.array(
                [None if v is None else v.total_seconds() for v in col.to_pylist()], pa.float64()
            )
        cols.append(col)
    pacsv.write_csv(pa.table(cols, names=table.column_names), path)
    return path


def write_report(
    folder: str | Path,
    inputs: ReportInputs,
    *,
    max_late: float | None = None,
    max_rows: int = 200,
    top: int = TOP,
) -> Path:
    """Write ``index.html``, the chart PNGs and the CSV files it links into ``folder``.

    ``index.html`` is self-contained (charts embedded, no network); the CSV files beside
    it hold each chart's figures in full, linked from the page.

    Args:
        folder: the report folder (created if missing).
        inputs: the collected tables.
        max_late: the late-fraction target drawn on the bounds chart.
        max_rows: rows shown per table in the page (the CSVs have them all).
        top: partitions shown in the per-partition table and chart when there are more.

    Returns:
        The path of ``index.html``.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    inputs = with_views(inputs)
    sections = build_sections(inputs, out, max_late=max_late, top=top)
    for s in sections:
        for name, table in s.data:
            write_csv(table, out / name)
    page = out / "index.html"
    page.write_text(render_page(inputs, sections, max_rows=max_rows), encoding="utf-8")
    return page


__all__ = [
    "FEW_PARTITIONS",
    "TOP",
    "Section",
    "build_sections",
    "render_page",
    "shown_partitions",
    "table_html",
    "write_csv",
    "write_report",
]
