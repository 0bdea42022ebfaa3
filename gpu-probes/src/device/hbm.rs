//! `hbm`: device-to-device copy bandwidth (bytes read + bytes written over time), the ceiling the
//! expert GEMMs are compared against.

use std::time::Instant;

use super::gpu::{EventPairs, Gpu, copy_async, zero_async};
use super::kernels::Kernels;
use crate::assemble::{derived, point, table};
use crate::error::ProbeError;
use crate::spec::{HbmSpec, Measured};

/// Copies of every size, timed with events; the destination is checked against the source pattern.
pub(super) fn run(spec: &HbmSpec) -> Result<Measured, ProbeError> {
    let gpu = Gpu::open(spec.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let max = *spec.sizes.iter().max().unwrap_or(&(1 << 30)) as usize;
    let src = gpu.alloc(max, "hbm source")?;
    let dst = gpu.alloc(max, "hbm destination")?;
    let wrong = gpu.alloc(8, "check counter")?;
    let seed = 0x4842_4d00;
    kernels.fill_u32(&stream, src.ptr, (max / 4) as u64, seed)?;
    for &bytes in &spec.sizes {
        for _ in 0..spec.timing.warmup.max(1) {
            copy_async(&stream, dst.ptr, src.ptr, bytes as usize)?;
        }
    }
    stream.sync()?;
    let iters = spec.timing.iters.max(1);
    let events = EventPairs::new(&gpu, iters)?;
    let mut points = Vec::new();
    for &bytes in &spec.sizes {
        zero_async(&stream, dst.ptr, bytes as usize)?;
        let mut host = Vec::with_capacity(iters);
        for i in 0..iters {
            events.start[i].record(&stream)?;
            let t0 = Instant::now();
            copy_async(&stream, dst.ptr, src.ptr, bytes as usize)?;
            host.push(t0.elapsed().as_secs_f64() * 1e6);
            events.end[i].record(&stream)?;
        }
        stream.sync()?;
        let samples = events.elapsed_us(iters)?;
        zero_async(&stream, wrong.ptr, 8)?;
        kernels.check_u32(&stream, dst.ptr, bytes / 4, seed, 0, wrong.ptr)?;
        stream.sync()?;
        let mut bad = [0u64];
        wrong.download(&mut bad)?;
        if bad[0] != 0 {
            return Err(ProbeError::DataCheck {
                what: format!("hbm copy of {bytes} B"),
                detail: format!("{} of {} words differ from the source", bad[0], bytes / 4),
            });
        }
        let median = crate::stats::median(&samples).unwrap_or(f64::NAN);
        points.push(point(
            vec![bytes as f64],
            samples,
            derived(&[
                ("gbps", 2.0 * bytes as f64 / (median * 1e3)),
                ("host_us", crate::stats::median(&host).unwrap_or(f64::NAN)),
                ("kernels", 1.0),
            ]),
        )?);
    }
    let mut measured = Measured::default();
    measured.notes.insert(
        "hbm".to_owned(),
        format!(
            "GPU {} ({}): cuMemcpyDtoDAsync, {} warm-ups of every size, {iters} timed copies per size; gbps counts bytes read + written",
            gpu.ordinal, gpu.name, spec.timing.warmup
        ),
    );
    measured
        .tables
        .push(table("hbm.copy", &[], &["bytes"], points));
    Ok(measured)
}
