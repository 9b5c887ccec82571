/*
 * msg_bigrma: RMA longer than the device's largest message on a connected
 * FI_EP_MSG endpoint (issue 25; rxe's max_msg_sz is 8 MiB). Needs ~200 MiB
 * per process: run the lab with --mem 4G.
 *
 *  - max_msg_size is the device's limit (a send is one verbs message): a
 *    send one byte longer gets -FI_EMSGSIZE; RMA goes beyond it, up to
 *    tx_attr->size requests of max_msg_size, and one byte more is
 *    -FI_EMSGSIZE;
 *  - RMA write and read of 8 MiB + 4 bytes, 16 MiB (3 local iovs) and
 *    64 MiB, each with exactly one completion, byte-checked at both ends,
 *    the bytes past the end untouched;
 *  - fi_writedata of 16 MiB + 4: the remote CQ data comes with the last
 *    piece, after every byte landed (checked when it is read);
 *  - a split write whose remote key covers only its first 12 of 24 MiB: one
 *    error completion (the failed piece's, reported once for the whole
 *    operation), nothing more.
 */
#include "common.h"
#include "bigpat.h"

#include <stdlib.h>

#define MIB (1u << 20)
#define BIG (64u * MIB)
#define BUFSZ (BIG + 4096)

static struct fi_context rctx[4], sctx[16];
static const size_t sizes[3] = { 8 * MIB + 4, 16 * MIB, 64 * MIB };

static void expect_zero(const uint8_t *b, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		EXPECT(b[i] == 0, "%s: byte %zu is %#x, want 0 (past the transfer)", what, i, b[i]);
}

static void hints_for(struct tctx *t)
{
	tctx_init(t);
	t->tx_format = FI_CQ_FORMAT_DATA;
	t->rx_format = FI_CQ_FORMAT_DATA;
	t->hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	t->hints->rx_attr->mode = FI_CONTEXT | FI_RX_CQ_DATA;
}

static void server(void)
{
	struct tctx t;
	hints_for(&t);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	uint8_t *buf = alloc_buf(BUFSZ);
	struct fid_mr *mr = mr_reg(&t, buf, BUFSZ, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV);
	struct fid_mr *part = mr_reg(&t, buf, 12 * MIB, FI_REMOTE_WRITE);
	void *desc = fi_mr_desc(mr);
	CHK(fi_recv(t.ep, buf + BIG, 64, desc, 0, &rctx[0])); /* consumed by the writedata */
	server_accept(&t, NULL, 0);
	bool virt = t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	struct rma_info ri = { virt ? (uint64_t)(uintptr_t)buf : 0, fi_mr_key(mr), BUFSZ };
	struct rma_info rp = { ri.addr, fi_mr_key(part), 12 * MIB };
	oob_send(&ri, sizeof(ri));
	oob_send(&rp, sizeof(rp));
	for (int k = 0; k < 3; k++) {
		size_t s = sizes[k];
		memset(buf, 0, BUFSZ);
		oob_signal(10 + k);
		big_rearm();
		oob_wait(20 + k);
		big_expect(buf, s, 1 + k, "RMA write at the target");
		expect_zero(buf + s, 4096, "RMA write");
		big_fill(buf, s, 50 + k);
		oob_signal(30 + k);
		big_rearm();
		oob_wait(40 + k);
		logmsg("server: %zu-byte write checked, read served", s);
	}
	memset(buf, 0, BIG);
	oob_signal(50);
	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "writedata at the target");
	EXPECT(c.op_context == &rctx[0], "writedata: op_context %p", c.op_context);
	EXPECT((c.flags & FI_REMOTE_CQ_DATA) && c.data == 0xbeef, "writedata: flags %#llx data %#llx",
	       (unsigned long long)c.flags, (unsigned long long)c.data);
	big_expect(buf, 16 * MIB + 4, 60, "writedata payload when its CQ data arrived");
	expect_zero(buf + 16 * MIB + 4, 4096, "writedata");
	logmsg("server: writedata checked");
	oob_signal(60);
	big_rearm();
	oob_wait(70);
	mr_close(part);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	test_finish();
}

static void tx_one(struct tctx *t, void *ctx, uint64_t want, const char *what)
{
	struct fi_cq_data_entry c;
	cq_read_one(t->txcq, &c, WAIT_MS, what);
	EXPECT(c.op_context == ctx, "%s: op_context %p, want %p", what, c.op_context, ctx);
	EXPECT((c.flags & want) == want, "%s: flags %#llx", what, (unsigned long long)c.flags);
	cq_expect_empty(t->txcq, 50, what);
}

