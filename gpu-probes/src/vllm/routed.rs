//! The experts a fixed-shape burst's tokens were routed to, from the routing vLLM 0.26.0 returns
//! with a whole completion when the server runs with `--enable-return-routed-experts`:
//! `choices[0].routed_experts`, a base64 `.npy` array of shape (tokens − 1, MoE layers, top-k),
//! each forwarded token's experts in each layer (vllm/entrypoints/openai/completion/protocol.py:
//! "`num_tokens - 1` because the last sampled token has not been forwarded yet").

use std::collections::BTreeSet;

use afd_traces::vllm_run::RoutedExperts;
use base64::Engine as _;

/// One answer's routing: `rows` forwarded tokens (the prompt's, then each generated token but the
/// last), `layers` × `top_k` expert ids each.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    pub rows: usize,
    pub layers: usize,
    pub top_k: usize,
    /// Row-major (row, layer, pick).
    pub experts: Vec<u32>,
}

impl Routing {
    /// The routing in a completion's JSON answer; `Err` names what was missing or malformed.
    pub fn from_answer(answer: &serde_json::Value) -> Result<Self, String> {
        let encoded = answer["choices"][0]["routed_experts"].as_str().ok_or(
            "the answer carries no routed_experts (is the server started with \
             --enable-return-routed-experts?)",
        )?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("routed_experts is not base64: {e}"))?;
        Self::from_npy(&bytes).map_err(|e| format!("routed_experts: {e}"))
    }

    /// Parses a C-ordered three-dimensional `.npy` array of unsigned or signed integers.
    pub fn from_npy(bytes: &[u8]) -> Result<Self, String> {
        let rest = bytes
            .strip_prefix(b"\x93NUMPY")
            .ok_or("not a .npy array (no magic string)")?;
        let (&major, rest) = rest.split_first().ok_or("a .npy header cut short")?;
        let rest = rest.get(1..).ok_or("a .npy header cut short")?;
        let (len, rest) = match major {
            1 => {
                let n = rest.get(..2).ok_or("a .npy header cut short")?;
                (usize::from(u16::from_le_bytes([n[0], n[1]])), &rest[2..])
            }
            2 | 3 => {
                let n = rest.get(..4).ok_or("a .npy header cut short")?;
                let len = u32::from_le_bytes([n[0], n[1], n[2], n[3]]);
                (
                    usize::try_from(len).map_err(|_| "a .npy header too long")?,
                    &rest[4..],
                )
            }
            v => return Err(format!(".npy format version {v} is not one numpy writes")),
        };
        let header = rest.get(..len).ok_or("a .npy header cut short")?;
        let data = &rest[len..];
        let header = std::str::from_utf8(header).map_err(|_| "a .npy header that is not text")?;
        let field = |key: &str| -> Result<&str, String> {
            let at = header
                .find(&format!("'{key}':"))
                .ok_or_else(|| format!("the .npy header has no '{key}'"))?;
            Ok(header[at + key.len() + 3..].trim_start())
        };
        if field("fortran_order")?.starts_with("True") {
            return Err("a Fortran-ordered .npy array".into());
        }
        let descr = field("descr")?;
        let descr = descr
            .strip_prefix('\'')
            .and_then(|d| d.split('\'').next())
            .ok_or("a .npy descr that is not a string")?;
        let width = match descr {
            "|u1" | "|i1" => 1,
            "<u2" | "<i2" => 2,
            "<u4" | "<i4" => 4,
            "<u8" | "<i8" => 8,
            other => return Err(format!("dtype {other} is not a little-endian integer")),
        };
        let shape = field("shape")?;
        let shape = shape
            .strip_prefix('(')
            .and_then(|s| s.split(')').next())
            .ok_or("a .npy shape that is not a tuple")?;
        let dims: Vec<usize> = shape
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| d.parse().map_err(|_| format!("a .npy shape entry {d:?}")))
            .collect::<Result<_, _>>()?;
        let [rows, layers, top_k] = dims[..] else {
            return Err(format!("shape {dims:?}: want (tokens, layers, top-k)"));
        };
        let count = rows
            .checked_mul(layers)
            .and_then(|n| n.checked_mul(top_k))
            .ok_or("a .npy shape too large")?;
        if data.len() != count * width {
            return Err(format!(
                "{} data bytes where shape {dims:?} of {descr} needs {}",
                data.len(),
                count * width
            ));
        }
        let signed = descr.contains('i');
        let experts = data
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                let v = u64::from_le_bytes(b);
                let negative = signed && c[width - 1] & 0x80 != 0;
                if negative {
                    Err("a negative expert id".to_owned())
                } else {
                    u32::try_from(v).map_err(|_| format!("expert id {v} out of range"))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            rows,
            layers,
            top_k,
            experts,
        })
    }

    fn picks(&self, row: usize, layer: usize) -> &[u32] {
        let at = (row * self.layers + layer) * self.top_k;
        &self.experts[at..at + self.top_k]
    }
}

