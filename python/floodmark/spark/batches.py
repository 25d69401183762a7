"""Arrow batches handed to a ``mapInArrow`` function, cut into runs of equal values
(a partition sorted by a key holds each key's rows together, across batches)."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def runs(values: pa.Array | pa.ChunkedArray) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]``: the row ranges of ``values`` where it stays the same."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(values)
    if n == 0:
        return []
    changed = pc.not_equal(values.slice(1), values.slice(0, n - 1)).fill_null(True)
    cuts = (np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1).tolist()
    return list(itertools.pairwise([0, *cuts, n]))


__all__ = ["runs"]
