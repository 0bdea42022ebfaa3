//! Where the engine core's main thread and the host's CPUs spent a workload, from Linux's /proc:
//! the thread's scheduler statistics (`/proc/PID/task/PID/schedstat`: nanoseconds on a CPU, then
//! nanoseconds runnable but waiting for one) and every CPU's time by state (`/proc/stat`'s first
//! line, in clock ticks), read at the workload's start and end. Nothing is read where /proc is not
//! (the record then carries no `host`).

use std::time::Instant;

use afd_traces::vllm_run::HostShare;

/// One reading.
pub struct Reading {
    at: Instant,
    pid: u32,
    /// `(on a CPU, waiting for one)`, nanoseconds.
    thread: Option<(u64, u64)>,
    /// `(steal, busy)`, clock ticks summed over the CPUs.
    cpus: Option<(u64, u64)>,
}

impl Reading {
    /// Reads `pid`'s main thread and the host's CPUs now.
    pub fn take(pid: u32) -> Reading {
        let read = |path: String| std::fs::read_to_string(path).ok();
        Reading {
            at: Instant::now(),
            pid,
            thread: read(format!("/proc/{pid}/task/{pid}/schedstat")).and_then(|t| schedstat(&t)),
            cpus: read("/proc/stat".to_owned()).and_then(|t| cpu_line(&t)),
        }
    }

    /// The same pid read again now.
    pub fn again(&self) -> Reading {
        Reading::take(self.pid)
    }

    /// What happened between `self` and a later reading of the same pid; `None` when either
    /// reading lacks a part (the engine core gone, no /proc) or a counter went backwards.
    pub fn share_until(&self, later: &Reading) -> Option<HostShare> {
        if self.pid != later.pid {
            return None;
        }
        let (run0, wait0) = self.thread?;
        let (run1, wait1) = later.thread?;
        let (steal0, busy0) = self.cpus?;
        let (steal1, busy1) = later.cpus?;
        let tick_s = 1.0 / rustix::param::clock_ticks_per_second() as f64;
        let ns = |a: u64, b: u64| Some(b.checked_sub(a)? as f64 * 1e-9);
        let ticks = |a: u64, b: u64| Some(b.checked_sub(a)? as f64 * tick_s);
        Some(HostShare {
            engine_core_pid: self.pid,
            wall_s: later.at.duration_since(self.at).as_secs_f64(),
            engine_core_on_cpu_s: ns(run0, run1)?,
            engine_core_waited_s: ns(wait0, wait1)?,
            steal_s: ticks(steal0, steal1)?,
            busy_s: ticks(busy0, busy1)?,
        })
    }
}

/// `schedstat`'s first two fields: nanoseconds on a CPU and waiting for one.
pub fn schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// `/proc/stat`'s `cpu` line (every CPU summed): `(steal, user + nice + system + irq + softirq)`
/// in clock ticks. Its fields are user, nice, system, idle, iowait, irq, softirq, steal, ...
pub fn cpu_line(text: &str) -> Option<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (v.len() == 8).then(|| (v[7], v[0] + v[1] + v[2] + v[5] + v[6]))
}
