#!/usr/bin/env bash
# Installs the Debian packages the build needs, if any is missing (fresh Debian 12).
# Extra package names as arguments are installed the same way (ci/mercury.sh: cmake, g++).
set -euo pipefail
need=()
for p in gcc pkg-config libclang-dev libibverbs-dev librdmacm-dev libfabric-dev libfabric-bin valgrind "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup)" >&2; exit 1; }
