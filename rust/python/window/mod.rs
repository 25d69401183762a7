//! Bindings of the event-time windows: assigner helpers ([`assign`]) and the window
//! operator ([`operator`]), with Arrow conversions in [`arrow_in`] / [`arrow_out`].

use pyo3::prelude::*;

use crate::window::{AggFn, DropReason};

mod arrow_in;
mod arrow_out;
mod assign;
mod operator;

/// Adds the window functions and classes to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    assign::register(m)?;
    m.add_class::<operator::PyWindowOperator>()?;
    // The vocabulary the Python layer reads instead of writing it again.
    let aggregates: Vec<&str> = AggFn::ALL.iter().map(|f| f.name()).collect();
    m.add("AGGREGATES", pyo3::types::PyTuple::new(m.py(), aggregates)?)?;
    let reasons: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    m.add("DROP_REASONS", pyo3::types::PyTuple::new(m.py(), reasons)?)?;
    Ok(())
}
