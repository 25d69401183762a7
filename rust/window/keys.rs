//! The key dictionary: maps the values of one or more key columns (int64 or string,
//! nullable; null is a key value, as in Spark's `groupBy`) to dense ids `0, 1, 2, …`
//! in first-seen order, and keeps the values so results can carry them.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::snapshot::{Reader, Writer};

/// Single int64 keys in `0..DENSE_LIMIT` are looked up by value in a table
/// (at most 256 KiB) instead of hashed.
const DENSE_LIMIT: i64 = 1 << 16;

/// The type of a key column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// int64 keys.
    Int64,
    /// UTF-8 string keys.
    Utf8,
}

/// A borrowed key column.
#[derive(Clone, Debug)]
pub enum KeyCol<'a> {
    /// int64 values with an optional validity mask (`true` = not null).
    Int64(&'a [i64], Option<&'a [bool]>),
    /// string values (`None` = null).
    Utf8(Vec<Option<&'a str>>),
}

impl KeyCol<'_> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Int64(v, _) => v.len(),
            Self::Utf8(v) => v.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn key_type(&self) -> KeyType {
        match self {
            Self::Int64(..) => KeyType::Int64,
            Self::Utf8(_) => KeyType::Utf8,
        }
    }
}

/// The stored values of one key column, indexed by key id.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyValues {
    /// int64 keys (`None` = null).
    Int64(Vec<Option<i64>>),
    /// string keys (`None` = null).
    Utf8(Vec<Option<String>>),
}

/// Dense ids for key tuples.
#[derive(Clone, Debug)]
pub struct KeyDict {
    names: Vec<String>,
    values: Option<Vec<KeyValues>>,
    len: u32,
    /// Ids of small non-negative int64 keys by value (`u32::MAX`: not seen yet).
    single_dense: Vec<u32>,
    /// Ids of the other int64 keys.
    single_int: FxHashMap<i64, u32>,
    single_null: Option<u32>,
    general: FxHashMap<Vec<u8>, u32>,
}

impl KeyDict {
    /// An empty dictionary for the key columns `names`; their types are fixed by the
    /// first batch.
    pub fn new(names: Vec<String>) -> Self {
        Self {
            names,
            values: None,
            len: 0,
            single_dense: Vec::new(),
            single_int: FxHashMap::default(),
            single_null: None,
            general: FxHashMap::default(),
        }
    }

    /// Number of distinct keys seen.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no key was seen yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key columns' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The stored key values per column (`None` before the first batch).
    pub fn values(&self) -> Option<&[KeyValues]> {
        self.values.as_deref()
    }

