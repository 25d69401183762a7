"""A self-contained HTML report: inline CSS, charts embedded as base64 PNG data URIs,
no external resources; plus the PNGs and the CSV of every table, side by side."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from floodmark.report import charts
from floodmark.report.figures import delay_stats, firing_delays, label, readable_timeline
from floodmark.report.inputs import ReportInputs
from floodmark.report.summary import partition_table, totals

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1240px;color:#222;padding:0 1em}
h1{margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f2f2f2}
td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:14px;margin-top:.3em}.note{color:#444}
"""


@dataclass(frozen=True)
class Section:
    """One chart with its caption and the table of figures behind it."""

    name: str
    title: str
    caption: str
    png: Path | None
    table: pa.Table | None


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
    for s in sections:
        parts.append(f'<h2 id="{s.name}">{html.escape(s.title)}</h2>')
        if s.png is not None:
            parts.append(
                f'<figure><img alt="{html.escape(s.title)}" src="{data_uri(s.png)}">'
                f"<figcaption>{html.escape(s.caption)}</figcaption></figure>"
            )
        else:
            parts.append(f'<p class="note">{html.escape(s.caption)}</p>')
        if s.table is not None:
            parts.append(table_html(s.table, max_rows=max_rows))
    parts.append("</body></html>")
    return "\n".join(parts)


def build_sections(
    inputs: ReportInputs, folder: Path, *, max_late: float | None = None, timeline_rows: int = 50
) -> list[Section]:
    """Draw every chart the inputs allow into ``folder``; return the sections."""
    out: list[Section] = []
    if inputs.timeline is not None:
        png = charts.watermark_chart(
            inputs.timeline,
            inputs.emissions,
            folder / "watermarks.png",
            event_unit=inputs.event_unit,
            arrival_unit=inputs.arrival_unit,
        )
        out.append(
            Section(
                "watermarks",
                "Watermarks over arrival time",
                "Each partition's watermark (thin lines) and the combined watermark, the "
                "minimum over active partitions (thick line). Below: when each partition was "
                "idle (grey) and when it held the minimum, i.e. when time waited for it (red). "
                f"The table shows the first {timeline_rows} changes of the combined watermark "
                "(UTC; all of them are in timeline.csv, in ticks).",
                png,
                readable_timeline(
                    inputs.timeline.slice(0, timeline_rows), inputs.event_unit, inputs.arrival_unit
                ),
            )
        )
    parts = partition_table(inputs)
    if parts is not None:
        png = charts.partition_chart(parts, folder / "partitions.png")
        out.append(
            Section(
                "partitions",
                "Late and dropped records per partition",
                "Late: too late for every window (Flink's late side output). Dropped: in no "
                "window. Spark drops: records Spark's single global watermark would have "
                "dropped. Lag: how far the partition's watermark trailed the leading "
                "partition's (seconds).",
                png,
                parts,
            )
        )
    if inputs.firings is not None:
        delays = firing_delays(inputs.firings, inputs.event_unit, inputs.arrival_unit)
        png = charts.delay_chart(delays, folder / "firing_delay.png")
        out.append(
            Section(
                "delay",
                "Window firing delay",
                "Arrival time of the input that fired each on-time window minus the window's "
                "end: how long results wait for the watermark.",
                png,
                delay_stats(delays).table(),
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
    timeline_rows: int = 50,
) -> Path:
    """Write ``index.html``, the chart PNGs and a CSV per table into ``folder``.

    Args:
        folder: the report folder (created if missing).
        inputs: the collected tables.
        max_late: the late-fraction target drawn on the bounds chart.
        max_rows: rows shown per table in the page (the CSVs have them all).
        timeline_rows: rows of the timeline excerpt in the page.

    Returns:
        The path of ``index.html``.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    sections = build_sections(inputs, out, max_late=max_late, timeline_rows=timeline_rows)
    for s in sections:
        if s.table is not None:
            write_csv(s.table, out / f"{s.name}.csv")
    if inputs.timeline is not None:
        write_csv(inputs.timeline, out / "timeline.csv")
    page = out / "index.html"
    page.write_text(render_page(inputs, sections, max_rows=max_rows), encoding="utf-8")
    return page


__all__ = ["Section", "render_page", "table_html", "write_csv", "write_report"]
