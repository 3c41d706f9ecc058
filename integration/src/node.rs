//! Starting, killing and restarting the real `gregor` binary.
//!
//! Every node gets its own temporary data directory and binds port 0 for all listeners unless the
//! caller overrides that, so any number of nodes can run in parallel. The child's stderr and
//! stdout are drained by background threads for the whole life of the process (a full pipe would
//! block the node) and kept for error messages.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

/// How long [`GregorNode::start`] waits for the ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Lines of child output kept for error messages (oldest dropped first).
const MAX_LOG_LINES: usize = 20_000;

/// Where the `gregor` binary is: `$GREGOR_BIN`, else `<target dir>/debug/gregor` of this workspace
/// (`$CARGO_TARGET_DIR` is honoured).
pub fn binary_path() -> PathBuf {
    if let Some(bin) = std::env::var_os("GREGOR_BIN") {
        return PathBuf::from(bin);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace.join(dir)
            }
        }
        None => workspace.join("target"),
    };
    target.join("debug").join("gregor")
}

/// Addresses a running node reported in its ready line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddrs {
    /// `host:port` of the PLAINTEXT (client) listener.
    pub plaintext: String,
    /// `host:port` of the CONTROLLER listener, if the node listed one.
    pub controller: Option<String>,
    /// `host:port` of the Prometheus endpoint.
    pub metrics: String,
    /// Every listener as reported, `NAME -> host:port`.
    pub listeners: BTreeMap<String, String>,
}

/// Resident memory of a node process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentMemory {
    /// Resident now (`VmRSS`).
    pub current: u64,
    /// The highest it has been (`VmHWM`).
    pub peak: u64,
}

/// How a node process that was expected to fail ended.
#[derive(Debug)]
pub struct NodeExit {
    /// The exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Everything it wrote to stdout.
    pub stdout: String,
}

/// Output of a child process, shared with the threads that drain its pipes.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() >= MAX_LOG_LINES {
                lines.remove(0);
            }
            lines.push(line);
        }
    }

    fn text(&self) -> String {
        match self.0.lock() {
            Ok(lines) => lines.join("\n"),
            Err(_) => String::from("<log lock poisoned>"),
        }
    }
}

/// A running (or killed) `gregor node` process with its own data directory.
///
/// Dropping it kills the process (SIGKILL) and removes the data directory.
pub struct GregorNode {
    bin: PathBuf,
    /// Keeps the directory alive; removed on drop.
    _dir: tempfile::TempDir,
    data_dir: PathBuf,
    /// The caller's overrides, applied over the harness defaults.
    overrides: Vec<(String, String)>,
    config_file: Option<PathBuf>,
    /// Environment variables of the process from its next start (test knobs such as
    /// `GREGOR_QUOTA_SENSOR_EXPIRY_MS`; see [`GregorNode::set_env`]).
    env: Vec<(String, String)>,
    child: Option<Child>,
    addrs: NodeAddrs,
    stderr: Log,
    stdout: Log,
    starts: u32,
    /// Stderr lines of the current start until its ready line was seen.
    ready_lines: Option<mpsc::Receiver<String>>,
    /// The network namespace the process runs in (`None`: the test's own).
    netns: Option<String>,
}

impl std::fmt::Debug for GregorNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GregorNode")
            .field("data_dir", &self.data_dir)
            .field("addrs", &self.addrs)
            .field("pid", &self.pid())
            .finish()
    }
}

impl GregorNode {
    /// Starts a node on ephemeral ports with a fresh data directory, plus `extra_overrides`
    /// (`key`, `value`) that replace the harness defaults for the same key.
    pub fn start(extra_overrides: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::start_with(extra_overrides, None)
    }

    /// Like [`GregorNode::start`], also passing `--config <config_file>`.
    pub fn start_with(
        extra_overrides: &[(&str, &str)],
        config_file: Option<&Path>,
    ) -> anyhow::Result<Self> {
        Self::start_with_env(extra_overrides, config_file, &[])
    }

