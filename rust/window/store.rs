//! The live windows of the operator, stored per key in one contiguous vector of
//! cells: each window is a header cell (start, end, two pending timers) followed by
//! its accumulator cells, so a record touches one or two cache lines of its own key.
//! Short lists are searched linearly; once a key has more than 16 live windows (long
//! sliding windows, large lateness) a hash map indexes its windows until it has none.
//! For sessions, such a key's windows are also kept ordered by start, so the windows
//! a new session window touches are found in O(log n) (a key with many open sessions,
//! the watermark held back by a lagging partition, was quadratic).
//!
//! A window's pending timers are Flink's timer set for it: at most `max_timestamp`
//! and the cleanup time. `MIN` marks "no timer": a timer is only ever registered
//! above the current watermark, so it is never `MIN`.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::aggregate::Cell;
use super::assigner::TimeWindow;
use crate::time::{Ticks, MIN_TICKS};

/// Lists of live windows up to this length are searched linearly.
const SCAN_LIMIT: usize = 16;

#[derive(Clone, Debug, Default)]
struct KeyWindows {
    /// `(1 + stride)` cells per window: header, then accumulators.
    buf: Vec<Cell>,
    /// Whether the hash index holds this key's windows (once it had many).
    indexed: bool,
    /// Sessions: the key's windows may not be tidy (see [`WindowStore::is_tidy`]).
    untidy: bool,
}

fn header_window(c: &Cell) -> TimeWindow {
    TimeWindow::new(c.a as i64, c.n as i64)
}

/// The header of a new window: no timers.
fn new_header(window: TimeWindow) -> Cell {
    Cell {
        a: window.start as u64,
        n: window.end as u64,
        t: MIN_TICKS,
        s: MIN_TICKS as u64,
    }
}

/// What [`WindowStore::touching_tidy`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Touching {
    /// No window.
    None,
    /// One window.
    One(TimeWindow),
    /// Several windows, appended to the caller's vector.
    Several,
}

impl Touching {
    /// What `hits` holds; several are appended to `out`.
    fn of(mut hits: impl Iterator<Item = TimeWindow>, out: &mut Vec<TimeWindow>) -> Self {
        let Some(first) = hits.next() else {
            return Self::None;
        };
        let Some(second) = hits.next() else {
            return Self::One(first);
        };
        out.extend([first, second].into_iter().chain(hits));
        Self::Several
    }
}

/// All live windows, by key id.
#[derive(Clone, Debug)]
pub(crate) struct WindowStore {
    stride: usize,
    by_key: Vec<KeyWindows>,
    index: FxHashMap<(u32, Ticks, Ticks), u32>,
    /// Merging windows only: the windows of the keys in `index`, ordered.
    ordered: Option<BTreeSet<(u32, Ticks, Ticks)>>,
    len: usize,
}

impl WindowStore {
    /// An empty store for `stride` accumulator cells per window; `merging`: the
    /// windows of a key with many are also kept ordered (for [`Self::touching_tidy`]).
    pub(crate) fn new(stride: usize, merging: bool) -> Self {
        Self {
            stride,
            by_key: Vec::new(),
            index: FxHashMap::default(),
            ordered: merging.then(BTreeSet::new),
            len: 0,
        }
    }

    fn step(&self) -> usize {
        self.stride + 1
    }

    /// Number of live windows.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Position of `window` in the list of `key`.
    #[inline]
    pub(crate) fn find(&self, key: u32, window: TimeWindow) -> Option<usize> {
        let kw = self.by_key.get(key as usize)?;
        if kw.indexed {
            self.find_indexed(key, window)
        } else {
            kw.buf
                .iter()
                .step_by(self.step())
                .position(|h| h.a == window.start as u64 && h.n == window.end as u64)
        }
    }

    /// [`Self::find`] for a key with many windows (kept out of line).
    #[inline(never)]
    fn find_indexed(&self, key: u32, window: TimeWindow) -> Option<usize> {
        let found = self.index.get(&(key, window.start, window.end));
        found.map(|&i| i as usize)
    }

    /// The positions of `windows` (distinct) in the list of `key`, appended to `out`.
    #[inline]
    pub(crate) fn find_all(&self, key: u32, windows: &[TimeWindow], out: &mut Vec<Option<usize>>) {
        let at = out.len();
        out.resize(at + windows.len(), None);
        let out = &mut out[at..];
        let Some(kw) = self.by_key.get(key as usize) else {
            return;
        };
        if kw.indexed {
            for (o, w) in out.iter_mut().zip(windows) {
                *o = self.index.get(&(key, w.start, w.end)).map(|&i| i as usize);
            }
            return;
        }
        let mut left = windows.len();
        for (i, h) in kw.buf.iter().step_by(self.step()).enumerate() {
            if left == 0 {
                break;
            }
            for (o, w) in out.iter_mut().zip(windows) {
                if h.a == w.start as u64 && h.n == w.end as u64 {
                    *o = Some(i);
                    left -= 1;
                    break;
                }
            }
        }
    }

