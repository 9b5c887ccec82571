/*
 * msg_rma: one-sided RMA over a connected FI_EP_MSG endpoint.
 *
 * Hints: caps FI_MSG|FI_RMA, mode FI_CONTEXT|FI_RX_CQ_DATA (the app posts a
 * receive for every transfer carrying remote CQ data), tx msg_order
 * FI_ORDER_SAW so that the final "done" message makes all earlier writes
 * visible at the target (fi_cq(3), target completion semantics).
 *
 * The server registers a 1 MiB buffer with FI_REMOTE_READ|FI_REMOTE_WRITE and
 * sends {addr, key, len} to the client in a message (addr = virtual address
 * with FI_MR_VIRT_ADDR, else 0).  The client then issues:
 *   fi_write, fi_writev (2 iovs), fi_writemsg (2 iovs, FI_COMPLETION),
 *   fi_inject_write, fi_writedata, fi_inject_writedata,
 *   fi_read, fi_readv (2 iovs), fi_readmsg (2 iovs)
 * Asserts:
 *  - tx completions (FI_CQ_FORMAT_DATA): op_context of the op, flags include
 *    FI_RMA|FI_WRITE for writes and FI_RMA|FI_READ for reads;
 *  - inject variants generate no tx completion;
 *  - fi_writedata / fi_inject_writedata each produce a server rx completion
 *    with FI_REMOTE_CQ_DATA and the data; when the returned info requires
 *    FI_RX_CQ_DATA (verbs does) each consumes one posted receive and reports
 *    its op_context, otherwise op_context is NULL (fi_cq(3));
 *  - the server sees exactly the written bytes, and untouched gaps stay zero;
 *  - the client reads exactly the bytes the server put in the read area.
 */
#include "common.h"

#include <stdlib.h>

#define RLEN (1024 * 1024)
#define READ_OFF (512 * 1024)
#define LLEN (256 * 1024)

/* write layout in the server buffer: {offset, length, seed} */
#define W1_OFF 0
#define W1_LEN 4096
#define W2_OFF 8192
#define W2_LEN 4000 /* 1000 + 3000 */
#define W3_OFF 16384
#define W3_LEN 5000 /* 2000 + 3000 */
#define W4_OFF 24576
#define W5_OFF 32768
#define W5_LEN 2048
#define W6_OFF 40960
#define WEND 49152

#define DATA5 0xabcdefu
#define DATA6 0x55aau