    /// Like [`GregorNode::start_with`], with environment variables `env` set for the process
    /// (and its restarts).
    pub fn start_with_env(
        extra_overrides: &[(&str, &str)],
        config_file: Option<&Path>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("gregor-it-")
            .tempdir()
            .context("creating a temporary data directory")?;
        let data_dir = dir.path().join("data");
        let mut node = GregorNode {
            bin: binary_path(),
            data_dir,
            _dir: dir,
            overrides: extra_overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            config_file: config_file.map(Path::to_path_buf),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            addrs: NodeAddrs {
                plaintext: String::new(),
                controller: None,
                metrics: String::new(),
                listeners: BTreeMap::new(),
            },
            stderr: Log::default(),
            stdout: Log::default(),
            starts: 0,
            ready_lines: None,
            netns: None,
        };
        node.spawn_and_wait(None)?;
        Ok(node)
    }

    /// Like [`GregorNode::start`], but first runs `gregor storage format` with the same
    /// overrides and `format_args` (e.g. `--cluster-id X --initial-controllers ...`), for nodes
    /// of a multi-node cluster. With `wait_ready` false it returns once the process runs (a
    /// voter of a quorum that has no majority yet cannot become ready on its own); call
    /// [`GregorNode::wait_ready`] later.
    pub fn start_formatted(
        extra_overrides: &[(&str, &str)],
        format_args: &[&str],
        wait_ready: bool,
    ) -> anyhow::Result<Self> {
        Self::start_formatted_in(None, extra_overrides, format_args, wait_ready)
    }

    /// [`GregorNode::start_formatted`] with the process (and its restarts) inside the network
    /// namespace `netns` (see [`crate::netns::NetLab`]); its listeners must then bind that
    /// namespace's address.
    pub fn start_formatted_in(
        netns: Option<&str>,
        extra_overrides: &[(&str, &str)],
        format_args: &[&str],
        wait_ready: bool,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("gregor-it-")
            .tempdir()
            .context("creating a temporary data directory")?;
        let data_dir = dir.path().join("data");
        let overrides: Vec<(String, String)> = extra_overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let bin = binary_path();
        let format = node_command(&bin, &data_dir, &overrides, None, None)?;
        // node_command builds `gregor node --override ...`; reuse its overrides for `storage format`.
        let args: Vec<std::ffi::OsString> =
            format.get_args().skip(1).map(|a| a.to_owned()).collect();
        let mut cmd = Command::new(&bin);
        cmd.arg("storage")
            .arg("format")
            .args(args)
            .args(format_args);
        let output = cmd
            .env("NO_COLOR", "1")
            .output()
            .with_context(|| format!("running {} storage format", bin.display()))?;
        if !output.status.success() {
            bail!(
                "gregor storage format failed: {}{}",
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            );
        }
        let mut node = GregorNode {
            bin,
            data_dir,
            _dir: dir,
            overrides,
            config_file: None,
            env: Vec::new(),
            child: None,
            addrs: NodeAddrs {
                plaintext: String::new(),
                controller: None,
                metrics: String::new(),
                listeners: BTreeMap::new(),
            },
            stderr: Log::default(),
            stdout: Log::default(),
            starts: 0,
            ready_lines: None,
            netns: netns.map(str::to_owned),
        };
        node.spawn(None)?;
        if wait_ready {
            node.wait_ready()?;
        }
        Ok(node)
    }

    /// Waits for the `node ready` line of the current start (see
    /// [`GregorNode::start_formatted`]).
    pub fn wait_ready(&mut self) -> anyhow::Result<()> {
        let rx = self
            .ready_lines
            .take()
            .ok_or_else(|| anyhow!("wait_ready called twice for one start"))?;
        self.await_ready(rx)
    }

