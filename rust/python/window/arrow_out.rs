//! Building Arrow arrays from the operator's output.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::window::{AggColumn, KeyValues, Output, ValueType, WindowOperator};

/// The results of `out` as a record batch: key columns, `window_start`,
/// `window_end`, aggregates (named `agg_names`), `watermark`, `timing`,
/// `trigger_position`, `trigger_time`.
pub(crate) fn results_batch(
    op: &WindowOperator,
    out: &Output,
    key_types: &[DataType],
    agg_names: &[String],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let r = &out.results;
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (i, name) in op.config().key_names.iter().enumerate() {
        let stored = op.keys().values().map(|v| &v[i]);
        let col: ArrayRef = match (stored, key_types.get(i)) {
            (Some(KeyValues::Int64(v)), _) => {
                Arc::new(r.key.iter().map(|&k| v[k as usize]).collect::<Int64Array>())
            }
            (Some(KeyValues::Utf8(v)), _) => Arc::new(
                r.key
                    .iter()
                    .map(|&k| v[k as usize].as_deref())
                    .collect::<StringArray>(),
            ),
            (None, Some(DataType::Utf8)) => Arc::new(StringArray::from(Vec::<Option<&str>>::new())),
            (None, _) => Arc::new(Int64Array::from(Vec::<i64>::new())),
        };
        fields.push(Field::new(name, col.data_type().clone(), true));
        cols.push(col);
    }
    let mut push = |name: &str, col: ArrayRef, nullable: bool| {
        fields.push(Field::new(name, col.data_type().clone(), nullable));
        cols.push(col);
    };
    push(
        "window_start",
        Arc::new(Int64Array::from(r.start.clone())),
        false,
    );
    push(
        "window_end",
        Arc::new(Int64Array::from(r.end.clone())),
        false,
    );
    for ((col, name), ty) in r.aggs.iter().zip(agg_names).zip(op.agg_types()) {
        let arr: ArrayRef = match (col, ty) {
            (AggColumn::Int64(v), _) => Arc::new(Int64Array::from(v.clone())),
            (AggColumn::Float64(v), _) => Arc::new(Float64Array::from(v.clone())),
        };
        let _: ValueType = ty;
        push(name, arr, true);
    }
    push(
        "watermark",
        Arc::new(Int64Array::from(r.watermark.clone())),
        false,
    );
    let timing: Vec<&str> = r
        .late
        .iter()
        .map(|&l| if l { "late" } else { "on_time" })
        .collect();
    push("timing", Arc::new(StringArray::from(timing)), false);
    push(
        "trigger_position",
        Arc::new(Int64Array::from(r.trigger_position.clone())),
        false,
    );
    push(
        "trigger_time",
        Arc::new(Int64Array::from(r.trigger_time.clone())),
        true,
    );
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
}

/// Row indices as an int64 array.
pub(crate) fn indices(rows: &[usize]) -> ArrayRef {
    Arc::new(rows.iter().map(|&r| r as i64).collect::<Int64Array>())
}

/// Drop reasons as a string array.
pub(crate) fn reasons(out: &Output) -> ArrayRef {
    Arc::new(
        out.dropped_reason
            .iter()
            .map(|r| Some(r.as_str()))
            .collect::<StringArray>(),
    )
}

/// Late watermarks as an int64 array.
pub(crate) fn late_watermarks(out: &Output) -> ArrayRef {
    Arc::new(Int64Array::from(out.late_watermark.clone()))
}
