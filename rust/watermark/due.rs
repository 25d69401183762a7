//! [`DueCalls`]: the timeline builder's queue of periodic calls, by grid index.
//!
//! Each channel's generator has at most one due call (`due[c]`: the grid index of its
//! next call, or none): the builder's `due` list is the truth. The queue holds
//! candidates in a radix heap: a record that moves a channel's call earlier pushes
//! a new entry and leaves the old one behind, stale, to be skipped when it comes up.
//! Grid indexes only grow (a call is scheduled after the grid index last run), which
//! is what a radix heap needs: a push is O(1), a round costs the sort of its channels.
//! An indexed binary heap kept exactly `due` but spent most of the builder's time
//! sifting (with sparse channels and idleness, each record moves its channel's call to
//! the next grid time and each call moves it on to the idleness timeout: two sifts per
//! record; `docs/performance.md` has the profile).
//!
//! Stale entries are bounded: when they outnumber the channels `COMPACT_FACTOR` (4)
//! times, the queue is rebuilt from `due` (O(channels), after as many pushes).

use crate::radix_heap::RadixHeap;

/// The queue is rebuilt once it holds more than this many entries per channel.
const COMPACT_FACTOR: usize = 4;

/// The channels' due periodic calls (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct DueCalls {
    heap: RadixHeap<u32>,
}

impl DueCalls {
    /// The queue of the calls in `due` (`due[c]`: channel `c`'s next grid index).
    pub fn from_due(due: &[Option<i64>]) -> Self {
        let mut heap = RadixHeap::default();
        for (c, d) in due.iter().enumerate() {
            if let Some(k) = d {
                heap.push(*k, c as u32);
            }
        }
        Self { heap }
    }

    /// Notes that channel `c`'s call is now due at grid index `k` (`due[c] == Some(k)`),
    /// which is after every round taken; rebuilds the queue from `due` if stale
    /// entries have piled up.
    #[inline]
    pub fn schedule(&mut self, c: usize, k: i64, due: &[Option<i64>]) {
        self.heap.push(k, c as u32);
        if self.heap.len() > COMPACT_FACTOR * due.len() + 64 {
            *self = Self::from_due(due);
        }
    }

    /// The next round at a grid index up to `last`: its index, with the channels whose
    /// call is due there in `out` (ascending, cleared first); `None` if no call is due
    /// by `last`. The round's entries leave the queue: the caller schedules each
    /// channel's next call.
    pub fn next_round(
        &mut self,
        last: i64,
        due: &[Option<i64>],
        out: &mut Vec<u32>,
    ) -> Option<i64> {
        loop {
            let k = self.heap.pop_due(last, out)?;
            out.dedup(); // sorted by the heap
            out.retain(|&c| due[c as usize] == Some(k));
            if !out.is_empty() {
                return Some(k);
            }
        }
    }

    /// The number of entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no entry is held.
    pub fn is_empty(&self) -> bool {
        self.heap.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against `due` scanned for its smallest grid index: the same rounds, in order,
    /// whatever calls were moved earlier, and the queue stays within its bound.
    #[test]
    fn rounds_are_the_due_calls_in_grid_order() {
        let n = 7;
        let mut due: Vec<Option<i64>> = vec![Some(0); n];
        let mut queue = DueCalls::from_due(&due);
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rand = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let mut done = -1;
        let mut out = Vec::new();
        for _ in 0..2_000 {
            // Records: some channels' calls move earlier (to after the last round).
            for _ in 0..rand(4) {
                let c = rand(n as u64) as usize;
                let k = done + 1 + rand(3) as i64;
                if due[c].map_or(true, |d| k < d) {
                    due[c] = Some(k);
                    queue.schedule(c, k, &due);
                }
            }
            let last = done + rand(3) as i64;
            let want = due.iter().flatten().copied().filter(|&k| k <= last).min();
            let got = queue.next_round(last, &due, &mut out);
            assert_eq!(got, want);
            let Some(k) = got else {
                done = last.max(done);
                continue;
            };
            let channels: Vec<u32> = (0..n as u32)
                .filter(|&c| due[c as usize] == Some(k))
                .collect();
            assert_eq!(out, channels);
            for &c in &channels {
                // A call: the next one later, or none.
                due[c as usize] = match rand(5) {
                    0 => None,
                    j => Some(k + 1 + (j as i64) * rand(400) as i64),
                };
                if let Some(next) = due[c as usize] {
                    queue.schedule(c as usize, next, &due);
                }
            }
            done = k;
            assert!(queue.len() <= COMPACT_FACTOR * n + 64 + 1);
        }
    }
}
