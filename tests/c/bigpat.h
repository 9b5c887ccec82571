/*
 * Patterns for tests that move tens of MiB (rdm_bigrma, msg_bigrma): one
 * 64-bit word per step instead of common.c's byte pattern, which costs
 * seconds per 64 MiB under emulation (more under AddressSanitizer), and a
 * watchdog re-armed per phase (the whole test takes longer than one
 * TEST_ALARM_SECS period; the suite's CTEST_TIMEOUT still bounds it).
 */
#ifndef RSVERBS_CTEST_BIGPAT_H
#define RSVERBS_CTEST_BIGPAT_H

#include "common.h"

#include <unistd.h>


static inline uint64_t bigpat_word(size_t i, uint32_t seed)
{
	uint64_t x = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed + 1) * 0xD6E8FEB86659FD93ull;
	return x ^ (x >> 29);
}

static inline void big_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	size_t n = len / 8, i;
	for (i = 0; i < n; i++) {
		uint64_t w = bigpat_word(i, seed);
		memcpy(p + 8 * i, &w, 8);
	}
	uint64_t w = bigpat_word(n, seed);
	memcpy(p + 8 * n, &w, len - 8 * n);
}

static inline void big_expect(const void *buf, size_t len, uint32_t seed, const char *what)
{
	const uint8_t *p = buf;
	size_t n = len / 8, i;
	for (i = 0; i <= n; i++) {
		uint64_t w = bigpat_word(i, seed);
		size_t k = i < n ? 8 : len - 8 * n;
		if (k && memcmp(p + 8 * i, &w, k) != 0)
			for (size_t b = 0; b < k; b++)
				if (p[8 * i + b] != ((const uint8_t *)&w)[b])
					fail("%s: byte %zu of %zu is %#x, want %#x", what, 8 * i + b, len, p[8 * i + b],
					     ((const uint8_t *)&w)[b]);
	}
}

/* A new phase: the watchdog starts again (the child's fires first). */
static inline void big_rearm(void)
{
	alarm(is_child ? TEST_ALARM_SECS - 10 : TEST_ALARM_SECS);
}

#endif
