//! Time is `i64` ticks, unit-agnostic. Flink computes with Java `long`, which wraps on
//! overflow; the engine reproduces that with explicit wrapping arithmetic where Flink
//! relies on it (see `SEMANTICS.md`), and saturates where Flink saturates.

/// A point in event or processing time, in ticks of the caller's unit.
pub type Ticks = i64;

/// Java's `Long.MIN_VALUE`: the watermark before anything is known.
pub const MIN_TICKS: Ticks = i64::MIN;

/// Java's `Long.MAX_VALUE`: the end-of-input watermark.
pub const MAX_TICKS: Ticks = i64::MAX;

/// Ticks per second for the units the Python layer understands.
///
/// # Examples
/// ```
/// assert_eq!(floodmark::time::ticks_per_second("ms"), Some(1_000));
/// assert_eq!(floodmark::time::ticks_per_second("fortnight"), None);
/// ```
pub fn ticks_per_second(unit: &str) -> Option<i64> {
    match unit {
        "s" => Some(1),
        "ms" => Some(1_000),
        "us" => Some(1_000_000),
        "ns" => Some(1_000_000_000),
        _ => None,
    }
}
