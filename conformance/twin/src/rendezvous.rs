//! How the two twins find each other: a TCP rendezvous on the AFD host and port (and, under rule set
//! `v0.26`, the subgroup ports `port + k + 1`, afd-spec §2.3), either start order, with the AFD
//! configurations exchanged and compared, then one step message per Attention step (the stand-in for the
//! §3.4 control payload) answered by an acknowledgement from the FFN twin.
//!
//! As in the plugin, the FFN side (world rank 0) hosts the store: it listens on every rendezvous port for
//! its whole life. An Attention twin that starts first and finds nothing listening listens on the base
//! port itself (a provisional host) so that a second Attention twin is caught as a role clash at once; when
//! the FFN twin arrives, the two compare configurations and the Attention hands the port over.
//!
//! Wire format: one JSON object per line (`type` = hello, verdict, paired, handover, busy, join, joined,
//! step, ack, bye), at most [`MAX_LINE_BYTES`] per line. Nothing here serves HTTP.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use afd_sim::topology::{Role, Topology};

use crate::launch::judge_pair;

mod config;

pub use config::{Mismatch, PeerConfig, compare};

/// Version of this wire format; a peer speaking another version is a mismatch.
pub const PROTOCOL_VERSION: u64 = 1;
/// Longest line either side reads; longer input is a protocol error, not an allocation.
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// How long one handshake message may take once connected.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between connection attempts while the peer is not there yet.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Why the rendezvous did not produce a pair.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    #[error(
        "no {peer} twin joined the AFD rendezvous on {addr} within {waited_s:.0} s (--rendezvous-timeout; the plugin waits 2 minutes, afd-spec §2.3)"
    )]
    Timeout {
        addr: String,
        peer: Role,
        waited_s: f64,
    },
    #[error("AFD configuration mismatch with the peer at {addr}: {}", list(.mismatches, .violations))]
    Mismatch {
        addr: String,
        mismatches: Vec<Mismatch>,
        /// `afd-sim check` errors of the pair, rendered.
        violations: Vec<String>,
    },
    #[error(
        "the rendezvous host at {addr} is already paired with another attention twin; stop it or use another afd.port"
    )]
    Busy { addr: String },
    #[error("cannot listen on rendezvous port {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("rendezvous with {addr}: {message}")]
    Protocol { addr: String, message: String },
}

fn list(mismatches: &[Mismatch], violations: &[String]) -> String {
    mismatches
        .iter()
        .map(ToString::to_string)
        .chain(violations.iter().cloned())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Knobs of one rendezvous.
#[derive(Clone, Copy, Debug)]
pub struct RendezvousOptions {
    /// Longest wait for the peer, from the call.
    pub timeout: Duration,
    /// `rendezvous-mismatch-accepted`: neither report nor honour a mismatch.
    pub accept_mismatch: bool,
}

/// A line-oriented JSON connection.
#[derive(Debug)]
struct Wire {
    addr: String,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Wire {
    fn new(stream: TcpStream, addr: String) -> Wire {
        // Step messages are tiny and latency-bound; Nagle would hold them back.
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        Wire {
            addr,
            reader: BufReader::new(read),
            writer: write,
        }
    }

    fn protocol(&self, message: impl Into<String>) -> RendezvousError {
        RendezvousError::Protocol {
            addr: self.addr.clone(),
            message: message.into(),
        }
    }

    async fn send(&mut self, value: &Value) -> std::io::Result<()> {
        let mut line = value.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await
    }

    /// The next message; `Ok(None)` on a clean end of stream.
    async fn recv(&mut self) -> std::io::Result<Option<Value>> {
        let mut line = Vec::new();
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return if line.is_empty() {
                    Ok(None)
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "connection closed inside a message",
                    ))
                };
            }
            let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
                Some(end) => (&buffer[..end], Some(end + 1)),
                None => (buffer, None),
            };
            line.extend_from_slice(chunk);
            let used = done.unwrap_or(buffer.len());
            self.reader.consume(used);
            if line.len() > MAX_LINE_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("message longer than {MAX_LINE_BYTES} bytes"),
                ));
            }
            if done.is_some() {
                return serde_json::from_slice(&line).map(Some).map_err(|err| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, err.to_string())
                });
            }
        }
    }

    /// The next message within [`MESSAGE_TIMEOUT`], as a protocol error otherwise.
    async fn expect(&mut self, what: &str) -> Result<Value, RendezvousError> {
        match timeout(MESSAGE_TIMEOUT, self.recv()).await {
            Err(_) => Err(self.protocol(format!("timed out waiting for {what}"))),
            Ok(Err(err)) => Err(self.protocol(format!("reading {what}: {err}"))),
            Ok(Ok(None)) => Err(self.protocol(format!("peer closed the connection before {what}"))),
            Ok(Ok(Some(value))) => Ok(value),
        }
    }

    async fn send_or_fail(&mut self, value: &Value) -> Result<(), RendezvousError> {
        let result = self.send(value).await;
        result.map_err(|err| self.protocol(format!("sending: {err}")))
    }
}

