//! Incremental window aggregates: `count`, `sum`, `min`, `max`, `mean`, `first`,
//! `last` over int64 or float64 value columns.
//!
//! SQL semantics: a null value is skipped by every aggregate but `count`, which counts
//! records; an aggregate that saw no value is null. `sum` of int64 wraps like a Java
//! `long`. `first`/`last` go by event time: `first` is the value with the smallest
//! event time (ties: earliest arrival), `last` the largest (ties: latest arrival).
//! Accumulators merge (session windows), so every aggregate is order-independent
//! except float rounding.

use crate::error::{Error, Result};

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFn {
    /// Number of records in the window (nulls included).
    Count,
    /// Sum of the non-null values.
    Sum,
    /// Smallest non-null value.
    Min,
    /// Largest non-null value.
    Max,
    /// Mean of the non-null values, as float64.
    Mean,
    /// Value with the smallest event time (ties: earliest arrival).
    First,
    /// Value with the largest event time (ties: latest arrival).
    Last,
}

impl AggFn {
    /// Every aggregate function, in the order of their codes (the Python layer's
    /// list of names comes from here, through `_core.AGGREGATES`).
    pub const ALL: [Self; 7] = [
        Self::Count,
        Self::Sum,
        Self::Min,
        Self::Max,
        Self::Mean,
        Self::First,
        Self::Last,
    ];

    /// Parses `count`, `sum`, `min`, `max`, `mean`, `first`, `last`.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
                Error::param(
                    "aggs",
                    format!("unknown aggregate {name:?}; use {}", names.join(", ")),
                )
            })
    }

    /// The function's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
            Self::Mean => "mean",
            Self::First => "first",
            Self::Last => "last",
        }
    }

    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// The type of a value column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// 64-bit signed integers.
    Int64,
    /// 64-bit floats.
    Float64,
}

/// One aggregate: a function over a value column (`None` for `count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggSpec {
    /// The function.
    pub func: AggFn,
    /// Index of the value column, `None` for `count`.
    pub column: Option<usize>,
}

/// A borrowed value column with an optional validity mask (`true` = not null).
#[derive(Clone, Copy, Debug)]
pub enum ValueCol<'a> {
    /// int64 values.
    Int64(&'a [i64], Option<&'a [bool]>),
    /// float64 values.
    Float64(&'a [f64], Option<&'a [bool]>),
}

impl ValueCol<'_> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Int64(v, _) => v.len(),
            Self::Float64(v, _) => v.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Self::Int64(..) => ValueType::Int64,
            Self::Float64(..) => ValueType::Float64,
        }
    }
}

/// The accumulator of one aggregate in one window: raw value bits `a`, number of
/// values `n`, and for first/last the event time `t` and arrival sequence `s`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cell {
    /// Value bits (i64 or f64 as bits; for `mean`, the f64 sum).
    pub a: u64,
    /// Number of non-null values seen.
    pub n: u64,
    /// Event time of the kept value (first/last).
    pub t: i64,
    /// Arrival sequence of the kept value (first/last).
    pub s: u64,
}

#[inline]
fn better(func: AggFn, ty: ValueType, new: u64, old: u64) -> bool {
    match ty {
        ValueType::Int64 => {
            let (x, y) = (new as i64, old as i64);
            if func == AggFn::Min {
                x < y
            } else {
                x > y
            }
        }
        // NaN is larger than every number, as Spark orders it (its `min`/`max`, the
        // native path's): a NaN met first must not stick, whatever the order.
        ValueType::Float64 => {
            let (x, y) = (f64::from_bits(new), f64::from_bits(old));
            if func == AggFn::Min {
                !x.is_nan() && (y.is_nan() || x < y)
            } else {
                (x.is_nan() && !y.is_nan()) || x > y
            }
        }
    }
}

#[inline]
fn add(ty: ValueType, x: u64, y: u64) -> u64 {
    match ty {
        ValueType::Int64 => (x as i64).wrapping_add(y as i64) as u64,
        ValueType::Float64 => (f64::from_bits(x) + f64::from_bits(y)).to_bits(),
    }
}

