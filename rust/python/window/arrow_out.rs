//! Building Arrow arrays from the operator's output.

use std::sync::Arc;

use arrow_array::{
    new_empty_array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, Field, Schema};
use pyo3::PyResult;

use crate::python::errors::arrow_internal;
use crate::window::{AggColumn, KeyValues, Output, WindowOperator};

/// Key column `i` of the results: the stored keys of each result, in the type of the
/// input's key column (`key_type`, when known; int64 or string otherwise).
fn key_column(
    op: &WindowOperator,
    out: &Output,
    i: usize,
    key_type: Option<&DataType>,
) -> ArrayRef {
    let keys = &out.results.key;
    let stored: ArrayRef = match (op.keys().values().map(|v| &v[i]), key_type) {
        (Some(KeyValues::Int64(v)), _) => {
            Arc::new(keys.iter().map(|&k| v[k as usize]).collect::<Int64Array>())
        }
        (Some(KeyValues::Utf8(v)), _) => Arc::new(
            keys.iter()
                .map(|&k| v[k as usize].as_deref())
                .collect::<StringArray>(),
        ),
        (None, Some(t)) => return new_empty_array(t),
        (None, None) => Arc::new(Int64Array::from(Vec::<i64>::new())),
    };
    match key_type {
        // The engine keeps int64 and string keys: the input's own type comes back. A key
        // that does not fit it (an int8 column after a snapshot of int64 keys) comes back
        // in the engine's type: the windows have fired and left the state, so an error
        // here would lose them, and a null would merge keys.
        Some(t) if t != stored.data_type() => {
            let strict = CastOptions {
                safe: false,
                ..CastOptions::default()
            };
            cast_with_options(&stored, t, &strict).unwrap_or(stored)
        }
        _ => stored,
    }
}

/// The results of `out` as a record batch: key columns (of the input's `key_types`),
/// `window_start`, `window_end`, aggregates (named `agg_names`), `watermark`, `timing`
/// (true: a late firing, within the allowed lateness), `trigger_position`,
/// `trigger_time`.
pub(crate) fn results_batch(
    op: &WindowOperator,
    out: &Output,
    key_types: &[DataType],
    agg_names: &[String],
) -> PyResult<RecordBatch> {
    let r = &out.results;
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (i, name) in op.config().key_names.iter().enumerate() {
        let col = key_column(op, out, i, key_types.get(i));
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
    for (col, name) in r.aggs.iter().zip(agg_names) {
        let arr: ArrayRef = match col {
            AggColumn::Int64(v) => Arc::new(Int64Array::from(v.clone())),
            AggColumn::Float64(v) => Arc::new(Float64Array::from(v.clone())),
        };
        push(name, arr, true);
    }
    push(
        "watermark",
        Arc::new(Int64Array::from(r.watermark.clone())),
        false,
    );
    push(
        "timing",
        Arc::new(BooleanArray::from(r.late.clone())),
        false,
    );
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
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| arrow_internal(&e))
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
