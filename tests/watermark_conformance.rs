//! The Flink 2.3.0 conformance vectors of modes `generator`, `valve` and
//! `multiplexer`, run directly against the Rust core (the Python suite runs them
//! through the bindings too). Every `*.json` under `tests/conformance` (or
//! `$FLOODMARK_CONFORMANCE_DIR`) of those modes is checked; all mismatches are listed.

use std::path::{Path, PathBuf};

use floodmark::watermark::{
    BaseGenerator, Emission, Generator, ListenerEvent, Multiplexer, MultiplexerStep, Valve, Via,
};
use floodmark::Error;
use serde_json::{json, Value};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

fn cases(mode: &str) -> Vec<(String, Value, Value)> {
    let root = std::env::var("FLOODMARK_CONFORMANCE_DIR").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance"),
        PathBuf::from,
    );
    let mut all = Vec::new();
    files(&root, &mut all);
    all.sort();
    all.into_iter()
        .filter_map(|p| {
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (doc["scenario"]["mode"] == mode).then(|| {
                let name = p.strip_prefix(&root).unwrap().display().to_string();
                (name, doc["scenario"].clone(), doc["expected"].clone())
            })
        })
        .collect()
}

fn emitted(e: &[Emission], status_style: bool) -> Value {
    Value::Array(
        e.iter()
            .map(|x| match (x, status_style) {
                (Emission::Watermark(w), _) => json!({"type": "watermark", "ts": w}),
                (s, true) => json!({"type": "status", "status": s.kind_name()}),
                (s, false) => json!({"type": s.kind_name()}),
            })
            .collect(),
    )
}

/// The Java exception a floodmark error stands for.
fn java_name(e: &Error) -> &'static str {
    match e {
        Error::InvalidParameter { .. } => "IllegalArgumentException",
        Error::IllegalState(_) => "IllegalStateException",
        Error::ChannelOutOfRange { .. } => "IndexOutOfBoundsException",
        _ => "other",
    }
}

fn check_error(bad: &mut Vec<String>, at: &str, got: Option<&Error>, want: &Value) {
    let want = want["error"].as_str();
    let got = got.map(java_name);
    if got != want {
        bad.push(format!("{at}: error {got:?}, want {want:?}"));
    }
}

fn i(v: &Value) -> i64 {
    v.as_i64().expect("integer")
}

fn run_generator(s: &Value, want: &Value, at: &str, bad: &mut Vec<String>) {
    let made = (|| {
        let base = if s["generator"] == "monotonous" {
            BaseGenerator::monotonous()
        } else {
            BaseGenerator::bounded(i(&s["bound_ms"]))?
        };
        let g = Generator::new(base);
        match s["idle_timeout_ms"].as_i64() {
            Some(t) => g.with_idleness(t.saturating_mul(1_000_000)),
            None => Ok(g),
        }
    })();
    let mut g = match made {
        Ok(g) => {
            check_error(bad, &format!("{at} create"), None, &want["error"]);
            g
        }
        Err(e) => return check_error(bad, &format!("{at} create"), Some(&e), &want["error"]),
    };
    let mut clock = i(&s["clock_start_ms"]) * 1_000_000;
    for (k, (step, exp)) in s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["steps"].as_array().unwrap())
        .enumerate()
    {
        let mut out = Vec::new();
        if let Some(ts) = step["event"].as_i64() {
            g.on_event(ts, None, &mut |e| out.push(e));
        } else if step["periodic"].as_bool() == Some(true) {
            g.on_periodic_emit(clock, &mut |e| out.push(e));
        } else {
            clock += i(&step["advance_clock_ms"]) * 1_000_000;
        }
        if emitted(&out, false) != exp["emitted"] {
            bad.push(format!(
                "{at} step {k}: got {}, want {}",
                emitted(&out, false),
                exp["emitted"]
            ));
        }
    }
}

fn run_valve(s: &Value, want: &Value, at: &str, bad: &mut Vec<String>) {
    let mut v = Valve::new(s["num_channels"].as_u64().unwrap() as usize).unwrap();
    for (k, (step, exp)) in s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["steps"].as_array().unwrap())
        .enumerate()
    {
        let mut out = Vec::new();
        let ch = i(&step["channel"]);
        let r = match step["watermark"].as_i64() {
            Some(w) => v.input_watermark(ch, w, &mut |e| out.push(e)),
            None => v.input_status(ch, step["status"] == "idle", &mut |e| out.push(e)),
        };
        if emitted(&out, true) != exp["emitted"] {
            bad.push(format!(
                "{at} step {k}: got {}, want {}",
                emitted(&out, true),
                exp["emitted"]
            ));
        }
        check_error(
            bad,
            &format!("{at} step {k}"),
            r.as_ref().err(),
            &exp["error"],
        );
    }
}

fn run_multiplexer(s: &Value, want: &Value, at: &str, bad: &mut Vec<String>) {
    let mut m = Multiplexer::new();
    for (k, (step, exp)) in s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["steps"].as_array().unwrap())
        .enumerate()
    {
        let mut result = None;
        let r: Result<MultiplexerStep, Error> = if let Some(id) = step["register"].as_str() {
            m.register(id).map(|()| MultiplexerStep::default())
        } else if let Some(id) = step["unregister"].as_str() {
            result = Some(m.unregister(id));
            Ok(MultiplexerStep::default())
        } else if step["periodic"].as_bool() == Some(true) {
            Ok(m.on_periodic_emit())
        } else {
            let id = step["output"].as_str().unwrap();
            let via = if step["via"] == "deferred" {
                Via::Deferred
            } else {
                Via::Immediate
            };
            match step["watermark"].as_i64() {
                Some(w) => m.emit_watermark(id, w, via),
                None => m.mark(id, step["mark"] == "idle", via),
            }
        };
        let st = r.as_ref().cloned().unwrap_or_default();
        let mut got = json!({
            "emitted": emitted(&st.emitted, false),
            "listener": st.listener.iter().map(|l| match l {
                ListenerEvent::Watermark { output, ts } => json!({"output": output, "type": "watermark", "ts": ts}),
                ListenerEvent::Idle { output, idle } => json!({"output": output, "type": "idle", "idle": idle}),
            }).collect::<Vec<_>>(),
        });
        if let Some(b) = result {
            got["result"] = json!(b);
        }
        let mut exp_cmp = exp.clone();
        exp_cmp.as_object_mut().unwrap().remove("error");
        if got != exp_cmp {
            bad.push(format!("{at} step {k}: got {got}, want {exp_cmp}"));
        }
        check_error(
            bad,
            &format!("{at} step {k}"),
            r.as_ref().err(),
            &exp["error"],
        );
    }
}

fn run_mode(mode: &str, f: fn(&Value, &Value, &str, &mut Vec<String>)) {
    let cases = cases(mode);
    assert!(!cases.is_empty(), "no {mode} vectors found");
    let mut bad = Vec::new();
    for (name, s, want) in &cases {
        f(s, want, name, &mut bad);
    }
    assert!(
        bad.is_empty(),
        "{} mismatch(es):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn generator_vectors() {
    run_mode("generator", run_generator);
}

#[test]
fn valve_vectors() {
    run_mode("valve", run_valve);
}

#[test]
fn multiplexer_vectors() {
    run_mode("multiplexer", run_multiplexer);
}
