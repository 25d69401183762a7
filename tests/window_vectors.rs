//! Runs every `assign` and `windows` conformance vector against the Rust core.

use floodmark::window::{
    merge_windows, window_start_with_offset, AggColumn, AggFn, AggSpec, Batch, KeyCol,
    OperatorConfig, ValueCol, WindowAssigner, WindowOperator,
};
use serde_json::{json, Value};
use std::path::Path;

fn files(mode: &str) -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(mode);
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            (
                p.display().to_string(),
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty());
    out
}

fn assigner(s: &Value) -> floodmark::Result<WindowAssigner> {
    let g = |k: &str| s[k].as_i64().unwrap_or(0);
    match s["assigner"].as_str().unwrap() {
        "tumbling" => WindowAssigner::tumbling(g("size_ms"), g("offset_ms")),
        "sliding" => WindowAssigner::sliding(g("size_ms"), g("slide_ms"), g("offset_ms")),
        _ => WindowAssigner::session(g("gap_ms")),
    }
}

/// What floodmark gives for one step of an assign vector; `assigner` is only needed
/// (and only used) by `assign` steps.
fn assign_step(step: &Value, assigner: Option<&WindowAssigner>) -> Value {
    if let Some(ts) = step.get("assign") {
        let Some(a) = assigner else {
            return json!("unavailable");
        };
        let mut out = Vec::new();
        return match a.assign_windows(ts.as_i64().unwrap(), &mut out) {
            Ok(()) => {
                json!({"windows": out.iter().map(|w| json!([w.start, w.end])).collect::<Vec<_>>()})
            }
            Err(_) => json!("error"),
        };
    }
    if let Some(ts) = step.get("window_start") {
        return match window_start_with_offset(
            ts.as_i64().unwrap(),
            step["offset_ms"].as_i64().unwrap(),
            step["size_ms"].as_i64().unwrap(),
        ) {
            Ok(v) => json!({"start": v}),
            Err(_) => json!("error"),
        };
    }
    let ws: Vec<_> = step["merge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| floodmark::window::TimeWindow::new(w[0].as_i64().unwrap(), w[1].as_i64().unwrap()))
        .collect();
    json!({"merges": merge_windows(&ws).iter().map(|m| json!({
        "from": m.from.iter().map(|w| json!([w.start, w.end])).collect::<Vec<_>>(),
        "into": [m.into.start, m.into.end]})).collect::<Vec<_>>()})
}

/// The mismatches of one assign vector. When the assigner cannot be built (a
/// top-level `error`), only the steps that need it did not run (`AssignerUnavailable`):
/// `window_start` and `merge` steps are still checked (SEMANTICS.md, "How to compare").
fn assign_mismatches(name: &str, doc: &Value) -> Vec<String> {
    let s = &doc["scenario"];
    let exp = &doc["expected"];
    let built = assigner(s);
    let mut bad = Vec::new();
    if exp.get("error").is_some() == built.is_ok() {
        bad.push(format!("{name}: assigner built: {}", built.is_ok()));
    }
    for (i, step) in s["steps"].as_array().unwrap().iter().enumerate() {
        let want = &exp["steps"][i];
        let got = assign_step(step, built.as_ref().ok());
        let ok = match want["error"]["error"].as_str() {
            Some("AssignerUnavailable") => got == json!("unavailable"),
            Some(_) => got == json!("error"),
            None => &got == want,
        };
        if !ok {
            bad.push(format!("{name} step {i}: got {got}, want {want}"));
        }
    }
    bad
}

#[test]
fn assign_vectors() {
    let bad: Vec<String> = files("assign")
        .iter()
        .flat_map(|(name, doc)| assign_mismatches(name, doc))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn assign_runner_checks_the_steps_that_need_no_assigner() {
    // a vector whose assigner cannot be built (size 0): its assign step did not run,
    // its window_start and merge steps did, and must be checked
    let doc = |start: i64, merges: Value| {
        json!({
            "scenario": {"mode": "assign", "assigner": "tumbling", "size_ms": 0, "offset_ms": 0,
                         "steps": [{"assign": 1}, {"window_start": -7, "offset_ms": 0, "size_ms": 5},
                                   {"merge": [[0, 5], [5, 10]]}]},
            "expected": {"error": {"type": "error", "error": "IllegalArgumentException"},
                         "steps": [{"error": {"type": "error", "error": "AssignerUnavailable"}},
                                   {"start": start}, {"merges": merges}]}
        })
    };
    let right = json!([{"from": [[0, 5], [5, 10]], "into": [0, 10]}]);
    assert!(assign_mismatches("ok", &doc(-10, right.clone())).is_empty());
    assert_eq!(assign_mismatches("start", &doc(-9, right)).len(), 1);
    assert_eq!(assign_mismatches("merge", &doc(-10, json!([]))).len(), 1);
    // an assign step of such a vector must be marked as not run
    let mut d = doc(-10, json!([]));
    d["expected"]["steps"][0] = json!({"windows": []});
    assert_eq!(assign_mismatches("assign", &d).len(), 2);
    // and a vector that expects the assigner to fail, while it builds, is a mismatch
    let mut d = doc(-10, json!([{"from": [[0, 5], [5, 10]], "into": [0, 10]}]));
    d["scenario"]["size_ms"] = json!(10);
    assert!(!assign_mismatches("builds", &d).is_empty());
}

fn runs(v: &[Value]) -> Vec<Value> {
    // Sort each maximal run of consecutive window entries with equal end.
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        if v[i]["type"] == "window" {
            let mut j = i;
            while j < v.len() && v[j]["type"] == "window" && v[j]["end"] == v[i]["end"] {
                j += 1;
            }
            let mut run: Vec<Value> = v[i..j].to_vec();
            run.sort_by_key(ToString::to_string);
            out.extend(run);
            i = j;
        } else {
            out.push(v[i].clone());
            i += 1;
        }
    }
    out
}

fn emitted(
    op: &WindowOperator,
    out: &floodmark::window::Output,
    late_items: &[Value],
) -> Vec<Value> {
    let r = &out.results;
    let keys = match op.keys().values().map(|v| &v[0]) {
        Some(floodmark::window::KeyValues::Utf8(v)) => v.clone(),
        _ => Vec::new(),
    };
    let (AggColumn::Int64(count), AggColumn::Int64(sum)) = (&r.aggs[0], &r.aggs[1]) else {
        unreachable!()
    };
    let mut v: Vec<Value> = (0..r.len())
        .map(|i| {
            json!({"type": "window", "key": keys[r.key[i] as usize], "start": r.start[i], "end": r.end[i],
                   "count": count[i], "sum": sum[i], "watermark": r.watermark[i]})
        })
        .collect();
    for &row in &out.late_rows {
        let it = &late_items[row];
        v.push(json!({"type": "late", "key": it["key"], "ts": it["ts"], "value": it["value"]}));
    }
    v
}

#[test]
fn windows_vectors() {
    let mut bad = Vec::new();
    for (name, doc) in files("windows") {
        let s = &doc["scenario"];
        let exp = &doc["expected"];
        let cfg = OperatorConfig {
            assigner: assigner(s).unwrap(),
            allowed_lateness: s["allowed_lateness_ms"].as_i64().unwrap(),
            key_names: vec!["key".into()],
            value_names: vec!["value".into()],
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
        };
        let mut op = WindowOperator::new(cfg).unwrap();
        let mut last_wm = i64::MIN;
        for (i, item) in s["items"].as_array().unwrap().iter().enumerate() {
            let got = if let Some(w) = item.get("wm") {
                let w = w.as_i64().unwrap();
                let out = op.advance(w, None);
                let mut v = emitted(&op, &out, &[]);
                if w > last_wm {
                    last_wm = w;
                    v.push(json!({"type": "watermark", "ts": w}));
                }
                v
            } else {
                let ts = [item["ts"].as_i64().unwrap()];
                let val = [item["value"].as_i64().unwrap()];
                let batch = Batch {
                    keys: vec![KeyCol::Utf8(vec![item["key"].as_str()])],
                    event_time: &ts,
                    event_time_valid: None,
                    values: vec![ValueCol::Int64(&val, None)],
                    arrival: None,
                    arrival_valid: None,
                };
                let out = op.process(&batch, &[]).unwrap();
                emitted(&op, &out, std::slice::from_ref(item))
            };
            let want = exp["steps"][i]["emitted"].as_array().unwrap();
            if runs(&got) != runs(want) {
                bad.push(format!("{name} step {i}: got {got:?}\n   want {want:?}"));
            }
        }
        let out = op.finish(None);
        let mut got = emitted(&op, &out, &[]);
        if last_wm < i64::MAX {
            got.push(json!({"type": "watermark", "ts": i64::MAX}));
        }
        let want = exp["end_of_input"]["emitted"].as_array().unwrap();
        if runs(&got) != runs(want) {
            bad.push(format!("{name} end: got {got:?}\n   want {want:?}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
