/*
 * msg_sendrecv: two-sided messaging over a connected FI_EP_MSG endpoint.
 *
 * Hints mode FI_CONTEXT|FI_RX_CQ_DATA (remote CQ data is only used with
 * sends, which consume receives anyway; verbs reports cq_data_size 0 to an
 * application that does not accept FI_RX_CQ_DATA).
 * tx CQs use FI_CQ_FORMAT_CONTEXT, rx CQs FI_CQ_FORMAT_DATA.  Every operation
 * that generates a completion gets its own struct fi_context (FI_CONTEXT mode).
 *
 * Phases (server = receiver unless noted; each phase is fenced with the
 * out-of-band channel so receives are always posted before the sends):
 *  0  server -> client fi_send 4 KiB into a receive the client posted before
 *     fi_connect;
 *  1  fi_send of 0, 1, 64, 4 KiB, 1 MiB into fi_recv buffers larger than the
 *     message: rx flags include FI_RECV|FI_MSG and not FI_REMOTE_CQ_DATA,
 *     len == message size, op_context == the receive's context, bytes exact;
 *     tx op_context == the send's context;
 *  2  fi_sendv (2 iovs) into fi_recvv (2 iovs, different split);
 *  3  fi_sendmsg (1 iov, flags 0) and fi_sendmsg (2 iovs, FI_REMOTE_CQ_DATA)
 *     into fi_recvmsg buffers; the second carries the CQ data;
 *  4  fi_inject: the source buffer is reusable on return, the data arrives,
 *     and no tx completion is written (fi_msg(3));
 *  5  fi_senddata: rx completion has FI_REMOTE_CQ_DATA and the data;
 *  6  fi_injectdata: rx has the data, no tx completion;
 *  7  64 sends in flight at once into 64 posted receives: every context
 *     completes exactly once on both sides and every message arrives intact;
 *  8  a 4 KiB message into a 64-byte receive: the receive completes with an
 *     error entry (err != 0, op_context == that receive).  The sender's
 *     completion may be a success or an error (not specified).
 */
#include "common.h"

#include <stdlib.h>

#define SLOT (1024 * 1024 + 4096)
#define NSLOTS 5
#define BIG (1024 * 1024)
#define INFLIGHT 64

static struct fi_context rctx[INFLIGHT], sctx[INFLIGHT];

static uint64_t data_mask;

