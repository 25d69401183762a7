//! The base watermark generators of Flink's `WatermarkStrategy` (section 1 of
//! `SEMANTICS.md`), without idleness (see [`super::idleness`]), and
//! [`WatermarkGenerator`], the interface the driver calls them through.

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

use super::Emission;

/// Flink's `WatermarkGenerator` interface (`onEvent`, `onPeriodicEmit`): what a
/// [`Generator`](super::Generator) decorates with idleness and
/// [`drive`](super::drive) runs. Implemented by [`BaseGenerator`] and, in the Python
/// bindings, by a user's Python generator; the driver is monomorphized for each, so
/// the built-in generators pay nothing for it.
///
/// A call that fails returns its error, and the driver stops there and returns it (a
/// Python user generator's exception reaches the caller unchanged).
pub trait WatermarkGenerator {
    /// What a failing call returns, and what the driver reports its own errors as
    /// (the built-in generators never fail: theirs is the crate's [`Error`]).
    type Error: From<Error>;

    /// Flink's `onEvent`: a record with event time `ts`; `marker` is the watermark a
    /// punctuated record carries, if any.
    ///
    /// # Errors
    /// Whatever the generator fails with.
    fn on_event(
        &mut self,
        ts: i64,
        marker: Option<i64>,
        out: &mut impl FnMut(Emission),
    ) -> std::result::Result<(), Self::Error>;

    /// Flink's `onPeriodicEmit`, with the processing-time clock reading `now`.
    ///
    /// # Errors
    /// Whatever the generator fails with.
    fn on_periodic_emit(
        &mut self,
        now: i64,
        out: &mut impl FnMut(Emission),
    ) -> std::result::Result<(), Self::Error>;

    /// True if events never emit, so that the driver may [`Self::absorb`] a run of
    /// them at once and give them all the same watermark.
    fn events_are_silent(&self) -> bool {
        false
    }

    /// True if a periodic call with no event since the previous periodic call emits
    /// the same thing again, so that the driver may skip it. Otherwise the driver
    /// makes every periodic call of the grid.
    fn periodic_is_stable(&self) -> bool {
        false
    }

    /// The same as `on_event(t, None, ...)` for each `t` in `ts`, for generators whose
    /// events are silent (the built-in ones do it without a call per event).
    ///
    /// # Errors
    /// Whatever the generator fails with.
    fn absorb(&mut self, ts: &[i64]) -> std::result::Result<(), Self::Error> {
        for &t in ts {
            self.on_event(t, None, &mut |_| {})?;
        }
        Ok(())
    }

    /// The generator's configuration (its kind and parameters, not its state), as the
    /// Python strategy would spell it, e.g. `bounded_out_of_orderness(bound=5)`: a
    /// snapshot restores only into a generator of the same configuration.
    fn config(&self) -> String;
}

/// One of the base generators. All arithmetic is Java `long` arithmetic (wrapping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseGenerator {
    /// Flink's `BoundedOutOfOrdernessWatermarks(B)`; `monotonous` is `B = 0`.
    BoundedOutOfOrderness {
        /// The out-of-orderness bound `B` in ticks (>= 0).
        bound: i64,
        /// The largest timestamp seen, starting at `MIN + B + 1`.
        max_ts: i64,
    },
    /// Emits `Watermark(marker)` right after each event that carries a marker;
    /// nothing periodically.
    Punctuated,
    /// Periodically emits `now - lag` (wrapping); events change nothing. Not a Flink
    /// built-in: floodmark's processing-time watermark, with the same periodic timing.
    ProcessingTimeLag {
        /// How far the watermark trails the processing-time clock, in ticks (>= 0).
        lag: i64,
    },
    /// Never emits anything (Flink's `NoWatermarksGenerator`).
    NoWatermarks,
}

