/*
 * waitloop_common.h: the Mercury NA OFI progress/wait loop test shared by
 * msg_waitloop.c (FI_EP_MSG) and rdm_waitloop.c (FI_EP_RDM): the traffic,
 * the server and client loops, the figures and the assertions (described in
 * msg_waitloop.c's header) and main().  The test that includes it defines
 * first:
 *   WL_NAME              its name ("msg_waitloop")
 *   MAX_MSG              the largest message (-S bound, buffer slot size)
 *   WL_DEFAULT_BURSTS    -b default
 *   WL_DEFAULT_MAX_SIZE  -S default
 *   WL_RECV_ADDR         the src_addr of every fi_recv
 *   wl_ctx               its endpoint context type (fabric, ep, txcq, rxcq)
 *   wl_peer(x)           the destination of the client's sends
 * and after it the wl_* transport functions declared below.
 */
#ifndef WAITLOOP_COMMON_H
#define WAITLOOP_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_BURST 32
#define NRX 64          /* server receives kept posted (>= 2 bursts) */
#define NACK_TX 8       /* server ack send buffers */
#define NACK_RX 8       /* client ack receives */
#define ACK_SIZE 64
#define WL_MAGIC 0x314d4c57u  /* "WLM1" */
#define ACK_MAGIC 0x31414c57u /* "WLA1" */
#define TAG_STATS 0x51
#define TAG_BYE 0x52
/* gaps of at least QUIET_MIN_NS are sampled after QUIET_SETTLE_NS */
#define QUIET_MIN_NS 8000000u
#define QUIET_SETTLE_NS 3000000u

struct wl_hdr {
	uint32_t magic;
	uint32_t seq;
	uint32_t burst;
	uint16_t idx;
	uint16_t burst_len;
	uint32_t len;     /* whole message, header included */
	uint32_t csum;    /* FNV-1a over the message with csum = send_ns = 0 */
	uint64_t send_ns; /* CLOCK_MONOTONIC just before fi_send */
};

struct wl_ack {
	uint32_t magic;
	uint32_t burst;
	uint32_t count;
	uint32_t next_seq;
	uint64_t server_ns;
};

struct cli_stats {
	uint64_t msgs;
	uint64_t bursts;
	uint64_t rtt_med_ns, rtt_p99_ns, rtt_max_ns;
	uint64_t trywait_calls, trywait_again, sleeps, eagain_sends;
	/* the server's CPU clock sampled in the quiet part of the gaps */
	uint64_t quiet_windows, quiet_wall_ns, quiet_cpu_ns;
	uint64_t worst_quiet_wall_ns, worst_quiet_cpu_ns; /* windows >= 100 ms */
};

static struct {
	unsigned bursts, max_burst, max_size, max_gap_ms, long_gap_ms, long_pct;
	unsigned watchdog_ms, cpu_bound_pct, idle_bound_pct, alarm_s;
	uint64_t seed;
} P = { WL_DEFAULT_BURSTS, MAX_BURST, WL_DEFAULT_MAX_SIZE, 20, 200, 1, 10000, 20, 75,
	TEST_ALARM_SECS, 0 };

/* ---- helpers --------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t last_nvcsw; /* voluntary context switches at the last cpu_ns2 */

/* getrusage(RUSAGE_SELF) user+sys in ns; *sys (if given) gets the sys part. */
static uint64_t cpu_ns2(uint64_t *sys)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		fail("getrusage: %s", strerror(errno));
	uint64_t u = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
	uint64_t k = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
	if (sys)
		*sys = k;
	last_nvcsw = (uint64_t)ru.ru_nvcsw;
	return u + k;
}

static uint64_t cpu_ns(void)
{
	return cpu_ns2(NULL);
}

/* WL_TRACE_MS=N: log every idle stretch of >= N ms (and every one of >= 1 ms
 * over the -c bound) with its details. */
static long trace_ms = -1;

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state += 0x9e3779b97f4a7c15ull;
	return mix64(rng_state);
}

/* Burst sizes and message lengths are functions of the seed, so the server
 * knows what must arrive independently of the headers. */
static unsigned burst_len_of(unsigned b)
{
	return 1 + (unsigned)(mix64(P.seed ^ (0xb0b0000000ull + b)) % P.max_burst);
}

static uint32_t msg_len_of(uint32_t seq)
{
	uint64_t h = mix64(P.seed * 31 + 0x5e9000000000ull + seq);
	uint32_t min = sizeof(struct wl_hdr);
	uint32_t span = P.max_size - min + 1;
	switch (h & 15) {
	case 0: return min;
	case 1: return P.max_size;
	case 2: case 3: case 4: case 5: /* small */
		return min + (uint32_t)((h >> 8) % (span < 96 ? span : 96));
	default:
		return min + (uint32_t)((h >> 8) % span);
	}
}

static uint32_t pat_seed(uint32_t seq)
{
	return seq * 2654435761u ^ (uint32_t)P.seed;
}

static uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static uint32_t msg_csum(const struct wl_hdr *h, const void *payload)
{
	struct wl_hdr z = *h;
	z.csum = 0;
	z.send_ns = 0;
	uint32_t c = fnv1a(&z, sizeof(z), 2166136261u);
	return fnv1a(payload, h->len - sizeof(z), c);
}

