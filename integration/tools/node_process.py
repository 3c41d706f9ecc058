"""Starts one `gregor node` for a measurement tool, on ephemeral loopback ports."""
import re, subprocess, tempfile, threading


def start_node(binary, overrides=(), prefix="gregor-tool-"):
    """Starts `binary node` with its data in a new temporary directory and `overrides` added to
    the listeners on ephemeral ports; returns (process, (host, port) of PLAINTEXT, directory)
    once the node logs that it is ready. The rest of its log is read and dropped."""
    directory = tempfile.mkdtemp(prefix=prefix)
    settings = [f"log.dirs={directory}/data",
                "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "metrics.listener=127.0.0.1:0", *overrides]
    process = subprocess.Popen([binary, "node"] + [a for o in settings for a in ("--override", o)],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in process.stderr:
        m = re.search(r"listeners=PLAINTEXT://([\d.]+):(\d+)", line)
        if "node ready" in line and m:
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return process, (m.group(1), int(m.group(2))), directory
    raise SystemExit("the node printed no ready line")
