//! How the ranks of a multi-GPU probe find each other, outside NCCL.
//!
//! Ranks are threads of one process (the default on one machine) or processes started by a launcher that
//! sets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT` (torchrun and Slurm
//! conventions). Either way rank 0 listens on TCP, every other rank connects, and rank 0 hands out the
//! 128-byte NCCL unique id. The connections stay open so that rank 0 can gather each rank's results at
//! the end. Nothing here touches a GPU.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Bytes of an NCCL unique id.
pub const ID_BYTES: usize = 128;

const MAGIC: &[u8; 8] = b"AFDPROBE";
const PROTOCOL_VERSION: u32 = 1;
/// The largest result blob a rank may send (guards against reading garbage lengths).
const MAX_BLOB_BYTES: u64 = 1 << 30;

/// Launcher variables of a multi-process run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LauncherEnv {
    pub rank: usize,
    pub world_size: usize,
    /// The GPU this process drives.
    pub local_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
}

/// Why ranks could not meet or talk.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    #[error("launcher variable {name}={value:?} is invalid: {problem}")]
    BadVariable {
        name: &'static str,
        value: String,
        problem: String,
    },
    #[error("launcher variables are incomplete: {present} is set but {missing} is not")]
    Incomplete {
        present: &'static str,
        missing: &'static str,
    },
    #[error("rendezvous at {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("rendezvous at {addr} timed out after {seconds} s waiting for {waiting_for}")]
    Timeout {
        addr: String,
        seconds: u64,
        waiting_for: String,
    },
    #[error("rendezvous at {addr}: {problem}")]
    Protocol { addr: String, problem: String },
}

const VARIABLES: [&str; 5] = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
];

impl LauncherEnv {
    /// Reads the launcher variables through `get`; `Ok(None)` when none is set.
    pub fn from_vars(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<LauncherEnv>, RendezvousError> {
        let values: Vec<Option<String>> = VARIABLES.iter().map(|name| get(name)).collect();
        let Some(present) = VARIABLES
            .iter()
            .zip(&values)
            .find(|(_, v)| v.is_some())
            .map(|(name, _)| *name)
        else {
            return Ok(None);
        };
        if let Some((missing, _)) = VARIABLES.iter().zip(&values).find(|(_, v)| v.is_none()) {
            return Err(RendezvousError::Incomplete { present, missing });
        }
        let value = |i: usize| values[i].clone().expect("checked above");
        let number = |i: usize, max: usize| -> Result<usize, RendezvousError> {
            let text = value(i);
            text.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or(RendezvousError::BadVariable {
                    name: VARIABLES[i],
                    value: text,
                    problem: format!("expected an integer in 0..={max}"),
                })
        };
        let world_size = number(1, 4096)?;
        if world_size == 0 {
            return Err(RendezvousError::BadVariable {
                name: "WORLD_SIZE",
                value: value(1),
                problem: "must be at least 1".to_owned(),
            });
        }
        let rank = number(0, 4096)?;
        if rank >= world_size {
            return Err(RendezvousError::BadVariable {
                name: "RANK",
                value: value(0),
                problem: format!("must be below WORLD_SIZE {world_size}"),
            });
        }
        let local_rank = number(2, 1024)?;
        let master_addr = value(3).trim().to_owned();
        if master_addr.is_empty() {
            return Err(RendezvousError::BadVariable {
                name: "MASTER_ADDR",
                value: value(3),
                problem: "must name a host".to_owned(),
            });
        }
        let master_port = u16::try_from(number(4, 65535)?)
            .ok()
            .filter(|port| *port != 0)
            .ok_or(RendezvousError::BadVariable {
                name: "MASTER_PORT",
                value: value(4),
                problem: "expected a port in 1..=65535".to_owned(),
            })?;
        Ok(Some(LauncherEnv {
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
        }))
    }

    /// Reads the launcher variables of this process.
    pub fn from_process() -> Result<Option<LauncherEnv>, RendezvousError> {
        LauncherEnv::from_vars(|name| std::env::var(name).ok())
    }
}

/// Rank 0's side: the listener before the id is known.
pub struct RootListener {
    listener: TcpListener,
    addr: String,
}

/// An open out-of-band link between one rank and rank 0.
pub enum Link {
    /// Rank 0 holds one stream per other rank, in rank order (rank 1 first).
    Root { peers: Vec<TcpStream>, addr: String },
    /// Any other rank holds its stream to rank 0.
    Peer {
        root: TcpStream,
        rank: usize,
        addr: String,
    },
    /// A world of one rank.
    Alone,
}

impl RootListener {
    /// Binds rank 0's listener (`127.0.0.1:0` picks a free port for in-process ranks).
    pub fn bind(addr: &str) -> Result<RootListener, RendezvousError> {
        let listener = TcpListener::bind(addr).map_err(|source| RendezvousError::Io {
            addr: addr.to_owned(),
            source,
        })?;
        let local = listener
            .local_addr()
            .map_err(|source| RendezvousError::Io {
                addr: addr.to_owned(),
                source,
            })?;
        Ok(RootListener {
            listener,
            addr: local.to_string(),
        })
    }

