//! [`TimelineBuilder`]: the combined watermark timeline of many channels, built in one
//! pass, chunk by chunk, with memory bounded by the number of channels.
//!
//! # Input
//!
//! Rows in arrival order, each a record or a summary of records of one channel: its
//! **bucket** of the emission grid (`ceil(arrival / interval)`: the records of bucket
//! `k` are first seen by the periodic emission at grid time `k * interval`) and the
//! largest event time among them. For the periodic generators (bounded
//! out-of-orderness, monotonous, processing-time lag, none; with or without
//! idleness) that is all an emission depends on, so one row per non-empty
//! `(channel, bucket)` gives the same timeline as every record (the Spark pipeline
//! sends such summaries; `floodmark.replay` sends records).
//!
//! Rows must come in non-decreasing bucket order (any channel order within a bucket),
//! in any number of [`TimelineBuilder::push`] calls. [`TimelineBuilder::advance_to`]
//! declares every bucket up to `k` complete and runs the grid up to it (a live query's
//! frontier); [`TimelineBuilder::finish`] runs it up to the last bucket seen.
//!
//! # What it computes
//!
//! Exactly what [`super::drive`] over each channel followed by [`super::combine`]
//! gives (the tests check it), with the same timing model: the grid starts at the
//! first bucket seen and every channel's generator is called at every grid time (the
//! calls that cannot emit anything new are skipped by [`Generator::next_call`], so
//! the work grows with the rows and the channels, not the span); each channel's
//! output passes Flink's `WatermarkToDataOutput`; at one grid time the channels reach
//! the valve in index order. Per row, the builder returns the watermark **in force**
//! when its records arrived: the channel's, and the combined one (the state after
//! grid time `(bucket - 1) * interval`). The combined timeline ([`TimelineRow`], with
//! its advances) and, if asked for, every channel's own output stream, are taken out
//! with [`TimelineBuilder::take_timeline`] / [`TimelineBuilder::take_emissions`].
//!
//! Generators that emit on records (punctuated, user Python generators) are driven
//! per channel elsewhere; their output streams are merged by a builder made with
//! [`TimelineBuilder::for_emissions`] and [`TimelineBuilder::push_emissions`].
//!
//! # Topology
//!
//! By default each channel is one source subtask: its output reaches the valve
//! directly. [`TimelineBuilder::with_subtasks`] reads several channels per subtask
//! (Flink's multiplexer per subtask, then the valve over the subtasks), and
//! [`TimelineBuilder::with_channel_ends`] ends each channel's input separately (its
//! watermark becomes `MAX` after its last record). `docs/semantics.md` says which
//! Flink job each setting equals.
//!
//! # Incremental
//!
//! The output of a stream cut into any chunks equals the output of the whole, and a
//! [`TimelineBuilder::snapshot`] between two chunks restores into a builder that goes
//! on as the original would (property tests check both). A snapshot does not hold
//! outputs not yet taken.

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

use super::channel::Channel;
use super::due::DueCalls;
use super::kinds;
use super::multiplexer::Multiplexer;
use super::output::ChannelOutput;
use super::strategy::Generator;
use super::timeline::{Combiner, TimelineRow};
use super::valve::{placements, spread};
use super::Emission;

/// At most this many periodic calls in one grid run of a generator that emits at
/// every grid time (processing-time lag): every channel times every grid point.
pub const MAX_EVERY_GRID_CALLS: u64 = 1 << 28;

/// One input row: records of `channel` in grid bucket `bucket`, the largest event time
/// among them `max_ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRow {
    /// The channel index (`0..num_channels`).
    pub channel: usize,
    /// `ceil(arrival / interval)` of the records.
    pub bucket: i64,
    /// Their largest event time.
    pub max_ts: i64,
}

/// The watermarks in force for one input row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InForce {
    /// The row's channel watermark (`MIN`: none yet).
    pub channel: i64,
    /// The combined watermark (`MIN`: none yet).
    pub combined: i64,
}

/// One row of a channel's own output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelEmission {
    /// The channel index.
    pub channel: usize,
    /// When it was emitted.
    pub time: i64,
    /// What.
    pub emission: Emission,
}

/// Where the channels' output streams come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Periodic generators run by the builder: each channel's generator and output.
    Periodic {
        template: Generator,
        channels: Vec<Channel>,
        /// The next grid index at which each channel's generator must be called.
        due: Vec<Option<i64>>,
    },
    /// Output streams computed elsewhere; the rows of the latest time wait here, so
    /// that the rows of one time reach the valve in channel order whatever the chunks.
    Emissions { pending: Vec<ChannelEmission> },
}

/// Several channels per source subtask ([`TimelineBuilder::with_subtasks`]): each
/// subtask's multiplexer over its channels (Flink's split outputs) and its output.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Subtasks {
    /// The subtask of each channel.
    owner: Vec<usize>,
    /// Each channel's position among its subtask's multiplexer outputs (None once its
    /// input ended and the output was unregistered).
    slot: Vec<Option<usize>>,
    /// Per subtask: the multiplexer over its channels (ids: the channel indexes).
    mux: Vec<Multiplexer>,
    /// Per subtask: the `WatermarkToDataOutput` between its multiplexer and the valve.
    output: Vec<ChannelOutput>,
    /// The subtasks whose channels were called in the round being run (empty between
    /// calls).
    touched: Vec<usize>,
}

impl Subtasks {
    /// Channel `c`'s split output as its multiplexer holds it: `(watermark, idle)`;
    /// `(MAX, false)` once its input ended.
    fn partial(&self, c: usize) -> (i64, bool) {
        match self.slot[c] {
            Some(i) => self.mux[self.owner[c]]
                .outputs()
                .nth(i)
                .map_or((i64::MIN, false), |(_, w, idle)| (w, idle)),
            None => (i64::MAX, false),
        }
    }

    /// The channel holding subtask `s`'s combined watermark: the lowest active one at
    /// the minimum (any one if all are idle; the lowest of its channels once all ended).
    fn min_channel(&self, s: usize) -> Option<usize> {
        let mut best: Option<(i64, usize)> = None;
        let mut first = None;
        for (id, w, idle) in self.mux[s].outputs() {
            let c = id.parse::<usize>().ok()?;
            first.get_or_insert(c);
            if !idle && best.map_or(true, |(bw, _)| w < bw) {
                best = Some((w, c));
            }
        }
        best.map(|(_, c)| c)
            .or(first)
            .or_else(|| self.owner.iter().position(|&o| o == s))
    }

