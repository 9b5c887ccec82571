/*
 * msg_selective: FI_SELECTIVE_COMPLETION on the transmit CQ.
 *
 * The client binds its tx CQ with FI_TRANSMIT|FI_SELECTIVE_COMPLETION (and,
 * as the application's choice of default op flags, clears FI_COMPLETION from
 * info->tx_attr->op_flags before opening the endpoint).  It then posts, in
 * this order:
 *   fi_send, fi_sendmsg(FI_COMPLETION), fi_send, fi_sendmsg(0),
 *   fi_sendmsg(FI_COMPLETION), fi_send, fi_sendmsg(FI_COMPLETION), fi_send
 * Asserts (fi_endpoint(3) FI_SELECTIVE_COMPLETION, fi_msg(3) FI_COMPLETION):
 *  - every message arrives intact at the server;
 *  - exactly the three FI_COMPLETION sends produce tx completions, each once,
 *    with their op_context; nothing else appears afterwards.
 */
#include "common.h"

#include <stdlib.h>

#define NMSG 8
static const bool want_comp[NMSG] = { false, true, false, false, true, false, true, false };
static const bool use_msg[NMSG] = { false, true, false, true, true, false, true, false };

static struct fi_context rctx[NMSG], sctx[NMSG];

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	char *buf = alloc_buf(NMSG * 4096);
	struct fid_mr *mr = mr_reg(&t, buf, NMSG * 4096, FI_RECV);
	for (int i = 0; i < NMSG; i++)
		CHK(fi_recv(t.ep, buf + i * 4096, 4096, fi_mr_desc(mr), 0, &rctx[i]));
	server_accept(&t, NULL, 0);

	bool seen[NMSG] = { false };
	for (int i = 0; i < NMSG; i++) {
		struct fi_cq_data_entry c;
		cq_read_one(t.rxcq, &c, WAIT_MS, "receive");
		long idx = (struct fi_context *)c.op_context - rctx;
		EXPECT(idx >= 0 && idx < NMSG, "op_context %p unknown", c.op_context);
		uint32_t seq;
		memcpy(&seq, buf + idx * 4096, 4);
		EXPECT(seq < NMSG && !seen[seq], "bad or repeated message number %u", seq);
		seen[seq] = true;
		EXPECT(c.len == 1000 + seq, "message %u len %zu", seq, c.len);
		expect_pattern(buf + idx * 4096 + 4, c.len - 4, 50 + seq, "message data");
	}
	logmsg("all %d messages received", NMSG);
	oob_signal(1);
	oob_wait(2);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.tx_bind_flags = FI_TRANSMIT | FI_SELECTIVE_COMPLETION;
	t.clear_tx_completion = true;
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	logmsg("tx op_flags after clearing FI_COMPLETION: 0x%llx",
	       (unsigned long long)t.info->tx_attr->op_flags);
	char *buf = alloc_buf(NMSG * 4096);
	struct fid_mr *mr = mr_reg(&t, buf, NMSG * 4096, FI_SEND);
	void *d = fi_mr_desc(mr);
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	for (uint32_t i = 0; i < NMSG; i++) {
		char *b = buf + i * 4096;
		size_t len = 1000 + i;
		memcpy(b, &i, 4);
		fill_pattern(b + 4, len - 4, 50 + i);
		if (use_msg[i]) {
			struct iovec iov = { b, len };
			struct fi_msg m = { .msg_iov = &iov, .desc = &d, .iov_count = 1,
					    .context = &sctx[i] };
			CHK(fi_sendmsg(t.ep, &m, want_comp[i] ? FI_COMPLETION : 0));
		} else {
			CHK(fi_send(t.ep, b, len, d, 0, &sctx[i]));
		}
	}
	oob_wait(1); /* everything arrived */

	int ncomp = 0;
	bool seen[NMSG] = { false };
	for (int k = 0; k < 3; k++) {
		struct fi_cq_entry c;
		cq_read_one(t.txcq, &c, WAIT_MS, "selective tx completion");
		long idx = (struct fi_context *)c.op_context - sctx;
		EXPECT(idx >= 0 && idx < NMSG, "tx op_context %p unknown", c.op_context);
		EXPECT(want_comp[idx], "send %ld (posted without FI_COMPLETION) generated a completion",
		       idx);
		EXPECT(!seen[idx], "send %ld completed twice", idx);
		seen[idx] = true;
		ncomp++;
	}
	cq_expect_empty(t.txcq, 500, "tx CQ after the 3 requested completions");
	logmsg("exactly %d tx completions, as requested", ncomp);

	oob_signal(2);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("msg_selective"))
		server();
	else
		client();
	return 0;
}
