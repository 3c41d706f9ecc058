"""Clients that stop reading their answers, as Kafka's network layer treats them.

Kafka's `Selector` counts a connection idle when it moved no byte either way, so one whose
peer takes nothing of a large answer is closed after `connections.max.idle.ms`; and a
request's buffer goes back to the `queued.max.request.bytes` pool once it is handled, not once
its answer is written, so such a client holds nothing other clients wait for.
"""

import socket
import struct

from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from conftest import RawConn, wait_for
from test_data_plane import batch, create, produce

TOPIC = "stalled"
VALUE = b"v" * 900_000


def fill(node, megabytes):
    create(node, (TOPIC, 1))
    conn = RawConn(node.bootstrap)
    wait_for("the partition's log", lambda: produce(conn, TOPIC, 0, batch([(None, VALUE, [], 1)]), acks=1).error_code == 0)
    for _ in range(megabytes):
        assert produce(conn, TOPIC, 0, batch([(None, VALUE, [], 1)]), acks=1).error_code == 0
    conn.close()


def stalled_fetch(node, padding_topics=0):
    """A Fetch v4 for the whole partition (and `padding_topics` unknown topics, to make the
    request large) on a socket with a small receive buffer, never read."""
    host, port = node.bootstrap.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    F = FetchRequest[4]

    def wanted(name):
        return F.FetchTopic(topic=name, partitions=[F.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=64 << 20)])

    topics = [wanted(TOPIC)] + [wanted(f"pad-{i:04}-" + "p" * 200) for i in range(padding_topics)]
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=1, client_id="stalled")
    frame = bytes(request.encode(header=True, framed=True))
    sock.sendall(frame)
    return sock, len(frame) - 4


def metric(node, name, **labels):
    total = 0.0
    for line in node.metrics_text().splitlines():
        if (line.startswith(name + " ") or line.startswith(name + "{")) and all(
                f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.split()[-1])
    return total


def test_a_client_that_takes_no_byte_of_its_answer_is_closed_when_idle(start_node):
    node = start_node({"connections.max.idle.ms": "1500", "auto.create.topics.enable": "false"})
    fill(node, 40)
    sock, _ = stalled_fetch(node)
    # The answer (about 36 MB) is far more than the socket buffers take: its write stalls.
    wait_for("the stalled connection closed as idle",
             lambda: metric(node, "gregor_network_connections_closed_total", reason="idle") >= 1,
             timeout=30, interval=0.2)
    # What the client gets is the answer cut short, then the end of the stream.
    sock.settimeout(30)
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    received = 0
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += len(chunk)
    sock.close()
    assert size > 30_000_000 and received < size, (size, received)


def test_a_client_that_never_reads_holds_no_request_memory(start_node):
    pool = 4 << 20
    node = start_node({
        "auto.create.topics.enable": "false",
        "socket.request.max.bytes": str(pool),
        "queued.max.request.bytes": str(pool),
    })
    fill(node, 40)
    assert metric(node, "kafka_network_socketserver_memorypoolavailable") == pool
    # Requests of over a quarter of the pool whose answers are never taken (the default idle
    # time is 10 min): held until written, four would leave nothing for anyone else.
    stalled = []
    for _ in range(4):
        sock, request_bytes = stalled_fetch(node, padding_topics=4600)
        assert request_bytes > pool // 4
        stalled.append(sock)
        wait_for("the stalled request's bytes back in the pool",
                 lambda: metric(node, "kafka_network_socketserver_memorypoolavailable") == pool,
                 timeout=30, interval=0.2)
    conn = RawConn(node.bootstrap, timeout=30)
    assert conn.send(ApiVersionsRequest[0](), ApiVersionsResponse).error_code == 0
    assert metric(node, "gregor_network_connections_closed_total", reason="idle") == 0
    for sock in stalled:
        sock.close()
    conn.close()
