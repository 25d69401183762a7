//! [`Valve`]: Flink's `StatusWatermarkValve`, combining the watermarks and statuses of
//! N input channels exactly as section 2 of `SEMANTICS.md` describes.
//!
//! The minimum over the aligned channels comes from an [`IndexedMinHeap`] (O(log n) per
//! update). The all-idle flush needs the maximum over all channels: channel watermarks
//! only grow, so that maximum is a running maximum, O(1).

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

use super::heap::IndexedMinHeap;
use super::{kinds, Emission};

/// The most input channels a valve accepts (Flink's maximum parallelism is 32768;
/// the limit only keeps a typo from allocating without bound).
pub const MAX_CHANNELS: usize = 1 << 24;

/// Flink's `StatusWatermarkValve(numInputChannels)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valve {
    wm: Vec<i64>,
    idle: Vec<bool>,
    /// Aligned channels (a channel is aligned iff it is in the heap).
    aligned: IndexedMinHeap,
    active_count: usize,
    max_all: i64,
    last_output: i64,
    all_idle: bool,
}

impl Valve {
    /// A valve over `num_channels` channels, all active, aligned, at `MIN`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `num_channels` above [`MAX_CHANNELS`].
    pub fn new(num_channels: usize) -> Result<Self> {
        if num_channels > MAX_CHANNELS {
            return Err(Error::param(
                "num_channels",
                format!("must be at most {MAX_CHANNELS}, got {num_channels}"),
            ));
        }
        Ok(Self::fresh(num_channels))
    }

    fn fresh(num_channels: usize) -> Self {
        let mut aligned = IndexedMinHeap::new(num_channels);
        for c in 0..num_channels {
            aligned.upsert(c, i64::MIN);
        }
        Self {
            wm: vec![i64::MIN; num_channels],
            idle: vec![false; num_channels],
            aligned,
            active_count: num_channels,
            max_all: i64::MIN,
            last_output: i64::MIN,
            all_idle: false,
        }
    }

    /// Number of input channels.
    pub fn num_channels(&self) -> usize {
        self.wm.len()
    }

    /// The last watermark the valve emitted (`MIN` if none).
    pub fn watermark(&self) -> i64 {
        self.last_output
    }

    /// True if the whole valve is idle (every channel is idle).
    pub fn is_idle(&self) -> bool {
        self.all_idle
    }

    /// The channel holding the minimum among the aligned channels (lowest index on
    /// ties), or `None` if no channel is aligned.
    pub fn min_channel(&self) -> Option<usize> {
        self.aligned.peek().map(|(c, _)| c)
    }

    /// Channel `c`'s last accepted watermark, idle flag and aligned flag.
    pub fn channel(&self, channel: i64) -> Result<(i64, bool, bool)> {
        let c = self.index(channel)?;
        Ok((self.wm[c], self.idle[c], self.aligned.contains(c)))
    }

    #[inline]
    fn index(&self, channel: i64) -> Result<usize> {
        if channel < 0 || channel as u64 >= self.wm.len() as u64 {
            return Err(Error::ChannelOutOfRange {
                channel,
                num_channels: self.wm.len(),
            });
        }
        Ok(channel as usize)
    }

    #[inline]
    fn output_new_min(&mut self, out: &mut impl FnMut(Emission)) {
        if let Some((_, min)) = self.aligned.peek() {
            if min > self.last_output {
                self.last_output = min;
                out(Emission::Watermark(min));
            }
        }
    }

    /// Flink's `inputWatermark(watermark, channelIndex, output)`.
    ///
    /// # Errors
    /// [`Error::ChannelOutOfRange`] if `channel` is not in `0..num_channels`.
    #[inline]
    pub fn input_watermark(
        &mut self,
        channel: i64,
        wm: i64,
        out: &mut impl FnMut(Emission),
    ) -> Result<()> {
        let c = self.index(channel)?;
        if self.all_idle || self.idle[c] || wm <= self.wm[c] {
            return Ok(());
        }
        self.wm[c] = wm;
        self.max_all = self.max_all.max(wm);
        if self.aligned.contains(c) || wm >= self.last_output {
            self.aligned.upsert(c, wm);
        }
        self.output_new_min(out);
        Ok(())
    }

