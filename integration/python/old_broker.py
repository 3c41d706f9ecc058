"""A minimal Kafka-protocol server that answers like an Apache Kafka 3.7-4.0 broker, i.e. one that
knows api 74 only as ListClientMetricsResources v0 (KIP-1000), for testing the `gregor` admin tools'
version negotiation against an older broker.

It is honest about what it is: ApiVersions advertises only the APIs it really serves (the ones the
`configs` / `client-metrics` tools use), with Kafka 4.0's version ranges, and it encodes and decodes
every frame with kafka-python's message classes at the exact version in the request header. A request
for an API or version it does not advertise is recorded in `errors` and the connection is closed, as
a Kafka broker closes it on a request it cannot parse (ApiVersions alone answers an unknown version
with a v0 body and UNSUPPORTED_VERSION, KIP-511).

Client-metrics resources live in memory (`client_metrics`: name -> {key: value}); DescribeConfigs
answers them as Kafka 3.7's ConfigHelper does (source DYNAMIC_CLIENT_METRICS_CONFIG, not sensitive,
no synonyms), IncrementalAlterConfigs SETs and DELETEs their keys (a resource without keys is gone).

Bounded: it binds 127.0.0.1 port 0, serves from daemon threads inside the test process, caps frames,
connections, the request log and every socket wait, and `close()` stops and joins everything.
"""

import collections
import io
import socket
import struct
import threading

from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

CLIENT_METRICS = 16
CLIENT_METRICS_KEYS = ("metrics", "interval.ms", "match")
DYNAMIC_CLIENT_METRICS_CONFIG = 7
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
MAX_FRAME = 1 << 20
MAX_CONNECTIONS = 32
MAX_LOGGED = 1000
SOCKET_TIMEOUT = 30.0

