//! Timelines of a simulated run in the Chrome trace-event JSON format, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open: one process per role, one thread (track) per
//! Attention rank, FFN rank and link, complete (`"ph": "X"`) events in microseconds.
//!
//! `otherData` carries this format's tag and schema version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Schema version of `otherData`.
pub const TIMELINE_SCHEMA_VERSION: u32 = 1;

/// The `otherData.format` tag.
pub const TIMELINE_FORMAT: &str = "afd-sim-timeline";

/// A whole trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChromeTrace {
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<TraceEvent>,
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: String,
    #[serde(rename = "otherData")]
    pub other_data: BTreeMap<String, String>,
}

/// One trace event: a complete span (`X`) or a metadata record (`M`, naming a process or thread).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cat: String,
    pub ph: String,
    /// Start, microseconds.
    pub ts: f64,
    /// Duration, microseconds (complete events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    pub pid: u32,
    pub tid: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, String>,
}

impl ChromeTrace {
    /// An empty trace covering `[start_us, end_us]`.
    pub fn new(start_us: f64, end_us: f64) -> ChromeTrace {
        ChromeTrace {
            trace_events: Vec::new(),
            display_time_unit: "ns".to_owned(),
            other_data: BTreeMap::from([
                ("format".to_owned(), TIMELINE_FORMAT.to_owned()),
                (
                    "schema_version".to_owned(),
                    TIMELINE_SCHEMA_VERSION.to_string(),
                ),
                ("window_start_us".to_owned(), format!("{start_us}")),
                ("window_end_us".to_owned(), format!("{end_us}")),
            ]),
        }
    }

    /// Names a process (role) and a thread (track) of it.
    pub fn name_track(&mut self, pid: u32, process: &str, tid: u32, track: &str) {
        for (kind, value, thread) in [("process_name", process, 0), ("thread_name", track, tid)] {
            self.trace_events.push(TraceEvent {
                name: kind.to_owned(),
                cat: String::new(),
                ph: "M".to_owned(),
                ts: 0.0,
                dur: None,
                pid,
                tid: thread,
                args: BTreeMap::from([("name".to_owned(), value.to_owned())]),
            });
        }
    }

    /// Adds a complete span over `(start, duration)` microseconds.
    pub fn span(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        cat: &str,
        interval_us: (f64, f64),
        args: BTreeMap<String, String>,
    ) {
        self.trace_events.push(TraceEvent {
            name: name.to_owned(),
            cat: cat.to_owned(),
            ph: "X".to_owned(),
            ts: interval_us.0,
            dur: Some(interval_us.1),
            pid,
            tid,
            args,
        });
    }

    /// Compact JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string(self).expect("traces hold only plain data");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests;
