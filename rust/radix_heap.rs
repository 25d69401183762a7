//! A radix heap: a min-priority queue of entries at times that never go below the
//! last time popped. Event-time timers behave so (a timer is only registered above
//! the watermark, and only timers up to the watermark are popped: the session
//! windows' timers), and so do the periodic calls of the timeline builder (a call is
//! only scheduled after the grid time last run). A push is O(1); each entry moves to
//! a lower bucket at most 64 times.
//!
//! Entries whose key differs from the last popped key in its highest bit `b` sit
//! in bucket `b + 1`; bucket 0 holds entries equal to it. Popping empties the first
//! non-empty bucket into the lower ones, keyed on its smallest entry.

use crate::time::Ticks;

/// Number of buckets: one per bit position, plus one for "equal".
const BUCKETS: usize = 65;

/// Maps a time to an unsigned key of the same order.
fn key(ts: Ticks) -> u64 {
    (ts as u64) ^ (1 << 63)
}

#[derive(Clone, Debug)]
pub(crate) struct RadixHeap<E> {
    /// The key last popped (all keys are at least this).
    last: u64,
    buckets: Vec<Vec<(u64, E)>>,
    /// The smallest key in each bucket (`u64::MAX` when empty).
    mins: Vec<u64>,
    /// The number of entries held.
    len: usize,
}

impl<E: Clone> Default for RadixHeap<E> {
    fn default() -> Self {
        Self {
            last: 0,
            buckets: vec![Vec::new(); BUCKETS],
            mins: vec![u64::MAX; BUCKETS],
            len: 0,
        }
    }
}

impl<E: Copy + Ord> RadixHeap<E> {
    /// The number of entries held (duplicates counted).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn bucket(&self, k: u64) -> usize {
        (64 - (k ^ self.last).leading_zeros()) as usize
    }

    fn put(&mut self, k: u64, e: E) {
        let b = self.bucket(k);
        self.buckets[b].push((k, e));
        self.mins[b] = self.mins[b].min(k);
    }

    /// Adds entry `e` at time `ts`, which must not be below the last time popped.
    pub(crate) fn push(&mut self, ts: Ticks, e: E) {
        let k = key(ts);
        debug_assert!(k >= self.last, "radix heap key below the last popped");
        self.put(k.max(self.last), e);
        self.len += 1;
    }

    /// If the smallest time is at most `watermark`, moves every entry at that time
    /// into `out` (cleared first, sorted) and returns the time.
    pub(crate) fn pop_due(&mut self, watermark: Ticks, out: &mut Vec<E>) -> Option<Ticks> {
        out.clear();
        let b = self.buckets.iter().position(|b| !b.is_empty())?;
        let min = self.mins[b];
        if min > key(watermark) {
            return None;
        }
        if b > 0 {
            self.last = min;
            let mut items = std::mem::take(&mut self.buckets[b]);
            self.mins[b] = u64::MAX;
            for &(k, e) in &items {
                self.put(k, e);
            }
            // all went to lower buckets: keep the allocation for bucket `b`
            items.clear();
            self.buckets[b] = items;
        }
        out.extend(self.buckets[0].drain(..).map(|(_, e)| e));
        self.mins[0] = u64::MAX;
        self.len -= out.len();
        out.sort_unstable();
        Some((self.last ^ (1 << 63)) as Ticks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Entry = (u32, Ticks, Ticks);

    #[test]
    fn pops_in_order_and_groups_equal_times() {
        let mut h = RadixHeap::default();
        let mut r: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut model: Vec<(Ticks, Entry)> = Vec::new();
        let mut wm = i64::MIN;
        let mut out = Vec::new();
        for round in 0..300 {
            for _ in 0..20 {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let ts = match r % 9 {
                    0 => i64::MAX,
                    1 => wm.saturating_add(1),
                    _ => wm.saturating_add((r >> 20) as i64 % 50 + 1),
                };
                let e = ((r >> 8) as u32 % 5, ts, ts);
                h.push(ts, e);
                model.push((ts, e));
            }
            wm = if round == 299 {
                i64::MAX
            } else {
                wm.max(round * 7 - 40)
            };
            loop {
                let got = h.pop_due(wm, &mut out);
                model.sort_unstable();
                let want = model.first().map(|m| m.0).filter(|&t| t <= wm);
                assert_eq!(got, want);
                let Some(t) = got else { break };
                let n = model.iter().take_while(|m| m.0 == t).count();
                let expect: Vec<Entry> = model.drain(..n).map(|m| m.1).collect();
                assert_eq!(out, expect);
            }
            assert_eq!(h.len(), model.len());
        }
        assert!(model.is_empty());
    }
}
