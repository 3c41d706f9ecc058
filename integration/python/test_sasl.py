"""SASL on a SASL_PLAINTEXT listener (reference replication-security.md §3) with real clients:
kafka-python, confluent-kafka and kcat authenticate with PLAIN (users from the listener's JAAS
config) and SCRAM-SHA-256/512 (credentials created with AlterUserScramCredentials), produce and
consume; wrong passwords and unknown users get SASL_AUTHENTICATION_FAILED and a closed
connection, counted by reason; requests before authentication close the connection; the
authenticated user is the principal user quotas apply to.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import RawConn, gregor_bin, wait_for
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as PyKafkaError
from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse

KCAT = shutil.which("kcat")
TIMEOUT = 30
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def sasl_node(start_node, mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", extra=None):
    overrides = {
        "auto.create.topics.enable": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": mechanisms,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    overrides.update(extra or {})
    node = start_node(overrides)
    node.sasl = listener_address(node, "SASL_PLAINTEXT")
    return node


def listener_address(node, name):
    line = node._ready_line()
    entries = dict(e.split("://", 1) for e in re.search(r"listeners=(\S+)", line).group(1).strip('"').split(","))
    return entries[name]


def failures(node, reason):
    """gregor_authentication_failures_total summed over the series with `reason`."""
    total = 0.0
    for line in node.metrics_text().splitlines():
        if line.startswith("gregor_authentication_failures_total{") and f'reason="{reason}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def create_topic(node, name):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)


def confluent_conf(node, mechanism, user, password, **extra):
    conf = {
        "bootstrap.servers": node.sasl,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    conf.update(extra)
    return conf


def confluent_produce(node, mechanism, user, password, topic, values):
    producer = Producer(confluent_conf(node, mechanism, user, password))
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0


def kafka_python_consume(node, mechanism, user, password, topic, count):
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=node.sasl,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=TIMEOUT * 1000,
    )
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


def kcat(node, mechanism, user, password, *args):
    return subprocess.run(
        [KCAT, "-b", node.sasl, "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mechanism}",
         "-X", f"sasl.username={user}", "-X", f"sasl.password={password}", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def confluent_auth_error(node, mechanism, user, password):
    """The first error confluent-kafka reports for these credentials (its error_cb)."""
    errors = []
    admin = AdminClient(confluent_conf(node, mechanism, user, password, error_cb=errors.append))
    # error_cb runs from poll().
    wait_for("an authentication error", lambda: admin.poll(0.1) >= 0 and errors, timeout=TIMEOUT)
    return errors[0]


def kafka_python_fails(node, mechanism, user, password):
    with pytest.raises(PyKafkaError) as raised:
        producer = KafkaProducer(
            bootstrap_servers=node.sasl,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
            request_timeout_ms=5000,
            max_block_ms=5000,
        )
        producer.close()
    return raised.value


def test_plain_users_produce_and_consume_with_every_client(start_node):
    node = sasl_node(start_node, mechanisms="PLAIN")
    topic = f"sasl-plain-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    confluent_produce(node, "PLAIN", "alice", "alice-secret", topic, [b"one", b"two"])
    assert kafka_python_consume(node, "PLAIN", "admin", "admin-secret", topic, 2) == [b"one", b"two"]
    if KCAT:
        out = kcat(node, "PLAIN", "alice", "alice-secret", "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["one", "two"]
    text = node.metrics_text()
    assert re.search(r'gregor_authentications_total\{listener="SASL_PLAINTEXT",mechanism="PLAIN"\} [1-9]', text), text


def test_plain_wrong_password_or_unknown_user_is_refused(start_node):
    node = sasl_node(start_node, mechanisms="PLAIN")
    error = confluent_auth_error(node, "PLAIN", "alice", "wrong")
    assert error.code() == KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in error.str()
    error = confluent_auth_error(node, "PLAIN", "mallory", "alice-secret")
    assert "Authentication failed: Invalid username or password" in error.str()
    # kafka-python logs the broker's message and reports that it could not bootstrap.
    before = failures(node, "invalid_credentials")
    raised = kafka_python_fails(node, "PLAIN", "alice", "wrong")
    assert "Unable to bootstrap" in str(raised), repr(raised)
    assert failures(node, "invalid_credentials") > before
    if KCAT:
        out = kcat(node, "PLAIN", "alice", "wrong", "-L", "-m", "3")
        assert out.returncode != 0
        assert "Authentication failed: Invalid username or password" in out.stderr
    wait_for("failures counted", lambda: failures(node, "invalid_credentials") >= 3, timeout=TIMEOUT)


def raw_frame(sock, frame):
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def closed_without_answer(sock):
    sock.settimeout(TIMEOUT)
    return sock.recv(1) == b""


def test_the_exchange_follows_kafkas_rules(start_node):
    node = sasl_node(start_node, mechanisms="PLAIN,SCRAM-SHA-512")
    # ApiVersions before the handshake is answered and advertises both SASL APIs.
    conn = RawConn(node.sasl)
    versions = conn.send(ApiVersionsRequest[3](client_software_name="pytest", client_software_version="1"), ApiVersionsResponse)
    keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2)
    # A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, then close.
    handshake = conn.send(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
    assert (handshake.error_code, handshake.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-512"])
    assert closed_without_answer(conn.sock)
    conn.close()
    # Any other request before authentication closes the connection without an answer.
    conn = RawConn(node.sasl)
    request = MetadataRequest[12](topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    request.with_header(correlation_id=1, client_id="pytest-raw")
    conn.send_bytes(bytes(request.encode(header=True, framed=True)))
    assert closed_without_answer(conn.sock)
    conn.close()
    # PLAIN through SaslAuthenticate v2 with a bad password: error 58 with Kafka's message.
    conn = RawConn(node.sasl)
    handshake = conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == 0
    answer = conn.send(SaslAuthenticateRequest[2](auth_bytes=b"\0alice\0nope"), SaslAuthenticateResponse)
    assert (answer.error_code, answer.error_message) == (58, "Authentication failed: Invalid username or password")
    assert closed_without_answer(conn.sock)
    conn.close()
    # The right password: authenticated, then the connection serves Kafka requests, and a
    # second SaslAuthenticate is ILLEGAL_SASL_STATE.
    conn = RawConn(node.sasl)
    conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    answer = conn.send(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"), SaslAuthenticateResponse)
    assert (answer.error_code, answer.auth_bytes, answer.session_lifetime_ms) == (0, b"", 0)
    again = conn.send(SaslAuthenticateRequest[2](auth_bytes=b"\0alice\0alice-secret"), SaslAuthenticateResponse)
    assert (again.error_code, again.error_message) == (34, "SaslAuthenticate request received after successful authentication")
    conn.close()
    # A v0 handshake: the token travels as a raw frame and the reply is a raw (empty) frame.
    conn = RawConn(node.sasl)
    assert conn.send(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    raw_frame(conn.sock, b"\0alice\0alice-secret")
    assert conn.recv_frame() == b""
    versions = conn.send(ApiVersionsRequest[0](), ApiVersionsResponse)
    assert versions.error_code == 0
    conn.close()
    # Before authentication a frame may not exceed sasl.server.max.receive.size (524288).
    conn = RawConn(node.sasl)
    conn.send_bytes(struct.pack(">i", 524289))
    assert closed_without_answer(conn.sock)
    conn.close()
    assert failures(node, "unsupported_mechanism") == 1
    assert failures(node, "illegal_sasl_state") == 1
    assert failures(node, "invalid_credentials") == 1


def test_a_failed_authentication_is_answered_after_the_delay(start_node):
    # KIP-306: the failure answer itself waits connection.failed.authentication.delay.ms, so a
    # client dropping the connection as soon as it reads the answer cannot guess quickly.
    node = sasl_node(start_node, mechanisms="PLAIN", extra={"connection.failed.authentication.delay.ms": "1500"})
    conn = RawConn(node.sasl)
    assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    began = time.monotonic()
    answer = conn.send(SaslAuthenticateRequest[2](auth_bytes=b"\0alice\0nope"), SaslAuthenticateResponse)
    assert answer.error_code == 58
    assert time.monotonic() - began >= 1.4
    assert closed_without_answer(conn.sock)
    conn.close()
    # An unsupported mechanism is an authentication failure too.
    conn = RawConn(node.sasl)
    began = time.monotonic()
    handshake = conn.send(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
    assert (handshake.error_code, handshake.mechanisms) == (33, ["PLAIN"])
    assert time.monotonic() - began >= 1.4
    conn.close()


def test_user_quotas_apply_to_the_authenticated_user(start_node):
    node = sasl_node(start_node, mechanisms="PLAIN")
    topic = f"sasl-quota-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    conn = RawConn(node.bootstrap)
    Entry = AlterClientQuotasRequest.EntryData
    answer = conn.send(AlterClientQuotasRequest[1](
        entries=[Entry(entity=[Entry.EntityData(entity_type="user", entity_name="alice")],
                       ops=[Entry.OpData(key="producer_byte_rate", value=1000.0, remove=False)])],
        validate_only=False,
    ), AlterClientQuotasResponse)
    assert [e.error_code for e in answer.entries] == [0]
    conn.close()
    confluent_produce(node, "PLAIN", "alice", "alice-secret", topic, [b"x" * 5000])
    # The produce sensor of User:alice carries her quota; nobody else's does.
    series = wait_for("alice's produce sensor", lambda: [
        line for line in node.metrics_text().splitlines()
        if line.startswith("kafka_server_quota_byte_rate{") and 'resource="Produce"' in line and 'user="alice"' in line
    ], timeout=TIMEOUT)
    assert series


def alter_scram(node, alterations):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        future.result(TIMEOUT)


def scram_users(node):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    described = admin.describe_user_scram_credentials().result(TIMEOUT)
    return {
        user: sorted((info.mechanism.name, info.iterations) for info in description.scram_credential_infos)
        for user, description in described.items()
    }


def test_scram_users_created_with_the_admin_api_authenticate_with_every_client(start_node):
    node = sasl_node(start_node, mechanisms="SCRAM-SHA-256,SCRAM-SHA-512")
    alter_scram(node, [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-pw"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-pw", b"bob-salt"),
    ])
    assert scram_users(node) == {"alice": [("SCRAM_SHA_256", 8192)], "bob": [("SCRAM_SHA_512", 4096)]}
    topic = f"sasl-scram-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    confluent_produce(node, "SCRAM-SHA-256", "alice", "alice-pw", topic, [b"a", b"b", b"c"])
    assert kafka_python_consume(node, "SCRAM-SHA-512", "bob", "bob-pw", topic, 3) == [b"a", b"b", b"c"]
    if KCAT:
        out = kcat(node, "SCRAM-SHA-512", "bob", "bob-pw", "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["a", "b", "c"]
    text = node.metrics_text()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert re.search(rf'gregor_authentications_total\{{listener="SASL_PLAINTEXT",mechanism="{mechanism}"\}} [1-9]', text), text


def test_scram_wrong_passwords_unknown_users_and_deleted_credentials_are_refused(start_node):
    node = sasl_node(start_node, mechanisms="SCRAM-SHA-256,SCRAM-SHA-512")
    alter_scram(node, [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw")])
    generic = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    # A wrong password and an unknown user get the same message, so users cannot be probed.
    for user, password in [("alice", "wrong"), ("mallory", "alice-pw")]:
        error = confluent_auth_error(node, "SCRAM-SHA-512", user, password)
        assert error.code() == KafkaError._AUTHENTICATION
        assert generic in error.str(), error.str()
    # The credential is for SCRAM-SHA-512 only.
    error = confluent_auth_error(node, "SCRAM-SHA-256", "alice", "alice-pw")
    assert "SCRAM-SHA-256" in error.str()
    before = failures(node, "invalid_credentials")
    raised = kafka_python_fails(node, "SCRAM-SHA-512", "alice", "wrong")
    assert "Unable to bootstrap" in str(raised), repr(raised)
    assert failures(node, "invalid_credentials") > before
    if KCAT:
        out = kcat(node, "SCRAM-SHA-512", "alice", "wrong", "-L", "-m", "3")
        assert out.returncode != 0
        assert generic in out.stderr
        assert kcat(node, "SCRAM-SHA-512", "alice", "alice-pw", "-L", "-m", "10").returncode == 0
    # Deleting the credential locks the user out of new connections.
    alter_scram(node, [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)])
    assert scram_users(node) == {}
    error = confluent_auth_error(node, "SCRAM-SHA-512", "alice", "alice-pw")
    assert generic in error.str()


def gregor_configs(node, *args):
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    return subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_gregor_configs_sets_and_deletes_scram_credentials(start_node):
    node = sasl_node(start_node, mechanisms="SCRAM-SHA-256")
    for credential in ("SCRAM-SHA-256=[iterations=8192,password=carol-pw]", "SCRAM-SHA-512=[password=carol-pw]"):
        done = gregor_configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", credential)
        assert (done.returncode, done.stdout, done.stderr) == (0, "Completed updating config for user carol.\n", ""), done
    # As Kafka's controller: one request may alter a user once (DUPLICATE_RESOURCE otherwise).
    done = gregor_configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol",
                          "--add-config", "SCRAM-SHA-256=[password=a],SCRAM-SHA-512=[password=b]")
    assert done.stderr == "gregor: A user credential cannot be altered twice in the same request (DuplicateResource)\n", done
    assert scram_users(node) == {"carol": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]}
    done = gregor_configs(node, "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n", ""), done
    # The salted password went over the wire; the password is in no log line.
    assert "carol-pw" not in node.log()
    topic = f"sasl-cli-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    confluent_produce(node, "SCRAM-SHA-256", "carol", "carol-pw", topic, [b"hello"])
    done = gregor_configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol",
                          "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert done.returncode != 0
    assert done.stderr == "gregor: Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256\n", done.stderr
    done = gregor_configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512")
    assert done.returncode == 0, done
    assert scram_users(node) == {"carol": [("SCRAM_SHA_256", 8192)]}


def test_storage_format_add_scram_bootstraps_credentials(start_node, tmp_path):
    data = tmp_path / "data"
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    cluster_id = subprocess.run([str(gregor_bin()), "storage", "random-uuid"], capture_output=True, text=True,
                                timeout=30, env=env, check=True).stdout.strip()
    done = subprocess.run([str(gregor_bin()), "storage", "format", "--cluster-id", cluster_id, "--standalone",
                           "--override", f"log.dirs={data}",
                           "--add-scram", "SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-pw]",
                           "--add-scram", "SCRAM-SHA-256=[name=dave,password=dave-pw]"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done
    # The bootstrap file holds derived keys, never the passwords.
    assert not any("admin-pw" in p.read_text() or "dave-pw" in p.read_text() for p in data.rglob("*.properties"))
    node = sasl_node(start_node, mechanisms="SCRAM-SHA-256,SCRAM-SHA-512", extra={"log.dirs": str(data)})
    assert scram_users(node) == {"admin": [("SCRAM_SHA_512", 8192)], "dave": [("SCRAM_SHA_256", 4096)]}
    topic = f"sasl-boot-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    confluent_produce(node, "SCRAM-SHA-512", "admin", "admin-pw", topic, [b"first"])
    assert kafka_python_consume(node, "SCRAM-SHA-256", "dave", "dave-pw", topic, 1) == [b"first"]


NODE_JS = shutil.which("node")
JS = Path(__file__).resolve().parents[1] / "js"


def kafkajs(node, mechanism, user, password):
    done = subprocess.run([NODE_JS, str(JS / "sasl.js"), node.sasl, mechanism, user, password],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(NODE_JS is None or not (JS / "node_modules" / "kafkajs").exists(), reason="kafkajs is not installed (npm ci in integration/js)")
def test_kafkajs_authenticates_with_plain_and_scram(start_node):
    node = sasl_node(start_node)
    alter_scram(node, [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-pw"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-pw"),
    ])
    create_topic(node, "js-sasl")
    assert kafkajs(node, "plain", "alice", "alice-secret") == {"topics": ["js-sasl"]}
    assert kafkajs(node, "scram-sha-256", "alice", "alice-pw") == {"topics": ["js-sasl"]}
    assert kafkajs(node, "scram-sha-512", "bob", "bob-pw") == {"topics": ["js-sasl"]}
    refused = kafkajs(node, "scram-sha-512", "bob", "wrong")
    assert refused["error"] == "KafkaJSSASLAuthenticationError", refused
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" in refused["message"]
    refused = kafkajs(node, "plain", "alice", "wrong")
    assert "Authentication failed: Invalid username or password" in refused["message"], refused


def test_sessions_expire_and_clients_reauthenticate(start_node):
    node = sasl_node(start_node, mechanisms="PLAIN", extra={"connections.max.reauth.ms": "1500"})
    # The lifetime is announced; a re-authentication keeps the principal or fails.
    conn = RawConn(node.sasl)
    conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    answer = conn.send(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"), SaslAuthenticateResponse)
    assert (answer.error_code, answer.session_lifetime_ms) == (0, 1500)
    assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    answer = conn.send(SaslAuthenticateRequest[1](auth_bytes=b"\0admin\0admin-secret"), SaslAuthenticateResponse)
    assert (answer.error_code, answer.error_message) == (58, "Cannot change principals during re-authentication from User.alice: User.admin")
    conn.close()
    # A connection that does not re-authenticate is closed at its first request after expiry.
    conn = RawConn(node.sasl)
    conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    conn.send(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"), SaslAuthenticateResponse)

    def closed():
        try:
            conn.send(ApiVersionsRequest[0](), ApiVersionsResponse)
            return False
        except (ConnectionError, OSError):
            return True

    wait_for("the expired session to close", closed, timeout=TIMEOUT)
    conn.close()
    # librdkafka re-authenticates before the lifetime ends and keeps producing on its connection.
    topic = f"sasl-reauth-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    producer = Producer(confluent_conf(node, "PLAIN", "alice", "alice-secret"))

    def reauthenticated():
        producer.produce(topic, b"tick")
        assert producer.flush(TIMEOUT) == 0
        text = node.metrics_text()
        count = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                    if line.startswith('gregor_authentications_total{listener="SASL_PLAINTEXT",mechanism="PLAIN"}'))
        return count >= 6

    wait_for("re-authentications", reauthenticated, timeout=TIMEOUT, interval=0.2)
    # Only the raw connection above expired: the producer's were never cut.
    expired = [line for line in node.metrics_text().splitlines()
               if line.startswith("gregor_network_connections_closed_total{") and 'reason="session_expired"' in line]
    assert [line.rsplit(" ", 1)[1] for line in expired] == ["1"], expired
