//! The twin's stand-in for a tokenizer and a model: token counts of prompts and a deterministic text
//! generator.
//!
//! A token is a whitespace-separated word (a prompt given as token ids counts one per id), so a client can
//! build a prompt of exactly N tokens and re-count the generated text. Generation is greedy-like: at
//! temperature 0, or with a request `seed`, the output depends only on (prompt, seed, twin seed); otherwise
//! it also depends on a per-request draw. No language is modelled.

/// The generated vocabulary; every entry is one token (one word).
const VOCABULARY: &[&str] = &[
    "the",
    "city",
    "of",
    "neighborhoods",
    "and",
    "each",
    "one",
    "has",
    "its",
    "own",
    "character",
    "bridge",
    "fog",
    "hill",
    "bay",
    "street",
    "market",
    "harbor",
    "light",
    "river",
    "north",
    "south",
    "east",
    "west",
    "old",
    "new",
    "small",
    "large",
    "quiet",
    "busy",
    "green",
    "blue",
    "red",
    "golden",
    "stone",
    "glass",
    "garden",
    "tower",
    "park",
    "museum",
    "school",
    "library",
    "station",
    "train",
    "car",
    "ship",
    "boat",
    "plane",
    "road",
    "path",
    "morning",
    "evening",
    "night",
    "day",
    "week",
    "year",
    "people",
    "family",
    "friend",
    "teacher",
    "student",
    "worker",
    "artist",
    "music",
    "song",
    "story",
    "book",
    "letter",
    "word",
    "number",
    "answer",
    "question",
    "idea",
    "plan",
    "model",
    "system",
    "server",
    "engine",
    "token",
    "layer",
    "expert",
    "attention",
    "network",
    "signal",
    "value",
    "result",
    "step",
    "batch",
    "queue",
    "request",
    "response",
    "stream",
    "memory",
    "cache",
    "graph",
    "kernel",
    "device",
    "host",
    "port",
    "rank",
    "group",
    "world",
    "order",
    "time",
    "space",
    "field",
    "forest",
    "mountain",
    "valley",
    "island",
    "ocean",
    "cloud",
    "rain",
    "snow",
    "wind",
    "sun",
    "moon",
    "star",
    "fire",
    "water",
    "earth",
    "air",
    "bread",
    "coffee",
    "tea",
    "apple",
    "orange",
    "table",
    "chair",
    "window",
    "door",
    "room",
    "house",
    "home",
    "work",
    "game",
    "team",
    "is",
    "was",
    "will",
    "can",
    "may",
    "runs",
    "walks",
    "opens",
    "closes",
    "grows",
    "falls",
    "rises",
    "turns",
    "moves",
    "stays",
    "starts",
    "ends",
    "makes",
    "takes",
    "gives",
    "sees",
    "hears",
    "finds",
    "keeps",
    "holds",
    "brings",
    "sends",
    "reads",
    "writes",
    "builds",
    "counts",
    "a",
    "an",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "from",
    "to",
    "near",
    "under",
    "over",
    "after",
    "before",
    "during",
    "while",
    "because",
    "so",
    "but",
    "or",
    "yet",
    "very",
    "quite",
    "always",
    "often",
    "never",
    "again",
    "here",
    "there",
    "now",
    "then",
    "soon",
    "early",
    "late",
    "first",
    "last",
    "next",
    "every",
    "many",
    "few",
    "some",
    "all",
    "most",
    "more",
    "less",
    "bright",
    "dark",
    "warm",
    "cold",
    "fast",
    "slow",
    "long",
    "short",
    "high",
    "low",
    "deep",
    "wide",
    "narrow",
    "open",
    "closed",
    "simple",
    "clear",
    "true",
    "false",
];

/// Number of tokens in a text prompt: its whitespace-separated words.
pub fn count_tokens(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

/// FNV-1a over bytes: stable across platforms and releases, unlike `DefaultHasher`.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// SplitMix64 finaliser: spreads a 64-bit key over all bits.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Longest natural (end-of-sequence) length the generator draws; outputs without `ignore_eos` stop with
/// `finish_reason: "stop"` after a length drawn uniformly from `1..=EOS_LENGTH_MAX`.
pub const EOS_LENGTH_MAX: u32 = 1024;

/// Deterministic text for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generator {
    key: u64,
}

impl Generator {
    /// `prompt_key` identifies the prompt (see [`fingerprint`]); `sample_key` is 0 for greedy requests and
    /// a per-request value otherwise; `twin_seed` is the server's `--seed`.
    pub fn new(prompt_key: u64, sample_key: u64, twin_seed: u64) -> Generator {
        Generator {
            key: mix(prompt_key ^ mix(sample_key ^ mix(twin_seed))),
        }
    }

    /// The `index`-th generated token (0-based), with the leading space a detokenizer would produce.
    pub fn token(&self, index: u32) -> String {
        let word =
            VOCABULARY[(mix(self.key ^ u64::from(index)) % VOCABULARY.len() as u64) as usize];
        format!(" {word}")
    }

    /// Text of tokens `range`.
    pub fn text(&self, range: std::ops::Range<u32>) -> String {
        range.map(|i| self.token(i)).collect()
    }

    /// Where this request's end-of-sequence token would fall: `1..=EOS_LENGTH_MAX`.
    pub fn natural_length(&self) -> u32 {
        let draw = mix(self.key ^ 0x656f_735f_6c65_6e67) % u64::from(EOS_LENGTH_MAX);
        u32::try_from(draw).expect("below EOS_LENGTH_MAX") + 1
    }
}

#[cfg(test)]
mod tests;
