//! Arrow conversions shared by the watermark bindings.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyRecordBatch};

use crate::error::Error;
use crate::python::errors::arrow_internal;
use crate::watermark::{Emission, TimelineRow};

/// The values of a non-null `int64` array named `column`.
pub fn i64_values<'a>(array: &'a ArrayRef, column: &str) -> Result<&'a [i64], Error> {
    let a = array
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| Error::input(column, format!("must be int64, got {}", array.data_type())))?;
    if a.null_count() > 0 {
        return Err(Error::input(
            column,
            format!("holds {} null value(s); filter nulls first", a.null_count()),
        ));
    }
    Ok(a.values())
}

/// A nullable `int64` array named `column` as options.
pub fn i64_options(array: &ArrayRef, column: &str) -> Result<Vec<Option<i64>>, Error> {
    let a = array
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| Error::input(column, format!("must be int64, got {}", array.data_type())))?;
    Ok(a.iter().collect())
}

/// A `string` array named `column`.
pub fn strings<'a>(array: &'a ArrayRef, column: &str) -> Result<&'a StringArray, Error> {
    array
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::input(column, format!("must be string, got {}", array.data_type())))
}

/// An emission kind from its name.
pub fn parse_kind(s: Option<&str>, wm: Option<i64>, column: &str) -> Result<Emission, Error> {
    match (s, wm) {
        (Some("watermark"), Some(w)) => Ok(Emission::Watermark(w)),
        (Some("watermark"), None) => Err(Error::input(
            "watermark",
            "a `watermark` row needs a non-null watermark",
        )),
        (Some("idle"), _) => Ok(Emission::Idle),
        (Some("active"), _) => Ok(Emission::Active),
        (Some(other), _) => Err(Error::input(
            column,
            format!("must be 'watermark', 'idle' or 'active', got {other:?}"),
        )),
        (None, _) => Err(Error::input(
            column,
            "must be 'watermark', 'idle' or 'active', got a null",
        )),
    }
}

/// A column of a record batch by name.
pub fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, Error> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::input(name, "missing column"))
}

/// Builds a record batch of `(name, array)` columns.
pub fn batch(columns: Vec<(&str, ArrayRef)>) -> PyResult<RecordBatch> {
    // Only the watermark-like columns may hold nulls (statuses, no aligned channel).
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| {
            Field::new(
                *n,
                a.data_type().clone(),
                matches!(*n, "watermark" | "min_channel"),
            )
        })
        .collect();
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| arrow_internal(&e))
}

/// Exports a record batch as a `pyarrow.RecordBatch`.
pub fn to_py_batch(py: Python<'_>, b: RecordBatch) -> PyResult<Bound<'_, PyAny>> {
    PyRecordBatch::new(b).into_pyarrow(py)
}

/// Exports an array as a `pyarrow.Array`.
pub fn to_py_array(py: Python<'_>, a: ArrayRef) -> PyResult<Bound<'_, PyAny>> {
    let exported = PyArray::from_array_ref(a).into_pyobject(py)?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// `(kind, watermark)` tuples for Python.
pub fn emissions_to_py(e: &[Emission]) -> Vec<(&'static str, Option<i64>)> {
    e.iter().map(|x| (x.kind_name(), x.watermark())).collect()
}

/// The combined timeline as a batch: `time, watermark, status` (`active`/`idle`),
/// `min_channel` (index, null when no channel is aligned), `advance` (the watermark grew).
pub fn timeline_batch(rows: &[TimelineRow]) -> PyResult<RecordBatch> {
    let time: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time)));
    let watermark: ArrayRef = Arc::new(Int64Array::from_iter_values(
        rows.iter().map(|r| r.watermark),
    ));
    let status: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| {
        if r.idle {
            "idle"
        } else {
            "active"
        }
    })));
    let min_channel: ArrayRef = Arc::new(
        rows.iter()
            .map(|r| r.min_channel.map(|c| c as i64))
            .collect::<Int64Array>(),
    );
    let advance: ArrayRef = Arc::new(BooleanArray::from(
        rows.iter().map(|r| r.advance).collect::<Vec<_>>(),
    ));
    batch(vec![
        ("time", time),
        ("watermark", watermark),
        ("status", status),
        ("min_channel", min_channel),
        ("advance", advance),
    ])
}
