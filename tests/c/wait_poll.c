/*
 * wait_poll: wait sets and poll sets (fi_poll(3)) over an FI_EP_RDM endpoint.
 *
 * Server: a wait set (fi_wait_open, FI_WAIT_FD); tx CQ, rx CQ and a receive
 * counter (FI_RECV) opened with FI_WAIT_SET on it; a poll set holding the
 * three (contexts: the fid contexts given at open).
 * Asserts:
 *  - idle: fi_poll returns 0, fi_wait times out (-FI_ETIMEDOUT);
 *  - FI_GETWAIT on the wait set gives an fd; after fi_trywait(wait set) = 0
 *    it is not readable, and it becomes readable (epoll) when the peer's
 *    message arrives (connection set-up and delivery progressed inside
 *    fi_trywait/fi_poll/fi_wait);
 *  - fi_poll then returns exactly the rx CQ's and the counter's contexts;
 *    after reading the CQ, fi_poll returns 0 (the counter has not changed
 *    since the last fi_poll);
 *  - a send completion: fi_wait returns 0, fi_poll returns only the tx CQ;
 *  - fi_poll with count 1 and two members ready returns 1 context;
 *  - fi_poll_add of a member again: -FI_EALREADY; fi_poll_del of a
 *    non-member: -FI_ENOENT; fi_poll_add of an endpoint: -FI_EINVAL;
 *  - fi_close of a CQ still in the poll set, and of the wait set while
 *    objects use it: -FI_EBUSY.
 */
#include "rdm_common.h"

#include <errno.h>
#include <sys/epoll.h>

static int ctx_tx, ctx_rx, ctx_cn; /* addresses used as contexts */
static struct fi_context sctx[4], rctx[4];

static int poll_set(struct fid_poll *ps, void **out, int n)
{
	int r = fi_poll(ps, out, n);
	EXPECT(r >= 0 && r <= n, "fi_poll(count %d) returned %d (%s)", n, r, r < 0 ? fi_strerror(-r) : "");
	return r;
}

