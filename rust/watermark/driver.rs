//! The vectorized driver of ONE source channel: runs a [`Generator`] over arrays of
//! records and a periodic-emission grid, the way Flink's source operator calls it.
//! It is generic over the base generator ([`WatermarkGenerator`]): the built-in ones,
//! and in the Python bindings a user's Python generator, run through this one loop.
//!
//! # Timing model
//!
//! * Periodic emissions happen at every grid time `t = k * interval` (integer `k`)
//!   with `ceil(start / interval) * interval <= t <= ceil(until / interval) * interval`.
//!   The idleness clock `now` of the call at `t` is `t`.
//! * **Tie rule**: records whose arrival is exactly `t` are processed *before* the
//!   periodic emission at `t`. A punctuated emission happens right after its record, at
//!   the record's arrival time.
//! * Records arriving after the last grid time are still processed (their punctuated
//!   emissions count), but no periodic call follows them.
//!
//! # Outputs
//!
//! * Per record, the channel watermark in force: the largest watermark the channel
//!   output forwarded at a time *strictly before* the record's arrival (`MIN` if none).
//!   Emissions of earlier records with the same arrival do not count.
//! * The channel's output stream, passed through [`ChannelOutput`] (Flink's
//!   `WatermarkToDataOutput`): a watermark `<=` the largest so far is dropped and does
//!   not reactivate the channel; a larger one first emits `Active` if the channel was
//!   idle, then the watermark; `Idle` is emitted only on the transition.
//!
//! # Speed
//!
//! Records are handled in runs (all records up to the next grid time). For generators
//! whose events never emit (bounded out-of-orderness, monotonous, processing-time
//! lag, none), a run is one fill and one max, with no division and no allocation per
//! record. Grid points in a gap are skipped in O(1) when nothing can change (a
//! bounded generator without idleness, an idle generator, or a running idleness timer
//! up to the point where it fires). Processing-time lag is evaluated at every grid
//! point, since its value changes.

use std::result::Result as StdResult;

use crate::error::{Error, Result};

use super::builder::MAX_EVERY_GRID_CALLS;
use super::generator::WatermarkGenerator;
use super::output::ChannelOutput;
use super::strategy::Generator;
use super::Emission;

/// The emission grid of [`drive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriveParams {
    /// The periodic-emission interval in ticks (> 0).
    pub interval: i64,
    /// The first time a periodic emission may happen (rounded up to the grid).
    pub start: i64,
    /// The last time a periodic emission may happen (rounded up to the grid).
    pub until: i64,
}

/// One row of the channel's output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmissionRow {
    /// When it was emitted (a grid time, or the arrival of a punctuated record).
    pub time: i64,
    /// What was emitted.
    pub emission: Emission,
}

/// The result of [`drive`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriveOutput {
    /// Per record, the channel watermark in force at its arrival.
    pub record_watermark: Vec<i64>,
    /// The channel's output stream, in order.
    pub emissions: Vec<EmissionRow>,
}

/// `ceil(a / b)` for `b > 0`.
#[inline]
pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 {
        q
    } else {
        q + 1
    }
}

/// First index `>= from` with `arrival[index] > t` (`arrival` sorted). A linear scan
/// in blocks of 8 (branch-free count per block): it streams through memory, which is
/// much faster than a galloping search whose probes all miss the cache.
#[inline]
fn run_end(arrival: &[i64], from: usize, t: i64) -> usize {
    let n = arrival.len();
    let mut j = from;
    while j + 8 <= n {
        let block = &arrival[j..j + 8];
        let le = block.iter().fold(0usize, |c, &a| c + usize::from(a <= t));
        if le < 8 {
            // Sorted: the values <= t are a prefix of the block.
            return j + le;
        }
        j += 8;
    }
    while j < n && arrival[j] <= t {
        j += 1;
    }
    j
}

