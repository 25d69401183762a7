//! floodmark: Apache Flink 2.3.0's event-time semantics, exactly, as a Rust engine.
//!
//! Map of the crate:
//! - [`time`]: ticks (`i64`, unit-agnostic) and Java `long` arithmetic helpers.
//! - [`error`]: the one error type of the engine.
//! - [`snapshot`]: the compact, versioned byte form used by every `snapshot()` / `restore()`.
//! - [`watermark`]: generators (bounded out-of-orderness, monotonous, punctuated,
//!   processing-time lag, none), the idleness decorator, the vectorized driver, the
//!   per-channel valve with its indexed min-heap, and the per-split multiplexer.
//! - [`window`]: window assigners (tumbling, sliding, session), the keyed event-time
//!   window operator with allowed lateness and late/dropped side outputs, aggregates.
//!
//! The core never imports pyo3; the bindings live in `rust/python/` behind the
//! `python` feature.

pub mod error;
mod radix_heap;
pub mod snapshot;
pub mod time;
pub mod watermark;
pub mod window;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
