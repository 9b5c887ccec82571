/*
 * rdm_auto: FI_PROGRESS_AUTO on FI_EP_RDM endpoints.
 *
 * Both sides ask for data_progress FI_PROGRESS_AUTO.  Asserts:
 *  - fi_getinfo reports FI_PROGRESS_AUTO for data and control progress (the
 *    endpoint runs a progress thread: one more thread after fi_enable);
 *  - the server posts a 64 KiB receive (rendezvous: the receiver RDMA-reads
 *    the data and answers with FIN) and an eager one, then makes no libfabric
 *    call at all while the client sends: the client's first message sets up
 *    the connection (accepted by the server's thread), and both of the
 *    client's sends complete -- the rendezvous one only after the server's
 *    thread has read the data and answered;
 *  - afterwards the server's receive completions are there at the first
 *    fi_cq_read, with intact data;
 *  - fi_close stops the thread (thread count back, within the moment the
 *    kernel takes to drop an exited thread from /proc/self/task).
 */
#include "rdm_common.h"

#define BIG 65536

static struct fi_context rctx[2], sctx[2];

static void open_auto(struct rctx *r)
{
	memset(r, 0, sizeof(*r));
	r->hints = rdm_hints(FI_MSG);
	r->hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r->hints, &r->info));
	EXPECT(r->info->domain_attr->data_progress == FI_PROGRESS_AUTO, "data progress %d, want FI_PROGRESS_AUTO",
	       r->info->domain_attr->data_progress);
	EXPECT(r->info->domain_attr->control_progress == FI_PROGRESS_AUTO,
	       "control progress %d, want FI_PROGRESS_AUTO (the thread makes both)",
	       r->info->domain_attr->control_progress);
	CHK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	int t0 = thread_count();
	rdm_open_ep(r);
	int t1 = thread_count();
	EXPECT(t1 == t0 + 1, "threads %d before fi_enable, %d after: want one progress thread", t0, t1);
}

static void server(void)
{
	struct rctx r;
	open_auto(&r);
	rdm_exchange(&r, true);
	char *buf = alloc_buf(2 * BIG);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, 2 * BIG, FI_RECV);
	/* counted after fi_mr_reg: the domain's registration cache starts its
	 * memory monitor thread at the first one, and keeps it until the domain
	 * closes */
	int with = thread_count();
	CHK(fi_recv(r.ep, buf, BIG, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[0]));
	CHK(fi_recv(r.ep, buf + BIG, BIG, fi_mr_desc(mr), FI_ADDR_UNSPEC, &rctx[1]));
	/* from here until the client is done: no libfabric call */
	oob_signal(1);
	oob_wait(2);
	struct fi_cq_tagged_entry e[2];
	ssize_t n = fi_cq_read(r.rxcq, e, 2);
	EXPECT(n == 2, "first fi_cq_read after the client's sends completed returned %zd, want both receives", n);
	/* any order: the rendezvous receive completes after its read */
	int big = e[0].op_context == &rctx[0] ? 0 : 1;
	EXPECT(e[big].op_context == &rctx[0] && e[big].len == BIG, "rendezvous receive: ctx %p len %zu",
	       e[big].op_context, e[big].len);
	EXPECT(e[1 - big].op_context == &rctx[1] && e[1 - big].len == 100, "eager receive: ctx %p len %zu",
	       e[1 - big].op_context, e[1 - big].len);
	expect_pattern(buf, BIG, 7, "rendezvous data");
	expect_pattern(buf + BIG, 100, 8, "eager data");
	oob_signal(3);
	oob_wait(4);
	mr_close(mr);
	rdm_close_ep(&r);
	/* fi_close joins the thread; the kernel may list it in /proc/self/task
	 * a moment longer (pthread_join returns when the thread clears its tid,
	 * early in its exit): allow that moment, not a thread that keeps running. */
	uint64_t t0 = now_ms();
	while (thread_count() != with - 1 && now_ms() - t0 < 2000)
		usleep(1000);
	EXPECT(thread_count() == with - 1, "threads %d after fi_close(ep), %d before: the progress thread must end",
	       thread_count(), with);
	rdm_close(&r);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct rctx r;
	open_auto(&r);
	rdm_exchange(&r, true);
	char *buf = alloc_buf(2 * BIG);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, 2 * BIG, FI_SEND);
	fill_pattern(buf, BIG, 7);
	fill_pattern(buf + BIG, 100, 8);
	oob_wait(1);
	uint64_t t0 = now_ms();
	RETRY(&r, fi_send(r.ep, buf, BIG, fi_mr_desc(mr), r.peer, &sctx[0]));
	RETRY(&r, fi_send(r.ep, buf + BIG, 100, fi_mr_desc(mr), r.peer, &sctx[1]));
	bool done[2] = { false, false };
	for (int i = 0; i < 2; i++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "send (the rendezvous needs the server's progress)");
		int k = e.op_context == &sctx[0] ? 0 : e.op_context == &sctx[1] ? 1 : -1;
		EXPECT(k >= 0 && !done[k], "send completion with op_context %p", e.op_context);
		done[k] = true;
	}
	logmsg("both sends completed after %llu ms with the server making no libfabric call",
	       (unsigned long long)(now_ms() - t0));
	oob_signal(2);
	oob_wait(3);
	oob_signal(4);
	mr_close(mr);
	rdm_close(&r);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("rdm_auto"))
		server();
	else
		client();
	return 0;
}
