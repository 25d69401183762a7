//! [`Multiplexer`]: Flink's `WatermarkOutputMultiplexer` (section 3 of
//! `SEMANTICS.md`): per-split outputs combined into one underlying output.
//!
//! Beyond `SEMANTICS.md`: when every output is idle, Flink 2.3.0 first flushes the
//! combined watermark to the maximum over all outputs (if larger), then marks idle
//! (vector `multiplexer/rand_003.json`, step 7).
//!
//! Every call returns a [`MultiplexerStep`]: what the underlying output received
//! (only watermarks and `Idle`, never `Active`) and what each output's recording
//! `WatermarkUpdateListener` saw.

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

use super::{kinds, Emission};

/// A call on an output's `WatermarkUpdateListener`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerEvent {
    /// `onWatermarkUpdate(ts)`.
    Watermark {
        /// The output id.
        output: String,
        /// The new watermark.
        ts: i64,
    },
    /// `onIdleUpdate(idle)`.
    Idle {
        /// The output id.
        output: String,
        /// The new idle flag.
        idle: bool,
    },
}

/// What one multiplexer call produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiplexerStep {
    /// Calls on the underlying output, in order.
    pub emitted: Vec<Emission>,
    /// Listener calls, in order.
    pub listener: Vec<ListenerEvent>,
}

/// How a per-output call reaches the multiplexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `getImmediateOutput(id)`: updates the combined watermark at once.
    Immediate,
    /// `getDeferredOutput(id)`: only records state until `onPeriodicEmit()`.
    Deferred,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Partial {
    id: String,
    wm: i64,
    idle: bool,
}

/// Flink's `WatermarkOutputMultiplexer` over string output ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multiplexer {
    outputs: Vec<Partial>,
    combined: i64,
    combined_idle: bool,
}

impl Default for Multiplexer {
    fn default() -> Self {
        Self::new()
    }
}

impl Multiplexer {
    /// An empty multiplexer: no outputs, combined watermark `MIN`.
    pub fn new() -> Self {
        Self {
            outputs: Vec::new(),
            combined: i64::MIN,
            combined_idle: false,
        }
    }

    /// The combined watermark so far.
    pub fn combined_watermark(&self) -> i64 {
        self.combined
    }

    /// The registered output ids, in registration order.
    pub fn output_ids(&self) -> impl Iterator<Item = &str> {
        self.outputs.iter().map(|p| p.id.as_str())
    }

    /// `registerNewOutput(id, listener)`.
    ///
    /// # Errors
    /// [`Error::IllegalState`] if `id` is already registered.
    pub fn register(&mut self, id: &str) -> Result<()> {
        if self.find(id).is_some() {
            return Err(Error::IllegalState(format!(
                "Already contains an output for ID {id}"
            )));
        }
        self.outputs.push(Partial {
            id: id.to_owned(),
            wm: i64::MIN,
            idle: false,
        });
        Ok(())
    }

    /// `unregisterOutput(id)`: true if it was registered. Does not recompute.
    pub fn unregister(&mut self, id: &str) -> bool {
        match self.find(id) {
            Some(i) => {
                self.outputs.remove(i);
                true
            }
            None => false,
        }
    }

    fn find(&self, id: &str) -> Option<usize> {
        self.outputs.iter().position(|p| p.id == id)
    }

    fn get(&self, id: &str) -> Result<usize> {
        self.find(id)
            .ok_or_else(|| Error::param("output_id", format!("no output registered under id {id}")))
    }

    fn set_idle(&mut self, i: usize, idle: bool, step: Option<&mut MultiplexerStep>) {
        let p = &mut self.outputs[i];
        p.idle = idle;
        if let Some(step) = step {
            step.listener.push(ListenerEvent::Idle {
                output: p.id.clone(),
                idle,
            });
        }
    }

    /// `PartialWatermark.setWatermark`: clears idle, then raises the watermark.
    fn set_watermark(&mut self, i: usize, wm: i64, mut step: Option<&mut MultiplexerStep>) -> bool {
        self.set_idle(i, false, step.as_deref_mut());
        let p = &mut self.outputs[i];
        let updated = wm > p.wm;
        if updated {
            if let Some(step) = step {
                step.listener.push(ListenerEvent::Watermark {
                    output: p.id.clone(),
                    ts: wm,
                });
            }
            p.wm = wm;
        }
        updated
    }

    /// `updateCombinedWatermark()`. With at least one active output the candidate is
    /// the minimum over the active outputs; when every output is idle it is the maximum
    /// over all outputs (Flink 2.3 flushes to the max, see `multiplexer/rand_003`). A
    /// candidate above the combined watermark is emitted; then, if all outputs are
    /// idle, `markIdle` is emitted (on every update, repeatedly).
    fn update_combined(&mut self, emit: &mut impl FnMut(Emission)) {
        if !self.outputs.is_empty() {
            let mut min = i64::MAX;
            let mut max = i64::MIN;
            let mut all_idle = true;
            for p in &self.outputs {
                max = max.max(p.wm);
                if !p.idle {
                    min = min.min(p.wm);
                    all_idle = false;
                }
            }
            self.combined_idle = all_idle;
            let candidate = if all_idle { max } else { min };
            if candidate > self.combined {
                self.combined = candidate;
                emit(Emission::Watermark(candidate));
            }
        }
        if self.combined_idle {
            emit(Emission::Idle);
        }
    }

    /// `emitWatermark(w)` on the output `id`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if no output is registered under `id`.
    pub fn emit_watermark(&mut self, id: &str, wm: i64, via: Via) -> Result<MultiplexerStep> {
        let i = self.get(id)?;
        let mut step = MultiplexerStep::default();
        let updated = self.set_watermark(i, wm, Some(&mut step));
        if via == Via::Immediate && updated && wm > self.combined {
            self.update_combined(&mut |e| step.emitted.push(e));
        }
        Ok(step)
    }

