//! The cost model's price memo: prices by operation and integer arguments, each with the usage
//! counts its uncached call recorded, replayed on every hit. Pricing is a pure function of the
//! model, the layout and the profile, so a memoised price is exactly the uncached one.

use super::{ClassUsage, CostModel};
use crate::pipeline::WaitCurve;
use crate::time::SimDuration;

/// The operations whose prices are memoised by their integer arguments.
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

/// A memoised price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Priced {
    Duration(SimDuration),
    Maybe(Option<SimDuration>),
    Signed(i64),
    Curve(WaitCurve),
}

/// What one priced call added to the usage counters, replayed on every memo hit so the report's
/// counts are those of uncached calls. At most [`UsageDelta::CAPACITY`] classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct UsageDelta {
    len: u8,
    items: [(u8, ClassUsage); UsageDelta::CAPACITY],
}

impl UsageDelta {
    const CAPACITY: usize = 3;
}

/// Prices by `(operation, argument, argument)`. Pricing is a pure function of the model, the
/// layout and the profile, so a memoised price is exactly the uncached one.
#[derive(Debug, Default)]
pub(super) struct PriceMemo {
    entries: PriceTable,
}

impl PriceMemo {
    /// Forgets every price (the prices' inputs changed).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
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

impl CostModel {
    /// The price `key` names: from the memo (replaying the usage it recorded), or from `price`
    /// (remembered with the usage it recorded).
    pub(super) fn memoised(
        &self,
        key: (PricedOp, u64, u64),
        price: impl FnOnce() -> Priced,
    ) -> Priced {
        if let Some(&(value, delta)) = self.memo.borrow().entries.get(&key) {
            for &(class, add) in &delta.items[..delta.len as usize] {
                self.count(class as usize, add);
            }
            return value;
        }
        let before = self.usage_all();
        let value = price();
        let mut delta = UsageDelta::default();
        for (i, before) in before.iter().enumerate() {
            let after = self.usage[i].get();
            if after == *before {
                continue;
            }
            if delta.len as usize == UsageDelta::CAPACITY {
                // Too many classes to replay: price this one afresh every time.
                return value;
            }
            delta.items[delta.len as usize] = (i as u8, after.since(*before));
            delta.len += 1;
        }
        self.memo.borrow_mut().entries.insert(key, (value, delta));
        value
    }
}