# api key -> (request class, response class, min, max): Kafka 4.0's ranges (DescribeConfigs v0
# removed by KIP-896), with api 74 at v0 only as in 3.7-4.0.
KAFKA_4_0 = {
    ApiVersionsRequest.API_KEY: (ApiVersionsRequest, ApiVersionsResponse, 0, 4),
    MetadataRequest.API_KEY: (MetadataRequest, MetadataResponse, 0, 12),
    ListGroupsRequest.API_KEY: (ListGroupsRequest, ListGroupsResponse, 0, 5),
    DescribeConfigsRequest.API_KEY: (DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    IncrementalAlterConfigsRequest.API_KEY: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    ListConfigResourcesRequest.API_KEY: (ListConfigResourcesRequest, ListConfigResourcesResponse, 0, 0),
}

Received = collections.namedtuple("Received", "api_key api_version correlation_id client_id request")


class OldBroker:
    """`with OldBroker(client_metrics={...}, groups=[...]) as broker:` serves on `broker.bootstrap`;
    `broker.received` is every decoded request in arrival order, `broker.errors` what it refused."""

    def __init__(self, client_metrics=None, groups=(), node_id=1, cluster_id="old-broker-cluster", without=()):
        # `without`: api keys to leave out (e.g. 74 for a broker older than 3.7).
        self.apis = {k: v for k, v in KAFKA_4_0.items() if k not in without}
        self.client_metrics = {name: dict(cfg) for name, cfg in (client_metrics or {}).items()}
        self.groups = list(groups)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.received = collections.deque(maxlen=MAX_LOGGED)
        self.errors = collections.deque(maxlen=MAX_LOGGED)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []
        self._conns = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.1)
        self.host, self.port = self._sock.getsockname()
        self._acceptor = threading.Thread(target=self._accept_loop, name="old-broker-accept", daemon=True)
        self._acceptor.start()

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    def requests_for(self, api_key):
        """(version, request) of every received request of `api_key`."""
        with self._lock:
            return [(r.api_version, r.request) for r in self.received if r.api_key == api_key]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._stop.set()
        self._acceptor.join(timeout=5)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in list(self._threads):
            thread.join(timeout=5)

    # -- plumbing ------------------------------------------------------------------------------

    def _error(self, text):
        with self._lock:
            self.errors.append(text)

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                if len(self._threads) >= MAX_CONNECTIONS:
                    self.errors.append("too many connections")
                    conn.close()
                    continue
                self._conns.append(conn)
                thread = threading.Thread(target=self._serve, args=(conn,), name="old-broker-conn", daemon=True)
                self._threads.append(thread)
            thread.start()

    @staticmethod
    def _recv_exact(conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def _serve(self, conn):
        conn.settimeout(SOCKET_TIMEOUT)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._stop.is_set():
                size = self._recv_exact(conn, 4)
                if size is None:
                    return
                (size,) = struct.unpack(">i", size)
                if not 4 <= size <= MAX_FRAME:
                    self._error(f"bad frame size {size}")
                    return
                body = self._recv_exact(conn, size)
                if body is None:
                    return
                answer = self._handle(body)
                if answer is None:
                    return  # as Kafka: a request it cannot parse closes the connection
                conn.sendall(answer)
        except (OSError, socket.timeout):
            return
        finally:
            conn.close()

    def _handle(self, body):
        api_key, api_version, correlation_id = struct.unpack(">hhi", body[:8])
        api = self.apis.get(api_key)
        if api is None:
            self._error(f"api key {api_key} v{api_version} is not advertised")
            return None
        req_cls, resp_cls, lo, hi = api
        if not lo <= api_version <= hi:
            if api_key == ApiVersionsRequest.API_KEY:
                # KIP-511: header v0 + v0 body with UNSUPPORTED_VERSION and ApiVersions' own range.
                entry = struct.pack(">hhh", api_key, lo, hi)
                frame = struct.pack(">ihi", correlation_id, UNSUPPORTED_VERSION, 1) + entry
                return struct.pack(">i", len(frame)) + frame
            self._error(f"api key {api_key} v{api_version} is outside the advertised {lo}-{hi}")
            return None
        try:
            hdr_data = io.BytesIO(body)
            header = req_cls.parse_header(hdr_data, version=api_version)
            flexible = req_cls.flexible_version_q(api_version)
            decode = req_cls._struct.compiled_decode_from(api_version, compact=flexible, tagged=flexible,
                                                         data_class=req_cls[None])
            request, end = decode(memoryview(body), hdr_data.tell())
        except Exception as exc:  # noqa: BLE001 - a malformed request is a finding, not a crash
            self._error(f"{req_cls.__name__} v{api_version}: cannot decode: {exc!r}")
            return None
        if end != len(body):
            self._error(f"{req_cls.__name__} v{api_version}: {len(body) - end} trailing byte(s)")
            return None
        with self._lock:
            self.received.append(Received(api_key, api_version, correlation_id, header.client_id, request))
        try:
            fields = getattr(self, f"_on_{api_key}")(request, api_version)
            response = resp_cls[api_version](**fields)
            response.with_header(correlation_id=correlation_id)
            return bytes(response.encode(header=True, framed=True))
        except Exception as exc:  # noqa: BLE001 - a bug of this server is a test failure, not a hang
            self._error(f"{resp_cls.__name__} v{api_version}: cannot answer: {exc!r}")
            return None

    # -- handlers: each returns the response fields -------------------------------------------

    def _on_18(self, request, version):  # ApiVersions
        ApiVersion = ApiVersionsResponse.ApiVersion
        return {
            "error_code": 0,
            "api_keys": [ApiVersion(api_key=k, min_version=v[2], max_version=v[3]) for k, v in sorted(self.apis.items())],
            "throttle_time_ms": 0,
            "supported_features": [],
            "finalized_features_epoch": -1,
            "finalized_features": [],
            "zk_migration_ready": False,
        }

    def _on_3(self, request, version):  # Metadata: this node, no topics
        Topic = MetadataResponse.MetadataResponseTopic
        requested = [t.name for t in request.topics] if request.topics else []
        return {
            "throttle_time_ms": 0,
            "brokers": [MetadataResponse.MetadataResponseBroker(node_id=self.node_id, host=self.host, port=self.port, rack=None)],
            "cluster_id": self.cluster_id,
            "controller_id": self.node_id,
            "topics": [Topic(error_code=3, name=name, is_internal=False, partitions=[]) for name in requested],
        }

    def _on_16(self, request, version):  # ListGroups
        Group = ListGroupsResponse.ListedGroup
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "groups": [Group(group_id=g, protocol_type="consumer", group_state="Stable", group_type="Classic")
                       for g in self.groups],
        }

    def _on_74(self, request, version):  # ListClientMetricsResources v0
        Resource = ListConfigResourcesResponse.ConfigResource
        with self._lock:
            names = list(self.client_metrics)
        return {"throttle_time_ms": 0, "error_code": 0,
                "config_resources": [Resource(resource_name=n) for n in names]}

    def _on_32(self, request, version):  # DescribeConfigs
        Result = DescribeConfigsResponse.DescribeConfigsResult
        Entry = Result.DescribeConfigsResourceResult
        results = []
        for res in request.resources:
            if res.resource_type != CLIENT_METRICS:
                self._error(f"DescribeConfigs of resource type {res.resource_type} is not served")
                results.append(Result(error_code=INVALID_REQUEST, error_message="old_broker.py serves CLIENT_METRICS configs only",
                                      resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
                continue
            with self._lock:
                cfg = dict(self.client_metrics.get(res.resource_name, {}))
            keys = res.configuration_keys
            entries = [Entry(name=k, value=v, read_only=False, config_source=DYNAMIC_CLIENT_METRICS_CONFIG,
                             is_default=False, is_sensitive=False, synonyms=[], config_type=0, documentation=None)
                       for k, v in cfg.items() if keys is None or k in keys]
            results.append(Result(error_code=0, error_message=None, resource_type=res.resource_type,
                                  resource_name=res.resource_name, configs=entries))
        return {"throttle_time_ms": 0, "results": results}

    def _on_44(self, request, version):  # IncrementalAlterConfigs: SET / DELETE of client metrics
        Resp = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        responses = []
        for res in request.resources:
            def answer(code, message=None, res=res):
                responses.append(Resp(error_code=code, error_message=message,
                                      resource_type=res.resource_type, resource_name=res.resource_name))
            if res.resource_type != CLIENT_METRICS:
                self._error(f"IncrementalAlterConfigs of resource type {res.resource_type} is not served")
                answer(INVALID_REQUEST, "old_broker.py serves CLIENT_METRICS configs only")
                continue
            unknown = [c.name for c in res.configs if c.name not in CLIENT_METRICS_KEYS]
            if unknown:
                answer(INVALID_REQUEST, f"Unknown client metrics configuration: {unknown}")
                continue
            if any(c.config_operation not in (0, 1) for c in res.configs):
                answer(INVALID_REQUEST, "old_broker.py serves SET and DELETE only")
                continue
            if not request.validate_only:
                with self._lock:
                    cfg = self.client_metrics.setdefault(res.resource_name, {})
                    for c in res.configs:
                        if c.config_operation == 0:
                            cfg[c.name] = c.value
                        else:
                            cfg.pop(c.name, None)
                    if not cfg:
                        del self.client_metrics[res.resource_name]
            answer(0)
        return {"throttle_time_ms": 0, "responses": responses}
