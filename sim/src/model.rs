//! The AFD timing model: what is served (architecture), on what (hardware, costs), to whom
//! (workload), and how each Attention DP engine schedules it (router, scheduler, KV cache).
//!
//! Everything here is a pure function or a small state machine driven by the engine; none of it
//! schedules events or reads a clock.

pub mod arch;
pub mod cost;
pub mod engine;
pub mod hardware;
pub mod kv_cache;
pub mod limits;
pub mod link;
pub mod profiles;
pub mod router;
pub mod routing;
pub mod scheduler;
pub mod workload;
