/*
 * fault_queues: receive queue exhaustion and CQs too small for the traffic.
 *
 * All CQs here are opened with size CQ_SIZE (2).  rsverbs grows the verbs CQ
 * with the endpoints bound to it and keeps a software queue (docs/design.md),
 * so nothing may be lost; an overrun, if it could happen, must show as an
 * error, never silently.
 *   A  MSG, receiver not ready: the server posts no receive; the client sends
 *      NRNR messages.  RC retries (RNR, rsverbs asks for infinite retries), so
 *      for RNR_WAIT_MS the client sees no completion at all (no error either);
 *      once the server posts its receives, every send completes successfully
 *      and every message arrives, in order, intact, within WAIT_MS.
 *   B  MSG, tiny CQs: the client posts NBURST sends without reading its CQ,
 *      the server has NBURST receives posted and reads nothing until the
 *      client is done; then each side reads exactly NBURST successful
 *      completions, contexts in posting order, and nothing more.
 *   C  RDM, tiny CQs: the same with NRDM messages of mixed sizes (eager and
 *      rendezvous), both sides only progressing (fi_cq_read with count 0)
 *      until everything is done, then reading all completions.
 */
#include "rdm_common.h"

#define CQ_SIZE 2
#define NRNR 16
#define RNR_WAIT_MS 3000
#define NBURST 300
#define NRDM 120
#define MSGLEN 1024

static void *ctx(int i) { return (void *)(uintptr_t)(0x100 + i); }

/* Read n successful completions whose contexts are ctx(0..n-1) in order. */
static void drain_in_order(struct fid_cq *cq, int n, bool tagged_fmt, const char *what)
{
	for (int i = 0; i < n; i++) {
		union {
			struct fi_cq_data_entry d;
			struct fi_cq_tagged_entry t;
		} e;
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		char b[512];
		int ok = cq_read_one_or_err(cq, &e, &err, WAIT_MS, what);
		if (!ok)
			fail("%s: completion %d of %d is an error entry: %s", what, i, n, cq_err_str(cq, &err, b, sizeof(b)));
		void *c = tagged_fmt ? e.t.op_context : e.d.op_context;
		EXPECT(c == ctx(i), "%s: completion %d has context %p, want %p (lost or reordered)", what, i, c, ctx(i));
	}
	cq_expect_empty(cq, 300, what);
	logmsg("%s: %d completions, in order, none lost or duplicated", what, n);
}

static void msg_phase(void)
{
	struct tctx t;
	tctx_init(&t);
	t.cq_size = CQ_SIZE;
	t.hints = make_hints(FI_MSG, 0);
	t.hints->tx_attr->size = 384;
	t.hints->rx_attr->size = 384;
	size_t blen = (size_t)NBURST * MSGLEN;
	uint8_t *buf = alloc_buf(blen);
	struct fid_mr *mr;
	if (!is_child) {
		server_listen(&t);
		struct fi_info *ci = server_wait_connreq(&t, NULL, NULL, NULL);
		setup_active(&t, ci);
		mr = mr_reg(&t, buf, blen, FI_RECV);
		server_accept(&t, NULL, 0); /* A: no receive posted */
		oob_wait(1); /* the client has posted its sends */
		sleep_ms(RNR_WAIT_MS);
		for (int i = 0; i < NRNR; i++)
			CHK(fi_recv(t.ep, buf + (size_t)i * MSGLEN, MSGLEN, fi_mr_desc(mr), 0, ctx(i)));
		oob_signal(2);
		drain_in_order(t.rxcq, NRNR, false, "A: receives after RNR");
		for (int i = 0; i < NRNR; i++)
			expect_pattern(buf + (size_t)i * MSGLEN, MSGLEN, 100 + i, "A: message");
		/* B */
		memset(buf, 0, blen);
		for (int i = 0; i < NBURST; i++)
			CHK(fi_recv(t.ep, buf + (size_t)i * MSGLEN, MSGLEN, fi_mr_desc(mr), 0, ctx(i)));
		oob_signal(3);
		oob_wait(4); /* all the client's sends completed (it has not read them) */
		drain_in_order(t.rxcq, NBURST, false, "B: receives through a CQ of size 2");
		for (int i = 0; i < NBURST; i++)
			expect_pattern(buf + (size_t)i * MSGLEN, MSGLEN, 1000 + i, "B: message");
		oob_signal(5);
	} else {
		client_setup(&t);
		mr = mr_reg(&t, buf, blen, FI_SEND);
		client_connect(&t, NULL, 0, NULL, NULL, NULL);
		for (int i = 0; i < NRNR; i++) {
			fill_pattern(buf + (size_t)i * MSGLEN, MSGLEN, 100 + i);
			CHK(fi_send(t.ep, buf + (size_t)i * MSGLEN, MSGLEN, fi_mr_desc(mr), 0, ctx(i)));
		}
		oob_signal(1);
		/* The receiver is not ready: no completion, in particular no error. */
		cq_expect_empty(t.txcq, RNR_WAIT_MS - 500, "A: sends while the receiver has no buffer");
		logmsg("A: no completion for %d ms while the peer had no receive posted (RNR retries)", RNR_WAIT_MS - 500);
		oob_wait(2);
		drain_in_order(t.txcq, NRNR, false, "A: sends after RNR");
		/* B */
		oob_wait(3);
		for (int i = 0; i < NBURST; i++) {
			fill_pattern(buf + (size_t)i * MSGLEN, MSGLEN, 1000 + i);
			ssize_t r = fi_send(t.ep, buf + (size_t)i * MSGLEN, MSGLEN, fi_mr_desc(mr), 0, ctx(i));
			EXPECT(r == 0, "B: fi_send %d of %d with a CQ of size %d unread: %zd (%s)", i, NBURST, CQ_SIZE, r,
			       fi_strerror((int)-r));
		}
		sleep_ms(1500); /* let them all complete at the device */
		oob_signal(4);
		drain_in_order(t.txcq, NBURST, false, "B: sends through a CQ of size 2");
		oob_wait(5);
	}
	mr_close(mr);
	tctx_close(&t);
	free(buf);
}

