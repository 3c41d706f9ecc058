"""ACL authorization (reference replication-security.md §4) over real sockets with SASL users:
the StandardAuthorizer's decisions (super users, prefixed patterns, DENY over ALLOW, hosts,
allow.everyone.if.no.acl.found) as confluent-kafka, kafka-python and kcat see them, the ACL APIs
(CreateAcls, DescribeAcls, DeleteAcls) with confluent-kafka's admin client, Metadata hiding
unauthorized topics, groups (KIP-848 ones hiding topics without DESCRIBE), and `gregor acls`
with kafka-acls.sh's flags and output.
"""

import shutil
import struct
import subprocess
import uuid

import pytest
from conftest import RawConn, gregor_bin, wait_for
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as ResourceTypePy
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.errors import (
    ClusterAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)
from test_groups_consumer import compact_string, read_compact_string, read_uvarint, uvarint
from test_sasl import listener_address

KCAT = shutil.which("kcat")
TIMEOUT = 30
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";'
)
PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


def acl_node(start_node, extra=None):
    overrides = {
        "auto.create.topics.enable": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    overrides.update(extra or {})
    node = start_node(overrides)
    node.sasl = listener_address(node, "SASL_PLAINTEXT")
    return node


def conf(node, user, **extra):
    c = {
        "bootstrap.servers": node.sasl,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }
    c.update(extra)
    return c


def admin(node, user="admin"):
    return AdminClient(conf(node, user))


def create_topic(node, name, partitions=1):
    client = admin(node)
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


def add_acls(node, *bindings):
    client = admin(node)
    for future in client.create_acls(list(bindings)).values():
        future.result(TIMEOUT)


def binding(resource_type, name, principal, operation, permission=AclPermissionType.ALLOW,
            pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def produce_error(node, user, topic):
    """The delivery error (or None) of one record produced as `user`."""
    reports = []
    producer = Producer(conf(node, user, **{"message.timeout.ms": 10000}))
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(TIMEOUT)
    assert reports, "no delivery report"
    return reports[0]


def gregor_acls(node, *args, user="admin", check=True):
    config = node._tmp.name + f"/{user}.properties"
    with open(config, "w") as f:
        f.write(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{PASSWORDS[user]}";\n'
        )
    out = subprocess.run(
        [str(gregor_bin()), "acls", "--bootstrap-server", node.sasl, "--command-config", config, *args],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_produce_is_refused_until_an_acl_allows_it_and_deny_wins(start_node):
    node = acl_node(start_node)
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    create_topic(node, topic)
    error = produce_error(node, "alice", topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    # A PREFIXED ALLOW on "orders-" lets alice write (idempotent producers need WRITE on some topic).
    add_acls(node, binding(ResourceType.TOPIC, "orders-", "User:alice", AclOperation.WRITE,
                           pattern=ResourcePatternType.PREFIXED))
    assert produce_error(node, "alice", topic) is None
    assert produce_error(node, "bob", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A DENY on the literal topic overrides the prefixed ALLOW.
    add_acls(node, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE, AclPermissionType.DENY))
    assert produce_error(node, "alice", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The super user is never refused.
    assert produce_error(node, "admin", topic) is None
    # kafka-python sees the same refusal.
    producer = KafkaProducer(bootstrap_servers=node.sasl, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-pw",
                             max_block_ms=10000, request_timeout_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"v").get(TIMEOUT)
    finally:
        producer.close()


def test_metadata_hides_topics_without_describe_and_acl_apis_round_trip(start_node):
    node = acl_node(start_node)
    visible, hidden = f"vis-{uuid.uuid4().hex[:6]}", f"hid-{uuid.uuid4().hex[:6]}"
    create_topic(node, visible)
    create_topic(node, hidden)
    add_acls(node, binding(ResourceType.TOPIC, visible, "User:bob", AclOperation.READ))
    topics = admin(node, "bob").list_topics(timeout=TIMEOUT).topics
    assert visible in topics and hidden not in topics, sorted(topics)
    named = admin(node, "bob").list_topics(topic=hidden, timeout=TIMEOUT).topics[hidden]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DescribeAcls through the super user; bob may not describe ACLs.
    client, as_bob = admin(node), admin(node, "bob")
    found = client.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert [(b.name, b.principal, b.operation) for b in found] == [(visible, "User:bob", AclOperation.READ)]
    # (librdkafka drops DescribeAcls' top-level error: kafka-python shows it.)
    del as_bob
    py_admin = KafkaAdminClient(bootstrap_servers=node.sasl, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-pw")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            py_admin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                             permission_type=ACLPermissionType.ANY,
                                             resource_pattern=ResourcePatternFilter(
                                                 ResourceTypePy.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        py_admin.close()
    deleted = client.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, visible, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)])
    assert len(list(deleted.values())[0].result(TIMEOUT)) == 1
    wait_for("bob no longer sees the topic",
             lambda: visible not in admin(node, "bob").list_topics(timeout=TIMEOUT).topics, timeout=TIMEOUT)


def test_consumer_group_needs_read_on_group_and_topic(start_node):
    node = acl_node(start_node)
    topic = f"grp-{uuid.uuid4().hex[:6]}"
    create_topic(node, topic)
    producer = Producer(conf(node, "admin"))
    producer.produce(topic, b"hello")
    assert producer.flush(TIMEOUT) == 0
    add_acls(node, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ))

    def consume(group):
        errors = []
        consumer = Consumer(conf(node, "alice", **{"group.id": group, "auto.offset.reset": "earliest",
                                                   "error_cb": errors.append}))
        consumer.subscribe([topic])
        try:
            deadline_msgs = []
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    return msg.error().code()
                deadline_msgs.append(msg.value())
                return deadline_msgs
            return errors[0].code() if errors else None
        finally:
            consumer.close()

    assert consume("billing") == KafkaError.GROUP_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.GROUP, "bill", "User:alice", AclOperation.READ,
                           pattern=ResourcePatternType.PREFIXED))
    assert consume("billing") == [b"hello"]


def test_allow_everyone_if_no_acl_found(start_node):
    node = acl_node(start_node, {"allow.everyone.if.no.acl.found": "true"})
    free, guarded = f"free-{uuid.uuid4().hex[:6]}", f"guarded-{uuid.uuid4().hex[:6]}"
    create_topic(node, free)
    create_topic(node, guarded)
    assert produce_error(node, "bob", free) is None
    add_acls(node, binding(ResourceType.TOPIC, guarded, "User:alice", AclOperation.WRITE))
    assert produce_error(node, "alice", guarded) is None
    # An ACL exists on the topic, none for bob: refused.
    assert produce_error(node, "bob", guarded).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_host_rules_and_kcat(start_node):
    node = acl_node(start_node)
    topic = f"hosts-{uuid.uuid4().hex[:6]}"
    create_topic(node, topic)
    add_acls(node, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE, host="10.9.9.9"))
    assert produce_error(node, "alice", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE, host="127.0.0.1"))
    assert produce_error(node, "alice", topic) is None
    if KCAT:
        out = subprocess.run(
            [KCAT, "-b", node.sasl, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
             "-X", "sasl.username=bob", "-X", "sasl.password=bob-pw", "-C", "-t", topic, "-o", "beginning", "-e"],
            capture_output=True, text=True, timeout=TIMEOUT)
        assert "Topic authorization failed" in out.stderr or "TOPIC_AUTHORIZATION_FAILED" in out.stderr, out.stderr


