#!/usr/bin/env bash
# Build the benchmark tools (tests/bench/*.c, public libfabric API only).
#   bash tests/bench/build.sh OUTDIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-gcc}
CFLAGS=${CFLAGS:--std=gnu11 -Wall -Wextra -Werror -O2 -g}
mkdir -p "$out"
for f in "$src"/*.c; do
	name=$(basename "$f" .c)
	# shellcheck disable=SC2086
	$CC $CFLAGS "$f" -o "$out/$name" -lfabric
	echo "built $out/$name"
done
