//! Property tests of the watermark core: valve invariants (against a naive
//! scan-based valve), monotone generators, snapshot/restore mid-stream. (The
//! vectorized driver is checked against the naive one in `rust/watermark/driver.rs`.)
#![allow(clippy::many_single_char_names, clippy::semicolon_if_nothing_returned)]

use floodmark::watermark::{
    BaseGenerator, Emission, Generator, Multiplexer, MultiplexerStep, Valve, Via,
};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum VIn {
    Wm(i64, i64),
    Status(i64, bool),
}

fn valve_input(n: i64) -> impl Strategy<Value = VIn> {
    prop_oneof![
        4 => (0i64..n, -20i64..200).prop_map(|(c, w)| VIn::Wm(c, w)),
        1 => (0i64..n, any::<bool>()).prop_map(|(c, i)| VIn::Status(c, i)),
    ]
}

/// A valve of 1 to 12 channels and inputs for it: deep enough heaps that removing an
/// idle channel from the middle needs the sift-up after the sift-down.
fn valve_case() -> impl Strategy<Value = (i64, Vec<VIn>)> {
    (1i64..=12).prop_flat_map(|n| (Just(n), prop::collection::vec(valve_input(n), 0..80)))
}

fn apply(v: &mut Valve, i: VIn) -> Vec<Emission> {
    let mut e = Vec::new();
    match i {
        VIn::Wm(c, w) => v.input_watermark(c, w, &mut |x| e.push(x)).unwrap(),
        VIn::Status(c, idle) => v.input_status(c, idle, &mut |x| e.push(x)).unwrap(),
    }
    e
}

/// Flink's `StatusWatermarkValve`, transcribed literally with linear scans.
struct NaiveValve {
    wm: Vec<i64>,
    idle: Vec<bool>,
    aligned: Vec<bool>,
    last: i64,
    valve_idle: bool,
}

impl NaiveValve {
    fn new(n: usize) -> Self {
        Self {
            wm: vec![i64::MIN; n],
            idle: vec![false; n],
            aligned: vec![true; n],
            last: i64::MIN,
            valve_idle: false,
        }
    }
    fn new_min(&mut self, e: &mut Vec<Emission>) {
        let min = (0..self.wm.len())
            .filter(|&c| self.aligned[c])
            .map(|c| self.wm[c])
            .min();
        if let Some(m) = min {
            if m > self.last {
                self.last = m;
                e.push(Emission::Watermark(m));
            }
        }
    }
    fn apply(&mut self, i: VIn) -> Vec<Emission> {
        let mut e = Vec::new();
        match i {
            VIn::Wm(c, w) => {
                let c = c as usize;
                if !self.valve_idle && !self.idle[c] && w > self.wm[c] {
                    self.wm[c] = w;
                    if !self.aligned[c] && w >= self.last {
                        self.aligned[c] = true;
                    }
                    self.new_min(&mut e);
                }
            }
            VIn::Status(c, true) => {
                let c = c as usize;
                if !self.idle[c] {
                    self.idle[c] = true;
                    self.aligned[c] = false;
                    if self.idle.iter().all(|&b| b) {
                        if self.wm[c] == self.last {
                            let max = *self.wm.iter().max().unwrap();
                            if max > self.last {
                                self.last = max;
                                e.push(Emission::Watermark(max));
                            }
                        }
                        self.valve_idle = true;
                        e.push(Emission::Idle);
                    } else if self.wm[c] == self.last {
                        self.new_min(&mut e);
                    }
                }
            }
            VIn::Status(c, false) => {
                let c = c as usize;
                if self.idle[c] {
                    self.idle[c] = false;
                    if self.wm[c] >= self.last {
                        self.aligned[c] = true;
                    }
                    if self.valve_idle {
                        self.valve_idle = false;
                        e.push(Emission::Active);
                    }
                }
            }
        }
        e
    }
}

#[derive(Debug, Clone)]
struct GenSpec {
    kind: u8,
    param: i64,
    idle: Option<i64>,
}

fn gen_spec() -> impl Strategy<Value = GenSpec> {
    (0u8..4, 0i64..50, prop::option::of(1i64..300)).prop_map(|(kind, param, idle)| GenSpec {
        kind,
        param,
        idle,
    })
}

