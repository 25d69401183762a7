//! The compact, versioned byte form of every stateful object's `snapshot()`.
//!
//! Layout: 4 magic bytes `FMK1`, one byte naming the kind of object, then the object's
//! fields as little-endian integers written by [`Writer`] and read back by [`Reader`].
//! A snapshot of one kind refuses to restore into another.

use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"FMK1";

/// Builds a snapshot.
#[derive(Debug)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Starts a snapshot of the object kind `kind`.
    pub fn new(kind: u8) -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(MAGIC);
        buf.push(kind);
        Self { buf }
    }

    /// Appends an `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends an `f64`.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a `bool`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
        self
    }

    /// The finished snapshot.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a snapshot written by [`Writer`].
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Opens `buf`, checking the magic bytes and that it holds an object of kind `kind`.
    pub fn new(buf: &'a [u8], kind: u8) -> Result<Self> {
        if buf.len() < 5 || &buf[..4] != MAGIC {
            return Err(Error::Snapshot(
                "not a floodmark snapshot (bad magic bytes)".into(),
            ));
        }
        if buf[4] != kind {
            return Err(Error::Snapshot(format!(
                "snapshot holds object kind {}, expected kind {kind}",
                buf[4]
            )));
        }
        Ok(Self { buf, pos: 5 })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::Snapshot("snapshot is truncated".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Reads an `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// Reads a length or count, checked against the bytes that remain (so a corrupt
    /// snapshot cannot make the reader allocate without bound).
    pub fn len(&mut self, min_bytes_each: usize) -> Result<usize> {
        let n = self.u64()?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes_each.max(1) as u64) > remaining {
            return Err(Error::Snapshot("snapshot is truncated".into()));
        }
        Ok(n as usize)
    }

    /// Reads an `f64`.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// Reads a `bool`.
    pub fn bool(&mut self) -> Result<bool> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(Error::Snapshot(format!("bad boolean byte {b}"))),
        }
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.len(1)?;
        self.take(n)
    }

    /// Fails unless every byte was read.
    pub fn finish(self) -> Result<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(Error::Snapshot("trailing bytes after the snapshot".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = Writer::new(7);
        w.i64(-5).u64(9).bool(true).bytes(b"abc").f64(1.5);
        let buf = w.finish();
        let mut r = Reader::new(&buf, 7).unwrap();
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.u64().unwrap(), 9);
        assert!(r.bool().unwrap());
        assert_eq!(r.bytes().unwrap(), b"abc");
        assert!((r.f64().unwrap() - 1.5).abs() < f64::EPSILON);
        r.finish().unwrap();
    }

    #[test]
    fn refuses_wrong_kind_and_truncation() {
        let buf = Writer::new(1).finish();
        assert!(Reader::new(&buf, 2).is_err());
        assert!(Reader::new(b"xx", 1).is_err());
        let mut w = Writer::new(1);
        w.i64(1);
        let buf = w.finish();
        let mut r = Reader::new(&buf[..buf.len() - 1], 1).unwrap();
        assert!(r.i64().is_err());
    }
}