    fn write(&self, w: &mut Writer) {
        w.u64(self.mux.len() as u64).u64(self.owner.len() as u64);
        for (o, slot) in self.owner.iter().zip(&self.slot) {
            w.u64(*o as u64);
            write_opt(w, slot.map(|i| i as i64));
        }
        for (m, out) in self.mux.iter().zip(&self.output) {
            m.write(w);
            out.write(w);
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.len(1)?;
        let m = r.len(17)?;
        let mut owner = Vec::with_capacity(m);
        let mut slot = Vec::with_capacity(m);
        for _ in 0..m {
            let o = r.u64()? as usize;
            if o >= n {
                return Err(Error::Snapshot(
                    "a channel's subtask is out of range".into(),
                ));
            }
            owner.push(o);
            slot.push(read_opt(r)?.map(|i| i as usize));
        }
        let mut mux = Vec::with_capacity(n);
        let mut output = Vec::with_capacity(n);
        for _ in 0..n {
            mux.push(Multiplexer::read(r)?);
            output.push(ChannelOutput::read(r)?);
        }
        let sub = Self {
            owner,
            slot,
            mux,
            output,
            touched: Vec::new(),
        };
        let consistent = (0..sub.owner.len()).all(|c| {
            sub.slot[c].map_or(true, |i| {
                sub.mux[sub.owner[c]].outputs().nth(i).map(|o| o.0) == Some(&*c.to_string())
            })
        });
        if !consistent {
            return Err(Error::Snapshot(
                "the channels disagree with their subtasks' multiplexers".into(),
            ));
        }
        Ok(sub)
    }
}

/// The combined watermark timeline of many channels, built incrementally (see the
/// module docs).
///
/// # Examples
/// ```
/// use floodmark::watermark::{BaseGenerator, BucketRow, Generator, TimelineBuilder};
/// let gen = Generator::new(BaseGenerator::bounded(0).unwrap());
/// let mut b = TimelineBuilder::new(gen, 2, 200).unwrap();
/// let rows = [
///     BucketRow { channel: 0, bucket: 1, max_ts: 100 },
///     BucketRow { channel: 1, bucket: 1, max_ts: 150 },
///     BucketRow { channel: 0, bucket: 2, max_ts: 300 },
/// ];
/// let mut in_force = Vec::new();
/// b.push(&rows, &mut in_force).unwrap();
/// b.finish().unwrap();
/// // The combined watermark is the minimum over the channels: `max - 0 - 1`.
/// let t: Vec<(i64, i64)> = b.take_timeline().iter().map(|r| (r.time, r.watermark)).collect();
/// assert_eq!(t, vec![(200, 99), (400, 149)]);
/// // The third row arrived after the emission at 200 ms: it met watermark 99.
/// assert_eq!(in_force[2].combined, 99);
/// assert_eq!(in_force[2].channel, 99);
/// ```
#[derive(Debug, Clone)]
pub struct TimelineBuilder {
    interval: i64,
    source: Source,
    combiner: Combiner,
    /// The channels' due calls by grid index (candidates; `due` is the truth).
    queue: DueCalls,
    /// The channels of the round being run (scratch).
    round: Vec<u32>,
    /// The last grid index run (None until the grid starts).
    ran_through: Option<i64>,
    /// The largest bucket (periodic) or time (emissions) pushed so far.
    last: Option<i64>,
    keep_emissions: bool,
    emissions: Vec<ChannelEmission>,
    timeline: Vec<TimelineRow>,
    scratch: Vec<Emission>,
    /// Several channels per source subtask (None: one subtask per channel).
    subtasks: Option<Subtasks>,
    /// The grid index at which each channel's input ends, its watermark becoming
    /// `MAX` (None: every channel ends together, at [`Self::finish`]).
    ends: Option<Vec<i64>>,
}

impl PartialEq for TimelineBuilder {
    fn eq(&self, other: &Self) -> bool {
        self.snapshot() == other.snapshot()
    }
}

impl TimelineBuilder {
    /// A builder running `generator` (fresh, as a template) on each of `num_channels`
    /// channels, with periodic emission every `interval` ticks.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `emit_interval` unless `interval > 0`,
    /// `strategy` if the generator emits on records (punctuated), or `num_channels`
    /// if it is too large.
    pub fn new(generator: Generator, num_channels: usize, interval: i64) -> Result<Self> {
        check_interval(interval)?;
        if !generator.events_are_silent() {
            return Err(Error::param(
                "strategy",
                "the timeline builder runs the periodic generators; a generator that \
                 emits on records is driven per channel, and its output streams merged \
                 with a builder for emissions",
            ));
        }
        let combiner = Combiner::new(num_channels)?;
        Ok(Self::with_source(
            interval,
            Source::Periodic {
                channels: vec![Channel::new(generator.clone()); num_channels],
                due: vec![None; num_channels],
                template: generator,
            },
            combiner,
        ))
    }

    /// A builder merging output streams computed elsewhere (one per channel, e.g. by
    /// [`super::drive`]) through the valve: [`Self::push_emissions`].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `num_channels` if it is too large.
    pub fn for_emissions(num_channels: usize) -> Result<Self> {
        let combiner = Combiner::new(num_channels)?;
        Ok(Self::with_source(
            1,
            Source::Emissions {
                pending: Vec::new(),
            },
            combiner,
        ))
    }

    fn with_source(interval: i64, source: Source, combiner: Combiner) -> Self {
        let queue = match &source {
            Source::Periodic { due, .. } => DueCalls::from_due(due),
            Source::Emissions { .. } => DueCalls::default(),
        };
        Self {
            interval,
            source,
            combiner,
            queue,
            round: Vec::new(),
            ran_through: None,
            last: None,
            keep_emissions: false,
            emissions: Vec::new(),
            timeline: Vec::new(),
            scratch: Vec::new(),
            subtasks: None,
            ends: None,
        }
    }

    /// Fails unless the builder runs periodic generators and has not started.
    fn check_fresh(&self, what: &'static str) -> Result<()> {
        if !matches!(self.source, Source::Periodic { .. }) {
            return Err(Error::param(
                what,
                "only the periodic generators run in the timeline builder; a generator \
                 that emits on records cannot take this option",
            ));
        }
        if self.ran_through.is_some() || self.last.is_some() {
            return Err(Error::IllegalState(format!(
                "{what} must be set before the first row"
            )));
        }
        Ok(())
    }

