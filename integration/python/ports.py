"""Ports for listeners that must be named before a node starts (controllers, whose addresses go
into `--initial-controllers`).

Binding port 0 and closing it again is racy: the kernel hands the same ephemeral port to the
next `bind(0)` or outgoing connection of any test running alongside, and the node then fails to
bind. So a reserved port is taken below the ephemeral range (which neither `bind(0)` nor
`connect` uses) and claimed with an exclusive lock on a file named after it, held until this
process exits. The Rust tests (`integration/src/ports.rs`) lock the same files.
"""

import fcntl
import os
import random
import socket
import tempfile

LOWEST = 10_000
_held = []


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def reserve_port():
    """A port on 127.0.0.1 free now that no other test process is given until this one exits."""
    below = _ephemeral_low()
    directory = os.path.join(tempfile.gettempdir(), "gregor-test-ports")
    os.makedirs(directory, exist_ok=True)
    for _ in range(1000):
        port = random.randrange(LOWEST, below)
        lock = open(os.path.join(directory, str(port)), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                lock.close()
                continue
        _held.append(lock)
        return port
    raise RuntimeError(f"no free port found in {LOWEST}..{below} after 1,000 tries")
