//! Every snapshot carries a checksum: any single corrupted byte and any truncation
//! is refused with [`Error::Snapshot`], for every kind of snapshot.

use floodmark::watermark::{BaseGenerator, Channel, Generator, Multiplexer, Valve, Via};
use floodmark::window::{
    Advance, AggFn, AggSpec, Batch, KeyCol, OperatorConfig, ValueCol, WindowAssigner,
    WindowOperator,
};
use floodmark::Error;

fn generator_snapshot() -> Vec<u8> {
    let mut g = Generator::new(BaseGenerator::bounded(7).unwrap())
        .with_idleness(100)
        .unwrap();
    g.on_event(1234, None, &mut |_| {});
    g.on_periodic_emit(5000, &mut |_| {});
    Channel::new(g).snapshot()
}

fn valve_snapshot() -> Vec<u8> {
    let mut v = Valve::new(3).unwrap();
    v.input_watermark(0, 10, &mut |_| {}).unwrap();
    v.input_watermark(1, 20, &mut |_| {}).unwrap();
    v.input_status(2, true, &mut |_| {}).unwrap();
    v.snapshot()
}

fn multiplexer_snapshot() -> Vec<u8> {
    let mut m = Multiplexer::new();
    m.register("a").unwrap();
    m.register("bc").unwrap();
    m.emit_watermark("a", 10, Via::Immediate).unwrap();
    m.mark("bc", true, Via::Deferred).unwrap();
    m.snapshot()
}

fn operator(assigner: WindowAssigner) -> WindowOperator {
    let agg = |func, column| AggSpec { func, column };
    WindowOperator::new(OperatorConfig {
        assigner,
        allowed_lateness: 5,
        key_names: vec!["k".into()],
        value_names: vec!["v".into()],
        aggs: vec![agg(AggFn::Count, None), agg(AggFn::Max, Some(0))],
    })
    .unwrap()
}

fn operator_snapshot() -> Vec<u8> {
    let mut op = operator(WindowAssigner::sliding(10, 5, 0).unwrap());
    let keys = ["x", "yy", "x"];
    let ts = [1, 7, 12];
    let v = [3, 4, 5];
    let batch = Batch {
        keys: vec![KeyCol::Utf8(keys.iter().map(|k| Some(*k)).collect())],
        event_time: &ts,
        event_time_valid: None,
        values: vec![ValueCol::Int64(&v, None)],
        arrival: None,
        arrival_valid: None,
    };
    let adv = [Advance {
        position: 2,
        watermark: 9,
        time: None,
    }];
    op.process(&batch, &adv).unwrap();
    op.snapshot()
}

fn restore_generator(b: &[u8]) -> floodmark::Result<()> {
    Channel::restore(b).map(|_| ())
}
fn restore_valve(b: &[u8]) -> floodmark::Result<()> {
    Valve::restore(b).map(|_| ())
}
fn restore_multiplexer(b: &[u8]) -> floodmark::Result<()> {
    Multiplexer::restore(b).map(|_| ())
}
fn restore_operator(b: &[u8]) -> floodmark::Result<()> {
    operator(WindowAssigner::sliding(10, 5, 0).unwrap()).restore(b)
}

type Restore = fn(&[u8]) -> floodmark::Result<()>;

#[test]
fn every_corrupted_byte_and_every_truncation_is_refused() {
    let cases: [(&str, Vec<u8>, Restore); 4] = [
        ("generator", generator_snapshot(), restore_generator),
        ("valve", valve_snapshot(), restore_valve),
        ("multiplexer", multiplexer_snapshot(), restore_multiplexer),
        ("window operator", operator_snapshot(), restore_operator),
    ];
    let mut accepted = Vec::new();
    for (name, snap, restore) in cases {
        restore(&snap).unwrap();
        for i in 0..snap.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = snap.clone();
                bad[i] ^= flip;
                match restore(&bad) {
                    Err(Error::Snapshot(_)) => {}
                    other => accepted.push(format!("{name}: byte {i} ^ {flip:#x}: {other:?}")),
                }
            }
        }
        for len in 0..snap.len() {
            match restore(&snap[..len]) {
                Err(Error::Snapshot(_)) => {}
                other => accepted.push(format!("{name}: truncated to {len}: {other:?}")),
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "{} corruptions accepted, e.g. {:?}",
        accepted.len(),
        &accepted[..accepted.len().min(5)]
    );
}
