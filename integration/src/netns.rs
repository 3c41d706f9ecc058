//! A private network of Linux network namespaces, for tests that partition nodes for real.
//!
//! Loopback cannot cut one process off from another, so a [`NetLab`] gives each node a
//! namespace of its own with one address (`10.77.0.N/24`), all joined by a bridge in a hub
//! namespace (`10.77.0.1`) from which the test itself talks to every node (see
//! [`NetLab::enter_hub`]). Nothing is added to the machine's own namespace: the addresses exist
//! only inside the lab's namespaces, so no traffic can leave the machine and parallel labs do
//! not collide. A partition is made of routes, inside the namespaces, to an address nobody
//! holds (see [`NetLab::partition`]): the cut-off node keeps running and keeps its sockets, its
//! packets to the other side are lost, as in a real network partition, and healing removes the
//! routes so that the same connections carry on.
//!
//! Namespaces need root and `ip netns`; [`NetLab::new`] says why it cannot build a lab so the
//! caller can skip. Dropping the lab deletes its namespaces (their interfaces go with them),
//! also when a test fails half-way.

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context};

/// The lab's subnet exists only inside its namespaces, so one fixed subnet serves every lab.
const SUBNET_PREFIX: [u8; 3] = [10, 77, 0];
/// The hub's address on the bridge.
const HUB_HOST: u8 = 1;
/// An address on the subnet that no namespace holds: routing a peer through it loses every
/// packet for that peer (the neighbour never answers ARP), as a partition does.
const NOWHERE_HOST: u8 = 254;
/// Labs made by this process, for unique namespace names.
static LABS: AtomicU32 = AtomicU32::new(0);

/// Why a lab cannot be built on this machine (the caller skips its partition tests).
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One node's namespace in a lab.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// The namespace name (`ip netns exec <netns> ...`).
    pub netns: String,
    /// Its address, reachable from the hub and from every other host of the lab.
    pub addr: Ipv4Addr,
}

/// Namespaces joined by a bridge; see the module documentation.
#[derive(Debug)]
pub struct NetLab {
    /// Prefix of every namespace name of this lab, unique on the machine.
    prefix: String,
    hub: String,
    /// Namespaces created so far (the hub first), deleted on drop.
    namespaces: Mutex<Vec<String>>,
    /// Routes a partition added, as `(netns, destination)`, removed by [`NetLab::heal`].
    cuts: Mutex<Vec<(String, Ipv4Addr)>>,
}