    /// Reads the channels as partitions of `num_subtasks` source subtasks, channel `c`
    /// by subtask `owner[c]` (see [`super::kafka_split_owner`]): as Flink's source
    /// does, each subtask's channels (splits) are combined by a
    /// [`Multiplexer`] (each split's generator writes to its deferred output; at each
    /// periodic emission every split's generator is called, then the multiplexer's
    /// `onPeriodicEmit`), whose combined output passes the subtask's
    /// `WatermarkToDataOutput`; the valve combines the subtasks. The valve's channels
    /// are then the subtasks; [`TimelineRow::min_channel`], [`Self::min_channel`], the
    /// channel watermark in force and [`Self::channel_status`] still name channels
    /// (the split's own output as the multiplexer holds it), and the kept emissions
    /// are each channel's split output (its changes).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `source_parallelism` if `owner` does not
    /// give every channel a subtask in `0..num_subtasks`, or a subtask reads none of
    /// the channels (Flink's Kafka reader without partitions is never idle: it would
    /// hold the combined watermark at `MIN`); [`Error::IllegalState`] after the first
    /// row; for a builder of emissions, [`Error::InvalidParameter`].
    pub fn with_subtasks(mut self, owner: Vec<usize>, num_subtasks: usize) -> Result<Self> {
        self.check_fresh("source_parallelism")?;
        let n = self.num_channels();
        if owner.len() != n {
            return Err(Error::param(
                "source_parallelism",
                format!("{} subtask owners given for {n} channels", owner.len()),
            ));
        }
        if num_subtasks > n {
            // Before anything is allocated for the subtasks (one each).
            return Err(Error::param(
                "source_parallelism",
                format!(
                    "{num_subtasks} subtasks for {n} channels: a subtask would read none of \
                     them (in Flink a Kafka reader without partitions is never idle and holds \
                     the combined watermark at its start); give at most as many subtasks as \
                     there are partitions with records"
                ),
            ));
        }
        let mut mux = vec![Multiplexer::new(); num_subtasks];
        let mut slot = Vec::with_capacity(n);
        for (c, &s) in owner.iter().enumerate() {
            let Some(m) = mux.get_mut(s) else {
                return Err(Error::param(
                    "source_parallelism",
                    format!("channel {c}'s subtask {s} is not in 0..{num_subtasks}"),
                ));
            };
            slot.push(Some(m.output_ids().count()));
            m.register(&c.to_string())?;
        }
        if let Some(s) = mux.iter().position(|m| m.output_ids().next().is_none()) {
            return Err(Error::param(
                "source_parallelism",
                format!(
                    "subtask {s} of {num_subtasks} would read none of the {n} channels: in \
                     Flink a Kafka reader without partitions is never idle and holds the \
                     combined watermark at its start; give at most as many subtasks as \
                     there are partitions with records (or the partitions' subtasks)"
                ),
            ));
        }
        self.combiner = Combiner::new(num_subtasks)?;
        self.subtasks = Some(Subtasks {
            owner,
            slot,
            mux,
            output: vec![ChannelOutput::new(); num_subtasks],
            touched: Vec::new(),
        });
        Ok(self)
    }

    /// Ends each channel's input separately (`end_of_input="per_channel"`): channel
    /// `c`'s last records are in grid bucket `ends[c]`, and right after its periodic
    /// call at grid time `ends[c] * interval` (the first emission that sees its last
    /// record) its watermark becomes `MAX`, as a bounded Flink split ends: with one
    /// channel per subtask the channel's output emits `MAX` to the valve (marking it
    /// active first if it was idle); with [`Self::with_subtasks`] the split's output is
    /// unregistered from its subtask's multiplexer before that subtask's
    /// `onPeriodicEmit`, and the subtask emits `MAX` when its last split ended. Rows of
    /// a channel after its end are refused.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `end_of_input` unless there is one end per
    /// channel; [`Error::IllegalState`] after the first row.
    pub fn with_channel_ends(mut self, ends: Vec<i64>) -> Result<Self> {
        self.check_fresh("end_of_input")?;
        if ends.len() != self.num_channels() {
            return Err(Error::param(
                "end_of_input",
                format!(
                    "{} channel ends given for {} channels",
                    ends.len(),
                    self.num_channels()
                ),
            ));
        }
        self.ends = Some(ends);
        Ok(self)
    }

    /// True if `other` has the same configuration: emission interval and generator
    /// (or both merge output streams), subtasks and channel ends. The channels may
    /// differ (inserted ones).
    pub fn same_config(&self, other: &Self) -> bool {
        self.interval == other.interval
            && match (&self.source, &other.source) {
                (Source::Periodic { template: a, .. }, Source::Periodic { template: b, .. }) => {
                    a == b
                }
                (Source::Emissions { .. }, Source::Emissions { .. }) => true,
                _ => false,
            }
            && self.subtasks.as_ref().map(|s| (&s.owner, s.mux.len()))
                == other.subtasks.as_ref().map(|s| (&s.owner, s.mux.len()))
            && self.ends == other.ends
    }

    /// Whether to keep every channel's own output stream for
    /// [`Self::take_emissions`] (off by default: it grows with channels x time).
    pub fn keep_emissions(&mut self, keep: bool) {
        self.keep_emissions = keep;
    }

    /// The grid bucket of an arrival time: `ceil(arrival / interval)`. The records of
    /// bucket `k` are first seen by the periodic emission at grid time `k * interval`.
    pub fn bucket_of(&self, arrival: i64) -> i64 {
        super::driver::ceil_div(arrival, self.interval)
    }

    /// Number of channels.
    pub fn num_channels(&self) -> usize {
        match &self.source {
            Source::Periodic { channels, .. } => channels.len(),
            Source::Emissions { .. } => self.combiner.valve().num_channels(),
        }
    }

    /// The periodic emission interval in ticks (1 for a builder of emissions).
    pub fn interval(&self) -> i64 {
        self.interval
    }

    /// The combined watermark so far (`MIN` before the first).
    pub fn watermark(&self) -> i64 {
        self.combiner.watermark()
    }

    /// True if every channel is idle.
    pub fn is_idle(&self) -> bool {
        self.combiner.is_idle()
    }

    /// The last grid index run (None before the grid starts).
    pub fn ran_through(&self) -> Option<i64> {
        self.ran_through
    }

    /// The largest bucket (or, for emissions, time) pushed so far.
    pub fn last(&self) -> Option<i64> {
        self.last
    }

    /// Channel `c`'s output so far: its watermark (`MIN`: none) and whether it is idle.
    pub fn channel_status(&self, c: usize) -> Option<(i64, bool)> {
        if let Some(sub) = &self.subtasks {
            return (c < sub.owner.len()).then(|| sub.partial(c));
        }
        match &self.source {
            Source::Periodic { channels, .. } => channels
                .get(c)
                .map(|ch| (ch.output.watermark(), ch.output.is_idle())),
            Source::Emissions { .. } => self
                .combiner
                .valve()
                .channel(c as i64)
                .ok()
                .map(|(w, idle, _)| (w, idle)),
        }
    }

    /// The channel holding the combined watermark back (the lowest aligned one), if any.
    pub fn min_channel(&self) -> Option<usize> {
        let s = self.combiner.valve().min_channel()?;
        match &self.subtasks {
            Some(sub) => sub.min_channel(s),
            None => Some(s),
        }
    }

    /// The timeline rows emitted since the last call.
    pub fn take_timeline(&mut self) -> Vec<TimelineRow> {
        std::mem::take(&mut self.timeline)
    }

    /// The channels' own output rows since the last call (kept only with
    /// [`Self::keep_emissions`]).
    pub fn take_emissions(&mut self) -> Vec<ChannelEmission> {
        std::mem::take(&mut self.emissions)
    }

    /// Adds a channel at index `at` (channels from `at` on move up by one): a new
    /// Kafka partition, registered as Flink registers a new split (fresh generator, at
    /// `MIN`, active, counted in the minimum until it catches up or goes idle; see
    /// [`super::Valve::insert_channel`]). Its generator is first called at the next
    /// grid time.
    ///
    /// # Errors
    /// As [`Self::insert_channels`].
    pub fn insert_channel(&mut self, at: usize) -> Result<()> {
        self.insert_channels(&[at])
    }

