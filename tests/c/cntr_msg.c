/*
 * cntr_msg: counters on FI_EP_MSG endpoints (fi_cntr(3), fi_endpoint(3)).
 *
 * Server: a receive counter (FI_WAIT_FD) bound FI_RECV; FI_REMOTE_WRITE /
 * FI_REMOTE_READ binds refused with -FI_EOPNOTSUPP (no FI_RMA_EVENT).
 * Client: a send counter (FI_WAIT_UNSPEC) bound FI_SEND, a write counter
 * (FI_WAIT_FD) bound FI_WRITE, a read counter (FI_WAIT_NONE) bound FI_READ.
 * Asserts:
 *  - 10 fi_send + 5 fi_inject: the send counter reaches exactly 15 (injects
 *    count, though they write no CQ entry), the receive counter exactly 15;
 *  - 7 fi_write and 3 fi_read: write counter exactly 7, read counter exactly 3,
 *    the send counter unchanged (each kind counts only its operations);
 *  - fi_cntr_wait time-out: -FI_ETIMEDOUT after about the time-out, value kept;
 *  - the FI_GETWAIT fd (FI_GETWAITOBJ = FI_WAIT_FD) is not readable after
 *    fi_trywait returned 0 and nothing happened, and becomes readable (epoll)
 *    when a message from the peer bumps the receive counter, and when
 *    fi_cntr_add bumps the write counter;
 *  - fi_cntr_add/set/adderr/seterr;
 *  - a write with a bad key: fi_cntr_wait returns -FI_EAVAIL, the error value
 *    is exactly 1 and the success value unchanged;
 *  - fi_close of a counter still bound: -FI_EBUSY.
 */
#include "cntr_common.h"

#include <stdlib.h>

#define NMSG 10
#define NINJ 5
#define MSZ 100
#define NRX 24

static struct fid_cntr *s_rx, *c_tx, *c_wr, *c_rd;
static struct fi_context rctx[NRX], sctx[NMSG + 1], wctx[16];

static void srv_pre(struct tctx *t)
{
	s_rx = cntr_open(t->domain, FI_WAIT_FD);
	struct fid_cntr *x = cntr_open(t->domain, FI_WAIT_NONE);
	int r = fi_ep_bind(t->ep, &x->fid, FI_REMOTE_WRITE);
	EXPECT(r == -FI_EOPNOTSUPP, "binding a counter FI_REMOTE_WRITE returned %d, want -FI_EOPNOTSUPP", r);
	r = fi_ep_bind(t->ep, &x->fid, FI_REMOTE_READ);
	EXPECT(r == -FI_EOPNOTSUPP, "binding a counter FI_REMOTE_READ returned %d, want -FI_EOPNOTSUPP", r);
	CHK(fi_close(&x->fid));
	CHK(fi_ep_bind(t->ep, &s_rx->fid, FI_RECV));
}

