//! The combined watermark timeline: what Flink's valve emits as the channels' output
//! streams reach it. [`Combiner`] is the valve together with the timeline it has
//! emitted so far; [`combine`] runs whole per-channel streams through one, and
//! [`super::TimelineBuilder`] feeds one incrementally.
//!
//! # One row per time
//!
//! The timeline has one [`TimelineRow`] per time at which the combined watermark or
//! status changed: the valve's state after every channel's emissions of that time
//! (one periodic emission round, or the records of one arrival time). Within a round
//! the valve may emit several watermarks as the channels reach it one by one (Flink
//! delivers them in network order, floodmark in channel order); no record is processed
//! between them, so the windows fire the same windows with the same contents whether
//! they advance once or in steps, and nothing a Flink job can observe differs. Keeping
//! only the round's final state makes the timeline independent of that order and
//! bounds it by the number of rounds, i.e. O(span / emit interval), whatever the
//! number of channels (a valve over `C` channels advancing together moves its
//! minimum about `ln C` times per round). `docs/semantics.md` lists it.

use crate::error::Result;
use crate::snapshot::{Reader, Writer};

use super::valve::Valve;
use super::Emission;

/// One row of one channel's output stream (see [`super::driver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelRow {
    /// The input channel.
    pub channel: i64,
    /// When the channel emitted it.
    pub time: i64,
    /// What the channel emitted.
    pub emission: Emission,
}

/// One valve emission in the combined timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineRow {
    /// The time of the channel row that caused it.
    pub time: i64,
    /// The combined watermark after this emission.
    pub watermark: i64,
    /// True if the valve is idle after this emission.
    pub idle: bool,
    /// The channel holding the minimum among the aligned channels after the input row
    /// was processed (`None` if no channel is aligned).
    pub min_channel: Option<usize>,
    /// True if the combined watermark grew at this time: an advance for the windows.
    pub advance: bool,
}

/// Flink's valve and the timeline it has emitted so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combiner {
    valve: Valve,
    watermark: i64,
    idle: bool,
    /// The open round: its time and the state before it.
    round: Option<(i64, i64, bool)>,
}

impl Combiner {
    /// A combiner over a fresh valve of `num_channels` channels.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] if `num_channels` is too large.
    pub fn new(num_channels: usize) -> Result<Self> {
        Ok(Self {
            valve: Valve::new(num_channels)?,
            watermark: i64::MIN,
            idle: false,
            round: None,
        })
    }

    /// The valve.
    pub fn valve(&self) -> &Valve {
        &self.valve
    }

    /// The combined watermark so far (`MIN` before the first).
    #[inline]
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// True if the valve is idle.
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    /// Feeds `emission` of `channel` at `time` to the valve, in the round of `time`
    /// (closing the open round, into `out`, if it was of an earlier time).
    ///
    /// # Errors
    /// [`crate::Error::ChannelOutOfRange`] if `channel` is not a channel of the valve.
    #[inline]
    pub fn input(
        &mut self,
        channel: i64,
        time: i64,
        emission: Emission,
        out: &mut Vec<TimelineRow>,
    ) -> Result<()> {
        if self.round.is_some_and(|(t, _, _)| t != time) {
            self.end_round(out);
        }
        if self.round.is_none() {
            self.round = Some((time, self.watermark, self.idle));
        }
        let (wm, idle) = (&mut self.watermark, &mut self.idle);
        let mut apply = |e| match e {
            Emission::Watermark(w) => *wm = w,
            Emission::Idle => *idle = true,
            Emission::Active => *idle = false,
        };
        match emission {
            Emission::Watermark(w) => self.valve.input_watermark(channel, w, &mut apply),
            Emission::Idle => self.valve.input_status(channel, true, &mut apply),
            Emission::Active => self.valve.input_status(channel, false, &mut apply),
        }
    }

    /// Closes the open round: appends one row to `out` if the combined watermark or
    /// status differs from before it.
    pub fn end_round(&mut self, out: &mut Vec<TimelineRow>) {
        let Some((time, watermark, idle)) = self.round.take() else {
            return;
        };
        if (self.watermark, self.idle) != (watermark, idle) {
            out.push(TimelineRow {
                time,
                watermark: self.watermark,
                idle: self.idle,
                min_channel: self.valve.min_channel(),
                advance: self.watermark > watermark,
            });
        }
    }

