//! Window operator throughput: 10M records, 10,000 int64 keys, arrival-ordered with
//! some disorder, a watermark advance every 1000 records (bounded out-of-orderness),
//! all in one vectorized call, then end of input. And one key with many open session
//! windows (the watermark held back, as by a lagging partition).

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

/// A xorshift64 generator seeded with `state`.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

fn data() -> Data {
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
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
    run_batch(&d.keys, &d.ts, &d.values, &d.advances, assigner, aggs)
}

/// One vectorized call over the records, then end of input.
fn run_batch(
    keys: &[i64],
    ts: &[i64],
    values: &[i64],
    advances: &[Advance],
    assigner: WindowAssigner,
    aggs: Vec<AggSpec>,
) -> usize {
    let cfg = OperatorConfig {
        assigner,
        allowed_lateness: 0,
        key_names: vec!["k".into()],
        value_names: vec!["v".into()],
        aggs,
    };
    let mut op = WindowOperator::new(cfg).unwrap();
    let batch = Batch {
        keys: vec![KeyCol::Int64(keys, None)],
        event_time: ts,
        event_time_valid: None,
        values: vec![ValueCol::Int64(values, None)],
        arrival: None,
        arrival_valid: None,
    };
    let out = op.process(&batch, advances).unwrap();
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

    let mut g = c.benchmark_group("windows_one_key");
    let ts = open_sessions();
    let keys = vec![7; ts.len()];
    g.throughput(Throughput::Elements(ts.len() as u64));
    g.sample_size(10);
    g.bench_function("session_100k_open", |b| {
        b.iter(|| {
            black_box(run_batch(
                &keys,
                &ts,
                &ts,
                &[],
                WindowAssigner::session(20).unwrap(),
                count_sum.clone(),
            ))
        });
    });
    g.finish();
}

/// One key: 100,000 sessions (gap 20, 30 ticks apart) opened in a shuffled order,
/// then 20,000 records that each bridge two of them; no watermark until the end.
fn open_sessions() -> Vec<i64> {
    const OPEN: i64 = 100_000;
    let mut next = xorshift(0x2545_F491_4F6C_DD1D);
    let mut slots: Vec<i64> = (0..OPEN).collect();
    for i in (1..slots.len()).rev() {
        slots.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut ts: Vec<i64> = slots.iter().map(|s| s * 30).collect();
    ts.extend((0..OPEN / 5).map(|_| (next() % (OPEN as u64 - 1)) as i64 * 30 + 20));
    ts
}

criterion_group!(benches, bench);
criterion_main!(benches);
