//! Criterion benches of the watermark hot paths: the one-channel driver, the valve and
//! the timeline builder over many sparse channels.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use floodmark::watermark::{
    drive_into, BaseGenerator, BucketRow, ChannelOutput, DriveParams, Generator, TimelineBuilder,
    Valve,
};
use std::hint::black_box;

const N: usize = 10_000_000;

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// 10M records, one per tick of arrival, event times up to 1000 ticks late, with a
/// few long gaps in arrival.
fn records() -> (Vec<i64>, Vec<i64>) {
    let mut rng = Rng(42);
    let mut arrival = Vec::with_capacity(N);
    let mut ts = Vec::with_capacity(N);
    let mut a = 0i64;
    for i in 0..N {
        a += if i % 1_000_000 == 999_999 { 60_000 } else { 1 };
        arrival.push(a);
        ts.push(a - (rng.next() % 1000) as i64);
    }
    (ts, arrival)
}

fn bench_driver(c: &mut Criterion) {
    let (ts, arrival) = records();
    let params = DriveParams {
        interval: 200,
        start: arrival[0],
        until: arrival[N - 1],
    };
    let mut group = c.benchmark_group("driver");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(20);
    let bounded = Generator::new(BaseGenerator::bounded(1000).unwrap());
    let idle = bounded.clone().with_idleness(5_000).unwrap();
    for (name, gen) in [("bounded_10M", bounded), ("bounded_idleness_10M", idle)] {
        // Output buffers are reused across iterations, as a caller driving many
        // batches would (a fresh 80 MB buffer costs more in page faults than the loop).
        let (mut rec_wm, mut rows) = (Vec::new(), Vec::new());
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut g = gen.clone();
                let mut out = ChannelOutput::new();
                drive_into(
                    &mut g,
                    &mut out,
                    &ts,
                    &arrival,
                    None,
                    &params,
                    &mut rec_wm,
                    &mut rows,
                )
                .unwrap();
                black_box((rec_wm.len(), rows.len()))
            });
        });
    }
    group.finish();
}

fn bench_valve(c: &mut Criterion) {
    let mut group = c.benchmark_group("valve");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    for channels in [64usize, 10_000] {
        // Per channel, a watermark that grows by a random step; every 1000th update
        // toggles a channel idle and active again.
        let mut rng = Rng(7);
        let mut wm = vec![0i64; channels];
        let updates: Vec<(i64, i64)> = (0..N)
            .map(|_| {
                let ch = (rng.next() % channels as u64) as usize;
                wm[ch] += (rng.next() % 100) as i64;
                (ch as i64, wm[ch])
            })
            .collect();
        group.bench_function(format!("{channels}_channels_10M"), |b| {
            b.iter_batched(
                || Valve::new(channels).unwrap(),
                |mut v| {
                    let mut emitted = 0u64;
                    for (i, &(ch, w)) in updates.iter().enumerate() {
                        if i % 1000 == 999 {
                            v.input_status(ch, true, &mut |_| emitted += 1).unwrap();
                            v.input_status(ch, false, &mut |_| emitted += 1).unwrap();
                        }
                        v.input_watermark(ch, w, &mut |_| emitted += 1).unwrap();
                    }
                    black_box(emitted)
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

/// 1,000 channels each sending a record every ~330 ms of arrival (the 200 ms buckets of
/// a Kafka topic with 1,000 partitions and 10M records an hour), in arrival order,
/// through bounded out-of-orderness with idleness: the records path of the Spark
/// pipeline, where a record moves its channel's due call earlier at almost every row.
fn bench_builder(c: &mut Criterion) {
    const RECORDS: usize = 2_000_000;
    const CHANNELS: usize = 1_000;
    let mut rng = Rng(11);
    let rows: Vec<BucketRow> = (0..RECORDS)
        .map(|i| {
            let arrival = (i as i64) * 36 / 100; // 10M records an hour: ~0.36 ms apart
            BucketRow {
                channel: (rng.next() % CHANNELS as u64) as usize,
                bucket: (arrival + 199) / 200,
                max_ts: arrival - (rng.next() % 2_000) as i64,
            }
        })
        .collect();
    let generator = Generator::new(BaseGenerator::bounded(5_000).unwrap())
        .with_idleness(30_000)
        .unwrap();
    let mut group = c.benchmark_group("builder");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.sample_size(10);
    group.bench_function("1000_sparse_channels_idleness_2M", |b| {
        let mut in_force = Vec::with_capacity(RECORDS);
        b.iter(|| {
            let mut builder = TimelineBuilder::new(generator.clone(), CHANNELS, 200).unwrap();
            in_force.clear();
            for chunk in rows.chunks(10_000) {
                builder.push(chunk, &mut in_force).unwrap();
            }
            builder.finish().unwrap();
            black_box((in_force.len(), builder.take_timeline().len()))
        });
    });
    group.finish();
}

criterion_group!(benches, bench_driver, bench_valve, bench_builder);
criterion_main!(benches);