    /// Runs `gregor node` with the harness defaults plus `overrides`, expecting it to exit
    /// (a start-up failure), with a fresh temporary data directory unless `log.dirs` is
    /// overridden. Fails if it is still running after `timeout`; it is then killed and its
    /// output attached.
    pub fn run_expect_exit(
        overrides: &[(&str, &str)],
        config_file: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<NodeExit> {
        let dir = tempfile::Builder::new()
            .prefix("gregor-it-")
            .tempdir()
            .context("creating a temporary data directory")?;
        let data_dir = dir.path().join("data");
        let overrides: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let bin = binary_path();
        let mut cmd = node_command(&bin, &data_dir, &overrides, config_file, None)?;
        let stderr = Log::default();
        let stdout = Log::default();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        let err_done = drain(child.stderr.take(), stderr.clone(), None);
        let out_done = drain(child.stdout.take(), stdout.clone(), None);
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().context("waiting for gregor")? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                let _ = err_done.recv_timeout(Duration::from_secs(5));
                bail!(
                    "gregor was still running after {timeout:?} (expected a start-up failure)\n\
                     --- stderr ---\n{}",
                    stderr.text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The pipes close when the process exits; wait for the drains to finish reading.
        let _ = err_done.recv_timeout(Duration::from_secs(5));
        let _ = out_done.recv_timeout(Duration::from_secs(5));
        Ok(NodeExit {
            status,
            stderr: stderr.text(),
            stdout: stdout.text(),
        })
    }

    /// `host:port` of the PLAINTEXT listener, for a Kafka client's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addrs.plaintext.clone()
    }

    /// The PLAINTEXT listener's port.
    pub fn port(&self) -> u16 {
        port_of(&self.addrs.plaintext).unwrap_or(0)
    }

    /// Every address from the ready line.
    pub fn addrs(&self) -> &NodeAddrs {
        &self.addrs
    }

    /// `host:port` of the Prometheus endpoint.
    pub fn metrics_addr(&self) -> String {
        self.addrs.metrics.clone()
    }

    /// `http://host:port/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addrs.metrics)
    }

    /// The node's data directory (`log.dirs`), kept across restarts.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The process id while a process is running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Resets the peak resident memory [`GregorNode::resident_memory`] reports to the memory
    /// resident now (`/proc/<pid>/clear_refs`), so that a measurement is not of an earlier peak
    /// (a node that joined a cluster peaks while it catches up).
    pub fn reset_peak_memory(&self) -> anyhow::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| anyhow!("the node is not running"))?;
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
            .with_context(|| format!("resetting the peak of /proc/{pid}"))
    }

    /// The process's resident memory now and its peak so far, in bytes (`VmRSS`, `VmHWM` of
    /// `/proc/<pid>/status`; Linux only).
    pub fn resident_memory(&self) -> anyhow::Result<ResidentMemory> {
        let pid = self
            .pid()
            .ok_or_else(|| anyhow!("the node is not running"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            let line = status
                .lines()
                .find(|l| l.starts_with(name))
                .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))?;
            let kib: u64 = line
                .split_whitespace()
                .nth(1)
                .ok_or_else(|| anyhow!("bad line {line:?}"))?
                .parse()?;
            Ok(kib * 1024)
        };
        Ok(ResidentMemory {
            current: field("VmRSS:")?,
            peak: field("VmHWM:")?,
        })
    }

    /// Everything the node processes wrote to stderr so far (all starts).
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// What the node's latest start wrote to stderr: the text after its start banner. Byte
    /// offsets into [`GregorNode::stderr`] do not serve for this, since the oldest lines are
    /// dropped once the log holds `MAX_LOG_LINES`.
    pub fn stderr_of_latest_start(&self) -> String {
        let text = self.stderr.text();
        let banner = format!("---- start #{} ----", self.starts);
        match text.rfind(&banner) {
            Some(at) => text[at + banner.len()..].to_owned(),
            None => text,
        }
    }

    /// Whether the process has exited (or was killed) — `Some(status)` once it has.
    pub fn try_exit_status(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// Kills the process with SIGKILL (no chance to flush anything) and reaps it.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            // On Unix `Child::kill` sends SIGKILL.
            match child.kill() {
                Ok(()) => {}
                // Already exited: nothing to kill.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {}
                Err(e) => return Err(e).context("sending SIGKILL to gregor"),
            }
            child.wait().context("reaping gregor")?;
        }
        Ok(())
    }

    /// Sets `key=value` in the environment of the node's next starts (test hooks).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// Stops the process with SIGSTOP (it keeps its sockets but answers nothing), as a node
    /// that stalls or is cut off would.
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal("-STOP")
    }

    /// Resumes a process stopped by [`GregorNode::pause`] (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| anyhow!("the node is not running"))?;
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill {signal} {pid} failed: {status}");
        }
        Ok(())
    }

    /// Kills the node if it runs, then starts it again on the same data directory with new
    /// ephemeral ports.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9()?;
        self.spawn_and_wait(None)
    }

    /// Kills the node if it runs, then starts it again on the same data directory and the same
    /// ports as before.
    pub fn restart_same_ports(&mut self) -> anyhow::Result<()> {
        self.kill9()?;
        let mut listeners = String::new();
        for (name, addr) in &self.addrs.listeners {
            if !listeners.is_empty() {
                listeners.push(',');
            }
            listeners.push_str(&format!("{name}://{addr}"));
        }
        let pinned = vec![
            ("listeners".to_string(), listeners),
            ("metrics.listener".to_string(), self.addrs.metrics.clone()),
        ];
        self.spawn_and_wait(Some(pinned))
    }

    fn spawn_and_wait(&mut self, pinned: Option<Vec<(String, String)>>) -> anyhow::Result<()> {
        self.spawn(pinned)?;
        self.wait_ready()
    }

    fn spawn(&mut self, pinned: Option<Vec<(String, String)>>) -> anyhow::Result<()> {
        let mut overrides = self.overrides.clone();
        if let Some(pinned) = pinned {
            overrides.retain(|(k, _)| !pinned.iter().any(|(p, _)| p == k));
            overrides.extend(pinned);
        }
        let mut cmd = node_command(
            &self.bin,
            &self.data_dir,
            &overrides,
            self.config_file.as_deref(),
            self.netns.as_deref(),
        )?;
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        self.starts += 1;
        let banner = format!("---- start #{} ----", self.starts);
        self.stderr.push(banner.clone());
        self.stdout.push(banner);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", self.bin.display()))?;
        let (tx, rx) = mpsc::channel::<String>();
        let _stderr_done = drain(child.stderr.take(), self.stderr.clone(), Some(tx));
        let _stdout_done = drain(child.stdout.take(), self.stdout.clone(), None);
        self.child = Some(child);
        self.ready_lines = Some(rx);
        Ok(())
    }

    fn await_ready(&mut self, rx: mpsc::Receiver<String>) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if line.contains("node ready") {
                        let addrs = parse_ready_line(&line).with_context(|| {
                            format!(
                                "parsing the ready line {line:?}\n--- stderr ---\n{}",
                                self.stderr()
                            )
                        })?;
                        self.addrs = addrs;
                        return Ok(());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.kill9();
                    bail!(
                        "gregor did not log `node ready` within {READY_TIMEOUT:?}\n--- stderr ---\n{}",
                        self.stderr()
                    );
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // stderr closed: the process exited before it was ready.
                    let status = match self.child.take() {
                        Some(mut child) => child.wait().map(|s| s.to_string()).unwrap_or_default(),
                        None => String::new(),
                    };
                    bail!(
                        "gregor exited before it was ready ({status})\n--- stderr ---\n{}\n--- stdout ---\n{}",
                        self.stderr(),
                        self.stdout.text()
                    );
                }
            }
        }
    }
}

