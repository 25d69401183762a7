//! Looks up the windows of a chunk of records before any of them is added (tumbling
//! and sliding windows). The lookups of different records do not depend on each
//! other, so their cache misses (key entry, then the key's windows) overlap instead
//! of stalling the operator once per record.
//!
//! A position found stays valid while the chunk is added: between two watermark
//! advances windows are only ever appended, never freed. A window not found may be
//! created by an earlier record of the chunk, so it is looked up again if anything
//! was created.
//!
//! A chunk is at most [`CHUNK`] records and stops growing once it holds
//! [`CHUNK_WINDOWS`] windows, so a sliding assigner with millions of windows per
//! record looks its records up one at a time instead of holding them all.

use super::assigner::{tumbling_window, GridCache, TimeWindow, WindowAssigner};
use super::store::WindowStore;
use crate::time::Ticks;

/// Records looked up at a time.
pub(crate) const CHUNK: usize = 32;

/// A chunk stops taking records once it holds this many windows (a record with more
/// windows is looked up alone).
pub(crate) const CHUNK_WINDOWS: usize = 1024;

/// [`Lookahead::slots`]: the window is not live.
pub(crate) const NOT_FOUND: u32 = u32::MAX;
/// [`Lookahead::slots`]: the assigner rejected the event time (`MIN`).
pub(crate) const REJECTED: u32 = u32::MAX - 1;

/// The windows of a chunk of records and their positions in the store.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lookahead {
    /// The windows of every record of the chunk, in order.
    pub(crate) windows: Vec<TimeWindow>,
    /// The position of each window among its key's windows, if live.
    pub(crate) found: Vec<Option<usize>>,
    /// Per record: the end of its windows in `windows`, `None` if the assigner
    /// rejected its event time (`MIN`).
    pub(crate) ends: Vec<Option<usize>>,
    /// Tumbling windows, per record: the position of its one window in
    /// `windows`, or [`NOT_FOUND`] or [`REJECTED`].
    pub(crate) slots: Vec<u32>,
}

impl Lookahead {
    /// Assigns and looks up the windows of the records with key ids `keys` and
    /// event times `times` (at most [`CHUNK`]), up to the first record that brings
    /// the windows held to [`CHUNK_WINDOWS`]; returns the number of records taken.
    /// Tumbling windows: one window per record (an empty one for a null time) into
    /// `windows`, its position into `slots`. Other assigners: the record's windows
    /// (none for a null time) into `windows`, their positions into `found`, the end of
    /// them into `ends`.
    pub(crate) fn fill(
        &mut self,
        assigner: &WindowAssigner,
        grid: &mut GridCache,
        store: &WindowStore,
        keys: &[u32],
        times: &[Ticks],
        valid: Option<&[bool]>,
    ) -> usize {
        if self.windows.capacity() > 64 * CHUNK_WINDOWS {
            // the last chunk was one record with very many windows: give the memory back
            *self = Self::default();
        }
        self.windows.clear();
        self.found.clear();
        self.ends.clear();
        self.slots.clear();
        if let WindowAssigner::Tumbling { size, offset } = *assigner {
            let none = TimeWindow::new(0, 0);
            self.windows.resize(keys.len(), none);
            self.slots.resize(keys.len(), NOT_FOUND);
            let slots = self.windows.iter_mut().zip(self.slots.iter_mut());
            for (i, ((window, slot), (&key, &ts))) in slots.zip(keys.iter().zip(times)).enumerate()
            {
                if valid.map_or(true, |m| m[i]) {
                    if let Ok(w) = tumbling_window(size, offset, ts, grid) {
                        *window = w;
                        *slot = store.find(key, w).map_or(NOT_FOUND, |i| i as u32);
                    } else {
                        *slot = REJECTED;
                    }
                }
            }
            return keys.len();
        }
        for (i, (&key, &ts)) in keys.iter().zip(times).enumerate() {
            if valid.map_or(true, |m| m[i]) {
                let from = self.windows.len();
                if assigner
                    .assign_windows_cached(ts, grid, &mut self.windows)
                    .is_err()
                {
                    self.ends.push(None);
                    continue;
                }
                match self.windows[from..] {
                    [w] => self.found.push(store.find(key, w)),
                    ref ws => store.find_all(key, ws, &mut self.found),
                }
            }
            self.ends.push(Some(self.windows.len()));
            if self.windows.len() >= CHUNK_WINDOWS {
                return i + 1;
            }
        }
        keys.len()
    }
}
