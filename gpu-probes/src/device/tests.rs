//! Device-layer checks that need no GPU: the probe kernels compile with NVRTC wherever the library is
//! found (set `LD_LIBRARY_PATH` to a folder holding `libnvrtc.so.13`), and skip otherwise.

use std::io::Write;

#[test]
fn probe_kernels_compile_for_hopper_and_ampere() {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        assert!(
            std::env::var("REQUIRE_LIVE").as_deref() != Ok("1"),
            "REQUIRE_LIVE=1 but NVRTC is not loadable"
        );
        let _ = writeln!(
            std::io::stderr(),
            "skipped: NVRTC not found (put libnvrtc.so.13 on LD_LIBRARY_PATH)"
        );
        return;
    }
    for arch in ["sm_90", "sm_80"] {
        let ptx = super::kernels::ptx_for(arch).unwrap_or_else(|err| panic!("{arch}: {err}"));
        for name in [
            "fill_bf16",
            "check_u32",
            "add_rmsnorm",
            "mla_prep",
            "mla_decode_mma_prefetch",
            "mla_decode_mma",
            "mla_decode_simple",
            "mla_combine",
            "router_topk",
            "moe_gather",
            "moe_combine",
            "silu_mul",
            "compare_bf16",
        ] {
            assert!(
                ptx.contains(&format!(".entry {name}(")),
                "{arch}: {name} missing from the PTX"
            );
        }
        for tile in crate::gemm_choice::TILES {
            for fused in [false, true] {
                let name = tile.kernel_name(fused);
                assert!(
                    ptx.contains(&format!(".entry {name}(")),
                    "{arch}: {name} missing from the PTX"
                );
            }
        }
        assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        assert!(ptx.contains("cp.async.cg.shared.global"));
        if let Ok(path) = std::env::var("DUMP_PTX") {
            std::fs::write(format!("{path}.{arch}.ptx"), &ptx).unwrap();
        }
    }
}
