import pyarrow as pa, decimal
from floodmark import WatermarkStrategy, TumblingEventTimeWindows, WindowOperator
from floodmark.replay import replay
S = WatermarkStrategy.for_bounded_out_of_orderness(0)
base = {"ch": [0, 0], "arr": [0, 1], "ts": [1, 2]}
for name, key, val in [("uint64 value", pa.array(["a", "a"]), pa.array([1, 2], pa.uint64())),
                       ("uint64 key", pa.array([1, 2], pa.uint64()), pa.array([1, 2], pa.int64())),
                       ("decimal value", pa.array(["a", "a"]), pa.array([decimal.Decimal("1.5")] * 2, pa.decimal128(10, 2))),
                       ("bool value", pa.array(["a", "a"]), pa.array([True, False])),
                       ("uint32 value", pa.array(["a", "a"]), pa.array([2**32 - 1, 2**32 - 1], pa.uint32())),
                       ("float16 value", pa.array(["a", "a"]), pa.array([1, 2], pa.int64()).cast(pa.float64()).cast(pa.float16()) if hasattr(pa, 'float16') else None)]:
    t = pa.table({**base, "k": key, "v": val})
    try:
        r = replay(t, S, channel="ch", arrival="arr", event_time="ts", window=TumblingEventTimeWindows.of(10), key="k", aggs=[("sum", "v")])
        print(name, r.results.select(["k", "sum_v"]).to_pylist(), r.results.schema.field("k").type)
    except Exception as e:
        print(name, "->", type(e).__name__, e)
