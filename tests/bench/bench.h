/*
 * What the benchmark tools share (the programs of tests/bench; each is built alone by
 * build.sh, so these are static helpers of each program): a monotonic
 * clock, the comparison their sorts of timings use, and callgrind's client
 * requests where <valgrind/callgrind.h> is installed (no-ops elsewhere).
 */
#ifndef RSVERBS_BENCH_H
#define RSVERBS_BENCH_H
#include <stdint.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS
#define CALLGRIND_ZERO_STATS
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* CHK for programs that exit on the first error: BENCH_NAME names the program. */
#define BENCH_CHK(x)                                                                                   \
	do {                                                                                           \
		long _r = (long)(x);                                                                   \
		if (_r < 0) {                                                                          \
			fprintf(stderr, BENCH_NAME ": %s = %ld (%s)\n", #x, _r, fi_strerror((int)-_r)); \
			exit(1);                                                                       \
		}                                                                                      \
	} while (0)
#endif
