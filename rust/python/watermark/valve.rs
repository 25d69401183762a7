//! `floodmark._core._Valve`: Flink's `StatusWatermarkValve`.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, StringArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PyArray;

use crate::error::Error;
use crate::watermark::{Emission, Valve};

use super::arrays::{
    batch, emissions_to_py, i64_options, i64_values, parse_kind, strings, to_py_batch,
};

/// A watermark valve over `num_channels` input channels.
#[pyclass(module = "floodmark._core", name = "_Valve")]
pub struct PyValve {
    inner: Valve,
}

#[pymethods]
impl PyValve {
    #[new]
    fn new(num_channels: i64) -> PyResult<Self> {
        if num_channels < 0 {
            return Err(
                Error::param("num_channels", format!("must be >= 0, got {num_channels}")).into(),
            );
        }
        Ok(Self {
            inner: Valve::new(usize::try_from(num_channels).unwrap_or(usize::MAX))?,
        })
    }

    fn input_watermark(
        &mut self,
        channel: i64,
        watermark: i64,
    ) -> PyResult<Vec<(&'static str, Option<i64>)>> {
        let mut v = Vec::new();
        self.inner
            .input_watermark(channel, watermark, &mut |e| v.push(e))?;
        Ok(emissions_to_py(&v))
    }

    fn input_status(
        &mut self,
        channel: i64,
        idle: bool,
    ) -> PyResult<Vec<(&'static str, Option<i64>)>> {
        let mut v = Vec::new();
        self.inner.input_status(channel, idle, &mut |e| v.push(e))?;
        Ok(emissions_to_py(&v))
    }

    /// Batch input: row i is a watermark or a status for `channel[i]`; returns the
    /// emissions as `(step, kind, watermark)` columns.
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        channel: PyArray,
        kind: PyArray,
        watermark: PyArray,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ch = i64_values(channel.array(), "channel")?;
        let kinds = strings(kind.array(), "kind")?;
        let wms = i64_options(watermark.array(), "watermark")?;
        if kinds.len() != ch.len() || wms.len() != ch.len() {
            return Err(Error::input(
                "kind",
                "channel, kind and watermark must have the same length",
            )
            .into());
        }
        let inputs: Vec<Emission> = (0..ch.len())
            .map(|i| parse_kind(kinds.is_valid(i).then(|| kinds.value(i)), wms[i], "kind"))
            .collect::<Result<_, _>>()?;
        for &c in ch {
            self.inner.channel(c)?; // every channel checked first: on error nothing changes
        }
        let inner = &mut self.inner;
        let rows = py.detach(|| -> Result<Vec<(i64, Emission)>, Error> {
            let mut rows = Vec::new();
            for (i, (&c, &e)) in ch.iter().zip(&inputs).enumerate() {
                let mut push = |x| rows.push((i as i64, x));
                match e {
                    Emission::Watermark(w) => inner.input_watermark(c, w, &mut push)?,
                    Emission::Idle => inner.input_status(c, true, &mut push)?,
                    Emission::Active => inner.input_status(c, false, &mut push)?,
                }
            }
            Ok(rows)
        })?;
        let step: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        let kind: ArrayRef = Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.1.kind_name()),
        ));
        let wm: ArrayRef = Arc::new(rows.iter().map(|r| r.1.watermark()).collect::<Int64Array>());
        to_py_batch(
            py,
            batch(vec![("step", step), ("kind", kind), ("watermark", wm)])?,
        )
    }

    #[getter]
    fn num_channels(&self) -> usize {
        self.inner.num_channels()
    }

    #[getter]
    fn min_channel(&self) -> Option<usize> {
        self.inner.min_channel()
    }

    #[getter]
    fn watermark(&self) -> i64 {
        self.inner.watermark()
    }

    #[getter]
    fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.snapshot())
    }

    fn restore(&mut self, data: &[u8]) -> PyResult<()> {
        Ok(self.inner.restore_from(data)?)
    }
}
