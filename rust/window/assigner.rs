//! Window assigners, exactly as Flink 2.3.0's `TumblingEventTimeWindows`,
//! `SlidingEventTimeWindows`, `EventTimeSessionWindows` and `TimeWindow`.
//!
//! All arithmetic is Java `long` arithmetic: it wraps on overflow where Flink wraps.

use crate::error::{Error, Result};
use crate::time::{Ticks, MIN_TICKS};

/// Flink's cap on the number of windows one sliding assigner may produce per record.
pub const MAX_SLIDING_WINDOWS: i64 = 10_000_000;

/// A half-open event-time window `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimeWindow {
    /// First tick inside the window.
    pub start: Ticks,
    /// First tick after the window.
    pub end: Ticks,
}

impl TimeWindow {
    /// The window `[start, end)`.
    pub fn new(start: Ticks, end: Ticks) -> Self {
        Self { start, end }
    }

    /// The largest timestamp inside the window, `end - 1` (wrapping, as in Java).
    pub fn max_timestamp(&self) -> Ticks {
        self.end.wrapping_sub(1)
    }

    /// Flink's `TimeWindow.intersects`: touching windows intersect.
    pub fn intersects(&self, other: &Self) -> bool {
        self.start <= other.end && self.end >= other.start
    }

    /// The smallest window covering both.
    #[must_use]
    pub fn cover(&self, other: &Self) -> Self {
        Self::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// Flink's `TimeWindow.getWindowStartWithOffset`: `ts` floored to the grid
/// `offset + k * size`, with Java remainder (truncating toward zero) and wrapping.
///
/// # Examples
/// The start is the largest `offset + k * size <= timestamp`, for negative
/// timestamps too (Java's `%` truncates toward zero; the start still floors).
/// ```
/// use floodmark::window::window_start_with_offset;
/// assert_eq!(window_start_with_offset(7_350, 0, 1_000).unwrap(), 7_000);
/// assert_eq!(window_start_with_offset(7_350, 500, 1_000).unwrap(), 6_500);
/// assert_eq!(window_start_with_offset(7_500, 500, 1_000).unwrap(), 7_500); // inclusive
/// assert_eq!(window_start_with_offset(-1, 0, 1_000).unwrap(), -1_000);
/// assert_eq!(window_start_with_offset(-1_350, -200, 1_000).unwrap(), -2_200);
/// assert!(window_start_with_offset(1, 0, 0).is_err());
/// ```
pub fn window_start_with_offset(timestamp: Ticks, offset: Ticks, size: Ticks) -> Result<Ticks> {
    if size == 0 {
        return Err(Error::param("size", "must not be zero (division by zero)"));
    }
    let remainder = timestamp.wrapping_sub(offset).wrapping_rem(size);
    Ok(if remainder < 0 {
        timestamp.wrapping_sub(remainder.wrapping_add(size))
    } else {
        timestamp.wrapping_sub(remainder)
    })
}

/// Which windows a record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowAssigner {
    /// `TumblingEventTimeWindows.of(size, offset)`.
    Tumbling {
        /// Window length.
        size: Ticks,
        /// Grid offset, `|offset| < size`.
        offset: Ticks,
    },
    /// `SlidingEventTimeWindows.of(size, slide, offset)`.
    Sliding {
        /// Window length.
        size: Ticks,
        /// Distance between window starts.
        slide: Ticks,
        /// Grid offset, `|offset| < slide`.
        offset: Ticks,
    },
    /// `EventTimeSessionWindows.withGap(gap)`.
    Session {
        /// Inactivity gap.
        gap: Ticks,
    },
}

impl WindowAssigner {
    /// A tumbling assigner; fails unless `size > 0` (checked first, by name) and
    /// `|offset| < size` (Java `Math.abs`, which keeps `MIN` negative).
    pub fn tumbling(size: Ticks, offset: Ticks) -> Result<Self> {
        check_positive("size", size)?;
        if offset.wrapping_abs() >= size {
            return Err(Error::param(
                "offset",
                format!("tumbling windows must satisfy abs(offset) < size (size={size}, offset={offset})"),
            ));
        }
        Ok(Self::Tumbling { size, offset })
    }

