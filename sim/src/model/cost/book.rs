//! The price book: what a run asked its cost model, kept by whoever prices (`Cluster`, `replay`),
//! not by the model. It counts, per operation class, how many queries each source priced
//! ([`UsageCounts`], the report's cost sources), and it memoises prices: the one price memo of the
//! simulator.
//!
//! Pricing is a pure function of the (immutable) cost model and the query, so a memoised price is
//! exactly the uncached one; each entry keeps the usage counts its uncached call recorded and
//! replays them on every hit, so the counts are those of a run without the memo. One mechanism
//! ([`PriceBook::memoised`]) serves two tables: hand-offs by row count in a dense table (the
//! hottest price, asked for per Attention rank and stage of every step: kept in the hash table, it
//! made a 3,000-request trace run a fifth slower), every other price by operation and integer
//! arguments in a hash table.
//!
//! A book serves one cost model: its prices were made by that model, so a caller keeps one book per
//! model (per run; the planner's candidates each run with their own). It does not decide what is
//! priced or how: `cost.rs` does.

use std::marker::PhantomData;

use super::TransferCost;
use super::interp::Lookup;
use super::{ClassUsage, OpClass};
use crate::pipeline::WaitCurve;
use crate::time::SimDuration;

/// Usage counters of every class, in [`OpClass::ALL`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageCounts([ClassUsage; OpClass::ALL.len()]);

impl UsageCounts {
    /// Usage counters of one class.
    pub fn of(&self, class: OpClass) -> ClassUsage {
        self.0[class.index()]
    }

    /// Where `class` was priced from: `"calibration"`, `"roofline"`, `"calibration+roofline"`, or
    /// `"unused"`.
    pub fn source_of(&self, class: OpClass) -> &'static str {
        let usage = self.of(class);
        match (usage.calibrated > 0, usage.roofline > 0) {
            (true, true) => "calibration+roofline",
            (true, false) => "calibration",
            (false, true) => "roofline",
            (false, false) => "unused",
        }
    }

    /// What was counted since the snapshot `before` (an earlier copy of these counters), per class
    /// index.
    pub fn since(&self, before: &UsageCounts) -> Vec<(usize, ClassUsage)> {
        before
            .0
            .iter()
            .zip(&self.0)
            .enumerate()
            .filter(|(_, (b, a))| a != b)
            .map(|(i, (b, a))| (i, a.since(*b)))
            .collect()
    }

    /// Adds `add` to the counters of class index `class`.
    fn count(&mut self, class: usize, add: ClassUsage) {
        let usage = &mut self.0[class];
        usage.calibrated += add.calibrated;
        usage.roofline += add.roofline;
        usage.out_of_range += add.out_of_range;
    }
}

/// A run's usage counts and memoised prices (see the module documentation).
#[derive(Debug, Default)]
pub struct PriceBook {
    usage: UsageCounts,
    /// Hand-offs by row count.
    transfers: Vec<Option<(TransferCost, UsageDelta)>>,
    /// Every other memoised price, by operation and integer arguments.
    prices: PriceTable,
}

impl PriceBook {
    /// An empty book, for a cost model that has priced nothing yet.
    pub fn new() -> PriceBook {
        PriceBook::default()
    }

    /// Every class's usage counters so far.
    pub fn usage(&self) -> &UsageCounts {
        &self.usage
    }

    /// Counts `delta` (from [`UsageCounts::since`]) again: a step replayed from the step memo
    /// (`cluster/memo.rs`) replays the usage its pricing recorded, so the report counts every step
    /// as if it had been priced.
    pub fn add_usage(&mut self, delta: &[(usize, ClassUsage)]) {
        for &(class, add) in delta {
            self.usage.count(class, add);
        }
    }

    /// Counts one query of `class`, from the calibration when `lookup` found a measured value (also
    /// counted when clamped out of range), else from the roofline; the measured value, µs.
    pub(super) fn record(&mut self, class: OpClass, lookup: Option<Lookup>) -> Option<f64> {
        let usage = &mut self.usage.0[class.index()];
        match lookup {
            Some(found) => {
                usage.calibrated += 1;
                usage.out_of_range += u64::from(found.out_of_range);
                Some(found.value_us)
            }
            None => {
                usage.roofline += 1;
                None
            }
        }
    }

    /// The price `slot` names: from the memo (replaying the usage it recorded), or from `price`
    /// (remembered with the usage it recorded). `price` gets the book, so it may ask for other
    /// prices; their counts become part of its own.
    pub(super) fn memoised<S: Slot>(
        &mut self,
        slot: S,
        price: impl FnOnce(&mut PriceBook) -> S::Value,
    ) -> S::Value {
        if let Some((value, delta)) = slot.find(self) {
            for &(class, add) in &delta.items[..delta.len as usize] {
                self.usage.count(class as usize, add);
            }
            return value;
        }
        let before = self.usage;
        let value = price(self);
        // Too many classes to replay: price this one afresh every time.
        if let Some(delta) = UsageDelta::between(&before, &self.usage) {
            slot.keep(self, value, delta);
        }
        value
    }
}

/// Where a memoised price is kept, and its type.
pub(super) trait Slot: Copy {
    type Value: Copy;

