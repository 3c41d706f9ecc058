"""Group coordinator benchmarks beside this machine's floor, measured in one run (BENCHMARKS.md,
"Group coordinator").

Floor: a Python loopback echo of small frames, one request in flight (the same client pattern
as the measurements). Measurements, each on raw sockets so the coordinator is what is timed:
  * KIP-848: 100 members join an empty group over a 1,000-partition topic, each heartbeating
    back to back and reporting the assignment it was given (it revokes at once), until every
    member is at the group's epoch with disjoint assignments covering every partition; then one
    member leaves and the rest converge again.
  * Classic: the same 100 members as JoinGroup/SyncGroup members (one connection and thread
    each); one member leaves and the time until every other member has synced the next
    generation is measured (heartbeats answer REBALANCE_IN_PROGRESS, members rejoin).
  * OffsetCommit requests per second on one connection (1 and 100 partitions per request).
  * Coordinator load: 100 groups x 1,000 committed offsets (100,000), the node killed with
    SIGKILL and restarted; time from the new process's start until every group's OffsetFetch
    answers.

Usage: group_bench.py GREGOR_BINARY [--json]
"""

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.protocol.consumer.group import (  # noqa: E402
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse  # noqa: E402

import conftest  # noqa: E402
from conftest import RawConn  # noqa: E402

MEMBERS = 100
PARTITIONS = 1000


def echo_floor(seconds=2.0):
    """Round trips per second of 64-byte frames on one loopback connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(64)
            if not data:
                return
            conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    client = socket.create_connection(server.getsockname())
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frame = b"x" * 64
    count, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        client.sendall(frame)
        got = 0
        while got < 64:
            got += len(client.recv(64 - got))
        count += 1
    client.close()
    return count / (time.monotonic() - start)


def wait_coordinator(conn, group):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        resp = conn.send(FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
        if resp.error_code == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("no coordinator")


# ConsumerGroupHeartbeat v0 by hand (kafka-python has no class for it).

def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def read_uvarint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def cstr(s):
    if s is None:
        return b"\x00"
    data = s.encode()
    return uvarint(len(data) + 1) + data


def read_cstr(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos:pos + n - 1].decode(), pos + n - 1


def skip_tags(buf, pos):
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def heartbeat(conn, group, member_id, epoch, topics=None, owned=None):
    conn.correlation_id += 1
    header = struct.pack(">hhi", 68, 0, conn.correlation_id) + struct.pack(">h", 5) + b"bench" + b"\x00"
    body = cstr(group) + cstr(member_id) + struct.pack(">i", epoch) + cstr(None) + cstr(None)
    body += struct.pack(">i", 300000 if epoch == 0 else -1)
    body += b"\x00" if topics is None else uvarint(len(topics) + 1) + b"".join(cstr(t) for t in topics)
    body += cstr(None)
    if owned is None:
        body += b"\x00"
    else:
        body += uvarint(len(owned) + 1)
        for topic_id, partitions in owned.items():
            body += topic_id + uvarint(len(partitions) + 1) + b"".join(struct.pack(">i", p) for p in sorted(partitions))
            body += b"\x00"
    body += b"\x00"
    frame = header + body
    conn.send_bytes(struct.pack(">i", len(frame)) + frame)
    resp = conn.recv_frame()
    pos = 5
    _, error = struct.unpack_from(">ih", resp, pos)
    pos += 6
    _, pos = read_cstr(resp, pos)
    member, pos = read_cstr(resp, pos)
    member_epoch, _interval = struct.unpack_from(">ii", resp, pos)
    pos += 8
    assignment = None
    if resp[pos] != 0xFF:
        pos += 1
        assignment = {}
        count, pos = read_uvarint(resp, pos)
        for _ in range(count - 1):
            topic_id = resp[pos:pos + 16]
            pos += 16
            n, pos = read_uvarint(resp, pos)
            parts = struct.unpack_from(f">{n - 1}i", resp, pos)
            pos += 4 * (n - 1)
            pos = skip_tags(resp, pos)
            assignment[topic_id] = set(parts)
    if error:
        raise RuntimeError(f"heartbeat error {error}")
    return member, member_epoch, assignment


def kip848_rebalance(node, topic):
    group = "bench-848"
    conn = RawConn(node.bootstrap)
    wait_coordinator(conn, group)
    members = {}
    heartbeats = 1
    while True:
        try:
            member, epoch, assignment = heartbeat(conn, group, "", 0, topics=[topic], owned={})
            break
        except RuntimeError:
            time.sleep(0.01)
    members[member] = [epoch, assignment or {}]
    start = time.monotonic()
    for i in range(MEMBERS - 1):
        member, epoch, assignment = heartbeat(conn, group, "", 0, topics=[topic], owned={})
        heartbeats += 1
        members[member] = [epoch, assignment or {}]

    def converge():
        nonlocal heartbeats
        while True:
            changed = False
            for member, state in members.items():
                _, epoch, assignment = heartbeat(conn, group, member, state[0], owned=state[1])
                heartbeats += 1
                if assignment is not None and assignment != state[1]:
                    state[1] = assignment
                    changed = True
                if epoch != state[0]:
                    state[0] = epoch
                    changed = True
            epochs = {s[0] for s in members.values()}
            owned = [p for s in members.values() for ps in s[1].values() for p in ps]
            if not changed and len(epochs) == 1 and len(owned) == PARTITIONS and len(set(owned)) == PARTITIONS:
                return

    converge()
    joined = time.monotonic() - start
    joined_heartbeats = heartbeats
    leaver = next(iter(members))
    heartbeats = 0
    start = time.monotonic()
    heartbeat(conn, group, leaver, -1)
    del members[leaver]
    converge()
    left = time.monotonic() - start
    conn.close()
    return {"join_100_s": joined, "join_heartbeats": joined_heartbeats, "leave_1_s": left,
            "leave_heartbeats": heartbeats}


def classic_rebalance(node, topic):
    group = "bench-classic"
    probe = RawConn(node.bootstrap)
    wait_coordinator(probe, group)
    probe.close()
    synced = {}
    lock = threading.Lock()
    stop = threading.Event()
    leave_now = threading.Event()

    def member(index):
        conn = RawConn(node.bootstrap, timeout=120)
        member_id = ""
        protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]
        while not stop.is_set():
            join = conn.send(JoinGroupRequest[5](group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=60000,
                                                 member_id=member_id, group_instance_id=None,
                                                 protocol_type="consumer", protocols=protocols),
                             JoinGroupResponse)
            if join.error_code == 79:
                member_id = join.member_id
                continue
            if join.error_code:
                time.sleep(0.01)
                continue
            member_id = join.member_id
            assignments = []
            if join.leader == member_id:
                assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"a")
                               for m in join.members]
            sync = conn.send(SyncGroupRequest[3](group_id=group, generation_id=join.generation_id, member_id=member_id,
                                                 group_instance_id=None, assignments=assignments),
                             SyncGroupResponse)
            if sync.error_code:
                continue
            with lock:
                synced[member_id] = join.generation_id
            while not stop.is_set():
                if index == 0 and leave_now.is_set():
                    identity = LeaveGroupRequest.MemberIdentity(member_id=member_id, group_instance_id=None)
                    conn.send(LeaveGroupRequest[3](group_id=group, members=[identity]), LeaveGroupResponse)
                    conn.close()
                    return
                beat = conn.send(HeartbeatRequest[3](group_id=group, generation_id=join.generation_id,
                                                     member_id=member_id, group_instance_id=None), HeartbeatResponse)
                if beat.error_code:
                    break
                time.sleep(0.05)
        conn.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(MEMBERS)]
    for t in threads:
        t.start()

    def settled(count):
        with lock:
            generations = set(synced.values())
            return len(synced) >= count and len(generations) == 1 and generations

    deadline = time.monotonic() + 300
    while not settled(MEMBERS) and time.monotonic() < deadline:
        time.sleep(0.01)
    generation = next(iter(settled(MEMBERS) or {0}))
    with lock:
        synced.clear()
    start = time.monotonic()
    leave_now.set()
    while time.monotonic() < deadline:
        with lock:
            done = len([g for g in synced.values() if g > generation]) >= MEMBERS - 1
        if done:
            break
        time.sleep(0.005)
    left = time.monotonic() - start
    stop.set()
    return {"leave_1_s": left}


def commit_request(group, topic, partitions, offset):
    parts = [OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=None)
        for p in partitions]
    return OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None,
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=parts)])


def commit_ok(resp):
    return all(p.error_code == 0 for t in resp.topics for p in t.partitions)


def commit_rate(node, topic, per_request, seconds=3.0):
    group = f"bench-commit-{per_request}"
    conn = RawConn(node.bootstrap)
    wait_coordinator(conn, group)
    count, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        resp = conn.send(commit_request(group, topic, range(per_request), count), OffsetCommitResponse)
        assert commit_ok(resp), {p.error_code for t in resp.topics for p in t.partitions}
        count += 1
    elapsed = time.monotonic() - start
    conn.close()
    return {"requests_per_s": count / elapsed, "offsets_per_s": count * per_request / elapsed}


def load_time(node, topic, clean=False):
    """`clean`: a SIGTERM (controlled shutdown) instead of SIGKILL before the restart."""
    conn = RawConn(node.bootstrap)
    groups = [f"bench-load-{i}" for i in range(100)]
    for group in groups:
        wait_coordinator(conn, group)
        while True:
            resp = conn.send(commit_request(group, topic, range(PARTITIONS), 7), OffsetCommitResponse)
            codes = {p.error_code for t in resp.topics for p in t.partitions}
            if codes == {0}:
                break
            assert codes <= {14, 15, 16}, codes
            time.sleep(0.01)
    conn.close()
    if clean:
        node.proc.terminate()
        node.proc.wait(timeout=120)
    node.kill9()
    start = time.monotonic()
    node.start()
    ready = time.monotonic() - start
    conn = RawConn(node.bootstrap)
    for group in groups:
        while True:
            resp = conn.send(FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
            if resp.error_code == 0:
                fetched = conn.send(OffsetFetchRequest[7](group_id=group, topics=None, require_stable=False),
                                    OffsetFetchResponse)
                if fetched.error_code == 0:
                    assert sum(len(t.partitions) for t in fetched.topics) == PARTITIONS
                    break
            time.sleep(0.005)
    loaded = time.monotonic() - start
    conn.close()
    # The replay itself: from the first to the last partition loaded, from the node's log.
    stamps = [line[:27] for line in node.log().splitlines()[-400:] if "loaded __consumer_offsets partition" in line]
    return {"offsets": 100 * PARTITIONS, "node_ready_s": ready, "all_groups_fetchable_s": loaded,
            "first_to_last_partition_loaded": f"{stamps[0]} .. {stamps[-1]}" if stamps else None}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["GREGOR_BIN"] = os.path.abspath(args.binary)
    results = {"echo_rt_per_s": echo_floor()}
    node = conftest.Node({"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
                          "offsets.topic.replication.factor": "1"})
    try:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
        admin.create_topics([NewTopic("bench", PARTITIONS, 1)])
        admin.close()
        results["kip848"] = kip848_rebalance(node, "bench")
        results["classic"] = classic_rebalance(node, "bench")
        results["commit_1"] = commit_rate(node, "bench", 1)
        results["commit_100"] = commit_rate(node, "bench", 100)
        results["load_after_sigkill"] = load_time(node, "bench")
        results["load_after_sigterm"] = load_time(node, "bench", clean=True)
        results["echo_rt_per_s_after"] = echo_floor()
    finally:
        node.close()
    print(json.dumps(results, indent=2) if args.json else results)


if __name__ == "__main__":
    main()
