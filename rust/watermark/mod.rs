//! Watermark generation and combination, exactly as Apache Flink 2.3.0 does it
//! (see `tests/conformance/SEMANTICS.md`, sections 1 to 3).
//!
//! - [`generator`]: the base generators (bounded out-of-orderness, monotonous,
//!   punctuated, processing-time lag, none) and [`WatermarkGenerator`], Flink's
//!   interface, through which the driver runs them (and a user's Python generator).
//! - [`idleness`]: Flink's `WatermarksWithIdleness` timer state machine.
//! - [`strategy`]: [`Generator`], a base generator optionally wrapped with idleness.
//! - [`output`]: [`ChannelOutput`], the model of Flink's `WatermarkToDataOutput`.
//! - [`driver`]: the vectorized driver of one channel over arrays of records.
//! - [`channel`]: [`Channel`], a generator and its output, driven batch after batch.
//! - [`heap`]: the indexed min-heap the valve uses.
//! - [`valve`]: [`Valve`], Flink's `StatusWatermarkValve`.
//! - [`timeline`]: [`Combiner`], the valve and the timeline it emits; [`combine`],
//!   whole per-channel streams through it.
//! - [`builder`]: [`TimelineBuilder`], the combined timeline of many channels built
//!   incrementally from per-(channel, bucket) summaries, in bounded memory.
//! - [`due`]: [`due::DueCalls`], the builder's queue of the channels' periodic calls.
//! - [`multiplexer`]: [`Multiplexer`], Flink's `WatermarkOutputMultiplexer`.
//! - [`topology`]: which source subtask reads which channel (Flink's Kafka source).

pub mod builder;
pub mod channel;
pub mod driver;
pub mod due;
pub mod generator;
pub mod heap;
pub mod idleness;
pub mod multiplexer;
pub mod output;
pub mod strategy;
pub mod timeline;
pub mod topology;
pub mod valve;

pub use builder::{
    placeable_buckets, BucketRow, ChannelEmission, InForce, TimelineBuilder, MAX_EVERY_GRID_CALLS,
};
pub use channel::Channel;
pub use driver::{check_grid_span, drive, drive_into, DriveOutput, DriveParams, EmissionRow};
pub use generator::{BaseGenerator, WatermarkGenerator};
pub use heap::IndexedMinHeap;
pub use idleness::IdlenessTimer;
pub use multiplexer::{ListenerEvent, Multiplexer, MultiplexerStep, Via};
pub use output::ChannelOutput;
pub use strategy::Generator;
pub use timeline::{combine, ChannelRow, Combiner, TimelineRow};
pub use topology::{java_string_hash, kafka_split_owner, kafka_start_index};
pub use valve::Valve;

/// What a generator, an output or the valve emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Emission {
    /// A watermark with its timestamp in ticks.
    Watermark(i64),
    /// The stream became idle.
    Idle,
    /// The stream became active again.
    Active,
}

impl Emission {
    /// The kind as the Python layer spells it: `"watermark"`, `"idle"` or `"active"`.
    pub fn kind_name(self) -> &'static str {
        match self {
            Self::Watermark(_) => "watermark",
            Self::Idle => "idle",
            Self::Active => "active",
        }
    }

    /// The watermark value, or `None` for a status.
    pub fn watermark(self) -> Option<i64> {
        match self {
            Self::Watermark(w) => Some(w),
            _ => None,
        }
    }
}

/// Snapshot kind bytes of the watermark objects (see [`crate::snapshot`]).
pub(crate) mod kinds {
    /// [`super::Generator`].
    pub const GENERATOR: u8 = 0x11;
    /// [`super::Valve`].
    pub const VALVE: u8 = 0x12;
    /// [`super::Multiplexer`].
    pub const MULTIPLEXER: u8 = 0x13;
    /// [`super::Channel`].
    pub const CHANNEL: u8 = 0x14;
    /// [`super::TimelineBuilder`].
    pub const TIMELINE_BUILDER: u8 = 0x15;
    /// A [`super::Channel`] running a user's Python generator (the Python bindings).
    #[cfg_attr(not(feature = "python"), allow(dead_code))]
    pub const USER_CHANNEL: u8 = 0x16;
}
