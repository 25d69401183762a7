//! Unit tests of the window operator (SEMANTICS.md §5 examples).

use crate::window::aggregate::{AggColumn, AggFn, AggSpec, ValueCol};
use crate::window::assigner::WindowAssigner;
use crate::window::keys::KeyCol;
use crate::window::operator::{Advance, Batch, OperatorConfig, WindowOperator};
use crate::window::output::{DropReason, Output};

fn op(assigner: WindowAssigner, lateness: i64) -> WindowOperator {
    WindowOperator::new(OperatorConfig {
        assigner,
        allowed_lateness: lateness,
        key_names: vec!["k".into()],
        value_names: vec!["v".into()],
        aggs: vec![
            AggSpec {
                func: AggFn::Count,
                column: None,
            },
            AggSpec {
                func: AggFn::Sum,
                column: Some(0),
            },
        ],
    })
    .unwrap()
}

fn feed(op: &mut WindowOperator, ts: &[Option<i64>], vals: &[i64], advances: &[Advance]) -> Output {
    let keys = vec![7; ts.len()];
    let t: Vec<i64> = ts.iter().map(|x| x.unwrap_or(0)).collect();
    let valid: Vec<bool> = ts.iter().map(Option::is_some).collect();
    let batch = Batch {
        keys: vec![KeyCol::Int64(&keys, None)],
        event_time: &t,
        event_time_valid: Some(&valid),
        values: vec![ValueCol::Int64(vals, None)],
        arrival: None,
        arrival_valid: None,
    };
    op.process(&batch, advances).unwrap()
}

fn rows(out: &Output) -> Vec<(i64, i64, i64, i64, bool, i64)> {
    let (AggColumn::Int64(c), AggColumn::Int64(s)) = (&out.results.aggs[0], &out.results.aggs[1])
    else {
        panic!("int columns")
    };
    (0..out.results.len())
        .map(|i| {
            let r = &out.results;
            (
                r.start[i],
                c[i].unwrap(),
                s[i].unwrap(),
                r.watermark[i],
                r.late[i],
                r.trigger_position[i],
            )
        })
        .collect()
}

fn adv(position: usize, watermark: i64) -> Advance {
    Advance {
        position,
        watermark,
        time: None,
    }
}

#[test]
fn late_refires_within_lateness_then_side_output() {
    // edge_late_within_lateness_refire: tumbling 10, L=5.
    let mut o = op(WindowAssigner::tumbling(10, 0).unwrap(), 5);
    let out = feed(
        &mut o,
        &[Some(1), Some(2), Some(3), Some(4), Some(5), Some(6)],
        &[1, 2, 4, 8, 16, 32],
        &[adv(2, 10), adv(4, 13), adv(5, 14)],
    );
    assert_eq!(
        rows(&out),
        vec![
            (0, 2, 3, 10, false, 2),
            (0, 3, 7, 10, true, 2),
            (0, 4, 15, 10, true, 3),
            (0, 5, 31, 13, true, 4),
        ]
    );
    assert_eq!(out.late_rows, vec![5]);
    assert_eq!(out.late_watermark, vec![14]);
    assert_eq!(o.live_windows(), 0, "state freed at cleanup");
    assert_eq!(o.position(), 6);
}

#[test]
fn session_late_bridge_fires_merged_window() {
    // edge_session_late_merge: gap 5, L=20.
    let mut o = op(WindowAssigner::session(5).unwrap(), 20);
    let out = feed(
        &mut o,
        &[Some(0), Some(10), Some(5), Some(14)],
        &[1, 2, 4, 8],
        &[adv(2, 20)],
    );
    assert_eq!(
        rows(&out),
        vec![
            (0, 1, 1, 20, false, 2),
            (10, 1, 2, 20, false, 2),
            (0, 3, 7, 20, true, 2),
            (0, 4, 15, 20, true, 3)
        ]
    );
    assert_eq!(o.live_windows(), 1);
    assert_eq!(rows(&o.finish(None)), vec![]);
    assert_eq!(o.live_windows(), 0);
}