static void check_rx(const struct fi_cq_data_entry *c, void *ctx, size_t len, bool has_data,
		     uint64_t data, const char *what)
{
	char fb[128];
	EXPECT(c->op_context == ctx, "%s: op_context %p, want %p", what, c->op_context, ctx);
	EXPECT((c->flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
	       "%s: flags %s lack FI_RECV|FI_MSG", what, flags_str(c->flags, fb, sizeof(fb)));
	EXPECT(c->len == len, "%s: len %zu, want %zu", what, c->len, len);
	if (has_data) {
		EXPECT(c->flags & FI_REMOTE_CQ_DATA, "%s: flags %s lack FI_REMOTE_CQ_DATA", what,
		       flags_str(c->flags, fb, sizeof(fb)));
		EXPECT(c->data == (data & data_mask), "%s: data 0x%llx, want 0x%llx", what,
		       (unsigned long long)c->data, (unsigned long long)(data & data_mask));
	} else {
		EXPECT(!(c->flags & FI_REMOTE_CQ_DATA), "%s: unexpected FI_REMOTE_CQ_DATA (flags %s)",
		       what, flags_str(c->flags, fb, sizeof(fb)));
	}
}

static void wait_tx(struct tctx *t, void *ctx, const char *what)
{
	struct fi_cq_entry c;
	cq_read_one(t->txcq, &c, WAIT_MS, what);
	EXPECT(c.op_context == ctx, "%s: tx op_context %p, want %p", what, c.op_context, ctx);
}

static void set_mask(struct tctx *t)
{
	size_t n = t->info->domain_attr->cq_data_size;
	logmsg("cq_data_size %zu, inject_size %zu, tx size %zu, rx size %zu, iov limits %zu/%zu",
	       n, t->info->tx_attr->inject_size, t->info->tx_attr->size, t->info->rx_attr->size,
	       t->info->tx_attr->iov_limit, t->info->rx_attr->iov_limit);
	EXPECT(n >= 4, "cq_data_size %zu < 4", n);
	data_mask = n >= 8 ? ~0ULL : ((1ULL << (8 * n)) - 1);
	EXPECT(t->info->tx_attr->iov_limit >= 2, "tx iov_limit %zu", t->info->tx_attr->iov_limit);
	EXPECT(t->info->rx_attr->iov_limit >= 2, "rx iov_limit %zu", t->info->rx_attr->iov_limit);
}

static size_t inflight_count(struct tctx *t)
{
	size_t n = INFLIGHT;
	if (t->info->tx_attr->size < n)
		n = t->info->tx_attr->size;
	if (t->info->rx_attr->size < n)
		n = t->info->rx_attr->size;
	return n;
}

static const size_t sizes[NSLOTS] = { 0, 1, 64, 4096, BIG };

/* ------------------------------------------------------------------------ */

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT | FI_RX_CQ_DATA);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	set_mask(&t);

	char *rbuf = alloc_buf((size_t)SLOT * NSLOTS);
	char *sbuf = alloc_buf(8192);
	struct fid_mr *rmr = mr_reg(&t, rbuf, (size_t)SLOT * NSLOTS, FI_RECV);
	struct fid_mr *smr = mr_reg(&t, sbuf, 8192, FI_SEND);
	void *rd = fi_mr_desc(rmr), *sd = fi_mr_desc(smr);
	struct fi_cq_data_entry c;

	server_accept(&t, NULL, 0);

	/* phase 0: server -> client */
	fill_pattern(sbuf, 4096, 7);
	CHK(fi_send(t.ep, sbuf, 4096, sd, 0, &sctx[0]));
	wait_tx(&t, &sctx[0], "phase 0 send");
	oob_wait(100);

	/* phase 1: sizes */
	for (int k = 0; k < NSLOTS; k++)
		CHK(fi_recv(t.ep, rbuf + (size_t)k * SLOT, SLOT, rd, 0, &rctx[k]));
	oob_signal(1);
	for (int k = 0; k < NSLOTS; k++) {
		char what[64];
		snprintf(what, sizeof(what), "phase 1 recv of %zu bytes", sizes[k]);
		cq_read_one(t.rxcq, &c, WAIT_MS, what);
		check_rx(&c, &rctx[k], sizes[k], false, 0, what);
		expect_pattern(rbuf + (size_t)k * SLOT, sizes[k], 100u + (uint32_t)k, what);
	}
	oob_signal(101);

	/* phase 2: recvv with 2 iovs (1000 + 5000), message is 5000 bytes */
	{
		struct iovec iov[2] = { { rbuf, 1000 }, { rbuf + SLOT, 5000 } };
		void *desc[2] = { rd, rd };
		memset(rbuf, 0, 8192);
		memset(rbuf + SLOT, 0, 8192);
		CHK(fi_recvv(t.ep, iov, desc, 2, 0, &rctx[0]));
		oob_signal(2);
		cq_read_one(t.rxcq, &c, WAIT_MS, "phase 2 recvv");
		check_rx(&c, &rctx[0], 5000, false, 0, "phase 2 recvv");
		char *msg = alloc_buf(5000);
		memcpy(msg, rbuf, 1000);
		memcpy(msg + 1000, rbuf + SLOT, 4000);
		expect_pattern(msg, 5000, 200, "phase 2 recvv data");
		free(msg);
		oob_signal(102);
	}

	/* phase 3: recvmsg x2 */
	{
		struct iovec iov0[2] = { { rbuf, 2048 }, { rbuf + SLOT, 2048 } };
		struct iovec iov1[1] = { { rbuf + 2 * SLOT, 4096 } };
		void *desc[2] = { rd, rd };
		struct fi_msg m0 = { .msg_iov = iov0, .desc = desc, .iov_count = 2,
				     .context = &rctx[0] };
		struct fi_msg m1 = { .msg_iov = iov1, .desc = desc, .iov_count = 1,
				     .context = &rctx[1] };
		CHK(fi_recvmsg(t.ep, &m0, 0));
		CHK(fi_recvmsg(t.ep, &m1, 0));
		oob_signal(3);
		cq_read_one(t.rxcq, &c, WAIT_MS, "phase 3 recvmsg #1");
		check_rx(&c, &rctx[0], 3000, false, 0, "phase 3 recvmsg #1");
		char *msg = alloc_buf(3000);
		memcpy(msg, rbuf, 2048);
		memcpy(msg + 2048, rbuf + SLOT, 3000 - 2048);
		expect_pattern(msg, 3000, 300, "phase 3 recvmsg #1 data");
		free(msg);
		cq_read_one(t.rxcq, &c, WAIT_MS, "phase 3 recvmsg #2");
		check_rx(&c, &rctx[1], 300, true, 0xCAFEu, "phase 3 recvmsg #2");
		expect_pattern(rbuf + 2 * SLOT, 300, 301, "phase 3 recvmsg #2 data");
		oob_signal(103);
	}

	/* phases 4-6: inject, senddata, injectdata */
	size_t inj = t.info->tx_attr->inject_size < 48 ? t.info->tx_attr->inject_size : 48;
	for (int ph = 4; ph <= 6; ph++) {
		bool injecting = ph != 5;
		if (injecting && inj == 0) {
			logmsg("phase %d skipped: inject_size is 0", ph);
			oob_signal((uint8_t)ph);
			oob_signal((uint8_t)(100 + ph));
			continue;
		}
		size_t len = injecting ? inj : 256;
		char what[64];
		snprintf(what, sizeof(what), "phase %d recv", ph);
		CHK(fi_recv(t.ep, rbuf, SLOT, rd, 0, &rctx[ph]));
		oob_signal((uint8_t)ph);
		cq_read_one(t.rxcq, &c, WAIT_MS, what);
		check_rx(&c, &rctx[ph], len, ph != 4, ph == 5 ? 0xdeadbeefu : 0x1234567u, what);
		expect_pattern(rbuf, len, 400u + (uint32_t)ph, what);
		oob_signal((uint8_t)(100 + ph));
	}

	/* phase 7: many in flight */
	{
		size_t n = inflight_count(&t);
		bool seen[INFLIGHT] = { false };
		bool seq_seen[INFLIGHT] = { false };
		for (size_t i = 0; i < n; i++)
			CHK(fi_recv(t.ep, rbuf + i * 4096, 4096, rd, 0, &rctx[i]));
		oob_signal(7);
		for (size_t i = 0; i < n; i++) {
			cq_read_one(t.rxcq, &c, WAIT_MS, "phase 7 recv");
			long idx = (struct fi_context *)c.op_context - rctx;
			EXPECT(idx >= 0 && (size_t)idx < n, "phase 7: op_context %p unknown",
			       c.op_context);
			EXPECT(!seen[idx], "phase 7: receive %ld completed twice", idx);
			seen[idx] = true;
			check_rx(&c, &rctx[idx], 4096, false, 0, "phase 7 recv");
			uint32_t seq;
			memcpy(&seq, rbuf + idx * 4096, 4);
			EXPECT(seq < n, "phase 7: bad sequence number %u", seq);
			EXPECT(!seq_seen[seq], "phase 7: message %u received twice", seq);
			seq_seen[seq] = true;
			expect_pattern(rbuf + idx * 4096 + 4, 4092, 1000 + seq, "phase 7 data");
		}
		logmsg("phase 7: %zu messages in flight received intact", n);
		oob_signal(107);
	}

	/* phase 8: message larger than the posted receive */
	{
		struct fi_cq_err_entry err;
		char b[512];
		memset(&err, 0, sizeof(err));
		CHK(fi_recv(t.ep, rbuf, 64, rd, 0, &rctx[8]));
		oob_signal(8);
		int ok = cq_read_one_or_err(t.rxcq, &c, &err, WAIT_MS, "phase 8 recv");
		EXPECT(!ok, "phase 8: 4096-byte message into a 64-byte receive completed "
			    "successfully (len %zu)", c.len);
		logmsg("phase 8: truncated receive error entry: %s",
		       cq_err_str(t.rxcq, &err, b, sizeof(b)));
		EXPECT(err.err > 0, "phase 8: err %d", err.err);
		EXPECT(err.op_context == &rctx[8], "phase 8: error op_context %p, want %p",
		       err.op_context, (void *)&rctx[8]);
		if (err.err == FI_ETRUNC)
			logmsg("phase 8: FI_ETRUNC, olen %zu (message 4096, buffer 64)", err.olen);
		oob_signal(108);
	}

	oob_wait(200); /* client finished */
	mr_close(rmr);
	mr_close(smr);
	tctx_close(&t);
	free(rbuf);
	free(sbuf);
	test_finish();
}

