"""The terminal summary fits 80 columns and carries the run's figures."""

from __future__ import annotations

import pyarrow as pa
import synthetic

from floodmark.report import ReportInputs
from floodmark.report.summary import render_summary


def test_summary_fits_80_columns_and_counts() -> None:
    text = render_summary(synthetic.inputs())
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "4,060" in text  # records
    assert "499 / 1" in text  # on time / late firings
    assert "50 (1.23 %)" in text  # late
    assert "spark drops" in text and "lag med s" in text
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("1 ")]
    assert lines and "30.01" in lines[0]  # the lagging partition's lag


def test_summary_of_an_empty_run() -> None:
    text = render_summary(ReportInputs(title="nothing"))
    assert text.startswith("nothing\n")


def test_many_partitions_are_cut_with_a_count() -> None:
    import pyarrow as pa

    parts = pa.table(
        {"partition": range(100), "records": [1] * 100, "late": [0] * 100, "dropped": [0] * 100}
    )
    text = render_summary(ReportInputs(partitions=parts), max_partitions=10)
    assert "... 90 more rows" in text


def test_grouped_firings_count_as_many_as_they_stand_for() -> None:
    """The command line hands over firings grouped by (window end, fired at, timing)
    with a ``firings`` count; the summary and the delays weigh each row by it."""
    import dataclasses

    import numpy as np
    import pyarrow as pa

    from floodmark.report.figures import firing_delays

    plain = synthetic.inputs()
    firings = plain.firings
    assert firings is not None
    doubled = firings.append_column("firings", pa.array(np.full(firings.num_rows, 2, np.int64)))
    grouped = dataclasses.replace(plain, firings=doubled)
    assert "998 / 2" in render_summary(grouped)  # 499 / 1, each row standing for two
    once = firing_delays(firings, "ms", "ms")
    twice = firing_delays(doubled, "ms", "ms")
    assert len(twice) == 2 * len(once)
    assert sorted(twice) == sorted(np.concatenate([once, once]))


def test_a_cut_summary_shows_the_worst_partitions() -> None:
    text = render_summary(synthetic.many_inputs(100), max_partitions=10)
    lines = text.splitlines()
    at = lines.index(
        "the 10 partitions with the most late records (then dropped, spark drops, lag):"
    )
    first, second = lines[at + 3].split()[0], lines[at + 4].split()[0]
    assert (first, second) == (str(synthetic.IDLE), str(synthetic.LAGGING))
    assert "... 90 more rows" in text
    assert max(len(line) for line in lines) <= 80


def test_with_nothing_late_the_cut_shows_the_laggards_first() -> None:
    """It showed the first partitions, under a line saying they had the most late
    records."""
    from floodmark.report.summary import worst_first

    parts = pa.table(
        {
            "partition": ["0", "1", "2", "3"],
            "late": [0, 0, 0, 0],
            "dropped": [0, 0, 0, 0],
            "lag_max_s": [0.5, float("nan"), 30.2, 4.0],
        }
    )
    assert worst_first(parts)["partition"].to_pylist() == ["2", "3", "0", "1"]


def test_a_long_or_multi_line_partition_name_keeps_the_summary_in_80_columns() -> None:
    """The summary's table shows a name on one line, cut; the page and CSVs keep it."""
    import dataclasses

    base = synthetic.inputs()
    long_name = "events-eu-west-1/topic-with-a-long-name\\nand a second line"
    names = pa.array([long_name.replace("\\n", "\n"), "1", "2", "3"])
    parts = base.partitions.set_column(0, "partition", names)  # type: ignore[union-attr]
    text = render_summary(dataclasses.replace(base, partitions=parts))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "events-eu-wes..." in text