/* CPU time (user+sys, the figure getrusage reports) of another process. */
static uint64_t proc_cpu_ns(clockid_t clk)
{
	struct timespec ts;
	if (clock_gettime(clk, &ts))
		fail("clock_gettime(server CPU clock): %s", strerror(errno));
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* percentile (0..100) of a sorted array */
static uint64_t pct(const uint64_t *v, size_t n, unsigned p)
{
	if (!n)
		return 0;
	size_t i = (n * p + 99) / 100;
	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return v[i];
}

static bool long_gap_burst(unsigned b)
{
	unsigned n = P.bursts;
	if (n >= 8 && (b == n / 4 || b == n / 2 || b == 3 * n / 4))
		return true;
	return (unsigned)(rng() % 100) < P.long_pct;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int epoll_on(const int *fds, int n)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fail("epoll_create1: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev))
			fail("epoll_ctl(ADD, wait fd %d): %s", fds[i], strerror(errno));
	}
	return ep;
}

/* epoll_wait with a total timeout; returns the epoll_wait result (0 = timed out). */
static int epoll_wait_ms(int ep, int timeout_ms)
{
	struct epoll_event ev[4];
	uint64_t dl = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		int r = epoll_wait(ep, ev, 4, timeout_ms);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			fail("epoll_wait: %s", strerror(errno));
		uint64_t now = now_ms();
		if (now >= dl)
			return 0;
		timeout_ms = (int)(dl - now);
	}
}

static void cq_fail_avail(struct fid_cq *cq, const char *what)
{
	struct fi_cq_err_entry e;
	char b[512];
	memset(&e, 0, sizeof(e));
	ssize_t r = fi_cq_readerr(cq, &e, 0);
	if (r != 1)
		fail("%s: fi_cq_read returned -FI_EAVAIL but fi_cq_readerr returned %zd", what, r);
	fail("%s: error completion: %s", what, cq_err_str(cq, &e, b, sizeof(b)));
}

/* the client state (the transport functions take it) */
struct cli;

/* ---- server ---------------------------------------------------------------- */

struct srv {
	wl_ctx x;
	struct fid_cq *cq;
	char *rxbuf, *ackbuf;
	struct fid_mr *rxmr, *ackmr;
	struct fi_context rxctx[NRX], ackctx[NACK_TX];
	bool ack_busy[NACK_TX];
	unsigned acks_out;
	/* expectations */
	uint32_t seq, total;
	unsigned burst, idx, blen;
	uint32_t bseq, mask; /* first seq of the burst; its indices seen (wl_check_order) */
	uint64_t start_ns;
	/* wake tracking */
	bool woke;                  /* no read since the last epoll_wait return */
	uint64_t sleep_ns, wake_ns; /* last epoll_wait entry / return */
	uint64_t *lat;              /* wake-up latencies, ns */
	size_t nlat;
	/* counters */
	uint64_t trywait_calls, trywait_again, trywait_zero, again_run, max_again_run;
	uint64_t sleeps, spurious, sends_done, recvs;
	uint64_t sleep_wall, sleep_cpu;
	uint64_t idle_eps, idle_wall, idle_cpu;
	uint64_t long_eps, long_wall, long_cpu;
	double worst_long_share;
	uint64_t worst_long_wall, worst_long_cpu;
	uint64_t bytes;
	uint64_t idle_sys, sleep_sys, max_sleep_cpu, max_sleep_cpu_wall, sleep_nvcsw;
	/* the current idle stretch */
	uint64_t st_sleeps, st_trywait, st_sleep_wall, st_sleep_cpu, st_sleep_sys;
};

/* ---- the transport's part (defined by the test that includes this) -------- */

static void wl_srv_open(struct srv *s);     /* endpoint, s->cq (one CQ, FI_WAIT_FD, FORMAT_DATA) */
static void wl_srv_go(struct srv *s);       /* receives posted: let the client start */
static void wl_srv_send_ack(struct srv *s, struct wl_ack *a, int slot);
/* The order checks of a received header; returns whether it is the first of
 * its burst to complete. */
static bool wl_check_order(struct srv *s, const struct wl_hdr *h);
static void wl_cli_open(struct cli *c);     /* tx CQ FORMAT_CONTEXT, rx CQ FORMAT_DATA, FI_WAIT_FD */
static void wl_cli_go(struct cli *c);       /* wait for wl_srv_go */
static struct fid_mr *wl_mr_reg(wl_ctx *x, void *buf, size_t len, uint64_t access);
static void wl_close(wl_ctx *x);

static void post_rx(struct srv *s, unsigned i)
{
	CHK(fi_recv(s->x.ep, s->rxbuf + (size_t)i * MAX_MSG, MAX_MSG, fi_mr_desc(s->rxmr),
		    WL_RECV_ADDR, &s->rxctx[i]));
}

