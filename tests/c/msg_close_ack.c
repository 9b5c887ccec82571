/*
 * msg_close_ack: a receiver that closes its endpoint as soon as it has read
 * the last message's receive completion does not make the sender's send
 * fail.
 *
 * The message has arrived when the receive completes, but on RC the
 * sender's send completes only when the receiver's ACK comes back, and rxe
 * reports a receive before it sends that ACK. A provider that moves the QP
 * to the error state in fi_close (rdma_disconnect) makes rxe drop an ACK not
 * yet sent; the disconnect then reaches the sender with its send
 * unacknowledged, and the send completes flushed (FI_ECANCELED), although
 * its data was delivered. libfabric's verbs destroys the QP at close
 * (rdma_destroy_ep) without that transition, and the device finishes its
 * work first. fabtests' fi_rdm_multi_client (ofi_rxm over the MSG
 * endpoints) fails this way now and then: its client closes right after
 * its last receive.
 *
 * Each round, the client posts a receive, connects, reads FI_CONNECTED,
 * busy-polls its receive CQ and closes the endpoint the moment the
 * completion is read. The server accepts, sends one 64-byte message, reads its send completion, waits for
 * FI_SHUTDOWN and closes its endpoint. Asserts (fi_msg(3), fi_cq(3),
 * fi_endpoint(3)): every send completes without error; the client gets
 * every message intact.
 *
 * The race is a matter of timing: under an unfixed provider it fails some
 * rounds, not every one. MSG_CLOSE_ACK_ROUNDS sets the rounds (default 150).
 */
#include "common.h"

#include <stdlib.h>

#define MSG_LEN 64

static int rounds(void)
{
	const char *s = getenv("MSG_CLOSE_ACK_ROUNDS");
	int n = s ? atoi(s) : 150;
	return n > 0 ? n : 150;
}

/* The endpoint of round r: the one setup_active opened for round 0 (taken
 * out of t, so that tctx_close does not close it again), a new one after. */
static struct fid_ep *round_ep(struct tctx *t, struct fi_info *info, int r)
{
	if (r > 0)
		return tctx_open_ep(t, info);
	struct fid_ep *ep = t->ep;
	t->ep = NULL;
	return ep;
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	int n = rounds(), flushed = 0;
	char *buf = alloc_buf(MSG_LEN);
	struct fid_mr *mr = NULL;
	uint64_t t0 = now_ms();
	for (int r = 0; r < n; r++) {
		struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
		if (r == 0) {
			setup_active(&t, info);
			mr = mr_reg(&t, buf, MSG_LEN, FI_SEND);
		}
		struct fid_ep *ep = round_ep(&t, info, r);
		if (r > 0)
			fi_freeinfo(info);
		CHK(fi_accept(ep, NULL, 0));
		char what[32];
		snprintf(what, sizeof(what), "round %d", r);
		eq_expect(&t, FI_CONNECTED, ep, what);

		fill_pattern(buf, MSG_LEN, (uint32_t)r);
		struct fi_context ctx;
		ssize_t s;
		while ((s = fi_send(ep, buf, MSG_LEN, fi_mr_desc(mr), 0, &ctx)) == -FI_EAGAIN)
			(void)fi_cq_read(t.txcq, NULL, 0);
		EXPECT(s == 0, "round %d: fi_send returned %zd (%s)", r, s, fi_strerror((int)-s));
		struct fi_cq_data_entry c;
		struct fi_cq_err_entry e;
		memset(&e, 0, sizeof(e));
		if (cq_read_one_or_err(t.txcq, &c, &e, WAIT_MS, "send") == 1) {
			EXPECT(c.op_context == &ctx, "round %d: send completion context %p", r, c.op_context);
		} else {
			char b[512];
			EXPECT(e.op_context == &ctx, "round %d: error completion context %p", r, e.op_context);
			logmsg("round %d: the send failed although the client received it: %s", r,
			       cq_err_str(t.txcq, &e, b, sizeof(b)));
			flushed++;
		}

		eq_expect(&t, FI_SHUTDOWN, ep, what);
		CHK(fi_close(&ep->fid));
	}
	logmsg("%d rounds in %llu ms: %d sends failed", n, (unsigned long long)(now_ms() - t0), flushed);
	EXPECT(flushed == 0, "%d of %d sends completed in error although their message arrived", flushed, n);
	mr_close(mr);
	free(buf);
	oob_wait(1);
	tctx_close(&t);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	int n = rounds();
	char *buf = alloc_buf(MSG_LEN);
	struct fid_mr *mr = mr_reg(&t, buf, MSG_LEN, FI_RECV);
	for (int r = 0; r < n; r++) {
		struct fid_ep *ep = round_ep(&t, t.info, r);
		memset(buf, 0, MSG_LEN);
		struct fi_context ctx;
		CHK(fi_recv(ep, buf, MSG_LEN, fi_mr_desc(mr), 0, &ctx));
		CHK(fi_connect(ep, t.info->dest_addr, NULL, 0));
		/* The active side's EQ reads complete the handshake. */
		char what[32];
		snprintf(what, sizeof(what), "round %d", r);
		eq_expect(&t, FI_CONNECTED, ep, what);
		/* Busy: the close follows the completion as closely as it can. */
		struct fi_cq_data_entry c;
		uint64_t t0 = now_ms();
		while (!cq_one_or_again(t.rxcq, fi_cq_read(t.rxcq, &c, 1), "fi_cq_read", what)) {
			if (now_ms() - t0 > WAIT_MS)
				fail("round %d: no message within %d ms", r, WAIT_MS);
		}
		CHK(fi_close(&ep->fid));
		EXPECT(c.op_context == &ctx && c.len == MSG_LEN, "round %d: context %p, %zu bytes", r,
		       c.op_context, c.len);
		expect_pattern(buf, MSG_LEN, (uint32_t)r, "message");
	}
	mr_close(mr);
	free(buf);
	oob_signal(1);
	tctx_close(&t);
	child_done();
}

int main(void)
{
	if (test_start("msg_close_ack"))
		server();
	else
		client();
	return 0;
}
