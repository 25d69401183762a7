//! The combined watermark timeline: what Flink's valve emits as the channels' output
//! streams reach it. [`Combiner`] is the valve together with the timeline it has
//! emitted so far (one [`TimelineRow`] per valve emission); [`combine`] runs whole
//! per-channel streams through one, and [`super::TimelineBuilder`] feeds one
//! incrementally.

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
    /// True if this emission is a watermark, i.e. the combined watermark grew (the
    /// valve emits a watermark only when it grows): an advance for the windows.
    pub advance: bool,
}

/// Flink's valve and the timeline it has emitted so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combiner {
    valve: Valve,
    watermark: i64,
    idle: bool,
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

    /// Feeds `emission` of `channel` at `time` to the valve; appends one row to `out`
    /// per valve emission.
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
        // The valve emits at most two things per input (the all-idle flush, then idle).
        let mut emitted = [None; 2];
        let mut n = 0;
        let mut push = |e| {
            emitted[n] = Some(e);
            n += 1;
        };
        match emission {
            Emission::Watermark(w) => self.valve.input_watermark(channel, w, &mut push)?,
            Emission::Idle => self.valve.input_status(channel, true, &mut push)?,
            Emission::Active => self.valve.input_status(channel, false, &mut push)?,
        }
        if n == 0 {
            return Ok(());
        }
        let min_channel = self.valve.min_channel();
        for e in emitted.into_iter().flatten() {
            match e {
                Emission::Watermark(w) => self.watermark = w,
                Emission::Idle => self.idle = true,
                Emission::Active => self.idle = false,
            }
            out.push(TimelineRow {
                time,
                watermark: self.watermark,
                idle: self.idle,
                min_channel,
                advance: matches!(e, Emission::Watermark(_)),
            });
        }
        Ok(())
    }

    /// Adds a channel at index `at` (see [`Valve::insert_channel`]).
    ///
    /// # Errors
    /// As [`Valve::insert_channel`].
    pub fn insert_channel(
        &mut self,
        at: usize,
        time: i64,
        out: &mut Vec<TimelineRow>,
    ) -> Result<()> {
        let mut active = false;
        self.valve.insert_channel(at, &mut |_| active = true)?;
        if active {
            self.idle = false;
            out.push(TimelineRow {
                time,
                watermark: self.watermark,
                idle: false,
                min_channel: self.valve.min_channel(),
                advance: false,
            });
        }
        Ok(())
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        w.bytes(&self.valve.snapshot())
            .i64(self.watermark)
            .bool(self.idle);
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
        Ok(Self {
            valve,
            watermark,
            idle,
        })
    }
}

/// Merges `rows` in order of `(time, channel, position within the channel)` (a stable
/// sort; the rows of one channel must be in that channel's order), feeds them to a
/// fresh valve of `num_channels` channels and returns one [`TimelineRow`] per valve
/// emission.
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
}
