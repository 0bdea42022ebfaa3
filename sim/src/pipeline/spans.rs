//! Timeline spans of a step's pipeline, recorded for `--timeline` within a window.

/// Where a timeline span happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Track {
    Attention(usize),
    Ffn(usize),
    /// A→F link of an Attention rank.
    LinkToFfn(usize),
    /// F→A link of an Attention rank.
    LinkToAttention(usize),
}

/// What a span was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Control,
    AttentionCompute,
    AttentionAllReduce,
    Send,
    Recv,
    FfnRecv,
    FfnCompute,
    FfnCollective,
    FfnSend,
    LmHead,
}

/// One operation on a track, nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub track: Track,
    pub kind: SpanKind,
    pub layer: u32,
    pub stage: u32,
    pub start: u64,
    pub end: u64,
}

/// Collects spans that intersect a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanSink {
    pub window: (u64, u64),
    pub spans: Vec<Span>,
}

impl SpanSink {
    pub(super) fn push(&mut self, span: Span) {
        if span.end >= self.window.0 && span.start <= self.window.1 {
            self.spans.push(span);
        }
    }
}
