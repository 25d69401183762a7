//! Properties of the window operator: batching does not matter, snapshot/restore at
//! any point does not matter, every record is accounted for, state is freed.

use floodmark::window::{
    Advance, AggColumn, AggFn, AggSpec, Batch, KeyCol, OperatorConfig, Output, ValueCol,
    WindowAssigner, WindowOperator,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Item {
    Rec { key: i64, ts: i64, v: i64 },
    Wm(i64),
}

fn assigner() -> impl Strategy<Value = WindowAssigner> {
    prop_oneof![
        (1i64..12)
            .prop_flat_map(|s| (Just(s), -s + 1..s))
            .prop_map(|(s, o)| WindowAssigner::tumbling(s, o).unwrap()),
        (1i64..15, 1i64..6)
            .prop_flat_map(|(s, sl)| (Just(s), Just(sl), -sl + 1..sl))
            .prop_map(|(s, sl, o)| WindowAssigner::sliding(s, sl, o).unwrap()),
        (1i64..8).prop_map(|g| WindowAssigner::session(g).unwrap()),
        // more than 16 live windows per key: the hash-map lookup path
        (17i64..40).prop_map(|s| WindowAssigner::sliding(s, 1, 0).unwrap()),
    ]
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0i64..4, -5i64..40, -9i64..10).prop_map(|(key, ts, v)| Item::Rec { key, ts, v }),
            1 => (-5i64..50).prop_map(Item::Wm),
        ],
        0..60,
    )
}

fn new_op(a: WindowAssigner, lateness: i64) -> WindowOperator {
    WindowOperator::new(OperatorConfig {
        assigner: a,
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
            AggSpec {
                func: AggFn::First,
                column: Some(0),
            },
        ],
    })
    .unwrap()
}

/// Flattened outputs: (results rows, late global indices, dropped global indices).
type Flat = (
    Vec<(i64, i64, i64, i64, bool, i64, i64)>,
    Vec<(i64, i64)>,
    Vec<i64>,
);

fn append(flat: &mut Flat, out: &Output, base: i64) {
    let r = &out.results;
    let AggColumn::Int64(count) = &r.aggs[0] else {
        unreachable!()
    };
    for (i, c) in count.iter().enumerate() {
        flat.0.push((
            i64::from(r.key[i]),
            r.start[i],
            r.end[i],
            r.watermark[i],
            r.late[i],
            r.trigger_position[i],
            c.unwrap(),
        ));
    }
    flat.1.extend(
        out.late_rows
            .iter()
            .zip(&out.late_watermark)
            .map(|(&i, &w)| (base + i as i64, w)),
    );
    flat.2
        .extend(out.dropped_rows.iter().map(|&i| base + i as i64));
}

fn run(
    a: WindowAssigner,
    lateness: i64,
    items: &[Item],
    cuts: &[usize],
    snap_at: Option<usize>,
) -> (Flat, usize) {
    let mut op = new_op(a, lateness);
    let mut flat: Flat = Default::default();
    let mut bounds = vec![0];
    bounds.extend(cuts.iter().copied().filter(|&c| c <= items.len()));
    bounds.push(items.len());
    bounds.sort_unstable();
    for (b, w) in bounds.windows(2).enumerate() {
        if snap_at == Some(b) {
            let bytes = op.snapshot();
            op = new_op(a, lateness);
            op.restore(&bytes).unwrap();
        }
        let (mut keys, mut ts, mut vs, mut adv) = (vec![], vec![], vec![], vec![]);
        for it in &items[w[0]..w[1]] {
            match *it {
                Item::Rec { key, ts: t, v } => {
                    keys.push(key);
                    ts.push(t);
                    vs.push(v);
                }
                Item::Wm(wm) => adv.push(Advance {
                    position: keys.len(),
                    watermark: wm,
                    time: None,
                }),
            }
        }
        let batch = Batch {
            keys: vec![KeyCol::Int64(&keys, None)],
            event_time: &ts,
            event_time_valid: None,
            values: vec![ValueCol::Int64(&vs, None)],
            arrival: None,
            arrival_valid: None,
        };
        let base = op.position() as i64;
        let out = op.process(&batch, &adv).unwrap();
        append(&mut flat, &out, base);
    }
    let out = op.finish(None);
    append(&mut flat, &out, 0);
    (flat, op.live_windows())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn batching_and_snapshots_do_not_matter(
        a in assigner(), lateness in prop_oneof![Just(0i64), 0i64..8], its in items(),
        cuts in prop::collection::vec(0usize..60, 0..5), snap in 0usize..6,
    ) {
        let (whole, live) = run(a, lateness, &its, &[], None);
        let (split, _) = run(a, lateness, &its, &cuts, Some(snap));
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(live, 0, "everything is freed after end of input");
        // every record is late, dropped, or in some window result (never two of these)
        let n = its.iter().filter(|i| matches!(i, Item::Rec { .. })).count() as i64;
        let late: Vec<i64> = whole.1.iter().map(|x| x.0).collect();
        for i in 0..n {
            let l = late.contains(&i);
            let d = whole.2.contains(&i);
            prop_assert!(!(l && d));
        }
        let windowed = n - late.len() as i64 - whole.2.len() as i64;
        prop_assert!(windowed >= 0);
        if matches!(a, WindowAssigner::Tumbling { .. }) {
            // each windowed record sits in exactly one window; the last firing of each
            // window counts it
            let mut last = std::collections::BTreeMap::new();
            for r in &whole.0 {
                last.insert((r.0, r.1), r.6);
            }
            prop_assert_eq!(last.values().sum::<i64>(), windowed);
        }
    }
}
