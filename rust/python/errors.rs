//! One mapping from the engine's [`Error`] to Python exceptions. The exception classes
//! are declared once, in `floodmark/exceptions.py` (so they can also derive from
//! `ValueError` / `IndexError`), and looked up here only when an error is raised.
//!
//! The errors about a parameter or a column are built from their parts, `(name,
//! message)`: the Python constructor formats the text exactly as [`Error`]'s
//! `Display` does and sets `.parameter` / `.column`. Arrow errors are mapped by whose
//! fault they are (as delta-rs does): one about the user's column becomes
//! `InvalidInputError` naming it ([`arrow_input`]); one building floodmark's own
//! output is a bug, `InternalError` ([`arrow_internal`]).

use arrow_schema::ArrowError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::error::Error;

/// An instance of `floodmark.exceptions.<class>` built from `args`; a
/// `RuntimeError` with `text` if the class cannot be found or built.
fn raise<'py, A>(py: Python<'py>, class: &str, args: A, text: &str) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let build = || -> PyResult<PyErr> {
        let cls = py.import("floodmark.exceptions")?.getattr(class)?;
        Ok(PyErr::from_value(cls.call1(args)?))
    };
    build().unwrap_or_else(|e| PyRuntimeError::new_err(format!("{text} (and: {e})")))
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        Python::attach(|py| {
            let text = err.to_string();
            match err {
                Error::InvalidParameter { name, message } => {
                    raise(py, "InvalidParameterError", (name, message), &text)
                }
                Error::InvalidInput { column, message } => {
                    raise(py, "InvalidInputError", (column, message), &text)
                }
                Error::ChannelOutOfRange { .. } => {
                    raise(py, "ChannelOutOfRangeError", (text.clone(),), &text)
                }
                Error::IllegalState(_) => raise(py, "IllegalStateError", (text.clone(),), &text),
                Error::Snapshot(_) => raise(py, "SnapshotError", (text.clone(),), &text),
            }
        })
    }
}

/// An Arrow error while building floodmark's own output (a batch that does not match
/// the schema the engine gave it): a bug in floodmark, not in the input, so
/// `InternalError`.
pub(crate) fn arrow_internal(err: &ArrowError) -> PyErr {
    let text = format!("floodmark built an invalid Arrow output (a bug, please report it): {err}");
    Python::attach(|py| raise(py, "InternalError", (text.clone(),), &text))
}
