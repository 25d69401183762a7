//! Flink's `WatermarksWithIdleness` timer (section 1 of `SEMANTICS.md`).
//!
//! The clock is injected: every [`IdlenessTimer::check_if_idle`] call receives `now`
//! in ticks of the same unit as the timeout. `start == 0` means "no timer", so a timer
//! started while the clock reads exactly 0 starts again at the next quiet call (a
//! Flink quirk that is reproduced on purpose).

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

/// The idleness timer state machine of `WatermarksWithIdleness.IdlenessTimer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdlenessTimer {
    timeout: i64,
    counter: u64,
    last_counter: u64,
    start: i64,
    idle_now: bool,
}

/// When the next periodic call of a quiet idleness timer can change anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuietNext {
    /// The next periodic call may change the state: make it.
    Next,
    /// Nothing changes before the first periodic call at a time `> t`
    /// (the call at that time turns the timer idle).
    IdleAfter(i64),
    /// Nothing changes until the next event.
    Never,
}

impl IdlenessTimer {
    /// A timer with the timeout `timeout` ticks.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `idle_timeout` unless `timeout > 0` (Flink:
    /// "idleTimeout must be greater than zero").
    pub fn new(timeout: i64) -> Result<Self> {
        if timeout <= 0 {
            return Err(Error::param(
                "idle_timeout",
                format!("must be greater than zero, got {timeout}"),
            ));
        }
        Ok(Self {
            timeout,
            counter: 0,
            last_counter: 0,
            start: 0,
            idle_now: false,
        })
    }

    /// The timeout in ticks.
    pub fn timeout(&self) -> i64 {
        self.timeout
    }

    /// True while the decorated generator is idle (it emitted `markIdle` last).
    pub fn is_idle(&self) -> bool {
        self.idle_now
    }

    /// Counts `n` events of activity (Flink's `activity()`, `n` times).
    #[inline]
    pub fn activity(&mut self, n: u64) {
        self.counter = self.counter.wrapping_add(n);
    }

    /// Flink's `checkIfIdle()` with the clock reading `now`.
    #[inline]
    pub fn check_if_idle(&mut self, now: i64) -> bool {
        if self.counter != self.last_counter {
            self.last_counter = self.counter;
            self.start = 0;
            false
        } else if self.start == 0 {
            self.start = now;
            false
        } else {
            now.wrapping_sub(self.start) > self.timeout
        }
    }

    /// The periodic part of `WatermarksWithIdleness.onPeriodicEmit`: returns
    /// `(emit_idle, delegate)`: whether to emit `markIdle` now (only on the transition)
    /// and whether to call the inner generator's `onPeriodicEmit`.
    #[inline]
    pub fn on_periodic(&mut self, now: i64) -> (bool, bool) {
        if self.check_if_idle(now) {
            let transition = !self.idle_now;
            self.idle_now = true;
            (transition, false)
        } else {
            self.idle_now = false;
            (false, true)
        }
    }

    /// After a periodic call at `now` with no event since: when can the next periodic
    /// call (on a grid of step `interval`) change anything?
    pub fn quiet_next(&self, now: i64) -> QuietNext {
        if self.counter != self.last_counter || self.start == 0 {
            return QuietNext::Next;
        }
        if self.idle_now {
            return QuietNext::Never;
        }
        // Idle at the first later t with t - start > timeout, provided that true
        // difference still fits an i64 (otherwise Java's subtraction wraps negative
        // there and at every later t, so it never goes idle).
        let limit = i128::from(self.start) + i128::from(self.timeout);
        if limit > i128::from(i64::MAX) {
            return QuietNext::Never;
        }
        let limit = limit as i64;
        if limit < now {
            // Cannot happen after a non-idle call at `now`; be safe.
            return QuietNext::Next;
        }
        QuietNext::IdleAfter(limit)
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        w.i64(self.timeout)
            .u64(self.counter)
            .u64(self.last_counter)
            .i64(self.start)
            .bool(self.idle_now);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        let timeout = r.i64()?;
        if timeout <= 0 {
            return Err(Error::Snapshot("idle timeout must be > 0".into()));
        }
        Ok(Self {
            timeout,
            counter: r.u64()?,
            last_counter: r.u64()?,
            start: r.i64()?,
            idle_now: r.bool()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_boundary_is_strict() {
        let mut t = IdlenessTimer::new(100).unwrap();
        assert_eq!(t.on_periodic(1000), (false, true)); // timer starts
        assert_eq!(t.on_periodic(1100), (false, true)); // elapsed 100: not idle
        assert_eq!(t.on_periodic(1101), (true, false)); // idle, once
        assert_eq!(t.on_periodic(1200), (false, false));
        t.activity(1);
        assert_eq!(t.on_periodic(1300), (false, true));
    }

    #[test]
    fn clock_zero_quirk() {
        let mut t = IdlenessTimer::new(100).unwrap();
        assert_eq!(t.on_periodic(0), (false, true));
        assert_eq!(t.on_periodic(500), (false, true));
        assert_eq!(t.on_periodic(1000), (true, false));
    }

    #[test]
    fn timeout_must_be_positive() {
        assert!(matches!(
            IdlenessTimer::new(0),
            Err(Error::InvalidParameter {
                name: "idle_timeout",
                ..
            })
        ));
    }

    #[test]
    fn quiet_next_predicts_idleness() {
        let mut t = IdlenessTimer::new(100).unwrap();
        t.on_periodic(10);
        assert_eq!(t.quiet_next(10), QuietNext::IdleAfter(110));
        let mut t2 = IdlenessTimer::new(i64::MAX).unwrap();
        t2.on_periodic(10);
        assert_eq!(t2.quiet_next(10), QuietNext::Never);
    }
}
