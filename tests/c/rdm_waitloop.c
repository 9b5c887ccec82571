/*
 * rdm_waitloop: Mercury's NA OFI progress/wait loop over FI_EP_RDM.
 *
 * The loop of msg_waitloop.c (read its header for the details of the
 * traffic, the assertions and the figures), on RDM endpoints: every
 * completion there is made in software (eager deliveries, rendezvous reads,
 * send completions after the receiver's answer), so the CQ's FI_GETWAIT fd
 * must wake for the endpoint's internal completion channel and rdma-cm
 * channel, and fi_trywait must re-arm them (and progress once more) before
 * it returns 0.  The first message also sets up the connection, while the
 * server sleeps.
 *
 * Server: one CQ (FI_WAIT_FD, FI_CQ_FORMAT_DATA) bound FI_TRANSMIT|FI_RECV,
 * NRX receives of MAX_MSG posted with FI_ADDR_UNSPEC; busy-polls fi_cq_read
 * with random counts and spin budgets, then fi_trywait + epoll_wait.
 * Client: tx CQ (FORMAT_CONTEXT) and rx CQ (FORMAT_DATA), both FI_WAIT_FD,
 * the same loop on both fds while waiting for the ack and its send
 * completions.  Message sizes go up to -S (default 40 KiB), so a good part
 * of them is above the eager limit (16 KiB by default): rendezvous.
 *
 * Asserts what msg_waitloop asserts (every message once, intact, bursts in
 * order -- within a burst completions come in any order, as RDM's comp_order
 * FI_ORDER_NONE allows: a rendezvous receive completes after later eager ones;
 * only 0/-FI_EAGAIN from fi_trywait; no epoll time-out = no missed wake-up;
 * idle CPU bounds) and reports the idle CPU and the wake-up latency.
 *
 * Options: as msg_waitloop (-b bursts, default 300; -S max size <= 64 KiB).
 */
#include "rdm_common.h"

#define WL_NAME "rdm_waitloop"
#define MAX_MSG 65536
#define WL_DEFAULT_BURSTS 300
#define WL_DEFAULT_MAX_SIZE 40960
#define WL_RECV_ADDR FI_ADDR_UNSPEC
typedef struct rctx wl_ctx;
#define wl_peer(x) ((x)->peer)

#include "waitloop_common.h"

#define TAG_GO 0x53

/* ---- FI_EP_RDM -------------------------------------------------------------- */

/* getinfo -> fabric -> domain -> av; the CQs (tx and rx; one CQ for both
 * when tx_fmt is 0, Mercury's layout) with FI_WAIT_FD -> ep -> bind -> enable. */
static void open_rdm(struct rctx *r, enum fi_cq_format tx_fmt, enum fi_cq_format rx_fmt)
{
	struct fi_cq_attr a;
	struct fi_av_attr av;
	memset(r, 0, sizeof(*r));
	r->hints = rdm_hints(FI_MSG);
	r->hints->mode = FI_CONTEXT;
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r->hints, &r->info));
	EXPECT(r->info->rx_attr->size >= NRX, "rx_attr->size %zu < %d", r->info->rx_attr->size, NRX);
	EXPECT(r->info->domain_attr->data_progress == FI_PROGRESS_MANUAL,
	       "RDM data progress %d, want FI_PROGRESS_MANUAL", r->info->domain_attr->data_progress);
	CHK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	memset(&av, 0, sizeof(av));
	av.type = FI_AV_TABLE;
	CHK(fi_av_open(r->domain, &av, &r->av, NULL));
	CHK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	memset(&a, 0, sizeof(a));
	a.size = 1024;
	a.wait_obj = FI_WAIT_FD;
	a.format = rx_fmt;
	CHK(fi_cq_open(r->domain, &a, &r->rxcq, NULL));
	if (tx_fmt) {
		a.format = tx_fmt;
		CHK(fi_cq_open(r->domain, &a, &r->txcq, NULL));
	}
	CHK(fi_ep_bind(r->ep, &r->av->fid, 0));
	if (tx_fmt) {
		CHK(fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT));
		CHK(fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV));
	} else {
		CHK(fi_ep_bind(r->ep, &r->rxcq->fid, FI_TRANSMIT | FI_RECV));
	}
	CHK(fi_enable(r->ep));
	r->namelen = sizeof(r->name);
	CHK(fi_getname(&r->ep->fid, r->name, &r->namelen));
	r->peer = FI_ADDR_NOTAVAIL;
}

static void wl_srv_open(struct srv *s)
{
	open_rdm(&s->x, 0, FI_CQ_FORMAT_DATA);
	s->cq = s->x.rxcq;
	rdm_exchange(&s->x, true);
}

static void wl_srv_go(struct srv *s)
{
	(void)s;
	oob_signal(TAG_GO);
}

static void wl_srv_send_ack(struct srv *s, struct wl_ack *a, int slot)
{
	ssize_t r;
	uint64_t dl = now_ms() + WAIT_MS;
	while ((r = fi_send(s->x.ep, a, sizeof(*a), fi_mr_desc(s->ackmr), s->x.peer,
			    &s->ackctx[slot])) == -FI_EAGAIN) {
		(void)fi_cq_read(s->cq, NULL, 0); /* progress without reading */
		EXPECT(now_ms() < dl, "fi_send(ack) -FI_EAGAIN for %d ms", WAIT_MS);
	}
	CHK(r);
}

/* RDM completes in any order (comp_order FI_ORDER_NONE: a rendezvous
 * receive completes after later eager ones), bursts never overlap. */
static bool wl_check_order(struct srv *s, const struct wl_hdr *h)
{
	EXPECT(h->burst == s->burst && h->idx < s->blen && h->burst_len == s->blen,
	       "seq %u: header burst %u idx %u/%u, expected burst %u (%u of %u seen)", h->seq, h->burst,
	       h->idx, h->burst_len, s->burst, s->idx, s->blen);
	EXPECT(!(s->mask & (1u << h->idx)), "duplicate message: burst %u idx %u (seq %u)", h->burst,
	       h->idx, h->seq);
	EXPECT(h->seq == s->bseq + h->idx, "seq %u for burst %u idx %u, expected %u", h->seq, h->burst,
	       h->idx, s->bseq + h->idx);
	bool first_of_burst = s->mask == 0;
	s->mask |= 1u << h->idx;
	return first_of_burst;
}

static void wl_cli_open(struct cli *c)
{
	open_rdm(&c->x, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_DATA);
	rdm_exchange(&c->x, true);
}

static void wl_cli_go(struct cli *c)
{
	(void)c;
	oob_wait(TAG_GO);
}

static struct fid_mr *wl_mr_reg(wl_ctx *x, void *buf, size_t len, uint64_t access)
{
	return rdm_mr_reg(x, buf, len, access);
}

static void wl_close(wl_ctx *x)
{
	rdm_close(x);
}
