//! `floodmark._core._Generator`: a watermark generator, built-in or a user's Python
//! one, with the output filter `drive` continues from.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::Error;
use crate::snapshot::{Reader, Writer};
use crate::watermark::{
    check_grid_span, kinds, BaseGenerator, Channel, DriveOutput, DriveParams, Emission, Generator,
    WatermarkGenerator,
};

use super::arrays::emissions_to_py;
use super::user::PyUserGenerator;

/// The channel a `_Generator` runs: the built-in generator, or a user's Python one
/// (through the same driver and idleness timer).
pub enum Source {
    /// A built-in generator.
    Native(Channel),
    /// A user's Python generator.
    User(Channel<PyUserGenerator>),
}

/// A watermark generator (bounded out-of-orderness, punctuated, processing-time lag,
/// none, or a user's Python generator), optionally with idleness, together with the
/// output filter `drive` continues from (a [`Channel`]) and the last grid time `drive`
/// ran it to (a continued `drive` must start after it).
#[pyclass(module = "floodmark._core", name = "_Generator")]
pub struct PyGenerator {
    pub(crate) inner: Source,
}

impl PyGenerator {
    /// Drives the channel over one batch of records: the built-in generator with the
    /// GIL released, a user's generator with it held (it calls into Python).
    pub(crate) fn drive(
        &mut self,
        py: Python<'_>,
        event_ts: &[i64],
        arrival: &[i64],
        marker: Option<&[Option<i64>]>,
        params: &DriveParams,
    ) -> PyResult<DriveOutput> {
        match &mut self.inner {
            Source::Native(channel) => {
                Ok(py.detach(|| channel.drive(event_ts, arrival, marker, params))?)
            }
            Source::User(channel) => channel.drive(event_ts, arrival, marker, params),
        }
    }
}

#[pymethods]
impl PyGenerator {
    /// `kind` is `bounded_out_of_orderness`, `punctuated`, `processing_time_lag`,
    /// `no_watermarks` or `python` (with `user`, the user's generator object); `param`
    /// is the bound or the lag in ticks.
    #[new]
    #[pyo3(signature = (kind, param=0, idle_timeout=None, user=None))]
    fn new(
        kind: &str,
        param: i64,
        idle_timeout: Option<i64>,
        user: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        fn idle<B>(g: Generator<B>, timeout: Option<i64>) -> crate::Result<Generator<B>> {
            match timeout {
                Some(t) => g.with_idleness(t),
                None => Ok(g),
            }
        }
        let base = match (kind, user) {
            ("python", Some(user)) => {
                let g = Generator::new(PyUserGenerator::new(user)?);
                let channel = Channel::new(idle(g, idle_timeout)?);
                return Ok(Self {
                    inner: Source::User(channel),
                });
            }
            ("python", None) => {
                return Err(
                    Error::param("user", "a `python` generator needs its user object").into(),
                )
            }
            ("bounded_out_of_orderness", _) => BaseGenerator::bounded(param)?,
            ("punctuated", _) => BaseGenerator::Punctuated,
            ("processing_time_lag", _) => BaseGenerator::processing_time_lag(param)?,
            ("no_watermarks", _) => BaseGenerator::NoWatermarks,
            (other, _) => {
                return Err(
                    Error::param("kind", format!("unknown generator kind {other:?}")).into(),
                )
            }
        };
        let channel = Channel::new(idle(Generator::new(base), idle_timeout)?);
        Ok(Self {
            inner: Source::Native(channel),
        })
    }

    #[pyo3(signature = (timestamp, marker=None))]
    fn on_event(
        &mut self,
        timestamp: i64,
        marker: Option<i64>,
    ) -> PyResult<Vec<(&'static str, Option<i64>)>> {
        let mut v: Vec<Emission> = Vec::new();
        let mut push = |e| v.push(e);
        match &mut self.inner {
            Source::Native(ch) => ch.generator.on_event(timestamp, marker, &mut push),
            Source::User(ch) => ch.generator.on_event(timestamp, marker, &mut push)?,
        }
        Ok(emissions_to_py(&v))
    }

    fn on_periodic_emit(&mut self, now: i64) -> PyResult<Vec<(&'static str, Option<i64>)>> {
        let mut v: Vec<Emission> = Vec::new();
        let mut push = |e| v.push(e);
        match &mut self.inner {
            Source::Native(ch) => ch.generator.on_periodic_emit(now, &mut push),
            Source::User(ch) => ch.generator.on_periodic_emit(now, &mut push)?,
        }
        Ok(emissions_to_py(&v))
    }

    /// Refuses, as `drive` would, grid indexes `first..=last` that a generator called
    /// at every grid time cannot run (a caller driving chunk by chunk checks the
    /// whole span once).
    fn check_grid_span(&self, first: i64, last: i64) -> PyResult<()> {
        match &self.inner {
            Source::Native(ch) => check_grid_span(&ch.generator, first, last)?,
            Source::User(ch) => check_grid_span(&ch.generator, first, last)?,
        }
        Ok(())
    }

    /// The last grid time `drive` ran the generator to (`None` before any).
    #[getter]
    fn get_last_grid(&self) -> Option<i64> {
        match &self.inner {
            Source::Native(ch) => ch.last_grid,
            Source::User(ch) => ch.last_grid,
        }
    }

    #[setter]
    fn set_last_grid(&mut self, value: Option<i64>) {
        match &mut self.inner {
            Source::Native(ch) => ch.last_grid = value,
            Source::User(ch) => ch.last_grid = value,
        }
    }

    /// The state as snapshot bytes; a user generator's as a pickle of the user's
    /// object inside the engine's own snapshot of the channel around it.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = match &self.inner {
            Source::Native(ch) => ch.snapshot(),
            Source::User(ch) => {
                let pickled = ch.generator.base().pickled(py)?;
                let mut w = Writer::new(kinds::USER_CHANNEL);
                ch.write_with(&mut w, |_, w| PyUserGenerator::write(&pickled, w));
                w.finish()
            }
        };
        Ok(PyBytes::new(py, &bytes))
    }

    /// Restores a snapshot of a generator with the same configuration (kind, bound or
    /// lag, idleness timeout; a user generator's class); refuses any other.
    fn restore(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        match &mut self.inner {
            Source::Native(ch) => {
                let restored = Channel::restore(data)?;
                ch.generator.check_same_config(&restored.generator)?;
                *ch = restored;
            }
            Source::User(ch) => {
                let mut r = Reader::new(data, kinds::USER_CHANNEL)?;
                let restored = Channel::read_with(&mut r, |r| PyUserGenerator::read(py, r))?;
                r.finish()?;
                ch.generator.check_same_config(&restored.generator)?;
                *ch = restored;
            }
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        let config = match &self.inner {
            Source::Native(ch) => ch.generator.config(),
            Source::User(ch) => ch.generator.config(),
        };
        format!("_Generator({config})")
    }
}