fn check_inputs(
    event_ts: &[i64],
    arrival: &[i64],
    marker: Option<&[Option<i64>]>,
    params: &DriveParams,
) -> Result<(i64, i64)> {
    if params.interval <= 0 {
        return Err(Error::param(
            "emit_interval",
            format!("must be > 0 ticks, got {}", params.interval),
        ));
    }
    same_length("arrival", arrival.len(), event_ts.len())?;
    if let Some(m) = marker {
        same_length("marker", m.len(), event_ts.len())?;
    }
    if arrival.len() > 1 {
        // Branch-free (no early exit) so the check vectorizes.
        #[allow(clippy::needless_bitwise_bool)]
        let unsorted = arrival[..arrival.len() - 1]
            .iter()
            .zip(&arrival[1..])
            .fold(false, |acc, (a, b)| acc | (b < a));
        if unsorted {
            let i = arrival.windows(2).position(|w| w[1] < w[0]).unwrap_or(0) + 1;
            return Err(Error::input(
                "arrival",
                format!(
                    "must be non-decreasing, but arrival[{i}] = {} < arrival[{}] = {}",
                    arrival[i],
                    i - 1,
                    arrival[i - 1]
                ),
            ));
        }
    }
    if params.until < params.start {
        return Err(Error::param(
            "until",
            format!("must be >= start ({}), got {}", params.start, params.until),
        ));
    }
    let k0 = ceil_div(params.start, params.interval);
    let k1 = ceil_div(params.until, params.interval);
    if k1.checked_mul(params.interval).is_none() {
        return Err(Error::param(
            "until",
            "the last grid time ceil(until / emit_interval) * emit_interval overflows i64",
        ));
    }
    Ok((k0, k1))
}

/// Refuses grid indexes `k0..=k1` (the grid times `drive` would call) for a generator
/// called at every grid time (processing-time lag, a user's generator) when they are
/// more than [`MAX_EVERY_GRID_CALLS`]: the work bounded up front. A caller driving a
/// channel chunk by chunk checks the whole span once (each chunk's is smaller).
///
/// # Errors
/// [`Error::InvalidParameter`] naming `emit_interval`.
pub fn check_grid_span<B: WatermarkGenerator>(gen: &Generator<B>, k0: i64, k1: i64) -> Result<()> {
    let points = u64::try_from(i128::from(k1) - i128::from(k0) + 1).unwrap_or(u64::MAX);
    if gen.base().periodic_is_stable() || points <= MAX_EVERY_GRID_CALLS {
        return Ok(());
    }
    Err(Error::param(
        "emit_interval",
        format!(
            "the generator {} is called at every grid time: {points} grid times over the \
             arrival span is more than {MAX_EVERY_GRID_CALLS}; give a larger emit_interval \
             or a shorter arrival span",
            gen.base().config()
        ),
    ))
}

struct State<'a, B> {
    gen: &'a mut Generator<B>,
    out: &'a mut ChannelOutput,
    rows: &'a mut Vec<EmissionRow>,
    rec_wm: &'a mut Vec<i64>,
    last_arrival: Option<i64>,
    wm_before: i64,
}

impl<B: WatermarkGenerator> State<'_, B> {
    #[inline]
    fn records(
        &mut self,
        ts: &[i64],
        arrival: &[i64],
        marker: Option<&[Option<i64>]>,
        lo: usize,
        hi: usize,
    ) -> StdResult<(), B::Error> {
        if lo >= hi {
            return Ok(());
        }
        if self.gen.events_are_silent() {
            // No emission happens between these records: all see the same watermark.
            self.rec_wm.resize(hi, self.out.watermark());
            self.gen.absorb(&ts[lo..hi])?;
            self.last_arrival = Some(arrival[hi - 1]);
            self.wm_before = self.out.watermark();
            return Ok(());
        }
        let (gen, out, rows) = (&mut *self.gen, &mut *self.out, &mut *self.rows);
        for r in lo..hi {
            let a = arrival[r];
            if self.last_arrival != Some(a) {
                self.last_arrival = Some(a);
                self.wm_before = out.watermark();
            }
            self.rec_wm.push(self.wm_before);
            let m = marker.and_then(|m| m[r]);
            gen.on_event(ts[r], m, &mut |e| {
                out.push(e, &mut |x| {
                    rows.push(EmissionRow {
                        time: a,
                        emission: x,
                    });
                });
            })?;
        }
        Ok(())
    }

    #[inline]
    fn periodic(&mut self, t: i64) -> StdResult<(), B::Error> {
        let (gen, out, rows) = (&mut *self.gen, &mut *self.out, &mut *self.rows);
        gen.on_periodic_emit(t, &mut |e| {
            out.push(e, &mut |x| {
                rows.push(EmissionRow {
                    time: t,
                    emission: x,
                });
            });
        })
    }
}

