//! Azure LLM inference trace CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`), 2023 and 2024 releases.
//!
//! `TIMESTAMP` is a wall-clock date-time such as `2023-11-16 18:17:03.9799600`: no time zone in the
//! 2023 files (read as UTC), `+00:00` in the 2024 ones. Only the offset between rows matters, so
//! the time zone only has to be consistent. Does not read the 2025 multimodal columns.

use super::{ArrivalClock, CsvTable, TraceError, TraceRequest, parse_tokens};

pub(super) fn read(text: &str, file: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let table = CsvTable::new(text, file)?;
    let timestamp = table.column("TIMESTAMP")?;
    let context = table.column("ContextTokens")?;
    let generated = table.column("GeneratedTokens")?;
    let mut clock = ArrivalClock::new(file);
    let mut requests = Vec::new();
    table.for_each_row(|record, line| {
        let stamp = &record[timestamp];
        let ns = parse_timestamp_ns(stamp).map_err(|problem| TraceError::BadField {
            file: file.to_owned(),
            line,
            field: "TIMESTAMP".to_owned(),
            value: stamp.to_owned(),
            problem: problem.to_owned(),
        })?;
        requests.push(TraceRequest {
            arrival_us: clock.push(ns, line, stamp)?,
            input_tokens: parse_tokens(file, line, "ContextTokens", &record[context])?,
            output_tokens: parse_tokens(file, line, "GeneratedTokens", &record[generated])?,
            prefix_blocks: Vec::new(),
        });
        Ok(())
    })?;
    Ok(requests)
}

/// Nanoseconds since 1970-01-01 UTC of `YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z|±HH:MM]`.
/// A date-time without a zone is taken as UTC.
pub(super) fn parse_timestamp_ns(text: &str) -> Result<i128, &'static str> {
    const SHAPE: &str = "expected YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM]";
    let mut s = Scanner(text.as_bytes());
    let year = s.digits(4).ok_or(SHAPE)?;
    s.byte(b'-').ok_or(SHAPE)?;
    let month = s.digits(2).ok_or(SHAPE)?;
    s.byte(b'-').ok_or(SHAPE)?;
    let day = s.digits(2).ok_or(SHAPE)?;
    s.byte(b' ').or_else(|| s.byte(b'T')).ok_or(SHAPE)?;
    let hour = s.digits(2).ok_or(SHAPE)?;
    s.byte(b':').ok_or(SHAPE)?;
    let minute = s.digits(2).ok_or(SHAPE)?;
    s.byte(b':').ok_or(SHAPE)?;
    let second = s.digits(2).ok_or(SHAPE)?;
    let mut fraction_ns = 0;
    if s.byte(b'.').is_some() {
        let start = s.0.len();
        let mut scale = 100_000_000;
        while let Some(digit) = s.digits(1) {
            if scale == 0 {
                return Err("more than 9 fractional digits");
            }
            fraction_ns += digit * scale;
            scale /= 10;
        }
        if s.0.len() == start {
            return Err(SHAPE);
        }
    }
    let offset_s = match s.0.first() {
        None => 0,
        Some(b'Z') => {
            s.0 = &s.0[1..];
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            s.0 = &s.0[1..];
            let hours = s.digits(2).ok_or(SHAPE)?;
            s.byte(b':').ok_or(SHAPE)?;
            let minutes = s.digits(2).ok_or(SHAPE)?;
            if hours > 23 || minutes > 59 {
                return Err("time zone offset out of range");
            }
            let offset = hours * 3600 + minutes * 60;
            if sign == b'+' { offset } else { -offset }
        }
        Some(_) => return Err(SHAPE),
    };
    if !s.0.is_empty() {
        return Err(SHAPE);
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("no such date");
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day");
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Ok(i128::from(seconds) * 1_000_000_000 + i128::from(fraction_ns))
}

/// Reads fixed-width ASCII fields from the front of a byte string.
struct Scanner<'a>(&'a [u8]);

impl Scanner<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let field = self.0.get(..n)?;
        if !field.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.0 = &self.0[n..];
        Some(
            field
                .iter()
                .fold(0, |acc, d| acc * 10 + i64::from(d - b'0')),
        )
    }

    fn byte(&mut self, b: u8) -> Option<()> {
        let (&first, rest) = self.0.split_first()?;
        (first == b).then(|| self.0 = rest)
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