#[inline]
fn as_f64(ty: ValueType, bits: u64) -> f64 {
    match ty {
        ValueType::Int64 => bits as i64 as f64,
        ValueType::Float64 => f64::from_bits(bits),
    }
}

/// Folds a value `bits` with event time `t` and arrival `s` into `cell`.
#[inline]
fn fold(cell: &mut Cell, func: AggFn, ty: ValueType, bits: u64, t: i64, s: u64) {
    let fresh = cell.n == 0;
    match func {
        AggFn::Count => {}
        AggFn::Sum => cell.a = if fresh { bits } else { add(ty, cell.a, bits) },
        AggFn::Min | AggFn::Max => {
            if fresh || better(func, ty, bits, cell.a) {
                cell.a = bits;
            }
        }
        AggFn::Mean => {
            cell.a = (f64::from_bits(if fresh { 0 } else { cell.a }) + as_f64(ty, bits)).to_bits();
        }
        AggFn::First | AggFn::Last => {
            let take = fresh
                || if func == AggFn::First {
                    (t, s) < (cell.t, cell.s)
                } else {
                    (t, s) > (cell.t, cell.s)
                };
            if take {
                cell.a = bits;
                cell.t = t;
                cell.s = s;
            }
        }
    }
    cell.n += 1;
}

/// An aggregate resolved against one batch's value columns, so that adding a row
/// does no column lookup and no type dispatch.
#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    /// `count` without a column.
    Records,
    /// `sum` of an int64 column without nulls (the common case, kept apart so that
    /// it compiles to a few instructions).
    SumInt(&'a [i64]),
    /// An aggregate of an int64 column.
    Int(AggFn, &'a [i64], Option<&'a [bool]>),
    /// An aggregate of a float64 column.
    Float(AggFn, &'a [f64], Option<&'a [bool]>),
}

/// The aggregates of an operator resolved once per batch, so that adding a row does
/// no per-row lookup.
#[derive(Clone, Debug)]
pub(crate) struct RowAdder<'a> {
    steps: Vec<Step<'a>>,
    /// The steps are exactly `count` then `sum` of this int64 column without nulls
    /// (the most common pair): added without the dispatch loop.
    count_sum: Option<&'a [i64]>,
}

impl<'a> RowAdder<'a> {
    /// Resolves `specs` against the batch columns `cols`.
    pub(crate) fn new(specs: &[AggSpec], cols: &[ValueCol<'a>]) -> Self {
        let steps = specs
            .iter()
            .map(|spec| match spec.column.map(|c| cols[c]) {
                None => Step::Records,
                Some(ValueCol::Int64(v, None)) if spec.func == AggFn::Sum => Step::SumInt(v),
                Some(ValueCol::Int64(v, m)) => Step::Int(spec.func, v, m),
                Some(ValueCol::Float64(v, m)) => Step::Float(spec.func, v, m),
            })
            .collect::<Vec<_>>();
        let count_sum = match steps[..] {
            [Step::Records, Step::SumInt(v)] => Some(v),
            _ => None,
        };
        Self { steps, count_sum }
    }

    /// Adds row `row` (event time `t`, arrival sequence `s`) to the cells of one
    /// window. Always inlined: it is the operator's innermost loop.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn add(&self, cells: &mut [Cell], row: usize, t: i64, s: u64) {
        if let (Some(v), [count, sum]) = (self.count_sum, &mut *cells) {
            count.n += 1;
            fold(sum, AggFn::Sum, ValueType::Int64, v[row] as u64, t, s);
            return;
        }
        for (cell, step) in cells.iter_mut().zip(&self.steps) {
            match *step {
                Step::Records => cell.n += 1,
                Step::SumInt(v) => fold(cell, AggFn::Sum, ValueType::Int64, v[row] as u64, t, s),
                Step::Int(func, v, m) => {
                    if m.map_or(true, |m| m[row]) {
                        fold(cell, func, ValueType::Int64, v[row] as u64, t, s);
                    }
                }
                Step::Float(func, v, m) => {
                    if m.map_or(true, |m| m[row]) {
                        fold(cell, func, ValueType::Float64, v[row].to_bits(), t, s);
                    }
                }
            }
        }
    }
}

