//! The request gaps `vllm bench serve` draws, replayed exactly.
//!
//! `main_async` in `vllm/benchmarks/serve.py` calls `np.random.seed(args.seed)`, and `get_request`
//! then draws one gap per request with `np.random.gamma(shape=burstiness, scale=theta)` before it
//! sends anything (the random dataset samples from its own `np.random.default_rng`, so nothing else
//! takes from that stream first). numpy's global generator is the legacy `RandomState`: MT19937
//! seeded by `init_genrand(seed)`, 53-bit doubles from two 32-bit outputs, and the legacy gamma
//! (numpy/random/src/legacy/legacy-distributions.c). That stream is frozen across numpy versions
//! (NEP 19), so these are the gaps of every `vllm bench serve --seed S` run; the fixture
//! `sim/tests/fixtures/numpy-legacy-gamma.json` (written by `sim/scripts/numpy_gamma_vectors.py`)
//! holds numpy's own draws to check against.

use rand_mt::Mt;

/// numpy's legacy `RandomState` after `np.random.seed(seed)`, with the draws `gamma` needs.
pub struct NumpyRandomState {
    mt: Mt,
    /// The polar method's second normal, kept for the next `gauss` (`has_gauss` in numpy).
    gauss: Option<f64>,
}

impl NumpyRandomState {
    /// `np.random.seed(seed)` for an integer seed (numpy refuses one outside `0..=2**32 - 1`).
    pub fn new(seed: u32) -> NumpyRandomState {
        NumpyRandomState {
            mt: Mt::new(seed),
            gauss: None,
        }
    }

    /// A double in `[0, 1)` from two outputs: 27 high bits of the first, 26 of the second.
    fn double(&mut self) -> f64 {
        let a = f64::from(self.mt.next_u32() >> 5);
        let b = f64::from(self.mt.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    fn standard_exponential(&mut self) -> f64 {
        -(1.0 - self.double()).ln()
    }

    /// A standard normal by the polar method, two at a time.
    fn gauss(&mut self) -> f64 {
        if let Some(kept) = self.gauss.take() {
            return kept;
        }
        loop {
            let x1 = 2.0 * self.double() - 1.0;
            let x2 = 2.0 * self.double() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    /// `standard_gamma(shape)`: exponential at shape 1, Johnk-style rejection below 1,
    /// Marsaglia-Tsang above.
    fn standard_gamma(&mut self, shape: f64) -> f64 {
        if shape == 1.0 {
            return self.standard_exponential();
        }
        if shape == 0.0 {
            return 0.0;
        }
        if shape < 1.0 {
            loop {
                let u = self.double();
                let v = self.standard_exponential();
                if u <= 1.0 - shape {
                    let x = u.powf(1.0 / shape);
                    if x <= v {
                        return x;
                    }
                } else {
                    let y = -((1.0 - u) / shape).ln();
                    let x = (1.0 - shape + shape * y).powf(1.0 / shape);
                    if x <= v + y {
                        return x;
                    }
                }
            }
        }
        let b = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * b).sqrt();
        loop {
            let (x, v) = loop {
                let x = self.gauss();
                let v = 1.0 + c * x;
                if v > 0.0 {
                    break (x, v);
                }
            };
            let v = v * v * v;
            let u = self.double();
            if u < 1.0 - 0.0331 * (x * x) * (x * x) {
                return b * v;
            }
            if u.ln() < 0.5 * x * x + b * (1.0 - v + v.ln()) {
                return b * v;
            }
        }
    }

    /// `np.random.gamma(shape=shape, scale=scale)`.
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        scale * self.standard_gamma(shape)
    }
}

/// The committed numpy draws (`sim/tests/fixtures/numpy-legacy-gamma.json`): the array at `key`.
#[cfg(test)]
pub(super) fn numpy_fixture(key: &str) -> Vec<serde_json::Value> {
    let text = include_str!("../../../tests/fixtures/numpy-legacy-gamma.json");
    let fixture: serde_json::Value = serde_json::from_str(text).unwrap();
    fixture[key].as_array().unwrap().clone()
}

#[cfg(test)]
mod tests {
    use super::{NumpyRandomState, numpy_fixture};

    #[test]
    fn the_draws_are_numpys_own() {
        let cases = numpy_fixture("cases");
        assert_eq!(cases.len(), 20);
        for case in &cases {
            let seed = u32::try_from(case["seed"].as_u64().unwrap()).unwrap();
            let shape = case["shape"].as_f64().unwrap();
            let mut state = NumpyRandomState::new(seed);
            for (i, want) in case["draws"].as_array().unwrap().iter().enumerate() {
                let want = want.as_f64().unwrap();
                let got = state.gamma(shape, 1.0);
                // The same operations in the same order: equal to the last bit or two of libm.
                assert!(
                    (got - want).abs() <= 4.0 * f64::EPSILON * want.abs().max(1.0),
                    "seed {seed} shape {shape} draw {i}: numpy {want}, here {got}"
                );
            }
        }
    }
}
