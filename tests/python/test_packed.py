"""The window stage's packed outputs: every batch comes back whole, in order."""

from __future__ import annotations

import pyarrow as pa
import pytest

from floodmark.spark import packed


def batch(n: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "k": pa.array(range(n), pa.int64()),
            "s": pa.array([f"r{i}" for i in range(n)], pa.string()),
        }
    )


@pytest.mark.parametrize("rows", [0, 1, 7, 25])
def test_pack_then_unpack_gives_the_batch_back(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    monkeypatch.setattr(packed, "ROWS_PER_PAYLOAD", 10)
    rows_out = list(packed.pack("late", batch(rows)))
    assert len(rows_out) == -(-rows // 10)  # one packed row per 10 rows
    for r in rows_out:
        assert r.column(0).to_pylist() == [packed.KINDS["late"]]
    payloads = [r.select([packed.PAYLOAD]) for r in rows_out]
    back = list(packed.unpack(iter(payloads)))
    got = pa.Table.from_batches(back, schema=batch(0).schema)
    assert got.equals(pa.Table.from_batches([batch(rows)]))
