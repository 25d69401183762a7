//! Window operator throughput: 10M records, 10,000 int64 keys, arrival-ordered with
//! some disorder, a watermark advance every 1000 records (bounded out-of-orderness),
//! all in one vectorized call, then end of input.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use floodmark::window::{
    Advance, AggFn, AggSpec, Batch, KeyCol, OperatorConfig, ValueCol, WindowAssigner,
    WindowOperator,
};

const N: usize = 10_000_000;
const KEYS: u64 = 10_000;
const DISORDER: i64 = 500;

struct Data {
    keys: Vec<i64>,
    ts: Vec<i64>,
    values: Vec<i64>,
    advances: Vec<Advance>,
}

fn data() -> Data {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut keys, mut ts, mut values, mut advances) = (
        Vec::with_capacity(N),
        Vec::with_capacity(N),
        Vec::with_capacity(N),
        Vec::new(),
    );
    let mut max_ts = i64::MIN;
    for i in 0..N {
        let r = next();
        keys.push((r % KEYS) as i64);
        let t = i as i64 - ((r >> 32) as i64 % DISORDER);
        max_ts = max_ts.max(t);
        ts.push(t);
        values.push((r >> 20) as i64 % 1000);
        if i % 1000 == 999 {
            advances.push(Advance {
                position: i + 1,
                watermark: max_ts - DISORDER - 1,
                time: None,
            });
        }
    }
    Data {
        keys,
        ts,
        values,
        advances,
    }
}

fn run(d: &Data, assigner: WindowAssigner, aggs: Vec<AggSpec>) -> usize {
    let cfg = OperatorConfig {
        assigner,
        allowed_lateness: 0,
        key_names: vec!["k".into()],
        value_names: vec!["v".into()],
        aggs,
    };
    let mut op = WindowOperator::new(cfg).unwrap();
    let batch = Batch {
        keys: vec![KeyCol::Int64(&d.keys, None)],
        event_time: &d.ts,
        event_time_valid: None,
        values: vec![ValueCol::Int64(&d.values, None)],
        arrival: None,
        arrival_valid: None,
    };
    let out = op.process(&batch, &d.advances).unwrap();
    out.results.len() + op.finish(None).results.len() + out.late_rows.len()
}

fn bench(c: &mut Criterion) {
    let d = data();
    let count_sum = vec![
        AggSpec {
            func: AggFn::Count,
            column: None,
        },
        AggSpec {
            func: AggFn::Sum,
            column: Some(0),
        },
    ];
    let mut g = c.benchmark_group("windows");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("tumbling_count_sum", |b| {
        b.iter(|| {
            black_box(run(
                &d,
                WindowAssigner::tumbling(100_000, 0).unwrap(),
                count_sum.clone(),
            ))
        });
    });
    g.bench_function("sliding_5x_count_sum", |b| {
        b.iter(|| {
            black_box(run(
                &d,
                WindowAssigner::sliding(100_000, 20_000, 0).unwrap(),
                count_sum.clone(),
            ))
        });
    });
    g.bench_function("session_count_sum", |b| {
        b.iter(|| {
            black_box(run(
                &d,
                WindowAssigner::session(20_000).unwrap(),
                count_sum.clone(),
            ))
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
