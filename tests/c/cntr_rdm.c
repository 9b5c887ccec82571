/*
 * cntr_rdm: counters on FI_EP_RDM endpoints (fi_cntr(3), fi_endpoint(3)).
 *
 * Server: a receive counter (FI_WAIT_FD) bound FI_RECV (FI_REMOTE_WRITE /
 * FI_REMOTE_READ binds refused with -FI_EOPNOTSUPP: no FI_RMA_EVENT).
 * Client: send counter (FI_WAIT_UNSPEC, FI_SEND), write counter (FI_WAIT_FD,
 * FI_WRITE), read counter (FI_WAIT_NONE, FI_READ).
 * Asserts:
 *  - 8 eager fi_send + 2 rendezvous fi_send (64 KiB) + 5 fi_inject: send
 *    counter exactly 15, receive counter exactly 15 (progress made inside
 *    fi_cntr_wait: connection, rendezvous reads, completions);
 *  - a message longer than its receive: the receive counter's error value
 *    is exactly 1, its value unchanged (FI_ETRUNC in the CQ);
 *  - 7 fi_write, 3 fi_read: exactly 7 and 3, send counter unchanged;
 *  - fi_cntr_wait time-out (-FI_ETIMEDOUT); the FI_GETWAIT fd not readable
 *    after fi_trywait returned 0 and readable when the peer's message bumps
 *    the receive counter (wake-up through the endpoint's channels) and on
 *    fi_cntr_add; add/set/adderr/seterr;
 *  - a write with a bad key: fi_cntr_wait -FI_EAVAIL, error value exactly 1.
 */
#include "rdm_common.h"
#include "cntr_common.h"

#define NMSG 10
#define NINJ 5
#define NRX 24
#define RBUF 65536

static struct fi_context rctx[NRX + 2], sctx[NMSG + 4], wctx[16];

/* rdm open with counters bound before fi_enable */
static void open_with(struct rctx *r, void (*bind)(struct rctx *))
{
	struct fi_cq_attr a;
	struct fi_av_attr av;
	memset(r, 0, sizeof(*r));
	r->hints = rdm_hints(FI_MSG | FI_RMA);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r->hints, &r->info));
	EXPECT(r->info->domain_attr->cntr_cnt > 0, "domain cntr_cnt is 0");
	CHK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	memset(&av, 0, sizeof(av));
	av.type = FI_AV_TABLE;
	CHK(fi_av_open(r->domain, &av, &r->av, NULL));
	CHK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	memset(&a, 0, sizeof(a));
	a.size = 1024;
	a.format = FI_CQ_FORMAT_TAGGED;
	CHK(fi_cq_open(r->domain, &a, &r->txcq, NULL));
	CHK(fi_cq_open(r->domain, &a, &r->rxcq, NULL));
	CHK(fi_ep_bind(r->ep, &r->av->fid, 0));
	CHK(fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV));
	bind(r);
	CHK(fi_enable(r->ep));
	r->namelen = sizeof(r->name);
	CHK(fi_getname(&r->ep->fid, r->name, &r->namelen));
	r->peer = FI_ADDR_NOTAVAIL;
}

static struct fid_cntr *s_rx, *c_tx, *c_wr, *c_rd;

static void srv_bind(struct rctx *r)
{
	s_rx = cntr_open(r->domain, FI_WAIT_FD);
	struct fid_cntr *x = cntr_open(r->domain, FI_WAIT_NONE);
	int e = fi_ep_bind(r->ep, &x->fid, FI_REMOTE_WRITE);
	EXPECT(e == -FI_EOPNOTSUPP, "binding FI_REMOTE_WRITE returned %d, want -FI_EOPNOTSUPP", e);
	e = fi_ep_bind(r->ep, &x->fid, FI_REMOTE_READ | FI_RECV);
	EXPECT(e == -FI_EOPNOTSUPP, "binding FI_REMOTE_READ returned %d, want -FI_EOPNOTSUPP", e);
	CHK(fi_close(&x->fid));
	CHK(fi_ep_bind(r->ep, &s_rx->fid, FI_RECV));
}