    /// The address other ranks connect to.
    pub fn local_addr(&self) -> &str {
        &self.addr
    }

    /// Accepts the other `world_size - 1` ranks and sends each the id.
    pub fn serve(
        self,
        world_size: usize,
        id: &[u8; ID_BYTES],
        timeout: Duration,
    ) -> Result<Link, RendezvousError> {
        if world_size == 1 {
            return Ok(Link::Alone);
        }
        let addr = self.addr.clone();
        let io = |source| RendezvousError::Io {
            addr: addr.clone(),
            source,
        };
        let deadline = Instant::now() + timeout;
        self.listener.set_nonblocking(true).map_err(io)?;
        let mut peers: Vec<Option<TcpStream>> = (1..world_size).map(|_| None).collect();
        while peers.iter().any(Option::is_none) {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).map_err(io)?;
                    stream
                        .set_read_timeout(Some(Duration::from_secs(30)))
                        .map_err(io)?;
                    let mut hello = [0u8; 16];
                    stream.read_exact(&mut hello).map_err(io)?;
                    let (rank, world) =
                        parse_hello(&hello).ok_or_else(|| RendezvousError::Protocol {
                            addr: addr.clone(),
                            problem: "a connection did not speak the afd-probe rendezvous protocol"
                                .to_owned(),
                        })?;
                    if world != world_size {
                        return Err(RendezvousError::Protocol {
                            addr: addr.clone(),
                            problem: format!(
                                "rank {rank} says WORLD_SIZE={world}, rank 0 has {world_size}"
                            ),
                        });
                    }
                    if rank == 0 || rank >= world_size || peers[rank - 1].is_some() {
                        return Err(RendezvousError::Protocol {
                            addr: addr.clone(),
                            problem: format!("rank {rank} joined twice or is out of range"),
                        });
                    }
                    let mut reply = Vec::with_capacity(8 + ID_BYTES);
                    reply.extend_from_slice(MAGIC);
                    reply.extend_from_slice(id);
                    stream.write_all(&reply).map_err(io)?;
                    stream.set_read_timeout(None).map_err(io)?;
                    peers[rank - 1] = Some(stream);
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        let missing: Vec<String> = peers
                            .iter()
                            .enumerate()
                            .filter(|(_, p)| p.is_none())
                            .map(|(i, _)| (i + 1).to_string())
                            .collect();
                        return Err(RendezvousError::Timeout {
                            addr,
                            seconds: timeout.as_secs(),
                            waiting_for: format!("rank(s) {}", missing.join(", ")),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(err) => return Err(io(err)),
            }
        }
        Ok(Link::Root {
            peers: peers.into_iter().map(|p| p.expect("all joined")).collect(),
            addr,
        })
    }
}

/// Connects rank `rank` to rank 0 at `addr`, retrying until `timeout`, and returns the id.
pub fn join(
    addr: &str,
    rank: usize,
    world_size: usize,
    timeout: Duration,
) -> Result<([u8; ID_BYTES], Link), RendezvousError> {
    let deadline = Instant::now() + timeout;
    let io = |source| RendezvousError::Io {
        addr: addr.to_owned(),
        source,
    };
    let target: SocketAddr = loop {
        match addr.to_socket_addrs() {
            Ok(mut addrs) => match addrs.next() {
                Some(a) => break a,
                None => {
                    return Err(RendezvousError::Protocol {
                        addr: addr.to_owned(),
                        problem: "the address resolves to nothing".to_owned(),
                    });
                }
            },
            Err(err) if Instant::now() > deadline => return Err(io(err)),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut stream = loop {
        match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
            Ok(stream) => break stream,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => {
                return Err(RendezvousError::Timeout {
                    addr: addr.to_owned(),
                    seconds: timeout.as_secs(),
                    waiting_for: "rank 0 to listen".to_owned(),
                });
            }
        }
    };
    stream.set_nodelay(true).map_err(io)?;
    let mut hello = Vec::with_capacity(16);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&(rank as u32).to_le_bytes());
    hello.extend_from_slice(&(world_size as u32 | (PROTOCOL_VERSION << 24)).to_le_bytes());
    stream.write_all(&hello).map_err(io)?;
    stream
        .set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(1)),
        ))
        .map_err(io)?;
    let mut reply = [0u8; 8 + ID_BYTES];
    stream.read_exact(&mut reply).map_err(io)?;
    if &reply[..8] != MAGIC {
        return Err(RendezvousError::Protocol {
            addr: addr.to_owned(),
            problem: "rank 0 answered with something else than an afd-probe id".to_owned(),
        });
    }
    stream.set_read_timeout(None).map_err(io)?;
    let mut id = [0u8; ID_BYTES];
    id.copy_from_slice(&reply[8..]);
    Ok((
        id,
        Link::Peer {
            root: stream,
            rank,
            addr: addr.to_owned(),
        },
    ))
}

