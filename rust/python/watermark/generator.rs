//! `floodmark._core._Generator`: a native watermark generator.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::Error;
use crate::watermark::{BaseGenerator, Channel, Emission, Generator};

use super::arrays::emissions_to_py;

/// A native watermark generator (bounded out-of-orderness, punctuated,
/// processing-time lag or none), optionally with idleness, together with the output
/// filter `drive` continues from (a [`Channel`]) and the last grid time `drive` ran
/// it to (a continued `drive` must start after it).
#[pyclass(module = "floodmark._core", name = "_Generator")]
pub struct PyGenerator {
    pub(crate) inner: Channel,
}

#[pymethods]
impl PyGenerator {
    /// `kind` is `bounded_out_of_orderness`, `punctuated`, `processing_time_lag` or
    /// `no_watermarks`; `param` is the bound or the lag in ticks.
    #[new]
    #[pyo3(signature = (kind, param=0, idle_timeout=None))]
    fn new(kind: &str, param: i64, idle_timeout: Option<i64>) -> PyResult<Self> {
        let base = match kind {
            "bounded_out_of_orderness" => BaseGenerator::bounded(param)?,
            "punctuated" => BaseGenerator::Punctuated,
            "processing_time_lag" => BaseGenerator::processing_time_lag(param)?,
            "no_watermarks" => BaseGenerator::NoWatermarks,
            other => {
                return Err(
                    Error::param("kind", format!("unknown generator kind {other:?}")).into(),
                )
            }
        };
        let g = Generator::new(base);
        let inner = match idle_timeout {
            Some(t) => g.with_idleness(t)?,
            None => g,
        };
        Ok(Self {
            inner: Channel::new(inner),
        })
    }

    #[pyo3(signature = (timestamp, marker=None))]
    fn on_event(
        &mut self,
        timestamp: i64,
        marker: Option<i64>,
    ) -> Vec<(&'static str, Option<i64>)> {
        let mut v: Vec<Emission> = Vec::new();
        self.inner
            .generator
            .on_event(timestamp, marker, &mut |e| v.push(e));
        emissions_to_py(&v)
    }

    fn on_periodic_emit(&mut self, now: i64) -> Vec<(&'static str, Option<i64>)> {
        let mut v: Vec<Emission> = Vec::new();
        self.inner
            .generator
            .on_periodic_emit(now, &mut |e| v.push(e));
        emissions_to_py(&v)
    }

    /// The last grid time `drive` ran the generator to (`None` before any).
    #[getter]
    fn get_last_grid(&self) -> Option<i64> {
        self.inner.last_grid
    }

    #[setter]
    fn set_last_grid(&mut self, value: Option<i64>) {
        self.inner.last_grid = value;
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.snapshot())
    }

    /// Restores a snapshot of a generator with the same configuration (kind, bound or
    /// lag, idleness timeout); refuses any other.
    fn restore(&mut self, data: &[u8]) -> PyResult<()> {
        let inner = Channel::restore(data)?;
        self.inner.generator.check_same_config(&inner.generator)?;
        self.inner = inner;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("_Generator({:?})", self.inner.generator)
    }
}