    /// Flink's `inputWatermarkStatus(status, channelIndex, output)`; `idle` is the new
    /// status of `channel`.
    ///
    /// # Examples
    /// An idle channel leaves the minimum, so the others advance the combined
    /// watermark without it. When it becomes active again it rejoins the minimum
    /// (is *aligned*) only once its own watermark has caught up to the combined one:
    /// a resumed channel that is behind never pulls the combined watermark back.
    /// ```
    /// use floodmark::watermark::{Emission, Valve};
    /// let mut v = Valve::new(2).unwrap();
    /// let mut out = Vec::new();
    /// v.input_watermark(0, 10, &mut |e| out.push(e)).unwrap();
    /// v.input_watermark(1, 5, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(out, vec![Emission::Watermark(5)]); // the minimum of 10 and 5
    /// v.input_status(1, true, &mut |e| out.push(e)).unwrap(); // channel 1 goes idle
    /// assert_eq!(v.watermark(), 10); // channel 0 alone decides
    /// v.input_watermark(0, 20, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.watermark(), 20);
    /// // Channel 1 resumes behind (at 5 < 20): active, but not aligned.
    /// v.input_status(1, false, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.channel(1).unwrap(), (5, false, false)); // (watermark, idle, aligned)
    /// v.input_watermark(1, 15, &mut |e| out.push(e)).unwrap(); // still behind 20
    /// v.input_watermark(0, 30, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.watermark(), 30); // channel 1 is not in the minimum
    /// // Once it reaches the combined watermark it is aligned again and holds it back.
    /// v.input_watermark(1, 30, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.channel(1).unwrap(), (30, false, true));
    /// v.input_watermark(0, 50, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.watermark(), 30);
    /// v.input_watermark(1, 40, &mut |e| out.push(e)).unwrap();
    /// assert_eq!(v.watermark(), 40);
    /// let wms: Vec<_> = out.iter().filter_map(|e| e.watermark()).collect();
    /// assert_eq!(wms, vec![5, 10, 20, 30, 40]); // never decreasing
    /// ```
    ///
    /// # Errors
    /// [`Error::ChannelOutOfRange`] if `channel` is not in `0..num_channels`.
    pub fn input_status(
        &mut self,
        channel: i64,
        idle: bool,
        out: &mut impl FnMut(Emission),
    ) -> Result<()> {
        let c = self.index(channel)?;
        if idle && !self.idle[c] {
            self.idle[c] = true;
            let was_aligned = self.aligned.remove(c);
            self.active_count -= 1;
            if self.active_count == 0 {
                if self.wm[c] == self.last_output && self.max_all > self.last_output {
                    self.last_output = self.max_all;
                    out(Emission::Watermark(self.max_all));
                }
                self.all_idle = true;
                out(Emission::Idle);
            } else if self.wm[c] == self.last_output
                || (was_aligned && self.wm[c] < self.last_output)
            {
                // The second case is a channel inserted behind the output that held it
                // back (see `insert_channel`): without it, the minimum may rise.
                self.output_new_min(out);
            }
        } else if !idle && self.idle[c] {
            self.idle[c] = false;
            self.active_count += 1;
            if self.wm[c] >= self.last_output {
                self.aligned.upsert(c, self.wm[c]);
            }
            if self.all_idle {
                self.all_idle = false;
                out(Emission::Active);
            }
        }
        Ok(())
    }

    /// Adds an input channel at index `at` (channels from `at` on move up by one), as
    /// Flink's source registers a newly discovered split: at `MIN`, active, and counted
    /// in the minimum, so the combined watermark waits for it until it catches up or
    /// goes idle (Flink's `WatermarkOutputMultiplexer` does the same for a new output).
    /// Calls `out` with `Active` if the whole valve was idle.
    ///
    /// # Errors
    /// As [`Self::insert_channels`].
    pub fn insert_channel(&mut self, at: usize, out: &mut impl FnMut(Emission)) -> Result<()> {
        self.insert_channels(&[at], out)
    }