static void send_ack(struct srv *s)
{
	int slot = -1;
	for (int i = 0; i < NACK_TX; i++)
		if (!s->ack_busy[i]) {
			slot = i;
			break;
		}
	EXPECT(slot >= 0, "all %d ack buffers still in flight (send completions missing)", NACK_TX);
	struct wl_ack *a = (struct wl_ack *)(s->ackbuf + (size_t)slot * ACK_SIZE);
	memset(a, 0, ACK_SIZE);
	a->magic = ACK_MAGIC;
	a->burst = s->burst;
	a->count = s->blen;
	a->next_seq = s->seq;
	a->server_ns = now_ns();
	wl_srv_send_ack(s, a, slot);
	s->ack_busy[slot] = true;
	s->acks_out++;
}

static void on_recv(struct srv *s, const struct fi_cq_data_entry *c, long i)
{
	char fb[128];
	char *buf = s->rxbuf + (size_t)i * MAX_MSG;
	struct wl_hdr h;
	uint64_t now = now_ns();

	EXPECT((c->flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
	       "receive completion flags %s", flags_str(c->flags, fb, sizeof(fb)));
	EXPECT(s->seq < s->total, "extra message after all %u arrived (len %zu)", s->total, c->len);
	EXPECT(c->len >= sizeof(h) && c->len <= MAX_MSG, "seq %u: completion len %zu", s->seq,
	       c->len);
	memcpy(&h, buf, sizeof(h));
	EXPECT(h.magic == WL_MAGIC, "seq %u: bad magic 0x%x (len %zu)", s->seq, h.magic, c->len);
	bool first_of_burst = wl_check_order(s, &h);
	uint32_t want = msg_len_of(h.seq);
	EXPECT(h.len == want && c->len == want, "seq %u: header len %u, completion len %zu, want %u",
	       h.seq, h.len, c->len, want);
	uint32_t cs = msg_csum(&h, buf + sizeof(h));
	EXPECT(cs == h.csum, "seq %u (len %u): checksum 0x%08x, header says 0x%08x", h.seq, h.len,
	       cs, h.csum);
	long off = check_pattern(buf + sizeof(h), h.len - sizeof(h), pat_seed(h.seq));
	EXPECT(off < 0, "seq %u (len %u): payload mismatch at offset %ld", h.seq, h.len,
	       off + (long)sizeof(h));
	EXPECT(h.send_ns >= s->start_ns && h.send_ns <= now,
	       "seq %u: send time %llu outside [%llu, %llu]", h.seq,
	       (unsigned long long)h.send_ns, (unsigned long long)s->start_ns,
	       (unsigned long long)now);

	/* A burst that started while we slept: the wake-up latency (from the send
	 * of its first message to complete, which was sent while we slept). */
	if (first_of_burst && s->woke && s->sleep_ns <= h.send_ns && s->wake_ns >= h.send_ns)
		s->lat[s->nlat++] = s->wake_ns - h.send_ns;

	/* poison what arrived, so stale data cannot pass as a new message */
	memset(buf, 0xee, h.len);
	post_rx(s, (unsigned)i);
	s->recvs++;
	s->bytes += h.len;
	s->seq++;
	if (++s->idx == s->blen) {
		send_ack(s);
		s->burst++;
		s->idx = 0;
		s->mask = 0;
		s->bseq = s->seq;
		s->blen = s->burst < P.bursts ? burst_len_of(s->burst) : 0;
	}
}

static void on_completion(struct srv *s, const struct fi_cq_data_entry *c)
{
	char fb[128];
	const struct fi_context *ctx = c->op_context;
	if (ctx >= s->rxctx && ctx < s->rxctx + NRX) {
		on_recv(s, c, ctx - s->rxctx);
	} else if (ctx >= s->ackctx && ctx < s->ackctx + NACK_TX) {
		long slot = ctx - s->ackctx;
		EXPECT(c->flags & FI_SEND, "ack completion flags %s",
		       flags_str(c->flags, fb, sizeof(fb)));
		EXPECT(s->ack_busy[slot], "ack slot %ld completed twice", slot);
		s->ack_busy[slot] = false;
		s->acks_out--;
		s->sends_done++;
	} else {
		fail("completion with unknown op_context %p (flags %s, len %zu)", c->op_context,
		     flags_str(c->flags, fb, sizeof(fb)), c->len);
	}
}

static void server_loop(struct srv *s)
{
	struct fid *fids[1] = { &s->cq->fid };
	struct fi_cq_data_entry ent[8];
	int fd = -1;
	CHK(fi_control(&s->cq->fid, FI_GETWAIT, &fd));
	EXPECT(fd >= 0, "FI_GETWAIT gave fd %d", fd);
	int ep = epoll_on(&fd, 1);

	static const unsigned spin_choices[4] = { 0, 8, 64, 512 };
	unsigned spin_budget = 0, spins = 0;
	bool idle = false;
	uint64_t idle_wall0 = 0, idle_cpu0 = 0, idle_sys0 = 0;

	while (s->burst < P.bursts || s->acks_out) {
		size_t want = 1 + (size_t)(rng() % 8);
		ssize_t n = fi_cq_read(s->cq, ent, want);
		if (n > 0) {
			EXPECT((size_t)n <= want, "fi_cq_read(count %zu) returned %zd", want, n);
			if (idle) {
				uint64_t sys, w = now_ns() - idle_wall0, cpu = cpu_ns2(&sys) - idle_cpu0;
				sys -= idle_sys0;
				s->idle_eps++;
				s->idle_wall += w;
				s->idle_cpu += cpu;
				s->idle_sys += sys;
				if (trace_ms >= 0 && (w >= (uint64_t)trace_ms * 1000000u ||
						      (w >= 1000000u &&
						       cpu * 100 > w * P.cpu_bound_pct))) {
					const struct fi_context *x = ent[0].op_context;
					char what[64];
					if (x >= s->rxctx && x < s->rxctx + NRX)
						snprintf(what, sizeof(what), "receive (seq %u)", s->seq);
					else
						snprintf(what, sizeof(what), "ack send completion");
					logmsg("idle stretch %llu: %.3f ms wall, %.3f ms cpu (%.3f sys, "
					       "%.1f%%), %llu trywait, %llu sleeps (%.3f ms wall, %.3f "
					       "ms cpu, %.3f sys inside epoll_wait); ended by %s",
					       (unsigned long long)s->idle_eps, (double)w / 1e6,
					       (double)cpu / 1e6, (double)sys / 1e6,
					       100.0 * (double)cpu / (double)w,
					       (unsigned long long)s->st_trywait,
					       (unsigned long long)s->st_sleeps,
					       (double)s->st_sleep_wall / 1e6,
					       (double)s->st_sleep_cpu / 1e6,
					       (double)s->st_sleep_sys / 1e6, what);
				}
				if (w >= 100000000u) {
					double share = (double)cpu / (double)w;
					s->long_eps++;
					s->long_wall += w;
					s->long_cpu += cpu;
					if (share > s->worst_long_share) {
						s->worst_long_share = share;
						s->worst_long_wall = w;
						s->worst_long_cpu = cpu;
					}
				}
				idle = false;
			}
			for (ssize_t k = 0; k < n; k++)
				on_completion(s, &ent[k]);
			s->woke = false;
			s->again_run = 0;
			spins = 0;
			spin_budget = spin_choices[rng() % 4];
			continue;
		}
		if (n == -FI_EAVAIL)
			cq_fail_avail(s->cq, "server CQ");
		EXPECT(n == -FI_EAGAIN, "fi_cq_read returned %zd (%s)", n,
		       n < 0 ? fi_strerror((int)-n) : "0 entries");
		if (s->woke) {
			s->spurious++;
			s->woke = false;
		}
		if (spins < spin_budget) {
			spins++;
			continue;
		}
		if (!idle) {
			check_child();
			idle = true;
			idle_wall0 = now_ns();
			idle_cpu0 = cpu_ns2(&idle_sys0);
			s->st_sleeps = s->st_trywait = 0;
			s->st_sleep_wall = s->st_sleep_cpu = s->st_sleep_sys = 0;
		}
		int r = fi_trywait(s->x.fabric, fids, 1);
		s->trywait_calls++;
		s->st_trywait++;
		if (r == -FI_EAGAIN) {
			s->trywait_again++;
			if (++s->again_run > s->max_again_run)
				s->max_again_run = s->again_run;
			continue; /* read again */
		}
		EXPECT(r == 0, "fi_trywait returned %d (%s); only 0 or -FI_EAGAIN are allowed", r,
		       fi_strerror(-r));
		s->trywait_zero++;
		s->again_run = 0;

		uint64_t k0, k1, c0 = cpu_ns2(&k0), v0 = last_nvcsw;
		s->sleep_ns = now_ns();
		int e = epoll_wait_ms(ep, (int)P.watchdog_ms);
		s->wake_ns = now_ns();
		uint64_t c1 = cpu_ns2(&k1);
		s->sleep_nvcsw += last_nvcsw - v0;
		uint64_t sw = s->wake_ns - s->sleep_ns;
		s->sleep_wall += sw;
		s->sleep_cpu += c1 - c0;
		s->sleep_sys += k1 - k0;
		if (c1 - c0 > s->max_sleep_cpu) {
			s->max_sleep_cpu = c1 - c0;
			s->max_sleep_cpu_wall = sw;
		}
		s->st_sleep_wall += sw;
		s->st_sleep_cpu += c1 - c0;
		s->st_sleep_sys += k1 - k0;
		s->st_sleeps++;
		s->sleeps++;
		if (e == 0)
			fail("missed wake-up: epoll_wait on the CQ fd timed out after %u ms "
			     "(fi_trywait had returned 0); waiting for seq %u (burst %u, idx %u/%u), "
			     "%u ack send(s) outstanding, %llu messages received so far",
			     P.watchdog_ms, s->seq, s->burst, s->idx, s->blen, s->acks_out,
			     (unsigned long long)s->recvs);
		s->woke = true;
		spins = 0; /* one read (at least) before trying to sleep again */
		spin_budget = 0;
	}
	close(ep);
}

static void server(void)
{
	struct srv *s = calloc(1, sizeof(*s));
	if (!s)
		fail("calloc");
	rng_state = P.seed ^ 0x5e5e5e5eull;
	for (unsigned b = 0; b < P.bursts; b++)
		s->total += burst_len_of(b);
	s->lat = calloc(P.bursts + 1, sizeof(uint64_t));
	if (!s->lat)
		fail("calloc");
	logmsg("seed %llu: %u bursts (1..%u messages), %u messages of %zu..%u bytes, gaps 0..%u ms "
	       "(+ long ~%u ms), epoll watchdog %u ms, idle CPU bound %u%%",
	       (unsigned long long)P.seed, P.bursts, P.max_burst, s->total,
	       sizeof(struct wl_hdr), P.max_size, P.max_gap_ms, P.long_gap_ms, P.watchdog_ms,
	       P.cpu_bound_pct);

	/* calibration: what the accounting charges for a plain sleep */
	{
		uint64_t bw = now_ns(), bc = cpu_ns();
		sleep_ms(100);
		logmsg("baseline: nanosleep 100 ms: %.3f ms wall, %.3f ms cpu",
		       (double)(now_ns() - bw) / 1e6, (double)(cpu_ns() - bc) / 1e6);
	}

	wl_srv_open(s);
	s->rxbuf = alloc_buf((size_t)NRX * MAX_MSG);
	s->ackbuf = alloc_buf((size_t)NACK_TX * ACK_SIZE);
	s->rxmr = wl_mr_reg(&s->x, s->rxbuf, (size_t)NRX * MAX_MSG, FI_RECV);
	s->ackmr = wl_mr_reg(&s->x, s->ackbuf, (size_t)NACK_TX * ACK_SIZE, FI_SEND);
	for (unsigned i = 0; i < NRX; i++)
		post_rx(s, i);
	s->blen = burst_len_of(0);
	s->start_ns = now_ns();
	wl_srv_go(s);

	uint64_t w0 = now_ns(), c0 = cpu_ns();
	server_loop(s);
	uint64_t wall = now_ns() - w0, cpu = cpu_ns() - c0;

	EXPECT(s->seq == s->total && s->recvs == s->total, "received %llu of %u messages",
	       (unsigned long long)s->recvs, s->total);
	EXPECT(s->sends_done == P.bursts, "%llu ack send completions for %u acks",
	       (unsigned long long)s->sends_done, P.bursts);
	/* nothing more may arrive (a duplicate would show up here) */
	cq_expect_empty(s->cq, 200, "server CQ after the last burst");

	struct cli_stats cs;
	oob_wait(TAG_STATS);
	oob_recv(&cs, sizeof(cs));

	qsort(s->lat, s->nlat, sizeof(uint64_t), cmp_u64);
	double idle_share = s->idle_wall ? 100.0 * (double)s->idle_cpu / (double)s->idle_wall : 0;
	double sleep_share =
		s->sleep_wall ? 100.0 * (double)s->sleep_cpu / (double)s->sleep_wall : 0;
	double long_share = s->long_wall ? 100.0 * (double)s->long_cpu / (double)s->long_wall : 0;
	double quiet_share =
		cs.quiet_wall_ns ? 100.0 * (double)cs.quiet_cpu_ns / (double)cs.quiet_wall_ns : 0;

	logmsg("traffic: %u messages (%llu bytes) in %u bursts, %.2f s wall, %.1f ms server cpu "
	       "(%d threads)",
	       s->total, (unsigned long long)s->bytes, P.bursts, (double)wall / 1e9,
	       (double)cpu / 1e6, thread_count());
	logmsg("trywait: %llu calls, %llu returned 0, %llu -FI_EAGAIN (longest run %llu); "
	       "%llu epoll sleeps (%llu voluntary context switches in them), %llu wake-ups "
	       "found nothing to read",
	       (unsigned long long)s->trywait_calls, (unsigned long long)s->trywait_zero,
	       (unsigned long long)s->trywait_again, (unsigned long long)s->max_again_run,
	       (unsigned long long)s->sleeps, (unsigned long long)s->sleep_nvcsw,
	       (unsigned long long)s->spurious);
	logmsg("idle: %.1f ms wall, %.1f ms cpu (%.2f%%) [server getrusage from going idle to "
	       "the next completion, wake-up included; %.1f ms sys] over %llu idle stretches",
	       (double)s->idle_wall / 1e6, (double)s->idle_cpu / 1e6, idle_share,
	       (double)s->idle_sys / 1e6, (unsigned long long)s->idle_eps);
	logmsg("idle, inside epoll_wait: %.1f ms wall, %.1f ms cpu (%.2f%%; %.1f ms sys); most "
	       "in one epoll_wait: %.3f ms cpu in %.3f ms",
	       (double)s->sleep_wall / 1e6, (double)s->sleep_cpu / 1e6, sleep_share,
	       (double)s->sleep_sys / 1e6, (double)s->max_sleep_cpu / 1e6,
	       (double)s->max_sleep_cpu_wall / 1e6);
	logmsg("idle, quiet part of the gaps (server CPU clock sampled by the client): %.1f ms "
	       "wall, %.1f ms cpu (%.2f%%) over %llu gaps; worst gap >= 100 ms: %.2f ms cpu in "
	       "%.1f ms",
	       (double)cs.quiet_wall_ns / 1e6, (double)cs.quiet_cpu_ns / 1e6, quiet_share,
	       (unsigned long long)cs.quiet_windows, (double)cs.worst_quiet_cpu_ns / 1e6,
	       (double)cs.worst_quiet_wall_ns / 1e6);
	logmsg("idle stretches >= 100 ms: %llu, %.1f ms wall, %.1f ms cpu (%.2f%%); worst %.2f%% "
	       "(%.1f ms cpu in %.1f ms)",
	       (unsigned long long)s->long_eps, (double)s->long_wall / 1e6,
	       (double)s->long_cpu / 1e6, long_share, 100.0 * s->worst_long_share,
	       (double)s->worst_long_cpu / 1e6, (double)s->worst_long_wall / 1e6);
	logmsg("wake-up latency (client send -> server epoll_wait return), %zu of %u bursts "
	       "started from sleep: median %.1f us, p99 %.1f us, max %.1f us",
	       s->nlat, P.bursts, (double)pct(s->lat, s->nlat, 50) / 1e3,
	       (double)pct(s->lat, s->nlat, 99) / 1e3,
	       s->nlat ? (double)s->lat[s->nlat - 1] / 1e3 : 0.0);
	logmsg("client: %llu messages, %llu bursts; burst round trip (first send -> ack) median "
	       "%.1f us, p99 %.1f us, max %.1f us; trywait %llu calls (%llu -FI_EAGAIN), %llu "
	       "sleeps, %llu sends retried after -FI_EAGAIN",
	       (unsigned long long)cs.msgs, (unsigned long long)cs.bursts,
	       (double)cs.rtt_med_ns / 1e3, (double)cs.rtt_p99_ns / 1e3,
	       (double)cs.rtt_max_ns / 1e3, (unsigned long long)cs.trywait_calls,
	       (unsigned long long)cs.trywait_again, (unsigned long long)cs.sleeps,
	       (unsigned long long)cs.eagain_sends);

	EXPECT(cs.msgs == s->total && cs.bursts == P.bursts, "client sent %llu messages in %llu bursts",
	       (unsigned long long)cs.msgs, (unsigned long long)cs.bursts);
	EXPECT(s->nlat > 0, "no burst started while the server slept (%llu sleeps)",
	       (unsigned long long)s->sleeps);
	if (!cs.quiet_windows)
		logmsg("no gap was long enough (>= %u ms) to measure the CPU while sleeping",
		       QUIET_MIN_NS / 1000000u);
	EXPECT(quiet_share <= P.cpu_bound_pct,
	       "server busy while sleeping: %.2f%% cpu in the quiet part of the gaps (%.1f ms cpu "
	       "in %.1f ms), bound %u%%",
	       quiet_share, (double)cs.quiet_cpu_ns / 1e6, (double)cs.quiet_wall_ns / 1e6,
	       P.cpu_bound_pct);
	EXPECT(idle_share <= P.idle_bound_pct,
	       "server busy while idle: %.2f%% cpu (%.1f ms cpu in %.1f ms idle), bound %u%%",
	       idle_share, (double)s->idle_cpu / 1e6, (double)s->idle_wall / 1e6,
	       P.idle_bound_pct);

	oob_signal(TAG_BYE);
	mr_close(s->rxmr);
	mr_close(s->ackmr);
	wl_close(&s->x);
	free(s->rxbuf);
	free(s->ackbuf);
	free(s->lat);
	free(s);
	test_finish();
}

/* ---- client ---------------------------------------------------------------- */

struct cli {
	wl_ctx x;
	char *sbuf, *abuf;
	struct fid_mr *smr, *amr;
	struct fi_context sctx[MAX_BURST], actx[NACK_RX];
	bool sbusy[MAX_BURST];
	unsigned sends_out;
	int ep;
	bool got_ack;
	struct wl_ack ack;
	uint64_t ack_ns;
	struct cli_stats st;
};

static void cli_post_ack(struct cli *c, unsigned i)
{
	CHK(fi_recv(c->x.ep, c->abuf + (size_t)i * ACK_SIZE, ACK_SIZE, fi_mr_desc(c->amr),
		    WL_RECV_ADDR, &c->actx[i]));
}

/* Reads both CQs once; returns the number of completions handled. */
static size_t cli_poll(struct cli *c)
{
	char fb[128];
	size_t got = 0;
	struct fi_cq_entry te[8];
	ssize_t n = fi_cq_read(c->x.txcq, te, 8);
	if (n == -FI_EAVAIL)
		cq_fail_avail(c->x.txcq, "client tx CQ");
	EXPECT(n > 0 || n == -FI_EAGAIN, "fi_cq_read(tx) returned %zd", n);
	for (ssize_t k = 0; k < n; k++) {
		const struct fi_context *ctx = te[k].op_context;
		EXPECT(ctx >= c->sctx && ctx < c->sctx + MAX_BURST,
		       "tx completion with unknown op_context %p", te[k].op_context);
		long i = ctx - c->sctx;
		EXPECT(c->sbusy[i], "send slot %ld completed twice", i);
		c->sbusy[i] = false;
		c->sends_out--;
		got++;
	}
	struct fi_cq_data_entry re[4];
	n = fi_cq_read(c->x.rxcq, re, 4);
	if (n == -FI_EAVAIL)
		cq_fail_avail(c->x.rxcq, "client rx CQ");
	EXPECT(n > 0 || n == -FI_EAGAIN, "fi_cq_read(rx) returned %zd", n);
	for (ssize_t k = 0; k < n; k++) {
		const struct fi_context *ctx = re[k].op_context;
		EXPECT(ctx >= c->actx && ctx < c->actx + NACK_RX,
		       "rx completion with unknown op_context %p", re[k].op_context);
		long i = ctx - c->actx;
		EXPECT((re[k].flags & FI_RECV) && re[k].len == sizeof(struct wl_ack),
		       "ack completion flags %s len %zu", flags_str(re[k].flags, fb, sizeof(fb)),
		       re[k].len);
		EXPECT(!c->got_ack, "second ack for one burst");
		memcpy(&c->ack, c->abuf + (size_t)i * ACK_SIZE, sizeof(c->ack));
		c->ack_ns = now_ns();
		c->got_ack = true;
		memset(c->abuf + (size_t)i * ACK_SIZE, 0xee, ACK_SIZE);
		cli_post_ack(c, (unsigned)i);
		got++;
	}
	return got;
}

/* The same loop as the server: poll, trywait both CQs, sleep on both fds. */
static void cli_wait(struct cli *c, bool for_ack, const char *what)
{
	struct fid *fids[2] = { &c->x.txcq->fid, &c->x.rxcq->fid };
	while ((for_ack && !c->got_ack) || c->sends_out) {
		if (cli_poll(c))
			continue;
		int r = fi_trywait(c->x.fabric, fids, 2);
		c->st.trywait_calls++;
		if (r == -FI_EAGAIN) {
			c->st.trywait_again++;
			continue;
		}
		EXPECT(r == 0, "fi_trywait(tx, rx) returned %d (%s); only 0 or -FI_EAGAIN allowed",
		       r, fi_strerror(-r));
		c->st.sleeps++;
		/* twice the server's watchdog: a server-side miss is reported by the server */
		if (epoll_wait_ms(c->ep, 2 * (int)P.watchdog_ms) == 0)
			fail("missed wake-up: epoll_wait on the tx/rx CQ fds timed out after %u ms "
			     "(fi_trywait had returned 0) waiting for %s (%u sends outstanding, ack %s)",
			     2 * P.watchdog_ms, what, c->sends_out, c->got_ack ? "in" : "missing");
		check_child();
	}
}

static void client(void)
{
	struct cli *c = calloc(1, sizeof(*c));
	uint64_t *rtt = calloc(P.bursts + 1, sizeof(uint64_t));
	if (!c || !rtt)
		fail("calloc");
	rng_state = P.seed ^ 0xc11e47ull;
	clockid_t srv_clk;
	int cr = clock_getcpuclockid(getppid(), &srv_clk);
	EXPECT(cr == 0, "clock_getcpuclockid(server pid %d): %s", (int)getppid(), strerror(cr));
	wl_cli_open(c);
	c->sbuf = alloc_buf((size_t)MAX_BURST * MAX_MSG);
	c->abuf = alloc_buf((size_t)NACK_RX * ACK_SIZE);
	c->smr = wl_mr_reg(&c->x, c->sbuf, (size_t)MAX_BURST * MAX_MSG, FI_SEND);
	c->amr = wl_mr_reg(&c->x, c->abuf, (size_t)NACK_RX * ACK_SIZE, FI_RECV);
	for (unsigned i = 0; i < NACK_RX; i++)
		cli_post_ack(c, i);
	int fds[2] = { -1, -1 };
	CHK(fi_control(&c->x.txcq->fid, FI_GETWAIT, &fds[0]));
	CHK(fi_control(&c->x.rxcq->fid, FI_GETWAIT, &fds[1]));
	c->ep = epoll_on(fds, 2);
	wl_cli_go(c);

	uint32_t seq = 0;
	for (unsigned b = 0; b < P.bursts; b++) {
		/* the gap before the burst */
		uint64_t gap_ns;
		if (long_gap_burst(b))
			gap_ns = (uint64_t)P.long_gap_ms * 1000000u * 3 / 4 +
				 rng() % ((uint64_t)P.long_gap_ms * 1000000u / 2 + 1);
		else if (rng() % 10 == 0)
			gap_ns = 0;
		else
			gap_ns = rng() % ((uint64_t)P.max_gap_ms * 1000000u + 1);
		if (gap_ns >= QUIET_MIN_NS) {
			/* Let the server finish the last burst (ack completion) and fall
			 * asleep, then sample its CPU clock over the rest of the gap. */
			sleep_ns(QUIET_SETTLE_NS);
			uint64_t w0 = now_ns(), c0 = proc_cpu_ns(srv_clk);
			sleep_ns(gap_ns - QUIET_SETTLE_NS);
			uint64_t c1 = proc_cpu_ns(srv_clk), w = now_ns() - w0;
			c->st.quiet_windows++;
			c->st.quiet_wall_ns += w;
			c->st.quiet_cpu_ns += c1 - c0;
			if (w >= 100000000u && (c1 - c0) * c->st.worst_quiet_wall_ns >=
						       c->st.worst_quiet_cpu_ns * w) {
				c->st.worst_quiet_wall_ns = w;
				c->st.worst_quiet_cpu_ns = c1 - c0;
			}
		} else if (gap_ns) {
			sleep_ns(gap_ns);
		}

		unsigned k = burst_len_of(b);
		bool paced = rng() % 4 == 0;
		uint64_t first_ns = 0;
		c->got_ack = false;
		for (unsigned i = 0; i < k; i++) {
			char *m = c->sbuf + (size_t)i * MAX_MSG;
			struct wl_hdr h = {
				.magic = WL_MAGIC, .seq = seq, .burst = b, .idx = (uint16_t)i,
				.burst_len = (uint16_t)k, .len = msg_len_of(seq),
			};
			EXPECT(!c->sbusy[i], "send slot %u still in flight", i);
			fill_pattern(m + sizeof(h), h.len - sizeof(h), pat_seed(seq));
			h.csum = msg_csum(&h, m + sizeof(h));
			uint64_t dl = now_ms() + WAIT_MS;
			for (;;) {
				h.send_ns = now_ns();
				memcpy(m, &h, sizeof(h));
				ssize_t r = fi_send(c->x.ep, m, h.len, fi_mr_desc(c->smr),
						    wl_peer(&c->x), &c->sctx[i]);
				if (r == 0)
					break;
				EXPECT(r == -FI_EAGAIN, "fi_send(seq %u) returned %zd (%s)", seq, r,
				       fi_strerror((int)-r));
				c->st.eagain_sends++;
				cli_poll(c);
				EXPECT(now_ms() < dl, "fi_send(seq %u) -FI_EAGAIN for %d ms", seq,
				       WAIT_MS);
			}
			if (i == 0)
				first_ns = h.send_ns;
			c->sbusy[i] = true;
			c->sends_out++;
			seq++;
			if (paced && i + 1 < k)
				sleep_ns(rng() % 300000u);
		}
		cli_wait(c, true, "the ack");
		EXPECT(c->ack.magic == ACK_MAGIC && c->ack.burst == b && c->ack.count == k &&
			       c->ack.next_seq == seq,
		       "ack magic 0x%x burst %u count %u next_seq %u, want burst %u count %u next %u",
		       c->ack.magic, c->ack.burst, c->ack.count, c->ack.next_seq, b, k, seq);
		rtt[b] = c->ack_ns - first_ns;
		c->st.msgs += k;
		c->st.bursts++;
	}

	qsort(rtt, P.bursts, sizeof(uint64_t), cmp_u64);
	c->st.rtt_med_ns = pct(rtt, P.bursts, 50);
	c->st.rtt_p99_ns = pct(rtt, P.bursts, 99);
	c->st.rtt_max_ns = P.bursts ? rtt[P.bursts - 1] : 0;
	oob_signal(TAG_STATS);
	oob_send(&c->st, sizeof(c->st));
	oob_wait(TAG_BYE);

	close(c->ep);
	mr_close(c->smr);
	mr_close(c->amr);
	wl_close(&c->x);
	free(c->sbuf);
	free(c->abuf);
	free(rtt);
	free(c);
	child_done();
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-b bursts] [-m max_burst<=%d] [-S max_size<=%d] [-g max_gap_ms] "
		"[-L long_gap_ms] [-P long_gap_pct] [-w watchdog_ms] [-c cpu_bound_pct] "
		"[-C idle_bound_pct] "
		"[-s seed] [-T alarm_s]\n",
		prog, MAX_BURST, MAX_MSG);
	printf("FAIL %s: bad arguments\n", WL_NAME);
	exit(1);
}

