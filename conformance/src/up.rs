//! `afd-conformance up`: starts a twin pair from a recipe for local rehearsal, as the recipe would start
//! the real pair, with each `vllm serve` (or `uv run vllm serve`) replaced by the `afd-twin` binary.
//!
//! The recipe is parsed by `afd_sim::deployment` (never executed): each server gets its environment
//! prefixes and exports, its redirections become log files under the log directory, and optionally its
//! HTTP and AFD ports are moved to free ones (so tests can run pairs side by side). [`Pair::stop`] ends the
//! pair as the plugin's runner does (afd-spec §7.4 R11): SIGTERM to each process group, Attention first,
//! up to 20 s, then SIGKILL. The suite's own tests start every pair through here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use afd_sim::deployment::recipe::RedirectionKind;
use afd_sim::deployment::{RecipeOptions, RoleConfig, ServeCommand, parse_recipe};
use afd_sim::topology::{Role, RuleSet};
use afd_traces::input::InputKind;

use crate::client::{Client, Endpoint, Request};
use crate::target::{DeploymentInput, ServeWords, TargetOptions};

/// How long a process gets between SIGTERM and SIGKILL (afd-spec §7.4 R11).
pub const STOP_GRACE: Duration = Duration::from_secs(20);

/// Everything `up` needs.
#[derive(Clone, Debug)]
pub struct UpOptions {
    pub recipe: PathBuf,
    pub twin_bin: PathBuf,
    /// Where the recipe's redirections (and logs of unredirected servers) go.
    pub log_dir: PathBuf,
    pub rules: RuleSet,
    /// Flags for both twins, after the serve words (`--time-scale 1`; the twin picks its flags out
    /// wherever they stand).
    pub twin_args: Vec<String>,
    /// `--fault` values per role.
    pub attention_faults: Vec<String>,
    pub ffn_faults: Vec<String>,
    /// Move HTTP and AFD ports to free ones.
    pub free_ports: bool,
    pub ready_timeout: Duration,
    /// Variables visible to the recipe (`MODEL_PATH=...`).
    pub env: BTreeMap<String, String>,
}

/// Why a pair could not be started: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// The recipe file could not be read, or is larger than [`InputKind::RECIPE`] allows.
    #[error(transparent)]
    ReadRecipe(#[from] afd_traces::input::InputError),
    #[error("recipe {path}: {message}")]
    Recipe { path: PathBuf, message: String },
    #[error(
        "cannot start {bin}: {source} (build it with `cargo build -p afd-twin` or pass --twin-bin)"
    )]
    Spawn {
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no free port on 127.0.0.1: {0}")]
    Ports(String),
    #[error(
        "the {role} twin exited with {status} before the pair was ready; last lines of {log}:\n{tail}"
    )]
    Exited {
        role: Role,
        status: ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("the pair was not ready within {after:.0?}: {reason}")]
    NotReady { after: Duration, reason: String },
}

/// One running twin.
#[derive(Debug)]
struct Process {
    role: Role,
    child: Child,
    log: PathBuf,
}

/// A running twin pair.
#[derive(Debug)]
pub struct Pair {
    processes: Vec<Process>,
    pub attention_url: String,
    pub ffn_url: String,
    pub attention_log: PathBuf,
    pub ffn_log: PathBuf,
    /// The serve words and environment each twin got (after port moves).
    pub attention: ServeWords,
    pub ffn: ServeWords,
    pub rules: RuleSet,
    pub origin: String,
}

