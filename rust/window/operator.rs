//! The keyed event-time window operator: Flink 2.3.0's `WindowOperator` with
//! `EventTimeTrigger`, allowed lateness and the late side output (SEMANTICS.md §5).
//!
//! State is one slot per live `(key, window)`: its accumulators and its pending
//! event-time timers (a window's timers are Flink's timer set: at most the firing
//! time `max_timestamp` and the cleanup time `max_timestamp + L`). Timers come due
//! in `(time, key id, window)` order (see `timers.rs`); stale entries are skipped.
//! A window's state is freed at its cleanup time, so memory is bounded by the live
//! windows.
//!
//! Between two watermark advances, tumbling and sliding records are looked up a
//! chunk at a time (a bounded number of records and windows, see `lookahead.rs`)
//! and then added in order; the aggregates
//! are resolved against the batch's columns once per call (`RowAdder`).

use super::aggregate::{merge_cells, output_type, AggSpec, Cell, RowAdder, ValueCol, ValueType};
use super::assigner::{merge_windows, GridCache, TimeWindow, WindowAssigner};
use super::keys::{KeyCol, KeyDict};
use super::late::is_element_late;
use super::lookahead::{Lookahead, CHUNK, NOT_FOUND, REJECTED};
use super::output::{DropReason, Output, Trigger};
use super::store::{Touching, WindowStore};
use super::timers::{Entry, Timers};
use crate::error::{Error, Result};
use crate::time::{Ticks, MAX_TICKS, MIN_TICKS};

/// How the operator is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorConfig {
    /// The window assigner.
    pub assigner: WindowAssigner,
    /// Allowed lateness `L >= 0`.
    pub allowed_lateness: Ticks,
    /// Names of the key columns (for errors and snapshots).
    pub key_names: Vec<String>,
    /// Names of the value columns the aggregates read.
    pub value_names: Vec<String>,
    /// The aggregates, in output order.
    pub aggs: Vec<AggSpec>,
}

/// A watermark advance positioned inside a batch: it applies after the records
/// `[0, position)` and before record `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advance {
    /// Number of batch records processed before the advance (`0..=len`).
    pub position: usize,
    /// The new watermark (ignored unless it is greater than the current one).
    pub watermark: Ticks,
    /// When the advance happened, reported as `trigger_time`.
    pub time: Option<Ticks>,
}

/// One batch of records, borrowed.
#[derive(Clone, Debug)]
pub struct Batch<'a> {
    /// The key columns.
    pub keys: Vec<KeyCol<'a>>,
    /// Event times.
    pub event_time: &'a [Ticks],
    /// Validity of the event times (`true` = not null).
    pub event_time_valid: Option<&'a [bool]>,
    /// The value columns, in the order of [`OperatorConfig::value_names`].
    pub values: Vec<ValueCol<'a>>,
    /// Optional arrival times (reported as `trigger_time` of late firings).
    pub arrival: Option<&'a [Ticks]>,
    /// Validity of the arrival times.
    pub arrival_valid: Option<&'a [bool]>,
}

/// A record being added: key id, event time, batch row and trigger.
struct Rec {
    key: u32,
    ts: Ticks,
    row: usize,
    trigger: Trigger,
}

/// The records of one `process()` call: the batch, its key ids, its aggregates
/// resolved, and the global position of its first record.
struct Rows<'b, 'a> {
    batch: &'b Batch<'a>,
    ids: &'b [u32],
    adder: &'b RowAdder<'a>,
    base: i64,
}

/// The keyed event-time window operator.
#[derive(Clone, Debug)]
pub struct WindowOperator {
    pub(crate) cfg: OperatorConfig,
    pub(crate) keys: KeyDict,
    pub(crate) value_types: Option<Vec<ValueType>>,
    pub(crate) watermark: Ticks,
    pub(crate) position: u64,
    pub(crate) store: WindowStore,
    pub(crate) timers: Timers,
    scratch: Vec<TimeWindow>,
    due: Vec<Entry>,
    grid: GridCache,
    lookahead: Lookahead,
    acc: Vec<Cell>,
    ids: Vec<u32>,
}

