//! The deployment space of a GPU budget: which values each dimension takes, parsed from
//! `--dimensions NAME=V1,V2,…`, and the points they span, in a fixed order.
//!
//! Points are not yet judged: `candidate.rs` turns each into command lines and applies the
//! deployment rules. The defaults span every A:F split with `A ≥ F` (P2pNcclAFDConnector requires
//! it, afd-spec §1.4 rule 5) that uses the whole budget, every DP×TP with TP a power of two, expert
//! parallelism on and off for the FFN role, DBO off and on at two decode thresholds, three graph
//! settings, three `--max-num-seqs` and three `--max-num-batched-tokens` values, plus the
//! colocated baseline (vLLM DP×TP with expert parallelism on the same GPUs).

use crate::serving::{DboConfig, Placement, RoleLayout};

/// The GPUs a sweep may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Most GPUs a candidate uses.
    pub gpus: u32,
    /// Fewest GPUs a candidate uses (defaults to `gpus`: the whole budget).
    pub min_gpus: u32,
    /// GPUs per node; a TP group never straddles a node.
    pub gpus_per_node: u32,
}

/// How a candidate sets its CUDA graphs (afd-spec §5.1).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capture {
    /// `--enforce-eager`.
    Eager,
    /// `FULL_DECODE_ONLY` with vLLM's default capture sizes for the candidate's `--max-num-seqs`.
    Auto,
    /// `FULL_DECODE_ONLY` with vLLM's default sizes up to `--max-cudagraph-capture-size N`.
    Max(u32),
    /// `FULL_DECODE_ONLY` with exactly these `cudagraph_capture_sizes` (ascending, distinct).
    Sizes(Vec<u32>),
}

impl Capture {
    /// `eager`, `auto`, `max:N` or `N:N:…`.
    pub fn parse(text: &str) -> Option<Capture> {
        match text {
            "eager" => return Some(Capture::Eager),
            "auto" => return Some(Capture::Auto),
            _ => {}
        }
        if let Some(max) = text.strip_prefix("max:") {
            return max.parse().ok().filter(|&n| n >= 1).map(Capture::Max);
        }
        let mut sizes: Vec<u32> = text
            .split(':')
            .map(|s| s.parse().ok().filter(|&n: &u32| n >= 1))
            .collect::<Option<_>>()?;
        sizes.sort_unstable();
        sizes.dedup();
        Some(Capture::Sizes(sizes))
    }

    /// The text `parse` reads back.
    pub fn label(&self) -> String {
        match self {
            Capture::Eager => "eager".to_owned(),
            Capture::Auto => "auto".to_owned(),
            Capture::Max(n) => format!("max:{n}"),
            Capture::Sizes(sizes) => sizes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(":"),
        }
    }
}

/// The values each dimension takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Dimensions {
    /// `(A, F)` splits; `None` means every split with `A ≥ F ≥ 1` inside the budget.
    pub splits: Option<Vec<(u32, u32)>>,
    /// TP sizes tried for the Attention role (and the baseline); DP is what is left.
    pub attention_tp: Vec<u32>,
    pub ffn_tp: Vec<u32>,
    /// `--enable-expert-parallel` on the FFN role (off is tried only with more than one FFN rank).
    pub expert_parallel: Vec<bool>,
    /// DBO off (`None`) or on with this `--dbo-decode-token-threshold`.
    pub dbo: Vec<Option<u32>>,
    pub dbo_prefill: Vec<u32>,
    pub capture: Vec<Capture>,
    pub max_num_seqs: Vec<u32>,
    pub max_num_batched_tokens: Vec<u32>,
    /// Add the colocated baseline.
    pub baseline: bool,
    /// NICs per host tried for candidates whose roles sit on different nodes (needs the sweep's
    /// `--link`); empty: the link's own count, one run each.
    pub nics: Vec<u32>,
}

/// A `--dimensions` value that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimensionError {
    #[error("expected NAME=VALUES (e.g. dbo=off,2,32), got {0:?}")]
    Shape(String),
    #[error("unknown dimension {name:?}; dimensions are {}", DIMENSION_NAMES.join(", "))]
    Unknown { name: String },
    #[error("dimension {name}: {value:?} is not {expected}")]
    Value {
        name: String,
        value: String,
        expected: &'static str,
    },
    #[error("dimension {name} has no values")]
    Empty { name: String },
}