/// Merges the cells `from` into `into` (session windows merging).
pub fn merge_cells(into: &mut [Cell], from: &[Cell], specs: &[AggSpec], types: &[ValueType]) {
    for ((dst, src), spec) in into.iter_mut().zip(from).zip(specs) {
        if src.n == 0 {
            continue;
        }
        match spec.column {
            None => dst.n += src.n,
            Some(c) => {
                let ty = types[c];
                if spec.func == AggFn::Mean {
                    let sum = if dst.n == 0 {
                        0.0
                    } else {
                        f64::from_bits(dst.a)
                    };
                    dst.a = (sum + f64::from_bits(src.a)).to_bits();
                    dst.n += src.n;
                } else {
                    let n = dst.n;
                    fold(dst, spec.func, ty, src.a, src.t, src.s);
                    dst.n = n + src.n;
                }
            }
        }
    }
}

/// The output type of an aggregate.
pub fn output_type(spec: &AggSpec, types: &[ValueType]) -> ValueType {
    match (spec.func, spec.column) {
        (AggFn::Count, _) | (_, None) => ValueType::Int64,
        (AggFn::Mean, _) => ValueType::Float64,
        (_, Some(c)) => types[c],
    }
}

/// One output column of aggregate values.
#[derive(Clone, Debug, PartialEq)]
pub enum AggColumn {
    /// int64 values (null when the window saw no value).
    Int64(Vec<Option<i64>>),
    /// float64 values (null when the window saw no value).
    Float64(Vec<Option<f64>>),
}