static bool has(void **v, int n, void *x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void server(void)
{
	struct rctx r;
	struct fid_wait *ws = NULL;
	struct fid_poll *ps = NULL;
	struct fid_cntr *cn = NULL;
	struct fi_wait_attr wa = { .wait_obj = FI_WAIT_FD };
	struct fi_poll_attr pa = { .flags = 0 };
	struct fi_cq_attr ca;
	struct fi_cntr_attr na;
	struct fi_av_attr av;

	memset(&r, 0, sizeof(r));
	r.hints = rdm_hints(FI_MSG);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r.hints, &r.info));
	CHK(fi_fabric(r.info->fabric_attr, &r.fabric, NULL));
	CHK(fi_domain(r.fabric, r.info, &r.domain, NULL));
	CHK(fi_wait_open(r.fabric, &wa, &ws));
	CHK(fi_poll_open(r.domain, &pa, &ps));
	memset(&av, 0, sizeof(av));
	av.type = FI_AV_TABLE;
	CHK(fi_av_open(r.domain, &av, &r.av, NULL));
	memset(&ca, 0, sizeof(ca));
	ca.size = 256;
	ca.format = FI_CQ_FORMAT_TAGGED;
	ca.wait_obj = FI_WAIT_SET;
	ca.wait_set = ws;
	CHK(fi_cq_open(r.domain, &ca, &r.txcq, &ctx_tx));
	CHK(fi_cq_open(r.domain, &ca, &r.rxcq, &ctx_rx));
	memset(&na, 0, sizeof(na));
	na.events = FI_CNTR_EVENTS_COMP;
	na.wait_obj = FI_WAIT_SET;
	na.wait_set = ws;
	CHK(fi_cntr_open(r.domain, &na, &cn, &ctx_cn));
	enum fi_wait_obj wo = FI_WAIT_NONE;
	CHK(fi_control(&r.rxcq->fid, FI_GETWAITOBJ, &wo));
	EXPECT(wo == FI_WAIT_SET, "CQ FI_GETWAITOBJ gave %d, want FI_WAIT_SET", (int)wo);
	CHK(fi_endpoint(r.domain, r.info, &r.ep, NULL));
	CHK(fi_ep_bind(r.ep, &r.av->fid, 0));
	CHK(fi_ep_bind(r.ep, &r.txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(r.ep, &r.rxcq->fid, FI_RECV));
	CHK(fi_ep_bind(r.ep, &cn->fid, FI_RECV));
	CHK(fi_enable(r.ep));
	r.namelen = sizeof(r.name);
	CHK(fi_getname(&r.ep->fid, r.name, &r.namelen));
	rdm_exchange(&r, true);

	CHK(fi_poll_add(ps, &r.txcq->fid, 0));
	CHK(fi_poll_add(ps, &r.rxcq->fid, 0));
	CHK(fi_poll_add(ps, &cn->fid, 0));
	int e = fi_poll_add(ps, &r.rxcq->fid, 0);
	EXPECT(e == -FI_EALREADY, "fi_poll_add of a member again returned %d, want -FI_EALREADY", e);
	e = fi_poll_add(ps, &r.ep->fid, 0);
	EXPECT(e == -FI_EINVAL, "fi_poll_add of an endpoint returned %d, want -FI_EINVAL", e);

	char *buf = alloc_buf(8192);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, 8192, FI_SEND | FI_RECV);
	for (int i = 0; i < 2; i++)
		CHK(fi_recv(r.ep, buf + 4096 * i, 4096, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[i]));

	void *got[8];
	EXPECT(poll_set(ps, got, 8) == 0, "fi_poll on an idle set returned contexts");
	uint64_t t0 = now_ms();
	e = fi_wait(ws, 200);
	EXPECT(e == -FI_ETIMEDOUT, "idle fi_wait(200 ms) returned %d (%s), want -FI_ETIMEDOUT", e, fi_strerror(-e));
	EXPECT(now_ms() - t0 >= 150, "idle fi_wait(200 ms) returned after %llu ms", (unsigned long long)(now_ms() - t0));

	/* sleep on the wait set's fd until the client's message arrives */
	int fd = -1;
	CHK(fi_control(&ws->fid, FI_GETWAIT, &fd));
	EXPECT(fd >= 0, "wait set FI_GETWAIT gave fd %d", fd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	EXPECT(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll: %s", strerror(errno));
	struct fid *wf = &ws->fid;
	while ((e = fi_trywait(r.fabric, &wf, 1)) == -FI_EAGAIN)
		EXPECT(poll_set(ps, got, 8) == 0, "fi_poll found events before anything was sent");
	EXPECT(e == 0, "fi_trywait(wait set) returned %d (%s)", e, fi_strerror(-e));
	EXPECT(epoll_wait(ep, &ev, 1, 50) == 0, "wait set fd readable with nothing to report");
	oob_signal(1);
	t0 = now_ms();
	int woke = epoll_wait(ep, &ev, 1, 20000);
	EXPECT(woke == 1, "wait set fd not readable 20 s after the peer's send (missed wake-up): %d", woke);
	logmsg("wait set fd woke %llu ms after the signal (client sends after 300 ms; connection set-up included)",
	       (unsigned long long)(now_ms() - t0));
	close(ep);

	/* the message: rx CQ and counter have events, the tx CQ none (the wake-up
	 * may have been the connection request: then the message comes later) */
	bool seen_rx = false, seen_cn = false;
	int n, polls = 0;
	t0 = now_ms();
	while (!(seen_rx && seen_cn)) {
		n = poll_set(ps, got, 8);
		polls++;
		EXPECT(!has(got, n, &ctx_tx), "fi_poll returned the tx CQ with no send posted");
		seen_rx |= has(got, n, &ctx_rx);
		seen_cn |= has(got, n, &ctx_cn);
		if (seen_rx && seen_cn)
			break;
		e = fi_wait(ws, 1000);
		EXPECT(e == 0 || e == -FI_ETIMEDOUT, "fi_wait returned %d (%s)", e, fi_strerror(-e));
		EXPECT(now_ms() - t0 < 20000, "rx CQ / counter not reported by fi_poll after 20 s (rx %d, cntr %d)",
		       seen_rx, seen_cn);
	}
	logmsg("fi_poll reported the rx CQ and the counter after %d poll(s)", polls);
	EXPECT(fi_cntr_read(cn) == 1, "receive counter %llu, want 1", (unsigned long long)fi_cntr_read(cn));
	rdm_expect(r.rxcq, &rctx[0], FI_RECV, NULL, "receive");
	EXPECT(poll_set(ps, got, 8) == 0, "fi_poll after reading everything returned contexts");

	/* a send completion wakes fi_wait; only the tx CQ reports */
	CHK(fi_send(r.ep, buf, 100, fi_mr_desc(mr), r.peer, &sctx[0]));
	t0 = now_ms();
	while ((n = poll_set(ps, got, 8)) == 0) {
		e = fi_wait(ws, 20000);
		EXPECT(e == 0, "fi_wait for the send completion returned %d (%s)", e, fi_strerror(-e));
		EXPECT(now_ms() - t0 < 20000, "no send completion after 20 s");
	}
	EXPECT(n == 1 && got[0] == &ctx_tx, "fi_poll after a send: %d contexts (first %p, tx %p)", n, got[0],
	       (void *)&ctx_tx);
	rdm_expect(r.txcq, &sctx[0], FI_SEND, NULL, "send");

	/* two ready, count 1 */
	oob_signal(2);
	t0 = now_ms();
	while (fi_cntr_read(cn) < 2)
		EXPECT(now_ms() - t0 < 20000, "second message not counted after 20 s");
	n = poll_set(ps, got, 1);
	EXPECT(n == 1 && got[0] == &ctx_rx, "fi_poll(count 1): %d (%p), want the rx CQ", n, got[0]);
	n = poll_set(ps, got, 8);
	EXPECT(n == 2 && has(got, n, &ctx_rx) && has(got, n, &ctx_cn),
	       "fi_poll(count 8) with an unread CQ entry and a changed counter: %d contexts", n);
	CHK(fi_cntr_add(cn, 0)); /* fi_cntr_add resets the poll state: the counter is not reported */
	n = poll_set(ps, got, 8);
	EXPECT(n == 1 && got[0] == &ctx_rx, "fi_poll after fi_cntr_add: %d contexts, want only the rx CQ", n);
	rdm_expect(r.rxcq, &rctx[1], FI_RECV, NULL, "second receive");
	EXPECT(poll_set(ps, got, 8) == 0, "fi_poll after reading everything returned contexts");

	e = fi_close(&r.rxcq->fid);
	EXPECT(e == -FI_EBUSY, "fi_close of a CQ in a poll set (and bound) returned %d, want -FI_EBUSY", e);
	e = fi_close(&ws->fid);
	EXPECT(e == -FI_EBUSY, "fi_close of a wait set in use returned %d, want -FI_EBUSY", e);
	CHK(fi_poll_del(ps, &r.txcq->fid, 0));
	e = fi_poll_del(ps, &r.txcq->fid, 0);
	EXPECT(e == -FI_ENOENT, "fi_poll_del of a non-member returned %d, want -FI_ENOENT", e);
	CHK(fi_poll_del(ps, &r.rxcq->fid, 0));
	CHK(fi_poll_del(ps, &cn->fid, 0));
	CHK(fi_close(&ps->fid));
	oob_signal(3);
	oob_wait(4);
	mr_close(mr);
	rdm_close_ep(&r);
	CHK(fi_close(&cn->fid));
	CHK(fi_close(&ws->fid));
	rdm_close(&r);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct rctx r;
	rdm_open(&r, FI_MSG);
	rdm_exchange(&r, true);
	char *buf = alloc_buf(8192);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, 8192, FI_SEND | FI_RECV);
	CHK(fi_recv(r.ep, buf + 4096, 4096, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[0]));
	oob_wait(1);
	sleep_ms(300);
	RETRY(&r, fi_send(r.ep, buf, 64, fi_mr_desc(mr), r.peer, &sctx[0]));
	rdm_expect(r.txcq, &sctx[0], FI_SEND, NULL, "send");
	rdm_expect(r.rxcq, &rctx[0], FI_RECV, NULL, "server's message");
	oob_wait(2);
	RETRY(&r, fi_send(r.ep, buf, 64, fi_mr_desc(mr), r.peer, &sctx[1]));
	rdm_expect(r.txcq, &sctx[1], FI_SEND, NULL, "send");
	oob_wait(3);
	oob_signal(4);
	mr_close(mr);
	rdm_close(&r);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("wait_poll"))
		server();
	else
		client();
	return 0;
}