static void cli_bind(struct rctx *r)
{
	c_tx = cntr_open(r->domain, FI_WAIT_UNSPEC);
	c_wr = cntr_open(r->domain, FI_WAIT_FD);
	c_rd = cntr_open(r->domain, FI_WAIT_NONE);
	CHK(fi_ep_bind(r->ep, &c_tx->fid, FI_SEND));
	CHK(fi_ep_bind(r->ep, &c_wr->fid, FI_WRITE));
	CHK(fi_ep_bind(r->ep, &c_rd->fid, FI_READ));
}

static void drain(struct fid_cq *cq, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		struct fi_cq_tagged_entry e;
		rdm_next(cq, &e, "%s", what);
	}
}

static void server(void)
{
	struct rctx r;
	open_with(&r, srv_bind);
	rdm_exchange(&r, true);
	char *buf = alloc_buf((size_t)NRX * RBUF);
	char *rma = alloc_buf(65536);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, (size_t)NRX * RBUF, FI_RECV);
	struct fid_mr *rmr = rdm_mr_reg(&r, rma, 65536, FI_REMOTE_WRITE | FI_REMOTE_READ);
	for (int i = 0; i < NMSG + NINJ; i++)
		CHK(fi_recv(r.ep, buf + (size_t)i * RBUF, RBUF, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[i]));
	struct rma_info ri = { (uint64_t)(uintptr_t)rma, fi_mr_key(rmr), 65536 };
	oob_send(&ri, sizeof(ri));

	cntr_expect(s_rx, NMSG + NINJ, "receive counter after 15 messages");
	drain(r.rxcq, NMSG + NINJ, "receive");
	EXPECT(fi_cntr_readerr(s_rx) == 0, "receive error value %llu", (unsigned long long)fi_cntr_readerr(s_rx));

	/* truncation: error value */
	CHK(fi_recv(r.ep, buf, 1000, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[NRX]));
	oob_signal(1);
	uint64_t t0 = now_ms();
	while (fi_cntr_readerr(s_rx) < 1)
		EXPECT(now_ms() - t0 < WAIT_MS, "no receive error counted after %d ms", WAIT_MS);
	EXPECT(fi_cntr_readerr(s_rx) == 1 && fi_cntr_read(s_rx) == NMSG + NINJ,
	       "after a truncated receive: value %llu err %llu, want %d and 1",
	       (unsigned long long)fi_cntr_read(s_rx), (unsigned long long)fi_cntr_readerr(s_rx), NMSG + NINJ);
	rdm_expect_err(r.rxcq, FI_ETRUNC, "truncated receive");

	/* wake-up */
	CHK(fi_recv(r.ep, buf, RBUF, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[NRX + 1]));
	int ep = cntr_epoll(s_rx);
	cntr_trywait(r.fabric, s_rx);
	EXPECT(epoll_ready(ep, 50) == 0, "counter fd readable after fi_trywait returned 0, with nothing new");
	oob_signal(2);
	t0 = now_ms();
	EXPECT(epoll_ready(ep, 20000) == 1, "counter fd not readable 20 s after the client's send (missed wake-up)");
	logmsg("receive counter fd woke after %llu ms (client sends after 300 ms)", (unsigned long long)(now_ms() - t0));
	cntr_expect(s_rx, NMSG + NINJ + 1, "receive counter after the wake-up message");
	drain(r.rxcq, 1, "wake-up receive");
	close(ep);
	cntr_expect_timeout(s_rx, NMSG + NINJ + 2, 300);
	cntr_check_set_add(s_rx);

	rdm_progress_start(&r);
	oob_signal(3);
	oob_wait(4);
	rdm_progress_stop();
	mr_close(mr);
	mr_close(rmr);
	rdm_close_ep(&r); /* the counters hold the domain: close them before it */
	CHK(fi_close(&s_rx->fid));
	rdm_close(&r);
	free(buf);
	free(rma);
	test_finish();
}