fn kind(value: &Value) -> &str {
    value.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Exchanges hellos and verdicts over a fresh connection. `we_speak_first` is the connecting side.
async fn handshake(
    wire: &mut Wire,
    local: &PeerConfig,
    options: RendezvousOptions,
    we_speak_first: bool,
    first: Option<Value>,
) -> Result<PeerConfig, RendezvousError> {
    let peer_hello = if we_speak_first {
        wire.send_or_fail(&local.to_json()).await?;
        let reply = wire.expect("the peer's hello").await?;
        if kind(&reply) == "busy" {
            return Err(RendezvousError::Busy {
                addr: wire.addr.clone(),
            });
        }
        reply
    } else {
        let hello = match first {
            Some(hello) => hello,
            None => wire.expect("the peer's hello").await?,
        };
        wire.send_or_fail(&local.to_json()).await?;
        hello
    };
    if kind(&peer_hello) != "hello" {
        return Err(wire.protocol(format!("expected a hello, got {peer_hello}")));
    }
    let peer = PeerConfig::from_json(&peer_hello).map_err(|m| wire.protocol(m))?;
    let mismatches = compare(local, &peer);
    // The fields the protocol compares come first; when they agree, the pair gets `afd-sim check`.
    let violations = if mismatches.is_empty() {
        judge_pair(
            (&local.args, &local.env),
            (&peer.args, &peer.env),
            local.rules,
        )
        .0
    } else {
        Vec::new()
    };
    let ours_ok = options.accept_mismatch || (mismatches.is_empty() && violations.is_empty());
    let mut fields: Vec<&str> = mismatches.iter().map(|m| m.field).collect();
    if !violations.is_empty() {
        fields.push("afd-sim check");
    }
    wire.send_or_fail(&json!({"type": "verdict", "ok": ours_ok, "fields": fields}))
        .await?;
    let verdict = wire.expect("the peer's verdict").await?;
    let theirs_ok = verdict.get("ok").and_then(Value::as_bool).unwrap_or(false);
    if options.accept_mismatch || (ours_ok && theirs_ok) {
        return Ok(peer);
    }
    let mut mismatches = mismatches;
    if mismatches.is_empty() && violations.is_empty() {
        // The peer saw a difference we do not (it may compare more); report the fields it named.
        let named = verdict
            .get("fields")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        return Err(wire.protocol(format!("the peer refused the pairing (fields: {named})")));
    }
    mismatches.sort_by_key(|m| m.field != "role");
    Err(RendezvousError::Mismatch {
        addr: wire.addr.clone(),
        mismatches,
        violations,
    })
}

/// The Attention twin's end of a formed pair.
#[derive(Debug)]
pub struct AttentionLink {
    pub peer: PeerConfig,
    wire: Wire,
}

/// The FFN twin's end of a formed pair; its rendezvous listeners stay open while it lives.
#[derive(Debug)]
pub struct FfnLink {
    pub peer: PeerConfig,
    wire: Wire,
    listeners: Vec<JoinHandle<()>>,
}

impl Drop for FfnLink {
    fn drop(&mut self) {
        for task in &self.listeners {
            task.abort();
        }
    }
}

/// One step as the Attention twin announces it to the FFN twin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepMessage {
    pub step: u64,
    /// 1 or 2 (DBO ubatches).
    pub stages: u32,
    /// Tokens per Attention DP engine (`num_tokens_across_dp_cpu`, afd-spec §3.4).
    pub tokens: Vec<u32>,
    /// Real time left until the step's deadline when the message was sent (its simulated duration
    /// times `--time-scale`); the FFN twin's `slow-ffn-step` fault answers this much later plus its delay.
    pub duration: Duration,
}

/// Why a formed pair came apart.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the peer twin at {addr} went away: {reason}")]
    Gone { addr: String, reason: String },
}

impl AttentionLink {
    /// Sends a step's control message.
    pub async fn send_step(&mut self, message: &StepMessage) -> Result<(), LinkError> {
        let value = json!({
            "type": "step",
            "step": message.step,
            "stages": message.stages,
            "tokens": message.tokens,
            "duration_ns": u64::try_from(message.duration.as_nanos()).unwrap_or(u64::MAX),
        });
        let result = self.wire.send(&value).await;
        result.map_err(|err| self.gone(err.to_string()))
    }

