//! [`ChannelOutput`]: the model of Flink's `WatermarkToDataOutput`, which turns what a
//! generator emits into what leaves the source channel.
//!
//! Rules: a watermark `<=` the largest one so far is dropped (and does not reactivate
//! the channel); a larger one first emits `Active` if the channel is idle, then the
//! watermark; `Idle` is emitted only on the active -> idle transition; an explicit
//! `Active` is emitted only on the idle -> active transition.

use crate::error::Result;
use crate::snapshot::{Reader, Writer};

use super::Emission;

/// The per-channel output filter (Flink's `WatermarkToDataOutput`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelOutput {
    max_so_far: i64,
    idle: bool,
}

impl Default for ChannelOutput {
    fn default() -> Self {
        Self::new()
    }
}

impl ChannelOutput {
    /// A fresh output: no watermark yet (`MIN`), active.
    pub const fn new() -> Self {
        Self {
            max_so_far: i64::MIN,
            idle: false,
        }
    }

    /// The largest watermark forwarded so far (`MIN` if none).
    #[inline]
    pub fn watermark(&self) -> i64 {
        self.max_so_far
    }

    /// True if the channel is idle.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        w.i64(self.max_so_far).bool(self.idle);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Self {
            max_so_far: r.i64()?,
            idle: r.bool()?,
        })
    }

    /// Feeds one generator emission; calls `out` with what is forwarded, in order.
    #[inline]
    pub fn push(&mut self, e: Emission, out: &mut impl FnMut(Emission)) {
        match e {
            Emission::Watermark(w) => {
                if w > self.max_so_far {
                    self.max_so_far = w;
                    if self.idle {
                        self.idle = false;
                        out(Emission::Active);
                    }
                    out(Emission::Watermark(w));
                }
            }
            Emission::Idle => {
                if !self.idle {
                    self.idle = true;
                    out(Emission::Idle);
                }
            }
            Emission::Active => {
                if self.idle {
                    self.idle = false;
                    out(Emission::Active);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_non_increasing_and_reactivates_on_larger() {
        let mut o = ChannelOutput::new();
        let mut v = Vec::new();
        for e in [
            Emission::Watermark(i64::MIN),
            Emission::Watermark(5),
            Emission::Watermark(5),
            Emission::Idle,
            Emission::Idle,
            Emission::Watermark(4),
            Emission::Watermark(6),
            Emission::Active,
        ] {
            o.push(e, &mut |x| v.push(x));
        }
        assert_eq!(
            v,
            vec![
                Emission::Watermark(5),
                Emission::Idle,
                Emission::Active,
                Emission::Watermark(6)
            ]
        );
        assert_eq!(o.watermark(), 6);
    }
}
