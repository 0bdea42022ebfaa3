//! The Triton JIT compile a vLLM server pays the first time a step needs a fused-MoE kernel
//! specialization it has not compiled (the twenty-sixth batch, docs/fidelity.md).
//!
//! vLLM 0.26 runs a bf16 MoE model's routed experts through `fused_moe_kernel`, a `@triton.jit`
//! kernel launched twice a layer (the gate-up GEMM, then the down GEMM with the routing weights;
//! vllm/model_executor/layers/fused_moe/fused_moe.py). Triton compiles it in the server process for
//! every new specialization: the tile config vLLM picks for the step's `M` tokens
//! (`get_default_config`, where no tuned config file exists for the experts' shape and GPU, as for
//! DeepSeek-V2-Lite's E=64, N=1408 on H100 and H200: the server logs "Using default MoE config") and
//! which of the kernel's integer arguments are divisible by 16 (Triton's specialization of `EM`, the
//! padded length of the sorted token ids, and `num_tokens`, `M` times top-k). Start-up compiles the
//! profile run's (`M` = `--max-num-batched-tokens`, `gpu_model_runner.py` `profile_run`), the sampler
//! warm-up's (`M` = min(max-num-seqs, max-num-batched-tokens), `gpu_worker.py`) and, with graphs,
//! every capture size's; vLLM's JIT monitor warns of any compile after that ("Triton kernel JIT
//! compilation during inference", `vllm/utils/jit_monitor.py`). A step replayed from a full graph
//! compiles nothing; a piecewise step runs its capture size's kernels; every other step runs at its
//! own `M`.

use std::collections::BTreeSet;

use crate::serving::GraphMode;

/// One compiled specialization of `fused_moe_kernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MoeKernelKey {
    /// `BLOCK_SIZE_M`, `BLOCK_SIZE_N`, `BLOCK_SIZE_K`, `GROUP_SIZE_M`, `num_warps`, `num_stages`.
    pub config: [u32; 6],
    /// `naive_block_assignment`: so few routed tokens that the kernel skips the block alignment.
    pub naive: bool,
    /// `EM` is divisible by 16.
    pub em_aligned: bool,
    /// `num_tokens` (M × top-k) is divisible by 16.
    pub tokens_aligned: bool,
}

/// vLLM 0.26's `get_default_config` for an unquantized (bf16) MoE of `experts` routed experts at
/// `m` tokens.
fn default_config(m: u32, experts: u32) -> [u32; 6] {
    let block_m = match m {
        0..=32 => 16,
        33..=96 => 32,
        97..=512 => 64,
        _ => 128,
    };
    let block_n = if m <= 64 { 64 } else { 128 };
    let block_k = if m <= 64 { 128 } else { 64 };
    let group_m = if m / experts.max(1) > 128 { 16 } else { 1 };
    let warps = if m <= 128 { 4 } else { 8 };
    let stages = if m <= 32 { 4 } else { 3 };
    [block_m, block_n, block_k, group_m, warps, stages]
}

/// The specialization a step of `m` tokens needs (`invoke_fused_moe_triton_kernel`,
/// `_prepare_expert_assignment` and `moe_align_block_size`).
pub fn moe_kernel_key(m: u32, experts: u32, top_k: u32) -> MoeKernelKey {
    let m = m.max(1);
    let config = default_config(m, experts);
    let block_m = config[0];
    let num_tokens = m * top_k;
    let naive = num_tokens * 4 <= experts;
    let em = if naive {
        num_tokens * block_m
    } else {
        let mut em = num_tokens + experts * (block_m - 1);
        if num_tokens < experts {
            em = em.min(num_tokens * block_m);
        }
        if m < block_m {
            em = em.min(num_tokens * block_m);
        }
        em
    };
    MoeKernelKey {
        config,
        naive,
        em_aligned: em.is_multiple_of(16),
        tokens_aligned: num_tokens.is_multiple_of(16),
    }
}

/// The specializations one engine process has compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitCache {
    experts: u32,
    top_k: u32,
    compiled: BTreeSet<MoeKernelKey>,
    /// Every specialization is compiled (a server past its first uses, [`JitCache::warm`]).
    warm: bool,
}