impl BaseGenerator {
    /// Bounded out-of-orderness with bound `bound` ticks.
    ///
    /// # Examples
    /// Flink's invariant: the periodic watermark is `max - bound - 1`, the largest
    /// event time seen so far minus the bound minus one (a record at exactly the
    /// watermark would be late, so the watermark stops one tick short). Before any
    /// event it is `MIN` (Flink starts `maxTimestamp` at `MIN + bound + 1`); an
    /// out-of-order record does not lower it.
    /// ```
    /// use floodmark::watermark::{BaseGenerator, Emission};
    /// let mut g = BaseGenerator::bounded(10).unwrap();
    /// let mut out = Vec::new();
    /// g.on_periodic_emit(0, &mut |e| out.push(e));
    /// assert_eq!(out, vec![Emission::Watermark(i64::MIN)]); // nothing seen yet
    /// out.clear();
    /// g.on_event(100, None, &mut |e| out.push(e));
    /// g.on_event(95, None, &mut |e| out.push(e)); // out of order, within the bound
    /// g.on_periodic_emit(200, &mut |e| out.push(e));
    /// assert_eq!(out, vec![Emission::Watermark(100 - 10 - 1)]);
    /// // Monotonous timestamps are bound 0: `max - 1`.
    /// let mut m = BaseGenerator::monotonous();
    /// m.on_event(100, None, &mut |_| {});
    /// assert_eq!(m.periodic_value(0), Some(99));
    /// assert!(BaseGenerator::bounded(-1).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `bound` if it is negative (Flink:
    /// "maxOutOfOrderness cannot be negative").
    pub fn bounded(bound: i64) -> Result<Self> {
        if bound < 0 {
            return Err(Error::param("bound", format!("must be >= 0, got {bound}")));
        }
        Ok(Self::BoundedOutOfOrderness {
            bound,
            max_ts: i64::MIN.wrapping_add(bound).wrapping_add(1),
        })
    }

    /// Monotonous timestamps: bounded out-of-orderness with bound 0.
    pub fn monotonous() -> Self {
        Self::bounded(0).expect("bound 0 is valid")
    }

    /// Processing-time lag of `lag` ticks.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `lag` if it is negative.
    pub fn processing_time_lag(lag: i64) -> Result<Self> {
        if lag < 0 {
            return Err(Error::param("lag", format!("must be >= 0, got {lag}")));
        }
        Ok(Self::ProcessingTimeLag { lag })
    }

    /// Flink's `onEvent`: bounded absorbs the timestamp; punctuated emits the marker.
    #[inline]
    pub fn on_event(&mut self, ts: i64, marker: Option<i64>, out: &mut impl FnMut(Emission)) {
        match self {
            Self::BoundedOutOfOrderness { max_ts, .. } => *max_ts = (*max_ts).max(ts),
            Self::Punctuated => {
                if let Some(m) = marker {
                    out(Emission::Watermark(m));
                }
            }
            Self::ProcessingTimeLag { .. } | Self::NoWatermarks => {}
        }
    }

    /// Flink's `onPeriodicEmit`; `now` is the processing-time clock (only the lag
    /// generator reads it).
    #[inline]
    pub fn on_periodic_emit(&mut self, now: i64, out: &mut impl FnMut(Emission)) {
        if let Some(w) = self.periodic_value(now) {
            out(Emission::Watermark(w));
        }
    }

    /// The watermark `on_periodic_emit(now)` would emit, if any (no state change).
    #[inline]
    pub fn periodic_value(&self, now: i64) -> Option<i64> {
        match *self {
            Self::BoundedOutOfOrderness { bound, max_ts } => {
                Some(max_ts.wrapping_sub(bound).wrapping_sub(1))
            }
            Self::ProcessingTimeLag { lag } => Some(now.wrapping_sub(lag)),
            Self::Punctuated | Self::NoWatermarks => None,
        }
    }

    /// True if events never emit (so a run of events can be absorbed at once).
    pub fn events_are_silent(&self) -> bool {
        !matches!(self, Self::Punctuated)
    }

    /// True if a periodic call with no event since the previous periodic call emits
    /// the same thing again (so the driver may skip it).
    pub fn periodic_is_stable(&self) -> bool {
        !matches!(self, Self::ProcessingTimeLag { .. })
    }

    /// Absorbs a run of event timestamps (only for generators with silent events).
    #[inline]
    pub fn absorb(&mut self, ts: &[i64]) {
        if let Self::BoundedOutOfOrderness { max_ts, .. } = self {
            *max_ts = max_of(ts, *max_ts);
        }
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        match *self {
            Self::BoundedOutOfOrderness { bound, max_ts } => {
                w.u64(0).i64(bound).i64(max_ts);
            }
            Self::Punctuated => {
                w.u64(1);
            }
            Self::ProcessingTimeLag { lag } => {
                w.u64(2).i64(lag);
            }
            Self::NoWatermarks => {
                w.u64(3);
            }
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        Ok(match r.u64()? {
            0 => {
                let bound = r.i64()?;
                let max_ts = r.i64()?;
                if bound < 0 {
                    return Err(Error::Snapshot("negative bound".into()));
                }
                Self::BoundedOutOfOrderness { bound, max_ts }
            }
            1 => Self::Punctuated,
            2 => Self::ProcessingTimeLag { lag: r.i64()? },
            3 => Self::NoWatermarks,
            k => return Err(Error::Snapshot(format!("unknown generator tag {k}"))),
        })
    }
}

impl WatermarkGenerator for BaseGenerator {
    type Error = Error;