#[test]
fn drops_are_reported_with_reasons() {
    let mut o = op(WindowAssigner::sliding(5, 10, 0).unwrap(), 0);
    let out = feed(
        &mut o,
        &[None, Some(i64::MIN), Some(6), Some(7)],
        &[0; 4],
        &[adv(3, 20)],
    );
    assert_eq!(out.dropped_rows, vec![0, 1, 2]);
    assert_eq!(
        out.dropped_reason,
        vec![
            DropReason::NullEventTime,
            DropReason::MinEventTime,
            DropReason::NoWindow
        ]
    );
    assert_eq!(out.late_rows, vec![3]);
}

#[test]
fn non_increasing_advances_are_ignored_and_positions_checked() {
    let mut o = op(WindowAssigner::tumbling(10, 0).unwrap(), 0);
    let out = feed(&mut o, &[Some(1)], &[1], &[adv(1, 20), adv(1, 5)]);
    assert_eq!(rows(&out).len(), 1);
    assert_eq!(o.watermark(), 20);
    assert!(o.advance(19, None).results.is_empty());
    let keys = [1];
    let t = [1];
    let v = [1];
    let batch = Batch {
        keys: vec![KeyCol::Int64(&keys, None)],
        event_time: &t,
        event_time_valid: None,
        values: vec![ValueCol::Int64(&v, None)],
        arrival: None,
        arrival_valid: None,
    };
    assert!(o.process(&batch, &[adv(1, 30), adv(0, 40)]).is_err());
    assert!(o.process(&batch, &[adv(2, 30)]).is_err());
    assert_eq!(o.position(), 1, "a rejected batch changes nothing");
}

#[test]
fn snapshot_round_trip_and_config_check() {
    let mut a = op(WindowAssigner::tumbling(10, 0).unwrap(), 3);
    feed(&mut a, &[Some(1), Some(15)], &[1, 2], &[adv(2, 9)]);
    let snap = a.snapshot();
    let mut b = op(WindowAssigner::tumbling(10, 0).unwrap(), 3);
    b.restore(&snap).unwrap();
    assert_eq!(b.snapshot(), snap);
    let (ra, rb) = (
        feed(&mut a, &[Some(2)], &[4], &[]),
        feed(&mut b, &[Some(2)], &[4], &[]),
    );
    assert_eq!(rows(&ra), rows(&rb));
    assert_eq!(rows(&a.finish(None)), rows(&b.finish(None)));
    let refused = |mut other: WindowOperator| match other.restore(&snap) {
        Err(crate::Error::Snapshot(m)) => m,
        r => panic!("{r:?}"),
    };
    let m = refused(op(WindowAssigner::tumbling(20, 0).unwrap(), 3));
    assert!(m.contains("assigner") && m.contains("size: 20"), "{m}");
    let m = refused(op(WindowAssigner::tumbling(10, 0).unwrap(), 4));
    assert!(m.contains("allowed lateness (3, this one has 4)"), "{m}");
    let mut cfg = a.config().clone();
    cfg.aggs[1].func = AggFn::Max;
    let m = refused(WindowOperator::new(cfg).unwrap());
    assert!(
        m.contains(r#"["count", "sum(v)"], this one has ["count", "max(v)"]"#),
        "{m}"
    );
    assert!(b.restore(&snap[..snap.len() - 1]).is_err());
}

#[test]
fn invalid_configuration_is_an_error() {
    let mut cfg = op(WindowAssigner::session(1).unwrap(), 0).config().clone();
    cfg.allowed_lateness = -1;
    assert!(WindowOperator::new(cfg.clone()).is_err());
    cfg.allowed_lateness = 0;
    cfg.aggs.push(AggSpec {
        func: AggFn::Sum,
        column: Some(3),
    });
    assert!(WindowOperator::new(cfg).is_err());
}

#[test]
fn lookahead_holds_a_bounded_number_of_windows() {
    // 32 records of 20,000 sliding windows each: the lookahead must not hold them all.
    let mut o = op(WindowAssigner::sliding(20_000, 1, 0).unwrap(), 0);
    let ts: Vec<Option<i64>> = (0..32).map(Some).collect();
    let out = feed(&mut o, &ts, &[1; 32], &[]);
    assert!(out.late_rows.is_empty() && out.dropped_rows.is_empty());
    assert_eq!(o.live_windows(), 20_031);
    let held = o
        .lookahead
        .windows
        .capacity()
        .max(o.lookahead.found.capacity());
    assert!(held < 4 * 20_001, "the lookahead held {held} windows");
    let fin = o.finish(None);
    assert_eq!(fin.results.len(), 20_031);
}
