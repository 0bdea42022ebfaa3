//! What one step's pipeline costs: per-op device times, host issue costs and the receive-wait curve,
//! priced by `pricing.rs` and swept by `run_step`.

/// A non-decreasing piecewise-linear function of how long a receiver waited, nanoseconds: zero
/// before its first point, constant after its last. At most [`WaitCurve::CAPACITY`] points, held
/// inline so pricing a step allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCurve {
    len: u8,
    points: [(u64, u64); WaitCurve::CAPACITY],
}

impl WaitCurve {
    pub const CAPACITY: usize = 4;

    /// Appends `(wait, value)`; waits must increase. Points beyond the capacity are dropped.
    pub fn push(&mut self, wait: u64, value: u64) {
        let len = self.len as usize;
        if len < Self::CAPACITY && (len == 0 || wait > self.points[len - 1].0) {
            self.points[len] = (wait, value);
            self.len += 1;
        }
    }

    /// The value after waiting `wait`.
    #[inline]
    pub fn at(&self, wait: u64) -> u64 {
        let points = &self.points[..self.len as usize];
        let Some(&(first_wait, first)) = points.first() else {
            return 0;
        };
        if wait <= first_wait {
            return if wait == first_wait { first } else { 0 };
        }
        for pair in points.windows(2) {
            let ((w0, v0), (w1, v1)) = (pair[0], pair[1]);
            if wait <= w1 {
                // Linear between the points, rounded half up, in integers (no libm call).
                let (dx, dw) = (wait - w0, w1 - w0);
                let step = |dv: u64| -> u64 {
                    // Nanosecond figures fit 64-bit products; wider only if they ever do not.
                    match dx.checked_mul(dv).and_then(|p| p.checked_mul(2)) {
                        Some(p) if p.checked_add(dw).is_some() => (p + dw) / (2 * dw),
                        _ => {
                            let (dx, dv, dw) = (u128::from(dx), u128::from(dv), u128::from(dw));
                            ((dx * dv * 2 + dw) / (2 * dw)) as u64
                        }
                    }
                };
                return if v1 >= v0 {
                    v0 + step(v1 - v0)
                } else {
                    v0 - step(v0 - v1)
                };
            }
        }
        points[points.len() - 1].1
    }
}

/// Host-side launch costs of a step, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCosts {
    /// Attention engine host time before the forward (scheduler, input preparation).
    pub step: u64,
    /// FFN loop host time after the control payload arrives.
    pub ffn_loop: u64,
    pub graph_launch: u64,
    /// Eager issue costs per op.
    pub attention_compute: u64,
    pub p2p: u64,
    pub collective: u64,
    pub ffn_compute: u64,
    /// Kernels of an Attention compute op and of an FFN compute op (the issue is spread over them).
    pub attention_kernels: u64,
    pub ffn_kernels: u64,
}

/// Device costs of one step, nanoseconds. Buffers are reused between steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepCosts {
    pub stages: usize,
    pub attention_graph: bool,
    pub ffn_graph: bool,
    /// `[stage][engine]` attention block (projections + attention kernels) per layer.
    pub attention_compute: [Vec<u64>; 2],
    /// `[stage][engine]` attention TP all-reduce per layer (0 without TP).
    pub attention_all_reduce: [Vec<u64>; 2],
    /// `[stage][attention rank]` A→F port occupancy and latency: the data arrives at the FFN
    /// `occupancy + latency` after the port is free and the send has started.
    pub send_occupancy: [Vec<u64>; 2],
    pub send_latency: [Vec<u64>; 2],
    /// `[stage][attention rank]` how long the A→F send holds the Attention rank's stream; also at
    /// least until its data has left the port.
    pub send_busy: [Vec<u64>; 2],
    /// `[stage][attention rank]` F→A hand-off: the rows arrive this long after the FFN's send starts.
    pub send_back: [Vec<u64>; 2],
    /// `[stage][attention rank]` how long that F→A send holds the FFN stream.
    pub send_back_busy: [Vec<u64>; 2],
    /// `[stage][attention rank]` how much later a receive of that rank's rows completes after its
    /// rank waited for them, by the wait (both directions).
    pub recv_extra: [Vec<WaitCurve>; 2],
    /// `[stage][attention rank]` the least time a receive of that rank's rows holds its stream (on
    /// the FFN and on the Attention rank) when the data is already there; it ends at
    /// `max(start + recv_busy, arrival)`.
    pub recv_busy: [Vec<u64>; 2],
    /// `[(layer * stages + stage) * ffn_ranks + f]` FFN compute before and after the dispatch.
    pub ffn_pre: Vec<u64>,
    pub ffn_post: Vec<u64>,
    /// `[layer * stages + stage]` collective times (dispatch; combine or all-reduce).
    pub ffn_collective_1: Vec<u64>,
    pub ffn_collective_2: Vec<u64>,
    /// `[engine]` LM head and sampling; empty when the step ends after the last layer (a forward
    /// pass as `afd-probe pipeline` times it).
    pub lm_head: Vec<u64>,
    /// Control payload transfer (two small sends).
    pub control: u64,
    pub host: HostCosts,
}