/// Counts what a burst's routings say over their routed layers; `prompt_len` tokens of each were the
/// prompt. `Err` says why nothing can be counted: no routing came back, the routings disagree on
/// their layers and picks, one is shorter than its prompt, or no layer was routed.
pub fn summarise(routings: &[Routing], prompt_len: usize) -> Result<RoutedExperts, String> {
    let first = routings.first().ok_or("no answer carried its routing")?;
    let (layers, top_k) = (first.layers, first.top_k);
    if layers == 0 || top_k == 0 {
        return Err(format!("a routing of {layers} layers and {top_k} picks"));
    }
    if let Some(r) = routings
        .iter()
        .find(|r| (r.layers, r.top_k) != (layers, top_k))
    {
        return Err(format!(
            "routings of {layers} × {top_k} and of {} × {} experts in one burst",
            r.layers, r.top_k
        ));
    }
    if let Some(r) = routings.iter().find(|r| r.rows < prompt_len) {
        return Err(format!(
            "a routing of {} tokens for a {prompt_len}-token prompt",
            r.rows
        ));
    }
    // A routed layer's every token picks `top_k` distinct experts. vLLM's array also has a row for
    // each dense layer (DeepSeek-V2-Lite's first), a placeholder of one repeated id, which would
    // count as a layer reaching one expert (cal25 read 157 / 27 = 5.815 where the 26 MoE layers
    // reached six each).
    let routed_layers: Vec<usize> = (0..layers)
        .filter(|&l| {
            routings.iter().all(|r| {
                (0..r.rows)
                    .all(|row| r.picks(row, l).iter().collect::<BTreeSet<_>>().len() == top_k)
            })
        })
        .collect();
    if routed_layers.is_empty() {
        return Err(format!(
            "no layer of the {layers} picked {top_k} distinct experts for every token: nothing was routed"
        ));
    }
    let mean_over_layers = |distinct: &dyn Fn(usize) -> usize| {
        routed_layers
            .iter()
            .map(|&l| distinct(l) as f64)
            .sum::<f64>()
            / routed_layers.len() as f64
    };
    // Decode position k: the row after the prompt's, of every request that forwarded that many.
    let positions = routings
        .iter()
        .map(|r| r.rows - prompt_len)
        .max()
        .unwrap_or(0);
    let decode_distinct = (0..positions)
        .map(|k| {
            mean_over_layers(&|l| {
                routings
                    .iter()
                    .filter(|r| prompt_len + k < r.rows)
                    .flat_map(|r| r.picks(prompt_len + k, l))
                    .collect::<BTreeSet<_>>()
                    .len()
            })
        })
        .collect();
    // Each request's prompt experts by layer, counted once for both figures below.
    let prompts: Vec<Vec<BTreeSet<u32>>> = routings
        .iter()
        .map(|r| {
            (0..layers)
                .map(|l| {
                    (0..prompt_len)
                        .flat_map(|row| r.picks(row, l).iter().copied())
                        .collect()
                })
                .collect()
        })
        .collect();
    let per_request: Vec<f64> = prompts
        .iter()
        .map(|sets| mean_over_layers(&|l| sets[l].len()))
        .collect();
    let prompt_distinct = crate::stats::median(&per_request).unwrap_or(0.0);
    let prompt_union_distinct = mean_over_layers(&|l| {
        prompts
            .iter()
            .flat_map(|sets| sets[l].iter())
            .collect::<BTreeSet<_>>()
            .len()
    });
    Ok(RoutedExperts {
        requests: routings.len() as u32,
        layers: routed_layers.len() as u32,
        top_k: top_k as u32,
        decode_distinct,
        prompt_distinct,
        prompt_union_distinct,
    })
}