    /// Adds several channels at once, each as [`Self::insert_channel`] adds one: `at`
    /// holds their indexes among the channels after the insertion, ascending (the
    /// others keep their order). One pass over the channels, whatever their number.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `at` unless its indexes ascend strictly and
    /// lie within the channels after the insertion, or `num_channels` if the valve
    /// would hold more than [`MAX_CHANNELS`]. On error nothing changes.
    pub fn insert_channels(&mut self, at: &[usize], out: &mut impl FnMut(Emission)) -> Result<()> {
        let n = self.wm.len();
        if n + at.len() > MAX_CHANNELS {
            return Err(Error::param(
                "num_channels",
                format!("must be at most {MAX_CHANNELS}"),
            ));
        }
        let placed = placements(n, at)?;
        if at.is_empty() {
            return Ok(());
        }
        let aligned = spread(
            (0..n).map(|c| self.aligned.contains(c)).collect(),
            &placed,
            at,
            || true,
        );
        self.wm = spread(std::mem::take(&mut self.wm), &placed, at, || i64::MIN);
        self.idle = spread(std::mem::take(&mut self.idle), &placed, at, || false);
        let mut heap = IndexedMinHeap::new(self.wm.len());
        for (c, _) in aligned.iter().enumerate().filter(|(_, &a)| a) {
            heap.upsert(c, self.wm[c]);
        }
        self.aligned = heap;
        self.active_count += at.len();
        if self.all_idle {
            self.all_idle = false;
            out(Emission::Active);
        }
        Ok(())
    }

    /// The valve's state as snapshot bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(kinds::VALVE);
        w.u64(self.wm.len() as u64);
        for c in 0..self.wm.len() {
            w.i64(self.wm[c])
                .bool(self.idle[c])
                .bool(self.aligned.contains(c));
        }
        w.i64(self.last_output).bool(self.all_idle);
        w.finish()
    }

    /// Restores in place a [`Self::snapshot`] of a valve with as many channels.
    ///
    /// # Errors
    /// [`Error::Snapshot`] if the bytes are not a valid valve snapshot or hold another
    /// number of channels (the valve is then unchanged).
    pub fn restore_from(&mut self, bytes: &[u8]) -> Result<()> {
        let restored = Self::restore(bytes)?;
        if restored.num_channels() != self.num_channels() {
            return Err(Error::Snapshot(format!(
                "the snapshot was taken from a valve of {} channel(s), this one has {}",
                restored.num_channels(),
                self.num_channels()
            )));
        }
        *self = restored;
        Ok(())
    }

    /// Restores a valve from [`Self::snapshot`] bytes.
    ///
    /// # Errors
    /// [`Error::Snapshot`] if the bytes are not a valid valve snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, kinds::VALVE)?;
        let n = r.len(10)?;
        let mut v = Self::new(n).map_err(|e| Error::Snapshot(e.to_string()))?;
        v.active_count = 0;
        for c in 0..n {
            v.wm[c] = r.i64()?;
            v.idle[c] = r.bool()?;
            let aligned = r.bool()?;
            v.aligned.remove(c);
            if aligned {
                if v.idle[c] {
                    return Err(Error::Snapshot(format!("channel {c} is idle and aligned")));
                }
                v.aligned.upsert(c, v.wm[c]);
            }
            if !v.idle[c] {
                v.active_count += 1;
            }
            v.max_all = v.max_all.max(v.wm[c]);
        }
        v.last_output = r.i64()?;
        v.all_idle = r.bool()?;
        r.finish()?;
        Ok(v)
    }
}

/// Where each of `n` channels goes when channels are inserted at `at` (their indexes
/// after the insertion, strictly ascending): the new index of each old one.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `at` if its indexes do not ascend strictly or
/// one is past the channels after the insertion.
pub(crate) fn placements(n: usize, at: &[usize]) -> Result<Vec<usize>> {
    let total = n + at.len();
    for (i, &a) in at.iter().enumerate() {
        if a >= total {
            return Err(Error::param(
                "at",
                format!(
                    "cannot insert a channel at {a}: the valve has {n} channel(s), {total} \
                     after the insertion"
                ),
            ));
        }
        if i > 0 && a <= at[i - 1] {
            return Err(Error::param(
                "at",
                format!(
                    "the indexes must ascend strictly, but {a} follows {}",
                    at[i - 1]
                ),
            ));
        }
    }
    let mut placed = Vec::with_capacity(n);
    let mut next = at.iter().peekable();
    for c in 0..total {
        if next.peek() == Some(&&c) {
            next.next();
        } else {
            placed.push(c);
        }
    }
    Ok(placed)
}

