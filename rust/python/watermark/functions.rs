//! `floodmark._core.drive`, `combine` and `element_late` over Arrow data, and the
//! small functions the Python layer reads its rules from.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray};
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyRecordBatch};

use crate::error::Error;
use crate::watermark::{self, ChannelRow, DriveParams};
use crate::window;

use super::arrays::{
    batch, column, i64_options, i64_values, parse_kind, strings, timeline_batch, to_py_array,
    to_py_batch,
};
use super::generator::PyGenerator;

/// Drives `generator` over one channel's records; its generator and output state
/// carry over to the next call. Returns `(record_watermark, emissions)` as a pyarrow array and batch.
#[pyfunction]
#[pyo3(signature = (generator, event_time, arrival, emit_interval, start, until, marker=None))]
#[allow(clippy::too_many_arguments)]
pub fn drive<'py>(
    py: Python<'py>,
    generator: &mut PyGenerator,
    event_time: PyArray,
    arrival: PyArray,
    emit_interval: i64,
    start: i64,
    until: i64,
    marker: Option<PyArray>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let ts = i64_values(event_time.array(), "event_time")?;
    let arr = i64_values(arrival.array(), "arrival")?;
    let markers = marker
        .as_ref()
        .map(|m| i64_options(m.array(), "marker"))
        .transpose()?;
    let params = DriveParams {
        interval: emit_interval,
        start,
        until,
    };
    let out = generator.drive(py, ts, arr, markers.as_deref(), &params)?;
    let rec: ArrayRef = Arc::new(Int64Array::from(out.record_watermark));
    let rows = &out.emissions;
    let time: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time)));
    let kind: ArrayRef = Arc::new(StringArray::from_iter_values(
        rows.iter().map(|r| r.emission.kind_name()),
    ));
    let wm: ArrayRef = Arc::new(
        rows.iter()
            .map(|r| r.emission.watermark())
            .collect::<Int64Array>(),
    );
    let b = batch(vec![("time", time), ("kind", kind), ("watermark", wm)])?;
    Ok((to_py_array(py, rec)?, to_py_batch(py, b)?))
}

/// Runs the per-channel output streams (`channel, time, kind, watermark` columns)
/// through a valve; returns the `time, watermark, status, min_channel, advance` timeline.
#[pyfunction]
pub fn combine(
    py: Python<'_>,
    emissions: PyRecordBatch,
    num_channels: i64,
) -> PyResult<Bound<'_, PyAny>> {
    if num_channels < 0 {
        return Err(
            Error::param("num_channels", format!("must be >= 0, got {num_channels}")).into(),
        );
    }
    let b = emissions.into_inner();
    let ch = i64_values(column(&b, "channel")?, "channel")?;
    let time = i64_values(column(&b, "time")?, "time")?;
    let kinds = strings(column(&b, "kind")?, "kind")?;
    let wms = i64_options(column(&b, "watermark")?, "watermark")?;
    let rows: Vec<ChannelRow> = (0..ch.len())
        .map(|i| {
            let k = kinds.is_valid(i).then(|| kinds.value(i));
            Ok(ChannelRow {
                channel: ch[i],
                time: time[i],
                emission: parse_kind(k, wms[i], "kind")?,
            })
        })
        .collect::<Result<_, Error>>()?;
    let timeline = py.detach(|| watermark::combine(&rows, num_channels as usize))?;
    to_py_batch(py, timeline_batch(&timeline)?)
}

/// Java's `String.hashCode()` of `s` (over its UTF-16 code units, wrapping `int`).
#[pyfunction]
pub fn java_string_hash(s: &str) -> i32 {
    crate::watermark::java_string_hash(s)
}

/// The first and the last grid bucket an emission interval of `interval` ticks can
/// place (`TimelineBuilder`'s one rule: arrivals beyond cannot be placed).
#[pyfunction]
pub fn placeable_buckets(interval: i64) -> PyResult<(i64, i64)> {
    if interval <= 0 {
        return Err(Error::param(
            "emit_interval",
            format!("must be > 0 ticks, got {interval}"),
        )
        .into());
    }
    Ok(watermark::placeable_buckets(interval))
}

/// The source subtask of each Kafka partition of `topic` among `num_readers`, as
/// Flink's `KafkaSourceEnumerator.getSplitOwner` assigns it (start index 0 without a
/// topic).
#[pyfunction]
#[pyo3(signature = (topic, partitions, num_readers))]
pub fn kafka_split_owners(
    topic: Option<&str>,
    partitions: Vec<i64>,
    num_readers: i64,
) -> PyResult<Vec<usize>> {
    let n = usize::try_from(num_readers).map_err(|_| {
        Error::param(
            "source_parallelism",
            format!("must be >= 1, got {num_readers}"),
        )
    })?;
    Ok(partitions
        .iter()
        .map(|&p| crate::watermark::kafka_split_owner(topic, p, n))
        .collect::<Result<Vec<_>, Error>>()?)
}

/// The late test of each record: Flink's element-late rule
/// (`crate::window::is_element_late`, `event_time + allowed_lateness <= watermark`
/// wrapping like a Java `long`), or with `allowed_lateness=None` `assign_watermarks`'
/// `is_late` (`crate::window::behind_watermark`: no lateness, and only once a
/// watermark exists). Returns a pyarrow `bool` array.
#[pyfunction]
#[pyo3(signature = (event_time, watermark, allowed_lateness=None))]
pub fn element_late(
    py: Python<'_>,
    event_time: PyArray,
    watermark: PyArray,
    allowed_lateness: Option<i64>,
) -> PyResult<Bound<'_, PyAny>> {
    let ts = i64_values(event_time.array(), "event_time")?;
    let wm = i64_values(watermark.array(), "watermark")?;
    if ts.len() != wm.len() {
        return Err(Error::param(
            "watermark",
            format!("has {} values for {} event times", wm.len(), ts.len()),
        )
        .into());
    }
    let late: BooleanArray = match allowed_lateness {
        Some(l) if l < 0 => {
            return Err(Error::param("allowed_lateness", format!("must be >= 0, got {l}")).into())
        }
        Some(l) => ts
            .iter()
            .zip(wm)
            .map(|(&t, &w)| Some(window::is_element_late(t, l, w)))
            .collect(),
        None => ts
            .iter()
            .zip(wm)
            .map(|(&t, &w)| Some(window::behind_watermark(t, w)))
            .collect(),
    };
    to_py_array(py, Arc::new(late))
}
