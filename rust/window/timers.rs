//! The operator's pending event-time timers, ordered by `(time, key id, window)`.
//!
//! Entries are candidates: the window's own timer cells in the store are the truth,
//! and an entry whose timer is no longer pending is skipped when it comes due. So an
//! entry may be stale or (for buckets) duplicated; duplicates come due together and
//! only the first one finds its timer pending.
//!
//! Non-merging assigners (tumbling, sliding) put every key's window of one grid cell
//! on the same few times, so timers are kept in one bucket per distinct time, sorted
//! when the bucket comes due. Sessions have (almost) one time per window, so they
//! keep a radix heap (a B-tree set spent half of the session operator's time). The
//! heap keeps duplicates; they come due in the same group, next to each other, and
//! only the first finds its timer pending, as above.

use std::collections::BTreeMap;

use crate::radix_heap::RadixHeap;
use crate::time::Ticks;

/// A timer: `(key id, window start, window end)`, its time kept apart.
pub(crate) type Entry = (u32, Ticks, Ticks);

#[derive(Clone, Debug)]
pub(crate) enum Timers {
    /// One unsorted list per distinct time.
    Buckets(BTreeMap<Ticks, Vec<Entry>>),
    /// One min-heap of `(time, key, start, end)`.
    Heap(RadixHeap<Entry>),
}

impl Timers {
    /// Empty timers; bucketed unless the windows merge.
    pub(crate) fn new(merging: bool) -> Self {
        if merging {
            Self::Heap(RadixHeap::default())
        } else {
            Self::Buckets(BTreeMap::new())
        }
    }

    /// Adds a timer at `ts` for window `[start, end)` of `key`.
    #[inline]
    pub(crate) fn insert(&mut self, ts: Ticks, key: u32, start: Ticks, end: Ticks) {
        match self {
            Self::Buckets(map) => {
                if let Some(list) = map.get_mut(&ts) {
                    list.push((key, start, end));
                } else {
                    map.insert(ts, vec![(key, start, end)]);
                }
            }
            Self::Heap(heap) => heap.push(ts, (key, start, end)),
        }
    }

    /// Moves the timers of the earliest pending time into `out` (sorted by key id,
    /// then window; cleared first; the heap may repeat an entry) if that time is at
    /// most `watermark`; returns the time.
    pub(crate) fn pop_due(&mut self, watermark: Ticks, out: &mut Vec<Entry>) -> Option<Ticks> {
        out.clear();
        match self {
            Self::Buckets(map) => {
                let mut first = map.first_entry()?;
                let ts = *first.key();
                if ts > watermark {
                    return None;
                }
                std::mem::swap(out, first.get_mut());
                first.remove();
                sort_dedup(out);
                Some(ts)
            }
            Self::Heap(heap) => heap.pop_due(watermark, out),
        }
    }
}

/// Sorts and dedups `due`. Tumbling and sliding windows put every key's timer for
/// one window on the same time, so a bucket usually holds one window: then its key
/// ids are sorted by marking them in a bitmap.
fn sort_dedup(due: &mut Vec<Entry>) {
    let Some(&(_, start, end)) = due.first() else {
        return;
    };
    let mut max_key = 0;
    for &(key, s, e) in due.iter() {
        if (s, e) != (start, end) {
            due.sort_unstable();
            due.dedup();
            return;
        }
        max_key = max_key.max(key);
    }
    let words = max_key as usize / 64 + 1;
    if words > due.len() {
        // sparse keys: sorting is cheaper than scanning the bitmap
        due.sort_unstable();
        due.dedup();
        return;
    }
    let mut marks = vec![0u64; words];
    for &(key, ..) in due.iter() {
        marks[key as usize / 64] |= 1 << (key % 64);
    }
    due.clear();
    for (i, &word) in marks.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let key = (i * 64) as u32 + bits.trailing_zeros();
            due.push((key, start, end));
            bits &= bits - 1;
        }
    }
}