def test_acl_apis_without_an_authorizer_are_security_disabled(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    py_admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError):
            py_admin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                             permission_type=ACLPermissionType.ANY,
                                             resource_pattern=ResourcePatternFilter(
                                                 ResourceTypePy.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        py_admin.close()


def test_gregor_acls_adds_lists_and_removes_as_kafka_acls(start_node):
    node = acl_node(start_node)
    out = gregor_acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--operation", "Describe", "--topic", "orders", "--resource-pattern-type", "prefixed")
    assert out.stdout == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
    ), out.stdout
    again = gregor_acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--topic", "orders", "--resource-pattern-type", "prefixed")
    assert again.stdout == (
        "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED), "
        "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) already exists.\n"
    ), again.stdout
    gregor_acls(node, "--add", "--producer", "--consumer", "--topic", "payments", "--group", "billing",
                "--allow-principal", "User:bob")
    listed = gregor_acls(node, "--list", "--topic", "payments").stdout
    assert listed == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments, patternType=LITERAL)`:\n"
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=CREATE, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
    ), listed
    by_principal = gregor_acls(node, "--list", "--principal", "User:bob").stdout
    assert by_principal.startswith("ACLs for principal `User:bob`\n"), by_principal
    assert "name=billing, patternType=LITERAL" in by_principal and "name=orders" not in by_principal
    # MATCH lists every ACL that applies to a topic: the prefixed one covers orders-eu.
    matched = gregor_acls(node, "--list", "--topic", "orders-eu", "--resource-pattern-type", "match").stdout
    assert "name=orders, patternType=PREFIXED" in matched, matched
    gregor_acls(node, "--remove", "--force", "--topic", "payments")
    assert "name=payments" not in gregor_acls(node, "--list").stdout
    # Without rights the broker's refusal is the tool's error.
    refused = gregor_acls(node, "--list", user="alice", check=False)
    assert refused.returncode == 1
    assert "Error while executing ACL command: Cluster authorization failed." in refused.stderr, refused.stderr
    usage = gregor_acls(node, "--add", "--topic", "t", check=False)
    assert usage.returncode == 1
    assert "You must specify one of: --allow-principal, --deny-principal" in usage.stderr


def sasl_metadata_error(addr, user, topic):
    """The Metadata v1 error code of `topic` for `user` (SASL/PLAIN on a raw socket)."""
    conn = RawConn(addr)
    try:
        assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
        token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
        assert conn.send(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse).error_code == 0
        response = conn.send(MetadataRequest[1](topics=[topic]), MetadataResponse[1])
        return response.topics[0][0]
    finally:
        conn.close()


def test_an_acl_change_reaches_every_node_without_restart():
    from ports import reserve_port
    from test_replication import ClusterNode, random_uuid

    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    nodes = []
    try:
        for node_id, port, _ in specs:
            nodes.append(ClusterNode({
                "node.id": str(node_id),
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.quorum.bootstrap.servers": voters,
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                "authorizer.class.name": "StandardAuthorizer",
                # Followers fetch over the PLAINTEXT listener as User:ANONYMOUS.
                "super.users": "User:admin;User:ANONYMOUS",
                "auto.create.topics.enable": "false",
            }, ["--cluster-id", cluster_id, "--initial-controllers", initial]))
        for node in nodes:
            node.wait_ready()
            node.sasl = listener_address(node, "SASL_PLAINTEXT")
        topic = f"spread-{uuid.uuid4().hex[:6]}"
        create_topic(nodes[0], topic)
        for node in nodes:
            wait_for("the topic on every node", lambda: sasl_metadata_error(node.sasl, "admin", topic) == 0,
                     timeout=TIMEOUT)
            assert sasl_metadata_error(node.sasl, "bob", topic) == 29
        # Created through the second node (forwarded to the active controller when it is not).
        gregor_acls(nodes[1], "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", topic)
        for node in nodes:
            wait_for(f"bob may describe the topic on {node.sasl}",
                     lambda: sasl_metadata_error(node.sasl, "bob", topic) == 0, timeout=TIMEOUT)
        # A CreateTopics naming an allowed and a refused topic, through each node: the broker
        # answers the refused one and hands the other to the active controller.
        gregor_acls(nodes[0], "--add", "--allow-principal", "User:bob", "--operation", "Create",
                    "--topic", "bob-", "--resource-pattern-type", "prefixed")
        for index, node in enumerate(nodes):
            client = AdminClient(conf(node, "bob"))

            def mixed_create():
                suffix = uuid.uuid4().hex[:6]
                results = client.create_topics([NewTopic(f"bob-{suffix}", 1, 3), NewTopic(f"nope-{suffix}", 1, 3)])
                outcome = []
                for name in (f"bob-{suffix}", f"nope-{suffix}"):
                    try:
                        results[name].result(TIMEOUT)
                        outcome.append(None)
                    except KafkaException as e:
                        outcome.append(e.args[0].code())
                return outcome == [None, KafkaError.TOPIC_AUTHORIZATION_FAILED]

            wait_for(f"a mixed CreateTopics through node {index + 1}", mixed_create, timeout=TIMEOUT)
        gregor_acls(nodes[2], "--remove", "--force", "--topic", topic)
        for node in nodes:
            wait_for(f"bob is refused again on {node.sasl}",
                     lambda: sasl_metadata_error(node.sasl, "bob", topic) == 29, timeout=TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_topic_admin_and_fetch_apis_check_their_operation(start_node):
    from confluent_kafka.admin import ConfigResource, NewPartitions

    node = acl_node(start_node)
    bob = admin(node, "bob")

    def error_of(future):
        try:
            future.result(TIMEOUT)
            return None
        except KafkaException as e:
            return e.args[0].code()

    # CreateTopics: CREATE on the cluster or on the topic (a PREFIXED ACL covers bob-*).
    name = f"bob-{uuid.uuid4().hex[:6]}"
    assert error_of(bob.create_topics([NewTopic(name, 1, 1)])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, "bob-", "User:bob", AclOperation.CREATE,
                           pattern=ResourcePatternType.PREFIXED))
    assert error_of(bob.create_topics([NewTopic(name, 1, 1)])[name]) is None
    other = f"other-{uuid.uuid4().hex[:6]}"
    results = bob.create_topics([NewTopic(other, 1, 1), NewTopic(name + "-2", 1, 1)])
    assert error_of(results[other]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert error_of(results[name + "-2"]) is None
    # CreatePartitions: ALTER on the topic.
    assert error_of(bob.create_partitions([NewPartitions(name, 2)])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, name, "User:bob", AclOperation.ALTER))
    assert error_of(bob.create_partitions([NewPartitions(name, 2)])[name]) is None
    # DescribeConfigs: DESCRIBE_CONFIGS on the topic (ALTER_CONFIGS implies it).
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    assert error_of(bob.describe_configs([resource])[resource]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, name, "User:bob", AclOperation.ALTER_CONFIGS))
    assert error_of(bob.describe_configs([resource])[resource]) is None
    # Fetch: READ on the topic (librdkafka's consumer also looks up its group: READ on it).
    add_acls(node, binding(ResourceType.GROUP, "unused", "User:bob", AclOperation.READ))
    producer = Producer(conf(node, "admin"))
    producer.produce(name, b"x", partition=0)
    assert producer.flush(TIMEOUT) == 0

    def fetch_as_bob():
        consumer = Consumer(conf(node, "bob", **{"group.id": "unused", "enable.auto.commit": False}))
        consumer.assign([TopicPartition(name, 0, 0)])
        try:
            for _ in range(40):
                msg = consumer.poll(0.5)
                if msg is not None:
                    return msg.error().code() if msg.error() else msg.value()
            return None
        finally:
            consumer.close()

    assert fetch_as_bob() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, name, "User:bob", AclOperation.READ))
    assert fetch_as_bob() == b"x"
    # DeleteTopics: DELETE on the topic.
    assert error_of(bob.delete_topics([name])[name]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(node, binding(ResourceType.TOPIC, name, "User:bob", AclOperation.DELETE))
    assert error_of(bob.delete_topics([name])[name]) is None


def test_authorized_operations_and_idempotent_producers(start_node):
    node = acl_node(start_node)
    topic = f"ops-{uuid.uuid4().hex[:6]}"
    create_topic(node, topic)
    add_acls(node, binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ),
             binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.ALTER_CONFIGS))
    conn = RawConn(node.sasl)
    try:
        assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
        assert conn.send(SaslAuthenticateRequest[1](auth_bytes=b"\0bob\0bob-pw"), SaslAuthenticateResponse).error_code == 0
        request = MetadataRequest[8](
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True, include_topic_authorized_operations=True)
        response = conn.send(request, MetadataResponse)
    finally:
        conn.close()
    # READ(3) and its implied DESCRIBE(8); ALTER_CONFIGS(11) and its implied DESCRIBE_CONFIGS(10).
    # (kafka-python decodes the bit field into the set of operation codes.)
    assert response.topics[0].authorized_operations == {3, 8, 10, 11}
    # No DESCRIBE on the cluster: no cluster operations (the field is 0).
    assert response.authorized_operations == set()
    # InitProducerId for an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
    # some topic (KIP-679).
    def init_producer_id(user):
        conn = RawConn(node.sasl)
        try:
            assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
            token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
            assert conn.send(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse).error_code == 0
            request = InitProducerIdRequest[2](transactional_id=None, transaction_timeout_ms=-1)
            return conn.send(request, InitProducerIdResponse).error_code
        finally:
            conn.close()

    assert init_producer_id("alice") == 31
    add_acls(node, binding(ResourceType.TOPIC, "anything-", "User:alice", AclOperation.WRITE,
                           pattern=ResourcePatternType.PREFIXED))
    assert init_producer_id("alice") == 0
    assert init_producer_id("admin") == 0
    assert init_producer_id("bob") == 31
    # (confluent-kafka names the cluster resource type BROKER.)
    add_acls(node, binding(ResourceType.BROKER, "kafka-cluster", "User:bob", AclOperation.IDEMPOTENT_WRITE))
    assert init_producer_id("bob") == 0


def gregor_tool_as(node, user, *args):
    """Runs a gregor tool subcommand against the SASL listener as `user`."""
    config = node._tmp.name + f"/{user}-tool.properties"
    with open(config, "w") as f:
        f.write(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{PASSWORDS[user]}";\n'
        )
    return subprocess.run(
        [str(gregor_bin()), *args, "--bootstrap-server", node.sasl, "--command-config", config],
        capture_output=True, text=True, timeout=TIMEOUT,
    )


def sasl_conn(addr, user):
    """A raw connection authenticated as `user` with SASL/PLAIN."""
    conn = RawConn(addr)
    assert conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
    assert conn.send(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse).error_code == 0
    return conn


def test_leader_elections_and_reassignments_need_the_cluster(start_node):
    node = acl_node(start_node)
    name = f"lead-{uuid.uuid4().hex[:6]}"
    create_topic(node, name)
    # ElectLeaders v0 has no top-level error code (it is v1+): the refusal is in each partition's
    # result, as from Kafka, and the connection stays open for the next version.
    conn = sasl_conn(node.sasl, "bob")
    for version in (0, 1, 2):
        E = ElectLeadersRequest[version]
        request = E(election_type=0, timeout_ms=10000,
                    topic_partitions=[E.TopicPartitions(topic=name, partitions=[0])])
        response = conn.send(request, ElectLeadersResponse)
        if version >= 1:
            assert response.error_code == 31, version  # CLUSTER_AUTHORIZATION_FAILED
        (result,) = response.replica_election_results
        assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 31)], version
    conn.close()
    elect = ("leader-election", "--election-type", "preferred", "--topic", name, "--partition", "0")
    listing = ("reassign-partitions", "--list")
    for args in (elect, listing):
        refused = gregor_tool_as(node, "bob", *args)
        assert refused.returncode == 1, (args, refused.stdout, refused.stderr)
        assert "clusterauthorization" in (refused.stdout + refused.stderr).lower(), (args, refused.stdout, refused.stderr)
    # ALTER on the cluster lets bob elect (nothing to do: the preferred leader leads) and
    # DESCRIBE lets him list the (no) reassignments.
    add_acls(node,
             binding(ResourceType.BROKER, "kafka-cluster", "User:bob", AclOperation.ALTER),
             binding(ResourceType.BROKER, "kafka-cluster", "User:bob", AclOperation.DESCRIBE))
    wait_for("bob's cluster ACLs to apply",
             lambda: gregor_tool_as(node, "bob", *listing).returncode == 0, timeout=TIMEOUT)
    allowed = gregor_tool_as(node, "bob", *elect)
    assert "clusterauthorization" not in (allowed.stdout + allowed.stderr).lower(), allowed.stderr
    assert "Valid replica already elected" in allowed.stdout + allowed.stderr, (allowed.stdout, allowed.stderr)


# KIP-848 consumer groups and topic DESCRIBE (Kafka 4.0+, KAFKA-18813), by hand: kafka-python
# has neither ConsumerGroupHeartbeat nor ConsumerGroupDescribe.


def kip848_request(conn, api_key, version, body):
    """Sends a flexible request and returns the response frame and where its body starts."""
    conn.correlation_id += 1
    header = struct.pack(">hhi", api_key, version, conn.correlation_id)
    header += struct.pack(">h", 3) + b"raw" + b"\x00"
    frame = header + body
    conn.send_bytes(struct.pack(">i", len(frame)) + frame)
    resp = conn.recv_frame()
    assert struct.unpack_from(">i", resp, 0)[0] == conn.correlation_id
    return resp, 5  # correlation id, empty header tags


def kip848_heartbeat(conn, group, member_id, epoch, topics=None, regex=None):
    """ConsumerGroupHeartbeat v1; the error, its message and the assigned topic ids."""
    body = compact_string(group) + compact_string(member_id) + struct.pack(">i", epoch)
    body += compact_string(None) + compact_string(None) + struct.pack(">i", 30000 if epoch == 0 else -1)
    body += b"\x00" if topics is None else uvarint(len(topics) + 1) + b"".join(compact_string(t) for t in topics)
    body += compact_string(regex) + compact_string(None)
    body += (uvarint(1) if epoch == 0 else b"\x00") + b"\x00"
    resp, pos = kip848_request(conn, 68, 1, body)
    _throttle, error = struct.unpack_from(">ih", resp, pos)
    message, pos = read_compact_string(resp, pos + 6)
    _member, pos = read_compact_string(resp, pos)
    member_epoch, _interval = struct.unpack_from(">ii", resp, pos)
    pos += 8
    assigned = None
    if resp[pos] != 0xFF:
        count, pos = read_uvarint(resp, pos + 1)
        assigned = {}
        for _ in range(count - 1):
            topic_id = uuid.UUID(bytes=resp[pos:pos + 16])
            n, pos = read_uvarint(resp, pos + 16)
            assigned[topic_id] = sorted(struct.unpack_from(f">{n - 1}i", resp, pos))
            pos += 4 * (n - 1) + 1  # the partitions, then empty tags
    return {"error": error, "message": message, "epoch": member_epoch, "assigned": assigned}


def kip848_describe(conn, group):
    """ConsumerGroupDescribe v0 of one group: its error, message and member count."""
    resp, pos = kip848_request(conn, 69, 0, uvarint(2) + compact_string(group) + b"\x00\x00")
    count, pos = read_uvarint(resp, pos + 4)
    assert count == 2
    (error,) = struct.unpack_from(">h", resp, pos)
    message, pos = read_compact_string(resp, pos + 2)
    group_id, pos = read_compact_string(resp, pos)
    _state, pos = read_compact_string(resp, pos)
    _assignor, pos = read_compact_string(resp, pos + 8)
    members, pos = read_uvarint(resp, pos)
    return {"group": group_id, "error": error, "message": message, "members": members - 1}


def kip848_topic_ids(node):
    conn = sasl_conn(node.sasl, "admin")
    try:
        r = conn.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False), MetadataResponse)
        return {t.name: t.topic_id for t in r.topics}
    finally:
        conn.close()


def kip848_join(conn, group, **subscription):
    """A new member's first heartbeat once the coordinator serves `group`, and its id."""
    member = str(uuid.uuid4())

    def joined():
        if conn.send(FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse).error_code:
            return None
        beat = kip848_heartbeat(conn, group, member, 0, **subscription)
        return None if beat["error"] in (14, 15, 16) else beat  # the coordinator is loading

    return member, wait_for(f"a coordinator for {group}", joined, timeout=TIMEOUT)


def kip848_assignment(conn, group, member, joined):
    """Heartbeats after `joined` until the member's epoch settles: the last assignment sent."""
    last = {"epoch": joined["epoch"]}
    if joined["assigned"] is not None:
        last["assigned"] = joined["assigned"]

    def settled():
        beat = kip848_heartbeat(conn, group, member, last["epoch"])
        assert beat["error"] == 0, beat
        if beat["assigned"] is not None:
            last["assigned"] = beat["assigned"]
        settled_now = beat["epoch"] == last["epoch"]
        last["epoch"] = beat["epoch"]
        return settled_now and "assigned" in last

    wait_for(f"{member}'s assignment in {group}", settled, timeout=TIMEOUT, interval=0.3)
    return last["assigned"]


def kip848_node(start_node):
    """A node with topics open (READ for alice) and secret (nothing for alice), alice READ on
    the groups k848acl-*; returns it and the topic ids."""
    node = acl_node(start_node)
    create_topic(node, "open", 2)
    create_topic(node, "secret", 3)
    add_acls(node,
             binding(ResourceType.TOPIC, "open", "User:alice", AclOperation.READ),
             binding(ResourceType.GROUP, "k848acl-", "User:alice", AclOperation.READ,
                     pattern=ResourcePatternType.PREFIXED))
    return node, kip848_topic_ids(node)


def test_kip848_heartbeat_needs_describe_on_every_named_topic(start_node):
    node, ids = kip848_node(start_node)
    alice = sasl_conn(node.sasl, "alice")
    try:
        # Naming a topic alice may not describe fails the heartbeat, without a message as
        # Kafka's, and nothing joins.
        _, refused = kip848_join(alice, "k848acl-named", topics=["open", "secret"])
        assert (refused["error"], refused["message"], refused["assigned"]) == (29, None, None), refused
        admin_conn = sasl_conn(node.sasl, "admin")
        loaded = wait_for("the coordinator loaded", lambda: [
            e for e in [kip848_describe(admin_conn, "k848acl-named")["error"]] if e != 14], timeout=TIMEOUT)
        assert loaded == [69]  # GROUP_ID_NOT_FOUND
        admin_conn.close()
        member, joined = kip848_join(alice, "k848acl-named", topics=["open"])
        assert joined["error"] == 0, joined
        assert kip848_assignment(alice, "k848acl-named", member, joined) == {ids["open"]: [0, 1]}
    finally:
        alice.close()


def test_kip848_regex_subscription_gets_only_describable_topics(start_node):
    node, ids = kip848_node(start_node)
    alice, admin_conn = sasl_conn(node.sasl, "alice"), sasl_conn(node.sasl, "admin")
    try:
        member, joined = kip848_join(alice, "k848acl-regex", regex="open|secret")
        assert joined["error"] == 0, joined
        assert kip848_assignment(alice, "k848acl-regex", member, joined) == {ids["open"]: [0, 1]}
        # The same regex as a super user in another group matches both.
        other, joined = kip848_join(admin_conn, "k848acl-regex-admin", regex="open|secret")
        assert kip848_assignment(admin_conn, "k848acl-regex-admin", other, joined) == {
            ids["open"]: [0, 1], ids["secret"]: [0, 1, 2]}
    finally:
        alice.close()
        admin_conn.close()


def test_kip848_describe_hides_a_group_assigned_a_topic_the_caller_may_not_describe(start_node):
    node, ids = kip848_node(start_node)
    alice, admin_conn = sasl_conn(node.sasl, "alice"), sasl_conn(node.sasl, "admin")
    try:
        member, joined = kip848_join(admin_conn, "k848acl-desc", topics=["open", "secret"])
        assert ids["secret"] in kip848_assignment(admin_conn, "k848acl-desc", member, joined)
        described = kip848_describe(alice, "k848acl-desc")
        assert described == {
            "group": "k848acl-desc", "error": 29, "members": 0,
            "message": "The group has described topic(s) that the client is not authorized to describe.",
        }, described
        assert kip848_describe(admin_conn, "k848acl-desc")["members"] == 1
        # A group of topics alice may describe is described to her.
        member, joined = kip848_join(admin_conn, "k848acl-desc-open", topics=["open"])
        kip848_assignment(admin_conn, "k848acl-desc-open", member, joined)
        described = kip848_describe(alice, "k848acl-desc-open")
        assert (described["error"], described["members"]) == (0, 1), described
    finally:
        alice.close()
        admin_conn.close()


def test_kip848_consumer_reads_its_authorized_topic(start_node):
    node, _ = kip848_node(start_node)
    producer = Producer(conf(node, "admin"))
    producer.produce("open", b"hello", partition=1)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(conf(node, "alice", **{"group.id": "k848acl-consume", "group.protocol": "consumer",
                                               "auto.offset.reset": "earliest"}))
    consumer.subscribe(["open"])
    try:
        def consumed():
            msg = consumer.poll(0.5)
            assert msg is None or not msg.error(), msg.error()
            return msg is not None and (msg.topic(), msg.value())

        assert wait_for("alice's record", consumed, timeout=TIMEOUT) == ("open", b"hello")
    finally:
        consumer.close()
