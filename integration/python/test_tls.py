"""TLS listeners (reference replication-security.md §3.6) with real clients: confluent-kafka
and kafka-python over SSL with client certificates (ssl.client.auth=required, the principal from
the certificate's subject through ssl.principal.mapping.rules, seen by user quotas), an
untrusted client certificate refused and counted, SASL_SSL with PLAIN, and kcat over SSL.
Certificates are made for each test run with the openssl command line.
"""

import os
import re
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RawConn, wait_for
from kafka import KafkaConsumer
from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

OPENSSL = shutil.which("openssl")
KCAT = shutil.which("kcat")
TIMEOUT = 30
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is needed to make certificates")
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def openssl(*args, cwd):
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def signed(dir, name, subject, ca, usage):
    (dir / f"{name}.ext").write_text(f"basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=dir)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=dir)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    dir = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "rogue-ca", "next-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN={ca}", cwd=dir)
    signed(dir, "server", "/CN=localhost", "ca", "serverAuth")
    signed(dir, "next-server", "/CN=localhost", "next-ca", "serverAuth")
    signed(dir, "alice", "/C=US/O=acme/CN=Alice", "ca", "clientAuth")
    signed(dir, "mallory", "/C=US/O=evil/CN=mallory", "rogue-ca", "clientAuth")
    for server in ("server", "next-server"):
        (dir / f"{server}-store.pem").write_text((dir / f"{server}.pem").read_text() + (dir / f"{server}.key").read_text())
    return dir


def tls_node(start_node, certs, keystore=None):
    node = start_node({
        "auto.create.topics.enable": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore or certs / "server-store.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),O=acme,C=US$/$1/L,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    })
    line = node._ready_line()
    entries = dict(e.split("://", 1) for e in re.search(r"listeners=(\S+)", line).group(1).strip('"').split(","))
    node.ssl, node.sasl_ssl = entries["SSL"], entries["SASL_SSL"]
    return node


def ssl_conf(node, certs, client="alice", **extra):
    conf = {"bootstrap.servers": node.ssl, "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    if client:
        conf.update({"ssl.certificate.location": str(certs / f"{client}.pem"), "ssl.key.location": str(certs / f"{client}.key")})
    conf.update(extra)
    return conf


def create_topic(node, name):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)


def failures(node, reason):
    total = 0.0
    for line in node.metrics_text().splitlines():
        if line.startswith("gregor_authentication_failures_total{") and f'reason="{reason}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_ssl_clients_with_certificates_produce_and_consume_as_their_principal(start_node, certs):
    node = tls_node(start_node, certs)
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    # A produce quota for User:alice: the certificate's subject maps to her.
    conn = RawConn(node.bootstrap)
    Entry = AlterClientQuotasRequest.EntryData
    answer = conn.send(AlterClientQuotasRequest[1](
        entries=[Entry(entity=[Entry.EntityData(entity_type="user", entity_name="alice")],
                       ops=[Entry.OpData(key="producer_byte_rate", value=1000.0, remove=False)])],
        validate_only=False), AlterClientQuotasResponse)
    assert [e.error_code for e in answer.entries] == [0]
    conn.close()
    producer = Producer(ssl_conf(node, certs))
    for value in (b"one", b"two"):
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0
    wait_for("alice's produce sensor", lambda: any(
        line.startswith("kafka_server_quota_byte_rate{") and 'resource="Produce"' in line and 'user="alice"' in line
        for line in node.metrics_text().splitlines()), timeout=TIMEOUT)
    consumer = KafkaConsumer(topic, bootstrap_servers=node.ssl, security_protocol="SSL",
                             ssl_cafile=str(certs / "ca.pem"), ssl_certfile=str(certs / "alice.pem"),
                             ssl_keyfile=str(certs / "alice.key"), auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=TIMEOUT * 1000)
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 2:
                break
    finally:
        consumer.close()
    assert values == [b"one", b"two"]
    if KCAT:
        out = subprocess.run([KCAT, "-b", node.ssl, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs / 'ca.pem'}",
                              "-X", f"ssl.certificate.location={certs / 'alice.pem'}", "-X", f"ssl.key.location={certs / 'alice.key'}",
                              "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"], capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["one", "two"]


def test_untrusted_or_missing_client_certificates_are_refused(start_node, certs):
    node = tls_node(start_node, certs)
    for client in ("mallory", None):
        errors = []
        admin = AdminClient(ssl_conf(node, certs, client=client, error_cb=errors.append))
        wait_for("a TLS error", lambda: admin.poll(0.1) >= 0 and errors, timeout=TIMEOUT)
        assert errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), errors[0]
    wait_for("handshake failures counted", lambda: failures(node, "ssl_handshake_failed") >= 2, timeout=TIMEOUT)


def test_sasl_ssl_authenticates_plain_users_over_tls(start_node, certs):
    node = tls_node(start_node, certs)
    topic = f"tls-sasl-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    conf = {"bootstrap.servers": node.sasl_ssl, "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    producer = Producer(conf)
    producer.produce(topic, b"over-tls")
    # 60 KiB of records: the Fetch answer goes out as several buffers (one vectored write),
    # through TLS as through plain TCP.
    values = [os.urandom(2048) for _ in range(30)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(dict(conf, **{"group.id": "tls-large", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 31 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [b"over-tls"] + values
    errors = []
    admin = AdminClient(dict(conf, **{"sasl.password": "wrong", "error_cb": errors.append}))
    wait_for("an authentication error", lambda: admin.poll(0.1) >= 0 and errors, timeout=TIMEOUT)
    assert "Authentication failed: Invalid username or password" in errors[0].str()


def connects(conf):
    """Whether a client with `conf` gets metadata (a TLS failure means no)."""
    admin = AdminClient(conf)
    try:
        return bool(admin.list_topics(timeout=3).brokers)
    except Exception:  # noqa: BLE001 - any failure is "no"
        return False


def test_a_changed_keystore_file_is_used_without_a_restart(start_node, certs, tmp_path):
    keystore = tmp_path / "keystore.pem"
    keystore.write_text((certs / "server-store.pem").read_text())
    node = tls_node(start_node, certs, keystore=keystore)
    trusting_next = ssl_conf(node, certs, **{"ssl.ca.location": str(certs / "next-ca.pem")})
    assert connects(ssl_conf(node, certs))
    assert not connects(trusting_next)
    keystore.write_text((certs / "next-server-store.pem").read_text())
    wait_for("the new certificate", lambda: connects(trusting_next), timeout=TIMEOUT)
    assert "reloaded the TLS key and trust stores" in node.log()
