/*
 * fi_bw: bandwidth / message rate, and RDM scale (memory and latency per
 * connected peer), through the public libfabric API only, so the same binary
 * measures any provider (rsverbs, libfabric's verbs, verbs;ofi_rxm,
 * tcp;ofi_rxm).  Part of ci/bench (see docs/benchmarks.md).
 *
 *   server: fi_bw [options]
 *   client: fi_bw [options] SERVER_IP
 *
 * The client owns the configuration and sends it to the server over an
 * out-of-band TCP connection (port -P, default 47600), so only -p/-e/-s and
 * the port need to agree on both sides.
 *
 * Modes (-m):
 *   bw     for each op in -o (send,write,read) and each size from -S MIN:MAX
 *          (powers of two) or the list -L S1,S2,...: a window of -W outstanding operations from the
 *          client; -n operations per size at most, fewer when -B bytes are
 *          reached (but at least -N).  Send: the server posts the receives
 *          and reports over the oob channel when it has all of them; the
 *          client's clock stops at that report.  Write/read: the client's
 *          clock stops at its last completion.  One untimed warm-up pass
 *          (-w operations) per size.  The client prints one line per size:
 *            BW op=send size=8 iters=20000 usec=1234567 MBps=0.13 Mmsgps=0.016
 *          (MB = 10^6 bytes).
 *   lat    ping-pong per size (-S MIN:MAX, powers of two), one message in
 *          flight, sends up to the inject size injected (as fi_pingpong
 *          does); iterations: -B bytes / size, at most -l, at least -N,
 *          after -w untimed ones.  One line per size, half a round trip
 *          (average, median and minimum over the round trips, in us):
 *            LAT size=8 iters=2000 usec=25.123 p50=21.002 min=18.750
 *   latbw  lat, then bw, over the same connection (one process start less).
 *   scale  RDM only: the client opens -c endpoints (one process, each with
 *          its own CQs and AV) and connects each to the server's one
 *          endpoint by a message exchange; the server reports its memory
 *          (VmRSS, VmPin, VmLck from /proc/self/status) before and after:
 *            SCALE peers=64 rss_kb=a:b pin_kb=a:b lck_kb=a:b
 *          then a ping-pong round-robin over the peers (message size -S MIN
 *          and MAX, -l round trips each):
 *            SCALELAT peers=64 size=8 iters=1000 usec=12.3  (half round trip)
 *          The client also prints its own process memory (SCALECLIENT).
 *
 * Other options: -p PROV (prov_name, default verbs), -e msg|rdm, -s ADDR
 * (source/node for fi_getinfo; default none: the provider picks), -t
 * (tagged instead of msg for send in RDM).  Exit 0 on success; any failure
 * prints "fi_bw: ..." on stderr and exits 1.  A 20 min watchdog (-T secs).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define OP_SEND 1u
#define OP_WRITE 2u
#define OP_READ 4u
#define MAX_WINDOW 1024
#define MAX_PEERS 256

static const char *role = "server";

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fi_bw %s: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define CHK(expr)                                                              \
	({                                                                     \
		long r__ = (long)(expr);                                       \
		if (r__ < 0)                                                   \
			die("line %d: %s = %ld (%s)", __LINE__, #expr, r__,    \
			    fi_strerror((int)-r__));                           \
		r__;                                                           \
	})

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- configuration (client -> server) --------------------------------- */

struct config {
	uint32_t mode; /* 0 bw, 1 scale */
	uint32_t ops;
	uint32_t window;
	uint32_t tagged;
	uint64_t min_size, max_size;
	uint64_t max_iters, min_iters, bytes, warmup;
	uint32_t peers, lat_iters;
};

static struct config cfg = {
	.mode = 0, .ops = OP_SEND | OP_WRITE | OP_READ, .window = 64, .tagged = 0,
	.min_size = 8, .max_size = 4u << 20, .max_iters = 20000, .min_iters = 50,
	.bytes = 64u << 20, .warmup = 100, .peers = 1, .lat_iters = 1000,
};

/* Client: the sizes to measure (-L list, or -S MIN:MAX in powers of two). */
static uint64_t sizes[64];
static unsigned nsizes;