    /// Waits for the FFN twin's acknowledgement of `step`.
    pub async fn await_ack(&mut self, step: u64) -> Result<(), LinkError> {
        match self.wire.recv().await {
            Ok(Some(value))
                if kind(&value) == "ack"
                    && value.get("step").and_then(Value::as_u64) == Some(step) =>
            {
                Ok(())
            }
            Ok(Some(value)) => Err(self.gone(format!("expected ack of step {step}, got {value}"))),
            Ok(None) => Err(self.gone("connection closed".to_owned())),
            Err(err) => Err(self.gone(err.to_string())),
        }
    }

    /// Resolves when the FFN side closes the connection or sends anything unsolicited (a `bye`).
    /// Cancel-safe: it only peeks.
    pub async fn closed(&mut self) -> LinkError {
        match self.wire.reader.fill_buf().await {
            Ok([]) => self.gone("connection closed".to_owned()),
            Ok(_) => self.gone("the FFN twin said goodbye".to_owned()),
            Err(err) => self.gone(err.to_string()),
        }
    }

    /// Tells the FFN twin the pair is shutting down.
    pub async fn bye(self, reason: &str) {
        self.close("bye", reason).await;
    }

    /// Tells the FFN twin the Attention twin cannot serve this pair after all (it found out after the
    /// rendezvous, as vLLM sizes its KV cache after the AFD connector is up).
    pub async fn abort(self, reason: &str) {
        self.close("abort", reason).await;
    }

    async fn close(mut self, kind: &str, reason: &str) {
        let _ = self
            .wire
            .send(&json!({"type": kind, "reason": reason}))
            .await;
        let _ = self.wire.writer.shutdown().await;
    }

    fn gone(&self, reason: String) -> LinkError {
        LinkError::Gone {
            addr: self.wire.addr.clone(),
            reason,
        }
    }
}

/// What the FFN twin's link delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FfnEvent {
    Step(StepMessage),
    /// The Attention twin shut down cleanly.
    Bye(String),
    /// The Attention twin refused to serve this pair, for the reason given.
    Abort(String),
}

impl FfnLink {
    /// The next message from the Attention twin.
    pub async fn next(&mut self) -> Result<FfnEvent, LinkError> {
        let value = match self.wire.recv().await {
            Ok(Some(value)) => value,
            Ok(None) => return Err(self.gone("connection closed".to_owned())),
            Err(err) => return Err(self.gone(err.to_string())),
        };
        match kind(&value) {
            "step" => {
                let step = value.get("step").and_then(Value::as_u64);
                let stages = value
                    .get("stages")
                    .and_then(Value::as_u64)
                    .and_then(|s| u32::try_from(s).ok());
                let tokens = value.get("tokens").and_then(Value::as_array).and_then(|t| {
                    t.iter()
                        .map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()))
                        .collect::<Option<Vec<_>>>()
                });
                // Absent from a peer that does not time its steps: no duration.
                let duration = match value.get("duration_ns") {
                    None => Some(Duration::ZERO),
                    Some(ns) => ns.as_u64().map(Duration::from_nanos),
                };
                match (step, stages, tokens, duration) {
                    (Some(step), Some(stages), Some(tokens), Some(duration)) => {
                        Ok(FfnEvent::Step(StepMessage {
                            step,
                            stages,
                            tokens,
                            duration,
                        }))
                    }
                    _ => Err(self.gone(format!("malformed step message {value}"))),
                }
            }
            kind @ ("bye" | "abort") => {
                let reason = value
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Ok(if kind == "bye" {
                    FfnEvent::Bye(reason)
                } else {
                    FfnEvent::Abort(reason)
                })
            }
            _ => Err(self.gone(format!("unexpected message {value}"))),
        }
    }

    pub async fn ack(&mut self, step: u64) -> Result<(), LinkError> {
        let result = self.wire.send(&json!({"type": "ack", "step": step})).await;
        result.map_err(|err| self.gone(err.to_string()))
    }

    fn gone(&self, reason: String) -> LinkError {
        LinkError::Gone {
            addr: self.wire.addr.clone(),
            reason,
        }
    }
}

fn base_addr(local: &PeerConfig) -> String {
    format!("{}:{}", local.afd_host, local.afd_port)
}

async fn resolve(addr: &str) -> Option<SocketAddr> {
    tokio::net::lookup_host(addr).await.ok()?.next()
}

