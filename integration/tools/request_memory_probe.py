#!/usr/bin/env python3
"""Peak resident memory of a fresh node serving one large hand-built request per KIND.

Starts `gregor node` on ephemeral ports, sends one request frame of about FRAME_MB megabytes,
reads the answer, and prints the node's peak (VmHWM) against its resident memory before the
request. Linux only. Kinds: see `build`; a kind ending in `_authz` is sent to a node with the
authorizer (see `AUTHZ`)."""
import itertools, re, shutil, socket, struct, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]  # usage: request_memory_probe.py GREGOR_BIN FRAME_MB KIND...
# The authorizer, everyone allowed where no ACL applies; then `AUTHZ_ACLS` for User:ANONYMOUS
# (the probe's principal) make each topic of a CreateTopics be checked, one name in 3,844 denied.
AUTHZ = ["authorizer.class.name=StandardAuthorizer", "allow.everyone.if.no.acl.found=true"]

def start(auto_create=False, authz=False):
    d = tempfile.mkdtemp(prefix="memprobe-")
    overrides = [f"log.dirs={d}/data", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "metrics.listener=127.0.0.1:0", f"auto.create.topics.enable={str(auto_create).lower()}"]
    overrides += AUTHZ if authz else []
    p = subprocess.Popen([BIN, "node"] + [a for o in overrides for a in ("--override", o)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in p.stderr:
        m = re.search(r"listeners=PLAINTEXT://([\d.]+):(\d+)", line)
        if "node ready" in line and m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, (m.group(1), int(m.group(2))), d
    raise SystemExit("no ready line")

def status(pid, key):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(key):
            return int(l.split()[1]) * 1024

def header(api, ver, flexible):
    h = struct.pack(">hhi", api, ver, 7) + struct.pack(">h", 1) + b"x"
    if flexible: h += b"\x00"
    return h

def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7f) | 0x80]); n >>= 7
    return out + bytes([n])

def compact(text):
    return uvarint(len(text) + 1) + text

def acl(resource_type, name, pattern, operation, permission):
    """CreateAcls v3's AclCreation for User:ANONYMOUS from any host."""
    return (bytes([resource_type]) + compact(name) + bytes([pattern]) + compact(b"User:ANONYMOUS")
        + compact(b"*") + bytes([operation, permission]) + b"\x00")

# DENY CREATE on the cluster (so CREATE is checked on each topic), DENY CREATE on the topics
# prefixed "ab".
AUTHZ_ACLS = [acl(4, b"kafka-cluster", 3, 5, 2), acl(2, b"ab", 4, 5, 2)]

def send_and_read(s, body):
    s.sendall(struct.pack(">i", len(body)) + body)
    want = struct.unpack(">i", recv_exactly(s, 4))[0]
    return recv_exactly(s, want)

def recv_exactly(s, n):
    out = b""
    while len(out) < n:
        c = s.recv(n - len(out))
        if not c: raise SystemExit("closed")
        out += c
    return out

def distinct_names(n):
    """Up to `n` distinct four-letter names (14.8 million at most)."""
    alpha = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return [bytes(t) for t in itertools.islice(itertools.product(alpha, repeat=4), n)]