impl Drop for GregorNode {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// Builds `gregor node --override ...` with the harness defaults (fresh ports, `log.dirs`)
/// replaced by `overrides` where the keys match, run inside `netns` when given.
fn node_command(
    bin: &Path,
    data_dir: &Path,
    overrides: &[(String, String)],
    config_file: Option<&Path>,
    netns: Option<&str>,
) -> anyhow::Result<Command> {
    if !bin.exists() {
        bail!(
            "the gregor binary is missing at {} (build it with `cargo build -p gregor-node`, or set GREGOR_BIN)",
            bin.display()
        );
    }
    let data_dir = data_dir
        .to_str()
        .ok_or_else(|| anyhow!("data dir {} is not UTF-8", data_dir.display()))?
        .to_string();
    let mut settings: Vec<(String, String)> = vec![
        ("log.dirs".into(), data_dir),
        (
            "listeners".into(),
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0".into(),
        ),
        ("metrics.listener".into(), "127.0.0.1:0".into()),
    ];
    for (k, v) in overrides {
        match settings.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.clone(),
            None => settings.push((k.clone(), v.clone())),
        }
    }
    let mut cmd = match netns {
        Some(netns) => crate::netns::command_in(netns, bin),
        None => Command::new(bin),
    };
    cmd.arg("node");
    if let Some(config) = config_file {
        cmd.arg("--config").arg(config);
    }
    for (k, v) in &settings {
        cmd.arg("--override").arg(format!("{k}={v}"));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Plain text: the ready line is parsed, so no ANSI colours.
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG");
    if let Some(filter) = std::env::var_os("GREGOR_LOG") {
        cmd.env("RUST_LOG", filter);
    }
    Ok(cmd)
}

/// Reads `pipe` line by line into `log` (and `tx`, while someone listens) until it closes. The
/// returned receiver gets one message when the pipe has been read to the end.
fn drain<R: Read + Send + 'static>(
    pipe: Option<R>,
    log: Log,
    tx: Option<mpsc::Sender<String>>,
) -> mpsc::Receiver<()> {
    let (done_tx, done_rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = strip_ansi(&String::from_utf8_lossy(&buf))
                            .trim_end()
                            .to_string();
                        if let Some(tx) = &tx {
                            let _ = tx.send(line.clone());
                        }
                        log.push(line);
                    }
                }
            }
            let _ = done_tx.send(());
        });
    } else {
        let _ = done_tx.send(());
    }
    done_rx
}