    /// Adds an empty window (no timers, fresh cells); returns its position.
    pub(crate) fn alloc(&mut self, key: u32, window: TimeWindow) -> usize {
        if self.by_key.len() <= key as usize {
            self.by_key
                .resize_with(key as usize + 1, KeyWindows::default);
        }
        let step = self.step();
        let kw = &mut self.by_key[key as usize];
        let idx = kw.buf.len() / step;
        kw.buf.push(new_header(window));
        kw.buf.resize(kw.buf.len() + self.stride, Cell::default());
        self.len += 1;
        if kw.indexed {
            self.index
                .insert((key, window.start, window.end), idx as u32);
            if let Some(o) = &mut self.ordered {
                o.insert((key, window.start, window.end));
            }
        } else if idx + 1 > SCAN_LIMIT {
            kw.indexed = true;
            for (i, h) in kw.buf.iter().step_by(step).enumerate() {
                let w = header_window(h);
                self.index.insert((key, w.start, w.end), i as u32);
                if let Some(o) = &mut self.ordered {
                    o.insert((key, w.start, w.end));
                }
            }
        }
        idx
    }

    /// Removes the window at `idx` of `key` (the key's last window takes its place).
    pub(crate) fn free(&mut self, key: u32, idx: usize) {
        let step = self.step();
        let kw = &mut self.by_key[key as usize];
        let gone = header_window(&kw.buf[idx * step]);
        self.len -= 1;
        if kw.indexed {
            self.index.remove(&(key, gone.start, gone.end));
            if let Some(o) = &mut self.ordered {
                o.remove(&(key, gone.start, gone.end));
            }
        }
        let last = kw.buf.len() / step - 1;
        if idx < last {
            kw.buf
                .copy_within(last * step..(last + 1) * step, idx * step);
            if kw.indexed {
                let moved = header_window(&kw.buf[idx * step]);
                self.index.insert((key, moved.start, moved.end), idx as u32);
            }
        }
        kw.buf.truncate(last * step);
        if last == 0 {
            // no index entries remain for the key: back to linear search (and tidy)
            kw.indexed = false;
            kw.untidy = false;
            if kw.buf.capacity() > 8 * step {
                *kw = KeyWindows::default();
            }
        }
    }

    /// Whether `idx` is the last position of `key`'s windows.
    pub(crate) fn is_last(&self, key: u32, idx: usize) -> bool {
        (idx + 1) * self.step() == self.by_key[key as usize].buf.len()
    }

    /// Replaces the last window of `key`, at `idx`, by an empty `window` (no timers,
    /// fresh cells): the same as [`Self::free`] then [`Self::alloc`], in place.
    pub(crate) fn replace_last(&mut self, key: u32, idx: usize, window: TimeWindow) {
        debug_assert!(self.is_last(key, idx));
        let step = self.step();
        let kw = &mut self.by_key[key as usize];
        let gone = header_window(&kw.buf[idx * step]);
        if kw.indexed {
            self.index.remove(&(key, gone.start, gone.end));
            if let Some(o) = &mut self.ordered {
                o.remove(&(key, gone.start, gone.end));
            }
            if idx == 0 {
                // `free` of the only window goes back to linear search
                kw.indexed = false;
            } else {
                self.index
                    .insert((key, window.start, window.end), idx as u32);
                if let Some(o) = &mut self.ordered {
                    o.insert((key, window.start, window.end));
                }
            }
        }
        kw.buf[idx * step] = new_header(window);
        kw.buf[idx * step + 1..(idx + 1) * step].fill(Cell::default());
    }

