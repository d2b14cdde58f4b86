#!/usr/bin/env bash
# What `make test` needs beyond .venv:
# - the public CTR samples the dataset tests read (../shared/datasets beside the repository, or
#   $ADS_RANKING_SHARED_DATASETS): their licence keeps them out of the repository and out of any
#   package we could install, so where they are absent this stops with one line saying where to
#   put them (or how to leave those tests out) instead of letting them skip;
# - Debian's chromium for the X-Ray browser tests (driven by Playwright, which never downloads a
#   browser). Installs it through apt where this user may (root, or sudo without a password);
#   otherwise stops with one line saying what to install.
# Idempotent: nothing happens when both are there.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
has_samples() { [ -f "$1/criteo-sample/train_head_10k.txt" ] && [ -f "$1/avazu-sample/avazu_part_a.csv" ]; }
datasets="$here/../shared/datasets"     # the tests' order: $ADS_RANKING_SHARED_DATASETS, then this
if [ -n "${ADS_RANKING_SHARED_DATASETS:-}" ] && has_samples "$ADS_RANKING_SHARED_DATASETS"; then
  datasets="$ADS_RANKING_SHARED_DATASETS"
fi
if ! has_samples "$datasets"; then
  echo "make test: the CTR-sample tests need the public Criteo and Avazu samples at $datasets (criteo-sample/train_head_10k.txt, avazu-sample/avazu_part_{a,b}.csv): put the shared datasets folder there or set ADS_RANKING_SHARED_DATASETS=DIR, or leave those tests out with make test PYTEST_ARGS='-m \"not needs_datasets\"'" >&2
  exit 1
fi
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "make test: the X-Ray browser tests need Debian's chromium: run 'sudo apt-get install -y chromium' (then make test again)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "make test: the X-Ray browser tests need a chromium at /usr/bin/chromium (no apt-get here to install Debian's)" >&2
  exit 1
fi
echo "installing Debian's chromium for the X-Ray browser tests (apt-get)" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