static void make_sizes(const char *list)
{
	nsizes = 0;
	if (list) {
		for (const char *p = list; *p && nsizes < 64;) {
			char *end;
			uint64_t v = strtoull(p, &end, 0);
			if (end == p)
				break;
			sizes[nsizes++] = v;
			p = *end == ',' ? end + 1 : end;
		}
		cfg.min_size = cfg.max_size = sizes[0];
		for (unsigned i = 0; i < nsizes; i++) {
			if (sizes[i] < cfg.min_size)
				cfg.min_size = sizes[i];
			if (sizes[i] > cfg.max_size)
				cfg.max_size = sizes[i];
		}
		return;
	}
	for (uint64_t v = cfg.min_size; v <= cfg.max_size && nsizes < 64; v *= 2)
		sizes[nsizes++] = v;
}

static uint64_t iters_for(uint64_t size)
{
	uint64_t n = cfg.bytes / size;
	if (n > cfg.max_iters)
		n = cfg.max_iters;
	if (n < cfg.min_iters)
		n = cfg.min_iters;
	return n;
}

/* ---- out-of-band TCP channel ------------------------------------------- */

static int oob = -1;

static void oob_send(const void *b, size_t len)
{
	const char *p = b;
	while (len) {
		ssize_t n = send(oob, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("oob send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void oob_recv(void *b, size_t len)
{
	char *p = b;
	while (len) {
		ssize_t n = recv(oob, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("oob recv: %s", n == 0 ? "peer closed" : strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static bool oob_ready(void)
{
	struct pollfd pfd = { .fd = oob, .events = POLLIN };
	return poll(&pfd, 1, 0) > 0;
}

static void oob_connect(const char *server, int port)
{
	if (server) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		if (inet_pton(AF_INET, server, &sin.sin_addr) != 1)
			die("bad server address %s", server);
		for (int i = 0;; i++) {
			oob = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(oob, (void *)&sin, sizeof(sin)) == 0)
				break;
			close(oob);
			if (i >= 100)
				die("oob connect %s:%d: %s", server, port, strerror(errno));
			usleep(200000);
		}
	} else {
		int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (void *)&sin, sizeof(sin)) || listen(ls, 1))
			die("oob listen on %d: %s", port, strerror(errno));
		fprintf(stderr, "fi_bw server: waiting for the client on TCP %d\n", port);
		oob = accept(ls, NULL, NULL);
		if (oob < 0)
			die("oob accept: %s", strerror(errno));
		close(ls);
	}
	int one = 1;
	setsockopt(oob, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- libfabric objects ----------------------------------------------- */

struct ep {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	struct fid_eq *eq;
	fi_addr_t peer[MAX_PEERS];
	uint64_t rx_posted;
};

static struct fi_info *hints, *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;
static struct fid_pep *pep;
static bool rdm;
static char *buf;        /* data buffer, max_size (+ room for the window in scale mode) */
static size_t buf_len;
static struct fid_mr *mr;
static void *desc;
static struct fi_context ctx[MAX_WINDOW];

static uint64_t remote_addr, remote_key;

static void cq_error(struct fid_cq *cq, const char *what)
{
	struct fi_cq_err_entry e;
	char b[256];
	memset(&e, 0, sizeof(e));
	if (fi_cq_readerr(cq, &e, 0) != 1)
		die("%s: fi_cq_readerr failed", what);
	die("%s: error completion: %s (%d), prov_errno %d: %s", what, fi_strerror(e.err), e.err, e.prov_errno,
	    fi_cq_strerror(cq, e.prov_errno, e.err_data, b, sizeof(b)));
}

/* Reap up to 16 completions; returns how many. */
static int cq_reap(struct fid_cq *cq, const char *what)
{
	struct fi_cq_tagged_entry c[16];
	ssize_t n = fi_cq_read(cq, c, 16);
	if (n > 0)
		return (int)n;
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL)
		cq_error(cq, what);
	die("%s: fi_cq_read = %zd (%s)", what, n, fi_strerror((int)-n));
}

static void open_domain(void)
{
	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	if (!rdm) {
		struct fi_eq_attr ea = { .size = 64, .wait_obj = FI_WAIT_UNSPEC };
		CHK(fi_eq_open(fabric, &ea, &eq, NULL));
	}
	buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap %zu", buf_len);
	memset(buf, 0x5a, buf_len);
	uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	CHK(fi_mr_reg(domain, buf, buf_len, access, 0, 7, 0, &mr, NULL));
	desc = fi_mr_desc(mr);
}

static void open_ep(struct ep *e, struct fi_info *fi)
{
	/* libfabric's verbs MSG offers no FI_CQ_FORMAT_TAGGED */
	struct fi_cq_attr ca = { .size = 2048, .format = cfg.tagged ? FI_CQ_FORMAT_TAGGED : FI_CQ_FORMAT_CONTEXT,
				 .wait_obj = FI_WAIT_NONE };
	memset(e, 0, sizeof(*e));
	CHK(fi_endpoint(domain, fi, &e->ep, NULL));
	CHK(fi_cq_open(domain, &ca, &e->txcq, NULL));
	CHK(fi_cq_open(domain, &ca, &e->rxcq, NULL));
	CHK(fi_ep_bind(e->ep, &e->txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(e->ep, &e->rxcq->fid, FI_RECV));
	if (rdm) {
		struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = MAX_PEERS };
		CHK(fi_av_open(domain, &aa, &e->av, NULL));
		CHK(fi_ep_bind(e->ep, &e->av->fid, 0));
	} else {
		CHK(fi_ep_bind(e->ep, &eq->fid, 0));
	}
	CHK(fi_enable(e->ep));
}

static void close_ep(struct ep *e)
{
	CHK(fi_close(&e->ep->fid));
	CHK(fi_close(&e->txcq->fid));
	CHK(fi_close(&e->rxcq->fid));
	if (e->av)
		CHK(fi_close(&e->av->fid));
}

static uint32_t eq_wait(uint32_t want)
{
	struct fi_eq_cm_entry ce;
	uint32_t ev;
	uint64_t t0 = now_us();
	for (;;) {
		ssize_t n = fi_eq_read(eq, &ev, &ce, sizeof(ce), 0);
		if (n == -FI_EAGAIN) {
			if (now_us() - t0 > 60000000u)
				die("timed out waiting for CM event %u", want);
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry ee;
			memset(&ee, 0, sizeof(ee));
			fi_eq_readerr(eq, &ee, 0);
			die("CM error event: %s (%d)", fi_strerror(ee.err), ee.err);
		}
		CHK(n);
		if (ev != want)
			die("CM event %u, wanted %u", ev, want);
		if (ev == FI_CONNREQ)
			info = ce.info; /* the server's endpoint info from now on */
		return ev;
	}
}

/* exchange a blob: server sends first */
static void xchg(bool server, const void *mine, uint32_t mlen, void *theirs, uint32_t *tlen)
{
	uint32_t l;
	if (server) {
		oob_send(&mlen, 4);
		oob_send(mine, mlen);
	}
	oob_recv(&l, 4);
	if (l > *tlen)
		die("oob blob too long (%u)", l);
	oob_recv(theirs, l);
	*tlen = l;
	if (!server) {
		oob_send(&mlen, 4);
		oob_send(mine, mlen);
	}
}

static void read_mem(long *rss, long *pin, long *lck)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	*rss = *pin = *lck = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss);
		sscanf(line, "VmPin: %ld", pin);
		sscanf(line, "VmLck: %ld", lck);
	}
	fclose(f);
}

/* ---- data ops ------------------------------------------------------------ */

static struct ep E;          /* bw mode: the one endpoint */
static fi_addr_t dest;       /* RDM peer (bw mode) */

static ssize_t post_recv(struct ep *e, void *b, size_t len, void *c)
{
	if (cfg.tagged)
		return fi_trecv(e->ep, b, len, desc, FI_ADDR_UNSPEC, 0, 0, c);
	return fi_recv(e->ep, b, len, desc, FI_ADDR_UNSPEC, c);
}

static ssize_t post_send(struct ep *e, void *b, size_t len, fi_addr_t to, void *c)
{
	if (cfg.tagged)
		return fi_tsend(e->ep, b, len, desc, to, 0, c);
	return fi_send(e->ep, b, len, desc, to, c);
}

static ssize_t post_op(uint32_t op, size_t size, void *c)
{
	switch (op) {
	case OP_SEND:
		return post_send(&E, buf, size, dest, c);
	case OP_WRITE:
		return fi_write(E.ep, buf, size, desc, dest, remote_addr, remote_key, c);
	default:
		return fi_read(E.ep, buf, size, desc, dest, remote_addr, remote_key, c);
	}
}

/* Client: n operations of one kind with a window; returns elapsed us. */
static uint64_t client_pass(uint32_t op, size_t size, uint64_t n, bool timed)
{
	uint64_t posted = 0, done = 0, t0;
	uint32_t win = cfg.window;
	char cmd[16] = { 0 };
	if (op == OP_SEND) {
		/* ask the server to post n receives; wait until it has the first window */
		uint64_t hdr[2] = { size, n };
		cmd[0] = 'S';
		oob_send(cmd, 1);
		oob_send(hdr, sizeof(hdr));
		while (!oob_ready())
			cq_reap(E.rxcq, "client rx");
		oob_recv(cmd, 1);
		if (cmd[0] != 'R')
			die("oob: expected R, got %c", cmd[0]);
	}
	t0 = now_us();
	while (done < n) {
		while (posted < n && posted - done < win) {
			ssize_t r = post_op(op, size, &ctx[posted % win]);
			if (r == -FI_EAGAIN)
				break;
			CHK(r);
			posted++;
		}
		done += (uint64_t)cq_reap(E.txcq, "client tx");
		cq_reap(E.rxcq, "client rx");
	}
	if (op == OP_SEND) {
		while (!oob_ready())
			cq_reap(E.rxcq, "client rx");
		oob_recv(cmd, 1);
		if (cmd[0] != 'D')
			die("oob: expected D, got %c", cmd[0]);
	}
	(void)timed;
	return now_us() - t0;
}

/* Server side of a send pass: post and repost receives until n arrived. */
static void server_recv_pass(size_t size, uint64_t n)
{
	uint64_t posted = 0, done = 0;
	uint32_t win = cfg.window;
	char c = 'R';
	while (posted < n && posted < win) {
		ssize_t r = post_recv(&E, buf, size, &ctx[posted % win]);
		if (r == -FI_EAGAIN)
			break;
		CHK(r);
		posted++;
	}
	oob_send(&c, 1);
	while (done < n) {
		int k = cq_reap(E.rxcq, "server rx");
		done += (uint64_t)k;
		cq_reap(E.txcq, "server tx");
		while (posted < n && posted - done < win) {
			ssize_t r = post_recv(&E, buf, size, &ctx[posted % win]);
			if (r == -FI_EAGAIN)
				break;
			CHK(r);
			posted++;
		}
	}
	c = 'D';
	oob_send(&c, 1);
}

static const char *op_name(uint32_t op)
{
	return op == OP_SEND ? "send" : op == OP_WRITE ? "write" : "read";
}

static void client_bw(void)
{
	static const uint32_t ops[] = { OP_SEND, OP_WRITE, OP_READ };
	for (unsigned oi = 0; oi < 3; oi++) {
		uint32_t op = ops[oi];
		if (!(cfg.ops & op))
			continue;
		for (unsigned si = 0; si < nsizes; si++) {
			uint64_t size = sizes[si];
			uint64_t n = iters_for(size);
			uint64_t w = cfg.warmup < n ? cfg.warmup : n;
			client_pass(op, size, w, false);
			uint64_t us = client_pass(op, size, n, true);
			if (us == 0)
				us = 1;
			double mbps = (double)size * (double)n / (double)us;
			double mmsg = (double)n / (double)us;
			printf("BW op=%s size=%llu iters=%llu usec=%llu MBps=%.3f Mmsgps=%.5f\n", op_name(op),
			       (unsigned long long)size, (unsigned long long)n, (unsigned long long)us, mbps, mmsg);
			fflush(stdout);
		}
	}
	char q = 'Q';
	oob_send(&q, 1);
}

static void server_bw(void)
{
	char c;
	for (;;) {
		while (!oob_ready()) {
			cq_reap(E.rxcq, "server rx");
			cq_reap(E.txcq, "server tx");
		}
		oob_recv(&c, 1);
		if (c == 'Q')
			return;
		if (c != 'S')
			die("oob: unexpected command %c", c);
		uint64_t hdr[2];
		oob_recv(hdr, sizeof(hdr));
		server_recv_pass(hdr[0], hdr[1]);
	}
}

/* ---- scale (RDM) ------------------------------------------------------- */

static struct ep *peers;   /* client: cfg.peers endpoints */
static bool rx_armed[MAX_PEERS + 1];

static void arm_recv(struct ep *e, bool *armed, size_t size)
{
	ssize_t r;
	if (*armed)
		return;
	while ((r = post_recv(e, buf, size, &ctx[0])) == -FI_EAGAIN)
		cq_reap(e->txcq, "tx");
	CHK(r);
	*armed = true;
}

/* Wait for one receive completion on e; reaps e's tx CQ meanwhile. */
static void wait_recv(struct ep *e, bool *armed)
{
	uint64_t t0 = now_us();
	unsigned spin = 0;
	while (cq_reap(e->rxcq, "rx") == 0) {
		cq_reap(e->txcq, "tx");
		if (++spin % 1024 == 0 && now_us() - t0 > 60000000u)
			die("no message in 60 s");
	}
	*armed = false;
}

static size_t inject_size; /* lat mode: inject up to this size, as fi_pingpong does */

static void send_to(struct ep *e, const void *b, size_t size, fi_addr_t to)
{
	ssize_t r;
	for (;;) {
		if (size <= inject_size)
			r = cfg.tagged ? fi_tinject(e->ep, b, size, to, 0) : fi_inject(e->ep, b, size, to);
		else
			r = post_send(e, (void *)b, size, to, &ctx[1]);
		if (r != -FI_EAGAIN)
			break;
		cq_reap(e->txcq, "tx");
		cq_reap(e->rxcq, "rx"); /* never: rx is serial; keeps progress going */
	}
	CHK(r);
}

/* Server: n messages; answer each with one of the same size to the peer
 * whose index is in its first 4 bytes. */
static void server_echo(size_t size, uint64_t n)
{
	char *tb = buf + cfg.max_size;
	for (uint64_t i = 0; i < n; i++) {
		arm_recv(&E, &rx_armed[0], size);
		wait_recv(&E, &rx_armed[0]);
		uint32_t idx;
		memcpy(&idx, buf, 4);
		if (idx >= cfg.peers)
			die("echo: peer index %u", idx);
		memcpy(tb, &idx, 4);
		if (i + 1 < n)
			arm_recv(&E, &rx_armed[0], size);
		send_to(&E, tb, size, E.peer[idx]);
	}
}

/* Round-trip times of the last client_pingpong, ns. */
static uint64_t *rtt;
static uint64_t rtt_cap;

/* FI_BW_RTT_DUMP=PREFIX: the last n round trips (ns), in order, to PREFIX.SIZE
 * (to see how the times move within a run, before rtt_stats sorts them). */
static void rtt_dump(uint64_t size, uint64_t n)
{
	const char *pre = getenv("FI_BW_RTT_DUMP");
	if (!pre)
		return;
	char path[512];
	snprintf(path, sizeof(path), "%s.%llu", pre, (unsigned long long)size);
	FILE *f = fopen(path, "w");
	if (!f)
		die("FI_BW_RTT_DUMP: cannot write %s", path);
	for (uint64_t i = 0; i < n; i++)
		fprintf(f, "%llu\n", (unsigned long long)rtt[i]);
	fclose(f);
}

/* Half round trip in us of the last n round trips: median and minimum. */
static void rtt_stats(uint64_t n, double *p50, double *min)
{
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	*p50 = (double)rtt[n / 2] / 2000.0;
	*min = (double)rtt[0] / 2000.0;
}

/* Client: n round trips, round-robin over the peers; returns elapsed us. */
static uint64_t client_pingpong(size_t size, uint64_t n)
{
	char *tb = buf + cfg.max_size;
	if (n > rtt_cap) {
		free(rtt);
		rtt = malloc(n * sizeof(*rtt));
		if (!rtt)
			die("malloc");
		rtt_cap = n;
	}
	uint64_t t0 = now_us(), tp = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		uint32_t k = (uint32_t)(i % cfg.peers);
		struct ep *e = &peers[k];
		arm_recv(e, &rx_armed[k], size);
		memcpy(tb, &k, 4);
		send_to(e, tb, size, e->peer[0]);
		wait_recv(e, &rx_armed[k]);
		uint32_t back;
		memcpy(&back, buf, 4);
		if (back != k)
			die("pingpong: answer for peer %u arrived at peer %u", back, k);
		uint64_t t = now_ns();
		rtt[i] = t - tp;
		tp = t;
	}
	return now_us() - t0;
}

static void client_scale(struct fi_info *fi)
{
	char sname[128], name[128];
	uint32_t slen = sizeof(sname);
	long r0, p0, l0, r1, p1, l1;
	read_mem(&r0, &p0, &l0);
	peers = calloc(cfg.peers, sizeof(*peers));
	xchg(false, "", 0, sname, &slen); /* server's name first */
	for (uint32_t k = 0; k < cfg.peers; k++) {
		open_ep(&peers[k], fi);
		if (fi_av_insert(peers[k].av, sname, 1, &peers[k].peer[0], 0, NULL) != 1)
			die("fi_av_insert of the server failed");
		size_t nl = sizeof(name);
		CHK(fi_getname(&peers[k].ep->fid, name, &nl));
		uint32_t l = (uint32_t)nl;
		oob_send(&l, 4);
		oob_send(name, l);
	}
	read_mem(&r1, &p1, &l1);
	printf("SCALECLIENT peers=%u rss_kb=%ld:%ld pin_kb=%ld:%ld lck_kb=%ld:%ld\n", cfg.peers, r0, r1, p0, p1,
	       l0, l1);
	/* connect: one round trip from every peer */
	char c = 'L';
	uint64_t hdr[2] = { cfg.min_size, cfg.peers };
	oob_send(&c, 1);
	oob_send(hdr, sizeof(hdr));
	client_pingpong(cfg.min_size, cfg.peers);
	c = 'M';
	oob_send(&c, 1);
	long m[7];
	oob_recv(m, sizeof(m));
	printf("SCALE peers=%u rss_kb=%ld:%ld pin_kb=%ld:%ld lck_kb=%ld:%ld av_rss_kb=%ld\n", cfg.peers, m[0], m[1],
	       m[2], m[3], m[4], m[5], m[6]);
	fflush(stdout);
	uint64_t sizes[2] = { cfg.min_size, cfg.max_size };
	for (int s = 0; s < (cfg.min_size == cfg.max_size ? 1 : 2); s++) {
		uint64_t n = cfg.lat_iters;
		uint64_t w = n / 10 > cfg.peers ? n / 10 : cfg.peers;
		for (int timed = 0; timed < 2; timed++) {
			uint64_t cnt = timed ? n : w;
			hdr[0] = sizes[s];
			hdr[1] = cnt;
			c = 'L';
			oob_send(&c, 1);
			oob_send(hdr, sizeof(hdr));
			uint64_t us = client_pingpong(sizes[s], cnt);
			if (timed) {
				double p50, mn;
				rtt_stats(cnt, &p50, &mn);
				printf("SCALELAT peers=%u size=%llu iters=%llu usec=%.3f p50=%.3f min=%.3f\n", cfg.peers,
				       (unsigned long long)sizes[s], (unsigned long long)cnt,
				       (double)us / (2.0 * (double)cnt), p50, mn);
			}
			fflush(stdout);
		}
	}
	c = 'Q';
	oob_send(&c, 1);
	for (uint32_t k = 0; k < cfg.peers; k++)
		close_ep(&peers[k]);
}

static void server_scale(void)
{
	char name[128], pname[128];
	size_t nl = sizeof(name);
	long m[7], r, p, l;
	CHK(fi_getname(&E.ep->fid, name, &nl));
	uint32_t dummy = 0;
	xchg(true, name, (uint32_t)nl, pname, &dummy);
	read_mem(&m[0], &m[2], &m[4]);
	for (uint32_t k = 0; k < cfg.peers; k++) {
		uint32_t l32;
		oob_recv(&l32, 4);
		if (l32 > sizeof(pname))
			die("peer name too long");
		oob_recv(pname, l32);
		if (fi_av_insert(E.av, pname, 1, &E.peer[k], 0, NULL) != 1)
			die("fi_av_insert of peer %u failed", k);
	}
	read_mem(&r, &p, &l);
	m[6] = r - m[0];
	for (;;) {
		char c;
		while (!oob_ready()) {
			cq_reap(E.txcq, "server tx");
		}
		oob_recv(&c, 1);
		if (c == 'Q')
			return;
		if (c == 'M') {
			read_mem(&m[1], &m[3], &m[5]);
			oob_send(m, sizeof(m));
			continue;
		}
		if (c != 'L')
			die("oob: unexpected command %c", c);
		uint64_t hdr[2];
		oob_recv(hdr, sizeof(hdr));
		server_echo(hdr[0], hdr[1]);
	}
}

/* ---- latency (ping-pong, as fi_pingpong: half round trip) ------------- */

static uint64_t lat_iters_for(uint64_t size)
{
	uint64_t n = cfg.bytes / size;
	if (n > cfg.lat_iters)
		n = cfg.lat_iters;
	if (n < cfg.min_iters)
		n = cfg.min_iters;
	return n;
}

static void client_lat(bool more)
{
	char c = 'L';
	peers = &E;
	E.peer[0] = dest;
	for (unsigned si = 0; si < nsizes; si++) {
		uint64_t size = sizes[si];
		uint64_t n = lat_iters_for(size);
		uint64_t w = cfg.warmup < n ? cfg.warmup : n;
		for (int timed = 0; timed < 2; timed++) {
			uint64_t hdr[2] = { size, timed ? n : w };
			oob_send(&c, 1);
			oob_send(hdr, sizeof(hdr));
			uint64_t us = client_pingpong(size, hdr[1]);
			if (timed) {
				double p50, mn;
				rtt_dump(size, n);
				rtt_stats(n, &p50, &mn);
				printf("LAT size=%llu iters=%llu usec=%.3f p50=%.3f min=%.3f\n", (unsigned long long)size,
				       (unsigned long long)n, (double)us / (2.0 * (double)n), p50, mn);
			}
		}
	}
	c = more ? 'B' : 'Q';
	oob_send(&c, 1);
}

/* Returns true when the client goes on with the bandwidth part ('B'). */
static bool server_lat(void)
{
	E.peer[0] = dest;
	for (;;) {
		char c;
		while (!oob_ready())
			cq_reap(E.txcq, "server tx");
		oob_recv(&c, 1);
		if (c == 'Q' || c == 'B')
			return c == 'B';
		if (c != 'L')
			die("oob: unexpected command %c", c);
		uint64_t hdr[2];
		oob_recv(hdr, sizeof(hdr));
		server_echo(hdr[0], hdr[1]);
	}
}

/* ---- main ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: fi_bw [-p prov] [-e msg|rdm] [-m bw|scale] [-o send,write,read] [-t] [-W window]\n"
			"             [-S min:max | -L s1,s2,...] [-n max_iters] [-N min_iters] [-B bytes] [-w warmup]\n"
			"             [-c peers] [-l lat_iters] [-s src_addr] [-P port] [-T secs] [server_ip]\n");
	exit(2);
}

static void sleep_us(unsigned us) { usleep(us); }

int main(int argc, char **argv)
{
	const char *prov = "verbs", *src = NULL, *server = NULL, *list = NULL;
	int port = 47600, opt, wd = 1200;
	rdm = false;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "p:e:m:o:tW:S:L:n:N:B:w:c:l:s:P:T:h")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'e':
			if (!strcmp(optarg, "rdm")) rdm = true;
			else if (strcmp(optarg, "msg")) usage();
			break;
		case 'm':
			if (!strcmp(optarg, "scale")) cfg.mode = 1;
			else if (!strcmp(optarg, "lat")) cfg.mode = 2;
			else if (!strcmp(optarg, "latbw")) cfg.mode = 3;
			else if (strcmp(optarg, "bw")) usage();
			break;
		case 'o':
			cfg.ops = 0;
			if (strstr(optarg, "send")) cfg.ops |= OP_SEND;
			if (strstr(optarg, "write")) cfg.ops |= OP_WRITE;
			if (strstr(optarg, "read")) cfg.ops |= OP_READ;
			if (!cfg.ops) usage();
			break;
		case 't': cfg.tagged = 1; break;
		case 'W': cfg.window = (uint32_t)atoi(optarg); break;
		case 'S':
			cfg.min_size = strtoull(optarg, NULL, 0);
			cfg.max_size = strchr(optarg, ':') ? strtoull(strchr(optarg, ':') + 1, NULL, 0) : cfg.min_size;
			break;
		case 'L': list = optarg; break;
		case 'n': cfg.max_iters = strtoull(optarg, NULL, 0); break;
		case 'N': cfg.min_iters = strtoull(optarg, NULL, 0); break;
		case 'B': cfg.bytes = strtoull(optarg, NULL, 0); break;
		case 'w': cfg.warmup = strtoull(optarg, NULL, 0); break;
		case 'c': cfg.peers = (uint32_t)atoi(optarg); break;
		case 'l': cfg.lat_iters = strtoull(optarg, NULL, 0); break;
		case 's': src = optarg; break;
		case 'P': port = atoi(optarg); break;
		case 'T': wd = atoi(optarg); break;
		default: usage();
		}
	}
	if (optind < argc)
		server = argv[optind];
	role = server ? "client" : "server";
	alarm((unsigned)wd);
	make_sizes(list);
	if (nsizes == 0 || cfg.window < 1 || cfg.window > MAX_WINDOW / 2 || cfg.min_size < 4 || cfg.max_size < cfg.min_size ||
	    cfg.peers < 1 || cfg.peers > MAX_PEERS || cfg.max_iters < 1)
		usage();
	if (cfg.mode == 1 && !rdm)
		die("-m scale needs -e rdm");

	oob_connect(server, port);
	if (server)
		oob_send(&cfg, sizeof(cfg));
	else
		oob_recv(&cfg, sizeof(cfg));
	buf_len = 2 * cfg.max_size;

	hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
	hints->caps = FI_MSG | (cfg.tagged ? FI_TAGGED : 0) |
		      ((cfg.mode == 0 || cfg.mode == 3) && (cfg.ops & (OP_WRITE | OP_READ)) ? FI_RMA : 0);
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->addr_format = FI_SOCKADDR_IN;

	char name[128], pname[128];
	uint32_t plen = sizeof(pname);
	size_t nl = sizeof(name);
	if (rdm) {
		CHK(fi_getinfo(FI_VERSION(1, 17), src, src ? "0" : NULL, src ? FI_SOURCE : 0, hints, &info));
		open_domain();
		if (cfg.mode == 1 && server) {
			client_scale(info);
			goto out;
		}
		open_ep(&E, info);
		if (cfg.mode == 1) {
			server_scale();
			close_ep(&E);
			goto out;
		}
		CHK(fi_getname(&E.ep->fid, name, &nl));
		xchg(!server, name, (uint32_t)nl, pname, &plen);
		if (fi_av_insert(E.av, pname, 1, &dest, 0, NULL) != 1)
			die("fi_av_insert of the peer failed");
	} else if (!server) {
		CHK(fi_getinfo(FI_VERSION(1, 17), src, src ? "0" : NULL, src ? FI_SOURCE : 0, hints, &info));
		CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
		struct fi_eq_attr ea = { .size = 64, .wait_obj = FI_WAIT_UNSPEC };
		CHK(fi_eq_open(fabric, &ea, &eq, NULL));
		CHK(fi_passive_ep(fabric, info, &pep, NULL));
		CHK(fi_pep_bind(pep, &eq->fid, 0));
		CHK(fi_listen(pep));
		CHK(fi_getname(&pep->fid, name, &nl));
		xchg(true, name, (uint32_t)nl, pname, &plen);
		fi_freeinfo(info);
		eq_wait(FI_CONNREQ);
		CHK(fi_domain(fabric, info, &domain, NULL));
		buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED)
			die("mmap");
		memset(buf, 0x5a, buf_len);
		CHK(fi_mr_reg(domain, buf, buf_len,
			      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0, &mr,
			      NULL));
		desc = fi_mr_desc(mr);
		open_ep(&E, info);
		CHK(fi_accept(E.ep, NULL, 0));
		eq_wait(FI_CONNECTED);
	} else {
		xchg(false, "", 0, pname, &plen);
		hints->dest_addr = malloc(plen);
		memcpy(hints->dest_addr, pname, plen);
		hints->dest_addrlen = plen;
		CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
		rdm = false;
		open_domain();
		open_ep(&E, info);
		CHK(fi_connect(E.ep, pname, NULL, 0));
		eq_wait(FI_CONNECTED);
		dest = FI_ADDR_UNSPEC;
	}

	/* window limits of this side */
	if (cfg.window > info->tx_attr->size)
		cfg.window = (uint32_t)info->tx_attr->size;
	if (cfg.window > info->rx_attr->size)
		cfg.window = (uint32_t)info->rx_attr->size;

	/* the server's buffer is the RMA target */
	uint64_t ri[2] = { (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0,
			   fi_mr_key(mr) };
	uint32_t rl = sizeof(ri);
	uint64_t rr[2];
	xchg(!server, ri, rl, rr, &rl);
	remote_addr = rr[0];
	remote_key = rr[1];
	fprintf(stderr, "fi_bw %s: provider %s %s, window %u, sizes %llu..%llu, mr_mode %#x\n", role,
		info->fabric_attr->prov_name, rdm ? "rdm" : "msg", cfg.window, (unsigned long long)cfg.min_size,
		(unsigned long long)cfg.max_size, (unsigned)info->domain_attr->mr_mode);
	if (cfg.mode >= 2) {
		inject_size = info->tx_attr->inject_size;
		if (server) {
			client_lat(cfg.mode == 3);
			if (cfg.mode == 3) {
				inject_size = 0;
				client_bw();
			}
		} else if (server_lat()) {
			server_bw();
		}
	} else if (server)
		client_bw();
	else
		server_bw();
	/* let the peer finish before tearing down */
	if (!server) {
		char c = 'E';
		oob_send(&c, 1);
	} else {
		char c;
		oob_recv(&c, 1);
	}
	sleep_us(1000);
	close_ep(&E);
out:
	if (pep)
		CHK(fi_close(&pep->fid));
	CHK(fi_close(&mr->fid));
	CHK(fi_close(&domain->fid));
	if (eq)
		CHK(fi_close(&eq->fid));
	CHK(fi_close(&fabric->fid));
	return 0;
}
