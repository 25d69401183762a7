//! `floodmark._core._TimelineBuilder`: the incremental timeline builder over Arrow
//! arrays. Conversions only; the engine is `crate::watermark::builder`.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, StringArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyRecordBatch};

use crate::error::Error;
use crate::watermark::{BucketRow, ChannelEmission, InForce, TimelineBuilder};

use super::arrays::{
    batch, column, i64_options, i64_values, parse_kind, strings, timeline_batch, to_py_array,
    to_py_batch,
};
use super::generator::{PyGenerator, Source};

/// The combined timeline of many channels, built incrementally.
#[pyclass(module = "floodmark._core", name = "_TimelineBuilder")]
pub struct PyTimelineBuilder {
    inner: TimelineBuilder,
}

fn channel_index(c: i64, column: &str) -> Result<usize, Error> {
    usize::try_from(c).map_err(|_| Error::input(column, format!("channel {c} is negative")))
}

#[pymethods]
impl PyTimelineBuilder {
    /// `generator` (a fresh one, as a template) runs on every channel; None merges
    /// output streams pushed with `push_emissions` instead.
    /// `subtasks` (each channel's subtask) and `num_subtasks` read several channels
    /// per source subtask; `ends` (each channel's last bucket) ends them separately.
    #[new]
    #[pyo3(signature = (generator, num_channels, emit_interval, keep_emissions=false, subtasks=None, num_subtasks=0, ends=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        generator: Option<PyRef<'_, PyGenerator>>,
        num_channels: i64,
        emit_interval: i64,
        keep_emissions: bool,
        subtasks: Option<Vec<usize>>,
        num_subtasks: usize,
        ends: Option<Vec<i64>>,
    ) -> PyResult<Self> {
        let n = usize::try_from(num_channels).map_err(|_| {
            Error::param("num_channels", format!("must be >= 0, got {num_channels}"))
        })?;
        let mut inner = match generator {
            Some(g) => match &g.inner {
                Source::Native(channel) => {
                    TimelineBuilder::new(channel.generator.clone(), n, emit_interval)?
                }
                Source::User(_) => {
                    return Err(Error::param(
                        "strategy",
                        "a user Python generator emits on records: drive it per channel \
                         (floodmark.drive) and merge the streams with \
                         TimelineBuilder.for_emissions",
                    )
                    .into())
                }
            },
            None => TimelineBuilder::for_emissions(n)?,
        };
        if let Some(owner) = subtasks {
            inner = inner.with_subtasks(owner, num_subtasks)?;
        }
        if let Some(ends) = ends {
            inner = inner.with_channel_ends(ends)?;
        }
        inner.keep_emissions(keep_emissions);
        Ok(Self { inner })
    }

    /// Feeds rows (channel index, an arrival time, largest event time), in arrival
    /// order: a record, or records of one channel in one bucket of the emission grid
    /// (`ceil(arrival / emit_interval)`, computed here); returns the channel and
    /// combined watermarks in force for each.
    fn push<'py>(
        &mut self,
        py: Python<'py>,
        channel: PyArray,
        arrival: PyArray,
        max_ts: PyArray,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let ch = i64_values(channel.array(), "channel")?;
        let arr = i64_values(arrival.array(), "arrival")?;
        let ts = i64_values(max_ts.array(), "max_ts")?;
        for (name, len) in [("arrival", arr.len()), ("max_ts", ts.len())] {
            if len != ch.len() {
                return Err(Error::input(
                    name,
                    format!("has {len} values but channel has {}", ch.len()),
                )
                .into());
            }
        }
        let builder = &mut self.inner;
        let in_force = py.detach(|| -> Result<Vec<InForce>, Error> {
            let rows = (0..ch.len())
                .map(|i| {
                    Ok(BucketRow {
                        channel: channel_index(ch[i], "channel")?,
                        bucket: builder.bucket_of(arr[i]),
                        max_ts: ts[i],
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let mut out = Vec::with_capacity(rows.len());
            builder.push(&rows, &mut out)?;
            Ok(out)
        })?;
        let cw: ArrayRef = Arc::new(Int64Array::from_iter_values(
            in_force.iter().map(|f| f.channel),
        ));
        let w: ArrayRef = Arc::new(Int64Array::from_iter_values(
            in_force.iter().map(|f| f.combined),
        ));
        Ok((to_py_array(py, cw)?, to_py_array(py, w)?))
    }

    /// Feeds output streams (`channel`, `time`, `kind`, `watermark` columns) in time order.
    fn push_emissions(&mut self, py: Python<'_>, emissions: PyRecordBatch) -> PyResult<()> {
        let b = emissions.into_inner();
        let ch = i64_values(column(&b, "channel")?, "channel")?;
        let time = i64_values(column(&b, "time")?, "time")?;
        let kinds = strings(column(&b, "kind")?, "kind")?;
        let wms = i64_options(column(&b, "watermark")?, "watermark")?;
        let rows = (0..ch.len())
            .map(|i| {
                let k = kinds.is_valid(i).then(|| kinds.value(i));
                Ok(ChannelEmission {
                    channel: channel_index(ch[i], "channel")?,
                    time: time[i],
                    emission: parse_kind(k, wms[i], "kind")?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let builder = &mut self.inner;
        py.detach(|| builder.push_emissions(&rows))?;
        Ok(())
    }

    /// Starts the grid at `bucket` before any row.
    fn start_at(&mut self, bucket: i64) -> PyResult<()> {
        self.inner.start_at(bucket)?;
        Ok(())
    }

    /// Runs the grid up to `bucket` (every bucket up to it is complete).
    fn advance_to(&mut self, py: Python<'_>, bucket: i64) -> PyResult<()> {
        let builder = &mut self.inner;
        py.detach(|| builder.advance_to(bucket))?;
        Ok(())
    }

    /// Runs the grid up to the last bucket seen (end of input).
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        let builder = &mut self.inner;
        py.detach(|| builder.finish())?;
        Ok(())
    }

    /// The timeline rows since the last call: `time, watermark, status, min_channel,
    /// advance`.
    fn take_timeline<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_batch(py, timeline_batch(&self.inner.take_timeline())?)
    }

    /// The channels' own output rows since the last call: `channel, time, kind,
    /// watermark` (kept only when asked for).
    fn take_emissions<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.inner.take_emissions();
        let c: ArrayRef = Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.channel as i64),
        ));
        let t: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time)));
        let k: ArrayRef = Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.emission.kind_name()),
        ));
        let w: ArrayRef = Arc::new(
            rows.iter()
                .map(|r| r.emission.watermark())
                .collect::<Int64Array>(),
        );
        to_py_batch(
            py,
            batch(vec![
                ("channel", c),
                ("time", t),
                ("kind", k),
                ("watermark", w),
            ])?,
        )
    }

    /// The grid bucket of an arrival time: `ceil(arrival / emit_interval)`.
    fn bucket_of(&self, arrival: i64) -> i64 {
        self.inner.bucket_of(arrival)
    }

    /// Adds channels at the indexes `at` (among the channels after the insertion,
    /// ascending; later channels move up).
    fn insert_channels(&mut self, at: Vec<i64>) -> PyResult<()> {
        let at = at
            .into_iter()
            .map(|a| {
                usize::try_from(a).map_err(|_| Error::param("at", format!("must be >= 0, got {a}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.inner.insert_channels(&at)?;
        Ok(())
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.snapshot())
    }

    /// Restores a snapshot in place; refuses one of another configuration (strategy,
    /// emission interval, or a builder of emissions for one of generators).
    fn restore(&mut self, data: &[u8]) -> PyResult<()> {
        let restored = TimelineBuilder::restore(data)?;
        if !restored.same_config(&self.inner) {
            return Err(Error::Snapshot(
                "the snapshot is of a timeline builder with another strategy or emission \
                 interval"
                    .into(),
            )
            .into());
        }
        self.inner = restored;
        Ok(())
    }

    /// Channel `c`'s watermark so far (`MIN`: none) and whether it is idle.
    fn channel_status(&self, c: i64) -> PyResult<(i64, bool)> {
        let found = usize::try_from(c)
            .ok()
            .and_then(|i| self.inner.channel_status(i));
        found.ok_or_else(|| {
            Error::param(
                "channel",
                format!("{c} is not in 0..{}", self.inner.num_channels()),
            )
            .into()
        })
    }

    /// The channel holding the combined watermark back, if any.
    #[getter]
    fn min_channel(&self) -> Option<usize> {
        self.inner.min_channel()
    }

    #[getter]
    fn num_channels(&self) -> usize {
        self.inner.num_channels()
    }

    #[getter]
    fn watermark(&self) -> i64 {
        self.inner.watermark()
    }

    #[getter]
    fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }

    /// The last grid index run, or None before the grid starts.
    #[getter]
    fn ran_through(&self) -> Option<i64> {
        self.inner.ran_through()
    }

    /// The largest bucket (or time) pushed so far.
    #[getter]
    fn last(&self) -> Option<i64> {
        self.inner.last()
    }
}