    /// The live windows of `key`.
    pub(crate) fn windows(&self, key: u32) -> impl Iterator<Item = TimeWindow> + '_ {
        let buf = self.by_key.get(key as usize).map_or(&[][..], |kw| &kw.buf);
        buf.iter().step_by(self.step()).map(header_window)
    }

    /// Sessions: whether the windows of `key` are known to be tidy: each ends after
    /// it starts (none wraps past `MAX`) and no two touch. Ordered by start, tidy
    /// windows are then ordered by end too, and Flink's sweep merges a new ordinary
    /// window with exactly the run of windows it touches.
    pub(crate) fn is_tidy(&self, key: u32) -> bool {
        self.by_key.get(key as usize).map_or(true, |kw| !kw.untidy)
    }

    /// Works out [`Self::is_tidy`] for `key` from its windows and `extra` (a window
    /// that may be added next; tidy with it means tidy without it).
    pub(crate) fn update_tidy(&mut self, key: u32, extra: Option<TimeWindow>) {
        let mut all: Vec<TimeWindow> = self.windows(key).chain(extra).collect();
        all.sort_unstable();
        let tidy =
            all.iter().all(|w| w.start < w.end) && all.windows(2).all(|p| p[0].end < p[1].start);
        if self.by_key.len() <= key as usize {
            self.by_key
                .resize_with(key as usize + 1, KeyWindows::default);
        }
        self.by_key[key as usize].untidy = !tidy;
    }

    /// The windows of `key` that `window` intersects (touching included): none, one,
    /// or several, which are then appended to `out` ordered by start. Exact only while
    /// the key [`Self::is_tidy`]: then they are a run in start order, found in
    /// O(log n) once the key has many windows.
    #[inline]
    pub(crate) fn touching_tidy(
        &self,
        key: u32,
        window: TimeWindow,
        out: &mut Vec<TimeWindow>,
    ) -> Touching {
        let Some(kw) = self.by_key.get(key as usize) else {
            return Touching::None;
        };
        let at = out.len();
        let found = match &self.ordered {
            Some(o) if kw.indexed => Touching::of(
                o.range((key, Ticks::MIN, Ticks::MIN)..=(key, window.end, Ticks::MAX))
                    .rev()
                    .take_while(|&&(_, _, end)| end >= window.start)
                    .map(|&(_, start, end)| TimeWindow::new(start, end)),
                out,
            ),
            _ => Touching::of(self.windows(key).filter(|w| w.intersects(&window)), out),
        };
        if found == Touching::Several {
            out[at..].sort_unstable();
        }
        found
    }

    /// The window at `idx` of `key`.
    pub(crate) fn window(&self, key: u32, idx: usize) -> TimeWindow {
        header_window(&self.by_key[key as usize].buf[idx * self.step()])
    }

    fn header_mut(&mut self, key: u32, idx: usize) -> &mut Cell {
        let step = self.step();
        &mut self.by_key[key as usize].buf[idx * step]
    }

    /// The pending timers of the window at `idx` of `key`.
    pub(crate) fn timers(&self, key: u32, idx: usize) -> Vec<Ticks> {
        let h = &self.by_key[key as usize].buf[idx * self.step()];
        [h.t, h.s as i64]
            .into_iter()
            .filter(|&t| t != MIN_TICKS)
            .collect()
    }

    /// Adds a timer; `false` if it was already pending (or is `MIN`).
    pub(crate) fn add_timer(&mut self, key: u32, idx: usize, ts: Ticks) -> bool {
        let h = self.header_mut(key, idx);
        if ts == MIN_TICKS || h.t == ts || h.s as i64 == ts {
            return false;
        }
        if h.t == MIN_TICKS {
            h.t = ts;
            true
        } else if h.s as i64 == MIN_TICKS {
            h.s = ts as u64;
            true
        } else {
            false
        }
    }

    /// Removes a pending timer; `false` if it was not pending.
    pub(crate) fn take_timer(&mut self, key: u32, idx: usize, ts: Ticks) -> bool {
        let h = self.header_mut(key, idx);
        if ts == MIN_TICKS {
            false
        } else if h.t == ts {
            h.t = MIN_TICKS;
            true
        } else if h.s as i64 == ts {
            h.s = MIN_TICKS as u64;
            true
        } else {
            false
        }
    }

    /// The accumulators of the window at `idx` of `key`.
    pub(crate) fn cells(&self, key: u32, idx: usize) -> &[Cell] {
        let at = idx * self.step() + 1;
        &self.by_key[key as usize].buf[at..at + self.stride]
    }

    /// The accumulators of the window at `idx` of `key`, mutable.
    #[inline]
    pub(crate) fn cells_mut(&mut self, key: u32, idx: usize) -> &mut [Cell] {
        let at = idx * self.step() + 1;
        &mut self.by_key[key as usize].buf[at..at + self.stride]
    }

    /// Every window as `(key, position)`, by key id, then list order.
    pub(crate) fn positions(&self) -> Vec<(u32, usize)> {
        let step = self.step();
        self.by_key
            .iter()
            .enumerate()
            .flat_map(|(k, kw)| (0..kw.buf.len() / step).map(move |i| (k as u32, i)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_find_free_keeps_cells_with_their_windows() {
        let mut s = WindowStore::new(1, false);
        let w = |i: i64| TimeWindow::new(i, i + 1);
        for i in 0..40 {
            let idx = s.alloc(3, w(i));
            s.cells_mut(3, idx)[0].n = i as u64;
        }
        assert_eq!(s.len(), 40);
        for i in (0..40).step_by(3) {
            let idx = s.find(3, w(i)).unwrap();
            s.free(3, idx);
        }
        for i in 0..40 {
            match s.find(3, w(i)) {
                Some(idx) => {
                    assert_eq!(s.cells(3, idx)[0].n, i as u64);
                    assert_eq!(s.window(3, idx), w(i));
                }
                None => assert_eq!(i % 3, 0),
            }
        }
        assert!(s.find(9, w(1)).is_none());
        assert!(s.add_timer(3, 0, 5));
        assert!(!s.add_timer(3, 0, 5));
        assert!(s.add_timer(3, 0, 7));
        assert_eq!(s.timers(3, 0), vec![5, 7]);
        assert!(s.take_timer(3, 0, 5));
        assert!(!s.take_timer(3, 0, 5));
        assert_eq!(s.positions().len(), s.len());
        while let Some(&(k, i)) = s.positions().last() {
            s.free(k, i);
        }
        assert_eq!(s.len(), 0);
        assert!(s.find(3, w(1)).is_none());
    }

    #[test]
    fn touching_tidy_finds_the_run_a_window_touches_ordered_or_not() {
        // sessions [10i, 10i + 5) of key 1, allocated shuffled; more than SCAN_LIMIT
        // of them use the ordered index, fewer a scan: both must agree with a filter
        let w = |s: i64, e: i64| TimeWindow::new(s, e);
        for n in [5_i64, 40] {
            let mut s = WindowStore::new(1, true);
            for i in (0..n).map(|i| (i * 7) % n) {
                s.alloc(1, w(10 * i, 10 * i + 5));
            }
            assert!(s.is_tidy(1));
            for (a, b) in [
                (-9, -1),
                (-5, 0),
                (3, 12),
                (5, 10),
                (6, 9),
                (0, 1000),
                (14, 31),
            ] {
                let probe = w(a, b);
                let mut got = Vec::new();
                match s.touching_tidy(1, probe, &mut got) {
                    Touching::None => {}
                    Touching::One(x) => got.push(x),
                    Touching::Several => assert!(got.len() > 1),
                }
                let mut want: Vec<_> = s.windows(1).filter(|x| x.intersects(&probe)).collect();
                want.sort_unstable();
                assert_eq!(got, want, "n={n} probe={probe:?}");
            }
            s.update_tidy(1, Some(w(2, 11))); // touches [0, 5) and [10, 15)
            assert!(!s.is_tidy(1));
            s.update_tidy(1, Some(w(6, 8)));
            assert!(s.is_tidy(1));
            s.update_tidy(1, Some(w(i64::MAX - 1, i64::MIN + 3))); // wraps
            assert!(!s.is_tidy(1));
            while let Some(&(k, i)) = s.positions().last() {
                s.free(k, i);
            }
            assert!(s.is_tidy(1) && s.ordered.as_ref().is_some_and(BTreeSet::is_empty));
        }
    }

    #[test]
    fn replace_last_is_free_then_alloc() {
        let w = |i: i64| TimeWindow::new(i, i + 1);
        for n in [1, 2, 17, 18] {
            let (mut a, mut b) = (WindowStore::new(2, true), WindowStore::new(2, true));
            for s in [&mut a, &mut b] {
                for i in 0..n {
                    let idx = s.alloc(5, w(i));
                    s.cells_mut(5, idx)[1].a = 7;
                    s.add_timer(5, idx, 9);
                }
            }
            let last = n as usize - 1;
            assert!(a.is_last(5, last) && !a.is_last(5, 0) || n == 1);
            a.free(5, last);
            assert_eq!(a.alloc(5, w(100)), last);
            b.replace_last(5, last, w(100));
            assert_eq!(a.len(), b.len());
            assert_eq!(a.positions(), b.positions());
            for (k, i) in a.positions() {
                assert_eq!(a.window(k, i), b.window(k, i));
                assert_eq!(a.cells(k, i), b.cells(k, i));
                assert_eq!(a.timers(k, i), b.timers(k, i));
                assert_eq!(b.find(k, b.window(k, i)), Some(i));
            }
            assert_eq!(a.by_key[5].indexed, b.by_key[5].indexed);
            assert!(b.find(5, w(last as i64)).is_none());
        }
    }
}