    /// Adds several channels at once, each as [`Self::insert_channel`] adds one: `at`
    /// holds their indexes among the channels after the insertion, ascending. One pass
    /// over the channels, whatever their number.
    ///
    /// # Errors
    /// As [`super::Valve::insert_channels`]; [`Error::IllegalState`] for a builder with
    /// subtasks or channel ends. On error no channel is added.
    pub fn insert_channels(&mut self, at: &[usize]) -> Result<()> {
        if self.subtasks.is_some() || self.ends.is_some() {
            return Err(Error::IllegalState(
                "channels cannot be added to a builder with subtasks or channel ends".into(),
            ));
        }
        let placed = placements(self.combiner.valve().num_channels(), at)?;
        // The time the channels join at: the last grid time run, or for output streams
        // the last time fed (`MIN` before either).
        let time = match self.source {
            Source::Periodic { .. } => self
                .ran_through
                .map_or(i64::MIN, |k| k.saturating_mul(self.interval)),
            Source::Emissions { .. } => self.last.unwrap_or(i64::MIN),
        };
        self.combiner
            .insert_channels(at, time, &mut self.timeline)?;
        let next = self.ran_through.map(|k| k + 1);
        match &mut self.source {
            Source::Periodic {
                template,
                channels,
                due,
            } => {
                *channels = spread(std::mem::take(channels), &placed, at, || {
                    Channel::new(template.clone())
                });
                *due = spread(std::mem::take(due), &placed, at, || next);
            }
            Source::Emissions { pending } => {
                for e in pending.iter_mut() {
                    e.channel = placed[e.channel];
                }
            }
        }
        for e in &mut self.emissions {
            e.channel = placed[e.channel];
        }
        self.rebuild_queue();
        Ok(())
    }

    fn rebuild_queue(&mut self) {
        if let Source::Periodic { due, .. } = &self.source {
            self.queue = DueCalls::from_due(due);
        }
    }

    /// Feeds `rows` (see the module docs) and appends the watermarks in force for each
    /// to `in_force`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `channel` for a channel out of range, `arrival`
    /// for rows out of bucket order, before a grid time already run (behind the
    /// frontier), or whose grid times leave the `i64` range; [`Error::InvalidParameter`]
    /// naming `emit_interval` if a processing-time-lag generator would make more than
    /// [`MAX_EVERY_GRID_CALLS`] calls. On error nothing changes.
    pub fn push(&mut self, rows: &[BucketRow], in_force: &mut Vec<InForce>) -> Result<()> {
        self.check_rows(rows)?;
        in_force.reserve(rows.len());
        for r in rows {
            if self.ran_through.is_none() {
                self.start(r.bucket);
            }
            self.run_until(r.bucket - 1)?;
            let Source::Periodic { channels, due, .. } = &mut self.source else {
                unreachable!("checked by check_rows");
            };
            let ch = &mut channels[r.channel];
            ch.generator.absorb(std::slice::from_ref(&r.max_ts));
            if due[r.channel].map_or(true, |d| r.bucket < d) {
                due[r.channel] = Some(r.bucket);
                self.queue.schedule(r.channel, r.bucket, due);
            }
            let channel = match &self.subtasks {
                Some(sub) => sub.partial(r.channel).0,
                None => ch.output.watermark(),
            };
            in_force.push(InForce {
                channel,
                combined: self.combiner.watermark(),
            });
            self.last = Some(r.bucket);
        }
        Ok(())
    }

    fn check_rows(&self, rows: &[BucketRow]) -> Result<()> {
        let Source::Periodic { channels, .. } = &self.source else {
            return Err(Error::IllegalState(
                "this builder merges output streams: use push_emissions".into(),
            ));
        };
        let n = channels.len();
        let mut prev = self.last;
        for (i, r) in rows.iter().enumerate() {
            check_channel(i, r.channel, n)?;
            if let Some(end) = self.ends.as_ref().map(|e| e[r.channel]) {
                if r.bucket > end {
                    return Err(Error::input(
                        "arrival",
                        format!(
                            "row {i}: channel {} ends in bucket {end} (its input ends \
                             there), but the row is in bucket {}",
                            r.channel, r.bucket
                        ),
                    ));
                }
            }
            if prev.is_some_and(|p| r.bucket < p) {
                return Err(Error::input(
                    "arrival",
                    format!(
                        "rows must come in arrival order, but row {i} is in bucket {} after \
                         bucket {}",
                        r.bucket,
                        prev.unwrap_or_default()
                    ),
                ));
            }
            if self.ran_through.is_some_and(|k| r.bucket <= k) {
                return Err(Error::input(
                    "arrival",
                    format!(
                        "row {i} arrived in bucket {}, at or before grid time {} that was \
                         already emitted (behind the frontier)",
                        r.bucket,
                        self.ran_through.unwrap_or_default()
                    ),
                ));
            }
            grid_time(r.bucket, self.interval)?;
            prev = Some(r.bucket);
        }
        if let Some(first) = rows.first() {
            // The grid runs between consecutive buckets with records: the longest such
            // stretch is what the bound applies to, so that how the input is cut into
            // pushes (Arrow batches, chunks) never decides whether it is refused.
            let mut from = self.ran_through.map_or(first.bucket, |k| k + 1);
            for r in rows {
                if r.bucket > from {
                    self.check_work(from, r.bucket - 1)?;
                    from = r.bucket;
                }
            }
        }
        Ok(())
    }

    /// Refuses one grid run between two buckets with records (or up to an
    /// [`Self::advance_to`]) that would call every channel at every grid point too
    /// often.
    fn check_work(&self, from: i64, to: i64) -> Result<()> {
        let Source::Periodic {
            template, channels, ..
        } = &self.source
        else {
            return Ok(());
        };
        if to < from || template.base().periodic_is_stable() {
            return Ok(());
        }
        let points = u64::try_from(i128::from(to) - i128::from(from) + 1).unwrap_or(u64::MAX);
        let calls = points.saturating_mul(channels.len() as u64);
        if calls > MAX_EVERY_GRID_CALLS {
            return Err(Error::param(
                "emit_interval",
                format!(
                    "a processing-time-lag watermark is emitted by every channel at every \
                     grid time: {} channel(s) x {points} grid times between two arrivals \
                     (buckets {from} and {}) are more than {MAX_EVERY_GRID_CALLS} calls; \
                     give a larger emit_interval, or look for an outlier arrival",
                    channels.len(),
                    i128::from(to) + 1
                ),
            ));
        }
        Ok(())
    }

    /// Declares every bucket up to `bucket` complete and runs the grid up to it (a no-op
    /// before the first row, or for a bucket already run).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `bucket` if the grid time leaves the `i64`
    /// range, or as in [`Self::push`].
    pub fn advance_to(&mut self, bucket: i64) -> Result<()> {
        match self.source {
            Source::Periodic { .. } => {
                if let Some(k) = self.ran_through {
                    if bucket > k {
                        bucket_grid_time(bucket, self.interval)?;
                        self.check_work(k + 1, bucket)?;
                        self.run_until(bucket)?;
                    }
                }
                Ok(())
            }
            Source::Emissions { .. } => {
                if self.last.is_some_and(|t| bucket > t) {
                    self.flush_pending()?;
                }
                Ok(())
            }
        }
    }

