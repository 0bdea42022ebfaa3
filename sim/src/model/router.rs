//! Spreading requests over Attention DP engines: vLLM's internal load balancer (afd-spec §7.2).
//!
//! One API-server client per engine (`api_server_count = DP`); the kernel spreads connections over
//! them (SO_REUSEPORT). Each client picks the engine with the least `4·waiting + running` in its own
//! view, scanning from its start index (ties go to the first in scan order), then optimistically
//! adds `client_count` to that engine's waiting count. The DP coordinator publishes the engines' real
//! counts about every 100 ms, which replaces every client's view. A request never migrates.

/// Period of the coordinator's stats publication.
pub const STATS_PERIOD_MS: u64 = 100;

/// The load-balancing state of all API-server clients.
#[derive(Clone, Debug)]
pub struct DpRouter {
    /// `views[client][engine] = (waiting, running)` as that client believes.
    views: Vec<Vec<(u64, u64)>>,
    published: Vec<(u64, u64)>,
}

impl DpRouter {
    /// `engines` Attention DP engines and as many API-server clients.
    pub fn new(engines: u32) -> DpRouter {
        let n = engines.max(1) as usize;
        DpRouter {
            views: vec![vec![(0, 0); n]; n],
            published: vec![(0, 0); n],
        }
    }

    pub fn clients(&self) -> usize {
        self.views.len()
    }

    /// Engine chosen by `client` for a new request; updates that client's optimistic view.
    pub fn route(&mut self, client: usize) -> u32 {
        let n = self.published.len();
        let client_count = n as u64;
        let view = &mut self.views[client % n];
        let mut best = (u64::MAX, 0usize);
        for i in 0..n {
            let engine = (client + i) % n;
            let (waiting, running) = view[engine];
            let score = 4 * waiting + running;
            if score < best.0 {
                best = (score, engine);
            }
        }
        view[best.1].0 += client_count;
        u32::try_from(best.1).expect("engine count fits u32")
    }

    /// The coordinator publishes the engines' real `(waiting, running)`; returns whether it changed.
    pub fn publish(&mut self, counts: &[(u64, u64)]) -> bool {
        let changed = self.published.as_slice() != counts;
        self.published.copy_from_slice(counts);
        for view in &mut self.views {
            view.copy_from_slice(counts);
        }
        changed
    }
}

#[cfg(test)]
mod tests;