/// Binds a listener without `SO_REUSEPORT`, so a second binder gets `AddrInUse`.
async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let Some(socket_addr) = resolve(addr).await else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("cannot resolve {addr}"),
        ));
    };
    TcpListener::bind(socket_addr).await
}

/// The Attention side: connects to the FFN twin (or hosts provisionally until it arrives), compares
/// configurations, then joins the subgroup stores under `v0.26`.
pub async fn attention(
    local: &PeerConfig,
    topology: &Topology,
    options: RendezvousOptions,
) -> Result<AttentionLink, RendezvousError> {
    let addr = base_addr(local);
    let deadline = Instant::now() + options.timeout;
    let timed_out = || RendezvousError::Timeout {
        addr: addr.clone(),
        peer: Role::Ffn,
        waited_s: options.timeout.as_secs_f64(),
    };
    // Once the port was handed to the FFN twin, hosting again would take it back from it.
    let mut may_host = true;
    loop {
        if Instant::now() >= deadline {
            return Err(timed_out());
        }
        match TcpStream::connect(&addr).await {
            Ok(stream) => {
                let mut wire = Wire::new(stream, addr.clone());
                match handshake(&mut wire, local, options, true, None).await {
                    Ok(peer) => {
                        let next = wire.expect("the host's pairing message").await?;
                        match kind(&next) {
                            "paired" => {
                                join_subgroups(local, topology, deadline).await?;
                                return Ok(AttentionLink { peer, wire });
                            }
                            other => {
                                return Err(wire.protocol(format!(
                                    "expected 'paired' from the FFN twin, got '{other}'"
                                )));
                            }
                        }
                    }
                    // A host that vanished mid-handshake is retried; anything it said is final.
                    Err(RendezvousError::Protocol { .. }) => tokio::time::sleep(RETRY_PAUSE).await,
                    Err(err) => return Err(err),
                }
            }
            Err(_) if !may_host => tokio::time::sleep(RETRY_PAUSE).await,
            Err(_) => match bind(&addr).await {
                Ok(listener) => {
                    may_host = !provisional_host(listener, local, options, deadline).await?;
                }
                Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
            },
        }
    }
}

/// Holds the base port for the FFN twin: a second Attention twin is a role clash; the FFN twin is told
/// to take the port over. Returns whether the port was handed over (false: the deadline passed).
async fn provisional_host(
    listener: TcpListener,
    local: &PeerConfig,
    options: RendezvousOptions,
    deadline: Instant,
) -> Result<bool, RendezvousError> {
    let addr = base_addr(local);
    loop {
        let accepted = tokio::time::timeout_at(deadline, listener.accept()).await;
        let Ok(Ok((stream, _))) = accepted else {
            // Deadline or a failed accept: let the caller decide (it checks the deadline).
            return Ok(false);
        };
        let mut wire = Wire::new(stream, addr.clone());
        let first = match timeout(MESSAGE_TIMEOUT, wire.recv()).await {
            Ok(Ok(Some(value))) if kind(&value) == "hello" => value,
            // A port probe or garbage: ignore it.
            _ => continue,
        };
        match handshake(&mut wire, local, options, false, Some(first)).await {
            Ok(peer) if peer.role == Role::Ffn => {
                wire.send_or_fail(&json!({"type": "handover"})).await?;
                drop(listener);
                return Ok(true);
            }
            Ok(_) => {
                // Only reachable with the mismatch fault: two Attention twins "agree". There is still no
                // FFN to host the store, so keep waiting for one.
                continue;
            }
            Err(RendezvousError::Protocol { .. }) => continue,
            Err(err) => return Err(err),
        }
    }
}

/// Under `v0.26`, each subgroup store on `port + k + 1` is joined (afd-spec §2.3).
async fn join_subgroups(
    local: &PeerConfig,
    topology: &Topology,
    deadline: Instant,
) -> Result<(), RendezvousError> {
    for k in 0..topology.ffn_ranks() {
        let Some(port) = topology.subgroup_port(k) else {
            continue;
        };
        let addr = format!("{}:{port}", local.afd_host);
        let stream = loop {
            match TcpStream::connect(&addr).await {
                Ok(stream) => break stream,
                Err(err) if Instant::now() >= deadline => {
                    return Err(RendezvousError::Protocol {
                        addr,
                        message: format!("subgroup {k} store is not listening: {err}"),
                    });
                }
                Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
            }
        };
        let mut wire = Wire::new(stream, addr.clone());
        wire.send_or_fail(&json!({"type": "join", "subgroup": k}))
            .await?;
        let reply = wire.expect("the subgroup store's reply").await?;
        if kind(&reply) != "joined"
            || reply.get("subgroup").and_then(Value::as_u64) != Some(u64::from(k))
        {
            return Err(wire.protocol(format!("subgroup {k} store answered {reply}")));
        }
    }
    Ok(())
}