    /// A sliding assigner; fails unless `size > 0` and `slide > 0` (checked first, by
    /// name), `|offset| < slide` and `size / slide <= 10_000_000`.
    ///
    /// Flink accepts a negative slide with `offset = MIN` (`Math.abs(MIN)` is
    /// negative), and every record then has windows without end: refused here.
    pub fn sliding(size: Ticks, slide: Ticks, offset: Ticks) -> Result<Self> {
        check_positive("size", size)?;
        check_positive("slide", slide)?;
        if offset.wrapping_abs() >= slide {
            return Err(Error::param(
                "offset",
                format!("sliding windows must satisfy abs(offset) < slide (slide={slide}, offset={offset})"),
            ));
        }
        if size / slide > MAX_SLIDING_WINDOWS {
            return Err(Error::param(
                "slide",
                format!("sliding windows must satisfy size / slide <= {MAX_SLIDING_WINDOWS}"),
            ));
        }
        Ok(Self::Sliding {
            size,
            slide,
            offset,
        })
    }

    /// A session assigner; fails unless `gap > 0`.
    pub fn session(gap: Ticks) -> Result<Self> {
        check_positive("gap", gap)?;
        Ok(Self::Session { gap })
    }

    /// Whether windows of this assigner merge (sessions).
    pub fn is_merging(&self) -> bool {
        matches!(self, Self::Session { .. })
    }

    /// Appends the windows of a record at `timestamp` to `out`, in Flink's order
    /// (sliding: descending start). Tumbling and sliding reject `MIN` as Flink does
    /// (`RuntimeException`), reported as [`Error::InvalidInput`] on `event_time`.
    ///
    /// # Examples
    /// Tumbling: the one window `[start, start + size)` with `start` from
    /// [`window_start_with_offset`]. Sliding: every window `[s, s + size)` with `s` on
    /// the slide grid and `timestamp - size < s <= timestamp`, latest start first.
    /// Session: `[timestamp, timestamp + gap)`, merged later.
    /// ```
    /// use floodmark::window::{TimeWindow, WindowAssigner};
    /// let mut w = Vec::new();
    /// WindowAssigner::tumbling(1_000, 500).unwrap().assign_windows(7_350, &mut w).unwrap();
    /// assert_eq!(w, vec![TimeWindow::new(6_500, 7_500)]);
    /// assert_eq!(w[0].max_timestamp(), 7_499); // end is exclusive
    ///
    /// w.clear();
    /// WindowAssigner::sliding(1_000, 400, 100).unwrap().assign_windows(7_350, &mut w).unwrap();
    /// let starts: Vec<i64> = w.iter().map(|w| w.start).collect();
    /// assert_eq!(starts, vec![7_300, 6_900, 6_500]); // 100 + 400k in (6_350, 7_350]
    /// assert_eq!(w[0], TimeWindow::new(7_300, 8_300));
    ///
    /// w.clear();
    /// WindowAssigner::session(300).unwrap().assign_windows(7_350, &mut w).unwrap();
    /// assert_eq!(w, vec![TimeWindow::new(7_350, 7_650)]);
    /// assert!(WindowAssigner::tumbling(1_000, 0).unwrap().assign_windows(i64::MIN, &mut w).is_err());
    /// ```
    pub fn assign_windows(&self, timestamp: Ticks, out: &mut Vec<TimeWindow>) -> Result<()> {
        self.assign_windows_cached(timestamp, &mut GridCache::default(), out)
    }

