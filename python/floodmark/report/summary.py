"""The terminal summary of a run: plain text that fits 80 columns."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from floodmark.report.figures import (
    column_sum,
    delay_stats,
    firing_counts,
    firing_delays,
    label,
    seconds_per_tick,
)
from floodmark.report.inputs import ReportInputs
from floodmark.report.partition_views import lag_stats, with_views
from floodmark.windows import ON_TIME

WIDTH = 80


def text_table(
    table: pa.Table, columns: Sequence[str] | None = None, *, max_rows: int | None = None
) -> str:
    """Render ``table`` as aligned plain text (numbers right-aligned), cells via
    :func:`~floodmark.report.figures.label`, at most ``max_rows`` rows."""
    names = list(columns or table.column_names)
    shown = table if max_rows is None else table.slice(0, max_rows)
    cells = [[label(v) for v in shown.column(n).to_pylist()] for n in names]
    numeric = [
        pa.types.is_integer(table.schema.field(n).type)
        or pa.types.is_floating(table.schema.field(n).type)
        for n in names
    ]
    widths = [max([len(n), *map(len, col)]) for n, col in zip(names, cells, strict=False)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=False)
        ]
        return "  ".join(parts).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out += [line([col[i] for col in cells]) for i in range(shown.num_rows)]
    if max_rows is not None and table.num_rows > max_rows:
        out.append(f"... {table.num_rows - max_rows:,} more rows")
    return "\n".join(out)


def _pct(part: int, whole: int | None) -> str:
    return f" ({100 * part / whole:.2f} %)" if whole else ""


def totals(inputs: ReportInputs) -> list[tuple[str, str]]:
    """The headline figures as ``(name, value)`` pairs."""
    rows: list[tuple[str, str]] = []
    records = column_sum(inputs.partitions, "records")
    if records is not None:
        rows.append(("records", f"{records:,}"))
    if inputs.firings is not None:
        counts = firing_counts(inputs.firings)
        timing = inputs.firings.column("timing").to_pylist()
        fired = int(counts.sum())
        on_time = int(sum(n for t, n in zip(timing, counts, strict=True) if t == ON_TIME))
        rows.append(("windows fired", f"{fired:,}"))
        rows.append(("  on time / late firings", f"{on_time:,} / {fired - on_time:,}"))
        if not inputs.arrival_clock:
            rows.append(("firing delay", "n/a (no arrival column: records in row order)"))
        else:
            delays = firing_delays(inputs.firings, inputs.event_unit, inputs.arrival_unit)
            stats = delay_stats(delays)
            if stats.count:
                rows.append(("firing delay", f"median {stats.median:.2f} s, p99 {stats.p99:.2f} s"))
    for name in ("late", "dropped", "spark_dropped"):
        value = column_sum(inputs.partitions, name)
        if value is not None:
            title = "dropped by Spark's watermark" if name == "spark_dropped" else name
            rows.append((title, f"{value:,}{_pct(value, records)}"))
    return rows


def partition_table(inputs: ReportInputs) -> pa.Table | None:
    """Per-partition counts joined with each partition's watermark lag: the median and
    maximum over the bins of the lag table (seconds behind the leading partition, see
    :mod:`floodmark.report.partition_views`)."""
    parts = inputs.partitions
    if parts is None:
        return None
    lag = with_views(inputs).lag
    if lag is None or lag.num_rows == 0:
        return parts
    stats = lag_stats(lag, seconds_per_tick(inputs.event_unit))
    by_channel = dict(
        zip(
            stats.column("partition").to_pylist(),
            zip(
                stats.column("lag_median_s").to_pylist(),
                stats.column("lag_max_s").to_pylist(),
                strict=True,
            ),
            strict=True,
        )
    )
    keys = parts.column("partition").to_pylist()
    nan = float("nan")
    med = [by_channel.get(k, (nan, nan))[0] for k in keys]
    mx = [by_channel.get(k, (nan, nan))[1] for k in keys]
    return parts.append_column("lag_median_s", pa.array(med, pa.float64())).append_column(
        "lag_max_s", pa.array(mx, pa.float64())
    )


#: The order of the partitions shown when not all fit: the most late records first,
#: then dropped, then Spark drops, then the largest lag (so that a run with nothing
#: late shows its laggards, not the first partitions).
WORST_FIRST = ("late", "dropped", "spark_dropped", "lag_max_s")


def worst_first(table: pa.Table) -> pa.Table:
    """The rows by :data:`WORST_FIRST`, descending (stable)."""
    keys = [c for c in WORST_FIRST if c in table.column_names]
    if not keys:
        return table
    return table.take(pc.sort_indices(table, [(k, "descending") for k in keys]))


def render_summary(inputs: ReportInputs, *, max_partitions: int = 40) -> str:
    """The summary: title, settings, totals and the per-partition table (80 columns).

    Lag is how far a partition's watermark trailed the leading active partition's at
    the end of each bin of arrival time (median and maximum over the bins, in seconds).
    """
    out = [inputs.title, "=" * min(WIDTH, len(inputs.title))]
    if inputs.settings:
        pairs = [f"{k} {v}" for k, v in inputs.settings.items()]
        out += _wrap(", ".join(pairs), WIDTH)
    out.append("")
    rows = totals(inputs)
    if rows:
        width = max(len(n) for n, _ in rows)
        out += [f"  {n.ljust(width)}  {v}" for n, v in rows]
        out.append("")
    table = partition_table(inputs)
    if table is not None:
        names = {
            "partition": "partition",
            "records": "records",
            "late": "late",
            "dropped": "dropped",
            "spark_dropped": "spark drops",
            "lag_median_s": "lag med s",
            "lag_max_s": "lag max s",
        }
        cols = [c for c in names if c in table.column_names]
        if table.num_rows > max_partitions:
            out.append(
                f"the {max_partitions} partitions with the most late records (then "
                "dropped, spark drops, lag):"
            )
            table = worst_first(table)
        renamed = table.select(cols).rename_columns([names[c] for c in cols])
        if "partition" in renamed.column_names:
            names_shown = [_short(label(v)) for v in renamed.column("partition").to_pylist()]
            at = renamed.column_names.index("partition")
            renamed = renamed.set_column(at, "partition", pa.array(names_shown, pa.string()))
        out.append(text_table(renamed, max_rows=max_partitions))
    out += [*(line for note in inputs.notes for line in _wrap(note, WIDTH))]
    return "\n".join(out).rstrip() + "\n"


#: The widest partition name the summary's table shows: with the six number columns
#: it fits 80 columns (the report's page and CSVs show every name whole).
PARTITION_WIDTH = 16


def _short(name: str) -> str:
    """A partition name on one line, cut to :data:`PARTITION_WIDTH` (``...`` last)."""
    line = " ".join(name.split())
    return line if len(line) <= PARTITION_WIDTH else line[: PARTITION_WIDTH - 3] + "..."


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


__all__ = [
    "partition_table",
    "render_summary",
    "text_table",
    "totals",
    "worst_first",
]