static struct fi_context rctx[8], sctx[16];

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.tx_format = FI_CQ_FORMAT_DATA;
	t.rx_format = FI_CQ_FORMAT_DATA;
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	t.hints->rx_attr->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	t.hints->tx_attr->msg_order = FI_ORDER_SAW;
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	logmsg("mr_mode 0x%x, mr_key_size %zu, inject_size %zu, msg_order 0x%llx",
	       t.info->domain_attr->mr_mode, t.info->domain_attr->mr_key_size,
	       t.info->tx_attr->inject_size, (unsigned long long)t.info->tx_attr->msg_order);
	EXPECT(t.info->domain_attr->cq_data_size >= 4, "cq_data_size %zu",
	       t.info->domain_attr->cq_data_size);

	char *rbuf = alloc_buf(RLEN);
	char *mbuf = alloc_buf(8192);
	fill_pattern(rbuf + READ_OFF, RLEN - READ_OFF, 77);
	struct fid_mr *rmr = mr_reg(&t, rbuf, RLEN, FI_REMOTE_READ | FI_REMOTE_WRITE);
	struct fid_mr *mmr = mr_reg(&t, mbuf, 8192, FI_SEND | FI_RECV);
	void *md = fi_mr_desc(mmr);

	/* receives for: writedata, inject_writedata, done message */
	for (int i = 0; i < 3; i++)
		CHK(fi_recv(t.ep, mbuf + 4096 + i * 1024, 1024, md, 0, &rctx[i]));

	server_accept(&t, NULL, 0);

	struct rma_info ri = {
		.addr = (t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)rbuf : 0,
		.key = fi_mr_key(rmr),
		.len = RLEN,
	};
	EXPECT(ri.key != FI_KEY_NOTAVAIL, "fi_mr_key returned FI_KEY_NOTAVAIL");
	memcpy(mbuf, &ri, sizeof(ri));
	CHK(fi_send(t.ep, mbuf, sizeof(ri), md, 0, &sctx[0]));
	struct fi_cq_data_entry c;
	cq_read_one(t.txcq, &c, WAIT_MS, "send rma_info");
	EXPECT(c.op_context == &sctx[0], "send op_context %p", c.op_context);

	char fb[128];
	/* FI_RX_CQ_DATA required by the provider (returned mode bits): each
	 * transfer with remote CQ data consumes a posted receive, whose context
	 * is reported.  Otherwise op_context is NULL and no receive is consumed
	 * (fi_cq(3) op_context). */
	bool consumes = ((t.info->mode | t.info->rx_attr->mode) & FI_RX_CQ_DATA) != 0;
	logmsg("provider %s FI_RX_CQ_DATA", consumes ? "requires" : "does not require");
	int next = 0;
	static const uint64_t wdata[2] = { DATA5, DATA6 };
	static const char *const wname[2] = { "fi_writedata", "fi_inject_writedata" };
	for (int k = 0; k < 2; k++) {
		char what[80];
		snprintf(what, sizeof(what), "%s target completion", wname[k]);
		cq_read_one(t.rxcq, &c, WAIT_MS, what);
		logmsg("%s: flags %s len %zu data 0x%llx op_context %p", what,
		       flags_str(c.flags, fb, sizeof(fb)), c.len, (unsigned long long)c.data,
		       c.op_context);
		if (consumes) {
			EXPECT(c.op_context == &rctx[next], "%s: op_context %p, want posted receive %p",
			       what, c.op_context, (void *)&rctx[next]);
			next++;
		} else {
			EXPECT(c.op_context == NULL, "%s: op_context %p, want NULL", what,
			       c.op_context);
		}
		EXPECT(c.flags & FI_REMOTE_CQ_DATA, "%s: flags %s lack FI_REMOTE_CQ_DATA", what,
		       flags_str(c.flags, fb, sizeof(fb)));
		EXPECT(c.data == wdata[k], "%s: data 0x%llx, want 0x%llx", what,
		       (unsigned long long)c.data, (unsigned long long)wdata[k]);
		/* fi_cq(3) of 2.x: len is what the write placed (1.x leaves it unspecified). */
		if (k == 0) {
			EXPECT(c.len == W5_LEN, "%s: len %zu, want %d", what, c.len, (int)W5_LEN);
			expect_pattern(rbuf + W5_OFF, W5_LEN, 5, "fi_writedata data at target");
		}
	}

	/* done message: all writes (ordered before it, FI_ORDER_SAW) are visible */
	cq_read_one(t.rxcq, &c, WAIT_MS, "done message");
	EXPECT(c.op_context == &rctx[next], "done: op_context %p, want %p", c.op_context,
	       (void *)&rctx[next]);
	EXPECT(c.len == 4, "done: len %zu", c.len);
	EXPECT((c.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG), "done: flags %s",
	       flags_str(c.flags, fb, sizeof(fb)));
	EXPECT(memcmp(mbuf + 4096 + next * 1024, "done", 4) == 0, "done: message content");

	size_t inj = t.info->tx_attr->inject_size < 32 ? t.info->tx_attr->inject_size : 32;
	expect_pattern(rbuf + W1_OFF, W1_LEN, 1, "fi_write data at target");
	expect_pattern(rbuf + W2_OFF, W2_LEN, 2, "fi_writev data at target");
	expect_pattern(rbuf + W3_OFF, W3_LEN, 3, "fi_writemsg data at target");
	expect_pattern(rbuf + W4_OFF, inj, 4, "fi_inject_write data at target");
	expect_pattern(rbuf + W5_OFF, W5_LEN, 5, "fi_writedata data at target");
	expect_pattern(rbuf + W6_OFF, inj < 16 ? inj : 16, 6, "fi_inject_writedata data at target");
	/* gaps untouched */
	static const size_t gap[][2] = { { W1_OFF + W1_LEN, W2_OFF }, { W2_OFF + W2_LEN, W3_OFF },
					 { W3_OFF + W3_LEN, W4_OFF }, { W5_OFF + W5_LEN, W6_OFF },
					 { W6_OFF + 64, READ_OFF } };
	for (size_t g = 0; g < sizeof(gap) / sizeof(gap[0]); g++)
		for (size_t i = gap[g][0]; i < gap[g][1]; i++)
			EXPECT(rbuf[i] == 0, "byte at offset %zu outside every write is 0x%02x", i,
			       (uint8_t)rbuf[i]);
	/* read area unchanged */
	expect_pattern(rbuf + READ_OFF, RLEN - READ_OFF, 77, "read area after the test");
	logmsg("all written regions verified");
	cq_expect_empty(t.txcq, 100, "server tx CQ");
	oob_signal(1);

	oob_wait(2);
	mr_close(rmr);
	mr_close(mmr);
	tctx_close(&t);
	free(rbuf);
	free(mbuf);
	test_finish();
}

