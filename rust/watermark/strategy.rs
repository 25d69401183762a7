//! [`Generator`]: a base generator, optionally decorated with idleness, as built by
//! Flink's `WatermarkStrategy.for…(…)[.withIdleness(T)]`. The decoration (Flink's
//! `WatermarksWithIdleness`) is written once, for any [`WatermarkGenerator`]: the
//! built-in [`BaseGenerator`] and, in the Python bindings, a user's Python generator.

use std::convert::Infallible;
use std::result::Result as StdResult;

use crate::error::Result;
use crate::snapshot::{Reader, Writer};

use super::generator::{BaseGenerator, WatermarkGenerator};
use super::idleness::{IdlenessTimer, QuietNext};
use super::{kinds, Emission};

/// A watermark generator: a base generator `B` with an optional [`IdlenessTimer`].
/// `Generator` alone is the built-in one, over a [`BaseGenerator`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generator<B = BaseGenerator> {
    base: B,
    idle: Option<IdlenessTimer>,
}

impl<B> Generator<B> {
    /// A generator without idleness.
    pub fn new(base: B) -> Self {
        Self { base, idle: None }
    }

    /// Wraps the generator with idleness detection after `timeout` ticks without events.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] naming `idle_timeout` unless `timeout > 0`.
    pub fn with_idleness(mut self, timeout: i64) -> Result<Self> {
        self.idle = Some(IdlenessTimer::new(timeout)?);
        Ok(self)
    }

    /// The base generator.
    pub fn base(&self) -> &B {
        &self.base
    }

    /// The idleness timer, if the generator has one.
    pub fn idleness(&self) -> Option<&IdlenessTimer> {
        self.idle.as_ref()
    }

    /// `WatermarksWithIdleness.onEvent`: the base generator's call, then one event of
    /// activity for the timer (the wrapper never emits anything itself).
    #[inline]
    fn event<E>(
        &mut self,
        n: u64,
        call: impl FnOnce(&mut B) -> StdResult<(), E>,
    ) -> StdResult<(), E> {
        call(&mut self.base)?;
        if let Some(t) = &mut self.idle {
            t.activity(n);
        }
        Ok(())
    }

    /// `WatermarksWithIdleness.onPeriodicEmit` with the clock reading `now`: `markIdle`
    /// once on the transition, nothing while idle, never `markActive`; otherwise the
    /// base generator's call.
    #[inline]
    fn periodic<E, O: FnMut(Emission)>(
        &mut self,
        now: i64,
        out: &mut O,
        call: impl FnOnce(&mut B, &mut O) -> StdResult<(), E>,
    ) -> StdResult<(), E> {
        if let Some(t) = &mut self.idle {
            let (emit_idle, delegate) = t.on_periodic(now);
            if emit_idle {
                out(Emission::Idle);
            }
            if !delegate {
                return Ok(());
            }
        }
        call(&mut self.base, out)
    }

    pub(crate) fn write_with(&self, w: &mut Writer, base: impl FnOnce(&B, &mut Writer)) {
        base(&self.base, w);
        w.bool(self.idle.is_some());
        if let Some(t) = &self.idle {
            t.write(w);
        }
    }

    pub(crate) fn read_with(
        r: &mut Reader<'_>,
        base: impl FnOnce(&mut Reader<'_>) -> Result<B>,
    ) -> Result<Self> {
        let base = base(r)?;
        let idle = if r.bool()? {
            Some(IdlenessTimer::read(r)?)
        } else {
            None
        };
        Ok(Self { base, idle })
    }
}

impl<B: WatermarkGenerator> Generator<B> {
    /// After a periodic call at `now` and no event since: when can a later periodic call
    /// emit something that the previous one did not (see [`QuietNext`])?
    pub fn quiet_next(&self, now: i64) -> QuietNext {
        let stable = self.base.periodic_is_stable();
        match &self.idle {
            None if stable => QuietNext::Never,
            None => QuietNext::Next,
            Some(t) if t.is_idle() => t.quiet_next(now),
            Some(t) => match t.quiet_next(now) {
                QuietNext::Next => QuietNext::Next,
                _ if !stable => QuietNext::Next,
                q => q,
            },
        }
    }

