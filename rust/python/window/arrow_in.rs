//! Borrowing engine columns from Arrow arrays (no copies except validity masks and
//! string slices). Every error names the column.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::window::{KeyCol, ValueCol};

/// `true` = not null, or `None` when the array has no nulls.
pub(crate) fn validity(array: &dyn Array) -> Option<Vec<bool>> {
    array
        .nulls()
        .filter(|n| n.null_count() > 0)
        .map(|n| n.iter().collect())
}

/// The column `name` of `batch`.
pub(crate) fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::input(name, "missing column"))
}

/// An int64 column as a slice.
pub(crate) fn int64<'a>(array: &'a ArrayRef, name: &str) -> Result<&'a [i64]> {
    array
        .as_primitive_opt::<Int64Type>()
        .map(|a| a.values().as_ref())
        .ok_or_else(|| Error::input(name, format!("expected int64, got {}", array.data_type())))
}

/// A key column (int64, utf8 or large utf8); `mask` must outlive it.
pub(crate) fn key_col<'a>(
    array: &'a ArrayRef,
    name: &str,
    mask: Option<&'a [bool]>,
) -> Result<KeyCol<'a>> {
    match array.data_type() {
        DataType::Int64 => Ok(KeyCol::Int64(int64(array, name)?, mask)),
        DataType::Utf8 => Ok(KeyCol::Utf8(array.as_string::<i32>().iter().collect())),
        DataType::LargeUtf8 => Ok(KeyCol::Utf8(array.as_string::<i64>().iter().collect())),
        DataType::Utf8View => Ok(KeyCol::Utf8(array.as_string_view().iter().collect())),
        other => Err(Error::input(
            name,
            format!("key columns must be int64 or string, got {other}"),
        )),
    }
}

/// A value column (int64 or float64); `mask` must outlive it.
pub(crate) fn value_col<'a>(
    array: &'a ArrayRef,
    name: &str,
    mask: Option<&'a [bool]>,
) -> Result<ValueCol<'a>> {
    match array.data_type() {
        DataType::Int64 => Ok(ValueCol::Int64(int64(array, name)?, mask)),
        DataType::Float64 => Ok(ValueCol::Float64(
            array.as_primitive::<Float64Type>().values().as_ref(),
            mask,
        )),
        other => Err(Error::input(
            name,
            format!("value columns must be int64 or float64, got {other}"),
        )),
    }
}
