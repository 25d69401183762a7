//! One mapping from the engine's [`Error`] to Python exceptions. The exception classes
//! are declared once, in `floodmark/exceptions.py` (so they can also derive from
//! `ValueError` / `IndexError`), and looked up here only when an error is raised.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::Error;

fn raise(py: Python<'_>, class: &str, message: String, attr: Option<(&str, String)>) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = py.import("floodmark.exceptions")?;
        let cls = module.getattr(class)?;
        let exc = cls.call1(PyTuple::new(py, [message.clone()])?)?;
        if let Some((name, value)) = &attr {
            exc.setattr(*name, value)?;
        }
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| PyRuntimeError::new_err(format!("{message} (and: {e})")))
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        Python::attach(|py| {
            let message = err.to_string();
            match err {
                Error::InvalidParameter { name, .. } => raise(
                    py,
                    "InvalidParameterError",
                    message,
                    Some(("parameter", name.to_string())),
                ),
                Error::ChannelOutOfRange { .. } => {
                    raise(py, "ChannelOutOfRangeError", message, None)
                }
                Error::IllegalState(_) => raise(py, "IllegalStateError", message, None),
                Error::InvalidInput { column, .. } => {
                    raise(py, "InvalidInputError", message, Some(("column", column)))
                }
                Error::Snapshot(_) => raise(py, "SnapshotError", message, None),
            }
        })
    }
}