static void tx_done(struct tctx *t, void *ctx, uint64_t want, const char *what)
{
	struct fi_cq_data_entry c;
	char fb[128];
	cq_read_one(t->txcq, &c, WAIT_MS, what);
	EXPECT(c.op_context == ctx, "%s: op_context %p, want %p", what, c.op_context, ctx);
	EXPECT((c.flags & want) == want, "%s: flags %s, want %s", what,
	       flags_str(c.flags, fb, sizeof(fb)), want & FI_READ ? "RMA|READ" : "RMA|WRITE");
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.tx_format = FI_CQ_FORMAT_DATA;
	t.rx_format = FI_CQ_FORMAT_DATA;
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	t.hints->rx_attr->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	t.hints->tx_attr->msg_order = FI_ORDER_SAW;
	client_setup(&t);

	char *lbuf = alloc_buf(LLEN);
	struct fid_mr *lmr = mr_reg(&t, lbuf, LLEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE);
	void *ld = fi_mr_desc(lmr);
	void *desc2[2] = { ld, ld };

	CHK(fi_recv(t.ep, lbuf, 4096, ld, 0, &rctx[0]));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "rma_info message");
	EXPECT(c.op_context == &rctx[0] && c.len == sizeof(struct rma_info),
	       "rma_info: op_context %p len %zu", c.op_context, c.len);
	struct rma_info ri;
	memcpy(&ri, lbuf, sizeof(ri));
	logmsg("remote buffer addr 0x%llx key 0x%llx len %llu", (unsigned long long)ri.addr,
	       (unsigned long long)ri.key, (unsigned long long)ri.len);
	uint64_t ra = ri.addr, key = ri.key;
	size_t inj = t.info->tx_attr->inject_size < 32 ? t.info->tx_attr->inject_size : 32;
	EXPECT(inj > 0, "inject_size is 0");

	/* source areas in lbuf */
	char *s1 = lbuf + 8192, *s2 = lbuf + 16384, *s3 = lbuf + 32768, *s4 = lbuf + 49152;
	char *s5 = lbuf + 53248, *s6 = lbuf + 57344;

	/* W1: fi_write */
	fill_pattern(s1, W1_LEN, 1);
	CHK(fi_write(t.ep, s1, W1_LEN, ld, 0, ra + W1_OFF, key, &sctx[1]));
	tx_done(&t, &sctx[1], FI_RMA | FI_WRITE, "fi_write");

	/* W2: fi_writev 1000 + 3000 from discontiguous sources */
	{
		char tmp[W2_LEN];
		fill_pattern(tmp, W2_LEN, 2);
		memcpy(s2, tmp, 1000);
		memcpy(s2 + 4096, tmp + 1000, 3000);
		struct iovec iov[2] = { { s2, 1000 }, { s2 + 4096, 3000 } };
		CHK(fi_writev(t.ep, iov, desc2, 2, 0, ra + W2_OFF, key, &sctx[2]));
		tx_done(&t, &sctx[2], FI_RMA | FI_WRITE, "fi_writev");
	}

	/* W3: fi_writemsg 2000 + 3000 -> one rma_iov */
	{
		char tmp[W3_LEN];
		fill_pattern(tmp, W3_LEN, 3);
		memcpy(s3, tmp, 2000);
		memcpy(s3 + 8192, tmp + 2000, 3000);
		struct iovec iov[2] = { { s3, 2000 }, { s3 + 8192, 3000 } };
		struct fi_rma_iov rio = { .addr = ra + W3_OFF, .len = W3_LEN, .key = key };
		struct fi_msg_rma m = { .msg_iov = iov, .desc = desc2, .iov_count = 2,
					.rma_iov = &rio, .rma_iov_count = 1,
					.context = &sctx[3] };
		CHK(fi_writemsg(t.ep, &m, FI_COMPLETION));
		tx_done(&t, &sctx[3], FI_RMA | FI_WRITE, "fi_writemsg");
	}

	/* W4: fi_inject_write, no completion */
	fill_pattern(s4, inj, 4);
	CHK(fi_inject_write(t.ep, s4, inj, 0, ra + W4_OFF, key));
	memset(s4, 0x5A, inj); /* reusable on return */

	/* W5: fi_writedata */
	fill_pattern(s5, W5_LEN, 5);
	CHK(fi_writedata(t.ep, s5, W5_LEN, ld, DATA5, 0, ra + W5_OFF, key, &sctx[5]));
	tx_done(&t, &sctx[5], FI_RMA | FI_WRITE, "fi_writedata");

	/* W6: fi_inject_writedata, no completion */
	size_t inj6 = inj < 16 ? inj : 16;
	fill_pattern(s6, inj6, 6);
	CHK(fi_inject_writedata(t.ep, s6, inj6, DATA6, 0, ra + W6_OFF, key));
	memset(s6, 0x5A, inj6);

	/* done message (send after write ordering) */
	memcpy(lbuf + 61440, "done", 4);
	CHK(fi_send(t.ep, lbuf + 61440, 4, ld, 0, &sctx[7]));
	{
		struct fi_cq_data_entry sc;
		char fb[128];
		cq_read_one(t.txcq, &sc, WAIT_MS, "done send");
		EXPECT(sc.op_context == &sctx[7],
		       "first tx completion after the inject writes is %p, want the done send %p",
		       sc.op_context, (void *)&sctx[7]);
		EXPECT((sc.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG), "send flags %s",
		       flags_str(sc.flags, fb, sizeof(fb)));
	}

	/* reads from the server's read area (pattern 77 from READ_OFF) */
	char *d1 = lbuf + 65536, *d2 = lbuf + 131072, *d3 = lbuf + 196608;
	memset(d1, 0, 65536 * 3);
	/* R1: fi_read 4096 at READ_OFF */
	CHK(fi_read(t.ep, d1, 4096, ld, 0, ra + READ_OFF, key, &sctx[8]));
	tx_done(&t, &sctx[8], FI_RMA | FI_READ, "fi_read");
	{
		char *exp = alloc_buf(RLEN - READ_OFF);
		fill_pattern(exp, RLEN - READ_OFF, 77);
		EXPECT(memcmp(d1, exp, 4096) == 0, "fi_read data mismatch");

		/* R2: fi_readv 1500 + 2596 from READ_OFF + 8192 */
		struct iovec iov[2] = { { d2, 1500 }, { d2 + 8192, 2596 } };
		CHK(fi_readv(t.ep, iov, desc2, 2, 0, ra + READ_OFF + 8192, key, &sctx[9]));
		tx_done(&t, &sctx[9], FI_RMA | FI_READ, "fi_readv");
		EXPECT(memcmp(d2, exp + 8192, 1500) == 0, "fi_readv iov[0] data mismatch");
		EXPECT(memcmp(d2 + 8192, exp + 8192 + 1500, 2596) == 0,
		       "fi_readv iov[1] data mismatch");

		/* R3: fi_readmsg 2 iovs (3000 + 5000) from READ_OFF + 100000 */
		struct iovec iov3[2] = { { d3, 3000 }, { d3 + 16384, 5000 } };
		struct fi_rma_iov rio = { .addr = ra + READ_OFF + 100000, .len = 8000, .key = key };
		struct fi_msg_rma m = { .msg_iov = iov3, .desc = desc2, .iov_count = 2,
					.rma_iov = &rio, .rma_iov_count = 1,
					.context = &sctx[10] };
		CHK(fi_readmsg(t.ep, &m, FI_COMPLETION));
		tx_done(&t, &sctx[10], FI_RMA | FI_READ, "fi_readmsg");
		EXPECT(memcmp(d3, exp + 100000, 3000) == 0, "fi_readmsg iov[0] data mismatch");
		EXPECT(memcmp(d3 + 16384, exp + 103000, 5000) == 0,
		       "fi_readmsg iov[1] data mismatch");
		/* bytes around the read targets untouched */
		EXPECT(d2[1500] == 0 && d3[3000] == 0 && d3[16384 + 5000] == 0,
		       "read wrote past the iov ends");
		free(exp);
	}

	/* a large read: 256 KiB minus the first 64 KiB of lbuf */
	memset(lbuf + 65536, 0, LLEN - 65536);
	CHK(fi_read(t.ep, lbuf + 65536, LLEN - 65536, ld, 0, ra + READ_OFF + 4096, key, &sctx[11]));
	tx_done(&t, &sctx[11], FI_RMA | FI_READ, "large fi_read");
	{
		char *exp = alloc_buf(RLEN - READ_OFF);
		fill_pattern(exp, RLEN - READ_OFF, 77);
		EXPECT(memcmp(lbuf + 65536, exp + 4096, LLEN - 65536) == 0,
		       "large fi_read data mismatch");
		free(exp);
	}

	cq_expect_empty(t.txcq, 200, "client tx CQ (inject ops must not complete)");
	oob_wait(1); /* server verified */
	oob_signal(2);
	mr_close(lmr);
	tctx_close(&t);
	free(lbuf);
	child_done();
}

int main(void)
{
	if (test_start("msg_rma"))
		server();
	else
		client();
	return 0;
}
