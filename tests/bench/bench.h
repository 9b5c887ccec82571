/*
 * What the benchmark tools share (the programs of tests/bench; each is built alone by
 * build.sh, so these are static helpers of each program): a monotonic
 * clock, the comparison their sorts of timings use, and callgrind's client
 * requests where <valgrind/callgrind.h> is installed (no-ops elsewhere).
 */
#ifndef RSVERBS_BENCH_H
#define RSVERBS_BENCH_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>

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

/* The hints the msgcost tools ask with: endpoint type and caps as given,
 * FI_CONTEXT, the verbs-style memory registration modes (FI_MR_LOCAL,
 * virtual addresses, allocated memory, provider keys), one thread per
 * domain, manual progress, provider PROV. Exits when out of memory. */
static inline struct fi_info *bench_hints(enum fi_ep_type type, uint64_t caps, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints) {
		fprintf(stderr, "fi_allocinfo failed\n");
		exit(1);
	}
	hints->ep_attr->type = type;
	hints->caps = caps;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	return hints;
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
