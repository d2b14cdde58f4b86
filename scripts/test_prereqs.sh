#!/usr/bin/env bash
# What `make test` needs beyond .venv: Debian's chromium for the X-Ray browser tests (driven by
# Playwright, which never downloads a browser). Installs it through apt where this user may
# (root, or sudo without a password); otherwise stops with one line saying what to install.
# Idempotent: nothing happens when chromium is already there.
set -euo pipefail
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
