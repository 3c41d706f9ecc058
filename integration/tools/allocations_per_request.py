#!/usr/bin/env python3
"""Heap allocations per request of a running node, counted by the kernel.

Starts `gregor node` (a release build, which links mimalloc) on ephemeral ports, creates one
1-partition topic, puts uprobes on mimalloc's allocation entry points in the binary
(`mi_malloc_aligned`, `mi_zalloc_aligned`, `mi_realloc_aligned`: Rust's global allocator calls
nothing else), and for each request kind counts the node's calls while one connection sends
REQUESTS (default 20,000) requests one at a time; the same span of idle time is counted and
subtracted. Needs root (uprobes) and `perf`. Linux only.

usage: allocations_per_request.py GREGOR_BIN [REQUESTS]"""
import shutil, signal, socket, struct, subprocess, sys, time

from node_process import start_node

PROBES = ["mi_malloc_aligned", "mi_zalloc_aligned", "mi_realloc_aligned"]
TOPIC = b"alloc-probe"


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def compact(s):
    return uvarint(len(s) + 1) + s


def frame(api, version, body):
    # Request header v2: key, version, correlation id, client id "probe", no tagged fields.
    header = struct.pack(">hhih", api, version, 7, 5) + b"probe" + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


API_VERSIONS_V3 = frame(18, 3, compact(b"probe") + compact(b"1.0") + b"\x00")
# Metadata v12 naming one topic: topics [ {topic_id nil, name}], no auto-creation, no operations.
METADATA_V12_ONE_TOPIC = frame(3, 12, uvarint(2) + bytes(16) + compact(TOPIC) + b"\x00"
                               + b"\x00" + b"\x00" + b"\x00")
# CreateTopics v5: one topic, 1 partition, replication factor 1, timeout 10 s.
CREATE_TOPIC = frame(19, 5, uvarint(2) + compact(TOPIC) + struct.pack(">ih", 1, 1)
                     + uvarint(1) + uvarint(1) + b"\x00" + struct.pack(">i", 10000) + b"\x00" + b"\x00")


def read_answer(sock):
    size = b""
    while len(size) < 4:
        chunk = sock.recv(4 - len(size))
        if not chunk:
            raise SystemExit("the node closed the connection")
        size += chunk
    left = struct.unpack(">i", size)[0]
    body = b""
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            raise SystemExit("the node closed the connection")
        body += chunk
        left -= len(chunk)
    return body


def counted(pid, work):
    """Runs `work` while perf counts the node's allocation calls; returns (calls, seconds)."""
    events = ",".join(f"probe_gregor:{p}" for p in PROBES)
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(pid)],
                            stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # perf attaches
    started = time.monotonic()
    work()
    elapsed = time.monotonic() - started
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate()
    calls = 0
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("probe_gregor:"):
            calls += int(fields[0]) if fields[0].isdigit() else 0
    return calls, elapsed + 0.5


def main():
    binary = sys.argv[1]
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    node, addr, data = start_node(binary, prefix="allocprobe-")
    try:
        for probe in PROBES:
            subprocess.run(["perf", "probe", "-q", "-x", binary, "-a", probe], check=True)
        sock = socket.create_connection(addr)
        sock.sendall(CREATE_TOPIC)
        read_answer(sock)
        for _ in range(1000):  # warm up: caches, sensors, the connection's buffers
            sock.sendall(API_VERSIONS_V3)
            read_answer(sock)
            sock.sendall(METADATA_V12_ONE_TOPIC)
            read_answer(sock)
        idle, idle_secs = counted(node.pid, lambda: time.sleep(2.0))
        for name, request in [("ApiVersions v3", API_VERSIONS_V3),
                              ("Metadata v12, 1 topic", METADATA_V12_ONE_TOPIC)]:
            def send():
                for _ in range(requests):
                    sock.sendall(request)
                    read_answer(sock)
            calls, secs = counted(node.pid, send)
            background = idle / idle_secs * secs
            print(f"{name}: {calls} allocation calls for {requests} requests in {secs:.2f} s; "
                  f"idle node {background:.0f} in the same time; "
                  f"{(calls - background) / requests:.2f} per request")
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", "probe_gregor:*"], check=False)
        node.kill()
        node.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
