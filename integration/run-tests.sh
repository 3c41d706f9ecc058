#!/usr/bin/env bash
# Runs every test: Rust unit and integration tests (cargo), then the Python end-to-end tests
# with pinned real Kafka clients. Works from a clean clone; creates .venv at the repo root.
# Exit status is non-zero if anything fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PY_PACKAGES=(kafka-python==3.0.12 confluent-kafka==2.16.1 pytest==9.2.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0)

if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv"
    python3 -m venv .venv
fi
# Install only when a pinned package is missing or at another version.
if ! .venv/bin/python - "${PY_PACKAGES[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
    echo "==> installing ${PY_PACKAGES[*]}"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"
fi

# kafkajs for the old-client tests, pinned by integration/js/package-lock.json.
if command -v npm >/dev/null 2>&1; then
    echo "==> npm ci (kafkajs)"
    (cd integration/js && npm ci --no-audit --no-fund --silent)
fi

echo "==> cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "==> cargo build --workspace --all-targets"
cargo build --workspace --all-targets

status=0
echo "==> cargo tests"
if command -v cargo-nextest >/dev/null 2>&1; then
    # nextest runs each test in its own process, which suits tests that start nodes; doctests
    # are not run by nextest, so run them separately.
    cargo nextest run --workspace --no-fail-fast || status=1
    cargo test --workspace --doc || status=1
else
    cargo test --workspace --no-fail-fast || status=1
fi

echo "==> python end-to-end tests"
GREGOR_BIN="${GREGOR_BIN:-$ROOT/target/debug/gregor}" \
    .venv/bin/python -m pytest integration/python -q -n 2 || status=1

# Last and alone: it relinks target/debug/gregor, which the tests above run.
echo "==> cargo install --path node into a temporary root"
cargo test -p gregor-integration --test config -- --ignored cargo_install || status=1

exit "$status"