    /// Runs the grid up to the last bucket seen (end of a bounded input).
    ///
    /// # Errors
    /// As [`Self::advance_to`].
    pub fn finish(&mut self) -> Result<()> {
        match self.source {
            Source::Periodic { .. } => match self.last {
                Some(last) => self.advance_to(last),
                None => Ok(()),
            },
            Source::Emissions { .. } => self.flush_pending(),
        }
    }

    /// Starts the grid at `bucket` before any row, as a first row in `bucket` would:
    /// every channel is first called at its grid time. For a builder over some of the
    /// channels of an input whose first row may come earlier than theirs (its
    /// channels' generators then get the calls they get in the whole input's builder,
    /// so their watermarks in force are the same).
    ///
    /// # Errors
    /// [`Error::IllegalState`] once the grid has started, or for a builder of output
    /// streams; [`Error::InvalidParameter`] naming `bucket` if the grid time leaves
    /// the `i64` range.
    pub fn start_at(&mut self, bucket: i64) -> Result<()> {
        if !matches!(self.source, Source::Periodic { .. }) {
            return Err(Error::IllegalState(
                "this builder merges output streams: it has no grid".into(),
            ));
        }
        if let Some(k) = self.ran_through {
            return Err(Error::IllegalState(format!(
                "the grid has already started (it ran through bucket {k})"
            )));
        }
        bucket_grid_time(bucket, self.interval)?;
        self.start(bucket);
        Ok(())
    }

    /// Starts the grid at index `k0`: every channel is called there first.
    fn start(&mut self, k0: i64) {
        self.ran_through = Some(k0 - 1);
        if let Source::Periodic { due, .. } = &mut self.source {
            for d in due.iter_mut() {
                *d = Some(k0);
            }
        }
        self.rebuild_queue();
    }

    /// Runs every due call at grid indexes up to `last`, in `(index, channel)` order.
    fn run_until(&mut self, last: i64) -> Result<()> {
        let Some(done) = self.ran_through else {
            return Ok(());
        };
        if last <= done {
            return Ok(());
        }
        let mut round = std::mem::take(&mut self.round);
        let ran = self.run_rounds(last, &mut round);
        self.round = round;
        if ran.is_err() {
            // A round cut short took its calls out of the queue: `due` still has them.
            self.rebuild_queue();
        }
        ran?;
        // Every call up to `last` is made: the last round is complete.
        self.combiner.end_round(&mut self.timeline);
        self.ran_through = Some(last);
        Ok(())
    }

    /// Every round of due calls at grid indexes up to `last`, each in channel order,
    /// each call's next one scheduled.
    fn run_rounds(&mut self, last: i64, round: &mut Vec<u32>) -> Result<()> {
        loop {
            let Source::Periodic { due, .. } = &self.source else {
                return Ok(());
            };
            let Some(k) = self.queue.next_round(last, due, round) else {
                return Ok(());
            };
            for &c in round.iter() {
                let c = c as usize;
                self.call(k, c)?;
                if let Source::Periodic { due, .. } = &self.source {
                    if let Some(next) = due[c] {
                        self.queue.schedule(c, next, due);
                    }
                }
            }
            self.flush_subtasks(k)?;
        }
    }

    /// The periodic call of channel `c` at grid index `k` (its due call); sets the
    /// channel's next due call.
    #[inline]
    fn call(&mut self, k: i64, c: usize) -> Result<()> {
        let Source::Periodic { channels, due, .. } = &mut self.source else {
            return Ok(());
        };
        debug_assert_eq!(due[c], Some(k), "a round holds only due calls");
        let t = k * self.interval; // in range: checked when the bucket came in
        let Channel {
            generator, output, ..
        } = &mut channels[c];
        let scratch = &mut self.scratch;
        scratch.clear();
        let end = self.ends.as_ref().map(|e| e[c]);
        let ended = end.is_some_and(|e| e <= k);
        if let Some(sub) = &mut self.subtasks {
            // The split's generator writes to its deferred output in the multiplexer;
            // the subtask emits after all its splits' calls ([`Self::flush_subtasks`]).
            generator.on_periodic_emit(t, &mut |e| scratch.push(e));
            let owner = sub.owner[c];
            if sub.touched.last() != Some(&owner) {
                sub.touched.push(owner);
            }
            let Some(pos) = sub.slot[c] else {
                due[c] = None; // released: never called again (restore refuses otherwise)
                return Ok(());
            };
            for &e in scratch.iter() {
                let before = sub.partial(c);
                sub.mux[owner].deferred_at(pos, e);
                if self.keep_emissions {
                    let after = sub.partial(c);
                    let changes = [
                        (before.1 && !after.1).then_some(Emission::Active),
                        (after.0 > before.0).then_some(Emission::Watermark(after.0)),
                        (!before.1 && after.1).then_some(Emission::Idle),
                    ];
                    for emission in changes.into_iter().flatten() {
                        self.emissions.push(ChannelEmission {
                            channel: c,
                            time: t,
                            emission,
                        });
                    }
                }
            }
            if ended {
                // The split finished: Flink releases its output from the multiplexer.
                // Its channel reports `MAX` (after `active` if it was idle), as a
                // split with a subtask of its own does.
                let was_idle = sub.partial(c).1;
                sub.mux[owner].unregister_at(pos);
                sub.slot[c] = None;
                for j in sub.slot.iter_mut().zip(&sub.owner) {
                    if let (Some(x), &o) = j {
                        if o == owner && *x > pos {
                            *x -= 1;
                        }
                    }
                }
                due[c] = None;
                if self.keep_emissions {
                    let active = was_idle.then_some(Emission::Active);
                    for emission in active.into_iter().chain([Emission::Watermark(i64::MAX)]) {
                        self.emissions.push(ChannelEmission {
                            channel: c,
                            time: t,
                            emission,
                        });
                    }
                }
                return Ok(());
            }
            due[c] = generator.next_call(k, self.interval);
            if let Some(e) = end {
                if due[c].map_or(true, |d| d > e) {
                    due[c] = Some(e); // called at its end, whatever it emits
                }
            }
            return Ok(());
        }
        generator.on_periodic_emit(t, &mut |e| output.push(e, &mut |x| scratch.push(x)));
        if ended {
            // The bounded split ends right after its last record: its channel
            // reports `MAX` (after `active` if it was idle).
            output.push(Emission::Watermark(i64::MAX), &mut |x| scratch.push(x));
            due[c] = None;
        } else {
            due[c] = generator.next_call(k, self.interval);
            if let Some(e) = end {
                if due[c].map_or(true, |d| d > e) {
                    due[c] = Some(e); // called at its end, whatever it emits
                }
            }
        }
        for &e in &self.scratch {
            if self.keep_emissions {
                self.emissions.push(ChannelEmission {
                    channel: c,
                    time: t,
                    emission: e,
                });
            }
            self.combiner.input(c as i64, t, e, &mut self.timeline)?;
        }
        Ok(())
    }