    /// Adds channels at the indexes `at` (see [`Valve::insert_channels`]).
    ///
    /// # Errors
    /// As [`Valve::insert_channels`].
    pub fn insert_channels(
        &mut self,
        at: &[usize],
        time: i64,
        out: &mut Vec<TimelineRow>,
    ) -> Result<()> {
        self.end_round(out);
        self.round = Some((time, self.watermark, self.idle));
        let idle = &mut self.idle;
        self.valve.insert_channels(at, &mut |_| *idle = false)?;
        self.end_round(out);
        Ok(())
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        w.bytes(&self.valve.snapshot())
            .i64(self.watermark)
            .bool(self.idle);
        let (time, watermark, idle) = self.round.unwrap_or((0, i64::MIN, false));
        w.bool(self.round.is_some())
            .i64(time)
            .i64(watermark)
            .bool(idle);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        let valve = Valve::restore(r.bytes()?)?;
        let watermark = r.i64()?;
        let idle = r.bool()?;
        if watermark != valve.watermark() || idle != valve.is_idle() {
            return Err(crate::Error::Snapshot(
                "the timeline disagrees with its valve".into(),
            ));
        }
        let open = r.bool()?;
        let round = (r.i64()?, r.i64()?, r.bool()?);
        Ok(Self {
            valve,
            watermark,
            idle,
            round: open.then_some(round),
        })
    }
}

/// Merges `rows` in order of `(time, channel, position within the channel)` (a stable
/// sort; the rows of one channel must be in that channel's order), feeds them to a
/// fresh valve of `num_channels` channels and returns the timeline: one
/// [`TimelineRow`] per time at which the combined watermark or status changed.
///
/// # Errors
/// [`crate::Error::ChannelOutOfRange`] if a row's channel is not in `0..num_channels`;
/// [`crate::Error::InvalidParameter`] if `num_channels` is too large.
pub fn combine(rows: &[ChannelRow], num_channels: usize) -> Result<Vec<TimelineRow>> {
    let sorted = rows
        .windows(2)
        .all(|w| (w[0].time, w[0].channel) <= (w[1].time, w[1].channel));
    let order: Vec<usize> = if sorted {
        (0..rows.len()).collect()
    } else {
        let mut o: Vec<usize> = (0..rows.len()).collect();
        o.sort_by_key(|&i| (rows[i].time, rows[i].channel));
        o
    };
    let mut combiner = Combiner::new(num_channels)?;
    let mut out = Vec::new();
    for i in order {
        let r = rows[i];
        combiner.input(r.channel, r.time, r.emission, &mut out)?;
    }
    combiner.end_round(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(channel: i64, time: i64, emission: Emission) -> ChannelRow {
        ChannelRow {
            channel,
            time,
            emission,
        }
    }

    #[test]
    fn merges_by_time_then_channel() {
        let rows = [
            row(1, 10, Emission::Watermark(20)),
            row(0, 10, Emission::Watermark(5)),
            row(0, 20, Emission::Watermark(30)),
            row(1, 30, Emission::Idle),
            row(0, 40, Emission::Idle),
        ];
        let t = combine(&rows, 2).unwrap();
        let got: Vec<(i64, i64, bool, Option<usize>, bool)> = t
            .iter()
            .map(|r| (r.time, r.watermark, r.idle, r.min_channel, r.advance))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, 5, false, Some(0), true),
                (20, 20, false, Some(1), true),
                (30, 30, false, Some(0), true),
                (40, 30, true, None, false),
            ]
        );
        assert!(combine(&rows, 1).is_err());
    }

    #[test]
    fn one_row_per_time_with_the_rounds_final_state() {
        // At time 20 the valve emits 15 (channel 0 moved past channel 1's 15) then 25
        // (channel 1 moved too); the timeline keeps the round's final state.
        let rows = [
            row(0, 10, Emission::Watermark(10)),
            row(1, 10, Emission::Watermark(15)),
            row(0, 20, Emission::Watermark(30)),
            row(1, 20, Emission::Watermark(25)),
            row(0, 30, Emission::Idle),
            row(0, 30, Emission::Active),
            row(1, 40, Emission::Idle),
            row(0, 40, Emission::Idle),
        ];
        let t = combine(&rows, 2).unwrap();
        let got: Vec<(i64, i64, bool, bool)> = t
            .iter()
            .map(|r| (r.time, r.watermark, r.idle, r.advance))
            .collect();
        // Time 30 changes nothing in the end; at 40 the all-idle flush and idle.
        assert_eq!(
            got,
            vec![
                (10, 10, false, true),
                (20, 25, false, true),
                (40, 30, true, true)
            ]
        );
    }
}
