//! [`Channel`]: one source channel's generator together with its output filter, so
//! a stream can be driven in several batches (and snapshotted between them).

use crate::error::Result;
use crate::snapshot::{Reader, Writer};

use super::driver::{drive, DriveOutput, DriveParams};
use super::generator::{BaseGenerator, WatermarkGenerator};
use super::kinds;
use super::output::ChannelOutput;
use super::strategy::Generator;

/// A generator and its [`ChannelOutput`]: the whole state of one channel. `Channel`
/// alone runs the built-in generator; the Python bindings run a user's generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel<B = BaseGenerator> {
    /// The watermark generator.
    pub generator: Generator<B>,
    /// The output filter (largest watermark so far, idle flag).
    pub output: ChannelOutput,
    /// The last grid time a driver ran the channel to (a continued stream must start
    /// after it), None before any.
    pub last_grid: Option<i64>,
}

impl<B> Channel<B> {
    /// A channel with a fresh output.
    pub fn new(generator: Generator<B>) -> Self {
        Self {
            generator,
            output: ChannelOutput::new(),
            last_grid: None,
        }
    }

    /// The channel's state after a snapshot header, the base generator's by `base`.
    pub(crate) fn write_with(&self, w: &mut Writer, base: impl FnOnce(&B, &mut Writer)) {
        self.generator.write_with(w, base);
        self.output.write(w);
        w.bool(self.last_grid.is_some())
            .i64(self.last_grid.unwrap_or(0));
    }

    /// Reads what [`Self::write_with`] wrote, the base generator by `base`.
    pub(crate) fn read_with(
        r: &mut Reader<'_>,
        base: impl FnOnce(&mut Reader<'_>) -> Result<B>,
    ) -> Result<Self> {
        let generator = Generator::read_with(r, base)?;
        let output = ChannelOutput::read(r)?;
        let some = r.bool()?;
        let last_grid = r.i64()?;
        Ok(Self {
            generator,
            output,
            last_grid: some.then_some(last_grid),
        })
    }
}

impl<B: WatermarkGenerator> Channel<B> {
    /// Drives the next batch of records (see [`super::driver`]); the state carries
    /// over to the next call.
    ///
    /// # Errors
    /// As [`super::drive`]. On an error in the inputs the state is left unchanged; on
    /// the generator's own error, it is the state at the failing call.
    pub fn drive(
        &mut self,
        event_ts: &[i64],
        arrival: &[i64],
        marker: Option<&[Option<i64>]>,
        params: &DriveParams,
    ) -> std::result::Result<DriveOutput, B::Error> {
        drive(
            &mut self.generator,
            &mut self.output,
            event_ts,
            arrival,
            marker,
            params,
        )
    }
}

impl Channel {
    /// The channel's state as snapshot bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(kinds::CHANNEL);
        self.write_with(&mut w, BaseGenerator::write);
        w.finish()
    }

    /// Restores a channel from [`Self::snapshot`] bytes.
    ///
    /// # Errors
    /// [`crate::Error::Snapshot`] if the bytes are not a channel snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, kinds::CHANNEL)?;
        let channel = Self::read_with(&mut r, BaseGenerator::read)?;
        r.finish()?;
        Ok(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watermark::BaseGenerator;

    #[test]
    fn batches_with_a_snapshot_between_equal_one_run() {
        let g = Generator::new(BaseGenerator::bounded(3).unwrap())
            .with_idleness(500)
            .unwrap();
        let ts = [10, 7, 40, 45, 2000, 1990];
        let arrival = [10, 20, 150, 200, 1900, 2000];
        let whole = Channel::new(g.clone())
            .drive(
                &ts,
                &arrival,
                None,
                &DriveParams {
                    interval: 100,
                    start: 0,
                    until: 2500,
                },
            )
            .unwrap();
        let mut first = Channel::new(g);
        let a = first
            .drive(
                &ts[..4],
                &arrival[..4],
                None,
                &DriveParams {
                    interval: 100,
                    start: 0,
                    until: 200,
                },
            )
            .unwrap();
        let mut second = Channel::restore(&first.snapshot()).unwrap();
        let b = second
            .drive(
                &ts[4..],
                &arrival[4..],
                None,
                &DriveParams {
                    interval: 100,
                    start: 201,
                    until: 2500,
                },
            )
            .unwrap();
        let mut rec = a.record_watermark;
        rec.extend(b.record_watermark);
        let mut rows = a.emissions;
        rows.extend(b.emissions);
        assert_eq!(rec, whole.record_watermark);
        assert_eq!(rows, whole.emissions);
        assert!(Channel::restore(&Generator::new(BaseGenerator::NoWatermarks).snapshot()).is_err());
    }
}
