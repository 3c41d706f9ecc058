#!/usr/bin/env python3
"""Peak resident memory of a fresh node serving one large hand-built request per KIND.

Starts `gregor node` on ephemeral ports, sends one request frame of about FRAME_MB megabytes,
reads the answer, and prints the node's peak (VmHWM) against its resident memory before the
request. Linux only. Kinds: see `build`; a kind ending in `_authz` is sent to a node with the
authorizer (see `AUTHZ`), one of `AUTHORIZER_KINDS` too; `prepare` sends what some kinds need
first (a group coordinator, a group member, ACLs)."""
import itertools, shutil, socket, struct, sys, time, uuid

from node_process import start_node

BIN = sys.argv[1]  # usage: request_memory_probe.py GREGOR_BIN FRAME_MB KIND...
# The authorizer, everyone allowed where no ACL applies; then `AUTHZ_ACLS` for User:ANONYMOUS
# (the probe's principal) make each topic of a CreateTopics be checked, one name in 3,844 denied.
AUTHZ = ["authorizer.class.name=StandardAuthorizer", "allow.everyone.if.no.acl.found=true"]

def start(auto_create=False, authz=False):
    overrides = [f"auto.create.topics.enable={str(auto_create).lower()}"] + (AUTHZ if authz else [])
    return start_node(BIN, overrides, prefix="memprobe-")

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
    # The other APIs whose request carries a list with one entry per element (Gregor's
    # ApiVersions: DescribeTopicPartitions, TxnOffsetCommit, AddPartitionsToTxn and
    # WriteTxnMarkers are not served), at the newest version Gregor advertises, each with the
    # smallest valid-looking element made distinct by a four-letter name (5 bytes as a compact string) or
    # a partition number. Topics are not created: every one is unknown to the node.
    if kind in ("delete_topics_v6_distinct", "delete_topics_v6_distinct_ids"):
        # {name, zero topic id, tags}; `_ids`: {name null, distinct topic id, tags}
        if kind.endswith("_ids"):
            topics = [b"\x00" + struct.pack(">QQ", 0x67726567, i + 1) + b"\x00" for i in range((size - 30) // 18)]
        else:
            topics = [compact(n) + b"\x00" * 16 + b"\x00" for n in distinct_names((size - 30) // 22)]
        return header(20, 6, True) + uvarint(len(topics) + 1) + b"".join(topics) + I32(1000) + b"\x00"
    if kind == "create_partitions_v3_distinct":
        # {name, count 2, assignments null, tags}, timeout, validate_only false
        names = distinct_names((size - 30) // 11)
        topics = b"".join(compact(n) + I32(2) + b"\x00\x00" for n in names)
        return header(37, 3, True) + uvarint(len(names) + 1) + topics + I32(1000) + b"\x00\x00"
    if kind == "alter_configs_v2_distinct":
        # TOPIC resources {2, name, configs [{"flush.ms", "1", tags}], tags}, validate_only false
        names = distinct_names((size - 30) // 20)
        config = uvarint(2) + compact(b"flush.ms") + compact(b"1") + b"\x00"
        resources = b"".join(b"\x02" + compact(n) + config + b"\x00" for n in names)
        return header(33, 2, True) + uvarint(len(names) + 1) + resources + b"\x00\x00"
    if kind == "incremental_alter_configs_v1_distinct":
        # TOPIC resources {2, name, configs [{"flush.ms", SET, "1", tags}], tags}, validate_only false
        names = distinct_names((size - 30) // 21)
        config = uvarint(2) + compact(b"flush.ms") + b"\x00" + compact(b"1") + b"\x00"
        resources = b"".join(b"\x02" + compact(n) + config + b"\x00" for n in names)
        return header(44, 1, True) + uvarint(len(names) + 1) + resources + b"\x00\x00"
    if kind == "incremental_alter_configs_v1_alternating":
        # Two resources over and over, {TOPIC, "", [], tags} and {TOPIC, "a", [], tags}: no
        # resource is a copy of the one before, every one is named again.
        pairs = (size - 30) // 9
        pair = b"\x02\x01\x01\x00" + b"\x02\x02a\x01\x00"
        return header(44, 1, True) + uvarint(2 * pairs + 1) + pair * pairs + b"\x00\x00"
    if kind == "incremental_alter_configs_v1_distinct_values":
        # GROUP resources each setting a distinct invalid value: every resource fails with a
        # message of its own (the controller's validation).
        values = distinct_names((size - 30) // 43)
        resources = b"".join(
            b"\x20" + compact(v) + uvarint(2) + compact(b"consumer.session.timeout.ms") + b"\x00" + compact(v) + b"\x00\x00"
            for v in values
        )
        return header(44, 1, True) + uvarint(len(values) + 1) + resources + b"\x00\x00"
    if kind == "alter_client_quotas_v1_distinct":
        # entries {entity [{"client-id", name, tags}], ops [{"producer_byte_rate", 1024.0, remove
        # false, tags}], tags}, validate_only false
        names = distinct_names((size - 30) // 48)
        op = uvarint(2) + compact(b"producer_byte_rate") + struct.pack(">d", 1024.0) + b"\x00\x00"
        entries = b"".join(uvarint(2) + compact(b"client-id") + compact(n) + b"\x00" + op + b"\x00" for n in names)
        return header(49, 1, True) + uvarint(len(names) + 1) + entries + b"\x00\x00"
    if kind == "alter_client_quotas_v1_large_entities":
        # entries {entity [six parts {type "a".."f", name, tags}], ops [], tags}: entities of
        # more than four parts, whose canonical parts the scan keeps (`quota_chunks.rs`)
        names = distinct_names((size - 30) // 51)
        entries = b"".join(uvarint(7) + b"".join(compact(bytes([t])) + compact(n) + b"\x00" for t in b"fedcba")
            + b"\x01\x00" for n in names)
        return header(49, 1, True) + uvarint(len(names) + 1) + entries + b"\x00\x00"
    if kind == "describe_client_quotas_v1_distinct_types":
        # components {entity type, match ANY, match null, tags}, strict false. Not meaningful:
        # Kafka refuses an entity type other than user, client-id and ip, and any one of them
        # twice, so at most 3 components are valid; this measures the decoding of distinct ones.
        names = distinct_names((size - 30) // 8)
        components = b"".join(compact(n) + b"\x02\x00\x00" for n in names)
        return header(48, 1, True) + uvarint(len(names) + 1) + components + b"\x00\x00"
    if kind == "create_acls_v3_distinct":
        # (on a node with the authorizer) {TOPIC, name, LITERAL, "User:x", "*", READ, ALLOW, tags}
        return create_acls(distinct_names((size - 30) // 19))
    if kind in ("delete_acls_v3_distinct", "delete_acls_v3_distinct_unmatched"):
        # (on a node with the authorizer, which `prepare` gives the ACLs of `create_acls` for these
        # names but for `_unmatched`) filters {TOPIC, name, LITERAL, principal null, host null,
        # ANY, ANY, tags}
        names = distinct_names((size - 30) // 12)
        filters = b"".join(b"\x02" + compact(n) + b"\x03\x00\x00\x01\x01\x00" for n in names)
        return header(31, 3, True) + uvarint(len(names) + 1) + filters + b"\x00"
    if kind == "elect_leaders_v2_distinct_partitions":
        # PREFERRED, one topic "t" with partitions 0, 1, 2, ..., timeout
        n = (size - 40) // 4
        topic = compact(b"t") + uvarint(n + 1) + b"".join(I32(i) for i in range(n)) + b"\x00"
        return header(43, 2, True) + b"\x00" + uvarint(2) + topic + I32(1000) + b"\x00"
    if kind == "elect_leaders_v2_distinct":
        # PREFERRED, topics {name, [0], tags}, timeout
        names = distinct_names((size - 30) // 11)
        topics = b"".join(compact(n) + uvarint(2) + I32(0) + b"\x00" for n in names)
        return header(43, 2, True) + b"\x00" + uvarint(len(names) + 1) + topics + I32(1000) + b"\x00"
    if kind == "alter_partition_reassignments_v1_distinct_partitions":
        # timeout, allow_replication_factor_change true, one topic "t" with partitions
        # {0, 1, 2, ..., replicas null (cancel), tags}
        n = (size - 40) // 6
        topic = compact(b"t") + uvarint(n + 1) + b"".join(I32(i) + b"\x00\x00" for i in range(n)) + b"\x00"
        return header(45, 1, True) + I32(1000) + b"\x01" + uvarint(2) + topic + b"\x00"
    if kind == "alter_partition_reassignments_v1_distinct":
        # timeout, allow_replication_factor_change true, topics {name, [{0, null, tags}], tags}
        names = distinct_names((size - 30) // 13)
        topics = b"".join(compact(n) + uvarint(2) + I32(0) + b"\x00\x00" + b"\x00" for n in names)
        return header(45, 1, True) + I32(1000) + b"\x01" + uvarint(len(names) + 1) + topics + b"\x00"
    if kind == "list_partition_reassignments_v0_distinct":
        # timeout, topics {name, [0], tags}
        names = distinct_names((size - 30) // 11)
        topics = b"".join(compact(n) + uvarint(2) + I32(0) + b"\x00" for n in names)
        return header(46, 0, True) + I32(1000) + uvarint(len(names) + 1) + topics + b"\x00"
    if kind in ("offset_commit_v9_distinct_partitions", "offset_commit_v9_distinct"):
        # group "g", generation -1, member "", instance null; one topic "t" with partitions
        # {0, 1, 2, ..., offset 0, epoch -1, metadata null, tags}, or topics {name, [that of 0], tags}
        prefix = compact(b"g") + I32(-1) + b"\x01\x00"
        partition = lambda i: I32(i) + struct.pack(">q", 0) + I32(-1) + b"\x00\x00"
        if kind.endswith("_partitions"):
            n = (size - 40) // 18
            topics = uvarint(2) + compact(b"t") + uvarint(n + 1) + b"".join(partition(i) for i in range(n)) + b"\x00"
        else:
            names = distinct_names((size - 30) // 25)
            topics = uvarint(len(names) + 1) + b"".join(compact(n) + uvarint(2) + partition(0) + b"\x00" for n in names)
        return header(8, 9, True) + prefix + topics + b"\x00"
    if kind == "offset_delete_v0_distinct":
        # (not flexible) group "g", topics {name, [0]}
        names = distinct_names((size - 30) // 14)
        topics = b"".join(struct.pack(">h", 4) + n + I32(1) + I32(0) for n in names)
        return header(47, 0, False) + struct.pack(">h", 1) + b"g" + I32(len(names)) + topics
    if kind == "offset_for_leader_epoch_v4_distinct_partitions":
        # replica -1, one topic "t" with partitions {0, 1, 2, ..., current epoch -1, epoch 0, tags}
        n = (size - 40) // 13
        topic = compact(b"t") + uvarint(n + 1) + b"".join(I32(i) + I32(-1) + I32(0) + b"\x00" for i in range(n)) + b"\x00"
        return header(23, 4, True) + I32(-1) + uvarint(2) + topic + b"\x00"
    if kind == "delete_records_v2_distinct_partitions":
        # one topic "t" with partitions {0, 1, 2, ..., offset 0, tags}, timeout
        n = (size - 40) // 13
        topic = compact(b"t") + uvarint(n + 1) + b"".join(I32(i) + struct.pack(">q", 0) + b"\x00" for i in range(n)) + b"\x00"
        return header(21, 2, True) + uvarint(2) + topic + I32(1000) + b"\x00"
    if kind == "describe_producers_v0_distinct_partitions":
        # one topic "t" with partition indexes 0, 1, 2, ...
        n = (size - 40) // 4
        topic = compact(b"t") + uvarint(n + 1) + b"".join(I32(i) for i in range(n)) + b"\x00"
        return header(61, 0, True) + uvarint(2) + topic + b"\x00"
    if kind == "describe_log_dirs_v4_distinct":
        # topics {name, [0], tags}
        names = distinct_names((size - 30) // 11)
        topics = b"".join(compact(n) + uvarint(2) + I32(0) + b"\x00" for n in names)
        return header(35, 4, True) + uvarint(len(names) + 1) + topics + b"\x00"
    if kind == "describe_scram_v0_distinct":
        # users {name, tags}
        names = distinct_names((size - 30) // 6)
        return header(50, 0, True) + uvarint(len(names) + 1) + b"".join(compact(n) + b"\x00" for n in names) + b"\x00"
    if kind == "alter_scram_v0_distinct_deletions":
        # deletions {name, SCRAM-SHA-256, tags}, no upsertions
        names = distinct_names((size - 30) // 7)
        deletions = b"".join(compact(n) + b"\x01\x00" for n in names)
        return header(51, 0, True) + uvarint(len(names) + 1) + deletions + b"\x01\x00"
    if kind == "alter_scram_v0_distinct_upsertions":
        # no deletions; upsertions {name, SCRAM-SHA-256, 4096 iterations, empty salt and salted
        # password, tags}: every one valid, each a credential record
        names = distinct_names((size - 30) // 13)
        upsertions = b"".join(compact(n) + b"\x01" + I32(4096) + b"\x01\x01\x00" for n in names)
        return header(51, 0, True) + b"\x01" + uvarint(len(names) + 1) + upsertions + b"\x00"
    if kind in ("list_groups_v5_distinct_states", "list_groups_v5_distinct_types"):
        # states filter of distinct names and no types filter, or the other way round
        names = distinct_names((size - 30) // 5)
        filter = uvarint(len(names) + 1) + b"".join(compact(n) for n in names)
        filters = filter + b"\x01" if kind.endswith("_states") else b"\x01" + filter
        return header(16, 5, True) + filters + b"\x00"
    if kind in ("find_coordinator_v6_distinct", "find_coordinator_v6_distinct_txn"):
        # key type GROUP (TRANSACTION: `_txn`), distinct coordinator keys
        names = distinct_names((size - 30) // 5)
        key_type = b"\x01" if kind.endswith("_txn") else b"\x00"
        return header(10, 6, True) + key_type + uvarint(len(names) + 1) + b"".join(compact(n) for n in names) + b"\x00"
    if kind == "leave_group_v5_distinct":
        # group "g" (see `prepare`), members {member id, instance null, reason null, tags}
        names = distinct_names((size - 30) // 8)
        members = b"".join(compact(n) + b"\x00\x00\x00" for n in names)
        return header(13, 5, True) + compact(b"g") + uvarint(len(names) + 1) + members + b"\x00"
    if kind in ("join_group_v9_distinct_protocols", "join_group_v9_distinct_protocols_static"):
        # group "g", session 10 s, rebalance 5 s, member "", instance null (`_static`: "i", a
        # static member is let in at once instead of being asked to rejoin with its member id),
        # "consumer", protocols {name, ConsumerProtocolSubscription v0 with no topics, tags}
        names = distinct_names((size - 40) // 17)
        instance = compact(b"i") if kind.endswith("_static") else b"\x00"
        protocols = b"".join(compact(n) + compact(SUBSCRIPTION) + b"\x00" for n in names)
        return (header(11, 9, True) + compact(b"g") + I32(10000) + I32(5000) + b"\x01" + instance
            + compact(b"consumer") + uvarint(len(names) + 1) + protocols + b"\x00\x00")
    if kind in ("sync_group_v5_distinct", "sync_group_v5_distinct_member_form"):
        # the leader of group "g" (joined in `prepare`) assigns {member id, empty assignment, tags}
        # to distinct members, then to itself; `_member_form`: ids of the form the coordinator
        # gives members (the shortest: "-" and a UUID), which it cannot drop unread
        member, generation, protocol = PREPARED["join"]
        if kind.endswith("_member_form"):
            names = [b"-" + str(uuid.UUID(int=i)).encode() for i in range((size - 200) // 40)]
        else:
            names = distinct_names((size - 60) // 7)
        assignments = b"".join(compact(n) + b"\x01\x00" for n in names) + compact(member) + b"\x01\x00"
        return (header(14, 5, True) + compact(b"g") + I32(generation) + compact(member) + compact(b"i")
            + compact(b"consumer") + compact(protocol) + uvarint(len(names) + 2) + assignments + b"\x00")
    if kind == "consumer_group_heartbeat_v1_distinct_topics":
        # joins group "g": member "m", epoch 0, instance null, rack null, rebalance 5 s,
        # subscribed to distinct topic names, regex null, assignor null, no owned partitions
        names = distinct_names((size - 40) // 5)
        subscribed = uvarint(len(names) + 1) + b"".join(compact(n) for n in names)
        return (header(68, 1, True) + compact(b"g") + compact(b"m") + I32(0) + b"\x00\x00" + I32(5000)
            + subscribed + b"\x00\x00" + b"\x01" + b"\x00")
    if kind == "describe_quorum_v2_distinct_partitions":
        # one topic "__cluster_metadata" with partitions {0, 1, 2, ..., tags}
        n = (size - 60) // 5
        topic = compact(b"__cluster_metadata") + uvarint(n + 1) + b"".join(I32(i) + b"\x00" for i in range(n)) + b"\x00"
        return header(55, 2, True) + uvarint(2) + topic + b"\x00"
    if kind == "describe_quorum_v2_distinct":
        # topics {name, [{0, tags}], tags}
        names = distinct_names((size - 30) // 12)
        topics = b"".join(compact(n) + uvarint(2) + I32(0) + b"\x00" + b"\x00" for n in names)
        return header(55, 2, True) + uvarint(len(names) + 1) + topics + b"\x00"
    if kind in ("add_raft_voter_v2_distinct_listeners", "add_raft_voter_v2_distinct_listeners_controller"):
        # cluster id null, timeout, voter 99 with a directory id, listeners {name, "h", 9093,
        # tags}, ack_when_committed true; without the quorum's default listener (CONTROLLER) it
        # is refused with a message listing every listener, `_controller` names it first
        names = distinct_names((size - 60) // 10)
        names = ([b"CONTROLLER"] if kind.endswith("_controller") else []) + names
        listeners = b"".join(compact(n) + compact(b"h") + struct.pack(">H", 9093) + b"\x00" for n in names)
        return (header(80, 2, True) + b"\x00" + I32(1000) + I32(99) + struct.pack(">QQ", 0x67726567, 99)
            + uvarint(len(names) + 1) + listeners + b"\x01" + b"\x00")
    raise SystemExit(kind)

I32 = lambda v: struct.pack(">i", v)

def create_acls(names):
    """CreateAcls v3 of READ on each topic `names` (LITERAL) allowed to User:x from any host."""
    creations = b"".join(b"\x02" + compact(n) + b"\x03" + compact(b"User:x") + compact(b"*") + b"\x03\x03\x00" for n in names)
    return header(30, 3, True) + uvarint(len(names) + 1) + creations + b"\x00"

# Kinds refused whole without an authorizer ("No Authorizer is configured"): sent to a node with
# the authorizer (`AUTHZ`) but without `AUTHZ_ACLS`, which deny the cluster ALTER they need.
AUTHORIZER_KINDS = ("create_acls_v3_distinct", "delete_acls_v3_distinct", "delete_acls_v3_distinct_unmatched")

# ConsumerProtocolSubscription v0: version 0, no topics, user data null
SUBSCRIPTION = struct.pack(">hii", 0, 0, -1)
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

# What `prepare` learnt for `build`.
PREPARED = {}

def join_static(s):
    """Group "g" with the static member "i" (protocol "range") as its leader, once its first
    rebalance is done (group.initial.rebalance.delay.ms): its member id, generation and protocol."""
    r = send_and_read(s, header(11, 9, True) + compact(b"g") + I32(10000) + I32(5000) + b"\x01"
        + compact(b"i") + compact(b"consumer") + uvarint(2) + compact(b"range") + compact(SUBSCRIPTION)
        + b"\x00" + b"\x00\x00")
    # header (correlation id, tags), throttle, error, generation, protocol type, protocol name,
    # leader, skip_assignment, member id
    at = 4 + 1 + 4
    error, generation = struct.unpack(">hi", r[at:at + 6]); at += 6
    fields = []
    for _ in range(4):
        length = r[at] - 1; at += 1  # one-byte lengths: names this short
        fields.append(r[at:at + max(length, 0)]); at += max(length, 0)
        if len(fields) == 3: at += 1  # skip_assignment
    if error: raise SystemExit(f"JoinGroup error {error}")
    return fields[3], generation, fields[1]

def await_coordinator(s):
    """FindCoordinator v6 for group "g" until it is answered without error (the first one creates
    __consumer_offsets), then until the coordinator has loaded: before that a group request is
    refused whole with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
    for _ in range(600):
        r = send_and_read(s, header(10, 6, True) + b"\x00" + uvarint(2) + compact(b"g") + b"\x00")
        # header (correlation id, tags), throttle, coordinators [{key "g", node id, host, port, error, ...}]
        at = 4 + 1 + 4 + 1 + 2 + 4
        at += 1 + r[at] - 1 + 4
        if struct.unpack(">h", r[at:at + 2])[0] == 0: break
        time.sleep(0.1)
    else:
        raise SystemExit("no coordinator")
    # then OffsetFetch v8 of "g" (all topics) until it is not COORDINATOR_LOAD_IN_PROGRESS
    for _ in range(600):
        r = send_and_read(s, header(9, 8, True) + uvarint(2) + compact(b"g") + b"\x00\x00" + b"\x00\x00")
        # header, throttle, groups [{group id "g", topics [] , error, ...}]
        at = 4 + 1 + 4 + 1 + 2 + 1
        if struct.unpack(">h", r[at:at + 2])[0] == 0: return
        time.sleep(0.1)
    raise SystemExit("coordinator still loading")

# Kinds answered per element only once group "g" has a coordinator; `join_static` also for
# those that need the group to exist (a member of the group for SyncGroup).
GROUP_KINDS = ("offset_commit_v9_distinct", "offset_commit_v9_distinct_partitions", "offset_delete_v0_distinct",
    "leave_group_v5_distinct", "join_group_v9_distinct_protocols", "join_group_v9_distinct_protocols_static",
    "sync_group_v5_distinct", "sync_group_v5_distinct_member_form", "consumer_group_heartbeat_v1_distinct_topics")

def prepare(kind, s, size):
    """Requests a kind needs answered before its own, on the same connection; True when they
    were large (the peak is then measured from the end of `prepare`)."""
    if kind in GROUP_KINDS:
        await_coordinator(s)
    if kind in ("sync_group_v5_distinct", "sync_group_v5_distinct_member_form", "leave_group_v5_distinct", "offset_delete_v0_distinct"):
        PREPARED["join"] = join_static(s)
    if kind == "delete_acls_v3_distinct":
        # one ACL for each filter's name, so that each filter matches (and deletes) one, in
        # CreateAcls of 10,000 ACLs each (the most one request may create)
        names = distinct_names((size - 30) // 12)
        for at in range(0, len(names), 10_000):
            batch = names[at:at + 10_000]
            r = send_and_read(s, create_acls(batch))
            # each result {error 0, message null, tags}, then the answer's tags
            if r[-4 * len(batch) - 1:].count(0) != 4 * len(batch) + 1:
                raise SystemExit(f"CreateAcls answered {r[:40].hex()}")
        return True
    return False

def run(kind, size):
    # `..._create`: on a node that auto-creates topics (Kafka's default); `..._authz`: with the
    # authorizer and `AUTHZ_ACLS`.
    authz = kind.endswith("_authz")
    base_kind = kind[:-len("_authz")] if authz else kind
    p, addr, data = start(auto_create=base_kind.endswith("_create"), authz=authz or base_kind in AUTHORIZER_KINDS)
    s = socket.create_connection(addr)
    s.settimeout(600)
    if authz:
        send_and_read(s, header(30, 3, True) + uvarint(len(AUTHZ_ACLS) + 1) + b"".join(AUTHZ_ACLS) + b"\x00")
    if prepare(base_kind, s, size):
        # let mimalloc return the pages `prepare` freed, then restart the peak (VmHWM) from here
        time.sleep(2)
        open(f"/proc/{p.pid}/clear_refs", "w").write("5")
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