fn build(s: &GenSpec) -> Generator {
    let base = match s.kind {
        0 => BaseGenerator::bounded(s.param).unwrap(),
        1 => BaseGenerator::Punctuated,
        2 => BaseGenerator::processing_time_lag(s.param).unwrap(),
        _ => BaseGenerator::NoWatermarks,
    };
    let g = Generator::new(base);
    match s.idle {
        Some(t) => g.with_idleness(t).unwrap(),
        None => g,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn valve_matches_naive_and_keeps_invariants((n, inputs) in valve_case()) {
        let mut v = Valve::new(n as usize).unwrap();
        let mut naive = NaiveValve::new(n as usize);
        let mut last = i64::MIN;
        for &i in &inputs {
            let got = apply(&mut v, i);
            prop_assert_eq!(&got, &naive.apply(i));
            for e in got {
                if let Emission::Watermark(w) = e {
                    prop_assert!(w > last, "valve output decreased");
                    last = w;
                }
            }
            for c in 0..n {
                let (wm, idle, aligned) = v.channel(c).unwrap();
                if aligned && !idle {
                    prop_assert!(v.watermark() <= wm, "output exceeds an aligned active channel");
                }
            }
            if let Some(c) = v.min_channel() {
                let (wm, _, aligned) = v.channel(c as i64).unwrap();
                prop_assert!(aligned);
                for d in 0..n {
                    let (w2, _, a2) = v.channel(d).unwrap();
                    prop_assert!(!a2 || w2 >= wm);
                }
            }
        }
    }

    #[test]
    fn generator_output_never_decreases(
        bound in 0i64..100,
        idle in prop::option::of(1i64..50),
        steps in prop::collection::vec(prop_oneof![(-200i64..200).prop_map(Some), Just(None)], 0..80),
    ) {
        let spec = GenSpec { kind: 0, param: bound, idle };
        let mut g = build(&spec);
        let mut last = i64::MIN;
        for (now, s) in steps.into_iter().enumerate() {
            let mut e = Vec::new();
            match s {
                Some(ts) => g.on_event(ts, None, &mut |x| e.push(x)),
                None => g.on_periodic_emit(now as i64 * 10 + 1, &mut |x| e.push(x)),
            }
            for x in e {
                if let Emission::Watermark(w) = x {
                    prop_assert!(w >= last);
                    last = w;
                }
            }
        }
    }

    #[test]
    fn generator_snapshot_restore_mid_stream(
        spec in gen_spec(),
        steps in prop::collection::vec((prop::option::of(-200i64..200), prop::option::of(0i64..100)), 1..60),
        cut in 0usize..60,
    ) {
        let run = |g: &mut Generator, steps: &[(Option<i64>, Option<i64>)], base: usize| {
            let mut e = Vec::new();
            for (k, &(ev, m)) in steps.iter().enumerate() {
                match ev {
                    Some(ts) => g.on_event(ts, m, &mut |x| e.push(x)),
                    None => g.on_periodic_emit(((base + k) as i64) * 7, &mut |x| e.push(x)),
                }
            }
            e
        };
        let cut = cut.min(steps.len());
        let mut whole = build(&spec);
        let want = run(&mut whole, &steps, 0);
        let mut first = build(&spec);
        let mut got = run(&mut first, &steps[..cut], 0);
        let mut restored = Generator::restore(&first.snapshot()).unwrap();
        got.extend(run(&mut restored, &steps[cut..], cut));
        prop_assert_eq!(got, want);
        prop_assert_eq!(restored, whole);
    }

    #[test]
    fn valve_snapshot_restore_mid_stream(inputs in prop::collection::vec(valve_input(4), 0..60), cut in 0usize..60) {
        let cut = cut.min(inputs.len());
        let mut whole = Valve::new(4).unwrap();
        let want: Vec<Vec<Emission>> = inputs.iter().map(|&i| apply(&mut whole, i)).collect();
        let mut first = Valve::new(4).unwrap();
        let mut got: Vec<Vec<Emission>> = inputs[..cut].iter().map(|&i| apply(&mut first, i)).collect();
        let mut restored = Valve::restore(&first.snapshot()).unwrap();
        got.extend(inputs[cut..].iter().map(|&i| apply(&mut restored, i)));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn multiplexer_snapshot_restore_mid_stream(
        ops in prop::collection::vec((0u8..6, 0u8..3, -10i64..100), 0..60),
        cut in 0usize..60,
    ) {
        fn step(m: &mut Multiplexer, (op, id, w): (u8, u8, i64)) -> String {
            let id = ["a", "b", "c"][id as usize];
            let via = if w % 2 == 0 { Via::Immediate } else { Via::Deferred };
            let r = match op {
                0 => m.register(id).map(|()| MultiplexerStep::default()),
                1 => Ok(if m.unregister(id) { MultiplexerStep::default() } else { m.on_periodic_emit() }),
                2 => m.emit_watermark(id, w, via),
                3 => m.mark(id, true, via),
                4 => m.mark(id, false, via),
                _ => Ok(m.on_periodic_emit()),
            };
            format!("{r:?}")
        }
        let cut = cut.min(ops.len());
        let mut whole = Multiplexer::new();
        let want: Vec<String> = ops.iter().map(|&o| step(&mut whole, o)).collect();
        let mut first = Multiplexer::new();
        let mut got: Vec<String> = ops[..cut].iter().map(|&o| step(&mut first, o)).collect();
        let mut restored = Multiplexer::restore(&first.snapshot()).unwrap();
        got.extend(ops[cut..].iter().map(|&o| step(&mut restored, o)));
        prop_assert_eq!(got, want);
    }
}