/* ------------------------------------------------------------------------ */

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT | FI_RX_CQ_DATA);
	client_setup(&t);
	set_mask(&t);

	char *sbuf = alloc_buf(2 * BIG);
	char *rbuf = alloc_buf(8192);
	struct fid_mr *smr = mr_reg(&t, sbuf, 2 * BIG, FI_SEND);
	struct fid_mr *rmr = mr_reg(&t, rbuf, 8192, FI_RECV);
	void *sd = fi_mr_desc(smr), *rd = fi_mr_desc(rmr);
	struct fi_cq_data_entry c;

	/* receive posted before the connection exists */
	CHK(fi_recv(t.ep, rbuf, 8192, rd, 0, &rctx[0]));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	/* phase 0 */
	cq_read_one(t.rxcq, &c, WAIT_MS, "phase 0 recv");
	check_rx(&c, &rctx[0], 4096, false, 0, "phase 0 recv");
	expect_pattern(rbuf, 4096, 7, "phase 0 data");
	oob_signal(100);

	/* phase 1 */
	oob_wait(1);
	for (int k = 0; k < NSLOTS; k++) {
		char what[64];
		snprintf(what, sizeof(what), "phase 1 send of %zu bytes", sizes[k]);
		fill_pattern(sbuf, sizes[k], 100u + (uint32_t)k);
		CHK(fi_send(t.ep, sbuf, sizes[k], sd, 0, &sctx[k]));
		wait_tx(&t, &sctx[k], what);
	}
	oob_wait(101);

	/* phase 2: sendv 3000 + 2000 */
	{
		char *msg = alloc_buf(5000);
		fill_pattern(msg, 5000, 200);
		memcpy(sbuf, msg, 3000);
		memcpy(sbuf + 65536, msg + 3000, 2000);
		free(msg);
		struct iovec iov[2] = { { sbuf, 3000 }, { sbuf + 65536, 2000 } };
		void *desc[2] = { sd, sd };
		oob_wait(2);
		CHK(fi_sendv(t.ep, iov, desc, 2, 0, &sctx[0]));
		wait_tx(&t, &sctx[0], "phase 2 sendv");
		oob_wait(102);
	}

	/* phase 3: sendmsg x2 */
	{
		fill_pattern(sbuf, 3000, 300);
		char *msg = alloc_buf(300);
		fill_pattern(msg, 300, 301);
		memcpy(sbuf + 65536, msg, 100);
		memcpy(sbuf + 131072, msg + 100, 200);
		free(msg);
		struct iovec iov0[1] = { { sbuf, 3000 } };
		struct iovec iov1[2] = { { sbuf + 65536, 100 }, { sbuf + 131072, 200 } };
		void *desc[2] = { sd, sd };
		struct fi_msg m0 = { .msg_iov = iov0, .desc = desc, .iov_count = 1,
				     .context = &sctx[0] };
		struct fi_msg m1 = { .msg_iov = iov1, .desc = desc, .iov_count = 2,
				     .context = &sctx[1], .data = 0xCAFEu };
		oob_wait(3);
		CHK(fi_sendmsg(t.ep, &m0, 0));
		wait_tx(&t, &sctx[0], "phase 3 sendmsg #1");
		CHK(fi_sendmsg(t.ep, &m1, FI_REMOTE_CQ_DATA));
		wait_tx(&t, &sctx[1], "phase 3 sendmsg #2");
		oob_wait(103);
	}

	/* phases 4-6 */
	size_t inj = t.info->tx_attr->inject_size < 48 ? t.info->tx_attr->inject_size : 48;
	for (int ph = 4; ph <= 6; ph++) {
		bool injecting = ph != 5;
		oob_wait((uint8_t)ph);
		if (injecting && inj == 0) {
			oob_wait((uint8_t)(100 + ph));
			continue;
		}
		char *b = sbuf + 4096 * ph;
		size_t len = injecting ? inj : 256;
		fill_pattern(b, len, 400u + (uint32_t)ph);
		if (ph == 4)
			CHK(fi_inject(t.ep, b, len, 0));
		else if (ph == 5)
			CHK(fi_senddata(t.ep, b, len, sd, 0xdeadbeefu, 0, &sctx[5]));
		else
			CHK(fi_injectdata(t.ep, b, len, 0x1234567u, 0));
		if (injecting)
			memset(b, 0xA5, len); /* buffer is reusable on return */
		else
			wait_tx(&t, &sctx[5], "phase 5 senddata");
		oob_wait((uint8_t)(100 + ph));
		if (injecting)
			cq_expect_empty(t.txcq, 300, ph == 4 ? "after fi_inject" : "after fi_injectdata");
	}

	/* phase 7 */
	{
		size_t n = inflight_count(&t);
		bool seen[INFLIGHT] = { false };
		for (uint32_t i = 0; i < n; i++) {
			char *b = sbuf + (size_t)i * 4096;
			memcpy(b, &i, 4);
			fill_pattern(b + 4, 4092, 1000 + i);
		}
		oob_wait(7);
		for (size_t i = 0; i < n; i++)
			CHK(fi_send(t.ep, sbuf + i * 4096, 4096, sd, 0, &sctx[i]));
		for (size_t i = 0; i < n; i++) {
			struct fi_cq_entry tc;
			cq_read_one(t.txcq, &tc, WAIT_MS, "phase 7 send");
			long idx = (struct fi_context *)tc.op_context - sctx;
			EXPECT(idx >= 0 && (size_t)idx < n, "phase 7: tx op_context %p unknown",
			       tc.op_context);
			EXPECT(!seen[idx], "phase 7: send %ld completed twice", idx);
			seen[idx] = true;
		}
		oob_wait(107);
		cq_expect_empty(t.txcq, 100, "after phase 7");
	}

	/* phase 8: too large for the posted receive */
	{
		struct fi_cq_entry tc;
		struct fi_cq_err_entry err;
		char b[512];
		memset(&err, 0, sizeof(err));
		fill_pattern(sbuf, 4096, 800);
		oob_wait(8);
		CHK(fi_send(t.ep, sbuf, 4096, sd, 0, &sctx[8]));
		int ok = cq_read_one_or_err(t.txcq, &tc, &err, WAIT_MS, "phase 8 send");
		if (ok) {
			logmsg("phase 8: oversized send completed successfully at the sender");
			EXPECT(tc.op_context == &sctx[8], "phase 8: tx op_context %p", tc.op_context);
		} else {
			logmsg("phase 8: oversized send completed with error: %s",
			       cq_err_str(t.txcq, &err, b, sizeof(b)));
			EXPECT(err.op_context == &sctx[8], "phase 8: tx error op_context %p",
			       err.op_context);
		}
		oob_wait(108);
	}

	oob_signal(200);
	mr_close(smr);
	mr_close(rmr);
	tctx_close(&t);
	free(sbuf);
	free(rbuf);
	child_done();
}

int main(void)
{
	/* TEST_NAME: the suite runs it again as msg_sendrecv_bunch8
	 * (FI_VERBS_CQREAD_BUNCH_SIZE=8: completions read ahead wait in
	 * software). */
	if (test_start(test_name_env("msg_sendrecv")))
		server();
	else
		client();
	return 0;
}
