//! `floodmark._core._Multiplexer`: Flink's `WatermarkOutputMultiplexer`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::watermark::{ListenerEvent, Multiplexer, MultiplexerStep, Via};

use super::arrays::emissions_to_py;

type Emitted = Vec<(&'static str, Option<i64>)>;
/// `(output, type, value)` with value the watermark or the idle flag (0/1).
type Listener = Vec<(String, &'static str, i64)>;

fn step_to_py(s: MultiplexerStep) -> (Emitted, Listener) {
    let listener = s
        .listener
        .into_iter()
        .map(|l| match l {
            ListenerEvent::Watermark { output, ts } => (output, "watermark", ts),
            ListenerEvent::Idle { output, idle } => (output, "idle", i64::from(idle)),
        })
        .collect();
    (emissions_to_py(&s.emitted), listener)
}

fn via(deferred: bool) -> Via {
    if deferred {
        Via::Deferred
    } else {
        Via::Immediate
    }
}

/// Per-output watermarks combined into one underlying output.
#[pyclass(module = "floodmark._core", name = "_Multiplexer")]
pub struct PyMultiplexer {
    inner: Multiplexer,
}

#[pymethods]
impl PyMultiplexer {
    #[new]
    fn new() -> Self {
        Self {
            inner: Multiplexer::new(),
        }
    }

    fn register_output(&mut self, output_id: &str) -> PyResult<()> {
        Ok(self.inner.register(output_id)?)
    }

    fn unregister_output(&mut self, output_id: &str) -> bool {
        self.inner.unregister(output_id)
    }

    fn emit_watermark(
        &mut self,
        output_id: &str,
        watermark: i64,
        deferred: bool,
    ) -> PyResult<(Emitted, Listener)> {
        Ok(step_to_py(self.inner.emit_watermark(
            output_id,
            watermark,
            via(deferred),
        )?))
    }

    fn mark(
        &mut self,
        output_id: &str,
        idle: bool,
        deferred: bool,
    ) -> PyResult<(Emitted, Listener)> {
        Ok(step_to_py(self.inner.mark(
            output_id,
            idle,
            via(deferred),
        )?))
    }

    fn on_periodic_emit(&mut self) -> (Emitted, Listener) {
        step_to_py(self.inner.on_periodic_emit())
    }

    #[getter]
    fn combined_watermark(&self) -> i64 {
        self.inner.combined_watermark()
    }

    #[getter]
    fn output_ids(&self) -> Vec<String> {
        self.inner.output_ids().map(str::to_owned).collect()
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.snapshot())
    }

    fn restore(&mut self, data: &[u8]) -> PyResult<()> {
        self.inner = Multiplexer::restore(data)?;
        Ok(())
    }
}
