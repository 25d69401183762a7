//! Guards for rules no other test pinned down: each test names the Flink rule it holds
//! the code to; a plausible slip there would otherwise pass the suite.
#![allow(clippy::many_single_char_names)]

use floodmark::watermark::{BaseGenerator, BucketRow, Emission, Generator, TimelineBuilder, Valve};
use floodmark::window::{
    Advance, AggColumn, AggFn, AggSpec, Batch, KeyCol, OperatorConfig, Output, ValueCol,
    WindowAssigner, WindowOperator,
};
use proptest::prelude::*;

const MIN: i64 = i64::MIN;

// ---------------------------------------------------------------------------------
// The valve's minimum over the aligned channels, and the indexed heap that keeps it
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum VIn {
    Wm(i64, i64),
    Status(i64, bool),
}

fn apply(v: &mut Valve, i: VIn) -> Vec<Emission> {
    let mut e = Vec::new();
    match i {
        VIn::Wm(c, w) => v.input_watermark(c, w, &mut |x| e.push(x)).unwrap(),
        VIn::Status(c, idle) => v.input_status(c, idle, &mut |x| e.push(x)).unwrap(),
    }
    e
}

/// The smallest `(watermark, channel)` over the aligned channels, by a scan.
fn scan_min(v: &Valve) -> Option<(i64, usize)> {
    (0..v.num_channels())
        .filter_map(|c| {
            let (w, _, aligned) = v.channel(c as i64).unwrap();
            aligned.then_some((w, c))
        })
        .min()
}

/// Flink's `StatusWatermarkValve` emits the minimum over the aligned channels; a
/// channel going idle leaves that minimum, and the output never passes a channel still
/// in it. Here channel 0 going idle is removed from the middle of the heap and the
/// heap's last entry, moved into its place, is smaller than its new parent: without
/// the sift-up after the sift-down the top is no longer the minimum, and the valve
/// emits 3 while channel 2, aligned, holds 0.
#[test]
fn valve_idling_a_channel_keeps_the_minimum_of_the_aligned_ones() {
    use VIn::{Status as S, Wm as W};
    let inputs = [
        W(0, 18),
        S(7, true),
        W(3, 3),
        W(1, 0),
        S(4, true),
        W(2, 0),
        W(1, 19),
        W(8, 13),
        S(0, true),
        S(6, true),
        S(5, true),
    ];
    let mut v = Valve::new(9).unwrap();
    let out: Vec<Emission> = inputs.iter().flat_map(|&i| apply(&mut v, i)).collect();
    assert_eq!(out, vec![Emission::Watermark(0)]);
    assert_eq!(v.watermark(), 0);
    assert_eq!(v.min_channel(), Some(2));
}

/// Valve inputs over `n` channels; a watermark is drawn as a step past the channel's
/// current one (so most are accepted and channels spread apart, as real ones do).
#[derive(Debug, Clone, Copy)]
enum Step {
    Wm(i64, i64),
    Status(i64, bool),
}

fn valve_case() -> impl Strategy<Value = (usize, Vec<Step>)> {
    (3usize..=12).prop_flat_map(|n| {
        let c = 0..n as i64;
        let step = prop_oneof![
            3 => (c.clone(), 0i64..20).prop_map(|(c, d)| Step::Wm(c, d)),
            2 => (c, any::<bool>()).prop_map(|(c, i)| Step::Status(c, i)),
        ];
        (Just(n), prop::collection::vec(step, 0..60))
    })
}