/// Removes ANSI escape sequences (`ESC [ ... letter`), in case the node colours its output.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The value of `key=` in a tracing fmt line: everything up to the next whitespace, without
/// surrounding quotes.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!("{key}=");
    let mut from = 0;
    while let Some(pos) = line[from..].find(&needle) {
        let start = from + pos;
        // Must be a whole field name (start of line or preceded by whitespace).
        let boundary = start == 0
            || line[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || c == '{' || c == ',');
        let value_start = start + needle.len();
        if boundary {
            let rest = &line[value_start..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            return Some(rest[..end].trim_matches('"'));
        }
        from = value_start;
    }
    None
}

fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

/// Parses the `node ready` line into addresses.
pub fn parse_ready_line(line: &str) -> anyhow::Result<NodeAddrs> {
    let line = strip_ansi(line);
    let listeners_field =
        field(&line, "listeners").ok_or_else(|| anyhow!("no listeners= field"))?;
    let metrics = field(&line, "metrics")
        .ok_or_else(|| anyhow!("no metrics= field"))?
        .to_string();
    let mut listeners = BTreeMap::new();
    for entry in listeners_field.split(',') {
        let (name, addr) = entry
            .split_once("://")
            .ok_or_else(|| anyhow!("listener {entry:?} is not NAME://host:port"))?;
        if port_of(addr).is_none_or(|p| p == 0) {
            bail!("listener {entry:?} has no bound port");
        }
        listeners.insert(name.to_string(), addr.to_string());
    }
    // A controller-only node has no PLAINTEXT listener; its first listener stands in.
    let plaintext = listeners
        .get("PLAINTEXT")
        .or_else(|| listeners.values().next())
        .cloned()
        .ok_or_else(|| anyhow!("no listener in {listeners_field:?}"))?;
    if port_of(&metrics).is_none_or(|p| p == 0) {
        bail!("metrics address {metrics:?} has no bound port");
    }
    Ok(NodeAddrs {
        plaintext,
        controller: listeners.get("CONTROLLER").cloned(),
        metrics,
        listeners,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_ready_line() {
        let line = "2026-01-01T00:00:00.000000Z  INFO gregor_node: node ready node_id=1 \
                    listeners=PLAINTEXT://127.0.0.1:40001,CONTROLLER://127.0.0.1:40002 \
                    metrics=127.0.0.1:40003";
        let addrs = parse_ready_line(line).unwrap();
        assert_eq!(addrs.plaintext, "127.0.0.1:40001");
        assert_eq!(addrs.controller.as_deref(), Some("127.0.0.1:40002"));
        assert_eq!(addrs.metrics, "127.0.0.1:40003");
    }

    #[test]
    fn parses_coloured_ready_line_and_ignores_similar_keys() {
        let line = "\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m node ready \
                    advertised_listeners=PLAINTEXT://x:1 \
                    \u{1b}[3mlisteners\u{1b}[0m\u{1b}[2m=\u{1b}[0mPLAINTEXT://127.0.0.1:5,CONTROLLER://127.0.0.1:6 \
                    \u{1b}[3mmetrics\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:7";
        let addrs = parse_ready_line(line).unwrap();
        assert_eq!(addrs.plaintext, "127.0.0.1:5");
        assert_eq!(addrs.metrics, "127.0.0.1:7");
    }

    #[test]
    fn rejects_unbound_ports() {
        let line = "node ready listeners=PLAINTEXT://127.0.0.1:0 metrics=127.0.0.1:9";
        assert!(parse_ready_line(line).is_err());
    }
}
