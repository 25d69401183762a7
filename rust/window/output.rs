//! What the window operator emits: window results (columnar), late records and
//! dropped records (as row indices into the input batch).

use super::aggregate::{AggColumn, AggSpec, Cell, ValueType};
use super::assigner::TimeWindow;
use crate::time::Ticks;

/// Why a record was dropped (neither in a window nor late). Every reason's text in
/// floodmark comes from here (the Python layer reads them as `_core.DROP_REASONS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The event time is null.
    NullEventTime,
    /// The arrival time is null: the watermark stages cannot place the record (the
    /// window operator takes no arrival column, so it never gives this reason).
    NullArrival,
    /// The channel is null: the watermark stages cannot place the record (never
    /// given by the window operator either).
    NullChannel,
    /// The event time is `MIN` under tumbling/sliding windows (Flink fails the job).
    MinEventTime,
    /// The record landed in no live window and is not late by `ts + L <= wm`
    /// (Flink drops it silently).
    NoWindow,
}

impl DropReason {
    /// Every reason: first the watermark stages' (the null columns, in the order they
    /// are tested), then the window operator's own.
    pub const ALL: [Self; 5] = [
        Self::NullEventTime,
        Self::NullArrival,
        Self::NullChannel,
        Self::MinEventTime,
        Self::NoWindow,
    ];

    /// The reason as written in the `reason` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NullEventTime => "null_event_time",
            Self::NullArrival => "null_arrival",
            Self::NullChannel => "null_channel",
            Self::MinEventTime => "min_event_time",
            Self::NoWindow => "no_window",
        }
    }
}

/// Window results, one row per firing, columnar.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    /// Dense key id (see [`super::keys::KeyDict`]).
    pub key: Vec<u32>,
    /// Window start.
    pub start: Vec<Ticks>,
    /// Window end (exclusive).
    pub end: Vec<Ticks>,
    /// The current watermark when the window fired.
    pub watermark: Vec<Ticks>,
    /// `true` when fired by a late record, `false` when fired by a watermark advance.
    pub late: Vec<bool>,
    /// Global 0-based position of the trigger (record index, or records before an advance).
    pub trigger_position: Vec<i64>,
    /// Arrival time of the triggering record, or time of the advance.
    pub trigger_time: Vec<Option<i64>>,
    /// One column per aggregate, in the order of the aggregate specs.
    pub aggs: Vec<AggColumn>,
}

impl Results {
    /// Empty results for aggregates of the given output types.
    pub fn new(agg_types: &[ValueType]) -> Self {
        Self {
            key: Vec::new(),
            start: Vec::new(),
            end: Vec::new(),
            watermark: Vec::new(),
            late: Vec::new(),
            trigger_position: Vec::new(),
            trigger_time: Vec::new(),
            aggs: agg_types.iter().map(|&t| AggColumn::new(t)).collect(),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.key.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }

    /// Appends one firing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        key: u32,
        window: TimeWindow,
        watermark: Ticks,
        late: bool,
        trigger: &Trigger,
        cells: &[Cell],
        specs: &[AggSpec],
    ) {
        self.key.push(key);
        self.start.push(window.start);
        self.end.push(window.end);
        self.watermark.push(watermark);
        self.late.push(late);
        self.trigger_position.push(trigger.position);
        self.trigger_time.push(trigger.time);
        for ((col, cell), spec) in self.aggs.iter_mut().zip(cells).zip(specs) {
            col.push(cell, spec);
        }
    }
}

/// What caused a firing: its global position and optional time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trigger {
    pub position: i64,
    pub time: Option<i64>,
}

/// Everything one call of the operator emits.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// Window results, in emission order.
    pub results: Results,
    /// Batch row indices of the late records (side output), in order.
    pub late_rows: Vec<usize>,
    /// The watermark at the moment each late record arrived.
    pub late_watermark: Vec<Ticks>,
    /// Batch row indices of the dropped records, in order.
    pub dropped_rows: Vec<usize>,
    /// Why each was dropped.
    pub dropped_reason: Vec<DropReason>,
}

impl Output {
    /// An empty output.
    pub fn new(agg_types: &[ValueType]) -> Self {
        Self {
            results: Results::new(agg_types),
            late_rows: Vec::new(),
            late_watermark: Vec::new(),
            dropped_rows: Vec::new(),
            dropped_reason: Vec::new(),
        }
    }

    /// Records that batch row `row` was dropped, and why.
    pub(crate) fn drop_row(&mut self, row: usize, reason: DropReason) {
        self.dropped_rows.push(row);
        self.dropped_reason.push(reason);
    }
}
