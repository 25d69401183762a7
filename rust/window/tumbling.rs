//! The operator's fast path for tumbling windows: one window per record, looked up
//! a chunk ahead ([`Lookahead::fill`]); a record whose window is live is added with
//! no allocation, no timer and no per-row dispatch beyond the aggregates.

use super::{Output, Rec, Rows, WindowOperator};
use crate::window::lookahead::{Lookahead, NOT_FOUND, REJECTED};
use crate::window::output::DropReason;

impl WindowOperator {
    /// Adds the records `chunk..` of the batch, whose tumbling windows are in `look`.
    pub(super) fn tumbling_chunk(
        &mut self,
        look: &Lookahead,
        src: &Rows<'_, '_>,
        chunk: usize,
        out: &mut Output,
    ) {
        let (batch, ids) = (src.batch, src.ids);
        let mut created = false;
        for (i, (&window, &slot)) in look.windows.iter().zip(&look.slots).enumerate() {
            let row = chunk + i;
            if !batch.event_time_valid.map_or(true, |m| m[row]) {
                out.drop_row(row, DropReason::NullEventTime);
                continue;
            }
            if slot == REJECTED {
                out.drop_row(row, DropReason::MinEventTime);
                continue;
            }
            let (key, ts) = (ids[row], batch.event_time[row]);
            let position = src.base + row as i64;
            if slot == NOT_FOUND {
                // Not live when looked up: an earlier record of the chunk may have
                // created it since.
                let found = if created {
                    self.store.find(key, window)
                } else {
                    None
                };
                let rec = Rec {
                    key,
                    ts,
                    row,
                    trigger: Self::trigger(batch, src.base, row),
                };
                if self.add_to_window(&rec, window, found, src.adder, out) {
                    created |= found.is_none();
                    continue;
                }
            } else {
                // A live window: no timers to register (see `add_to_window`).
                if self.cleanup_time(&window) > self.watermark {
                    let idx = slot as usize;
                    src.adder
                        .add(self.store.cells_mut(key, idx), row, ts, position as u64);
                    if window.max_timestamp() <= self.watermark {
                        let trigger = Self::trigger(batch, src.base, row);
                        self.emit(key, idx, true, trigger, out);
                    }
                    continue;
                }
            }
            self.unplaced(row, ts, out);
        }
    }
}
