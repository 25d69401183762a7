//! The live windows of the operator, stored per key: each key's windows (with their
//! pending timers) and their accumulators sit in two small contiguous vectors, so a
//! record touches one or two cache lines of its own key instead of scattered slots.
//! Short lists are searched linearly; once a key has more than 16 live windows (long
//! sliding windows, large lateness) a hash map indexes its windows until it has none.

use rustc_hash::FxHashMap;

use super::aggregate::Cell;
use super::assigner::TimeWindow;
use crate::time::Ticks;

/// Lists of live windows up to this length are searched linearly.
const SCAN_LIMIT: usize = 16;

/// One live window of a key and its pending timers (Flink's timer set for the
/// window: at most `max_timestamp` and the cleanup time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WinMeta {
    pub window: TimeWindow,
    timers: [Ticks; 2],
    n_timers: u8,
}

impl WinMeta {
    /// The pending timers.
    pub(crate) fn timers(&self) -> &[Ticks] {
        &self.timers[..usize::from(self.n_timers)]
    }

    /// Adds a timer; `false` if it was already pending.
    pub(crate) fn add_timer(&mut self, ts: Ticks) -> bool {
        if self.timers().contains(&ts) || self.n_timers >= 2 {
            return false;
        }
        self.timers[usize::from(self.n_timers)] = ts;
        self.n_timers += 1;
        true
    }

    /// Removes a pending timer; `false` if it was not pending.
    pub(crate) fn take_timer(&mut self, ts: Ticks) -> bool {
        match self.timers().iter().position(|&t| t == ts) {
            Some(i) => {
                self.timers.swap(i, usize::from(self.n_timers) - 1);
                self.n_timers -= 1;
                true
            }
            None => false,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct KeyWindows {
    wins: Vec<WinMeta>,
    cells: Vec<Cell>,
    /// Whether the hash index holds this key's windows (once it had many).
    indexed: bool,
}

/// All live windows, by key id.
#[derive(Clone, Debug)]
pub(crate) struct WindowStore {
    stride: usize,
    by_key: Vec<KeyWindows>,
    index: FxHashMap<(u32, Ticks, Ticks), u32>,
    len: usize,
}

impl WindowStore {
    /// An empty store for `stride` accumulator cells per window.
    pub(crate) fn new(stride: usize) -> Self {
        Self {
            stride,
            by_key: Vec::new(),
            index: FxHashMap::default(),
            len: 0,
        }
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
            let found = self.index.get(&(key, window.start, window.end));
            found.map(|&i| i as usize)
        } else {
            kw.wins.iter().position(|m| m.window == window)
        }
    }

    /// Adds an empty window (no timers, fresh cells); returns its position.
    pub(crate) fn alloc(&mut self, key: u32, window: TimeWindow) -> usize {
        if self.by_key.len() <= key as usize {
            self.by_key
                .resize_with(key as usize + 1, KeyWindows::default);
        }
        let kw = &mut self.by_key[key as usize];
        let idx = kw.wins.len();
        let meta = WinMeta {
            window,
            timers: [0; 2],
            n_timers: 0,
        };
        kw.wins.push(meta);
        kw.cells
            .resize(kw.cells.len() + self.stride, Cell::default());
        self.len += 1;
        if kw.indexed {
            self.index
                .insert((key, window.start, window.end), idx as u32);
        } else if kw.wins.len() > SCAN_LIMIT {
            kw.indexed = true;
            for (i, m) in kw.wins.iter().enumerate() {
                self.index
                    .insert((key, m.window.start, m.window.end), i as u32);
            }
        }
        idx
    }

    /// Removes the window at `idx` of `key` (the key's last window takes its place).
    pub(crate) fn free(&mut self, key: u32, idx: usize) {
        let stride = self.stride;
        let kw = &mut self.by_key[key as usize];
        let gone = kw.wins.swap_remove(idx).window;
        self.len -= 1;
        if kw.indexed {
            self.index.remove(&(key, gone.start, gone.end));
        }
        let last = kw.wins.len();
        if idx < last {
            let moved_cells = last * stride..(last + 1) * stride;
            kw.cells.copy_within(moved_cells, idx * stride);
            if kw.indexed {
                let moved = kw.wins[idx].window;
                self.index.insert((key, moved.start, moved.end), idx as u32);
            }
        }
        kw.cells.truncate(last * stride);
        if last == 0 {
            // no index entries remain for the key: back to linear search
            kw.indexed = false;
            if kw.wins.capacity() > 8 {
                *kw = KeyWindows::default();
            }
        }
    }

    /// The windows of `key`.
    pub(crate) fn windows(&self, key: u32) -> &[WinMeta] {
        self.by_key.get(key as usize).map_or(&[], |kw| &kw.wins)
    }

    /// The window at `idx` of `key`.
    pub(crate) fn meta_mut(&mut self, key: u32, idx: usize) -> &mut WinMeta {
        &mut self.by_key[key as usize].wins[idx]
    }

    /// The accumulators of the window at `idx` of `key`.
    pub(crate) fn cells(&self, key: u32, idx: usize) -> &[Cell] {
        &self.by_key[key as usize].cells[idx * self.stride..(idx + 1) * self.stride]
    }

    /// The accumulators of the window at `idx` of `key`, mutable.
    pub(crate) fn cells_mut(&mut self, key: u32, idx: usize) -> &mut [Cell] {
        &mut self.by_key[key as usize].cells[idx * self.stride..(idx + 1) * self.stride]
    }

    /// Every window as `(key, meta, cells)`, by key id, then list order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &WinMeta, &[Cell])> + '_ {
        self.by_key.iter().enumerate().flat_map(move |(k, kw)| {
            kw.wins
                .iter()
                .zip(kw.cells.chunks(self.stride.max(1)))
                .map(move |(m, c)| (k as u32, m, c))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_find_free_keeps_cells_with_their_windows() {
        let mut s = WindowStore::new(1);
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
                Some(idx) => assert_eq!(s.cells(3, idx)[0].n, i as u64),
                None => assert_eq!(i % 3, 0),
            }
        }
        assert!(s.find(9, w(1)).is_none());
        assert!(s.meta_mut(3, 0).add_timer(5));
        assert!(!s.meta_mut(3, 0).add_timer(5));
        assert!(s.meta_mut(3, 0).take_timer(5));
        assert_eq!(s.iter().count(), s.len());
    }
}
