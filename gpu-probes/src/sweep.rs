//! Lists of sizes, token counts and contexts to sweep, as given on the command line.
//!
//! `8:1G` is a geometric sweep with factor 2 (8 B, 16 B, … 1 GiB); `1,2,3` is an explicit list; both
//! accept binary suffixes K, M, G (KiB, MiB, GiB).

/// Why a list could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("invalid list {text:?}: {problem}")]
pub struct SweepError {
    text: String,
    problem: String,
}

/// Parses `MIN:MAX` (powers of two between, both included when powers of two) or a comma list.
/// Values must be at least `min` and at most `max`; the result is sorted and deduplicated.
pub fn parse_list(text: &str, min: u64, max: u64) -> Result<Vec<u64>, SweepError> {
    let error = |problem: String| SweepError {
        text: text.to_owned(),
        problem,
    };
    let mut values = if let Some((low, high)) = text.split_once(':') {
        let low = parse_size(low).map_err(&error)?;
        let high = parse_size(high).map_err(&error)?;
        if low == 0 || low > high {
            return Err(error(format!("range start {low} must be in 1..={high}")));
        }
        geometric(low, high)
    } else {
        text.split(',')
            .map(|item| parse_size(item).map_err(&error))
            .collect::<Result<Vec<u64>, SweepError>>()?
    };
    if values.is_empty() {
        return Err(error("no values".to_owned()));
    }
    if let Some(bad) = values.iter().find(|v| **v < min || **v > max) {
        return Err(error(format!("{bad} is outside {min}..={max}")));
    }
    values.sort_unstable();
    values.dedup();
    Ok(values)
}

/// `low, 2·low, 4·low, …` up to `high` inclusive.
pub fn geometric(low: u64, high: u64) -> Vec<u64> {
    let mut values = Vec::new();
    let mut v = low.max(1);
    while v <= high {
        values.push(v);
        match v.checked_mul(2) {
            Some(next) => v = next,
            None => break,
        }
    }
    values
}

/// `8`, `64K`, `1M`, `1G` (binary units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last() {
        Some('K' | 'k') => (&text[..text.len() - 1], 10),
        Some('M' | 'm') => (&text[..text.len() - 1], 20),
        Some('G' | 'g') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a number (suffixes K, M, G allowed)"))?;
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Human form of a byte count (`8 B`, `64 KiB`, `1 GiB`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests;
