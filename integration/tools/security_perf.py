"""TLS produce throughput beside plaintext, and SASL handshakes per second, of one Gregor node
(BENCHMARKS.md, "Security: TLS produce throughput and SASL handshakes").

One node with four listeners: PLAINTEXT, SSL (a 2048-bit RSA certificate made with the openssl
command, TLS 1.3 with rustls), SASL_PLAINTEXT (PLAIN and SCRAM-SHA-512; the SCRAM user made
with `gregor storage format --add-scram`) and its controller listener. `gregor-perf produce`
(librdkafka with OpenSSL) sends the same records over PLAINTEXT and SSL in alternation, so both
see the same machine load; then `gregor-perf handshakes` opens connections that authenticate
and close, with PLAIN and with SCRAM-SHA-512, and reads the node's CPU time per handshake from
/proc.

Usage: security_perf.py GREGOR_BINARY GREGOR_PERF_BINARY [--records N] [--rounds R] [--json]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

RECORD = 1024
PARTITIONS = 4


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def make_certs(dir):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=bench-ca", cwd=dir)
    with open(os.path.join(dir, "server.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=dir)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
            "-days", "2", "-extfile", "server.ext", cwd=dir)
    with open(os.path.join(dir, "store.pem"), "w") as store:
        for part in ("server.pem", "server.key"):
            with open(os.path.join(dir, part)) as f:
                store.write(f.read())


def start_node(binary, dir):
    overrides = {
        "log.dirs": os.path.join(dir, "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "metrics.listener": "127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": os.path.join(dir, "store.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";',
        "connection.failed.authentication.delay.ms": "0",
        "max.connections.per.ip": "100000",
    }
    args = []
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    cluster_id = subprocess.run([binary, "storage", "random-uuid"], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([binary, "storage", "format", *args, "--cluster-id", cluster_id, "--standalone",
                    "--add-scram", "SCRAM-SHA-512=[name=bench,password=bench-secret]"], check=True, capture_output=True)
    log = open(os.path.join(dir, "node.log"), "wb")
    env = dict(os.environ, NO_COLOR="1")
    env.pop("RUST_LOG", None)
    proc = subprocess.Popen([binary, "node", *args], stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.path.join(dir, "node.log"), "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                if "node ready" in line:
                    listeners = re.search(r"listeners=(\S+)", line).group(1).strip('"')
                    return proc, dict(e.split("://", 1) for e in listeners.split(","))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the node did not start; see {dir}/node.log")


def node_cpu_s(pid):
    """User + system CPU seconds of the node so far (clock ticks of 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def produce(perf, bootstrap, topic, records, props, report):
    subprocess.run([perf, "produce", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
                    "--record-size", str(RECORD), "--throughput", "-1", "--json", report, "--producer-props",
                    "acks=1", "linger.ms=5", "batch.size=1048576", *props], check=True, capture_output=True, timeout=600)
    with open(report) as f:
        return json.load(f)


def handshakes(perf, bootstrap, mechanism, pid, report):
    done = subprocess.run([perf, "handshakes", "--bootstrap-server", bootstrap, "--mechanism", mechanism,
                           "--username", "bench", "--password", "bench-secret", "--concurrency", "4", "--duration", "10",
                           "--pid", str(pid), "--json", report], check=True, capture_output=True, text=True, timeout=120)
    with open(report) as f:
        return json.load(f), done.stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("gregor")
    parser.add_argument("gregor_perf")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gregor-security-perf-") as dir:
        make_certs(dir)
        proc, listeners = start_node(args.gregor, dir)
        try:
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
            admin.create_topics([NewTopic("bench", PARTITIONS, 1)])["bench"].result(30)
            rows = []
            tls_props = ["security.protocol=SSL", f"ssl.ca.location={dir}/ca.pem"]
            for round in range(args.rounds):
                cpu = node_cpu_s(proc.pid)
                plain = produce(args.gregor_perf, listeners["PLAINTEXT"], "bench", args.records, [], f"{dir}/p.json")
                plain_cpu, cpu = node_cpu_s(proc.pid) - cpu, node_cpu_s(proc.pid)
                tls = produce(args.gregor_perf, listeners["SSL"], "bench", args.records, tls_props, f"{dir}/t.json")
                tls_cpu = node_cpu_s(proc.pid) - cpu
                mib = args.records * RECORD / 2**20
                rows.append({"round": round + 1, "plaintext_mb_s": plain["mb_per_s"], "ssl_mb_s": tls["mb_per_s"],
                             "ratio": tls["mb_per_s"] / plain["mb_per_s"],
                             "node_cpu_ms_per_mib_plaintext": plain_cpu * 1000 / mib,
                             "node_cpu_ms_per_mib_ssl": tls_cpu * 1000 / mib})
                print(f"round {round + 1}: PLAINTEXT {plain['mb_per_s']:.1f} MB/s, SSL {tls['mb_per_s']:.1f} MB/s "
                      f"({tls['mb_per_s'] / plain['mb_per_s']:.0%}); node CPU per MiB {plain_cpu * 1000 / mib:.2f} ms "
                      f"plaintext, {tls_cpu * 1000 / mib:.2f} ms SSL", flush=True)
            sasl = {}
            for mechanism in ("PLAIN", "SCRAM-SHA-512"):
                report, line = handshakes(args.gregor_perf, listeners["SASL_PLAINTEXT"], mechanism, proc.pid, f"{dir}/h.json")
                sasl[mechanism] = report
                print(line, flush=True)
            if args.json:
                print(json.dumps({"produce": rows, "handshakes": sasl}, indent=2))
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