/// Runs `gen` over one channel's records (see the module docs for the exact timing
/// and output rules). `out` carries the channel output's state (largest watermark,
/// idle flag), so consecutive calls continue one stream.
///
/// # Examples
/// The tie rule: a record sees the watermark its channel forwarded strictly before
/// it arrived, never one its own arrival produced; records arriving at a grid time
/// are processed before that grid time's periodic emission.
/// ```
/// use floodmark::watermark::{drive, BaseGenerator, ChannelOutput, DriveParams, Generator};
/// let mut gen = Generator::new(BaseGenerator::bounded(10).unwrap());
/// let params = DriveParams { interval: 200, start: 0, until: 400 };
/// // Event times 100, 95, 130 arriving at 0, 200, 200; periodic emissions at 0, 200, 400.
/// let out = drive(&mut gen, &mut ChannelOutput::new(), &[100, 95, 130], &[0, 200, 200], None, &params)
///     .unwrap();
/// // The emission at 0 (100 - 10 - 1 = 89) is in force for the records at 200; the one
/// // at 200 (130 - 10 - 1 = 119) comes after them.
/// assert_eq!(out.record_watermark, vec![i64::MIN, 89, 89]);
/// let wms: Vec<_> = out.emissions.iter().map(|r| (r.time, r.emission.watermark())).collect();
/// assert_eq!(wms, vec![(0, Some(89)), (200, Some(119))]); // 400 repeats 119: dropped
/// ```
///
/// # Errors
/// [`Error::InvalidParameter`] for `emit_interval <= 0`, `until < start` or a grid that
/// overflows; [`Error::InvalidInput`] if `arrival` is not non-decreasing or a column's
/// length differs from `event_ts` (all before any call); the generator's own error
/// (a user generator's), at the failing call.
pub fn drive<B: WatermarkGenerator>(
    gen: &mut Generator<B>,
    out: &mut ChannelOutput,
    event_ts: &[i64],
    arrival: &[i64],
    marker: Option<&[Option<i64>]>,
    params: &DriveParams,
) -> StdResult<DriveOutput, B::Error> {
    let mut res = DriveOutput::default();
    drive_into(
        gen,
        out,
        event_ts,
        arrival,
        marker,
        params,
        &mut res.record_watermark,
        &mut res.emissions,
    )?;
    Ok(res)
}

/// [`drive`] writing into caller-owned buffers (cleared first), so a caller driving
/// many batches reuses their memory instead of allocating (and page-faulting) anew.
///
/// # Errors
/// As [`drive`].
#[allow(clippy::many_single_char_names, clippy::too_many_arguments)]
pub fn drive_into<B: WatermarkGenerator>(
    gen: &mut Generator<B>,
    out: &mut ChannelOutput,
    event_ts: &[i64],
    arrival: &[i64],
    marker: Option<&[Option<i64>]>,
    params: &DriveParams,
    record_watermark: &mut Vec<i64>,
    emissions: &mut Vec<EmissionRow>,
) -> StdResult<(), B::Error> {
    let (k0, k1) = check_inputs(event_ts, arrival, marker, params)?;
    check_grid_span(gen, k0, k1)?;
    let interval = params.interval;
    let n = event_ts.len();
    record_watermark.clear();
    record_watermark.reserve(n);
    emissions.clear();
    let mut st = State {
        gen,
        out,
        rows: emissions,
        rec_wm: record_watermark,
        last_arrival: None,
        wm_before: i64::MIN,
    };
    let mut i = 0usize;
    let mut k = k0;
    loop {
        let t = k * interval;
        let j = run_end(arrival, i, t);
        st.records(event_ts, arrival, marker, i, j)?;
        i = j;
        st.periodic(t)?;
        // The grid index that must see the next record: the first after `k`, since
        // every record up to `t` is processed (None: no record left).
        let next_record = (i < n).then(|| ceil_div(arrival[i], interval));
        let next = match (st.gen.next_call(k, interval), next_record) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(x) => x,
                None => break,
            },
        };
        if next > k1 {
            break;
        }
        k = next;
    }
    st.records(event_ts, arrival, marker, i, n)
}

