//! [`combine`]: runs the output streams of all channels of one operator through a
//! [`Valve`] and returns the combined watermark timeline.

use crate::error::Result;

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
    let mut valve = Valve::new(num_channels)?;
    let mut out = Vec::new();
    let mut emitted = Vec::with_capacity(2);
    let (mut wm, mut idle) = (i64::MIN, false);
    for i in order {
        let r = rows[i];
        emitted.clear();
        match r.emission {
            Emission::Watermark(w) => {
                valve.input_watermark(r.channel, w, &mut |e| emitted.push(e))?;
            }
            Emission::Idle => valve.input_status(r.channel, true, &mut |e| emitted.push(e))?,
            Emission::Active => valve.input_status(r.channel, false, &mut |e| emitted.push(e))?,
        }
        let min_channel = valve.min_channel();
        for &e in &emitted {
            match e {
                Emission::Watermark(w) => wm = w,
                Emission::Idle => idle = true,
                Emission::Active => idle = false,
            }
            out.push(TimelineRow {
                time: r.time,
                watermark: wm,
                idle,
                min_channel,
            });
        }
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
        let got: Vec<(i64, i64, bool, Option<usize>)> = t
            .iter()
            .map(|r| (r.time, r.watermark, r.idle, r.min_channel))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, 5, false, Some(0)),
                (20, 20, false, Some(1)),
                (30, 30, false, Some(0)),
                (40, 30, true, None),
            ]
        );
        assert!(combine(&rows, 1).is_err());
    }
}
