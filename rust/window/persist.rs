//! `snapshot()` / `restore()` of the whole window operator: configuration (checked on
//! restore), watermark, position counter, key dictionary, value types, and every live
//! window with its accumulators and pending timers.

use super::aggregate::{AggFn, Cell, ValueType};
use super::assigner::{TimeWindow, WindowAssigner};
use super::keys::KeyDict;
use super::operator::{OperatorConfig, WindowOperator};
use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

/// Snapshot kind byte of the window operator.
pub const SNAPSHOT_KIND: u8 = 0x57;

fn write_config(cfg: &OperatorConfig, w: &mut Writer) {
    match cfg.assigner {
        WindowAssigner::Tumbling { size, offset } => w.u64(0).i64(size).i64(offset).i64(0),
        WindowAssigner::Sliding {
            size,
            slide,
            offset,
        } => w.u64(1).i64(size).i64(slide).i64(offset),
        WindowAssigner::Session { gap } => w.u64(2).i64(gap).i64(0).i64(0),
    };
    w.i64(cfg.allowed_lateness);
    for names in [&cfg.key_names, &cfg.value_names] {
        w.u64(names.len() as u64);
        for n in names {
            w.bytes(n.as_bytes());
        }
    }
    w.u64(cfg.aggs.len() as u64);
    for a in &cfg.aggs {
        w.u64(u64::from(a.func.code()))
            .u64(a.column.map_or(0, |c| c as u64 + 1));
    }
}

fn read_config(r: &mut Reader<'_>) -> Result<OperatorConfig> {
    let tag = r.u64()?;
    let params = [r.i64()?, r.i64()?, r.i64()?];
    let assigner = match tag {
        0 => WindowAssigner::Tumbling {
            size: params[0],
            offset: params[1],
        },
        1 => WindowAssigner::Sliding {
            size: params[0],
            slide: params[1],
            offset: params[2],
        },
        2 => WindowAssigner::Session { gap: params[0] },
        _ => return Err(Error::Snapshot(format!("unknown assigner tag {tag}"))),
    };
    let allowed_lateness = r.i64()?;
    let mut lists = Vec::new();
    for _ in 0..2 {
        let n = r.len(8)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            let s = std::str::from_utf8(r.bytes()?)
                .map_err(|_| Error::Snapshot("bad column name".into()))?;
            names.push(s.to_owned());
        }
        lists.push(names);
    }
    let value_names = lists.pop().expect("two lists");
    let key_names = lists.pop().expect("two lists");
    let n = r.len(16)?;
    let mut aggs = Vec::with_capacity(n);
    for _ in 0..n {
        let func = AggFn::from_code(r.u64()? as u8)
            .ok_or_else(|| Error::Snapshot("bad aggregate".into()))?;
        let col = r.u64()?;
        aggs.push(super::aggregate::AggSpec {
            func,
            column: (col > 0).then(|| (col - 1) as usize),
        });
    }
    Ok(OperatorConfig {
        assigner,
        allowed_lateness,
        key_names,
        value_names,
        aggs,
    })
}

/// What differs between the configuration of a snapshot and an operator's, if
/// anything, e.g. `assigner (Session { gap: 5 }, this one has Session { gap: 6 })`.
fn config_difference(snap: &OperatorConfig, mine: &OperatorConfig) -> Option<String> {
    let what = if snap.assigner != mine.assigner {
        format!(
            "assigner ({:?}, this one has {:?})",
            snap.assigner, mine.assigner
        )
    } else if snap.allowed_lateness != mine.allowed_lateness {
        format!(
            "allowed lateness ({}, this one has {})",
            snap.allowed_lateness, mine.allowed_lateness
        )
    } else if snap.key_names != mine.key_names {
        format!(
            "key columns ({:?}, this one has {:?})",
            snap.key_names, mine.key_names
        )
    } else if snap.value_names != mine.value_names || snap.aggs != mine.aggs {
        let aggs = |c: &OperatorConfig| -> Vec<String> {
            c.aggs
                .iter()
                .map(|a| match a.column {
                    Some(i) => {
                        let column = c.value_names.get(i).map_or("?", String::as_str);
                        format!("{}({column})", a.func.name())
                    }
                    None => a.func.name().to_string(),
                })
                .collect()
        };
        format!(
            "aggregates ({:?}, this one has {:?})",
            aggs(snap),
            aggs(mine)
        )
    } else {
        return None;
    };
    Some(what)
}

impl WindowOperator {
    /// The operator's whole state as bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(SNAPSHOT_KIND);
        write_config(&self.cfg, &mut w);
        w.i64(self.watermark).u64(self.position);
        match &self.value_types {
            None => {
                w.bool(false);
            }
            Some(types) => {
                w.bool(true);
                for t in types {
                    w.bool(*t == ValueType::Float64);
                }
            }
        }
        self.keys.write(&mut w);
        w.u64(self.store.len() as u64);
        for (key, idx) in self.store.positions() {
            let window = self.store.window(key, idx);
            w.u64(u64::from(key)).i64(window.start).i64(window.end);
            let timers = self.store.timers(key, idx);
            w.u64(timers.len() as u64);
            for &t in &timers {
                w.i64(t);
            }
            for c in self.store.cells(key, idx) {
                w.u64(c.a).u64(c.n).i64(c.t).u64(c.s);
            }
        }
        w.finish()
    }

    /// Replaces the operator's state with a snapshot taken from an operator with the
    /// same configuration.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let mut r = Reader::new(bytes, SNAPSHOT_KIND)?;
        let cfg = read_config(&mut r)?;
        if let Some(what) = config_difference(&cfg, &self.cfg) {
            return Err(Error::Snapshot(format!(
                "the snapshot was taken from a window operator with another {what}"
            )));
        }
        let mut fresh = Self::new(cfg)?;
        fresh.watermark = r.i64()?;
        fresh.position = r.u64()?;
        if r.bool()? {
            let mut types = Vec::with_capacity(fresh.cfg.value_names.len());
            for _ in 0..fresh.cfg.value_names.len() {
                types.push(if r.bool()? {
                    ValueType::Float64
                } else {
                    ValueType::Int64
                });
            }
            fresh.value_types = Some(types);
        }
        fresh.keys = KeyDict::read(&mut r, fresh.cfg.key_names.clone())?;
        let stride = fresh.cfg.aggs.len();
        let n = r.len(32)?;
        for _ in 0..n {
            let key = r.u64()?;
            if key >= fresh.keys.len() as u64 {
                return Err(Error::Snapshot("window of an unknown key".into()));
            }
            let window = TimeWindow::new(r.i64()?, r.i64()?);
            let key = key as u32;
            if fresh.store.find(key, window).is_some() {
                return Err(Error::Snapshot("duplicate window".into()));
            }
            let idx = fresh.store.alloc(key, window);
            let nt = r.len(8)?;
            for _ in 0..nt {
                let t = r.i64()?;
                if !fresh.store.add_timer(key, idx, t) {
                    return Err(Error::Snapshot("bad window timers".into()));
                }
                fresh.timers.insert(t, key, window.start, window.end);
            }
            for i in 0..stride {
                let cell = Cell {
                    a: r.u64()?,
                    n: r.u64()?,
                    t: r.i64()?,
                    s: r.u64()?,
                };
                fresh.store.cells_mut(key, idx)[i] = cell;
            }
        }
        r.finish()?;
        if fresh.cfg.assigner.is_merging() {
            for key in 0..fresh.keys.len() as u32 {
                fresh.store.update_tidy(key, None);
            }
        }
        *self = fresh;
        Ok(())
    }
}
