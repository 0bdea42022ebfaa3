//! Token-count CSV: `num_prefill_tokens,num_decode_tokens[,num_total_tokens][,pd_ratio][,arrived_at]`.
//!
//! The Sarathi-Serve ShareGPT and Vidur arXiv sets have no arrivals: every request arrives at 0
//! and the caller draws an arrival process. Vidur's request traces add `arrived_at` (seconds from
//! the start); when that column is present the trace has arrivals. `num_total_tokens`, when
//! present, must equal the sum of the other two (it does in both shipped files), which catches
//! shifted or swapped columns. Other columns (`pd_ratio`) are ignored.

use super::{ArrivalClock, CsvTable, TraceError, TraceRequest, parse_seconds_ns, parse_tokens};

/// Requests and whether the file had an `arrived_at` column.
pub(super) fn read(text: &str, file: &str) -> Result<(Vec<TraceRequest>, bool), TraceError> {
    let table = CsvTable::new(text, file)?;
    let prefill = table.column("num_prefill_tokens")?;
    let decode = table.column("num_decode_tokens")?;
    let total = table.optional_column("num_total_tokens");
    let arrived_at = table.optional_column("arrived_at");
    let mut clock = ArrivalClock::new(file);
    let mut requests = Vec::new();
    table.for_each_row(|record, line| {
        let input_tokens = parse_tokens(file, line, "num_prefill_tokens", &record[prefill])?;
        let output_tokens = parse_tokens(file, line, "num_decode_tokens", &record[decode])?;
        if let Some(total) = total {
            let value = &record[total];
            let sum = u64::from(input_tokens) + u64::from(output_tokens);
            if value.parse::<u64>().ok() != Some(sum) {
                return Err(TraceError::BadField {
                    file: file.to_owned(),
                    line,
                    field: "num_total_tokens".to_owned(),
                    value: value.to_owned(),
                    problem: format!("expected num_prefill_tokens + num_decode_tokens = {sum}"),
                });
            }
        }
        let arrival_us = match arrived_at {
            Some(column) => {
                let value = &record[column];
                clock.push(
                    parse_seconds_ns(file, line, "arrived_at", value)?,
                    line,
                    value,
                )?
            }
            None => 0,
        };
        requests.push(TraceRequest {
            arrival_us,
            input_tokens,
            output_tokens,
            prefix_blocks: Vec::new(),
        });
        Ok(())
    })?;
    Ok((requests, arrived_at.is_some()))
}