impl Link {
    /// Sends this rank's `blob` to rank 0; rank 0 gets every rank's blob in rank order (its own first).
    /// `timeout` bounds the wait for the other ranks.
    pub fn gather(
        &mut self,
        blob: Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<Vec<Vec<u8>>>, RendezvousError> {
        match self {
            Link::Alone => Ok(Some(vec![blob])),
            Link::Peer { root, addr, .. } => {
                let io = |source| RendezvousError::Io {
                    addr: addr.clone(),
                    source,
                };
                root.write_all(&(blob.len() as u64).to_le_bytes())
                    .map_err(io)?;
                root.write_all(&blob).map_err(io)?;
                root.flush().map_err(io)?;
                Ok(None)
            }
            Link::Root { peers, addr } => {
                let mut all = vec![blob];
                for (i, peer) in peers.iter_mut().enumerate() {
                    let io = |source: std::io::Error| {
                        if matches!(
                            source.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) {
                            RendezvousError::Timeout {
                                addr: addr.clone(),
                                seconds: timeout.as_secs(),
                                waiting_for: format!("the results of rank {}", i + 1),
                            }
                        } else {
                            RendezvousError::Io {
                                addr: addr.clone(),
                                source,
                            }
                        }
                    };
                    peer.set_read_timeout(Some(timeout)).map_err(io)?;
                    let mut len = [0u8; 8];
                    peer.read_exact(&mut len).map_err(io)?;
                    let len = u64::from_le_bytes(len);
                    if len > MAX_BLOB_BYTES {
                        return Err(RendezvousError::Protocol {
                            addr: addr.clone(),
                            problem: format!("rank {} announced {len} bytes of results", i + 1),
                        });
                    }
                    let mut bytes = vec![0u8; len as usize];
                    peer.read_exact(&mut bytes).map_err(io)?;
                    all.push(bytes);
                }
                Ok(Some(all))
            }
        }
    }
}

fn parse_hello(hello: &[u8; 16]) -> Option<(usize, usize)> {
    if &hello[..8] != MAGIC {
        return None;
    }
    let rank = u32::from_le_bytes(hello[8..12].try_into().ok()?) as usize;
    let word = u32::from_le_bytes(hello[12..16].try_into().ok()?);
    if word >> 24 != PROTOCOL_VERSION {
        return None;
    }
    Some((rank, (word & 0x00ff_ffff) as usize))
}

#[cfg(test)]
mod tests;