/// The FFN side: hosts the rendezvous ports (taking the base port over from a provisional Attention host
/// if one holds it) and waits for the Attention twin.
pub async fn ffn(
    local: &PeerConfig,
    topology: &Topology,
    options: RendezvousOptions,
) -> Result<FfnLink, RendezvousError> {
    let addr = base_addr(local);
    let deadline = Instant::now() + options.timeout;
    let listener = loop {
        if Instant::now() >= deadline {
            return Err(RendezvousError::Timeout {
                addr: addr.clone(),
                peer: Role::Attention,
                waited_s: options.timeout.as_secs_f64(),
            });
        }
        match bind(&addr).await {
            Ok(listener) => break listener,
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse => {
                // Someone holds the port: an Attention twin hosting provisionally, or a clashing FFN twin.
                if let Ok(stream) = TcpStream::connect(&addr).await {
                    let mut wire = Wire::new(stream, addr.clone());
                    match handshake(&mut wire, local, options, true, None).await {
                        Ok(_) => {
                            if let Ok(next) = wire.expect("the provisional host's handover").await {
                                if kind(&next) != "handover" {
                                    return Err(
                                        wire.protocol(format!("expected 'handover', got {next}"))
                                    );
                                }
                                // The port is free now (or about to be): take it without pausing.
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                continue;
                            }
                        }
                        Err(RendezvousError::Protocol { .. })
                        | Err(RendezvousError::Busy { .. }) => {}
                        Err(err) => return Err(err),
                    }
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(source) => return Err(RendezvousError::Bind { addr, source }),
        }
    };
    let mut listeners = Vec::new();
    for k in 0..topology.ffn_ranks() {
        let Some(port) = topology.subgroup_port(k) else {
            continue;
        };
        let sub_addr = format!("{}:{port}", local.afd_host);
        let sub = bind(&sub_addr)
            .await
            .map_err(|source| RendezvousError::Bind {
                addr: sub_addr.clone(),
                source,
            })?;
        listeners.push(tokio::spawn(serve_subgroup_store(sub, k)));
    }
    loop {
        let accepted = tokio::time::timeout_at(deadline, listener.accept()).await;
        let stream = match accepted {
            Err(_) => {
                return Err(RendezvousError::Timeout {
                    addr,
                    peer: Role::Attention,
                    waited_s: options.timeout.as_secs_f64(),
                });
            }
            Ok(Err(_)) => continue,
            Ok(Ok((stream, _))) => stream,
        };
        let mut wire = Wire::new(stream, addr.clone());
        let first = match timeout(MESSAGE_TIMEOUT, wire.recv()).await {
            Ok(Ok(Some(value))) if kind(&value) == "hello" => value,
            _ => continue,
        };
        match handshake(&mut wire, local, options, false, Some(first)).await {
            Ok(peer) if peer.role == Role::Attention || options.accept_mismatch => {
                wire.send_or_fail(&json!({"type": "paired"})).await?;
                listeners.push(tokio::spawn(turn_away(listener, peer.role)));
                return Ok(FfnLink {
                    peer,
                    wire,
                    listeners,
                });
            }
            Ok(_) | Err(RendezvousError::Protocol { .. }) => continue,
            Err(err) => return Err(err),
        }
    }
}

/// After pairing, the base port keeps listening (the store lives as long as the world group): hellos
/// are answered `busy`, anything else is closed.
async fn turn_away(listener: TcpListener, peer_role: Role) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut wire = Wire::new(stream, String::new());
            if let Ok(Ok(Some(value))) = timeout(MESSAGE_TIMEOUT, wire.recv()).await
                && kind(&value) == "hello"
            {
                let _ = wire
                    .send(&json!({"type": "busy", "paired_with": peer_role.as_str()}))
                    .await;
            }
        });
    }
}

/// A subgroup store under `v0.26`: answers joins for its own subgroup.
async fn serve_subgroup_store(listener: TcpListener, subgroup: u32) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut wire = Wire::new(stream, String::new());
            if let Ok(Ok(Some(value))) = timeout(MESSAGE_TIMEOUT, wire.recv()).await {
                let asked = value.get("subgroup").and_then(Value::as_u64);
                if kind(&value) == "join" && asked == Some(u64::from(subgroup)) {
                    let _ = wire
                        .send(&json!({"type": "joined", "subgroup": subgroup}))
                        .await;
                }
            }
        });
    }
}

#[cfg(test)]
pub(crate) mod tests;