    /// [`Self::assign_windows`], remembering the last grid cell in `cache` so that
    /// the next records of the same cell skip the division.
    #[inline]
    pub(crate) fn assign_windows_cached(
        &self,
        timestamp: Ticks,
        cache: &mut GridCache,
        out: &mut Vec<TimeWindow>,
    ) -> Result<()> {
        match *self {
            Self::Tumbling { size, offset } => {
                out.push(tumbling_window(size, offset, timestamp, cache)?);
            }
            Self::Sliding {
                size,
                slide,
                offset,
            } => {
                check_not_min(timestamp)?;
                let last = cache.start(timestamp, offset, slide)?;
                let lower = timestamp.wrapping_sub(size);
                if last > timestamp && lower < timestamp {
                    // The record's grid cell begins below MIN (only with gaps, slide >
                    // size, within one slide of MIN): its last start wrapped to near MAX
                    // while `ts - size` did not. No window contains the record; Java
                    // would walk from near MAX down to MIN.
                    return Ok(());
                }
                let mut start = last;
                while start > lower {
                    out.push(TimeWindow::new(start, start.wrapping_add(size)));
                    // Java would wrap past MIN and loop (almost) forever; stop instead.
                    match start.checked_sub(slide) {
                        Some(s) => start = s,
                        None => break,
                    }
                }
            }
            Self::Session { gap } => {
                out.push(TimeWindow::new(timestamp, timestamp.wrapping_add(gap)));
            }
        }
        Ok(())
    }
}

/// The window of a record at `timestamp` under `Tumbling { size, offset }`
/// ([`WindowAssigner::assign_windows_cached`]).
#[inline]
pub(crate) fn tumbling_window(
    size: Ticks,
    offset: Ticks,
    timestamp: Ticks,
    cache: &mut GridCache,
) -> Result<TimeWindow> {
    check_not_min(timestamp)?;
    let rem = cache.rem(offset, size);
    let start = cache.start(timestamp, rem, size)?;
    Ok(TimeWindow::new(start, start.wrapping_add(size)))
}

/// The last grid cell `[start, end)` seen by [`WindowAssigner::assign_windows_cached`]
/// (empty at first). It is only kept when nothing overflowed, where
/// [`window_start_with_offset`] is the floor of `ts` to the grid, so it is the same
/// for every `ts` in the cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GridCache {
    start: Ticks,
    end: Ticks,
    /// `offset % size` of the last tumbling `(offset, size)` seen (`size` 0: none).
    rem: (Ticks, Ticks, Ticks),
}

impl GridCache {
    /// `offset.wrapping_rem(size)`, remembered for the next records.
    #[inline]
    fn rem(&mut self, offset: Ticks, size: Ticks) -> Ticks {
        let (o, s, rem) = self.rem;
        if o == offset && s == size && s != 0 {
            return rem;
        }
        let rem = offset.wrapping_rem(size);
        self.rem = (offset, size, rem);
        rem
    }

    /// `window_start_with_offset(ts, offset, step)`.
    #[inline]
    fn start(&mut self, ts: Ticks, offset: Ticks, step: Ticks) -> Result<Ticks> {
        let regular = ts.checked_sub(offset).is_some();
        if regular && self.start <= ts && ts < self.end {
            return Ok(self.start);
        }
        let start = window_start_with_offset(ts, offset, step)?;
        if let Some(end) = start.checked_add(step) {
            if regular && start <= ts && ts < end {
                (self.start, self.end) = (start, end);
            }
        }
        Ok(start)
    }
}

fn check_positive(name: &'static str, value: Ticks) -> Result<()> {
    if value <= 0 {
        return Err(Error::param(name, format!("must be > 0, got {value}")));
    }
    Ok(())
}

fn check_not_min(timestamp: Ticks) -> Result<()> {
    if timestamp == MIN_TICKS {
        return Err(Error::input(
            "event_time",
            "record has Long.MIN_VALUE timestamp (= no timestamp marker)",
        ));
    }
    Ok(())
}

/// One merge found by [`merge_windows`]: the distinct windows merged (sorted) and
/// the covering window they become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// The distinct windows of the group, sorted by `(start, end)`.
    pub from: Vec<TimeWindow>,
    /// The cover of the group.
    pub into: TimeWindow,
}