static void client(void)
{
	struct tctx t;
	hints_for(&t);
	client_setup(&t);
	uint8_t *buf = alloc_buf(BUFSZ);
	struct fid_mr *mr = mr_reg(&t, buf, BUFSZ, FI_SEND | FI_READ | FI_WRITE);
	void *desc = fi_mr_desc(mr);
	void *d3[3] = { desc, desc, desc };
	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	struct rma_info ri, rp;
	oob_recv(&ri, sizeof(ri));
	oob_recv(&rp, sizeof(rp));
	size_t mms = t.info->ep_attr->max_msg_size, txs = t.info->tx_attr->size;
	logmsg("max_msg_size %zu, tx size %zu", mms, txs);
	/* a send is one verbs message */
	if (mms < BIG)
		EXPECT(fi_send(t.ep, buf, mms + 1, desc, 0, &sctx[0]) == -FI_EMSGSIZE, "send of max_msg_size + 1 accepted");
	/* RMA: at most tx size requests of max_msg_size (not posted: refused first) */
	if ((uint64_t)mms * txs + 1 <= UINT32_MAX)
		EXPECT(fi_write(t.ep, buf, mms * txs + 1, desc, 0, ri.addr, ri.key, &sctx[0]) == -FI_EMSGSIZE,
		       "write of %zu bytes accepted", mms * txs + 1);
	cq_expect_empty(t.txcq, 50, "refused operations");
	for (int k = 0; k < 3; k++) {
		size_t s = sizes[k];
		char what[96];
		big_rearm();
		oob_wait(10 + k);
		big_fill(buf, s, 1 + k);
		snprintf(what, sizeof(what), "write of %zu bytes", s);
		if (k == 1) {
			struct iovec iov[3] = { { buf, 3 * MIB + 5 }, { buf + 3 * MIB + 5, 7 * MIB - 9 },
						{ buf + 10 * MIB - 4, s - 10 * MIB + 4 } };
			CHK(fi_writev(t.ep, iov, d3, 3, 0, ri.addr, ri.key, &sctx[1 + k]));
		} else {
			struct iovec iov = { buf, s };
			struct fi_rma_iov rio = { ri.addr, s, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .rma_iov = &rio,
						.rma_iov_count = 1, .context = &sctx[1 + k] };
			CHK(fi_writemsg(t.ep, &m, FI_COMPLETION));
		}
		tx_one(&t, &sctx[1 + k], FI_RMA | FI_WRITE, what);
		oob_signal(20 + k);
		big_rearm();
		oob_wait(30 + k);
		memset(buf, 0, BUFSZ);
		snprintf(what, sizeof(what), "read of %zu bytes", s);
		if (k == 1) {
			struct iovec iov[3] = { { buf, MIB + 1 }, { buf + MIB + 1, 9 * MIB }, { buf + 10 * MIB + 1, s - 10 * MIB - 1 } };
			CHK(fi_readv(t.ep, iov, d3, 3, 0, ri.addr, ri.key, &sctx[5 + k]));
		} else {
			struct iovec iov = { buf, s };
			struct fi_rma_iov rio = { ri.addr, s, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .rma_iov = &rio,
						.rma_iov_count = 1, .context = &sctx[5 + k] };
			CHK(fi_readmsg(t.ep, &m, FI_COMPLETION));
		}
		tx_one(&t, &sctx[5 + k], FI_RMA | FI_READ, what);
		big_expect(buf, s, 50 + k, what);
		expect_zero(buf + s, 4096, what);
		logmsg("client: %zu bytes written and read back", s);
		oob_signal(40 + k);
	}
	big_rearm();
	oob_wait(50);
	big_fill(buf, 16 * MIB + 4, 60);
	CHK(fi_writedata(t.ep, buf, 16 * MIB + 4, desc, 0xbeef, 0, ri.addr, ri.key, &sctx[9]));
	tx_one(&t, &sctx[9], FI_RMA | FI_WRITE, "writedata of 16 MiB + 4");
	big_rearm();
	oob_wait(60);
	/* a split write failing in its middle (last: it breaks the connection) */
	big_fill(buf, 24 * MIB, 90);
	CHK(fi_write(t.ep, buf, 24 * MIB, desc, 0, rp.addr, rp.key, &sctx[10]));
	struct fi_cq_data_entry c;
	struct fi_cq_err_entry err;
	char b[512];
	memset(&err, 0, sizeof(err));
	if (cq_read_one_or_err(t.txcq, &c, &err, WAIT_MS, "split write past its key"))
		fail("a 24 MiB write under a 12 MiB key succeeded");
	EXPECT(err.op_context == &sctx[10], "split write error: op_context %p", err.op_context);
	EXPECT((err.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE), "split write error: flags %#llx",
	       (unsigned long long)err.flags);
	logmsg("client: split write past its key: %s", cq_err_str(t.txcq, &err, b, sizeof(b)));
	EXPECT(err.err != FI_ECANCELED, "the failed piece's error was not reported (%d)", err.err);
	cq_expect_empty(t.txcq, 2000, "after the failed split write");
	oob_signal(70);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("msg_bigrma"))
		server();
	else
		client();
	return 0;
}
