//! Python bindings of the watermark core: generator, valve and multiplexer classes,
//! and the `drive` / `combine` functions over Arrow arrays. No engine logic here.

use pyo3::prelude::*;

mod arrays;
mod builder;
mod functions;
mod generator;
mod multiplexer;
mod user;
mod valve;

/// Adds the watermark classes and functions to `floodmark._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<generator::PyGenerator>()?;
    m.add_class::<user::PyWatermarkOutput>()?;
    m.add_class::<valve::PyValve>()?;
    m.add_class::<multiplexer::PyMultiplexer>()?;
    m.add_class::<builder::PyTimelineBuilder>()?;
    m.add_function(wrap_pyfunction!(functions::drive, m)?)?;
    m.add_function(wrap_pyfunction!(functions::combine, m)?)?;
    m.add_function(wrap_pyfunction!(functions::element_late, m)?)?;
    m.add_function(wrap_pyfunction!(functions::java_string_hash, m)?)?;
    m.add_function(wrap_pyfunction!(functions::kafka_split_owners, m)?)?;
    m.add_function(wrap_pyfunction!(functions::placeable_buckets, m)?)?;
    m.add("MAX_CHANNELS", crate::watermark::valve::MAX_CHANNELS)?;
    m.add("RAISED_BY", user::RAISED_BY)?;
    Ok(())
}
