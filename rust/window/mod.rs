//! Event-time windows: assigners ([`assigner`]), incremental aggregates
//! ([`aggregate`]), the key dictionary ([`keys`]), and the keyed event-time window
//! operator ([`operator`]) with allowed lateness and late/dropped outputs
//! ([`output`]), snapshotted by [`persist`]; Flink's element-late rule ([`late`]).

pub mod aggregate;
pub mod assigner;
pub mod keys;
pub mod late;
mod lookahead;
pub mod operator;
pub mod output;
pub mod persist;
mod store;
mod timers;

pub use aggregate::{AggColumn, AggFn, AggSpec, ValueCol, ValueType};
pub use assigner::{merge_windows, window_start_with_offset, Merge, TimeWindow, WindowAssigner};
pub use keys::{KeyCol, KeyDict, KeyType, KeyValues};
pub use late::{behind_watermark, is_element_late};
pub use operator::{Advance, Batch, OperatorConfig, WindowOperator};
pub use output::{DropReason, Output, Results};