    /// The subtasks' side of round `k` ([`Self::with_subtasks`]): each subtask whose
    /// splits were called, in index order, runs its multiplexer's `onPeriodicEmit`
    /// into its output (then `MAX` if its last split ended), and the output reaches the
    /// valve; the round is closed and its row names the channel holding the minimum.
    fn flush_subtasks(&mut self, k: i64) -> Result<()> {
        let Some(sub) = &mut self.subtasks else {
            return Ok(());
        };
        if sub.touched.is_empty() {
            return Ok(());
        }
        let t = k * self.interval;
        sub.touched.sort_unstable();
        sub.touched.dedup();
        for idx in 0..sub.touched.len() {
            let s = sub.touched[idx];
            let scratch = &mut self.scratch;
            scratch.clear();
            let out = &mut sub.output[s];
            sub.mux[s].periodic_emit_into(&mut |e| out.push(e, &mut |x| scratch.push(x)));
            if sub.mux[s].output_ids().next().is_none() {
                out.push(Emission::Watermark(i64::MAX), &mut |x| scratch.push(x));
            }
            for &e in scratch.iter() {
                self.combiner.input(s as i64, t, e, &mut self.timeline)?;
            }
        }
        sub.touched.clear();
        let from = self.timeline.len();
        self.combiner.end_round(&mut self.timeline);
        for row in &mut self.timeline[from..] {
            row.min_channel = row.min_channel.and_then(|s| sub.min_channel(s));
        }
        Ok(())
    }

    /// Feeds the output streams of channels computed elsewhere: rows in non-decreasing
    /// time; the rows of one time reach the valve in channel order (stable), as
    /// [`super::combine`] merges them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `channel` or `time` for a channel out of range or
    /// rows out of time order; [`Error::IllegalState`] for a builder of periodic
    /// generators. On error nothing changes.
    pub fn push_emissions(&mut self, rows: &[ChannelEmission]) -> Result<()> {
        let n = self.num_channels();
        let Source::Emissions { .. } = &self.source else {
            return Err(Error::IllegalState(
                "this builder runs periodic generators: use push".into(),
            ));
        };
        let mut prev = self.last;
        for (i, r) in rows.iter().enumerate() {
            check_channel(i, r.channel, n)?;
            if prev.is_some_and(|p| r.time < p) {
                return Err(Error::input(
                    "time",
                    format!("row {i}: the rows must come in time order"),
                ));
            }
            prev = Some(r.time);
        }
        for r in rows {
            if self.last.is_some_and(|t| r.time > t) {
                self.flush_pending()?;
            }
            if let Source::Emissions { pending } = &mut self.source {
                pending.push(*r);
            }
            self.last = Some(r.time);
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        let Source::Emissions { pending } = &mut self.source else {
            return Ok(());
        };
        pending.sort_by_key(|e| e.channel); // stable: a channel's rows keep their order
        for e in pending.drain(..) {
            if self.keep_emissions {
                self.emissions.push(e);
            }
            self.combiner
                .input(e.channel as i64, e.time, e.emission, &mut self.timeline)?;
        }
        self.combiner.end_round(&mut self.timeline);
        Ok(())
    }

    /// The builder's state as snapshot bytes (not the outputs not yet taken).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(kinds::TIMELINE_BUILDER);
        w.i64(self.interval);
        match &self.source {
            Source::Periodic {
                template,
                channels,
                due,
            } => {
                w.u64(0);
                template.write(&mut w);
                w.u64(channels.len() as u64);
                for (ch, d) in channels.iter().zip(due) {
                    ch.generator.write(&mut w);
                    ch.output.write(&mut w);
                    write_opt(&mut w, *d);
                }
            }
            Source::Emissions { pending } => {
                w.u64(1).u64(pending.len() as u64);
                for e in pending {
                    w.u64(e.channel as u64).i64(e.time);
                    write_emission(&mut w, e.emission);
                }
            }
        }
        self.combiner.write(&mut w);
        write_opt(&mut w, self.ran_through);
        write_opt(&mut w, self.last);
        w.bool(self.keep_emissions);
        // Optional trailing section (absent in snapshots from before it existed).
        if self.subtasks.is_some() || self.ends.is_some() {
            w.bool(self.subtasks.is_some());
            if let Some(sub) = &self.subtasks {
                sub.write(&mut w);
            }
            w.bool(self.ends.is_some());
            if let Some(ends) = &self.ends {
                w.u64(ends.len() as u64);
                for &e in ends {
                    w.i64(e);
                }
            }
        }
        w.finish()
    }

    /// Restores a builder from [`Self::snapshot`] bytes.
    ///
    /// # Errors
    /// [`Error::Snapshot`] if the bytes are not a valid builder snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, kinds::TIMELINE_BUILDER)?;
        let interval = r.i64()?;
        if interval <= 0 {
            return Err(Error::Snapshot("emit interval must be > 0".into()));
        }
        let source = match r.u64()? {
            0 => {
                let template = Generator::read(&mut r)?;
                let n = r.len(10)?;
                let mut channels = Vec::with_capacity(n);
                let mut due = Vec::with_capacity(n);
                for _ in 0..n {
                    let generator = Generator::read(&mut r)?;
                    let output = super::output::ChannelOutput::read(&mut r)?;
                    channels.push(Channel {
                        generator,
                        output,
                        last_grid: None,
                    });
                    due.push(read_opt(&mut r)?);
                }
                Source::Periodic {
                    template,
                    channels,
                    due,
                }
            }
            1 => {
                let n = r.len(17)?;
                let mut pending = Vec::with_capacity(n);
                for _ in 0..n {
                    let channel = r.u64()? as usize;
                    let time = r.i64()?;
                    pending.push(ChannelEmission {
                        channel,
                        time,
                        emission: read_emission(&mut r)?,
                    });
                }
                Source::Emissions { pending }
            }
            k => return Err(Error::Snapshot(format!("unknown builder source {k}"))),
        };
        let combiner = Combiner::read(&mut r)?;
        let mut b = Self::with_source(interval, source, combiner);
        b.ran_through = read_opt(&mut r)?;
        b.last = read_opt(&mut r)?;
        b.keep_emissions = r.bool()?;
        if !r.at_end() {
            if r.bool()? {
                b.subtasks = Some(Subtasks::read(&mut r)?);
            }
            if r.bool()? {
                let n = r.len(8)?;
                b.ends = Some((0..n).map(|_| r.i64()).collect::<Result<_>>()?);
            }
        }
        r.finish()?;
        let n = match &b.subtasks {
            Some(sub) => sub.owner.len(),
            None => b.combiner.valve().num_channels(),
        };
        let consistent = match &b.source {
            Source::Periodic { channels, due, .. } => {
                channels.len() == n
                    && b.ends.as_ref().map_or(true, |e| e.len() == n)
                    && b.subtasks.as_ref().map_or(true, |sub| {
                        // A split released from its multiplexer (its input ended) is
                        // never called again: it has no call due.
                        sub.mux.len() == b.combiner.valve().num_channels()
                            && (0..n).all(|c| sub.slot[c].is_some() || due[c].is_none())
                    })
            }
            Source::Emissions { pending } => {
                b.subtasks.is_none() && b.ends.is_none() && pending.iter().all(|e| e.channel < n)
            }
        };
        if !consistent {
            return Err(Error::Snapshot(
                "the channels disagree with the valve".into(),
            ));
        }
        b.rebuild_queue();
        Ok(b)
    }
}