    /// The emission-grid rule both drivers share: after the periodic call at grid index
    /// `k` (grid step `interval`), with no event since, the grid index of the next call
    /// that can emit something new; `None` when nothing changes before the next event.
    /// An index whose grid time would overflow is `None` too: no grid reaches it.
    ///
    /// # Examples
    /// ```
    /// use floodmark::watermark::{BaseGenerator, Generator};
    /// // A bounded generator without idleness repeats itself: skip to the next event.
    /// let g = Generator::new(BaseGenerator::bounded(5).unwrap());
    /// assert_eq!(g.next_call(3, 200), None);
    /// // With idleness, the call after an event restarts the timer; once it runs, the
    /// // next call that matters is the first grid time past the timeout.
    /// let mut g = Generator::new(BaseGenerator::bounded(5).unwrap()).with_idleness(1000).unwrap();
    /// g.on_event(1, None, &mut |_| {});
    /// g.on_periodic_emit(600, &mut |_| {});
    /// assert_eq!(g.next_call(3, 200), Some(4));
    /// g.on_periodic_emit(800, &mut |_| {});
    /// assert_eq!(g.next_call(4, 200), Some(10)); // idle at 2000 > 800 + 1000
    /// ```
    pub fn next_call(&self, k: i64, interval: i64) -> Option<i64> {
        let next = match self.quiet_next(k.checked_mul(interval)?) {
            QuietNext::Next => k.checked_add(1),
            QuietNext::Never => None,
            QuietNext::IdleAfter(limit) => limit.div_euclid(interval).checked_add(1),
        }?;
        next.checked_mul(interval).map(|_| next)
    }

    /// Fails unless `restored` (from a snapshot) has this generator's configuration:
    /// a snapshot of another generator must not be taken on silently.
    ///
    /// # Errors
    /// [`crate::Error::Snapshot`] naming both configurations.
    pub fn check_same_config(&self, restored: &Self) -> Result<()> {
        let (mine, theirs) = (self.config(), restored.config());
        if mine != theirs {
            return Err(crate::Error::Snapshot(format!(
                "the snapshot was taken from a generator {theirs}, this one is {mine}"
            )));
        }
        Ok(())
    }
}

/// A generator with idleness is a generator too (Flink's `WatermarksWithIdleness`).
impl<B: WatermarkGenerator> WatermarkGenerator for Generator<B> {
    type Error = B::Error;

    #[inline]
    fn on_event(
        &mut self,
        ts: i64,
        marker: Option<i64>,
        out: &mut impl FnMut(Emission),
    ) -> StdResult<(), B::Error> {
        self.event(1, |b| b.on_event(ts, marker, out))
    }

    #[inline]
    fn on_periodic_emit(
        &mut self,
        now: i64,
        out: &mut impl FnMut(Emission),
    ) -> StdResult<(), B::Error> {
        self.periodic(now, out, |b, out| b.on_periodic_emit(now, out))
    }

    fn events_are_silent(&self) -> bool {
        self.base.events_are_silent()
    }

    fn periodic_is_stable(&self) -> bool {
        self.idle.is_none() && self.base.periodic_is_stable()
    }

    #[inline]
    fn absorb(&mut self, ts: &[i64]) -> StdResult<(), B::Error> {
        self.event(ts.len() as u64, |b| b.absorb(ts))
    }