    #[inline]
    fn on_event(
        &mut self,
        ts: i64,
        marker: Option<i64>,
        out: &mut impl FnMut(Emission),
    ) -> Result<()> {
        BaseGenerator::on_event(self, ts, marker, out);
        Ok(())
    }

    #[inline]
    fn on_periodic_emit(&mut self, now: i64, out: &mut impl FnMut(Emission)) -> Result<()> {
        BaseGenerator::on_periodic_emit(self, now, out);
        Ok(())
    }

    fn events_are_silent(&self) -> bool {
        BaseGenerator::events_are_silent(self)
    }

    fn periodic_is_stable(&self) -> bool {
        BaseGenerator::periodic_is_stable(self)
    }

    #[inline]
    fn absorb(&mut self, ts: &[i64]) -> Result<()> {
        BaseGenerator::absorb(self, ts);
        Ok(())
    }

    fn config(&self) -> String {
        match *self {
            Self::BoundedOutOfOrderness { bound, .. } => {
                format!("bounded_out_of_orderness(bound={bound})")
            }
            Self::Punctuated => "punctuated".into(),
            Self::ProcessingTimeLag { lag } => format!("processing_time_lag(lag={lag})"),
            Self::NoWatermarks => "no_watermarks".into(),
        }
    }
}

/// `max(init, max(ts))` with eight independent accumulators, about four times faster
/// than a single `fold` (which is one long compare/select dependency chain).
#[inline]
fn max_of(ts: &[i64], init: i64) -> i64 {
    let mut acc = [init; 8];
    let mut chunks = ts.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    let m = acc.iter().copied().fold(init, i64::max);
    chunks.remainder().iter().copied().fold(m, i64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn periodic(g: &mut BaseGenerator) -> Vec<Emission> {
        let mut v = Vec::new();
        g.on_periodic_emit(0, &mut |e| v.push(e));
        v
    }

    #[test]
    fn bounded_beyond_bound() {
        let mut g = BaseGenerator::bounded(10).unwrap();
        assert_eq!(periodic(&mut g), vec![Emission::Watermark(i64::MIN)]);
        let mut sink = |_e: Emission| panic!("events emit nothing");
        for (ts, want) in [(100, 89), (50, 89), (95, 89), (120, 109)] {
            g.on_event(ts, None, &mut sink);
            assert_eq!(periodic(&mut g), vec![Emission::Watermark(want)]);
        }
    }

    #[test]
    fn bounded_wrapping_and_extremes() {
        let mut g = BaseGenerator::bounded(i64::MAX).unwrap();
        g.on_event(-5, None, &mut |_| {});
        assert_eq!(periodic(&mut g), vec![Emission::Watermark(i64::MIN)]);
        g.on_event(10, None, &mut |_| {});
        assert_eq!(
            periodic(&mut g),
            vec![Emission::Watermark(-9_223_372_036_854_775_798)]
        );
        g.on_event(i64::MAX, None, &mut |_| {});
        assert_eq!(periodic(&mut g), vec![Emission::Watermark(-1)]);
        let mut g = BaseGenerator::bounded(5).unwrap();
        g.on_event(i64::MAX, None, &mut |_| {});
        assert_eq!(periodic(&mut g), vec![Emission::Watermark(i64::MAX - 6)]);
    }

    #[test]
    fn negative_parameters_are_errors() {
        assert!(matches!(
            BaseGenerator::bounded(-1),
            Err(Error::InvalidParameter { name: "bound", .. })
        ));
        assert!(matches!(
            BaseGenerator::processing_time_lag(-1),
            Err(Error::InvalidParameter { name: "lag", .. })
        ));
    }

    #[test]
    fn punctuated_and_lag() {
        let mut g = BaseGenerator::Punctuated;
        let mut v = Vec::new();
        g.on_event(1, Some(7), &mut |e| v.push(e));
        g.on_event(2, None, &mut |e| v.push(e));
        assert_eq!(v, vec![Emission::Watermark(7)]);
        assert!(periodic(&mut g).is_empty());
        let mut g = BaseGenerator::processing_time_lag(3).unwrap();
        let mut v = Vec::new();
        g.on_periodic_emit(10, &mut |e| v.push(e));
        assert_eq!(v, vec![Emission::Watermark(7)]);
        assert!(periodic(&mut BaseGenerator::NoWatermarks).is_empty());
    }

    #[test]
    fn absorb_matches_on_event() {
        let mut a = BaseGenerator::bounded(3).unwrap();
        let mut b = a.clone();
        let ts: Vec<i64> = (0..37).map(|i| (i * 7919) % 101 - 50).collect();
        a.absorb(&ts);
        for t in ts {
            b.on_event(t, None, &mut |_| {});
        }
        assert_eq!(a, b);
    }
}