/// Row `row`'s channel must be one of the `n` channels.
fn check_channel(row: usize, channel: usize, n: usize) -> Result<()> {
    if channel < n {
        return Ok(());
    }
    Err(Error::input(
        "channel",
        format!("row {row}: channel {channel} is not in 0..{n}"),
    ))
}

fn check_interval(interval: i64) -> Result<()> {
    if interval <= 0 {
        return Err(Error::param(
            "emit_interval",
            format!("must be > 0 ticks, got {interval}"),
        ));
    }
    Ok(())
}

/// The first and the last bucket the grid can place (`interval > 0`): those whose grid
/// times from one before to one after are `i64`s (arrivals within two intervals of the
/// range's top, less than one of its bottom, cannot be placed).
pub fn placeable_buckets(interval: i64) -> (i64, i64) {
    // (k - 1) * interval >= MIN and (k + 1) * interval <= MAX; `/` truncates toward
    // zero, which is the ceiling of MIN / interval
    (i64::MIN / interval + 1, i64::MAX / interval - 1)
}

/// The grid time of `bucket`, checked: within [`placeable_buckets`].
fn grid_time(bucket: i64, interval: i64) -> Result<i64> {
    let (first, last) = placeable_buckets(interval);
    if (first..=last).contains(&bucket) {
        return Ok(bucket * interval);
    }
    Err(Error::input(
        "arrival",
        "arrival times within two emission intervals of the 64-bit range's ends cannot \
         be placed on the emission grid (a grid time next to theirs leaves the range)",
    ))
}

/// [`grid_time`] of a bucket the caller named (`start_at`, `advance_to`): its error
/// names the parameter, not the arrival column.
fn bucket_grid_time(bucket: i64, interval: i64) -> Result<i64> {
    grid_time(bucket, interval).map_err(|_| {
        Error::param(
            "bucket",
            format!(
                "grid time {bucket} x {interval} (the emit interval) is within two emission \
                 intervals of the 64-bit range's ends"
            ),
        )
    })
}

fn write_opt(w: &mut Writer, v: Option<i64>) {
    w.bool(v.is_some()).i64(v.unwrap_or(0));
}

fn read_opt(r: &mut Reader<'_>) -> Result<Option<i64>> {
    let some = r.bool()?;
    let v = r.i64()?;
    Ok(some.then_some(v))
}

fn write_emission(w: &mut Writer, e: Emission) {
    match e {
        Emission::Watermark(x) => w.u64(0).i64(x),
        Emission::Idle => w.u64(1).i64(0),
        Emission::Active => w.u64(2).i64(0),
    };
}

