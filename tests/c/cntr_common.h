/*
 * Counter helpers shared by cntr_msg.c and cntr_rdm.c.
 */
#ifndef RSVERBS_CTEST_CNTR_COMMON_H
#define RSVERBS_CTEST_CNTR_COMMON_H

#include "common.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

static inline struct fid_cntr *cntr_open(struct fid_domain *d, enum fi_wait_obj w)
{
	struct fi_cntr_attr a;
	struct fid_cntr *c = NULL;
	memset(&a, 0, sizeof(a));
	a.events = FI_CNTR_EVENTS_COMP;
	a.wait_obj = w;
	CHK(fi_cntr_open(d, &a, &c, NULL));
	EXPECT(c != NULL, "fi_cntr_open gave no counter");
	EXPECT(fi_cntr_read(c) == 0 && fi_cntr_readerr(c) == 0, "a new counter is not 0/0");
	return c;
}

/* fi_cntr_wait until value >= n (fails on error/timeout), then the value must be exactly n. */
static inline void cntr_expect(struct fid_cntr *c, uint64_t n, const char *what)
{
	int r = fi_cntr_wait(c, n, WAIT_MS);
	EXPECT(r == 0, "%s: fi_cntr_wait(%llu) returned %d (%s); value %llu err %llu", what,
	       (unsigned long long)n, r, fi_strerror(-r), (unsigned long long)fi_cntr_read(c),
	       (unsigned long long)fi_cntr_readerr(c));
	uint64_t v = fi_cntr_read(c);
	EXPECT(v == n, "%s: counter %llu, want exactly %llu", what, (unsigned long long)v,
	       (unsigned long long)n);
}

/* Like cntr_expect for counters without a wait object (polls fi_cntr_read). */
static inline void cntr_poll_expect(struct fid_cntr *c, uint64_t n, const char *what)
{
	uint64_t t0 = now_ms(), v;
	while ((v = fi_cntr_read(c)) < n) {
		EXPECT(now_ms() - t0 < WAIT_MS, "%s: counter %llu after %d ms, want %llu", what,
		       (unsigned long long)v, WAIT_MS, (unsigned long long)n);
	}
	EXPECT(v == n, "%s: counter %llu, want exactly %llu", what, (unsigned long long)v,
	       (unsigned long long)n);
}

/* fi_cntr_wait must time out: -FI_ETIMEDOUT after about ms, value unchanged. */
static inline void cntr_expect_timeout(struct fid_cntr *c, uint64_t threshold, int ms)
{
	uint64_t v0 = fi_cntr_read(c), e0 = fi_cntr_readerr(c), t0 = now_ms();
	int r = fi_cntr_wait(c, threshold, ms);
	uint64_t dt = now_ms() - t0;
	EXPECT(r == -FI_ETIMEDOUT, "fi_cntr_wait(%llu, %d ms) returned %d (%s), want -FI_ETIMEDOUT",
	       (unsigned long long)threshold, ms, r, fi_strerror(-r));
	EXPECT(dt + 20 >= (uint64_t)ms && dt < (uint64_t)ms + 20000, "fi_cntr_wait(%d ms) took %llu ms",
	       ms, (unsigned long long)dt);
	EXPECT(fi_cntr_read(c) == v0 && fi_cntr_readerr(c) == e0, "counter changed during the time-out");
	logmsg("fi_cntr_wait(%d ms) timed out after %llu ms", ms, (unsigned long long)dt);
}

/* add/set/adderr/seterr on a counter; restores nothing (the caller owns it). */
static inline void cntr_check_set_add(struct fid_cntr *c)
{
	uint64_t v = fi_cntr_read(c);
	CHK(fi_cntr_add(c, 5));
	EXPECT(fi_cntr_read(c) == v + 5, "after fi_cntr_add(5): %llu, want %llu",
	       (unsigned long long)fi_cntr_read(c), (unsigned long long)v + 5);
	CHK(fi_cntr_set(c, 1000));
	EXPECT(fi_cntr_read(c) == 1000, "after fi_cntr_set(1000): %llu", (unsigned long long)fi_cntr_read(c));
	enum fi_wait_obj wo = FI_WAIT_NONE;
	if (fi_control(&c->fid, FI_GETWAITOBJ, &wo) == 0 && wo != FI_WAIT_NONE)
		EXPECT(fi_cntr_wait(c, 1000, 0) == 0, "fi_cntr_wait(1000) at 1000 must return 0 at once");
	uint64_t e = fi_cntr_readerr(c);
	CHK(fi_cntr_adderr(c, 3));
	EXPECT(fi_cntr_readerr(c) == e + 3, "after fi_cntr_adderr(3): %llu, want %llu",
	       (unsigned long long)fi_cntr_readerr(c), (unsigned long long)e + 3);
	EXPECT(fi_cntr_read(c) == 1000, "fi_cntr_adderr changed the value");
	CHK(fi_cntr_seterr(c, 0));
	EXPECT(fi_cntr_readerr(c) == 0, "after fi_cntr_seterr(0): %llu", (unsigned long long)fi_cntr_readerr(c));
	CHK(fi_cntr_set(c, v));
	EXPECT(fi_cntr_read(c) == v, "after fi_cntr_set(%llu): %llu", (unsigned long long)v,
	       (unsigned long long)fi_cntr_read(c));
}

static inline int cntr_epoll(struct fid_cntr *c)
{
	int fd = -1;
	enum fi_wait_obj wo = FI_WAIT_NONE;
	CHK(fi_control(&c->fid, FI_GETWAITOBJ, &wo));
	EXPECT(wo == FI_WAIT_FD, "FI_GETWAITOBJ gave %d, want FI_WAIT_FD", (int)wo);
	CHK(fi_control(&c->fid, FI_GETWAIT, &fd));
	EXPECT(fd >= 0, "FI_GETWAIT gave fd %d", fd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	EXPECT(ep >= 0, "epoll_create1: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN };
	EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl: %s", strerror(errno));
	return ep;
}

/* fi_trywait on the counter until it returns 0 (reading the counter between tries). */
static inline void cntr_trywait(struct fid_fabric *f, struct fid_cntr *c)
{
	struct fid *fids[1] = { &c->fid };
	uint64_t t0 = now_ms();
	for (;;) {
		int r = fi_trywait(f, fids, 1);
		if (r == 0)
			return;
		EXPECT(r == -FI_EAGAIN, "fi_trywait(cntr) returned %d (%s)", r, fi_strerror(-r));
		(void)fi_cntr_read(c);
		(void)fi_cntr_readerr(c);
		EXPECT(now_ms() - t0 < WAIT_MS, "fi_trywait(cntr) -FI_EAGAIN for %d ms", WAIT_MS);
	}
}

static inline int epoll_ready(int ep, int ms)
{
	struct epoll_event ev;
	int r;
	do
		r = epoll_wait(ep, &ev, 1, ms);
	while (r < 0 && errno == EINTR);
	EXPECT(r >= 0, "epoll_wait: %s", strerror(errno));
	return r;
}

#endif