static void cli_pre(struct tctx *t)
{
	c_tx = cntr_open(t->domain, FI_WAIT_UNSPEC);
	c_wr = cntr_open(t->domain, FI_WAIT_FD);
	c_rd = cntr_open(t->domain, FI_WAIT_NONE);
	CHK(fi_ep_bind(t->ep, &c_tx->fid, FI_SEND));
	CHK(fi_ep_bind(t->ep, &c_wr->fid, FI_WRITE));
	CHK(fi_ep_bind(t->ep, &c_rd->fid, FI_READ));
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT);
	t.pre_enable = srv_pre;
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	char *buf = alloc_buf(NRX * 4096);
	char *rma = alloc_buf(65536);
	struct fid_mr *mr = mr_reg(&t, buf, NRX * 4096, FI_RECV);
	struct fid_mr *rmr = mr_reg(&t, rma, 65536, FI_REMOTE_WRITE | FI_REMOTE_READ);
	for (int i = 0; i < NRX; i++)
		CHK(fi_recv(t.ep, buf + i * 4096, 4096, fi_mr_desc(mr), 0, &rctx[i]));
	server_accept(&t, NULL, 0);
	struct rma_info ri = { (uint64_t)(uintptr_t)rma, fi_mr_key(rmr), 65536 };
	oob_send(&ri, sizeof(ri));

	struct fi_cq_data_entry d;
	cntr_expect(s_rx, NMSG + NINJ, "receive counter after 15 messages");
	for (int i = 0; i < NMSG + NINJ; i++)
		cq_read_one(t.rxcq, &d, WAIT_MS, "receive");
	EXPECT(fi_cntr_readerr(s_rx) == 0, "receive error value %llu", (unsigned long long)fi_cntr_readerr(s_rx));

	/* wake-up: an incoming message makes the counter's fd readable */
	int ep = cntr_epoll(s_rx);
	cntr_trywait(t.fabric, s_rx);
	EXPECT(epoll_ready(ep, 50) == 0, "counter fd readable after fi_trywait returned 0, with nothing new");
	oob_signal(1);
	uint64_t t0 = now_ms();
	EXPECT(epoll_ready(ep, 20000) == 1, "counter fd not readable 20 s after the client's send (missed wake-up)");
	logmsg("receive counter fd woke after %llu ms (client sends after 300 ms)", (unsigned long long)(now_ms() - t0));
	cntr_expect(s_rx, NMSG + NINJ + 1, "receive counter after the wake-up message");
	cq_read_one(t.rxcq, &d, WAIT_MS, "receive");
	close(ep);

	cntr_expect_timeout(s_rx, NMSG + NINJ + 2, 300);
	cntr_check_set_add(s_rx);
	int r = fi_close(&s_rx->fid);
	EXPECT(r == -FI_EBUSY, "fi_close of a bound counter returned %d, want -FI_EBUSY", r);
	oob_signal(2);
	oob_wait(3);
	mr_close(mr);
	mr_close(rmr);
	CHK(fi_close(&t.ep->fid)); /* the counters hold the domain: close them before it */
	t.ep = NULL;
	CHK(fi_close(&s_rx->fid));
	tctx_close(&t);
	free(buf);
	free(rma);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT);
	t.pre_enable = cli_pre;
	client_setup(&t);
	char *buf = alloc_buf(65536);
	struct fid_mr *mr = mr_reg(&t, buf, 65536, FI_SEND | FI_WRITE | FI_READ);
	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	struct rma_info ri;
	oob_recv(&ri, sizeof(ri));

	struct fi_cq_entry c;
	for (int i = 0; i < NMSG; i++)
		CHK(fi_send(t.ep, buf, MSZ, fi_mr_desc(mr), 0, &sctx[i]));
	for (int i = 0; i < NINJ; i++)
		CHK(fi_inject(t.ep, buf, MSZ, 0));
	cntr_expect(c_tx, NMSG + NINJ, "send counter after 10 sends + 5 injects");
	for (int i = 0; i < NMSG; i++)
		cq_read_one(t.txcq, &c, WAIT_MS, "send");
	cq_expect_empty(t.txcq, 100, "tx CQ after the sends (injects make no entry)");

	oob_wait(1);
	sleep_ms(300);
	CHK(fi_send(t.ep, buf, MSZ, fi_mr_desc(mr), 0, &sctx[NMSG]));
	cntr_expect(c_tx, NMSG + NINJ + 1, "send counter");
	cq_read_one(t.txcq, &c, WAIT_MS, "send");

	oob_wait(2);
	for (int i = 0; i < 7; i++)
		CHK(fi_write(t.ep, buf + 1024, 256, fi_mr_desc(mr), 0, ri.addr + 256 * i, ri.key, &wctx[i]));
	cntr_expect(c_wr, 7, "write counter after 7 writes");
	for (int i = 0; i < 3; i++)
		CHK(fi_read(t.ep, buf + 8192 + 256 * i, 256, fi_mr_desc(mr), 0, ri.addr + 256 * i, ri.key, &wctx[7 + i]));
	cntr_poll_expect(c_rd, 3, "read counter after 3 reads");
	EXPECT(fi_cntr_read(c_wr) == 7, "write counter %llu after the reads", (unsigned long long)fi_cntr_read(c_wr));
	EXPECT(fi_cntr_read(c_tx) == NMSG + NINJ + 1, "send counter %llu after RMA", (unsigned long long)fi_cntr_read(c_tx));
	for (int i = 0; i < 10; i++)
		cq_read_one(t.txcq, &c, WAIT_MS, "rma");
	EXPECT(memcmp(buf + 8192, buf + 1024, 256) == 0, "read back data differs");

	cntr_expect_timeout(c_wr, 8, 300);
	/* fi_cntr_add wakes the fd too */
	int ep = cntr_epoll(c_wr);
	cntr_trywait(t.fabric, c_wr);
	EXPECT(epoll_ready(ep, 50) == 0, "write counter fd readable after fi_trywait returned 0");
	CHK(fi_cntr_add(c_wr, 1));
	EXPECT(epoll_ready(ep, 5000) == 1, "write counter fd not readable after fi_cntr_add");
	EXPECT(fi_cntr_read(c_wr) == 8, "write counter %llu after fi_cntr_add(1)", (unsigned long long)fi_cntr_read(c_wr));
	CHK(fi_cntr_set(c_wr, 7));
	close(ep);
	cntr_check_set_add(c_rd);

	/* an error completion: bad key */
	CHK(fi_write(t.ep, buf, 64, fi_mr_desc(mr), 0, ri.addr, ri.key ^ 0x5a5a00, &wctx[10]));
	int r = fi_cntr_wait(c_wr, 8, WAIT_MS);
	EXPECT(r == -FI_EAVAIL, "fi_cntr_wait after a failing write returned %d (%s), want -FI_EAVAIL", r, fi_strerror(-r));
	EXPECT(fi_cntr_readerr(c_wr) == 1, "write error value %llu, want 1", (unsigned long long)fi_cntr_readerr(c_wr));
	EXPECT(fi_cntr_read(c_wr) == 7, "write counter %llu after the failed write", (unsigned long long)fi_cntr_read(c_wr));
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof(err));
	EXPECT(cq_read_one_or_err(t.txcq, &c, &err, WAIT_MS, "bad write") == 0, "the bad-key write succeeded");
	logmsg("counters: send %llu, write %llu (err %llu), read %llu", (unsigned long long)fi_cntr_read(c_tx),
	       (unsigned long long)fi_cntr_read(c_wr), (unsigned long long)fi_cntr_readerr(c_wr),
	       (unsigned long long)fi_cntr_read(c_rd));
	r = fi_close(&c_tx->fid);
	EXPECT(r == -FI_EBUSY, "fi_close of a bound counter returned %d, want -FI_EBUSY", r);
	oob_signal(3);
	mr_close(mr);
	CHK(fi_close(&t.ep->fid));
	t.ep = NULL;
	CHK(fi_close(&c_tx->fid));
	CHK(fi_close(&c_wr->fid));
	CHK(fi_close(&c_rd->fid));
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("cntr_msg"))
		server();
	else
		client();
	return 0;
}
