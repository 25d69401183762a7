"""``floodmark demo --live`` end to end: a live query over librdkafka's mock cluster next
to Spark's own watermark query, one line per micro-batch, then the report from the live
outputs. Skips only when the ``confluent-kafka`` wheel is missing (CI installs it)."""

from __future__ import annotations

import csv
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from floodmark.cli import live, main
from floodmark.datagen import EPOCH_MS

#: Arrivals up to 100 s: seven micro-batches, the quiet partition idle in the last two.
UNTIL_MS = 100_000


def test_demo_live(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    pytest.importorskip("confluent_kafka")
    from floodmark.spark import spark_global_watermark_late

    produced: list[pa.Table] = []
    whole = live.live_table

    def shorter(rows: int) -> pa.Table:
        table = whole(rows)
        table = table.filter(pc.less(table.column("arrival"), EPOCH_MS + UNTIL_MS))
        produced.append(table)
        return table

    monkeypatch.setattr(live, "live_table", shorter)
    out_dir = tmp_path / "out"
    assert main(["demo", "--live", "--rows", "40000", "--output", str(out_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = lines.index(live.HEADER)
    rows = [line.split() for line in lines[head + 1 : head + 8]]
    assert [r[0] for r in rows] == [f"{i}/7" for i in range(1, 8)]
    # The lagging partition holds the combined watermark back; the quiet one goes idle.
    assert {r[3] for r in rows} == {"p3"}
    assert [r[4] for r in rows][-2:] == ["p6", "p6"]
    # Every line's columns (batch, broker, watermark, held by, idle, late, Spark, s).
    assert all(len(r) == 8 for r in rows)
    # Lines fit 80 columns (those naming the output folder aside: its path is the user's).
    assert [line for line in lines if len(line) > 80 and str(out_dir) not in line] == []
    late_total, spark_total = (int(rows[-1][i].replace(",", "")) for i in (5, 6))

    # Spark's live query dropped what the model of its watermark says, record for record
    # (the demo's Spark query runs no batch without new records).
    (table,) = produced
    model = spark_global_watermark_late(
        spark.createDataFrame(table),
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        delay=timedelta(seconds=5),
        trigger_interval=timedelta(seconds=10),
        window_size=timedelta(seconds=10),
        no_data_batches=False,
    ).toArrow()
    assert spark_total == pc.sum(model["spark_dropped"]).as_py() > 1_000

    # The report counts the live outputs: floodmark's late records are the lines'.
    with open(out_dir / "report" / "partitions.csv", newline="") as f:
        parts = list(csv.DictReader(f))
    assert sum(int(p["late"]) for p in parts) == late_total
    by_partition = {p["partition"]: p for p in parts}
    # Spark drops most of the lagging partition (all but its first batches' records).
    assert int(by_partition["3"]["spark_dropped"]) > 0.5 * int(by_partition["3"]["records"])
    assert int(by_partition["3"]["late"]) < 0.01 * int(by_partition["3"]["records"])
    records = sum(int(p["records"]) for p in parts)
    # All but the last second of arrivals (behind the final frontier, waiting in state).
    waiting = table.num_rows - records
    assert 0 < waiting < 0.03 * table.num_rows
    assert f"the last {waiting:,} wait" in out
    for kind in ("results", "late", "dropped", "timeline", "emissions"):
        assert (out_dir / kind).is_dir()
    assert (out_dir / "report" / "index.html").exists()
    assert f"covers the {records:,} records" in out


def test_demo_live_without_confluent_kafka(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    assert main(["demo", "--live", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'floodmark[kafka]'" in err
    assert not (tmp_path / "o").exists()