/// Names `--dimensions` accepts.
pub const DIMENSION_NAMES: [&str; 11] = [
    "split",
    "attention-tp",
    "ffn-tp",
    "expert-parallel",
    "dbo",
    "dbo-prefill",
    "capture",
    "max-num-seqs",
    "max-num-batched-tokens",
    "baseline",
    "nics",
];

impl Default for Dimensions {
    fn default() -> Dimensions {
        Dimensions {
            splits: None,
            attention_tp: vec![1, 2, 4, 8],
            ffn_tp: vec![1, 2, 4, 8],
            expert_parallel: vec![true, false],
            dbo: vec![None, Some(2), Some(32)],
            dbo_prefill: vec![512],
            capture: vec![Capture::Eager, Capture::Auto, Capture::Sizes(vec![64])],
            max_num_seqs: vec![32, 64, 128],
            max_num_batched_tokens: vec![512, 2048, 8192],
            baseline: true,
            nics: Vec::new(),
        }
    }
}

impl Dimensions {
    /// Applies one `NAME=V1,V2,…` assignment (several may be joined with `;`).
    pub fn assign(&mut self, text: &str) -> Result<(), DimensionError> {
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, values) = part
                .split_once('=')
                .ok_or_else(|| DimensionError::Shape(part.to_owned()))?;
            let values = Values {
                name: name.trim(),
                list: values
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .collect(),
            };
            if values.list.is_empty() {
                return Err(DimensionError::Empty {
                    name: values.name.to_owned(),
                });
            }
            self.assign_one(part, &values)?;
        }
        Ok(())
    }

    /// Sets the dimension `values` names from its values (`part` is the whole `NAME=VALUES`).
    fn assign_one(&mut self, part: &str, values: &Values<'_>) -> Result<(), DimensionError> {
        match values.name {
            "split" => self.splits = values.splits()?,
            "attention-tp" => self.attention_tp = values.counts("a positive integer")?,
            "ffn-tp" => self.ffn_tp = values.counts("a positive integer")?,
            "expert-parallel" => {
                let mut out: Vec<bool> = values
                    .list
                    .iter()
                    .map(|v| values.switch(v))
                    .collect::<Result<_, _>>()?;
                out.dedup();
                self.expert_parallel = out;
            }
            "dbo" => self.dbo = values.dbo()?,
            "dbo-prefill" => self.dbo_prefill = values.counts("a prefill token threshold >= 1")?,
            "capture" => {
                let mut out = Vec::new();
                for v in &values.list {
                    out.push(
                        Capture::parse(v)
                            .ok_or(values.bad(v, "eager, auto, max:N or sizes like 8:16:32"))?,
                    );
                }
                out.dedup();
                self.capture = out;
            }
            "max-num-seqs" => self.max_num_seqs = values.counts("a positive integer")?,
            "max-num-batched-tokens" => {
                self.max_num_batched_tokens = values.counts("a positive integer")?;
            }
            "nics" => self.nics = values.counts("a positive number of NICs per host")?,
            "baseline" => {
                let [value] = values.list.as_slice() else {
                    return Err(values.bad(part, "a single on or off"));
                };
                self.baseline = values.switch(value)?;
            }
            _ => {
                return Err(DimensionError::Unknown {
                    name: values.name.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// One dimension's name and its comma-separated values, as `--dimensions` gave them.
struct Values<'a> {
    name: &'a str,
    list: Vec<&'a str>,
}

impl Values<'_> {
    fn bad(&self, value: &str, expected: &'static str) -> DimensionError {
        DimensionError::Value {
            name: self.name.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }

    /// Positive integers, sorted, without repeats.
    fn counts(&self, expected: &'static str) -> Result<Vec<u32>, DimensionError> {
        let mut out: Vec<u32> = self
            .list
            .iter()
            .map(|v| {
                v.parse()
                    .ok()
                    .filter(|&n: &u32| n >= 1)
                    .ok_or(self.bad(v, expected))
            })
            .collect::<Result<_, _>>()?;
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn switch(&self, v: &str) -> Result<bool, DimensionError> {
        match v {
            "on" | "true" => Ok(true),
            "off" | "false" => Ok(false),
            _ => Err(self.bad(v, "on or off")),
        }
    }

    /// `A:F` pairs, or `all` (`None`).
    fn splits(&self) -> Result<Option<Vec<(u32, u32)>>, DimensionError> {
        if self.list == ["all"] {
            return Ok(None);
        }
        let mut splits = Vec::new();
        for v in &self.list {
            let pair = v.split_once(':').and_then(|(a, f)| {
                let a: u32 = a.parse().ok().filter(|&n| n >= 1)?;
                let f: u32 = f.parse().ok().filter(|&n| n >= 1)?;
                Some((a, f))
            });
            splits.push(pair.ok_or(self.bad(v, "A:F (e.g. 12:4) or all"))?);
        }
        splits.dedup();
        Ok(Some(splits))
    }

    /// `off` (`None`) or decode token thresholds.
    fn dbo(&self) -> Result<Vec<Option<u32>>, DimensionError> {
        let mut out = Vec::new();
        for v in &self.list {
            out.push(match *v {
                "off" => None,
                _ => Some(
                    v.parse()
                        .ok()
                        .filter(|&n: &u32| n >= 1)
                        .ok_or(self.bad(v, "off or a decode token threshold >= 1"))?,
                ),
            });
        }
        out.dedup();
        Ok(out)
    }
}

/// One point of the space before the deployment rules judge it.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub placement: Placement,
    /// The Attention role's layout (for the baseline: the one layout every GPU shares).
    pub attention: RoleLayout,
    /// The FFN role's layout (`None` for the baseline).
    pub ffn: Option<RoleLayout>,
    pub dbo: Option<DboConfig>,
    pub capture: Capture,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
}

impl Point {
    pub fn gpus(&self) -> u32 {
        self.attention.ranks() + self.ffn.map_or(0, RoleLayout::ranks)
    }
}

/// Every point of `dimensions` inside `budget`: AFD splits first (by total GPUs, then F, then the
/// Attention and FFN layouts), then the baseline, each crossed with DBO, graphs and batch limits
/// in the order the dimensions list them.
pub fn points(dimensions: &Dimensions, budget: Budget) -> Vec<Point> {
    let mut layouts: Vec<(Placement, RoleLayout, Option<RoleLayout>)> = Vec::new();
    let in_budget = |gpus: u32| (budget.min_gpus..=budget.gpus).contains(&gpus);
    let splits: Vec<(u32, u32)> = match &dimensions.splits {
        Some(splits) => splits
            .iter()
            .copied()
            .filter(|&(a, f)| in_budget(a + f))
            .collect(),
        None => (budget.min_gpus.max(2)..=budget.gpus)
            .flat_map(|total| (1..=total / 2).map(move |f| (total - f, f)))
            .collect(),
    };
    let tps = |ranks: u32, sizes: &[u32]| -> Vec<RoleLayout> {
        sizes
            .iter()
            .filter(|&&tp| ranks.is_multiple_of(tp))
            .map(|&tp| RoleLayout {
                dp: ranks / tp,
                tp,
                expert_parallel: false,
            })
            .collect()
    };
    for (a, f) in splits {
        for attention in tps(a, &dimensions.attention_tp) {
            for &expert_parallel in &dimensions.expert_parallel {
                if !expert_parallel && f == 1 && dimensions.expert_parallel.contains(&true) {
                    // One FFN rank holds every expert either way.
                    continue;
                }
                for mut ffn in tps(f, &dimensions.ffn_tp) {
                    ffn.expert_parallel = expert_parallel;
                    layouts.push((Placement::Disaggregated, attention, Some(ffn)));
                }
            }
        }
    }
    if dimensions.baseline {
        for gpus in budget.min_gpus..=budget.gpus {
            for mut layout in tps(gpus, &dimensions.attention_tp) {
                layout.expert_parallel = true;
                layouts.push((Placement::Colocated, layout, None));
            }
        }
    }
    let mut out = Vec::new();
    for (placement, attention, ffn) in layouts {
        for &dbo in &dimensions.dbo {
            let prefill: &[u32] = if dbo.is_some() {
                &dimensions.dbo_prefill
            } else {
                &[0]
            };
            for &prefill_threshold in prefill {
                for capture in &dimensions.capture {
                    for &max_num_seqs in &dimensions.max_num_seqs {
                        for &max_num_batched_tokens in &dimensions.max_num_batched_tokens {
                            out.push(Point {
                                placement,
                                attention,
                                ffn,
                                dbo: dbo.map(|decode_threshold| DboConfig {
                                    decode_threshold,
                                    prefill_threshold,
                                }),
                                capture: capture.clone(),
                                max_num_seqs,
                                max_num_batched_tokens,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}