fn resolve(v: &Valve, s: Step) -> VIn {
    match s {
        Step::Wm(c, d) => {
            let (w, _, _) = v.channel(c).unwrap();
            VIn::Wm(c, if w == MIN { d } else { w + 1 + d })
        }
        Step::Status(c, idle) => VIn::Status(c, idle),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Flink's valve over many channels (the heap is deep enough for a removal from its
    /// middle to need a sift-up): its output never decreases, never exceeds the
    /// minimum over the aligned channels while it is active, and `min_channel` is the
    /// aligned channel holding that minimum (the lowest on ties).
    #[test]
    fn valve_output_is_the_aligned_minimum_over_many_channels((n, steps) in valve_case()) {
        let mut v = Valve::new(n).unwrap();
        let mut last = MIN;
        for s in steps {
            let i = resolve(&v, s);
            for e in apply(&mut v, i) {
                if let Emission::Watermark(w) = e {
                    prop_assert!(w > last, "output decreased: {} after {}", w, last);
                    last = w;
                }
            }
            prop_assert_eq!(v.watermark(), last);
            let min = scan_min(&v);
            prop_assert_eq!(v.min_channel(), min.map(|(_, c)| c), "after {:?}", i);
            if let (false, Some((m, _))) = (v.is_idle(), min) {
                prop_assert!(v.watermark() <= m, "output {} above aligned {}", v.watermark(), m);
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Session windows: the timer of a merged window
// ---------------------------------------------------------------------------------

fn session_count(gap: i64, lateness: i64) -> WindowOperator {
    WindowOperator::new(OperatorConfig {
        assigner: WindowAssigner::session(gap).unwrap(),
        allowed_lateness: lateness,
        key_names: vec!["k".into()],
        value_names: vec!["v".into()],
        aggs: vec![AggSpec {
            func: AggFn::Count,
            column: None,
        }],
    })
    .unwrap()
}

fn feed(o: &mut WindowOperator, ts: &[i64], adv: &[Advance]) -> Output {
    let keys = vec![7i64; ts.len()];
    let vals = vec![1i64; ts.len()];
    let batch = Batch {
        keys: vec![KeyCol::Int64(&keys, None)],
        event_time: ts,
        event_time_valid: None,
        values: vec![ValueCol::Int64(&vals, None)],
        arrival: None,
        arrival_valid: None,
    };
    o.process(&batch, adv).unwrap()
}

/// `(start, end, count, watermark, late)` of each result.
fn fired(out: &Output) -> Vec<(i64, i64, i64, i64, bool)> {
    let r = &out.results;
    let AggColumn::Int64(count) = &r.aggs[0] else {
        unreachable!()
    };
    (0..r.len())
        .map(|i| {
            (
                r.start[i],
                r.end[i],
                count[i].unwrap(),
                r.watermark[i],
                r.late[i],
            )
        })
        .collect()
}

/// Flink's `EventTimeTrigger.onMerge` registers the merged window's timer only if its
/// max timestamp is above the current watermark (`>`); a window whose max timestamp
/// equals the watermark has fired already (the late record's own firing), so a later
/// watermark must not fire it again as on time.
#[test]
fn session_merged_at_the_watermark_registers_no_timer() {
    let mut o = session_count(10, 100);
    let first = feed(
        &mut o,
        &[0],
        &[Advance {
            position: 1,
            watermark: 9,
            time: None,
        }],
    );
    assert_eq!(fired(&first), vec![(0, 10, 1, 9, false)]);
    // [-3, 7) merges with [0, 10) into [-3, 10): max timestamp 9, the watermark.
    let late = feed(&mut o, &[-3], &[]);
    assert_eq!(fired(&late), vec![(-3, 10, 2, 9, true)]);
    assert_eq!(fired(&o.advance(20, None)), vec![]);
    assert_eq!(fired(&o.finish(None)), vec![]);
}

// ---------------------------------------------------------------------------------
// Timeline builder: a channel added mid-stream
// ---------------------------------------------------------------------------------

/// A split Flink discovers mid-stream gets its own generator, called periodically from
/// the next emit time on like the others; with idleness its timer starts at that first
/// call, so a split that never sends a record goes idle after the timeout (at 900 here:
/// first call at 300, idle once more than 500 has passed) and stops holding the
/// combined watermark back. Never called, it would hold it at 999 forever.
#[test]
fn inserted_channel_is_called_periodically_and_goes_idle() {
    let g = Generator::new(BaseGenerator::monotonous())
        .with_idleness(500)
        .unwrap();
    let mut b = TimelineBuilder::new(g, 1, 100).unwrap();
    let mut in_force = Vec::new();
    let row = |bucket: i64, max_ts: i64| BucketRow {
        channel: 0,
        bucket,
        max_ts,
    };
    b.push(&[row(1, 1000)], &mut in_force).unwrap();
    b.advance_to(2).unwrap();
    b.insert_channel(1).unwrap();
    let rows: Vec<BucketRow> = (3..20).map(|k| row(k, 1000 + 100 * k)).collect();
    b.push(&rows, &mut in_force).unwrap();
    b.finish().unwrap();
    assert_eq!(b.channel_status(1), Some((MIN, true)));
    let timeline: Vec<(i64, i64, bool)> = b
        .take_timeline()
        .iter()
        .map(|r| (r.time, r.watermark, r.idle))
        .collect();
    let mut want = vec![(100, 999, false)];
    want.extend((9..20).map(|k| (100 * k, 999 + 100 * k, false)));
    assert_eq!(timeline, want);
    assert_eq!(in_force.last().map(|f| f.combined), Some(2799));
}