impl JitCache {
    /// What a freshly started server of `graph` mode and these limits has compiled.
    pub fn at_start(
        graph: &GraphMode,
        max_num_seqs: u32,
        max_num_batched_tokens: u32,
        experts: u32,
        top_k: u32,
    ) -> JitCache {
        let mut cache = JitCache {
            experts,
            top_k,
            compiled: BTreeSet::new(),
            warm: false,
        };
        cache.record(max_num_batched_tokens);
        cache.record(max_num_seqs.min(max_num_batched_tokens));
        let captured = graph.capture_sizes().iter();
        let piecewise = match graph {
            GraphMode::FullAndPiecewise {
                piecewise_sizes, ..
            } => piecewise_sizes.as_slice(),
            _ => &[],
        };
        for &size in captured.chain(piecewise) {
            cache.record(size);
        }
        cache
    }

    /// The kernels' token count in a step of `tokens` scheduled tokens on one engine, or `None` when
    /// the step replays a full graph (`replayed`).
    pub fn kernel_tokens(graph: &GraphMode, replayed: bool, tokens: u32) -> Option<u32> {
        if replayed {
            return None;
        }
        Some(graph.piecewise_size(tokens).unwrap_or(tokens).max(1))
    }

    /// Marks the specialization of a step of `m` kernel tokens compiled; whether it was new.
    pub fn record(&mut self, m: u32) -> bool {
        !self.warm
            && self
                .compiled
                .insert(moe_kernel_key(m, self.experts, self.top_k))
    }

    /// Takes every specialization as compiled: a server whose earlier traffic met them all.
    pub fn warm(&mut self) {
        self.warm = true;
    }

    /// The lone prompt lengths that, sent one at a time to a server holding this cache, leave no
    /// specialization uncompiled that a step of up to `max_num_batched_tokens` tokens can need: for
    /// each one missing, the shortest prompt whose prefill step needs it, ascending. A prompt's
    /// prefill is one step of its length (it fits the budget); its decodes are steps of one token,
    /// replayed from a full graph where `graph` captured one, else run at one token. The cache
    /// records what the prompts compile.
    pub fn covering_prompts(&mut self, graph: &GraphMode, max_num_batched_tokens: u32) -> Vec<u32> {
        let decode = Self::kernel_tokens(graph, graph.padded_size(1).is_some(), 1);
        let mut prompts = Vec::new();
        for length in 1..=max_num_batched_tokens.max(1) {
            let Some(m) = Self::kernel_tokens(graph, false, length) else {
                continue;
            };
            if self.record(m) {
                prompts.push(length);
                if let Some(d) = decode {
                    self.record(d);
                }
            }
        }
        prompts
    }

    /// The specializations steps of up to `max_num_batched_tokens` tokens can need on a server of
    /// `graph` mode, whether compiled or not.
    pub fn reachable(
        graph: &GraphMode,
        max_num_batched_tokens: u32,
        experts: u32,
        top_k: u32,
    ) -> BTreeSet<MoeKernelKey> {
        (1..=max_num_batched_tokens.max(1))
            .filter_map(|t| Self::kernel_tokens(graph, false, t))
            .map(|m| moe_kernel_key(m, experts, top_k))
            .collect()
    }

    /// Whether `key` is compiled.
    pub fn holds(&self, key: &MoeKernelKey) -> bool {
        self.warm || self.compiled.contains(key)
    }

    /// How many specializations are compiled.
    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fdo_256_2048() -> GraphMode {
        // vLLM's capture sizes at max-num-seqs 256: 1, 2, 4, then every 8 to 256, every 16 to 512.
        let mut sizes = vec![1, 2, 4];
        sizes.extend((8..=256).step_by(8));
        sizes.extend((272..=512).step_by(16));
        GraphMode::FullDecodeOnly {
            capture_sizes: sizes,
        }
    }

