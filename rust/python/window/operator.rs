//! `floodmark._core.WindowOperator`: Arrow batches in, Arrow batches out, the GIL
//! released around the engine loop. The Python wrapper (`floodmark.windows`) does
//! the schema checks, casts and `take`s.

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyDataType, PyRecordBatch};

use super::arrow_in::{column, int64, key_col, validity, value_col};
use super::arrow_out::{indices, late_watermarks, reasons, results_batch};
use super::assign::build;
use crate::error::Error;
use crate::window::{Advance, AggFn, AggSpec, Batch, OperatorConfig, Output, WindowOperator};

/// The native keyed event-time window operator.
#[pyclass(module = "floodmark._core", name = "WindowOperator")]
pub struct PyWindowOperator {
    op: WindowOperator,
    event_time: String,
    arrival: Option<String>,
    agg_names: Vec<String>,
}

type PyOutput<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

impl PyWindowOperator {
    /// The output for Python; the results' key columns of the types `key_types`.
    fn to_python<'py>(
        &self,
        py: Python<'py>,
        out: &Output,
        key_types: Vec<PyDataType>,
    ) -> PyResult<PyOutput<'py>> {
        let key_types: Vec<DataType> = key_types.into_iter().map(PyDataType::into_inner).collect();
        let results = results_batch(&self.op, out, &key_types, &self.agg_names)?;
        let pa_array = py.import("pyarrow")?.getattr("array")?;
        let arr = |a| -> PyResult<Bound<'py, PyAny>> {
            pa_array.call1((PyArray::from_array_ref(a).into_pyobject(py)?,))
        };
        Ok((
            PyRecordBatch::new(results).into_pyarrow(py)?,
            arr(indices(&out.late_rows))?,
            arr(late_watermarks(out))?,
            arr(indices(&out.dropped_rows))?,
            arr(reasons(out))?,
        ))
    }
}

#[pymethods]
impl PyWindowOperator {
    /// Creates the operator. `aggs` are `(function, value column index or None)`.
    #[new]
    #[pyo3(signature = (kind, size, slide, offset, gap, allowed_lateness, key_names, event_time, value_names, aggs, agg_names, arrival=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &str,
        size: i64,
        slide: i64,
        offset: i64,
        gap: i64,
        allowed_lateness: i64,
        key_names: Vec<String>,
        event_time: String,
        value_names: Vec<String>,
        aggs: Vec<(String, Option<usize>)>,
        agg_names: Vec<String>,
        arrival: Option<String>,
    ) -> PyResult<Self> {
        let assigner = build(kind, size, slide, offset, gap)?;
        let specs = aggs
            .iter()
            .map(|(f, c)| {
                Ok(AggSpec {
                    func: AggFn::parse(f)?,
                    column: *c,
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        let cfg = OperatorConfig {
            assigner,
            allowed_lateness,
            key_names,
            value_names,
            aggs: specs,
        };
        Ok(Self {
            op: WindowOperator::new(cfg)?,
            event_time,
            arrival,
            agg_names,
        })
    }

    /// Processes a batch with positioned watermark advances; returns
    /// `(results, late_rows, late_watermark, dropped_rows, dropped_reason)`.
    /// `key_types` are the types of the caller's key columns (the batch holds them as
    /// int64 or string): the results' key columns have them (empty: int64 or string).
    #[pyo3(signature = (batch, positions, watermarks, times, key_types))]
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        batch: PyRecordBatch,
        positions: Vec<i64>,
        watermarks: Vec<i64>,
        times: Vec<Option<i64>>,
        key_types: Vec<PyDataType>,
    ) -> PyResult<PyOutput<'py>> {
        if positions.len() != watermarks.len() || times.len() != positions.len() {
            return Err(Error::input(
                "watermarks",
                "position, watermark and time must have equal lengths",
            )
            .into());
        }
        let mut advances = Vec::with_capacity(positions.len());
        for ((&p, &w), &t) in positions.iter().zip(&watermarks).zip(&times) {
            let position = usize::try_from(p)
                .map_err(|_| Error::input("position", format!("negative position {p}")))?;
            advances.push(Advance {
                position,
                watermark: w,
                time: t,
            });
        }
        let rb: RecordBatch = batch.into_inner();
        let cfg = self.op.config().clone();
        let key_arrays = cfg
            .key_names
            .iter()
            .map(|n| column(&rb, n))
            .collect::<crate::Result<Vec<_>>>()?;
        let value_arrays = cfg
            .value_names
            .iter()
            .map(|n| column(&rb, n))
            .collect::<crate::Result<Vec<_>>>()?;
        let ts_array = column(&rb, &self.event_time)?;
        let arrival_array = self
            .arrival
            .as_deref()
            .map(|n| column(&rb, n))
            .transpose()?;
        let key_masks: Vec<_> = key_arrays.iter().map(|a| validity(a.as_ref())).collect();
        let value_masks: Vec<_> = value_arrays.iter().map(|a| validity(a.as_ref())).collect();
        let ts_mask = validity(ts_array.as_ref());
        let arrival_mask = arrival_array
            .map(|a| validity(a.as_ref()))
            .unwrap_or_default();
        let keys = key_arrays
            .iter()
            .zip(&cfg.key_names)
            .zip(&key_masks)
            .map(|((a, n), m)| key_col(a, n, m.as_deref()))
            .collect::<crate::Result<Vec<_>>>()?;
        let values = value_arrays
            .iter()
            .zip(&cfg.value_names)
            .zip(&value_masks)
            .map(|((a, n), m)| value_col(a, n, m.as_deref()))
            .collect::<crate::Result<Vec<_>>>()?;
        let event_time = int64(ts_array, &self.event_time)?;
        let arrival = match (arrival_array, &self.arrival) {
            (Some(a), Some(n)) => Some(int64(a, n)?),
            _ => None,
        };
        let input = Batch {
            keys,
            event_time,
            event_time_valid: ts_mask.as_deref(),
            values,
            arrival,
            arrival_valid: arrival_mask.as_deref(),
        };
        let op = &mut self.op;
        let out = py.detach(|| op.process(&input, &advances))?;
        self.to_python(py, &out, key_types)
    }

    /// A watermark advance after everything processed so far (`key_types` as in
    /// `process`).
    #[pyo3(signature = (watermark, time, key_types))]
    fn advance<'py>(
        &mut self,
        py: Python<'py>,
        watermark: i64,
        time: Option<i64>,
        key_types: Vec<PyDataType>,
    ) -> PyResult<PyOutput<'py>> {
        let op = &mut self.op;
        let out = py.detach(|| op.advance(watermark, time));
        self.to_python(py, &out, key_types)
    }

    /// End of input: fires everything left with watermark `MAX` (`key_types` as in
    /// `process`).
    #[pyo3(signature = (time, key_types))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        time: Option<i64>,
        key_types: Vec<PyDataType>,
    ) -> PyResult<PyOutput<'py>> {
        let op = &mut self.op;
        let out = py.detach(|| op.finish(time));
        self.to_python(py, &out, key_types)
    }

    /// The whole state as bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.op.snapshot())
    }

    /// Restores a snapshot taken from an operator with the same configuration.
    fn restore(&mut self, data: &[u8]) -> PyResult<()> {
        Ok(self.op.restore(data)?)
    }

    /// The current watermark.
    #[getter]
    fn watermark(&self) -> i64 {
        self.op.watermark()
    }

    /// Records processed so far.
    #[getter]
    fn position(&self) -> u64 {
        self.op.position()
    }

    /// Number of live windows.
    #[getter]
    fn live_windows(&self) -> usize {
        self.op.live_windows()
    }
}