impl Pair {
    /// Starts the recipe's pair and waits until the Attention twin answers `/v1/models`.
    pub async fn start(options: &UpOptions) -> Result<Pair, UpError> {
        let text = afd_traces::input::read_text(&options.recipe, InputKind::RECIPE)?;
        let recipe_error = |message: String| UpError::Recipe {
            path: options.recipe.clone(),
            message,
        };
        let recipe = parse_recipe(
            &text,
            &RecipeOptions {
                env: options.env.clone(),
            },
        )
        .map_err(|err| recipe_error(err.render(&text)))?;
        let mut servers: Vec<(Role, &ServeCommand)> = Vec::new();
        for server in &recipe.servers {
            let config = RoleConfig::from_serve_command(server)
                .map_err(|err| recipe_error(format!("{err}")))?;
            if let Some(role) = config.declared_role() {
                servers.push((role, server));
            }
        }
        let attention = servers.iter().find(|(r, _)| *r == Role::Attention);
        let ffn = servers.iter().find(|(r, _)| *r == Role::Ffn);
        let (Some(&(_, attention)), Some(&(_, ffn))) = (attention, ffn) else {
            return Err(recipe_error(
                "needs one vllm serve with an afd block of role attention and one of role ffn"
                    .to_owned(),
            ));
        };
        let mut words = [serve_words(attention), serve_words(ffn)];
        if options.free_ports {
            move_ports(&mut words)?;
        }
        std::fs::create_dir_all(&options.log_dir).map_err(|source| UpError::Log {
            path: options.log_dir.clone(),
            source,
        })?;
        let [attention_words, ffn_words] = words;
        let attention_url = url_of(&attention_words.args)?;
        let ffn_url = url_of(&ffn_words.args)?;
        let mut processes = Vec::new();
        // Recipe order (the seed starts Attention first; either order pairs).
        let mut order = vec![
            (Role::Attention, attention, &attention_words),
            (Role::Ffn, ffn, &ffn_words),
        ];
        order.sort_by_key(|(_, server, _)| server.location);
        for (role, server, words) in order {
            let log = log_path(server, role, &options.log_dir);
            let faults = match role {
                Role::Attention => &options.attention_faults,
                Role::Ffn => &options.ffn_faults,
            };
            processes.push(spawn(options, role, words, faults, &log)?);
        }
        let log_of = |role: Role| {
            processes
                .iter()
                .find(|p| p.role == role)
                .map(|p| p.log.clone())
                .expect("both roles were started")
        };
        let mut pair = Pair {
            attention_log: log_of(Role::Attention),
            ffn_log: log_of(Role::Ffn),
            processes,
            attention_url,
            ffn_url,
            attention: attention_words,
            ffn: ffn_words,
            rules: options.rules,
            origin: format!(
                "recipe {}{}",
                options.recipe.display(),
                if options.free_ports {
                    " (ports moved)"
                } else {
                    ""
                }
            ),
        };
        pair.wait_ready(options.ready_timeout).await?;
        Ok(pair)
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), UpError> {
        let endpoint = Endpoint::parse(&self.attention_url).map_err(|e| UpError::Recipe {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        let client = Client::default().with_timeout(Duration::from_secs(2));
        let deadline = Instant::now() + within;
        loop {
            for process in &mut self.processes {
                if let Ok(Some(status)) = process.child.try_wait() {
                    return Err(UpError::Exited {
                        role: process.role,
                        status,
                        log: process.log.clone(),
                        tail: tail(&process.log, 20),
                    });
                }
            }
            let last = match client.send(&endpoint, &Request::get("/v1/models")).await {
                Ok(r) if r.status() == 200 => return Ok(()),
                Ok(r) => format!("GET /v1/models answered {}", r.status()),
                Err(err) => err.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(UpError::NotReady {
                    after: within,
                    reason: last,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What `afd-conformance run` needs to check this pair.
    pub fn target_options(&self) -> TargetOptions {
        TargetOptions {
            deployment: Some(DeploymentInput::Words {
                attention: self.attention.clone(),
                ffn: self.ffn.clone(),
                origin: self.origin.clone(),
            }),
            rules: self.rules,
            attention_url: Some(self.attention_url.clone()),
            ffn_url: Some(self.ffn_url.clone()),
            attention_log: Some(self.attention_log.clone()),
            ffn_log: Some(self.ffn_log.clone()),
            ..TargetOptions::default()
        }
    }

    /// Which twins have exited, with their status.
    pub fn exited(&mut self) -> Vec<(Role, ExitStatus)> {
        self.processes
            .iter_mut()
            .filter_map(|p| p.child.try_wait().ok().flatten().map(|s| (p.role, s)))
            .collect()
    }

    /// Stops the pair: SIGTERM to each process group, Attention first, up to [`STOP_GRACE`] each, then
    /// SIGKILL. Returns each twin's exit status (`None` if it had to be killed and did not report one).
    pub async fn stop(mut self) -> Vec<(Role, Option<ExitStatus>)> {
        self.processes.sort_by_key(|p| p.role != Role::Attention);
        let mut out = Vec::new();
        for mut process in std::mem::take(&mut self.processes) {
            signal_group(&process.child, rustix::process::Signal::TERM);
            let status = match tokio::time::timeout(STOP_GRACE, process.child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => {
                    signal_group(&process.child, rustix::process::Signal::KILL);
                    process.child.wait().await.ok()
                }
            };
            out.push((process.role, status));
        }
        out
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // A pair dropped without stop() (a failing test) must not outlive its owner.
        for process in &self.processes {
            signal_group(&process.child, rustix::process::Signal::KILL);
        }
    }
}

fn signal_group(child: &Child, signal: rustix::process::Signal) {
    let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // The twin leads its own process group (spawned with process_group(0)).
    let _ = rustix::process::kill_process_group(pid, signal);
}

fn serve_words(server: &ServeCommand) -> ServeWords {
    ServeWords {
        args: server.args.iter().map(|w| w.text.clone()).collect(),
        env: server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect(),
    }
}

fn log_path(server: &ServeCommand, role: Role, dir: &Path) -> PathBuf {
    let named = server.redirections.iter().find_map(|r| match &r.kind {
        RedirectionKind::Truncate(path) | RedirectionKind::Append(path)
            if r.fd == 1 || r.fd == 2 =>
        {
            Path::new(path).file_name().map(|n| n.to_owned())
        }
        _ => None,
    });
    dir.join(named.unwrap_or_else(|| format!("{role}.log").into()))
}

fn spawn(
    options: &UpOptions,
    role: Role,
    words: &ServeWords,
    faults: &[String],
    log: &Path,
) -> Result<Process, UpError> {
    let file = std::fs::File::create(log).map_err(|source| UpError::Log {
        path: log.to_path_buf(),
        source,
    })?;
    let err_file = file.try_clone().map_err(|source| UpError::Log {
        path: log.to_path_buf(),
        source,
    })?;
    let mut command = Command::new(&options.twin_bin);
    command
        .args(&words.args)
        .args(["--rules", options.rules.as_str()])
        .args(&options.twin_args);
    for fault in faults {
        command.arg("--fault").arg(fault);
    }
    command
        .envs(&words.env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err_file))
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().map_err(|source| UpError::Spawn {
        bin: options.twin_bin.clone(),
        source,
    })?;
    Ok(Process {
        role,
        child,
        log: log.to_path_buf(),
    })
}

/// The value of `--flag V` / `--flag=V` (last one wins, as argparse does).
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut value = None;
    let prefix = format!("{flag}=");
    for (i, word) in args.iter().enumerate() {
        if word == flag {
            value = args.get(i + 1).map(String::as_str);
        } else if let Some(v) = word.strip_prefix(&prefix) {
            value = Some(v);
        }
    }
    value
}

/// Replaces every value of `--flag` through `f`.
fn rewrite_flag(args: &mut [String], flag: &str, f: &dyn Fn(&str) -> Option<String>) {
    let prefix = format!("{flag}=");
    let mut i = 0;
    while i < args.len() {
        if args[i] == flag && i + 1 < args.len() {
            if let Some(new) = f(&args[i + 1]) {
                args[i + 1] = new;
            }
            i += 2;
            continue;
        }
        if let Some(value) = args[i].strip_prefix(&prefix)
            && let Some(new) = f(value)
        {
            args[i] = format!("{prefix}{new}");
        }
        i += 1;
    }
}

fn url_of(args: &[String]) -> Result<String, UpError> {
    let port = flag_value(args, "--port").unwrap_or("8000");
    let host = match flag_value(args, "--host") {
        None | Some("" | "0.0.0.0") => "127.0.0.1",
        Some(host) => host,
    };
    Ok(format!("http://{host}:{port}"))
}

/// Moves the HTTP ports (shared ones stay shared) and the AFD base port to free ports on loopback.
fn move_ports(words: &mut [ServeWords; 2]) -> Result<(), UpError> {
    let mut http: BTreeMap<String, u16> = BTreeMap::new();
    // Each chosen port stays bound until the AFD run is chosen: a port released at once may come back
    // from the next bind, and an HTTP port inside the rendezvous run is refused
    // (`cross.http-port-vs-rendezvous`, afd-spec §2.3).
    let mut held = Vec::new();
    for w in words.iter() {
        let old = flag_value(&w.args, "--port").unwrap_or("8000").to_owned();
        if let std::collections::btree_map::Entry::Vacant(e) = http.entry(old) {
            let listener = bound_port()?;
            e.insert(port_of(&listener)?);
            held.push(listener);
        }
    }
    // Room for the base port and port + k + 1 of every subgroup (v0.26), whatever the rank count.
    let afd = free_port_run(65)?;
    drop(held);
    for w in words.iter_mut() {
        if flag_value(&w.args, "--port").is_none() {
            w.args.push("--port".to_owned());
            w.args.push(http["8000"].to_string());
        } else {
            rewrite_flag(&mut w.args, "--port", &|old| {
                http.get(old).map(u16::to_string)
            });
        }
        rewrite_flag(&mut w.args, "--additional-config", &|json| {
            set_afd_port(json, afd)
        });
    }
    Ok(())
}

fn set_afd_port(json: &str, port: u16) -> Option<String> {
    let mut value: Value = serde_json::from_str(json).ok()?;
    let afd = value.get_mut("afd")?.as_object_mut()?;
    let key = if afd.contains_key("afd_port") {
        "afd_port"
    } else {
        "port"
    };
    afd.insert(key.to_owned(), Value::from(port));
    Some(value.to_string())
}

/// A loopback listener on a port the kernel chose.
fn bound_port() -> Result<std::net::TcpListener, UpError> {
    std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| UpError::Ports(e.to_string()))
}

fn port_of(listener: &std::net::TcpListener) -> Result<u16, UpError> {
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| UpError::Ports(e.to_string()))
}

fn free_port() -> Result<u16, UpError> {
    port_of(&bound_port()?)
}

/// A base port with `n` consecutive free ports from it.
fn free_port_run(n: u16) -> Result<u16, UpError> {
    for _ in 0..200 {
        let base = free_port()?;
        if base > u16::MAX - n {
            continue;
        }
        let all_free = (0..n).all(|k| std::net::TcpListener::bind(("127.0.0.1", base + k)).is_ok());
        if all_free {
            return Ok(base);
        }
    }
    Err(UpError::Ports(format!(
        "no run of {n} consecutive free ports found"
    )))
}

/// A recipe script of the two commands the twins really got (after `--free-ports` moved the ports), so
/// `afd-conformance run --recipe FILE` judges the pair as launched. Read back by the recipe reader, it
/// gives the same words and environment.
pub fn rewritten_recipe(
    origin: &str,
    attention: (&ServeWords, &Path),
    ffn: (&ServeWords, &Path),
) -> String {
    let command = |(words, log): (&ServeWords, &Path)| {
        let env = words
            .env
            .iter()
            .map(|(name, value)| format!("{name}={}", shell_word(value)));
        let args = words.args.iter().map(|w| shell_word(w));
        let line: Vec<String> = env
            .chain(["vllm".to_owned(), "serve".to_owned()])
            .chain(args)
            .collect();
        let log = shell_word(&log.display().to_string());
        format!("{} > {log} 2>&1 &\n", line.join(" "))
    };
    format!(
        "#!/bin/bash\n# {origin}, with the ports afd-conformance up --free-ports moved (written by afd-conformance up).\n\n{}\n{}",
        command(attention),
        command(ffn)
    )
}

/// A word as a POSIX shell (and the recipe reader) reads it back.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The `afd-twin` binary next to the running executable (cargo puts both in one target directory).
pub fn twin_next_to_current_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("afd-twin"), dir.parent()?.join("afd-twin")]
        .into_iter()
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests;