    /// `markIdle()` (`idle = true`) or `markActive()` (`idle = false`) on output `id`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if no output is registered under `id`.
    pub fn mark(&mut self, id: &str, idle: bool, via: Via) -> Result<MultiplexerStep> {
        let i = self.get(id)?;
        let mut step = MultiplexerStep::default();
        self.set_idle(i, idle, Some(&mut step));
        if via == Via::Immediate {
            self.update_combined(&mut |e| step.emitted.push(e));
        }
        Ok(step)
    }

    /// `onPeriodicEmit()`: recomputes the combined watermark.
    pub fn on_periodic_emit(&mut self) -> MultiplexerStep {
        let mut step = MultiplexerStep::default();
        self.update_combined(&mut |e| step.emitted.push(e));
        step
    }

    /// The outputs, in registration order: `(id, watermark, idle)`.
    pub fn outputs(&self) -> impl Iterator<Item = (&str, i64, bool)> {
        self.outputs.iter().map(|p| (p.id.as_str(), p.wm, p.idle))
    }

    /// What a split's generator emits on its deferred output, by the output's position
    /// (no listener records): the timeline builder's per-split outputs.
    pub(crate) fn deferred_at(&mut self, i: usize, e: Emission) {
        match e {
            Emission::Watermark(w) => {
                self.set_watermark(i, w, None);
            }
            Emission::Idle => self.set_idle(i, true, None),
            Emission::Active => self.set_idle(i, false, None),
        }
    }

    /// `unregisterOutput` by position (does not recompute).
    pub(crate) fn unregister_at(&mut self, i: usize) {
        self.outputs.remove(i);
    }

    /// `onPeriodicEmit()`, its calls on the underlying output into `emit`.
    pub(crate) fn periodic_emit_into(&mut self, emit: &mut impl FnMut(Emission)) {
        self.update_combined(emit);
    }

    /// The multiplexer's state after a snapshot header (see [`Self::snapshot`]).
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u64(self.outputs.len() as u64);
        for p in &self.outputs {
            w.bytes(p.id.as_bytes()).i64(p.wm).bool(p.idle);
        }
        w.i64(self.combined).bool(self.combined_idle);
    }

    /// Reads what [`Self::write`] wrote.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.len(17)?;
        let mut m = Self::new();
        for _ in 0..n {
            let id = std::str::from_utf8(r.bytes()?)
                .map_err(|_| Error::Snapshot("output id is not UTF-8".into()))?
                .to_owned();
            if m.find(&id).is_some() {
                return Err(Error::Snapshot(format!("duplicate output id {id}")));
            }
            let wm = r.i64()?;
            let idle = r.bool()?;
            m.outputs.push(Partial { id, wm, idle });
        }
        m.combined = r.i64()?;
        m.combined_idle = r.bool()?;
        Ok(m)
    }

    /// The multiplexer's state as snapshot bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new(kinds::MULTIPLEXER);
        self.write(&mut w);
        w.finish()
    }

    /// Restores a multiplexer from [`Self::snapshot`] bytes.
    ///
    /// # Errors
    /// [`Error::Snapshot`] if the bytes are not a valid multiplexer snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, kinds::MULTIPLEXER)?;
        let m = Self::read(&mut r)?;
        r.finish()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_clears_idle() {
        let mut m = Multiplexer::new();
        m.register("a").unwrap();
        m.register("b").unwrap();
        m.emit_watermark("a", 10, Via::Immediate).unwrap();
        let s = m.emit_watermark("b", 20, Via::Immediate).unwrap();
        assert_eq!(s.emitted, vec![Emission::Watermark(10)]);
        let s = m.mark("a", true, Via::Immediate).unwrap();
        assert_eq!(s.emitted, vec![Emission::Watermark(20)]);
        let s = m.emit_watermark("a", 5, Via::Deferred).unwrap();
        assert_eq!(
            s.listener,
            vec![ListenerEvent::Idle {
                output: "a".into(),
                idle: false
            }]
        );
        assert!(m
            .emit_watermark("b", 30, Via::Immediate)
            .unwrap()
            .emitted
            .is_empty());
        let s = m.emit_watermark("a", 25, Via::Immediate).unwrap();
        assert_eq!(s.emitted, vec![Emission::Watermark(25)]);
    }

    #[test]
    fn unregister_all_while_idle_keeps_marking_idle() {
        let mut m = Multiplexer::new();
        m.register("a").unwrap();
        assert_eq!(
            m.mark("a", true, Via::Immediate).unwrap().emitted,
            vec![Emission::Idle]
        );
        assert!(m.unregister("a"));
        assert!(!m.unregister("a"));
        assert_eq!(m.on_periodic_emit().emitted, vec![Emission::Idle]);
        m.register("b").unwrap();
        assert!(m.on_periodic_emit().emitted.is_empty());
    }

    #[test]
    fn errors_and_snapshot() {
        let mut m = Multiplexer::new();
        assert!(matches!(
            m.emit_watermark("x", 1, Via::Immediate),
            Err(Error::InvalidParameter {
                name: "output_id",
                ..
            })
        ));
        m.register("x").unwrap();
        assert!(matches!(m.register("x"), Err(Error::IllegalState(_))));
        m.emit_watermark("x", 3, Via::Deferred).unwrap();
        let r = Multiplexer::restore(&m.snapshot()).unwrap();
        assert_eq!(r, m);
        assert!(Multiplexer::restore(&Writer::new(kinds::VALVE).finish()).is_err());
    }
}
