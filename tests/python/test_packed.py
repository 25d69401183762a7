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


def test_wide_rows_are_cut_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide rows make more, smaller payloads: each about BYTES_PER_PAYLOAD (100k late
    rows of 30 kB would pass the 2 GiB a binary value can hold), and they come back
    whole, in order."""
    monkeypatch.setattr(packed, "BYTES_PER_PAYLOAD", 10_000)
    wide = pa.record_batch({"k": pa.array(range(50), pa.int64()), "s": ["x" * 1_000] * 50})
    rows_out = list(packed.pack("late", wide))
    sizes = [r.column(1)[0].as_buffer().size for r in rows_out]
    assert 5 <= len(rows_out) <= 6 and max(sizes) < 12_000, sizes
    back = list(packed.unpack(iter(r.select([packed.PAYLOAD]) for r in rows_out)))
    assert pa.Table.from_batches(back).equals(pa.Table.from_batches([wide]))