int main(int argc, char **argv)
{
	int o;
	const char *tr = getenv("WL_TRACE_MS");
	if (tr && *tr)
		trace_ms = atol(tr);
	P.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	while ((o = getopt(argc, argv, "b:m:S:g:L:P:w:c:C:s:T:")) != -1) {
		unsigned long long v = 0;
		if (o != '?') {
			char *end;
			v = strtoull(optarg, &end, 0);
			if (*end)
				usage(argv[0]);
		}
		switch (o) {
		case 'b': P.bursts = (unsigned)v; break;
		case 'm': P.max_burst = (unsigned)v; break;
		case 'S': P.max_size = (unsigned)v; break;
		case 'g': P.max_gap_ms = (unsigned)v; break;
		case 'L': P.long_gap_ms = (unsigned)v; break;
		case 'P': P.long_pct = (unsigned)v; break;
		case 'w': P.watchdog_ms = (unsigned)v; break;
		case 'c': P.cpu_bound_pct = (unsigned)v; break;
		case 'C': P.idle_bound_pct = (unsigned)v; break;
		case 's': P.seed = v; break;
		case 'T': P.alarm_s = (unsigned)v; break;
		default: usage(argv[0]);
		}
	}
	if (optind != argc || P.bursts < 1 || P.max_burst < 1 || P.max_burst > MAX_BURST ||
	    P.max_size < sizeof(struct wl_hdr) || P.max_size > MAX_MSG || P.watchdog_ms < 1 ||
	    P.watchdog_ms > 1000000 || P.long_pct > 100 || P.alarm_s < 20)
		usage(argv[0]);

	bool server_side = test_start(WL_NAME);
	if (P.alarm_s != TEST_ALARM_SECS)
		alarm(server_side ? P.alarm_s : P.alarm_s - 10);
	if (server_side)
		server();
	else
		client();
	return 0;
}

#endif
