//! [`IndexedMinHeap`]: a binary min-heap over `(watermark, channel)` with a position
//! index per channel, so a channel's entry can be updated or removed in O(log n).
//! Ties are broken by the lower channel index.

/// An indexed min-heap of channel watermarks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedMinHeap {
    /// Heap array of `(watermark, channel)`.
    heap: Vec<(i64, u32)>,
    /// `pos[channel]` = index in `heap`, or `u32::MAX` if absent.
    pos: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl IndexedMinHeap {
    /// An empty heap for channels `0..num_channels`.
    pub fn new(num_channels: usize) -> Self {
        Self {
            heap: Vec::with_capacity(num_channels),
            pos: vec![ABSENT; num_channels],
        }
    }

    /// Number of channels in the heap.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no channel is in the heap.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// True if `channel` is in the heap.
    #[inline]
    pub fn contains(&self, channel: usize) -> bool {
        self.pos[channel] != ABSENT
    }

    /// The `(channel, watermark)` with the smallest watermark (lowest channel on ties).
    #[inline]
    pub fn peek(&self) -> Option<(usize, i64)> {
        self.heap.first().map(|&(w, c)| (c as usize, w))
    }

    /// Inserts `channel` with `wm`, or updates its watermark if present.
    #[inline]
    pub fn upsert(&mut self, channel: usize, wm: i64) {
        let p = self.pos[channel];
        if p == ABSENT {
            let i = self.heap.len();
            self.heap.push((wm, channel as u32));
            self.pos[channel] = i as u32;
            self.sift_up(i);
        } else {
            let i = p as usize;
            let old = self.heap[i].0;
            self.heap[i].0 = wm;
            if wm < old {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Removes `channel` if present; returns whether it was.
    pub fn remove(&mut self, channel: usize) -> bool {
        let p = self.pos[channel];
        if p == ABSENT {
            return false;
        }
        let i = p as usize;
        let last = self.heap.len() - 1;
        self.swap(i, last);
        self.heap.pop();
        self.pos[channel] = ABSENT;
        if i < self.heap.len() {
            self.sift_down(i);
            self.sift_up(i);
        }
        true
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i] < self.heap[parent] {
                self.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    #[inline]
    #[allow(clippy::many_single_char_names)]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r] < self.heap[l] {
                r
            } else {
                l
            };
            if self.heap[c] < self.heap[i] {
                self.swap(i, c);
                i = c;
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a scan, over heaps of 3 to 16 channels: deep enough that a removal from
    /// the middle moves the last entry under a parent larger than it (the sift-up after
    /// the sift-down; 8 channels alone never drew that case).
    #[test]
    fn matches_a_scan() {
        for n in 3..=16 {
            matches_a_scan_with(n);
        }
    }

    fn matches_a_scan_with(n: usize) {
        let mut h = IndexedMinHeap::new(n);
        let mut model: Vec<Option<i64>> = vec![None; n];
        let mut x: u64 = 12345 + n as u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let ch = ((x >> 33) % n as u64) as usize;
            let wm = ((x >> 20) % 50) as i64 - 25;
            if (x >> 60) % 4 == 0 {
                assert_eq!(h.remove(ch), model[ch].is_some());
                model[ch] = None;
            } else {
                h.upsert(ch, wm);
                model[ch] = Some(wm);
            }
            let want = model
                .iter()
                .enumerate()
                .filter_map(|(c, w)| w.map(|w| (w, c)))
                .min()
                .map(|(w, c)| (c, w));
            assert_eq!(h.peek(), want);
            assert_eq!(h.len(), model.iter().flatten().count());
        }
    }
}