impl WindowOperator {
    /// A new operator; checks the lateness and the aggregate specs.
    pub fn new(cfg: OperatorConfig) -> Result<Self> {
        if cfg.allowed_lateness < 0 {
            return Err(Error::param(
                "allowed_lateness",
                format!("must be >= 0, got {}", cfg.allowed_lateness),
            ));
        }
        if cfg.key_names.is_empty() {
            return Err(Error::param("key", "at least one key column is needed"));
        }
        if cfg.aggs.is_empty() {
            return Err(Error::param("aggs", "at least one aggregate is needed"));
        }
        for spec in &cfg.aggs {
            match spec.column {
                Some(c) if c >= cfg.value_names.len() => {
                    return Err(Error::param(
                        "aggs",
                        format!("value column index {c} out of range"),
                    ))
                }
                None if spec.func != super::aggregate::AggFn::Count => {
                    return Err(Error::param(
                        "aggs",
                        format!("{} needs a value column", spec.func.name()),
                    ))
                }
                _ => {}
            }
        }
        let keys = KeyDict::new(cfg.key_names.clone());
        let cfg_merging = cfg.assigner.is_merging();
        let timers = Timers::new(cfg_merging);
        let stride = cfg.aggs.len();
        Ok(Self {
            cfg,
            keys,
            value_types: None,
            watermark: MIN_TICKS,
            position: 0,
            store: WindowStore::new(stride, cfg_merging),
            timers,
            scratch: Vec::new(),
            due: Vec::new(),
            grid: GridCache::default(),
            lookahead: Lookahead::default(),
            acc: Vec::new(),
            ids: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OperatorConfig {
        &self.cfg
    }

    /// The current watermark (`MIN` before the first advance).
    pub fn watermark(&self) -> Ticks {
        self.watermark
    }

    /// Number of records processed so far, across calls.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The key dictionary (values of the key columns by key id).
    pub fn keys(&self) -> &KeyDict {
        &self.keys
    }

    /// Number of live windows (all keys).
    pub fn live_windows(&self) -> usize {
        self.store.len()
    }

    /// Value column types, once fixed by the first batch.
    pub fn value_types(&self) -> Option<&[ValueType]> {
        self.value_types.as_deref()
    }

    /// Output type of each aggregate (int64 for a value column not seen yet).
    pub fn agg_types(&self) -> Vec<ValueType> {
        let types = self
            .value_types
            .clone()
            .unwrap_or_else(|| vec![ValueType::Int64; self.cfg.value_names.len()]);
        self.cfg
            .aggs
            .iter()
            .map(|s| output_type(s, &types))
            .collect()
    }

    fn stride(&self) -> usize {
        self.cfg.aggs.len()
    }

    fn cleanup_time(&self, w: &TimeWindow) -> Ticks {
        let max_ts = w.max_timestamp();
        let c = max_ts.wrapping_add(self.cfg.allowed_lateness);
        if c >= max_ts {
            c
        } else {
            MAX_TICKS
        }
    }

    fn check_batch(&mut self, batch: &Batch<'_>, advances: &[Advance]) -> Result<usize> {
        let n = batch.event_time.len();
        let len_err = |name: &str, got: usize| {
            Error::input(name, format!("has {got} rows, event_time has {n}"))
        };
        if batch.event_time_valid.is_some_and(|m| m.len() != n) {
            return Err(len_err(
                "event_time",
                batch.event_time_valid.map_or(0, <[bool]>::len),
            ));
        }
        if let Some(a) = batch.arrival {
            if a.len() != n || batch.arrival_valid.is_some_and(|m| m.len() != n) {
                return Err(len_err("arrival", a.len()));
            }
        }
        if batch.values.len() != self.cfg.value_names.len() {
            return Err(Error::input(
                "values",
                format!(
                    "expected {} value column(s), got {}",
                    self.cfg.value_names.len(),
                    batch.values.len()
                ),
            ));
        }
        for (col, name) in batch.values.iter().zip(&self.cfg.value_names) {
            if col.len() != n {
                return Err(len_err(name, col.len()));
            }
        }
        // An empty batch's column types say nothing (no value is read): not checked.
        if let (Some(types), true) = (&self.value_types, n > 0) {
            for ((col, ty), name) in batch.values.iter().zip(types).zip(&self.cfg.value_names) {
                if col.value_type() != *ty {
                    return Err(Error::input(
                        name.clone(),
                        "value column type changed between batches",
                    ));
                }
            }
        }
        let mut prev = 0;
        for a in advances {
            if a.position < prev || a.position > n {
                return Err(Error::input(
                    "position",
                    format!(
                        "advance positions must be non-decreasing and within 0..={n}, got {}",
                        a.position
                    ),
                ));
            }
            prev = a.position;
        }
        Ok(n)
    }

    /// Processes a batch of records with watermark advances positioned inside it.
    pub fn process(&mut self, batch: &Batch<'_>, advances: &[Advance]) -> Result<Output> {
        let n = self.check_batch(batch, advances)?;
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        let interned = self.keys.intern(&batch.keys, n, &mut ids);
        if let Err(e) = interned {
            self.ids = ids;
            return Err(e);
        }
        if self.value_types.is_none() && n > 0 {
            self.value_types = Some(batch.values.iter().map(ValueCol::value_type).collect());
        }
        let adder = RowAdder::new(&self.cfg.aggs, &batch.values);
        let mut out = Output::new(&self.agg_types());
        let base = self.position as i64;
        let src = Rows {
            batch,
            ids: &ids,
            adder: &adder,
            base,
        };
        let mut row = 0;
        for a in advances {
            self.records(&src, row..a.position, &mut out);
            row = a.position;
            let trigger = Trigger {
                position: base + row as i64,
                time: a.time,
            };
            self.advance_to(a.watermark, trigger, &mut out);
        }
        self.records(&src, row..n, &mut out);
        self.position += n as u64;
        self.ids = ids;
        Ok(out)
    }

    /// A watermark advance after everything processed so far.
    pub fn advance(&mut self, watermark: Ticks, time: Option<Ticks>) -> Output {
        let mut out = Output::new(&self.agg_types());
        let trigger = Trigger {
            position: self.position as i64,
            time,
        };
        self.advance_to(watermark, trigger, &mut out);
        out
    }

    /// End of input: the watermark `MAX` fires every remaining window.
    pub fn finish(&mut self, time: Option<Ticks>) -> Output {
        self.advance(MAX_TICKS, time)
    }

    fn advance_to(&mut self, watermark: Ticks, trigger: Trigger, out: &mut Output) {
        if watermark <= self.watermark {
            return;
        }
        self.watermark = watermark;
        // Firing never registers timers, so each due time's timers fire as a group.
        let mut due = std::mem::take(&mut self.due);
        while let Some(ts) = self.timers.pop_due(watermark, &mut due) {
            for &(key, start, end) in &due {
                self.on_timer(ts, key, TimeWindow::new(start, end), trigger, out);
            }
        }
        due.clear();
        self.due = due;
    }

    fn on_timer(
        &mut self,
        ts: Ticks,
        key: u32,
        window: TimeWindow,
        trigger: Trigger,
        out: &mut Output,
    ) {
        let Some(idx) = self.store.find(key, window) else {
            return;
        };
        if !self.store.take_timer(key, idx, ts) {
            return;
        }
        if ts == window.max_timestamp() {
            self.emit(key, idx, false, trigger, out);
        }
        if ts == self.cleanup_time(&window) {
            self.store.free(key, idx);
        }
    }

    fn emit(&mut self, key: u32, idx: usize, late: bool, trigger: Trigger, out: &mut Output) {
        let window = self.store.window(key, idx);
        let cells = self.store.cells(key, idx);
        out.results.push(
            key,
            window,
            self.watermark,
            late,
            &trigger,
            cells,
            &self.cfg.aggs,
        );
    }

    fn register_timer(&mut self, key: u32, idx: usize, ts: Ticks) {
        if self.store.add_timer(key, idx, ts) {
            let w = self.store.window(key, idx);
            self.timers.insert(ts, key, w.start, w.end);
        }
    }

    /// What caused the firings of batch row `row`: its position and arrival time.
    fn trigger(batch: &Batch<'_>, base: i64, row: usize) -> Trigger {
        let time = batch
            .arrival
            .and_then(|a| batch.arrival_valid.map_or(true, |m| m[row]).then(|| a[row]));
        Trigger {
            position: base + row as i64,
            time,
        }
    }

    /// A record at `ts` (batch row `row`) that went into no window: late if
    /// `ts + L <= watermark`, else dropped.
    fn unplaced(&self, row: usize, ts: Ticks, out: &mut Output) {
        if is_element_late(ts, self.cfg.allowed_lateness, self.watermark) {
            out.late_rows.push(row);
            out.late_watermark.push(self.watermark);
        } else {
            out.drop_row(row, DropReason::NoWindow);
        }
    }

    /// Processes the records `rows` of a batch (no watermark advance among them).
    fn records(&mut self, src: &Rows<'_, '_>, rows: std::ops::Range<usize>, out: &mut Output) {
        let (batch, ids) = (src.batch, src.ids);
        let merging = self.cfg.assigner.is_merging();
        let mut look = std::mem::take(&mut self.lookahead);
        let mut chunk = rows.start;
        while chunk < rows.end {
            let mut end = rows.end.min(chunk + CHUNK);
            if !merging {
                // the chunk may end early: it holds a bounded number of windows
                end = chunk
                    + look.fill(
                        &self.cfg.assigner,
                        &mut self.grid,
                        &self.store,
                        &ids[chunk..end],
                        &batch.event_time[chunk..end],
                        batch.event_time_valid.map(|m| &m[chunk..end]),
                    );
            }
            let valid = batch.event_time_valid.map(|m| &m[chunk..end]);
            let mut created = false;
            let mut from = 0;
            for (i, row) in (chunk..end).enumerate() {
                if !valid.map_or(true, |m| m[i]) {
                    out.drop_row(row, DropReason::NullEventTime);
                    continue;
                }
                // whether the record went into a window; `None`: its time was rejected
                let placed = if merging {
                    self.session_record(src, row, out)
                } else if let Some(&slot) = look.slots.get(i) {
                    // tumbling: one window
                    let found = (slot != NOT_FOUND).then_some(slot as usize);
                    (slot != REJECTED)
                        .then(|| self.place(src, row, look.windows[i], found, &mut created, out))
                } else {
                    look.ends[i].map(|to| {
                        let mut placed = false;
                        for (w, &f) in look.windows[from..to].iter().zip(&look.found[from..to]) {
                            placed |= self.place(src, row, *w, f, &mut created, out);
                        }
                        from = to;
                        placed
                    })
                };
                match placed {
                    Some(true) => {}
                    Some(false) => self.unplaced(row, batch.event_time[row], out),
                    None => out.drop_row(row, DropReason::MinEventTime),
                }
            }
            chunk = end;
        }
        self.lookahead = look;
    }

    /// Adds batch row `row` to its non-merging `window`, live at position `found`
    /// of its key's windows when the chunk was looked up, unless the window is late;
    /// returns whether it did. `created`: whether the chunk created a window yet.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn place(
        &mut self,
        src: &Rows<'_, '_>,
        row: usize,
        window: TimeWindow,
        found: Option<usize>,
        created: &mut bool,
        out: &mut Output,
    ) -> bool {
        let (key, ts) = (src.ids[row], src.batch.event_time[row]);
        if let Some(idx) = found {
            // A live window: no timers to register (see `add_to_window`).
            if self.cleanup_time(&window) <= self.watermark {
                return false;
            }
            let cells = self.store.cells_mut(key, idx);
            src.adder
                .add(cells, row, ts, (src.base + row as i64) as u64);
            if window.max_timestamp() <= self.watermark {
                self.emit(key, idx, true, Self::trigger(src.batch, src.base, row), out);
            }
            return true;
        }
        self.place_new(src, row, window, created, out)
    }

    /// [`Self::place`] for a window that was not live when the chunk was looked up
    /// (out of line: a tenth of the records or fewer get here).
    #[inline(never)]
    fn place_new(
        &mut self,
        src: &Rows<'_, '_>,
        row: usize,
        window: TimeWindow,
        created: &mut bool,
        out: &mut Output,
    ) -> bool {
        let (key, ts) = (src.ids[row], src.batch.event_time[row]);
        // An earlier record of the chunk may have created it.
        let found = if *created {
            self.store.find(key, window)
        } else {
            None
        };
        let rec = Rec {
            key,
            ts,
            row,
            trigger: Self::trigger(src.batch, src.base, row),
        };
        let added = self.add_to_window(&rec, window, found, src.adder, out);
        *created |= added && found.is_none();
        added
    }

    /// Adds a record to its session (merging the key's sessions as needed); returns
    /// whether it was added, `None` if the assigner rejected its event time.
    fn session_record(&mut self, src: &Rows<'_, '_>, row: usize, out: &mut Output) -> Option<bool> {
        let rec = Rec {
            key: src.ids[row],
            ts: src.batch.event_time[row],
            row,
            trigger: Self::trigger(src.batch, src.base, row),
        };
        let mut windows = std::mem::take(&mut self.scratch);
        windows.clear();
        let assigned =
            self.cfg
                .assigner
                .assign_windows_cached(rec.ts, &mut self.grid, &mut windows);
        let new = windows.first().copied();
        self.scratch = windows;
        let new = new.filter(|_| assigned.is_ok())?;
        let window = self.merge_session(rec.key, new);
        let found = self.store.find(rec.key, window);
        Some(self.add_to_window(&rec, window, found, src.adder, out))
    }

    /// Adds the record to `window` (at position `found` of its key's windows, if
    /// live) unless the window is late; returns whether it did.
    #[inline]
    fn add_to_window(
        &mut self,
        rec: &Rec,
        window: TimeWindow,
        found: Option<usize>,
        adder: &RowAdder<'_>,
        out: &mut Output,
    ) -> bool {
        let cleanup = self.cleanup_time(&window);
        if cleanup <= self.watermark {
            return false;
        }
        // A non-merging window registers its timers when it is created; later
        // registrations would be no-ops (its timers are still pending, or the firing
        // time had passed already at creation). Sessions register on every record.
        let key = rec.key;
        let (idx, created) = match found {
            Some(i) => (i, false),
            None => (self.store.alloc(key, window), true),
        };
        let register = created || self.cfg.assigner.is_merging();
        let cells = self.store.cells_mut(key, idx);
        adder.add(cells, rec.row, rec.ts, rec.trigger.position as u64);
        let max_ts = window.max_timestamp();
        if max_ts <= self.watermark {
            self.emit(key, idx, true, rec.trigger, out);
        } else if register {
            self.register_timer(key, idx, max_ts);
        }
        if register && cleanup != MAX_TICKS {
            self.register_timer(key, idx, cleanup);
        }
        true
    }

    /// Flink's `MergingWindowSet.addWindow` for a new session window of `key`: merges
    /// the key's live windows with it and returns the window the record goes to.
    fn merge_session(&mut self, key: u32, new: TimeWindow) -> TimeWindow {
        if new.start < new.end && self.store.is_tidy(key) {
            // Fast path: the key's windows are tidy (none wraps, no two touch), so
            // Flink's sweep merges the new window with exactly the run of windows it
            // touches (their cover touches no other), found in O(log n).
            self.scratch.clear();
            return match self.store.touching_tidy(key, new, &mut self.scratch) {
                Touching::None => new,
                Touching::One(w) if w.start <= new.start && w.end >= new.end => w,
                Touching::One(w) => {
                    let into = w.cover(&new);
                    self.move_to_cover(key, &[w], into);
                    into
                }
                Touching::Several => {
                    let run = std::mem::take(&mut self.scratch);
                    let into = run.iter().fold(new, |c, w| c.cover(w));
                    self.move_to_cover(key, &run, into);
                    self.scratch = run;
                    into
                }
            };
        }
        // A window that wraps past MAX (event times within a gap of the end of the
        // range) or windows that touch: Flink's sweep over all of them, which may
        // also merge windows the new one does not touch.
        let mut all: Vec<TimeWindow> = self.store.windows(key).collect();
        all.push(new);
        let mut result = new;
        for merge in merge_windows(&all) {
            let mut merged = merge.from;
            let with_new = merged.iter().position(|w| *w == new);
            if let Some(i) = with_new {
                merged.remove(i);
                result = merge.into;
            }
            if merged.len() == 1 && merged[0] == merge.into {
                continue;
            }
            // Pre-existing windows merge into the cover: state merged, old windows and
            // their timers gone, a firing timer for the cover if it is not due yet.
            let idx = self.move_to_cover(key, &merged, merge.into);
            if with_new.is_none() {
                // Windows the new one does not touch (only when windows wrap): Flink
                // deletes the cover's own timers if it is one of them and never
                // registers its cleanup timer, so it may never fire (its records lost)
                // nor be cleaned up. Here it has both, like any window
                // (docs/semantics.md, departure 10); the record's window gets its
                // cleanup timer when the record is added.
                let cleanup = self.cleanup_time(&merge.into);
                if cleanup != MAX_TICKS {
                    self.register_timer(key, idx, cleanup);
                }
            }
        }
        self.store.update_tidy(key, Some(result));
        result
    }

    /// Merges the state of the live windows `merged` of `key` (in that order) into a
    /// new window `into`, frees them (with their timers) and registers the firing timer
    /// of `into` unless it is due already; returns the position of `into`.
    fn move_to_cover(&mut self, key: u32, merged: &[TimeWindow], into: TimeWindow) -> usize {
        let mut acc = std::mem::take(&mut self.acc);
        acc.clear();
        acc.resize(self.stride(), Cell::default());
        let types = self.value_types.as_deref().unwrap_or_default();
        // One window that is its key's last: freeing it and allocating the cover
        // would put the cover at its position, so it is replaced in place.
        let reuse = match merged {
            [w] => self
                .store
                .find(key, *w)
                .filter(|&i| self.store.is_last(key, i)),
            _ => None,
        };
        for w in merged {
            if let Some(i) = self.store.find(key, *w) {
                merge_cells(&mut acc, self.store.cells(key, i), &self.cfg.aggs, types);
                if reuse != Some(i) {
                    self.store.free(key, i);
                }
            }
        }
        let idx = if let Some(i) = reuse {
            self.store.replace_last(key, i, into);
            i
        } else {
            self.store.alloc(key, into)
        };
        self.store.cells_mut(key, idx).copy_from_slice(&acc);
        self.acc = acc;
        let max_ts = into.max_timestamp();
        if max_ts > self.watermark {
            self.register_timer(key, idx, max_ts);
        }
        idx
    }
}

#[cfg(test)]
#[path = "operator_tests.rs"]
mod tests;
