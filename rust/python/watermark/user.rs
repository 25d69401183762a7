//! A user's Python watermark generator (Flink's `WatermarkGenerator`:
//! `on_event(timestamp, output)`, `on_periodic_emit(output)`) as a
//! [`WatermarkGenerator`], so that it runs through the engine's own driver and
//! idleness timer, and `_WatermarkOutput`, the output it writes to. An exception the
//! user's code raises stops the driver and reaches the caller unchanged, carrying
//! [`RAISED_BY`].

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt};

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};
use crate::watermark::{Emission, WatermarkGenerator};

/// The attribute set on an exception a user generator's method raised: that method,
/// as `module.Class.method` (the Spark layer sends such an exception back from its
/// task whole, as `floodmark._core.RAISED_BY` names it).
pub const RAISED_BY: &str = "_floodmark_raised_by";

/// What a user generator writes to (Flink's `WatermarkOutput`): it collects the
/// emissions of one call, which the driver then takes.
#[pyclass(module = "floodmark._core", name = "_WatermarkOutput")]
#[derive(Default)]
pub struct PyWatermarkOutput {
    emitted: Vec<Emission>,
}

#[pymethods]
impl PyWatermarkOutput {
    /// Emits a watermark of `ts` ticks (an int in the `i64` range).
    fn emit_watermark(&mut self, ts: &Bound<'_, PyAny>) -> PyResult<()> {
        self.emitted
            .push(Emission::Watermark(int64(ts, "emit_watermark")?));
        Ok(())
    }

    /// Marks the stream idle.
    fn mark_idle(&mut self) {
        self.emitted.push(Emission::Idle);
    }

    /// Marks the stream active.
    fn mark_active(&mut self) {
        self.emitted.push(Emission::Active);
    }
}

/// `value` as an `i64`: a Python int at once, anything else by the Python layer's one
/// rule (`floodmark.time.check_int64`: integers only, booleans and floats refused),
/// which raises `InvalidParameterError` naming `name`.
fn int64(value: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(v) = value.extract::<i64>() {
            return Ok(v);
        }
    }
    let check = value
        .py()
        .import("floodmark.time")?
        .getattr("check_int64")?;
    check.call1((value, name))?.extract()
}

/// A user's Python generator object and the output handed to its calls.
pub struct PyUserGenerator {
    user: Py<PyAny>,
    /// `module.qualname` of the user's class: part of the configuration.
    class: String,
    output: Py<PyWatermarkOutput>,
}

impl PyUserGenerator {
    /// Wraps `user` (what the strategy's factory returned).
    ///
    /// # Errors
    /// `InvalidParameterError` naming `factory` if `user` lacks a callable
    /// `on_event` or `on_periodic_emit`.
    pub fn new(user: &Bound<'_, PyAny>) -> PyResult<Self> {
        for method in ["on_event", "on_periodic_emit"] {
            if !user.getattr(method).is_ok_and(|m| m.is_callable()) {
                return Err(Error::param(
                    "factory",
                    format!("the generator it returned has no `{method}` method"),
                )
                .into());
            }
        }
        let py = user.py();
        let cls = user.get_type();
        let class = format!("{}.{}", cls.module()?, cls.qualname()?);
        Ok(Self {
            user: user.clone().unbind(),
            class,
            output: Py::new(py, PyWatermarkOutput::default())?,
        })
    }

    /// Calls the user's `method` with the timestamp (for `on_event`) and the output,
    /// and passes what it emitted to `out`.
    fn call(
        &self,
        method: &str,
        timestamp: Option<i64>,
        out: &mut impl FnMut(Emission),
    ) -> PyResult<()> {
        Python::attach(|py| {
            let output = self.output.bind(py);
            output.borrow_mut().emitted.clear();
            let user = self.user.bind(py);
            let called = match timestamp {
                Some(ts) => user.call_method1(method, (ts, output)),
                None => user.call_method1(method, (output,)),
            };
            if let Err(err) = called {
                // Says whose it is, for a Spark task to send it back whole; an
                // exception that takes no attributes goes on as it is.
                let by = format!("{}.{method}", self.class);
                let _ = err.value(py).setattr(RAISED_BY, by);
                return Err(err);
            }
            let emitted = std::mem::take(&mut output.borrow_mut().emitted);
            emitted.into_iter().for_each(out);
            Ok(())
        })
    }

    /// The user object pickled, for a snapshot.
    pub fn pickled(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        let pickle = py.import("pickle")?;
        let data = pickle.call_method1("dumps", (self.user.bind(py),))?;
        Ok(data.cast_into::<PyBytes>()?.as_bytes().to_vec())
    }

    /// Writes the pickle `pickled` (see [`Self::pickled`]) as the base generator's state.
    pub fn write(pickled: &[u8], w: &mut Writer) {
        w.bytes(pickled);
    }

    /// Reads a user generator written by [`Self::write`], unpickling it.
    ///
    /// # Errors
    /// [`Error::Snapshot`] if the bytes are not a pickle of a generator.
    pub fn read(py: Python<'_>, r: &mut Reader<'_>) -> Result<Self> {
        let pickled = r.bytes()?;
        let user = py
            .import("pickle")
            .and_then(|p| p.call_method1("loads", (PyBytes::new(py, pickled),)))
            .and_then(|u| Self::new(&u))
            // A pickle of another version can fail in nearly any way.
            .map_err(|e| Error::Snapshot(format!("the user generator cannot be unpickled: {e}")))?;
        Ok(user)
    }
}

impl WatermarkGenerator for PyUserGenerator {
    type Error = PyErr;

    fn on_event(
        &mut self,
        ts: i64,
        _marker: Option<i64>,
        out: &mut impl FnMut(Emission),
    ) -> PyResult<()> {
        self.call("on_event", Some(ts), out)
    }

    fn on_periodic_emit(&mut self, _now: i64, out: &mut impl FnMut(Emission)) -> PyResult<()> {
        self.call("on_periodic_emit", None, out)
    }

    fn config(&self) -> String {
        format!("python({})", self.class)
    }
}