static void client(void)
{
	struct rctx r;
	open_with(&r, cli_bind);
	rdm_exchange(&r, true);
	char *buf = alloc_buf(2 * 65536);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, 2 * 65536, FI_SEND | FI_WRITE | FI_READ);
	struct rma_info ri;
	oob_recv(&ri, sizeof(ri));

	for (int i = 0; i < NMSG; i++)
		RETRY(&r, fi_send(r.ep, buf, i < 2 ? 65536 : 200, fi_mr_desc(mr), r.peer, &sctx[i]));
	for (int i = 0; i < NINJ; i++)
		RETRY(&r, fi_inject(r.ep, buf, 64, r.peer));
	cntr_expect(c_tx, NMSG + NINJ, "send counter after 10 sends (2 rendezvous) + 5 injects");
	drain(r.txcq, NMSG, "send");
	cq_expect_empty(r.txcq, 100, "tx CQ (injects make no entry)");

	oob_wait(1);
	RETRY(&r, fi_send(r.ep, buf, 3000, fi_mr_desc(mr), r.peer, &sctx[NMSG]));
	cntr_expect(c_tx, NMSG + NINJ + 1, "send counter after the truncated message");
	drain(r.txcq, 1, "send");
	oob_wait(2);
	sleep_ms(300);
	RETRY(&r, fi_send(r.ep, buf, 100, fi_mr_desc(mr), r.peer, &sctx[NMSG + 1]));
	cntr_expect(c_tx, NMSG + NINJ + 2, "send counter");
	drain(r.txcq, 1, "send");

	oob_wait(3);
	for (int i = 0; i < 7; i++)
		RETRY(&r, fi_write(r.ep, buf + 1024, 256, fi_mr_desc(mr), r.peer, ri.addr + 256 * i, ri.key, &wctx[i]));
	cntr_expect(c_wr, 7, "write counter after 7 writes");
	for (int i = 0; i < 3; i++)
		RETRY(&r, fi_read(r.ep, buf + 8192 + 256 * i, 256, fi_mr_desc(mr), r.peer, ri.addr + 256 * i, ri.key,
				  &wctx[7 + i]));
	cntr_poll_expect(c_rd, 3, "read counter after 3 reads");
	EXPECT(fi_cntr_read(c_wr) == 7, "write counter %llu after the reads", (unsigned long long)fi_cntr_read(c_wr));
	EXPECT(fi_cntr_read(c_tx) == NMSG + NINJ + 2, "send counter %llu after RMA",
	       (unsigned long long)fi_cntr_read(c_tx));
	drain(r.txcq, 10, "rma");
	EXPECT(memcmp(buf + 8192, buf + 1024, 256) == 0, "read back data differs");

	cntr_expect_timeout(c_wr, 8, 300);
	int ep = cntr_epoll(c_wr);
	cntr_trywait(r.fabric, c_wr);
	EXPECT(epoll_ready(ep, 50) == 0, "write counter fd readable after fi_trywait returned 0");
	CHK(fi_cntr_add(c_wr, 1));
	EXPECT(epoll_ready(ep, 5000) == 1, "write counter fd not readable after fi_cntr_add");
	CHK(fi_cntr_set(c_wr, 7));
	close(ep);
	cntr_check_set_add(c_rd);

	RETRY(&r, fi_write(r.ep, buf, 64, fi_mr_desc(mr), r.peer, ri.addr, ri.key ^ 0x5a5a00, &wctx[10]));
	int e = fi_cntr_wait(c_wr, 8, WAIT_MS);
	EXPECT(e == -FI_EAVAIL, "fi_cntr_wait after a failing write returned %d (%s), want -FI_EAVAIL", e,
	       fi_strerror(-e));
	EXPECT(fi_cntr_readerr(c_wr) == 1 && fi_cntr_read(c_wr) == 7, "write counter %llu err %llu, want 7 and 1",
	       (unsigned long long)fi_cntr_read(c_wr), (unsigned long long)fi_cntr_readerr(c_wr));
	logmsg("counters: send %llu, write %llu (err %llu), read %llu", (unsigned long long)fi_cntr_read(c_tx),
	       (unsigned long long)fi_cntr_read(c_wr), (unsigned long long)fi_cntr_readerr(c_wr),
	       (unsigned long long)fi_cntr_read(c_rd));
	oob_signal(4);
	mr_close(mr);
	rdm_close_ep(&r);
	CHK(fi_close(&c_tx->fid));
	CHK(fi_close(&c_wr->fid));
	CHK(fi_close(&c_rd->fid));
	rdm_close(&r);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("cntr_rdm"))
		server();
	else
		client();
	return 0;
}