/* Read n successful completions with contexts ctx(0..n-1), in any order
 * (eager and rendezvous complete out of order), each exactly once. */
static void drain_any_order(struct fid_cq *cq, int n, uint64_t flags, struct fi_cq_tagged_entry *out, const char *what)
{
	static bool seen[1024];
	memset(seen, 0, sizeof(seen));
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(cq, &e, "%s: completion %d of %d", what, k, n);
		int i = (int)((uintptr_t)e.op_context - 0x100);
		EXPECT(i >= 0 && i < n, "%s: unknown context %p", what, e.op_context);
		EXPECT(!seen[i], "%s: operation %d completed twice", what, i);
		EXPECT((e.flags & flags) == flags, "%s: flags %#llx", what, (unsigned long long)e.flags);
		seen[i] = true;
		if (out)
			out[i] = e;
	}
	cq_expect_empty(cq, 300, what);
}

static size_t rdm_len(int i)
{
	static const size_t s[] = {0, 8, 1000, 16384, 16385, 100000};
	return s[i % 6];
}

static void rdm_phase(void)
{
	struct rctx r;
	memset(&r, 0, sizeof(r));
	r.hints = rdm_hints(FI_MSG);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r.hints, &r.info));
	CHK(fi_fabric(r.info->fabric_attr, &r.fabric, NULL));
	CHK(fi_domain(r.fabric, r.info, &r.domain, NULL));
	struct fi_cq_attr ca = {.size = CQ_SIZE, .format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	CHK(fi_endpoint(r.domain, r.info, &r.ep, NULL));
	CHK(fi_cq_open(r.domain, &ca, &r.txcq, NULL));
	CHK(fi_cq_open(r.domain, &ca, &r.rxcq, NULL));
	CHK(fi_av_open(r.domain, &aa, &r.av, NULL));
	CHK(fi_ep_bind(r.ep, &r.av->fid, 0));
	CHK(fi_ep_bind(r.ep, &r.txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(r.ep, &r.rxcq->fid, FI_RECV));
	CHK(fi_enable(r.ep));
	r.namelen = sizeof(r.name);
	CHK(fi_getname(&r.ep->fid, r.name, &r.namelen));
	rdm_exchange(&r, true);
	size_t slot = 100000;
	uint8_t *buf = alloc_buf((size_t)NRDM * slot);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, (size_t)NRDM * slot, FI_SEND | FI_RECV);
	if (!is_child) {
		for (int i = 0; i < NRDM; i++)
			RETRY(&r, fi_recv(r.ep, buf + (size_t)i * slot, slot, fi_mr_desc(mr), FI_ADDR_UNSPEC, ctx(i)));
		oob_signal(6);
		/* Progress only, until the client's sends have all completed. */
		rdm_progress_start(&r);
		oob_wait(7);
		rdm_progress_stop();
		static struct fi_cq_tagged_entry es[NRDM];
		drain_any_order(r.rxcq, NRDM, FI_RECV | FI_MSG, es, "C: receives through a CQ of size 2");
		for (int i = 0; i < NRDM; i++) {
			EXPECT(es[i].len == rdm_len(i), "C: receive %d len %zu, want %zu", i, es[i].len, rdm_len(i));
			expect_pattern(buf + (size_t)i * slot, rdm_len(i), 5000 + i, "C: message");
		}
		logmsg("C: %d RDM receives (eager and rendezvous) through a CQ of size %d, none lost", NRDM, CQ_SIZE);
		oob_signal(8);
	} else {
		oob_wait(6);
		for (int i = 0; i < NRDM; i++) {
			fill_pattern(buf + (size_t)i * slot, rdm_len(i), 5000 + i);
			RETRY(&r, fi_send(r.ep, buf + (size_t)i * slot, rdm_len(i), fi_mr_desc(mr), r.peer, ctx(i)));
		}
		/* Wait (progress only) until the peer has had time to read everything. */
		uint64_t t0 = now_ms();
		while (now_ms() - t0 < 4000)
			(void)fi_cq_read(r.rxcq, NULL, 0);
		drain_any_order(r.txcq, NRDM, FI_SEND | FI_MSG, NULL, "C: sends through a CQ of size 2");
		logmsg("C: %d RDM sends through a CQ of size %d, none lost", NRDM, CQ_SIZE);
		oob_signal(7);
		rdm_progress_start(&r);
		oob_wait(8);
		rdm_progress_stop();
	}
	CHK(fi_close(&mr->fid));
	rdm_close(&r);
	free(buf);
}

int main(void)
{
	bool parent = test_start("fault_queues");
	msg_phase();
	rdm_phase();
	if (!parent)
		child_done();
	test_finish();
}