    /// The base generator's configuration and the idleness timeout, not the state,
    /// e.g. `bounded_out_of_orderness(bound=5).with_idleness(100)`.
    fn config(&self) -> String {
        match &self.idle {
            None => self.base.config(),
            Some(t) => format!("{}.with_idleness({})", self.base.config(), t.timeout()),
        }
    }
}

/// The value of a call that cannot fail.
#[inline]
fn infallible<T>(r: StdResult<T, Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// The built-in generator: its calls cannot fail, so they return nothing.
impl Generator {
    /// Flink's `onEvent(event, ts, output)`; `marker` is the punctuated watermark
    /// carried by the event, if any. The idleness wrapper counts the activity and never
    /// emits anything itself.
    #[inline]
    pub fn on_event(&mut self, ts: i64, marker: Option<i64>, out: &mut impl FnMut(Emission)) {
        infallible(self.event(1, |b| {
            b.on_event(ts, marker, out);
            Ok(())
        }));
    }

    /// Flink's `onPeriodicEmit(output)` with the clock reading `now`. With idleness:
    /// `markIdle` once on the transition, nothing while idle, never `markActive`.
    #[inline]
    pub fn on_periodic_emit(&mut self, now: i64, out: &mut impl FnMut(Emission)) {
        infallible(self.periodic(now, out, |b, out| {
            b.on_periodic_emit(now, out);
            Ok(())
        }));
    }

    /// True if events never emit, so [`Self::absorb`] may replace `on_event` calls.
    pub fn events_are_silent(&self) -> bool {
        self.base.events_are_silent()
    }

    /// Same as calling `on_event(t, None, …)` for each `t` in `ts`, for generators whose
    /// events are silent.
    #[inline]
    pub fn absorb(&mut self, ts: &[i64]) {
        infallible(self.event(ts.len() as u64, |b| {
            b.absorb(ts);
            Ok(())
        }));
    }

    /// The generator's state as snapshot bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(kinds::GENERATOR);
        self.write(&mut w);
        w.finish()
    }

    /// Restores a generator from [`Self::snapshot`] bytes.
    ///
    /// # Errors
    /// [`crate::Error::Snapshot`] if the bytes are not a generator snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, kinds::GENERATOR)?;
        let g = Self::read(&mut r)?;
        r.finish()?;
        Ok(g)
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        self.write_with(w, BaseGenerator::write);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        Self::read_with(r, BaseGenerator::read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(g: &mut Generator, now: i64) -> Vec<Emission> {
        let mut v = Vec::new();
        g.on_periodic_emit(now, &mut |e| v.push(e));
        v
    }

    #[test]
    fn idle_basic() {
        let mut g = Generator::new(BaseGenerator::bounded(0).unwrap())
            .with_idleness(100)
            .unwrap();
        g.on_event(5, None, &mut |_| {});
        assert_eq!(run(&mut g, 1000), vec![Emission::Watermark(4)]);
        assert_eq!(run(&mut g, 1050), vec![Emission::Watermark(4)]);
        assert_eq!(run(&mut g, 1151), vec![Emission::Idle]);
        assert_eq!(run(&mut g, 1300), vec![]);
        g.on_event(3, None, &mut |_| {});
        assert_eq!(run(&mut g, 1400), vec![Emission::Watermark(4)]);
    }

    #[test]
    fn snapshot_round_trip_and_kind_check() {
        let mut g = Generator::new(BaseGenerator::bounded(7).unwrap())
            .with_idleness(10)
            .unwrap();
        g.on_event(100, None, &mut |_| {});
        run(&mut g, 5);
        let bytes = g.snapshot();
        assert_eq!(Generator::restore(&bytes).unwrap(), g);
        g.check_same_config(&Generator::restore(&bytes).unwrap())
            .unwrap();
        for other in [
            Generator::new(BaseGenerator::bounded(7).unwrap()),
            Generator::new(BaseGenerator::bounded(8).unwrap())
                .with_idleness(10)
                .unwrap(),
            Generator::new(BaseGenerator::bounded(7).unwrap())
                .with_idleness(11)
                .unwrap(),
            Generator::new(BaseGenerator::processing_time_lag(7).unwrap())
                .with_idleness(10)
                .unwrap(),
        ] {
            let Err(crate::Error::Snapshot(m)) = other.check_same_config(&g) else {
                panic!("{other:?} took on {g:?}")
            };
            assert!(
                m.contains(&other.config()) && m.contains(&g.config()),
                "{m}"
            );
        }
        let mut other = crate::snapshot::Writer::new(kinds::VALVE);
        other.u64(0);
        assert!(Generator::restore(&other.finish()).is_err());
    }
}