def build(kind, size):
    # Returns a frame body of about `size` bytes.
    if kind == "metadata_v1_empty":
        n = (size - 20) // 2
        return header(3, 1, False) + struct.pack(">i", n) + b"\x00\x00" * n
    if kind in ("metadata_v1_distinct", "metadata_v1_distinct_create"):
        # distinct 4-char names (6 bytes each)
        names = distinct_names((size - 20) // 6)
        return header(3, 1, False) + struct.pack(">i", len(names)) + b"".join(b"\x00\x04" + t for t in names)
    if kind == "metadata_v12_ids":
        # flexible: topics compact array of {topic_id uuid, name compact nullable (0 = null), tags}
        n = (size - 30) // 18
        body = uvarint(n + 1) + (b"\x00" * 16 + b"\x00" + b"\x00") * n
        return header(3, 12, True) + body + b"\x00\x00\x00"  # allow_auto, include_topic_ops, tags
    if kind == "create_topics_v7_empty":
        # topics: name(compact "" = 0x01) num_partitions i32 rf i16 assignments(compact 0x01) configs(0x01) tags(0)
        n = (size - 30) // 11
        t = b"\x01" + struct.pack(">ih", 1, 1) + b"\x01\x01\x00"
        return header(19, 7, True) + uvarint(n + 1) + t * n + struct.pack(">i", 1000) + b"\x01\x00"
    if kind == "delete_topics_v6_empty":
        # topics: name compact nullable "" (0x01), topic_id uuid, tags
        n = (size - 30) // 18
        t = b"\x01" + b"\x00" * 16 + b"\x00"
        return header(20, 6, True) + uvarint(n + 1) + t * n + struct.pack(">i", 1000) + b"\x00"
    if kind == "delete_topics_v6_null":
        # topics: name compact nullable null (0x00), topic_id zero uuid, tags: each answered on its own
        n = (size - 30) // 18
        t = b"\x00" + b"\x00" * 16 + b"\x00"
        return header(20, 6, True) + uvarint(n + 1) + t * n + struct.pack(">i", 1000) + b"\x00"
    if kind == "delete_topics_v4_empty":
        n = (size - 30) // 2
        return header(20, 4, True) + uvarint(n + 1) + b"\x01" * n + struct.pack(">i", 1000) + b"\x00"
    if kind == "describe_configs_v4_empty":
        # resources: type i8, name compact "" , config_names compact nullable null(0), tags
        n = (size - 30) // 4
        t = b"\x02" + b"\x01" + b"\x00" + b"\x00"
        return header(32, 4, True) + uvarint(n + 1) + t * n + b"\x00\x00\x00"
    if kind == "describe_configs_v4_names":
        # one topic resource with N empty config names
        n = (size - 40) // 1
        return header(32, 4, True) + uvarint(2) + b"\x02\x02t" + uvarint(n + 1) + b"\x01" * n + b"\x00" + b"\x00\x00\x00"
    if kind == "alter_client_quotas_v1_empty":
        # entries: entity compact array(1 elem: type compact "ip"? ) ops compact empty, tags
        n = (size - 30) // 3
        t = b"\x01\x01\x00"  # entity empty, ops empty, tags
        return header(49, 1, True) + uvarint(n + 1) + t * n + b"\x00\x00"
    if kind == "describe_client_quotas_v1":
        # components: entity_type compact "", match_type i8, match compact nullable null, tags
        n = (size - 30) // 4
        t = b"\x01\x01\x00\x00"
        return header(48, 1, True) + uvarint(n + 1) + t * n + b"\x00\x00"
    if kind == "incremental_alter_configs_v1":
        n = (size - 30) // 4
        t = b"\x02\x01\x01\x00"  # type topic, name "", configs empty, tags
        return header(44, 1, True) + uvarint(n + 1) + t * n + b"\x00\x00"
    if kind == "create_partitions_v3":
        n = (size - 30) // 7
        t = b"\x01" + struct.pack(">i", 2) + b"\x00\x00"  # name "", count, assignments null, tags
        return header(37, 3, True) + uvarint(n + 1) + t * n + struct.pack(">i", 1000) + b"\x00\x00"
    if kind == "produce_v9_distinct_partitions":
        # one topic "t" with partitions 0, 1, 2, ... {index, records empty, tags}
        n = (size - 60) // 6
        prefix = b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02\x02t"
        body = b"".join(struct.pack(">i", i) + b"\x01\x00" for i in range(n))
        return header(0, 9, True) + prefix + uvarint(n + 1) + body + b"\x00\x00"
    if kind == "fetch_v12_distinct_partitions":
        # one topic "t" with partitions 0, 1, 2, ... {index, leader epoch -1, offset 0,
        # last epoch -1, log start -1, max bytes 1 MiB, tags}
        n = (size - 80) // 33
        prefix = I32(-1) + I32(0) + I32(1) + I32(1 << 20) + b"\x00" + I32(0) + I32(-1) + b"\x02\x02t"
        tail = I32(-1) + struct.pack(">q", 0) + I32(-1) + struct.pack(">q", -1) + I32(1 << 20) + b"\x00"
        body = b"".join(struct.pack(">i", i) + tail for i in range(n))
        return header(1, 12, True) + prefix + uvarint(n + 1) + body + b"\x00\x01\x01\x00"
    if kind in ("create_topics_v7_distinct", "create_topics_v7_no_partitions", "create_topics_v7_twice"):
        # distinct 4-char names {name, 1 partition (0: `_no_partitions`), replication 1, no
        # assignments, no configs, tags}; `_twice`: the list, then the same list again
        twice = kind.endswith("_twice")
        names = distinct_names((size - 40) // (28 if twice else 14))
        partitions = 0 if kind.endswith("_no_partitions") else 1
        topic = I32(partitions) + struct.pack(">h", 1) + b"\x01\x01\x00"
        body = b"".join(b"\x05" + t + topic for t in names) * (2 if twice else 1)
        count = len(names) * (2 if twice else 1)
        return header(19, 7, True) + uvarint(count + 1) + body + I32(1000) + b"\x00\x00"
    if kind in REPEATED:
        api, ver, flexible, prefix, elem, suffix = REPEATED[kind]
        n = (size - 40 - len(prefix) - len(suffix)) // len(elem)
        count = uvarint(n + 1) if flexible else struct.pack(">i", n)
        return header(api, ver, flexible) + prefix + count + elem * n + suffix
    # Lists of distinct four-letter names or partitions, which no reduction of repeats shrinks.
    if kind == "describe_groups_v5_distinct":
        names = distinct_names((size - 30) // 5)
        return header(15, 5, True) + uvarint(len(names) + 1) + b"".join(b"\x05" + n for n in names) + b"\x00\x00"
    if kind == "consumer_group_describe_v0_distinct":
        names = distinct_names((size - 30) // 5)
        return header(69, 0, True) + uvarint(len(names) + 1) + b"".join(b"\x05" + n for n in names) + b"\x00\x00"
    if kind == "delete_groups_v2_distinct":
        names = distinct_names((size - 30) // 5)
        return header(42, 2, True) + uvarint(len(names) + 1) + b"".join(b"\x05" + n for n in names) + b"\x00"
    if kind == "offset_fetch_v8_distinct_groups":
        # {group_id, topics null (all), tags}
        names = distinct_names((size - 30) // 7)
        return header(9, 8, True) + uvarint(len(names) + 1) + b"".join(b"\x05" + n + b"\x00\x00" for n in names) + b"\x00\x00"
    if kind == "delete_topics_v4_distinct":
        names = distinct_names((size - 30) // 5)
        return header(20, 4, True) + uvarint(len(names) + 1) + b"".join(b"\x05" + n for n in names) + struct.pack(">i", 1000) + b"\x00"
    if kind == "describe_configs_v4_distinct":
        # {resource_type TOPIC, name, configuration_keys null, tags}
        names = distinct_names((size - 30) // 8)
        return header(32, 4, True) + uvarint(len(names) + 1) + b"".join(b"\x02\x05" + n + b"\x00\x00" for n in names) + b"\x00\x00\x00"
    if kind == "list_offsets_v7_distinct_partitions":
        # one topic "t": {partition, current_leader_epoch -1, timestamp -1, tags}
        n = (size - 40) // 17
        parts = b"".join(struct.pack(">iiq", i, -1, -1) + b"\x00" for i in range(n))
        return header(2, 7, True) + struct.pack(">ib", -1, 0) + uvarint(2) + compact(b"t") + uvarint(n + 1) + parts + b"\x00\x00"
    raise SystemExit(kind)

I32 = lambda v: struct.pack(">i", v)
# kind: (api key, version, flexible, bytes before the list, one element, bytes after the list).
# Each repeats the smallest element of the request's largest list.
REPEATED = {
    # OffsetCommit v8: group "g", generation -1, member "", instance null; topics {"" , [], tags}
    "offset_commit_v8_topics": (8, 8, True, b"\x02g" + I32(-1) + b"\x01\x00", b"\x01\x01\x00", b"\x00"),
    # one topic "t" with partitions {0, offset 0, epoch -1, metadata null, tags}
    "offset_commit_v8_partitions": (8, 8, True, b"\x02g" + I32(-1) + b"\x01\x00" + b"\x02\x02t",
        I32(0) + struct.pack(">q", 0) + I32(-1) + b"\x00\x00", b"\x00\x00"),
    # OffsetFetch v8: groups {"", topics null, tags}, require_stable
    "offset_fetch_v8_groups": (9, 8, True, b"", b"\x01\x00\x00", b"\x00\x00"),
    # one group "g" with topics {"", [], tags}
    "offset_fetch_v8_topics": (9, 8, True, b"\x02\x02g", b"\x01\x01\x00", b"\x00\x00\x00"),
    # OffsetDelete v0: group "g", topics {"" , []}
    "offset_delete_v0_topics": (47, 0, False, b"\x00\x01g", b"\x00\x00" + I32(0), b""),
    # ListOffsets v7: replica -1, isolation 0, topics {"", [], tags}
    "list_offsets_v7_topics": (2, 7, True, I32(-1) + b"\x00", b"\x01\x01\x00", b"\x00"),
    # Fetch v12: replica -1, wait 0, min 1, max 1 MiB, isolation 0, session 0/-1; topics {"", [], tags}
    "fetch_v12_topics": (1, 12, True, I32(-1) + I32(0) + I32(1) + I32(1 << 20) + b"\x00" + I32(0) + I32(-1),
        b"\x01\x01\x00", b"\x01\x01\x00"),
    # Produce v9: transactional id null, acks 1, timeout; topics {"", [], tags}
    "produce_v9_topics": (0, 9, True, b"\x00" + struct.pack(">h", 1) + I32(1000), b"\x01\x01\x00", b"\x00"),
    # one topic "t" with partition 0 repeated: {0, records empty, tags}
    "produce_v9_partitions": (0, 9, True, b"\x00" + struct.pack(">h", 1) + I32(1000) + b"\x02\x02t",
        I32(0) + b"\x01\x00", b"\x00\x00"),
    # one topic "t" with partition 0 repeated: {0, leader epoch -1, offset 0, last epoch -1,
    # log start -1, max bytes 1 MiB, tags}
    "fetch_v12_partitions": (1, 12, True, I32(-1) + I32(0) + I32(1) + I32(1 << 20) + b"\x00" + I32(0) + I32(-1)
        + b"\x02\x02t", I32(0) + I32(-1) + struct.pack(">q", 0) + I32(-1) + struct.pack(">q", -1) + I32(1 << 20) + b"\x00",
        b"\x00\x01\x01\x00"),
    "describe_groups_v5_empty": (15, 5, True, b"", b"\x01", b"\x00\x00"),
    "delete_groups_v2_empty": (42, 2, True, b"", b"\x01", b"\x00"),
    "list_groups_v4_states": (16, 4, True, b"", b"\x01", b"\x00"),
    "consumer_group_describe_v0_empty": (69, 0, True, b"", b"\x01", b"\x00\x00"),
    # CreateAcls v3: {topic, "", literal, "", "", read, allow, tags}
    "create_acls_v3": (30, 3, True, b"", b"\x02\x01\x03\x01\x01\x03\x03\x00", b"\x00"),
    # DeleteAcls v3: {topic, null, literal, null, null, read, allow, tags}
    "delete_acls_v3": (31, 3, True, b"", b"\x02\x00\x03\x00\x00\x03\x03\x00", b"\x00"),
    "alter_partition_reassignments_v0": (45, 0, True, I32(1000), b"\x01\x01\x00", b"\x00"),
    "list_partition_reassignments_v0": (46, 0, True, I32(1000), b"\x01\x01\x00", b"\x00"),
    "elect_leaders_v2": (43, 2, True, b"\x00", b"\x01\x01\x00", I32(1000) + b"\x00"),
    "describe_producers_v0": (61, 0, True, b"", b"\x01\x01\x00", b"\x00"),
    "describe_log_dirs_v4": (35, 4, True, b"", b"\x01\x01\x00", b"\x00"),
    "delete_records_v2": (21, 2, True, b"", b"\x01\x01\x00", I32(1000) + b"\x00"),
    # OffsetForLeaderEpoch v4: replica -1; topics {"", [], tags}
    "offset_for_leader_epoch_v4": (23, 4, True, I32(-1), b"\x01\x01\x00", b"\x00"),
    "describe_scram_v0": (50, 0, True, b"", b"\x01\x00", b"\x00"),
    "alter_scram_v0_deletions": (51, 0, True, b"", b"\x01\x01\x00", b"\x01\x00"),
    # AlterConfigs v2: {topic, "", [], tags}
    "alter_configs_v2_empty": (33, 2, True, b"", b"\x02\x01\x01\x00", b"\x00\x00"),
    # IncrementalAlterConfigs v1, one topic "t" with configs {"", set, null, tags}
    "incremental_alter_configs_v1_configs": (44, 1, True, b"\x02\x02\x02t", b"\x01\x00\x00\x00", b"\x00\x00\x00"),
    # CreateTopics v7, one topic "t" with configs {"", null, tags}
    "create_topics_v7_configs": (19, 7, True, b"\x02\x02t" + I32(1) + struct.pack(">h", 1) + b"\x01",
        b"\x01\x00\x00", b"\x00" + I32(1000) + b"\x00\x00"),
    # CreateTopics v7, one topic "t" with assignments {0, [], tags}
    "create_topics_v7_assignments": (19, 7, True, b"\x02\x02t" + I32(-1) + struct.pack(">h", -1),
        I32(0) + b"\x01\x00", b"\x01\x00" + I32(1000) + b"\x00\x00"),
    # AlterClientQuotas v1, one entry with ops {"", 1.0, false, tags}
    "alter_client_quotas_v1_ops": (49, 1, True, b"\x02\x01", b"\x01" + struct.pack(">d", 1.0) + b"\x00\x00",
        b"\x00\x00\x00"),
    # Metadata v12 null names, zero ids (already), v1 distinct see above
}

def run(kind, size):
    # `..._create`: on a node that auto-creates topics (Kafka's default); `..._authz`: with the
    # authorizer and `AUTHZ_ACLS`.
    authz = kind.endswith("_authz")
    base_kind = kind[:-len("_authz")] if authz else kind
    p, addr, data = start(auto_create=base_kind.endswith("_create"), authz=authz)
    s = socket.create_connection(addr)
    if authz:
        send_and_read(s, header(30, 3, True) + uvarint(len(AUTHZ_ACLS) + 1) + b"".join(AUTHZ_ACLS) + b"\x00")
    body = build(base_kind, size)
    base = status(p.pid, "VmRSS")
    s.sendall(struct.pack(">i", len(body)) + body)
    del body
    s.settimeout(600)
    hdr = b""
    t0 = time.time()
    try:
        while len(hdr) < 4:
            c = s.recv(4 - len(hdr))
            if not c: break
            hdr += c
        got = 0
        if len(hdr) == 4:
            want = struct.unpack(">i", hdr)[0]
            while got < want:
                c = s.recv(1 << 20)
                if not c: break
                got += len(c)
        answered = f"response {got} B" if len(hdr) == 4 else "closed"
    except Exception as e:
        answered = f"error {e}"
    peak = status(p.pid, "VmHWM")
    p.kill(); p.wait()
    shutil.rmtree(data, ignore_errors=True)
    print(f"{kind:32} frame {size/1e6:7.1f} MB  base {base/1e6:6.1f} MB  peak {peak/1e6:8.1f} MB  ratio {(peak-base)/size:5.1f}x  {answered}  {time.time()-t0:.1f}s", flush=True)

size = int(float(sys.argv[2]) * 1e6)
for kind in sys.argv[3:]:
    run(kind, size)
