#!/usr/bin/env bash
# Runs tests/prometheus_scrape_check.py against the built binaries.
set -euo pipefail
# Debian's interpreter: python3-prometheus-client is installed for it.
exec /usr/bin/python3 "$1" --psctl="$2" --bin_dir="$TEST_SRCDIR/psflow"
