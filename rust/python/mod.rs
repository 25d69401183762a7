//! The `floodmark._core` extension module: thin conversions between Arrow/Python
//! values and the engine, error mapping, and GIL release around the heavy loops.
//! Nothing here holds engine logic.

use pyo3::prelude::*;

mod errors;
mod watermark;
mod window;

/// The native module. Nothing starts at import: no threads, no runtimes.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    watermark::register(m)?;
    window::register(m)?;
    Ok(())
}
