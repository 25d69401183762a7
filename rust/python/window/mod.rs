//! Bindings of the event-time windows: assigner helpers ([`assign`]) and the window
//! operator ([`operator`]), with Arrow conversions in [`arrow_in`] / [`arrow_out`].

use pyo3::prelude::*;

mod arrow_in;
mod arrow_out;
mod assign;
mod operator;

/// Adds the window functions and classes to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    assign::register(m)?;
    m.add_class::<operator::PyWindowOperator>()?;
    Ok(())
}
