#!/usr/bin/env bash
# Build the C operation tests.
#   bash tests/c/build.sh OUTDIR
# Compiles every tests/c/*.c test program (each linked with common.c and -lfabric)
# into OUTDIR, printing one line per built binary.  Any compile error fails
# the script (non-zero exit) with the compiler output.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
out=$1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-gcc}
CFLAGS=${CFLAGS:--std=gnu11 -Wall -Wextra -Werror -O2 -g}

mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v "$CC" >/dev/null 2>&1; then
	echo "build.sh: compiler '$CC' not found" >&2
	exit 1
fi
if [ ! -f /usr/include/rdma/fabric.h ]; then
	echo "build.sh: /usr/include/rdma/fabric.h missing (install libfabric-dev)" >&2
	exit 1
fi

# common.c once, as an object
# shellcheck disable=SC2086
if ! $CC $CFLAGS -c "$src/common.c" -o "$out/common.o"; then
	echo "build.sh: FAILED to compile common.c" >&2
	exit 1
fi

n=0
for f in "$src"/*.c; do
	name=$(basename "$f" .c)
	[ "$name" = common ] && continue
	# A test that needs more libraries names them on a " * LIBS: ..." line
	# near its top (e.g. rdm_hostile: -libverbs -lrdmacm).
	libs=$(sed -n '1,20s/^ \* LIBS: *\(-l[^ ]*\( -l[^ ]*\)*\).*/\1/p' "$f" | head -n 1)
	# shellcheck disable=SC2086
	if ! $CC $CFLAGS -I"$src" "$f" "$out/common.o" -o "$out/$name" -lfabric $libs -lpthread; then
		echo "build.sh: FAILED to compile $name" >&2
		exit 1
	fi
	echo "built $out/$name"
	n=$((n + 1))
done
rm -f "$out/common.o"
if [ "$n" -eq 0 ]; then
	echo "build.sh: no test sources found in $src" >&2
	exit 1
fi