    /// cal31 (`traces/data/vllm/h100/`, `--jit-monitor-verbose`): after start-up the server compiled
    /// at its first steps of 385 and 1,921 tokens (warm-ups), then of 105 (tile 64×128×64, 4 warps)
    /// and 22 (tile 16×64×128) tokens, and at no other of its 5,000-odd steps.
    #[test]
    fn the_compiles_cal31_logged_are_the_new_keys() {
        let graph = fdo_256_2048();
        let mut cache = JitCache::at_start(&graph, 256, 2048, 64, 6);
        assert_eq!(moe_kernel_key(105, 64, 6).config, [64, 128, 64, 1, 4, 3]);
        assert_eq!(moe_kernel_key(22, 64, 6).config, [16, 64, 128, 1, 4, 4]);
        for m in [385, 1921, 105, 22] {
            assert!(cache.record(m), "{m} tokens compile");
        }
        // The warm-ups' other steps and the runs' steps of those sizes or aligned ones do not.
        for m in [16, 128, 384, 512, 2048, 1920, 104, 24, 23, 113, 390] {
            assert!(!cache.record(m), "{m} tokens are compiled already");
        }
    }

    /// cal29's `pre-r4-a` stalled 855 ms at its first 11-token step and 856 ms at its first of 61:
    /// neither a multiple of 8, so neither key was captured.
    #[test]
    fn unaligned_small_steps_need_their_own_kernels() {
        let mut cache = JitCache::at_start(&fdo_256_2048(), 256, 2048, 64, 6);
        assert!(cache.record(11));
        assert!(cache.record(61));
        assert!(!cache.record(8));
        assert!(!cache.record(56));
    }

    #[test]
    fn eager_starts_with_the_profile_and_sampler_runs_only() {
        let cache = JitCache::at_start(&GraphMode::Eager, 64, 64, 64, 6);
        assert_eq!(cache.len(), 1);
        let mut cache = JitCache::at_start(&GraphMode::Eager, 256, 2048, 64, 6);
        assert_eq!(cache.len(), 2);
        assert!(cache.record(1), "one token is naive");
        assert!(!cache.record(256));
    }

    #[test]
    fn a_warm_server_compiles_nothing() {
        let mut cache = JitCache::at_start(&fdo_256_2048(), 256, 2048, 64, 6);
        cache.warm();
        assert!(!cache.record(11));
        assert!(!cache.record(1921));
    }

    #[test]
    fn replayed_and_piecewise_steps_use_their_graph_sizes() {
        let graph = GraphMode::FullAndPiecewise {
            capture_sizes: vec![1, 2, 4, 8],
            piecewise_sizes: vec![1, 2, 4, 8, 16, 24, 32],
        };
        assert_eq!(JitCache::kernel_tokens(&graph, true, 3), None);
        assert_eq!(JitCache::kernel_tokens(&graph, false, 13), Some(16));
        assert_eq!(JitCache::kernel_tokens(&graph, false, 40), Some(40));
        let mut cache = JitCache::at_start(&graph, 64, 64, 64, 6);
        assert!(!cache.record(16));
    }

    /// One unaligned token count in each of the six tile classes for FULL_DECODE_ONLY at 256/2048
    /// (its capture sizes compiled every aligned one); an eager server also needs the aligned ones
    /// and the naive one-token decode. After them no step up to the budget compiles.
    #[test]
    fn covering_prompts_leave_nothing_to_compile() {
        let graph = fdo_256_2048();
        let mut cache = JitCache::at_start(&graph, 256, 2048, 64, 6);
        assert_eq!(
            cache.covering_prompts(&graph, 2048),
            [11, 33, 65, 97, 129, 513]
        );
        for m in 1..=2048 {
            assert!(!cache.record(m), "{m} tokens compile after the warm-up");
        }
        let mut eager = JitCache::at_start(&GraphMode::Eager, 256, 2048, 64, 6);
        let prompts = eager.covering_prompts(&GraphMode::Eager, 2048);
        assert_eq!(prompts, [1, 3, 8, 11, 33, 40, 65, 72, 97, 104, 129, 513]);
        let reachable = JitCache::reachable(&GraphMode::Eager, 2048, 64, 6);
        assert!(reachable.iter().all(|k| eager.holds(k)));
        assert_eq!(reachable.len(), eager.len());
    }
}