impl NetLab {
    /// Builds a hub with a bridge, or says why this machine cannot (not root, no `ip netns`).
    pub fn new() -> Result<NetLab, Unavailable> {
        if !rustix::process::geteuid().is_root() {
            return Err(Unavailable(
                "network namespaces need root; this test runs as another user".into(),
            ));
        }
        let prefix = format!(
            "gregor-lab-{}-{}",
            std::process::id(),
            LABS.fetch_add(1, Ordering::Relaxed)
        );
        let hub = format!("{prefix}-hub");
        let lab = NetLab {
            prefix,
            hub: hub.clone(),
            namespaces: Mutex::new(Vec::new()),
            cuts: Mutex::new(Vec::new()),
        };
        lab.add_namespace(&hub)
            .map_err(|e| Unavailable(format!("`ip netns add` does not work here: {e:#}")))?;
        let hub_addr = format!("{}/24", address(HUB_HOST));
        let built = ip(&["-n", &hub, "link", "set", "lo", "up"])
            .and_then(|()| ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]))
            .and_then(|()| ip(&["-n", &hub, "addr", "add", &hub_addr, "dev", "br0"]))
            .and_then(|()| ip(&["-n", &hub, "link", "set", "br0", "up"]));
        // The lab is dropped (its namespaces deleted) when it cannot be completed.
        built.map_err(|e| Unavailable(format!("cannot build a bridge in a namespace: {e:#}")))?;
        Ok(lab)
    }

    /// Adds a namespace joined to the bridge with address `10.77.0.<host>` (2..=253).
    pub fn add_host(&self, host: u8) -> anyhow::Result<Host> {
        if !(2..NOWHERE_HOST).contains(&host) {
            bail!("host number {host} is outside 2..=253");
        }
        let netns = format!("{}-{host}", self.prefix);
        self.add_namespace(&netns)?;
        // The hub's end of the pair is named after the host; the host's end is its eth0.
        let hub_end = format!("h{host}");
        let addr = address(host);
        let cidr = format!("{addr}/24");
        ip(&[
            "-n", &self.hub, "link", "add", &hub_end, "type", "veth", "peer", "name", "eth0",
            "netns", &netns,
        ])?;
        ip(&["-n", &self.hub, "link", "set", &hub_end, "master", "br0"])?;
        ip(&["-n", &self.hub, "link", "set", &hub_end, "up"])?;
        ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        ip(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
        Ok(Host { netns, addr })
    }

    /// Cuts `isolated` off from each of `others`, both ways; the hub (the test) still reaches
    /// everyone. Undone by [`NetLab::heal`].
    pub fn partition(&self, isolated: &Host, others: &[&Host]) -> anyhow::Result<()> {
        for other in others {
            self.cut(&isolated.netns, other.addr)?;
            self.cut(&other.netns, isolated.addr)?;
        }
        Ok(())
    }

    /// Removes every cut [`NetLab::partition`] made.
    pub fn heal(&self) -> anyhow::Result<()> {
        let cuts = std::mem::take(&mut *self.cuts.lock().map_err(|_| anyhow!("lab poisoned"))?);
        for (netns, dest) in cuts {
            ip(&["-n", &netns, "route", "del", &format!("{dest}/32")])?;
        }
        Ok(())
    }

    /// Moves the calling thread into the hub namespace: sockets it opens from then on live
    /// there and reach every host. A namespace is per thread, so a tokio runtime whose threads
    /// should reach the lab calls this in `on_thread_start` (see [`NetLab::hub_entry`]).
    pub fn enter_hub(&self) -> anyhow::Result<()> {
        enter_namespace(&self.hub)
    }

    /// A closure that moves the calling thread into the hub, for `on_thread_start`; it reports
    /// a failure on stderr (a thread left outside the lab fails its first connection).
    pub fn hub_entry(&self) -> impl Fn() + Send + Sync + 'static {
        let hub = self.hub.clone();
        move || {
            if let Err(e) = enter_namespace(&hub) {
                eprintln!("netns: a runtime thread could not enter {hub}: {e:#}");
            }
        }
    }

    fn cut(&self, netns: &str, dest: Ipv4Addr) -> anyhow::Result<()> {
        ip(&[
            "-n",
            netns,
            "route",
            "add",
            &format!("{dest}/32"),
            "via",
            &address(NOWHERE_HOST).to_string(),
            "dev",
            "eth0",
        ])?;
        self.cuts
            .lock()
            .map_err(|_| anyhow!("lab poisoned"))?
            .push((netns.to_owned(), dest));
        Ok(())
    }

    fn add_namespace(&self, name: &str) -> anyhow::Result<()> {
        ip(&["netns", "add", name])?;
        self.namespaces
            .lock()
            .map_err(|_| anyhow!("lab poisoned"))?
            .push(name.to_owned());
        Ok(())
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        let namespaces = match self.namespaces.lock() {
            Ok(mut names) => std::mem::take(&mut *names),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        // Hosts first: deleting a namespace deletes its end of the veth pair, and the hub's
        // bridge last. A namespace a process still runs in lives on, unnamed, until it exits.
        for name in namespaces.iter().rev() {
            if let Err(e) = ip(&["netns", "del", name]) {
                eprintln!("netns: could not delete {name}: {e:#}");
            }
        }
    }
}

/// `10.77.0.<host>`.
pub fn address(host: u8) -> Ipv4Addr {
    let [a, b, c] = SUBNET_PREFIX;
    Ipv4Addr::new(a, b, c, host)
}

/// A command that runs `program` inside `netns` (`ip netns exec`, which execs it: the child's
/// pid is the program's).
pub fn command_in(netns: &str, program: &std::path::Path) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns]).arg(program);
    cmd
}

fn enter_namespace(name: &str) -> anyhow::Result<()> {
    let path = format!("/run/netns/{name}");
    let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
    rustix::thread::move_into_link_name_space(
        file.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .with_context(|| format!("setns into {path}"))
}

/// Runs `ip args...`, failing with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !output.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
