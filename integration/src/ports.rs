//! Ports for listeners that must be named before a node starts (controllers, whose addresses
//! go into `--initial-controllers` and `controller.quorum.bootstrap.servers`).
//!
//! Binding port 0 and closing it again is racy: the kernel hands the same ephemeral port to the
//! next `bind(0)` or outgoing connection of any test running alongside, and the node then fails
//! to bind. So a reserved port is taken below the ephemeral range (which neither `bind(0)` nor
//! `connect` ever uses) and claimed with an exclusive lock on a file named after it, held until
//! this process exits. The Python tests (`integration/python/ports.py`) lock the same files, so
//! the two suites never pick the same port either.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context};
use rand::Rng;

/// The lowest port handed out: above the well-known and most registered service ports.
const LOWEST: u16 = 10_000;

/// Lock files of the ports this process reserved: dropping one would release its port.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A port on 127.0.0.1 that is free now and that no other test process will be given until this
/// one exits.
pub fn reserve_port() -> anyhow::Result<u16> {
    let below = ephemeral_low();
    if below <= LOWEST {
        bail!("the ephemeral port range starts at {below}: no ports are left below it to reserve");
    }
    let directory = std::env::temp_dir().join("gregor-test-ports");
    std::fs::create_dir_all(&directory)
        .with_context(|| format!("creating {}", directory.display()))?;
    let mut rng = rand::rng();
    for _ in 0..1_000 {
        let port = rng.random_range(LOWEST..below);
        let path: PathBuf = directory.join(port.to_string());
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if lock.try_lock().is_err() {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        HELD.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(lock);
        return Ok(port);
    }
    bail!("no free port found in {LOWEST}..{below} after 1,000 tries")
}

/// The first port of the kernel's ephemeral range (32768 if it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..20).map(|_| reserve_port().unwrap()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len());
        for port in ports {
            assert!((LOWEST..ephemeral_low()).contains(&port));
            assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
        }
    }
}