/// Flink's `TimeWindow.mergeWindows`: sort by start (stable), sweep, and report each
/// group with more than one distinct window, in sweep order.
pub fn merge_windows(windows: &[TimeWindow]) -> Vec<Merge> {
    let mut sorted = windows.to_vec();
    sorted.sort_by_key(|w| w.start);
    let mut merges = Vec::new();
    let mut current: Option<(TimeWindow, Vec<TimeWindow>)> = None;
    let flush = |cur: (TimeWindow, Vec<TimeWindow>), merges: &mut Vec<Merge>| {
        let (into, mut from) = cur;
        from.sort();
        from.dedup();
        if from.len() > 1 {
            merges.push(Merge { from, into });
        }
    };
    for w in sorted {
        current = Some(match current.take() {
            None => (w, vec![w]),
            Some((cover, mut members)) if cover.intersects(&w) => {
                members.push(w);
                (cover.cover(&w), members)
            }
            Some(done) => {
                flush(done, &mut merges);
                (w, vec![w])
            }
        });
    }
    if let Some(done) = current {
        flush(done, &mut merges);
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assign(a: &WindowAssigner, ts: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        a.assign_windows(ts, &mut out).unwrap();
        out.into_iter().map(|w| (w.start, w.end)).collect()
    }

    #[test]
    fn window_start_examples() {
        let f = |t, o, s| window_start_with_offset(t, o, s).unwrap();
        assert_eq!(f(-7, 0, 5), -10);
        assert_eq!(f(-1, 0, 5), -5);
        assert_eq!(f(0, 3, 5), -2);
        assert_eq!(f(-7, -3, 5), -8);
        assert_eq!(f(12, 7, 5), 12);
        assert_eq!(f(i64::MIN, 0, 10), 9_223_372_036_854_775_806);
        assert!(window_start_with_offset(1, 0, 0).is_err());
    }

    #[test]
    fn tumbling_checks_and_extremes() {
        assert!(WindowAssigner::tumbling(0, 0).is_err());
        assert!(WindowAssigner::tumbling(-5, 0).is_err());
        assert!(WindowAssigner::tumbling(5, 5).is_err());
        assert!(WindowAssigner::tumbling(5, -5).is_err());
        let t = WindowAssigner::tumbling(10, 0).unwrap();
        assert_eq!(
            assign(&t, i64::MAX),
            vec![(9_223_372_036_854_775_800, -9_223_372_036_854_775_806)]
        );
        assert_eq!(
            assign(&t, i64::MIN + 1),
            vec![(9_223_372_036_854_775_806, -9_223_372_036_854_775_800)]
        );
        assert!(t.assign_windows(i64::MIN, &mut Vec::new()).is_err());
    }

    #[test]
    fn sliding_order_gaps_and_checks() {
        let s = WindowAssigner::sliding(10, 3, 0).unwrap();
        assert_eq!(assign(&s, 0), vec![(0, 10), (-3, 7), (-6, 4), (-9, 1)]);
        let g = WindowAssigner::sliding(5, 10, 0).unwrap();
        assert!(assign(&g, 7).is_empty());
        assert_eq!(assign(&g, 3), vec![(0, 5)]);
        let near_min = WindowAssigner::sliding(10, 5, 0).unwrap();
        assert!(assign(&near_min, i64::MIN + 5).is_empty());
        assert!(WindowAssigner::sliding(100_000_010, 10, 0).is_err());
        assert!(WindowAssigner::sliding(100_000_000, 10, 0).is_ok());
        assert!(WindowAssigner::sliding(0, 10, 0).is_err());
        assert!(WindowAssigner::sliding(10, 3, 3).is_err());
    }

    #[test]
    fn grid_cache_matches_division() {
        let mut r: u64 = 0x9E37_79B9_7F4A_7C15;
        let specials = [i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1, -1, 0, 1];
        for (size, offset) in [(10, 0), (10, 3), (7, -6), (i64::MAX, 5), (3, i64::MIN)] {
            let mut cache = GridCache::default();
            for i in 0..4000 {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let ts = if i % 7 == 0 {
                    specials[(r % 7) as usize].wrapping_add((r >> 8) as i64 % 25)
                } else {
                    (r % 200) as i64 - 100
                };
                assert_eq!(
                    cache.start(ts, offset, size).unwrap(),
                    window_start_with_offset(ts, offset, size).unwrap(),
                    "ts={ts} size={size} offset={offset}"
                );
            }
        }
    }

    #[test]
    fn session_and_merge() {
        assert!(WindowAssigner::session(0).is_err());
        let w = |s, e| TimeWindow::new(s, e);
        assert_eq!(
            merge_windows(&[w(0, 5), w(5, 10)]),
            vec![Merge {
                from: vec![w(0, 5), w(5, 10)],
                into: w(0, 10)
            }]
        );
        assert!(merge_windows(&[w(0, 5), w(6, 10)]).is_empty());
        assert!(merge_windows(&[w(0, 5), w(0, 5)]).is_empty());
        let m = merge_windows(&[
            w(10, 15),
            w(0, 5),
            w(4, 11),
            w(20, 25),
            w(24, 30),
            w(40, 41),
        ]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].into, w(0, 15));
        assert_eq!(m[1].into, w(20, 30));
    }
}