fn read_emission(r: &mut Reader<'_>) -> Result<Emission> {
    let tag = r.u64()?;
    let v = r.i64()?;
    Ok(match tag {
        0 => Emission::Watermark(v),
        1 => Emission::Idle,
        2 => Emission::Active,
        t => return Err(Error::Snapshot(format!("unknown emission tag {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watermark::{combine, BaseGenerator, ChannelRow};

    #[test]
    fn placeable_buckets_are_those_whose_neighbouring_grid_times_fit() {
        let fits = |k: Option<i64>, i: i64| k.and_then(|k| k.checked_mul(i)).is_some();
        for interval in [
            1,
            2,
            3,
            7,
            200,
            1_000_003,
            i64::MAX / 3,
            i64::MAX - 1,
            i64::MAX,
        ] {
            let (first, last) = placeable_buckets(interval);
            for k in [first - 1, first, first + 1, 0, last - 1, last, last + 1] {
                let want = fits(k.checked_sub(1), interval) && fits(k.checked_add(1), interval);
                assert_eq!(
                    grid_time(k, interval).is_ok(),
                    want,
                    "interval {interval}, k {k}"
                );
            }
        }
        assert_eq!(placeable_buckets(1), (i64::MIN + 1, i64::MAX - 1));
    }

    fn rows(v: &[(usize, i64, i64)]) -> Vec<BucketRow> {
        v.iter()
            .map(|&(channel, bucket, max_ts)| BucketRow {
                channel,
                bucket,
                max_ts,
            })
            .collect()
    }

    #[test]
    fn chunks_and_snapshots_change_nothing() {
        let data = rows(&[(0, 1, 10), (1, 1, 5), (1, 4, 50), (0, 4, 60), (0, 9, 90)]);
        let gen = Generator::new(BaseGenerator::bounded(2).unwrap())
            .with_idleness(250)
            .unwrap();
        let mut whole = TimelineBuilder::new(gen.clone(), 2, 100).unwrap();
        let mut in_whole = Vec::new();
        whole.push(&data, &mut in_whole).unwrap();
        whole.finish().unwrap();
        let want = whole.take_timeline();
        for cut in 0..=data.len() {
            let mut a = TimelineBuilder::new(gen.clone(), 2, 100).unwrap();
            let mut in_parts = Vec::new();
            a.push(&data[..cut], &mut in_parts).unwrap();
            let mut tl = a.take_timeline();
            let mut b = TimelineBuilder::restore(&a.snapshot()).unwrap();
            assert_eq!(b, a);
            b.push(&data[cut..], &mut in_parts).unwrap();
            b.finish().unwrap();
            tl.extend(b.take_timeline());
            assert_eq!(tl, want);
            assert_eq!(in_parts, in_whole);
        }
    }

    #[test]
    fn the_every_grid_bound_applies_between_buckets_with_records_however_they_are_cut() {
        // Two channels: a stretch of 2^27 grid times between two arrivals is 2^28 calls
        // (at the bound), one more grid time is over it. The whole span (three such
        // stretches) is over the bound too, but it is no reason to refuse: pushed whole
        // or in parts, the input is judged by its longest stretch.
        let gen = Generator::new(BaseGenerator::processing_time_lag(5).unwrap());
        let b = TimelineBuilder::new(gen, 2, 10).unwrap();
        let k = 1_i64 << 27;
        let spread = rows(&[(0, 0, 1), (1, k, 1), (0, 2 * k, 1), (1, 3 * k, 1)]);
        assert!(b.check_rows(&spread).is_ok());
        let gap = rows(&[(0, 0, 1), (1, 1, 1), (0, k + 2, 1)]);
        let Err(Error::InvalidParameter { name, .. }) = b.check_rows(&gap) else {
            panic!("a stretch over the bound is refused");
        };
        assert_eq!(name, "emit_interval");
        // The stretch from the last bucket run counts too (a later push).
        let mut later = b.clone();
        later.ran_through = Some(9);
        assert!(later.check_rows(&rows(&[(0, k + 10, 1)])).is_ok());
        assert!(later.check_rows(&rows(&[(0, k + 11, 1)])).is_err());
    }

    #[test]
    fn a_snapshot_with_a_released_split_still_due_is_refused() {
        // Channel 1's split released from its multiplexer (as when its input ends)
        // while a call is still due: advancing would call it forever.
        let gen = Generator::new(BaseGenerator::bounded(10).unwrap());
        let mut b = TimelineBuilder::new(gen, 3, 10)
            .unwrap()
            .with_subtasks(vec![0, 0, 1], 2)
            .unwrap()
            .with_channel_ends(vec![5, 6, 100])
            .unwrap();
        let mut v = Vec::new();
        b.push(&rows(&[(0, 0, 5), (1, 0, 6), (2, 3, 30)]), &mut v)
            .unwrap();
        assert!(TimelineBuilder::restore(&b.snapshot()).is_ok());
        b.subtasks.as_mut().unwrap().slot[1] = None;
        assert!(matches!(
            TimelineBuilder::restore(&b.snapshot()),
            Err(Error::Snapshot(_))
        ));
        // And the run itself never loops on such a split: its call is dropped.
        b.advance_to(200).unwrap();
    }

    #[test]
    fn rows_behind_the_grid_or_out_of_order_are_refused() {
        let gen = Generator::new(BaseGenerator::bounded(0).unwrap());
        let mut b = TimelineBuilder::new(gen, 2, 10).unwrap();
        let mut v = Vec::new();
        b.push(&rows(&[(0, 5, 1)]), &mut v).unwrap();
        b.advance_to(7).unwrap();
        let before = b.snapshot();
        for bad in [
            rows(&[(0, 7, 1)]),
            rows(&[(0, 9, 1), (0, 8, 1)]),
            rows(&[(2, 9, 1)]),
            rows(&[(0, i64::MAX / 10, 1)]),
        ] {
            assert!(b.push(&bad, &mut v).is_err());
            assert_eq!(b.snapshot(), before, "state unchanged on error");
        }
        assert!(TimelineBuilder::new(Generator::new(BaseGenerator::Punctuated), 1, 10).is_err());
        assert!(TimelineBuilder::new(Generator::new(BaseGenerator::NoWatermarks), 1, 0).is_err());
    }

    #[test]
    fn lag_work_is_bounded_up_front() {
        let gen = Generator::new(BaseGenerator::processing_time_lag(0).unwrap());
        let mut b = TimelineBuilder::new(gen, 64, 1).unwrap();
        let mut v = Vec::new();
        let err = b
            .push(&rows(&[(0, 0, 1), (1, 1 << 30, 1)]), &mut v)
            .unwrap_err();
        assert!(matches!(
            err,
            Error::InvalidParameter {
                name: "emit_interval",
                ..
            }
        ));
    }

    #[test]
    fn a_huge_quiet_span_costs_nothing() {
        // A bounded generator with idleness over the whole i64 range with a 1-tick
        // grid: the calls that change nothing are skipped.
        let gen = Generator::new(BaseGenerator::bounded(0).unwrap())
            .with_idleness(1000)
            .unwrap();
        let mut b = TimelineBuilder::new(gen, 3, 1).unwrap();
        let mut v = Vec::new();
        let lo = i64::MIN + 2;
        let hi = i64::MAX - 2;
        b.push(&rows(&[(0, lo, 1), (1, 0, 5), (2, hi, 9)]), &mut v)
            .unwrap();
        b.finish().unwrap();
        assert!(!b.take_timeline().is_empty());
    }

    #[test]
    fn emissions_merge_like_combine_in_any_chunks() {
        use Emission::{Idle, Watermark as W};
        let em = [
            ChannelEmission {
                channel: 1,
                time: 10,
                emission: W(20),
            },
            ChannelEmission {
                channel: 0,
                time: 10,
                emission: W(5),
            },
            ChannelEmission {
                channel: 0,
                time: 20,
                emission: W(30),
            },
            ChannelEmission {
                channel: 1,
                time: 30,
                emission: Idle,
            },
        ];
        let want = combine(
            &em.iter()
                .map(|e| ChannelRow {
                    channel: e.channel as i64,
                    time: e.time,
                    emission: e.emission,
                })
                .collect::<Vec<_>>(),
            2,
        )
        .unwrap();
        for cut in 0..=em.len() {
            let mut a = TimelineBuilder::for_emissions(2).unwrap();
            a.push_emissions(&em[..cut]).unwrap();
            let mut tl = a.take_timeline();
            let mut b = TimelineBuilder::restore(&a.snapshot()).unwrap();
            b.push_emissions(&em[cut..]).unwrap();
            b.finish().unwrap();
            tl.extend(b.take_timeline());
            assert_eq!(tl, want, "cut {cut}");
        }
    }

    #[test]
    fn an_inserted_channel_joins_at_the_next_grid_time() {
        let gen = Generator::new(BaseGenerator::bounded(0).unwrap());
        let mut b = TimelineBuilder::new(gen, 1, 10).unwrap();
        let mut v = Vec::new();
        b.push(&rows(&[(0, 1, 100)]), &mut v).unwrap();
        b.advance_to(1).unwrap();
        assert_eq!(b.watermark(), 99);
        b.insert_channel(0).unwrap();
        // The old channel is now 1; the newcomer holds the watermark until it catches up.
        b.push(&rows(&[(1, 2, 200), (0, 2, 150)]), &mut v).unwrap();
        b.finish().unwrap();
        assert_eq!(b.watermark(), 149);
        let restored = TimelineBuilder::restore(&b.snapshot()).unwrap();
        assert_eq!(restored, b);
    }

    #[test]
    fn a_channel_inserted_into_a_merge_joins_at_the_last_time_fed() {
        let mut b = TimelineBuilder::for_emissions(1).unwrap();
        let idle = ChannelEmission {
            channel: 0,
            time: 70,
            emission: Emission::Idle,
        };
        b.push_emissions(&[idle]).unwrap();
        b.finish().unwrap();
        assert!(b.take_timeline().last().is_some_and(|r| r.idle));
        b.insert_channel(1).unwrap();
        let joined = b.take_timeline();
        assert_eq!(joined.len(), 1);
        assert_eq!((joined[0].time, joined[0].idle), (70, false));
    }

    #[test]
    fn channels_inserted_together_equal_channels_inserted_one_by_one() {
        let gen = Generator::new(BaseGenerator::bounded(5).unwrap())
            .with_idleness(40)
            .unwrap();
        let mut one = TimelineBuilder::new(gen, 2, 10).unwrap();
        one.keep_emissions(true);
        let mut v = Vec::new();
        one.push(&rows(&[(0, 1, 100), (1, 2, 120), (0, 4, 130)]), &mut v)
            .unwrap();
        one.advance_to(3).unwrap();
        let mut many = one.clone();
        for at in [0, 2, 3] {
            one.insert_channel(at).unwrap();
        }
        many.insert_channels(&[0, 2, 3]).unwrap();
        assert_eq!(many, one);
        assert_eq!(many.take_emissions(), one.take_emissions());
        let later = rows(&[
            (2, 5, 140),
            (0, 6, 90),
            (3, 6, 150),
            (4, 9, 160),
            (1, 12, 170),
        ]);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        one.push(&later, &mut a).unwrap();
        many.push(&later, &mut b).unwrap();
        one.finish().unwrap();
        many.finish().unwrap();
        assert_eq!(b, a);
        assert_eq!(many.take_timeline(), one.take_timeline());
        assert_eq!(many.take_emissions(), one.take_emissions());
        assert_eq!(many, one);
        // Refused, nothing changed.
        assert!(many.insert_channels(&[3, 3]).is_err());
        assert_eq!(many, one);
    }
}
