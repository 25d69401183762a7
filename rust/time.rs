//! Time is `i64` ticks, unit-agnostic. Flink computes with Java `long`, which wraps on
//! overflow; the engine reproduces that with explicit wrapping arithmetic where Flink
//! relies on it (see `SEMANTICS.md`), and saturates where Flink saturates.

/// A point in event or processing time, in ticks of the caller's unit.
pub type Ticks = i64;

/// Java's `Long.MIN_VALUE`: the watermark before anything is known.
pub const MIN_TICKS: Ticks = i64::MIN;

/// Java's `Long.MAX_VALUE`: the end-of-input watermark.
pub const MAX_TICKS: Ticks = i64::MAX;