    fn check(&mut self, cols: &[KeyCol<'_>], rows: usize) -> Result<()> {
        if cols.len() != self.names.len() {
            return Err(Error::input(
                "key",
                format!(
                    "expected {} key column(s), got {}",
                    self.names.len(),
                    cols.len()
                ),
            ));
        }
        for (col, name) in cols.iter().zip(&self.names) {
            if col.len() != rows {
                return Err(Error::input(
                    name.clone(),
                    format!("has {} rows, the batch has {rows}", col.len()),
                ));
            }
        }
        match &self.values {
            // An empty batch fixes no type (e.g. an empty pandas frame's object column)
            _ if rows == 0 => {}
            None => {
                self.values = Some(
                    cols.iter()
                        .map(|c| match c.key_type() {
                            KeyType::Int64 => KeyValues::Int64(Vec::new()),
                            KeyType::Utf8 => KeyValues::Utf8(Vec::new()),
                        })
                        .collect(),
                );
            }
            Some(vals) => {
                for ((col, stored), name) in cols.iter().zip(vals).zip(&self.names) {
                    let same = matches!(
                        (col.key_type(), stored),
                        (KeyType::Int64, KeyValues::Int64(_)) | (KeyType::Utf8, KeyValues::Utf8(_))
                    );
                    if !same {
                        return Err(Error::input(
                            name.clone(),
                            "key column type changed between batches",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn push_row(&mut self, cols: &[KeyCol<'_>], row: usize) -> u32 {
        let id = self.len;
        self.len += 1;
        let vals = self.values.as_mut().expect("types fixed by check");
        for (col, stored) in cols.iter().zip(vals.iter_mut()) {
            match (col, stored) {
                (KeyCol::Int64(v, m), KeyValues::Int64(s)) => {
                    s.push(m.map_or(true, |m| m[row]).then(|| v[row]));
                }
                (KeyCol::Utf8(v), KeyValues::Utf8(s)) => s.push(v[row].map(str::to_owned)),
                _ => unreachable!("types checked"),
            }
        }
        id
    }

    /// Ids of every row of the key columns `cols`, appended to `out`.
    pub fn intern(&mut self, cols: &[KeyCol<'_>], rows: usize, out: &mut Vec<u32>) -> Result<()> {
        self.check(cols, rows)?;
        out.reserve(rows);
        if let [KeyCol::Int64(v, m)] = cols {
            for row in 0..rows {
                let valid = m.map_or(true, |m| m[row]);
                let id = if valid && (0..DENSE_LIMIT).contains(&v[row]) {
                    let at = v[row] as usize;
                    match self.single_dense.get(at) {
                        Some(&id) if id != u32::MAX => id,
                        _ => {
                            let id = self.push_row(cols, row);
                            if self.single_dense.len() <= at {
                                self.single_dense.resize(at + 1, u32::MAX);
                            }
                            self.single_dense[at] = id;
                            id
                        }
                    }
                } else if valid {
                    if let Some(&id) = self.single_int.get(&v[row]) {
                        id
                    } else {
                        let id = self.push_row(cols, row);
                        self.single_int.insert(v[row], id);
                        id
                    }
                } else if let Some(id) = self.single_null {
                    id
                } else {
                    let id = self.push_row(cols, row);
                    self.single_null = Some(id);
                    id
                };
                out.push(id);
            }
            return Ok(());
        }
        let mut buf = Vec::with_capacity(32);
        for row in 0..rows {
            buf.clear();
            encode_row(cols, row, &mut buf);
            let id = if let Some(&id) = self.general.get(buf.as_slice()) {
                id
            } else {
                let id = self.push_row(cols, row);
                self.general.insert(buf.clone(), id);
                id
            };
            out.push(id);
        }
        Ok(())
    }

    /// Writes the dictionary.
    pub fn write(&self, w: &mut Writer) {
        match &self.values {
            None => {
                w.bool(false);
            }
            Some(vals) => {
                w.bool(true).u64(u64::from(self.len));
                for col in vals {
                    match col {
                        KeyValues::Int64(v) => {
                            w.bool(false);
                            for x in v {
                                w.bool(x.is_some()).i64(x.unwrap_or(0));
                            }
                        }
                        KeyValues::Utf8(v) => {
                            w.bool(true);
                            for x in v {
                                w.bool(x.is_some())
                                    .bytes(x.as_deref().unwrap_or("").as_bytes());
                            }
                        }
                    }
                }
            }
        }
    }

    /// Reads a dictionary written by [`KeyDict::write`] for the key columns `names`.
    pub fn read(r: &mut Reader<'_>, names: Vec<String>) -> Result<Self> {
        let mut dict = Self::new(names);
        if !r.bool()? {
            return Ok(dict);
        }
        let n = r.len(1)?;
        let mut vals = Vec::with_capacity(dict.names.len());
        for _ in 0..dict.names.len() {
            if r.bool()? {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let some = r.bool()?;
                    let s = std::str::from_utf8(r.bytes()?)
                        .map_err(|_| Error::Snapshot("key is not valid UTF-8".into()))?;
                    v.push(some.then(|| s.to_owned()));
                }
                vals.push(KeyValues::Utf8(v));
            } else {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let some = r.bool()?;
                    let x = r.i64()?;
                    v.push(some.then_some(x));
                }
                vals.push(KeyValues::Int64(v));
            }
        }
        // Re-intern every stored key so the hash maps are rebuilt.
        dict.rebuild(&vals, n)?;
        Ok(dict)
    }

    fn rebuild(&mut self, vals: &[KeyValues], n: usize) -> Result<()> {
        let ints: Vec<(Vec<i64>, Vec<bool>)> = vals
            .iter()
            .map(|c| match c {
                KeyValues::Int64(v) => (
                    v.iter().map(|x| x.unwrap_or(0)).collect(),
                    v.iter().map(Option::is_some).collect(),
                ),
                KeyValues::Utf8(_) => (Vec::new(), Vec::new()),
            })
            .collect();
        let cols: Vec<KeyCol<'_>> = vals
            .iter()
            .zip(&ints)
            .map(|(c, (v, m))| match c {
                KeyValues::Int64(_) => KeyCol::Int64(v, Some(m)),
                KeyValues::Utf8(v) => KeyCol::Utf8(v.iter().map(Option::as_deref).collect()),
            })
            .collect();
        let mut ids = Vec::with_capacity(n);
        self.intern(&cols, n, &mut ids)?;
        if ids.iter().enumerate().any(|(i, &id)| id as usize != i) {
            return Err(Error::Snapshot(
                "duplicate keys in the key dictionary".into(),
            ));
        }
        Ok(())
    }
}

fn encode_row(cols: &[KeyCol<'_>], row: usize, buf: &mut Vec<u8>) {
    for col in cols {
        match col {
            KeyCol::Int64(v, m) => {
                if m.map_or(true, |m| m[row]) {
                    buf.push(1);
                    buf.extend_from_slice(&v[row].to_le_bytes());
                } else {
                    buf.push(0);
                }
            }
            KeyCol::Utf8(v) => match v[row] {
                Some(s) => {
                    buf.push(1);
                    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
                    buf.extend_from_slice(s.as_bytes());
                }
                None => buf.push(0),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_nulls_and_round_trip() {
        let mut d = KeyDict::new(vec!["k".into(), "s".into()]);
        let ints = [1, 2, 1, 1];
        let valid = [true, true, true, false];
        let cols = [
            KeyCol::Int64(&ints, Some(&valid)),
            KeyCol::Utf8(vec![Some("a"), Some("a"), Some("a"), None]),
        ];
        let mut ids = Vec::new();
        d.intern(&cols, 4, &mut ids).unwrap();
        assert_eq!(ids, vec![0, 1, 0, 2]);
        let mut w = Writer::new(1);
        d.write(&mut w);
        let buf = w.finish();
        let mut r = Reader::new(&buf, 1).unwrap();
        let mut e = KeyDict::read(&mut r, vec!["k".into(), "s".into()]).unwrap();
        r.finish().unwrap();
        assert_eq!(e.values(), d.values());
        let mut ids2 = Vec::new();
        e.intern(&cols, 4, &mut ids2).unwrap();
        assert_eq!(ids2, ids);
        let strings = [KeyCol::Utf8(vec![Some("x")]), KeyCol::Utf8(vec![Some("y")])];
        assert!(e.intern(&strings, 1, &mut ids2).is_err());
        // An empty batch reads no key: its column types are not checked.
        let empty = [KeyCol::Utf8(vec![]), KeyCol::Utf8(vec![])];
        assert!(e.intern(&empty, 0, &mut ids2).is_ok());
        assert_eq!(e.values(), d.values());
    }

    #[test]
    fn single_int_fast_path_with_null() {
        let mut d = KeyDict::new(vec!["k".into()]);
        let v = [7, 7, 0, 8];
        let m = [true, true, false, true];
        let mut ids = Vec::new();
        d.intern(&[KeyCol::Int64(&v, Some(&m))], 4, &mut ids)
            .unwrap();
        assert_eq!(ids, vec![0, 0, 1, 2]);
        assert_eq!(
            d.values().unwrap()[0],
            KeyValues::Int64(vec![Some(7), None, Some(8)])
        );
        // both sides of the dense table, negative and large keys hashed
        let v = [
            DENSE_LIMIT,
            -1,
            DENSE_LIMIT - 1,
            8,
            -1,
            DENSE_LIMIT,
            i64::MIN,
        ];
        ids.clear();
        d.intern(&[KeyCol::Int64(&v, None)], v.len(), &mut ids)
            .unwrap();
        assert_eq!(ids, vec![3, 4, 5, 2, 4, 3, 6]);
    }
}