#[cfg(test)]
mod hardening_tests {
    use super::*;
    use crate::error::Error;

    fn param_name(r: Result<WindowAssigner>) -> &'static str {
        match r {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected an invalid parameter, got {other:?}"),
        }
    }

    #[test]
    fn non_positive_size_and_slide_are_refused_by_name_whatever_the_offset() {
        for offset in [0, 1, -1, i64::MIN, i64::MAX] {
            for size in [0, -1, -5, i64::MIN] {
                assert_eq!(param_name(WindowAssigner::tumbling(size, offset)), "size");
                assert_eq!(
                    param_name(WindowAssigner::sliding(size, 10, offset)),
                    "size"
                );
                assert_eq!(
                    param_name(WindowAssigner::sliding(size, -1, offset)),
                    "size"
                );
            }
            for slide in [0, -1, i64::MIN] {
                assert_eq!(
                    param_name(WindowAssigner::sliding(10, slide, offset)),
                    "slide"
                );
            }
        }
    }

    /// `ts` in true (unwrapped) arithmetic: a window `[start, start + size)` listed for
    /// `ts` must contain it once its start is unwrapped.
    fn contains(start: i64, size: i64, ts: i64) -> bool {
        let s = i128::from(start) - if start > ts { 1i128 << 64 } else { 0 };
        s <= i128::from(ts) && i128::from(ts) < s + i128::from(size)
    }

    #[test]
    fn sliding_windows_near_the_ends_are_bounded_and_contain_the_record() {
        // a gapped assigner one slide above MIN: the start wraps to near MAX
        let g = WindowAssigner::sliding(3, 10, 0).unwrap();
        let mut out = Vec::new();
        g.assign_windows(i64::MIN + 5, &mut out).unwrap();
        assert!(out.is_empty(), "{out:?}");
        let params = [
            (3, 10, 0),
            (3, 10, 7),
            (5, 10, -9),
            (10, 3, 0),
            (10, 3, 2),
            (7, 7, 0),
            (1, i64::MAX, 0),
            (i64::MAX, i64::MAX, 5),
            (i64::MAX, i64::MAX / 1000, 0),
            (1000, 999, -998),
        ];
        for (size, slide, offset) in params {
            let a = WindowAssigner::sliding(size, slide, offset).unwrap();
            let bound = (size / slide + 1) as usize;
            for d in 1..40 {
                for ts in [i64::MIN + d, i64::MAX - d + 1] {
                    out.clear();
                    a.assign_windows(ts, &mut out).unwrap();
                    assert!(out.len() <= bound, "{size}/{slide}/{offset} ts={ts}");
                    for w in &out {
                        assert!(
                            contains(w.start, size, ts),
                            "{size}/{slide}/{offset} ts={ts} {w:?}"
                        );
                        assert_eq!(w.end, w.start.wrapping_add(size));
                    }
                }
            }
        }
    }
}
