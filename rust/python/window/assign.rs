//! Window assignment helpers for Python: check parameters, assign, merge.

use pyo3::prelude::*;

use crate::window::{merge_windows, window_start_with_offset, TimeWindow, WindowAssigner};

/// Builds an assigner from its kind and parameters (unused ones ignored).
pub(crate) fn build(
    kind: &str,
    size: i64,
    slide: i64,
    offset: i64,
    gap: i64,
) -> crate::Result<WindowAssigner> {
    match kind {
        "tumbling" => WindowAssigner::tumbling(size, offset),
        "sliding" => WindowAssigner::sliding(size, slide, offset),
        "session" => WindowAssigner::session(gap),
        _ => Err(crate::Error::param(
            "window",
            format!("unknown window kind {kind:?}"),
        )),
    }
}

/// Checks assigner parameters; raises `InvalidParameterError` naming the parameter.
#[pyfunction]
fn window_check(kind: &str, size: i64, slide: i64, offset: i64, gap: i64) -> PyResult<()> {
    build(kind, size, slide, offset, gap)?;
    Ok(())
}

/// The windows of a record at `timestamp`, in Flink's order.
#[pyfunction]
fn window_assign(
    kind: &str,
    size: i64,
    slide: i64,
    offset: i64,
    gap: i64,
    timestamp: i64,
) -> PyResult<Vec<(i64, i64)>> {
    let assigner = build(kind, size, slide, offset, gap)?;
    let mut out = Vec::new();
    assigner.assign_windows(timestamp, &mut out)?;
    Ok(out.into_iter().map(|w| (w.start, w.end)).collect())
}

/// Flink's `TimeWindow.getWindowStartWithOffset`.
#[pyfunction(name = "window_start_with_offset")]
fn start_with_offset(timestamp: i64, offset: i64, size: i64) -> PyResult<i64> {
    Ok(window_start_with_offset(timestamp, offset, size)?)
}

/// Flink's `TimeWindow.mergeWindows`: the merges `(from, into)` in sweep order.
#[pyfunction(name = "merge_windows")]
#[allow(clippy::type_complexity)]
fn merge(windows: Vec<(i64, i64)>) -> Vec<(Vec<(i64, i64)>, (i64, i64))> {
    let ws: Vec<TimeWindow> = windows
        .into_iter()
        .map(|(s, e)| TimeWindow::new(s, e))
        .collect();
    merge_windows(&ws)
        .into_iter()
        .map(|m| {
            (
                m.from.iter().map(|w| (w.start, w.end)).collect(),
                (m.into.start, m.into.end),
            )
        })
        .collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(window_check, m)?)?;
    m.add_function(wrap_pyfunction!(window_assign, m)?)?;
    m.add_function(wrap_pyfunction!(start_with_offset, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    Ok(())
}