impl AggColumn {
    /// An empty column of the given type.
    pub fn new(ty: ValueType) -> Self {
        match ty {
            ValueType::Int64 => Self::Int64(Vec::new()),
            ValueType::Float64 => Self::Float64(Vec::new()),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Int64(v) => v.len(),
            Self::Float64(v) => v.len(),
        }
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the final value of `cell` for aggregate `spec`.
    #[inline]
    pub fn push(&mut self, cell: &Cell, spec: &AggSpec) {
        let present = cell.n > 0;
        match self {
            Self::Int64(v) => v.push(if spec.func == AggFn::Count {
                Some(cell.n as i64)
            } else {
                present.then_some(cell.a as i64)
            }),
            Self::Float64(v) => v.push(present.then(|| {
                if spec.func == AggFn::Mean {
                    f64::from_bits(cell.a) / cell.n as f64
                } else {
                    f64::from_bits(cell.a)
                }
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<AggSpec> {
        AggFn::ALL
            .iter()
            .map(|&f| AggSpec {
                func: f,
                column: (f != AggFn::Count).then_some(0),
            })
            .collect()
    }

    fn finish(cells: &[Cell], specs: &[AggSpec], types: &[ValueType]) -> Vec<AggColumn> {
        specs
            .iter()
            .zip(cells)
            .map(|(s, c)| {
                let mut col = AggColumn::new(output_type(s, types));
                col.push(c, s);
                col
            })
            .collect()
    }

    #[test]
    fn names_codes_and_parse_agree() {
        for (i, f) in AggFn::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(f.code()), i);
            assert_eq!(AggFn::from_code(f.code()), Some(f));
            assert_eq!(AggFn::parse(f.name()).unwrap(), f);
        }
        let err = AggFn::parse("median").unwrap_err().to_string();
        assert!(
            err.contains("use count, sum, min, max, mean, first, last"),
            "{err}"
        );
    }

    #[test]
    fn int_aggregates_skip_nulls_and_wrap() {
        let sp = specs();
        let types = [ValueType::Int64];
        let vals = [5, i64::MAX, 3, 7];
        let valid = [true, true, false, true];
        let cols = [ValueCol::Int64(&vals, Some(&valid))];
        let adder = RowAdder::new(&sp, &cols);
        let mut cells = vec![Cell::default(); sp.len()];
        for (row, t) in [(0, 10), (1, 5), (2, 1), (3, 5)] {
            adder.add(&mut cells, row, t, row as u64);
        }
        let out = finish(&cells, &sp, &types);
        assert_eq!(out[0], AggColumn::Int64(vec![Some(4)]));
        assert_eq!(
            out[1],
            AggColumn::Int64(vec![Some(5i64.wrapping_add(i64::MAX).wrapping_add(7))])
        );
        assert_eq!(out[2], AggColumn::Int64(vec![Some(5)]));
        assert_eq!(out[3], AggColumn::Int64(vec![Some(i64::MAX)]));
        // first: smallest time 5, earliest arrival (row 1); last: time 10 (row 0)
        assert_eq!(out[5], AggColumn::Int64(vec![Some(i64::MAX)]));
        assert_eq!(out[6], AggColumn::Int64(vec![Some(5)]));
    }

    #[test]
    fn count_then_int_sum_wraps() {
        // The pair the adder adds without its dispatch loop, and int sum alone.
        let all = specs();
        let sp = &all[..2];
        let types = [ValueType::Int64];
        let vals = [i64::MAX, 2, -5];
        let cols = [ValueCol::Int64(&vals, None)];
        for aggs in [sp, &sp[1..]] {
            let adder = RowAdder::new(aggs, &cols);
            let mut cells = vec![Cell::default(); aggs.len()];
            for row in 0..vals.len() {
                adder.add(&mut cells, row, 0, row as u64);
            }
            let out = finish(&cells, aggs, &types);
            let sum = i64::MAX.wrapping_add(2).wrapping_sub(5);
            assert_eq!(out.last(), Some(&AggColumn::Int64(vec![Some(sum)])));
            if aggs.len() == 2 {
                assert_eq!(out[0], AggColumn::Int64(vec![Some(3)]));
            }
        }
    }

    #[test]
    fn merge_equals_sequential() {
        let sp = specs();
        let types = [ValueType::Float64];
        let vals = [1.5, -2.0, 4.0, 0.5];
        let cols = [ValueCol::Float64(&vals, None)];
        let adder = RowAdder::new(&sp, &cols);
        let times = [3, 1, 3, 0];
        let mut all = vec![Cell::default(); sp.len()];
        let mut a = all.clone();
        let mut b = all.clone();
        for (row, &t) in times.iter().enumerate() {
            adder.add(&mut all, row, t, row as u64);
            let part = if row % 2 == 0 { &mut a } else { &mut b };
            adder.add(part, row, t, row as u64);
        }
        merge_cells(&mut b, &a, &sp, &types);
        assert_eq!(finish(&all, &sp, &types), finish(&b, &sp, &types));
        let empty = finish(&vec![Cell::default(); sp.len()], &sp, &types);
        assert_eq!(empty[1], AggColumn::Float64(vec![None]));
        assert_eq!(empty[0], AggColumn::Int64(vec![Some(0)]));
    }

    #[test]
    fn float_min_max_order_nan_last_in_any_order() {
        // As Spark orders floats: NaN above every number. A NaN met first used to stick.
        let sp = specs();
        let types = [ValueType::Float64];
        let min_max = |vals: &[f64]| {
            let cols = [ValueCol::Float64(vals, None)];
            let adder = RowAdder::new(&sp, &cols);
            let mut cells = vec![Cell::default(); sp.len()];
            for row in 0..vals.len() {
                adder.add(&mut cells, row, 0, row as u64);
            }
            let out = finish(&cells, &sp, &types);
            let get = |c: &AggColumn| match c {
                AggColumn::Float64(v) => v[0].expect("a value"),
                other @ AggColumn::Int64(_) => panic!("{other:?}"),
            };
            (get(&out[2]), get(&out[3]))
        };
        for vals in [
            [f64::NAN, 1.0, 2.0],
            [1.0, f64::NAN, 2.0],
            [2.0, 1.0, f64::NAN],
        ] {
            let (min, max) = min_max(&vals);
            assert_eq!(min.to_bits(), 1.0f64.to_bits(), "{vals:?}");
            assert!(max.is_nan(), "{vals:?}");
        }
        let (min, max) = min_max(&[f64::NAN, f64::NAN]);
        assert!(min.is_nan() && max.is_nan());
    }
}
