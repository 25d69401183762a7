//! The compact, versioned byte form of every stateful object's `snapshot()`.
//!
//! Layout: 4 magic bytes `FMK2`, one byte naming the kind of object, the object's
//! fields as little-endian integers written by [`Writer`] and read back by [`Reader`],
//! then the CRC-32 (IEEE, as zlib's) of everything before it, little-endian. A
//! snapshot of one kind refuses to restore into another; a changed byte or a
//! truncation fails the checksum. `FMK1` snapshots (before the checksum) are refused
//! with a message saying so.

use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"FMK2";
/// The format before checksums: recognized only to refuse it clearly.
const MAGIC_V1: &[u8; 4] = b"FMK1";
/// Magic bytes, kind byte.
const HEADER: usize = 5;
/// The CRC-32 at the end.
const TRAILER: usize = 4;

/// The CRC-32 lookup table (reflected polynomial `0xEDB88320`).
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE 802.3, as `zlib.crc32`): detects every error confined to 32
/// consecutive bits, so every corrupted byte.
pub fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |c, &b| {
        CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8)
    })
}

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

    /// The finished snapshot, its checksum appended.
    pub fn finish(mut self) -> Vec<u8> {
        let crc = crc32(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
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
    /// Opens `buf`, checking the magic bytes, the checksum and that it holds an object
    /// of kind `kind`.
    pub fn new(buf: &'a [u8], kind: u8) -> Result<Self> {
        if buf.len() >= 4 && &buf[..4] == MAGIC_V1 {
            return Err(Error::Snapshot(
                "the snapshot is in format FMK1, from a floodmark without snapshot \
                 checksums; it cannot be checked, so it is not restored: take a new one"
                    .into(),
            ));
        }
        if buf.len() < 4 || &buf[..4] != MAGIC {
            return Err(Error::Snapshot(
                "not a floodmark snapshot (bad magic bytes)".into(),
            ));
        }
        if buf.len() < HEADER + TRAILER {
            return Err(Error::Snapshot("snapshot is truncated".into()));
        }
        let (body, trailer) = buf.split_at(buf.len() - TRAILER);
        let stored = u32::from_le_bytes(trailer.try_into().expect("4 bytes"));
        if crc32(body) != stored {
            return Err(Error::Snapshot(
                "the snapshot is corrupt or truncated (checksum mismatch)".into(),
            ));
        }
        if body[4] != kind {
            return Err(Error::Snapshot(format!(
                "snapshot holds object kind {}, expected kind {kind}",
                body[4]
            )));
        }
        Ok(Self {
            buf: body,
            pos: HEADER,
        })
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

    /// True when every byte was read (an optional trailing section is absent).
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
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
    fn refuses_wrong_kind_truncation_corruption_and_the_old_format() {
        let buf = Writer::new(1).finish();
        assert!(Reader::new(&buf, 2).is_err());
        assert!(Reader::new(b"xx", 1).is_err());
        let mut w = Writer::new(1);
        w.i64(1);
        let buf = w.finish();
        for len in 0..buf.len() {
            assert!(Reader::new(&buf[..len], 1).is_err(), "truncated to {len}");
        }
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(Reader::new(&bad, 1).is_err(), "byte {i}");
        }
        // reading past the fields is still caught
        let mut r = Reader::new(&buf, 1).unwrap();
        r.i64().unwrap();
        assert!(r.i64().is_err());
        let mut old = buf.clone();
        old[..4].copy_from_slice(b"FMK1");
        let Err(Error::Snapshot(m)) = Reader::new(&old, 1) else {
            panic!("FMK1 accepted")
        };
        assert!(m.contains("FMK1"), "{m}");
    }

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"floodmark"), 0xE1EA_2417);
    }
}