/// An input column that must have one value per event.
fn same_length(column: &str, len: usize, events: usize) -> Result<()> {
    if len == events {
        return Ok(());
    }
    Err(Error::input(
        column,
        format!("has {len} values but event_time has {events}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watermark::BaseGenerator;
    use proptest::prelude::*;

    /// The reference of every driver test: every grid point, every record, one at a
    /// time, and each record's watermark read back from the output stream.
    #[allow(clippy::many_single_char_names)]
    fn naive(
        mut gen: Generator,
        ts: &[i64],
        arrival: &[i64],
        marker: Option<&[Option<i64>]>,
        p: &DriveParams,
    ) -> DriveOutput {
        let mut out = ChannelOutput::new();
        let mut rows = Vec::new();
        let mut i = 0;
        let k0 = ceil_div(p.start, p.interval);
        let k1 = ceil_div(p.until, p.interval);
        let feed = |gen: &mut Generator,
                    out: &mut ChannelOutput,
                    r: usize,
                    rows: &mut Vec<EmissionRow>| {
            let a = arrival[r];
            gen.on_event(ts[r], marker.and_then(|m| m[r]), &mut |e| {
                out.push(e, &mut |x| {
                    rows.push(EmissionRow {
                        time: a,
                        emission: x,
                    });
                });
            });
        };
        for k in k0..=k1 {
            let t = k * p.interval;
            while i < ts.len() && arrival[i] <= t {
                feed(&mut gen, &mut out, i, &mut rows);
                i += 1;
            }
            gen.on_periodic_emit(t, &mut |e| {
                out.push(e, &mut |x| {
                    rows.push(EmissionRow {
                        time: t,
                        emission: x,
                    });
                });
            });
        }
        while i < ts.len() {
            feed(&mut gen, &mut out, i, &mut rows);
            i += 1;
        }
        let record_watermark = arrival
            .iter()
            .map(|&a| {
                rows.iter()
                    .filter(|r| r.time < a)
                    .filter_map(|r| r.emission.watermark())
                    .fold(i64::MIN, i64::max)
            })
            .collect();
        DriveOutput {
            record_watermark,
            emissions: rows,
        }
    }

    fn both(
        gen: &Generator,
        ts: &[i64],
        arrival: &[i64],
        marker: Option<&[Option<i64>]>,
        p: DriveParams,
    ) -> DriveOutput {
        let mut g = gen.clone();
        let got = drive(&mut g, &mut ChannelOutput::new(), ts, arrival, marker, &p).unwrap();
        assert_eq!(got, naive(gen.clone(), ts, arrival, marker, &p));
        got
    }

    /// Any built-in generator, with or without idleness.
    fn generator() -> impl Strategy<Value = Generator> {
        (0u8..4, 0i64..50, prop::option::of(1i64..300)).prop_map(|(kind, param, idle)| {
            let g = Generator::new(match kind {
                0 => BaseGenerator::bounded(param).unwrap(),
                1 => BaseGenerator::Punctuated,
                2 => BaseGenerator::processing_time_lag(param).unwrap(),
                _ => BaseGenerator::NoWatermarks,
            });
            match idle {
                Some(t) => g.with_idleness(t).unwrap(),
                None => g,
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The vectorized driver (runs, skipped grid points) equals the naive one, and
        /// the forwarded watermarks only grow.
        #[test]
        fn driver_matches_naive_simulation(
            gen in generator(),
            // (event time, arrival delta, marker)
            recs in prop::collection::vec(
                (
                    -100i64..1000,
                    prop_oneof![3 => 0i64..20, 1 => 0i64..2000],
                    prop::option::of(-50i64..1000),
                ),
                0..60,
            ),
            interval in 1i64..300,
            start in -500i64..500,
            span in 0i64..5000,
        ) {
            let mut a = start;
            let arrival: Vec<i64> = recs.iter().map(|&(_, d, _)| { a += d; a }).collect();
            let ts: Vec<i64> = recs.iter().map(|r| r.0).collect();
            let marker: Vec<Option<i64>> = recs.iter().map(|r| r.2).collect();
            let p = DriveParams { interval, start, until: start + span };
            let got = both(&gen, &ts, &arrival, Some(&marker), p);
            let mut last = i64::MIN;
            for r in &got.emissions {
                if let Emission::Watermark(w) = r.emission {
                    prop_assert!(w > last);
                    last = w;
                }
            }
        }
    }

    #[test]
    fn bounded_tie_rule_and_gaps() {
        let g = Generator::new(BaseGenerator::bounded(10).unwrap());
        let ts = [100, 95, 130, 500];
        let arrival = [0, 200, 200, 5000];
        let p = DriveParams {
            interval: 200,
            start: 0,
            until: 6000,
        };
        let o = both(&g, &ts, &arrival, None, p);
        assert_eq!(o.record_watermark, vec![i64::MIN, 89, 89, 119]);
        let times: Vec<i64> = o.emissions.iter().map(|r| r.time).collect();
        assert_eq!(times, vec![0, 200, 5000]);
    }

    #[test]
    fn idleness_skips_and_matches_naive() {
        let g = Generator::new(BaseGenerator::bounded(5).unwrap())
            .with_idleness(1000)
            .unwrap();
        let ts = [10, 20, 3000, 3001, 9000];
        let arrival = [10, 20, 3000, 3001, 9000];
        let p = DriveParams {
            interval: 100,
            start: -250,
            until: 12_345,
        };
        let o = both(&g, &ts, &arrival, None, p);
        assert!(o.emissions.iter().any(|r| r.emission == Emission::Idle));
        assert!(o.emissions.iter().any(|r| r.emission == Emission::Active));
    }

    #[test]
    fn clock_zero_quirk_in_driver() {
        let g = Generator::new(BaseGenerator::bounded(0).unwrap())
            .with_idleness(100)
            .unwrap();
        both(
            &g,
            &[],
            &[],
            None,
            DriveParams {
                interval: 50,
                start: -100,
                until: 1000,
            },
        );
    }

    #[test]
    fn punctuated_same_arrival_does_not_see_sibling() {
        let g = Generator::new(BaseGenerator::Punctuated);
        let ts = [1, 2, 3, 4];
        let arrival = [5, 5, 6, 6];
        let marker = [Some(10), Some(20), None, Some(15)];
        let o = both(
            &g,
            &ts,
            &arrival,
            Some(&marker),
            DriveParams {
                interval: 100,
                start: 0,
                until: 0,
            },
        );
        assert_eq!(o.record_watermark, vec![i64::MIN, i64::MIN, 20, 20]);
    }

    #[test]
    fn lag_emits_every_grid_point() {
        let g = Generator::new(BaseGenerator::processing_time_lag(30).unwrap());
        let o = both(
            &g,
            &[1],
            &[1],
            None,
            DriveParams {
                interval: 10,
                start: 0,
                until: 100,
            },
        );
        assert_eq!(o.emissions.len(), 11);
    }

    #[test]
    fn extremes_do_not_overflow() {
        // Timer start + timeout == MAX with interval 1: the skip target saturates.
        let g = Generator::new(BaseGenerator::bounded(0).unwrap())
            .with_idleness(i64::MAX - 50)
            .unwrap();
        both(
            &g,
            &[1],
            &[1],
            None,
            DriveParams {
                interval: 1,
                start: 49,
                until: 300,
            },
        );
        // A grid right at the bottom of the i64 range, with wrapping bounded arithmetic.
        let g = Generator::new(BaseGenerator::bounded(i64::MAX).unwrap());
        let lo = i64::MIN;
        both(
            &g,
            &[lo, 5, i64::MAX],
            &[lo, lo + 3, lo + 40],
            None,
            DriveParams {
                interval: 7,
                start: lo,
                until: lo + 100,
            },
        );
    }

    #[test]
    fn a_grid_reaching_the_top_of_the_range_ends() {
        // Issue 18.4: `k1 + 1` wrapped and the loop never ended. Every generator kind
        // whose calls can be skipped returns at once, whatever the span.
        let top = i64::MAX;
        for g in [
            Generator::new(BaseGenerator::bounded(3).unwrap()),
            Generator::new(BaseGenerator::bounded(3).unwrap())
                .with_idleness(10)
                .unwrap(),
            Generator::new(BaseGenerator::NoWatermarks),
        ] {
            let p = DriveParams {
                interval: 1,
                start: 0,
                until: top,
            };
            let mut gen = g.clone();
            let o = drive(
                &mut gen,
                &mut ChannelOutput::new(),
                &[5, 9],
                &[0, top],
                None,
                &p,
            )
            .unwrap();
            assert_eq!(o.record_watermark.len(), 2);
        }
    }

    #[test]
    fn a_lag_generator_over_a_huge_grid_is_refused_up_front() {
        let mut g = Generator::new(BaseGenerator::processing_time_lag(5).unwrap());
        let p = DriveParams {
            interval: 1,
            start: 0,
            until: i64::MAX - 1,
        };
        let e = drive(&mut g, &mut ChannelOutput::new(), &[1], &[0], None, &p).unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidParameter {
                name: "emit_interval",
                ..
            }
        ));
    }

    #[test]
    fn errors_name_the_parameter() {
        let mut g = Generator::new(BaseGenerator::monotonous());
        let mut o = ChannelOutput::new();
        let p = DriveParams {
            interval: 10,
            start: 0,
            until: 10,
        };
        let e = drive(&mut g, &mut o, &[1, 2], &[2, 1], None, &p).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { ref column, .. } if column == "arrival"));
        let bad = DriveParams { interval: 0, ..p };
        let e = drive(&mut g, &mut o, &[], &[], None, &bad).unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidParameter {
                name: "emit_interval",
                ..
            }
        ));
        let huge = DriveParams {
            interval: 10,
            start: 0,
            until: i64::MAX,
        };
        assert!(drive(&mut g, &mut o, &[], &[], None, &huge).is_err());
        assert!(drive(&mut g, &mut o, &[1], &[], None, &p).is_err());
    }
}
