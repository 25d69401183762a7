//! Flink's element-late rule, defined once for the crate and for Python.
//!
//! Flink's `WindowOperator.isElementLate`: a record is late when
//! `timestamp + allowedLateness <= currentWatermark`, in Java `long` arithmetic, so the
//! sum wraps past `Long.MAX_VALUE` to a large negative number (such a record is late
//! for any watermark above it). The window operator applies it to records that land in
//! no window; `assign_watermarks`' `is_late` is [`behind_watermark`], the same rule with
//! no lateness against a watermark that exists. A window's own lateness is another rule
//! (its cleanup time saturates instead of wrapping: `WindowOperator::cleanup_time`).
//! The Spark layer's SQL transcription (`floodmark.spark.late`) is tested against these
//! functions at the ends of the `long` range.

use crate::time::{Ticks, MIN_TICKS};

/// `ts + allowed_lateness <= watermark`, the sum wrapping like a Java `long`.
#[inline]
pub fn is_element_late(ts: Ticks, allowed_lateness: Ticks, watermark: Ticks) -> bool {
    ts.wrapping_add(allowed_lateness) <= watermark
}

/// A record behind the watermark in force: element-late with no lateness, and only once
/// a watermark exists (`MIN` means "none yet", so a record at `MIN` is not late before
/// the first watermark).
#[inline]
pub fn behind_watermark(ts: Ticks, watermark: Ticks) -> bool {
    watermark > MIN_TICKS && is_element_late(ts, 0, watermark)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MAX_TICKS;

    #[test]
    fn the_sum_wraps_like_a_java_long() {
        assert!(is_element_late(5, 10, 15));
        assert!(!is_element_late(5, 10, 14));
        // MAX - 1 + 9 wraps to MIN + 7: late for any watermark at or above it.
        assert!(is_element_late(MAX_TICKS - 1, 9, -5));
        assert!(is_element_late(MAX_TICKS, MAX_TICKS, -2));
        assert!(!is_element_late(MAX_TICKS, MAX_TICKS, -3));
        assert!(is_element_late(MIN_TICKS, 0, MIN_TICKS));
    }

    #[test]
    fn behind_needs_a_watermark() {
        assert!(!behind_watermark(MIN_TICKS, MIN_TICKS));
        assert!(behind_watermark(MIN_TICKS, MIN_TICKS + 1));
        assert!(behind_watermark(5, 5));
        assert!(!behind_watermark(5, 4));
        assert!(behind_watermark(MAX_TICKS, MAX_TICKS));
    }
}
