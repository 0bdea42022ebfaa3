//! CPU references the probes check their GPU results against after timing: bf16 conversion, the
//! absorbed MLA decode and one token through a gated MLP (an expert), in f64.

/// bf16 bits to f32.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// f32 to bf16 bits, round to nearest even (NaN stays NaN).
pub fn f32_to_bf16(value: f32) -> u16 {
    let bits = value.to_bits();
    if value.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

/// Relative L2 error `‖got − want‖ / ‖want‖` (infinite when `got` has a non-finite value).
pub fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "compared vectors differ in length");
    if got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (f64::from(*g) - w).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    if norm == 0.0 {
        return diff.sqrt();
    }
    (diff / norm).sqrt()
}

/// Absorbed MLA decode for one query and `heads` heads: `q_lat [heads][512]`, `q_pe [heads][64]`, and
/// `len` cache rows `[c (512) | k_pe (64)]`. Returns `out [heads][512]`.
pub fn mla_decode(
    q_lat: &[u16],
    q_pe: &[u16],
    rows: &[u16],
    heads: usize,
    len: usize,
    scale: f64,
) -> Vec<f64> {
    assert_eq!(q_lat.len(), heads * 512);
    assert_eq!(q_pe.len(), heads * 64);
    assert!(rows.len() >= len * 576);
    let row = |t: usize| &rows[t * 576..(t + 1) * 576];
    let mut out = vec![0.0; heads * 512];
    for h in 0..heads {
        let ql = &q_lat[h * 512..(h + 1) * 512];
        let qp = &q_pe[h * 64..(h + 1) * 64];
        let scores: Vec<f64> = (0..len)
            .map(|t| {
                let r = row(t);
                let lat: f64 = ql
                    .iter()
                    .zip(&r[..512])
                    .map(|(a, b)| f64::from(bf16_to_f32(*a)) * f64::from(bf16_to_f32(*b)))
                    .sum();
                let pe: f64 = qp
                    .iter()
                    .zip(&r[512..])
                    .map(|(a, b)| f64::from(bf16_to_f32(*a)) * f64::from(bf16_to_f32(*b)))
                    .sum();
                (lat + pe) * scale
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let o = &mut out[h * 512..(h + 1) * 512];
        for (t, w) in weights.iter().enumerate() {
            let r = row(t);
            for (c, value) in o.iter_mut().enumerate() {
                *value += w / total * f64::from(bf16_to_f32(r[c]));
            }
        }
    }
    out
}

/// One token through a gated MLP: `down · (silu(gate · x) ⊙ (up · x))` with `gate_up [2·inter][hidden]`
/// (gate rows first) and `down [hidden][inter]`, rounding the intermediates to bf16 as the GPU does.
pub fn gated_mlp(
    x: &[u16],
    gate_up: &[u16],
    down: &[u16],
    hidden: usize,
    inter: usize,
) -> Vec<f64> {
    assert_eq!(x.len(), hidden);
    assert_eq!(gate_up.len(), 2 * inter * hidden);
    assert_eq!(down.len(), hidden * inter);
    let xf: Vec<f64> = x.iter().map(|v| f64::from(bf16_to_f32(*v))).collect();
    let dot = |row: &[u16]| -> f64 {
        row.iter()
            .zip(&xf)
            .map(|(w, x)| f64::from(bf16_to_f32(*w)) * x)
            .sum()
    };
    let round = |v: f64| f64::from(bf16_to_f32(f32_to_bf16(v as f32)));
    let act: Vec<f64> = (0..inter)
        .map(|i| {
            let g = round(dot(&gate_up[i * hidden..(i + 1) * hidden]));
            let u = round(dot(&gate_up[(inter + i) * hidden..(inter + i + 1) * hidden]));
            round(g / (1.0 + (-g).exp()) * u)
        })
        .collect();
    (0..hidden)
        .map(|o| {
            down[o * inter..(o + 1) * inter]
                .iter()
                .zip(&act)
                .map(|(w, a)| f64::from(bf16_to_f32(*w)) * a)
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests;