    /// The remembered price and the usage its uncached call recorded.
    fn find(self, book: &PriceBook) -> Option<(Self::Value, UsageDelta)>;

    fn keep(self, book: &mut PriceBook, value: Self::Value, delta: UsageDelta);
}

/// A hand-off of this many rows, in the dense table.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rows(pub(super) u32);

impl Slot for Rows {
    type Value = TransferCost;

    fn find(self, book: &PriceBook) -> Option<(TransferCost, UsageDelta)> {
        book.transfers.get(self.0 as usize).copied().flatten()
    }

    fn keep(self, book: &mut PriceBook, value: TransferCost, delta: UsageDelta) {
        let slot = self.0 as usize;
        if book.transfers.len() <= slot {
            book.transfers.resize(slot + 1, None);
        }
        book.transfers[slot] = Some((value, delta));
    }
}

/// A price of type `V` by operation and two integer arguments, in the hash table.
#[derive(Debug)]
pub(super) struct Keyed<V> {
    key: (PricedOp, u64, u64),
    value: PhantomData<fn() -> V>,
}

impl<V> Keyed<V> {
    pub(super) fn new(op: PricedOp, a: u64, b: u64) -> Keyed<V> {
        Keyed {
            key: (op, a, b),
            value: PhantomData,
        }
    }
}

impl<V> Clone for Keyed<V> {
    fn clone(&self) -> Keyed<V> {
        *self
    }
}

impl<V> Copy for Keyed<V> {}

impl<V: Memoisable> Slot for Keyed<V> {
    type Value = V;

    fn find(self, book: &PriceBook) -> Option<(V, UsageDelta)> {
        book.prices
            .get(&self.key)
            .map(|&(priced, delta)| (V::from_priced(priced), delta))
    }

    fn keep(self, book: &mut PriceBook, value: V, delta: UsageDelta) {
        book.prices.insert(self.key, (value.into_priced(), delta));
    }
}

/// The operations whose prices are kept by their integer arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum PricedOp {
    NcclBusyRows,
    HandoffWaitExtra,
    FanInOccupancy,
    AllReduceRows,
    AllToAllRows,
    Router,
    MoeDispatch,
    MoeCompositionNs,
    SharedExperts,
    DenseMlp,
    AttentionProj,
    AttentionDecode,
    AttentionPrefill,
    LmHead,
    EagerHost,
    StepHost,
}

/// A price as the hash table keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Priced {
    Duration(SimDuration),
    Maybe(Option<SimDuration>),
    Signed(i64),
    Curve(WaitCurve),
}

/// A type of price the hash table keeps. An operation always has the same type, so
/// `from_priced` of what `into_priced` made never fails.
pub(super) trait Memoisable: Copy {
    fn into_priced(self) -> Priced;

    fn from_priced(priced: Priced) -> Self;
}

macro_rules! memoisable {
    ($type:ty, $variant:ident) => {
        impl Memoisable for $type {
            fn into_priced(self) -> Priced {
                Priced::$variant(self)
            }

            fn from_priced(priced: Priced) -> $type {
                match priced {
                    Priced::$variant(value) => value,
                    other => unreachable!("{other:?} kept for a {}", stringify!($type)),
                }
            }
        }
    };
}

memoisable!(SimDuration, Duration);
memoisable!(Option<SimDuration>, Maybe);
memoisable!(i64, Signed);
memoisable!(WaitCurve, Curve);

/// What one priced call added to the usage counters, replayed on every memo hit so the report's
/// counts are those of uncached calls. At most [`UsageDelta::CAPACITY`] classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct UsageDelta {
    len: u8,
    items: [(u8, ClassUsage); UsageDelta::CAPACITY],
}

impl UsageDelta {
    const CAPACITY: usize = 3;

    /// What was counted from `before` to `after`; `None` for more than [`UsageDelta::CAPACITY`]
    /// classes.
    fn between(before: &UsageCounts, after: &UsageCounts) -> Option<UsageDelta> {
        let mut delta = UsageDelta::default();
        for (i, (b, a)) in before.0.iter().zip(&after.0).enumerate() {
            if a == b {
                continue;
            }
            if delta.len as usize == UsageDelta::CAPACITY {
                return None;
            }
            delta.items[delta.len as usize] = (i as u8, a.since(*b));
            delta.len += 1;
        }
        Some(delta)
    }
}

#[expect(
    clippy::disallowed_types,
    reason = "a lookup table of prices; it is never iterated"
)]
type PriceTable = std::collections::HashMap<(PricedOp, u64, u64), (Priced, UsageDelta), BuildMix>;

/// A fast hasher for small integer keys (lookups only).
#[derive(Clone, Copy, Debug, Default)]
struct BuildMix;

impl std::hash::BuildHasher for BuildMix {
    type Hasher = Mix;

    fn build_hasher(&self) -> Mix {
        Mix(0)
    }
}

/// Multiply-rotate mixing of the words written.
#[derive(Debug)]
struct Mix(u64);

impl std::hash::Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_u8(&mut self, value: u8) {
        self.write_u64(u64::from(value));
    }

    fn write_isize(&mut self, value: isize) {
        self.write_u64(value as u64);
    }
}