/// `old` with new items (from `fresh`) at the indexes `at`, the old ones at `placed`
/// (from [`placements`]).
pub(crate) fn spread<T>(
    old: Vec<T>,
    placed: &[usize],
    at: &[usize],
    mut fresh: impl FnMut() -> T,
) -> Vec<T> {
    let mut slots: Vec<Option<T>> = (0..placed.len() + at.len()).map(|_| None).collect();
    for (item, &c) in old.into_iter().zip(placed) {
        slots[c] = Some(item);
    }
    slots
        .into_iter()
        .map(|s| s.unwrap_or_else(&mut fresh))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    enum In {
        W(i64, i64),
        I(i64),
        A(i64),
    }

    fn run(v: &mut Valve, steps: &[In]) -> Vec<Vec<Emission>> {
        steps
            .iter()
            .map(|s| {
                let mut e = Vec::new();
                match *s {
                    In::W(c, w) => v.input_watermark(c, w, &mut |x| e.push(x)).unwrap(),
                    In::I(c) => v.input_status(c, true, &mut |x| e.push(x)).unwrap(),
                    In::A(c) => v.input_status(c, false, &mut |x| e.push(x)).unwrap(),
                }
                e
            })
            .collect()
    }

    use Emission::{Active, Idle, Watermark as W};

    #[test]
    fn all_idle_flush_to_max() {
        let mut v = Valve::new(3).unwrap();
        let e = run(
            &mut v,
            &[
                In::W(0, 10),
                In::W(1, 20),
                In::W(2, 30),
                In::I(2),
                In::I(1),
                In::I(0),
            ],
        );
        assert_eq!(e[0], vec![]);
        assert_eq!(e[2], vec![W(10)]);
        assert_eq!(e[5], vec![W(30), Idle]);
        assert_eq!(run(&mut v, &[In::A(1)]), vec![vec![Active]]);
    }

    #[test]
    fn return_from_idle_behind() {
        let mut v = Valve::new(2).unwrap();
        let e = run(
            &mut v,
            &[
                In::W(0, 10),
                In::W(1, 10),
                In::I(1),
                In::W(0, 50),
                In::A(1),
                In::W(0, 60),
                In::W(1, 55),
                In::W(1, 70),
                In::W(0, 65),
                In::W(0, 80),
            ],
        );
        let flat: Vec<Emission> = e.into_iter().flatten().collect();
        assert_eq!(flat, vec![W(10), W(50), W(60), W(65), W(70)]);
    }

    #[test]
    fn no_flush_when_last_is_behind() {
        let mut v = Valve::new(2).unwrap();
        let e = run(
            &mut v,
            &[In::W(0, 50), In::W(1, 50), In::I(0), In::W(1, 60), In::I(1)],
        );
        assert_eq!(e.concat(), vec![W(50), W(60), Idle]);
        let mut v = Valve::new(2).unwrap();
        let e = run(
            &mut v,
            &[
                In::W(0, 50),
                In::W(1, 60),
                In::I(1),
                In::A(1),
                In::I(0),
                In::W(1, 70),
            ],
        );
        assert_eq!(v.watermark(), 70);
        assert_eq!(e.concat(), vec![W(50), W(60), W(70)]);
    }

    #[test]
    fn out_of_range_and_zero_channels() {
        assert!(matches!(
            Valve::new(MAX_CHANNELS + 1),
            Err(Error::InvalidParameter {
                name: "num_channels",
                ..
            })
        ));
        let mut v = Valve::new(0).unwrap();
        assert!(matches!(
            v.input_watermark(0, 1, &mut |_| {}),
            Err(Error::ChannelOutOfRange {
                channel: 0,
                num_channels: 0
            })
        ));
        let mut v = Valve::new(2).unwrap();
        assert!(v.input_status(-1, true, &mut |_| {}).is_err());
        assert!(v.input_watermark(2, 1, &mut |_| {}).is_err());
    }

    #[test]
    fn an_inserted_channel_holds_the_output_until_it_catches_up() {
        let mut v = Valve::new(2).unwrap();
        let e = run(&mut v, &[In::W(0, 10), In::W(1, 20)]);
        assert_eq!(e.concat(), vec![W(10)]);
        v.insert_channel(1, &mut |_| panic!("not idle")).unwrap();
        assert_eq!(v.num_channels(), 3);
        assert_eq!(v.min_channel(), Some(1));
        // Channel 2 is the old channel 1; the newcomer at 1 holds the output at 10.
        let e = run(
            &mut v,
            &[In::W(0, 30), In::W(1, 5), In::W(2, 40), In::W(1, 35)],
        );
        assert_eq!(e.concat(), vec![W(30)]);
        // A newcomer that goes idle before catching up releases the output.
        v.insert_channel(0, &mut |_| {}).unwrap();
        let e = run(&mut v, &[In::W(1, 50), In::I(0)]);
        assert_eq!(e.concat(), vec![W(35)]);
        // Into an all-idle valve: it becomes active.
        let mut v = Valve::new(1).unwrap();
        run(&mut v, &[In::I(0)]);
        let mut got = Vec::new();
        v.insert_channel(1, &mut |x| got.push(x)).unwrap();
        assert_eq!(got, vec![Active]);
        assert!(v.insert_channel(5, &mut |_| {}).is_err());
        let r = Valve::restore(&v.snapshot()).unwrap();
        assert_eq!(r, v);
    }

    #[test]
    fn channels_inserted_together_equal_channels_inserted_one_by_one() {
        let mut one = Valve::new(3).unwrap();
        run(
            &mut one,
            &[In::W(0, 10), In::W(1, 20), In::I(2), In::W(0, 30)],
        );
        let mut many = one.clone();
        // After the insertion the new channels are at 0, 2 and 5 (old 0, 1, 2 at 1, 3, 4).
        for at in [0, 2, 5] {
            one.insert_channel(at, &mut |_| {}).unwrap();
        }
        many.insert_channels(&[0, 2, 5], &mut |_| {}).unwrap();
        assert_eq!(many, one);
        assert_eq!(many.min_channel(), Some(0));
        let steps = [
            In::W(0, 40),
            In::W(2, 40),
            In::W(5, 25),
            In::W(3, 50),
            In::A(4),
        ];
        assert_eq!(run(&mut many, &steps), run(&mut one, &steps));
        assert_eq!(many, one);
        // Refused, nothing changed: indexes not ascending, or past the end.
        for at in [&[2, 1][..], &[1, 1], &[0, 9]] {
            let err = many.insert_channels(at, &mut |_| {}).unwrap_err();
            assert!(
                matches!(err, Error::InvalidParameter { name: "at", .. }),
                "{err}"
            );
        }
        assert_eq!(many, one);
        many.insert_channels(&[], &mut |_| panic!("nothing"))
            .unwrap();
        assert_eq!(many, one);
    }

    #[test]
    fn snapshot_round_trip() {
        let mut v = Valve::new(3).unwrap();
        run(&mut v, &[In::W(0, 5), In::W(1, 7), In::I(2), In::W(2, 1)]);
        let r = Valve::restore(&v.snapshot()).unwrap();
        assert_eq!(r, v);
        assert_eq!(r.min_channel(), Some(0));
        assert!(Valve::restore(&Writer::new(kinds::GENERATOR).finish()).is_err());
        let mut two = Valve::new(2).unwrap();
        assert!(two
            .restore_from(&Valve::new(4).unwrap().snapshot())
            .is_err());
        assert_eq!(two.num_channels(), 2);
        two.restore_from(&Valve::new(2).unwrap().snapshot())
            .unwrap();
    }
}
