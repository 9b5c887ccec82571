/*
 * msg_waitloop: Mercury's NA OFI progress/wait loop over FI_EP_MSG.
 *
 * Mercury's OFI plugin drives a manual-progress provider like this: it
 * busy-polls fi_cq_read() while traffic flows; once the CQ stays empty it
 * calls fi_trywait(fabric, &cq_fid, 1) and, only if that returns 0, sleeps in
 * epoll_wait() on the fd from fi_control(&cq->fid, FI_GETWAIT, &fd) until the
 * next completion; -FI_EAGAIN from fi_trywait means "read again".
 *
 * Server (the loop under test): one CQ, FI_WAIT_FD, FI_CQ_FORMAT_DATA, bound
 * FI_TRANSMIT|FI_RECV (Mercury's layout: one CQ per context).  It keeps NRX
 * receives posted, polls with random read counts (1..8) and a random spin
 * budget (0, 8, 64 or 512 empty reads) before going idle, then trywait +
 * epoll_wait with a watchdog timeout (-w, default 10 s).  It answers every
 * burst with a small ack (fi_send, whose completion lands on the same CQ).
 *
 * Client: tx and rx CQs both FI_WAIT_FD; sends bursts (sizes 1..32, derived
 * from the seed and the burst number), messages of 32 B..8 KiB (derived from
 * the seed and the sequence number) carrying a header (sequence, burst, index,
 * length, FNV-1a checksum, CLOCK_MONOTONIC send time) and a payload pattern
 * seeded by the sequence number; some bursts are paced (0..300 us between
 * sends).  Between bursts it waits for the ack (fi_trywait on both CQs, then
 * epoll_wait on both fds) and then sleeps a random gap: 0 (10%), 0..max_gap
 * ms, or a long gap (~200 ms; at 1/4, 1/2 and 3/4 of the run and at random).
 *
 * Asserts:
 *  - every message arrives exactly once, in order (sequence, burst, index),
 *    with the expected length (completion len and header) and intact data
 *    (checksum and pattern); every ack matches its burst; nothing extra
 *    arrives afterwards;
 *  - fi_trywait returns only 0 or -FI_EAGAIN (server and client);
 *  - no epoll_wait times out (a time-out means a missed wake-up: the peer is
 *    waiting for us, so nothing else would arrive);
 *  - the server does not burn CPU while it sleeps: its process CPU time
 *    (user+sys, the clock getrusage reports, read by the client through
 *    clock_getcpuclockid) over the quiet part of the client's gaps (gaps
 *    >= 8 ms, from 3 ms after the ack until the next send) stays under -c
 *    percent (default 20) of that wall time;
 *  - the server's own getrusage(RUSAGE_SELF) user+sys from going idle to the
 *    next completion stays under -C percent (default 75) of the idle wall
 *    time.  This bound is loose on purpose: it includes the wake-up, and the
 *    lab kernel (no IRQ_TIME_ACCOUNTING) charges the Soft-RoCE softirq work of
 *    the arriving burst, and any host preemption of the emulated CPU, to the
 *    task that has just woken; under TCG that is ~20-30% of the idle time.
 *    A busy-spinning wait shows ~100% in both figures;
 *  - at least one burst started while the server slept.
 * Reports both idle figures, the CPU inside epoll_wait, and the wake-up
 * latency (client send time to the server's return from epoll_wait, over
 * bursts that started while the server slept) as median/p99, and the
 * client's burst round-trip times.  WL_TRACE_MS=N logs every idle stretch
 * of >= N ms (and every one over the -c bound).
 *
 * Options: -b bursts (400) -m max burst (32) -S max message size (8192)
 *          -g max gap ms (20) -L long gap ms (200) -P long gap percent (1)
 *          -w epoll watchdog ms (10000) -c sleeping CPU bound percent (20)
 *          -C idle-stretch CPU bound percent (75)
 *          -s seed (time) -T alarm seconds (120)
 */
#include "common.h"

#define WL_NAME "msg_waitloop"
#define MAX_MSG 8192
#define WL_DEFAULT_BURSTS 400
#define WL_DEFAULT_MAX_SIZE MAX_MSG
#define WL_RECV_ADDR 0
typedef struct tctx wl_ctx;
#define wl_peer(x) ((fi_addr_t)0)

#include "waitloop_common.h"

/* ---- FI_EP_MSG: one connection through a passive endpoint ------------------ */

static void wl_srv_open(struct srv *s)
{
	struct tctx *t = &s->x;
	struct fi_cq_attr a;
	tctx_init(t);
	t->hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(t);
	struct fi_info *info = server_wait_connreq(t, NULL, NULL, NULL);
	t->info = info;
	EXPECT(info->rx_attr->size >= NRX, "rx_attr->size %zu < %d", info->rx_attr->size, NRX);
	CHK(fi_domain(t->fabric, info, &t->domain, NULL));
	CHK(fi_endpoint(t->domain, info, &t->ep, NULL));
	memset(&a, 0, sizeof(a));
	a.size = 1024;
	a.format = FI_CQ_FORMAT_DATA;
	a.wait_obj = FI_WAIT_FD;
	CHK(fi_cq_open(t->domain, &a, &t->rxcq, NULL));
	s->cq = t->rxcq;
	CHK(fi_ep_bind(t->ep, &t->eq->fid, 0));
	CHK(fi_ep_bind(t->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(t->ep));
}

static void wl_srv_go(struct srv *s)
{
	server_accept(&s->x, NULL, 0);
}

static void wl_srv_send_ack(struct srv *s, struct wl_ack *a, int slot)
{
	CHK(fi_send(s->x.ep, a, sizeof(*a), fi_mr_desc(s->ackmr), 0, &s->ackctx[slot]));
}

/* A connection delivers in order: exactly the next sequence number. */
static bool wl_check_order(struct srv *s, const struct wl_hdr *h)
{
	EXPECT(h->seq == s->seq,
	       "message out of order, lost or duplicated: got seq %u, expected %u (burst %u idx %u)",
	       h->seq, s->seq, s->burst, s->idx);
	EXPECT(h->burst == s->burst && h->idx == s->idx && h->burst_len == s->blen,
	       "seq %u: header burst %u idx %u/%u, expected burst %u idx %u/%u", h->seq, h->burst,
	       h->idx, h->burst_len, s->burst, s->idx, s->blen);
	return h->idx == 0;
}

static void wl_cli_open(struct cli *c)
{
	tctx_init(&c->x);
	c->x.tx_wait = FI_WAIT_FD;
	c->x.rx_wait = FI_WAIT_FD;
	c->x.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&c->x);
}

static void wl_cli_go(struct cli *c)
{
	client_connect(&c->x, NULL, 0, NULL, NULL, NULL);
}

static struct fid_mr *wl_mr_reg(wl_ctx *x, void *buf, size_t len, uint64_t access)
{
	return mr_reg(x, buf, len, access);
}

static void wl_close(wl_ctx *x)
{
	tctx_close(x);
}
