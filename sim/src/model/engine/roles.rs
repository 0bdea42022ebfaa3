//! How an eager step's host time divides between the parts an AFD pair splits, from vLLM's torch
//! profiler ([`VllmEngineProfile::role_division`]): the summaries `sim/scripts/module_shares.py
//! --json` writes of a profiled plain eager server's steps, and the share a role takes of a step of
//! a given size.

use afd_traces::vllm_run::{RoleShare, VllmEngineProfile};
use serde_json::Value;

use super::median;

/// One profiled step as `module_shares.py --json` summarises it (other keys are ignored).
struct ProfiledStep {
    prefill_tokens: u32,
    decode_requests: u32,
    host_us: f64,
    decoder_layers: u32,
    layers_us: f64,
    ffn_us: f64,
    outside_layers_us: f64,
}

impl ProfiledStep {
    fn read(step: &Value) -> Result<ProfiledStep, String> {
        let num = |key: &str| {
            step.get(key)
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("a step has no number `{key}`"))
        };
        let count = |key: &str| {
            step.get(key)
                .and_then(Value::as_u64)
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| format!("a step has no count `{key}`"))
        };
        Ok(ProfiledStep {
            prefill_tokens: count("prefill_tokens")?,
            decode_requests: count("decode_requests")?,
            host_us: num("host_us")?,
            decoder_layers: count("decoder_layers")?,
            layers_us: num("layers_us")?,
            ffn_us: num("ffn_us")?,
            outside_layers_us: num("outside_layers_us")?,
        })
    }
}

fn read_steps(text: &str) -> Result<Vec<ProfiledStep>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    value
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("no `steps` list")?
        .iter()
        .map(ProfiledStep::read)
        .collect()
}

/// One step size's outside shares, FFN shares and the summaries they came from.
type Sizes<'a> = (Vec<f64>, Vec<f64>, Vec<&'a str>);

/// The division table from module summaries `(name, JSON text)`: per scheduled-token count, the
/// median over every profiled step of that size (steps without a decoder layer, or with times
/// that do not add up, are left out). An error names the summary that does not read.
pub fn role_division(summaries: &[(String, String)]) -> Result<Vec<RoleShare>, String> {
    let mut by_tokens: std::collections::BTreeMap<u32, Sizes<'_>> = Default::default();
    for (name, text) in summaries {
        let steps = read_steps(text)
            .map_err(|e| format!("{name}: not a module_shares.py --json summary: {e}"))?;
        for step in &steps {
            let tokens = step.prefill_tokens + step.decode_requests;
            let sane = step.decoder_layers > 0
                && tokens > 0
                && step.layers_us > 0.0
                && step.host_us >= step.layers_us
                && (0.0..=step.layers_us).contains(&step.ffn_us)
                && step.outside_layers_us >= 0.0;
            if !sane {
                continue;
            }
            let entry = by_tokens.entry(tokens).or_default();
            entry.0.push(step.outside_layers_us / step.host_us);
            entry.1.push(step.ffn_us / step.layers_us);
            if !entry.2.contains(&name.as_str()) {
                entry.2.push(name);
            }
        }
    }
    if by_tokens.is_empty() {
        return Err("no profiled step with decoder layers in the module summaries".into());
    }
    Ok(by_tokens
        .into_iter()
        .map(|(tokens, (outside, ffn, names))| RoleShare {
            tokens,
            steps: outside.len() as u32,
            outside_of_step: round4(median(outside).unwrap_or(0.0)),
            ffn_of_layers: round4(median(ffn).unwrap_or(0.0)),
            evidence: names.join(" "),
        })
        .collect())
}

/// How `profile` has an AFD pair's roles divide a plain step's issue, in the words `afd-sim
/// predict`'s note and afd-twin's start-up line use: as measured, or by the lean costs where the
/// profile measured no division.
pub fn division_words(profile: &VllmEngineProfile) -> &'static str {
    if profile.role_division.is_empty() {
        "as the lean per-operation costs divide it: the profile measured no division"
    } else {
        "as vLLM's profiler divided a plain eager step between the layers' attention and MoE blocks"
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// The division of a step of `tokens` scheduled tokens: `(outside_of_step, ffn_of_layers)`,
/// linear in tokens between the table's sizes and flat beyond its ends; `None` for an empty table.
pub fn division_at(table: &[RoleShare], tokens: u32) -> Option<(f64, f64)> {
    let first = table.first()?;
    let last = table.last()?;
    if tokens <= first.tokens {
        return Some((first.outside_of_step, first.ffn_of_layers));
    }
    if tokens >= last.tokens {
        return Some((last.outside_of_step, last.ffn_of_layers));
    }
    let i = table.iter().position(|r| r.tokens >= tokens)?;
    let (a, b) = (&table[i - 1], &table[i]);
    let t = f64::from(tokens - a.tokens) / f64::from(b.tokens - a.tokens);
    let lerp = |x: f64, y: f64| x + (y - x) * t;
    Some((
        lerp(a.outside_of_step, b.outside_of_step),
        lerp(a.ffn_of_layers, b.ffn_of_layers),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(prefill: u32, decodes: u32, host: f64, layers: f64, ffn: f64) -> String {
        format!(
            r#"{{"annotation": "x", "prefill_requests": 0, "prefill_tokens": {prefill},
               "decode_requests": {decodes}, "host_us": {host}, "decoder_layers": 27,
               "layers_us": {layers}, "attention_us": 0, "ffn_us": {ffn},
               "other_in_layers_us": 0, "outside_layers_us": {}, "classes_us": {{}}}}"#,
            host - layers
        )
    }

    #[test]
    fn each_step_size_takes_the_median_of_its_profiled_steps() {
        let a = format!(
            r#"{{"steps": [{}, {}, {}], "median_ffn_share_of_layers": 0.3}}"#,
            step(0, 16, 1000.0, 800.0, 200.0),
            step(0, 16, 1000.0, 600.0, 300.0),
            step(0, 16, 2000.0, 1000.0, 400.0)
        );
        let b = format!(r#"{{"steps": [{}]}}"#, step(512, 0, 1000.0, 900.0, 450.0));
        let table = role_division(&[("a".into(), a), ("b".into(), b)]).expect("summaries read");
        assert_eq!(table.len(), 2);
        assert_eq!((table[0].tokens, table[0].steps), (16, 3));
        // Outside shares 0.2, 0.4, 0.5; FFN shares 0.25, 0.5, 0.4.
        assert_eq!(table[0].outside_of_step, 0.4);
        assert_eq!(table[0].ffn_of_layers, 0.4);
        assert_eq!(table[1].evidence, "b");
        assert_eq!(division_at(&table, 1), Some((0.4, 0.4)));
        let (outside, ffn) = division_at(&table, 264).unwrap();
        assert!((outside - 0.25).abs() < 1e-9 && (ffn - 0.45).abs() < 1e-9);
        assert_eq!(division_at(&table, 4096), Some((0.1, 0.5)));
    }

    #[test]
    fn a_summary_that_does_not_read_is_named_and_empty_ones_are_refused() {
        let err = role_division(&[("bad.json".into(), "{}".into())]).unwrap_err();
        assert!(err.starts_with("bad.json: "), "{err}");
        let none = r#"{"steps": []}"#.to_string();
        assert!(role_division(&[("e".into(), none)]).is_err());
        assert_eq!(division_at(&[], 8), None);
    }
}
