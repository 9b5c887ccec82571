/*
 * msg_api14: an application written against libfabric API 1.4.
 *
 * fi_getinfo(FI_VERSION(1,4)) with the pre-1.5 memory registration model, as
 * fi_pingpong-style applications do: hints->mode = FI_CONTEXT|FI_LOCAL_MR,
 * hints->domain_attr->mr_mode = FI_MR_BASIC.
 * Asserts (fi_domain(3) FI_MR_BASIC, fi_getinfo(3) FI_LOCAL_MR):
 *  - fi_getinfo succeeds and the returned mr_mode is FI_MR_BASIC (the old
 *    enum value, since 1.4 applications know nothing else);
 *  - if the provider reports FI_MR_LOCAL to a 1.17 application, the 1.4 info
 *    carries the FI_LOCAL_MR mode bit;
 *  - connect/accept work; send/recv both ways with registered buffers;
 *  - RMA write and read with the provider key and the virtual address
 *    (FI_MR_BASIC == FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY) move
 *    exactly the expected bytes.
 */
#include "common.h"

#include <stdlib.h>

static struct fi_context rctx[4], sctx[4];

static struct fi_info *hints14(void)
{
	struct fi_info *h = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_LOCAL_MR);
	h->domain_attr->mr_mode = FI_MR_BASIC;
	/* the final message makes the earlier write visible (send after write) */
	h->tx_attr->msg_order = FI_ORDER_SAW;
	return h;
}

static void check_info(struct tctx *t)
{
	logmsg("api 1.4: mr_mode %d, mode 0x%llx", t->info->domain_attr->mr_mode,
	       (unsigned long long)t->info->mode);
	EXPECT(t->info->domain_attr->mr_mode == FI_MR_BASIC,
	       "mr_mode returned to a 1.4 application is %d, want FI_MR_BASIC (%d)",
	       t->info->domain_attr->mr_mode, FI_MR_BASIC);
}

/* A provider that needs local registration (FI_MR_LOCAL at API 1.17) must say
 * so to a 1.4 application with the FI_LOCAL_MR mode bit (fi_getinfo(3),
 * fi_mr(3): FI_MR_LOCAL supersedes FI_LOCAL_MR). */
static void check_local_mr_compat(struct fi_info *info14)
{
	struct fi_info *h = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	struct fi_info *i17 = NULL;
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i17));
	logmsg("api 1.17 mr_mode 0x%x, api 1.4 mode 0x%llx", i17->domain_attr->mr_mode,
	       (unsigned long long)info14->mode);
	if (i17->domain_attr->mr_mode & FI_MR_LOCAL)
		EXPECT_SOFT(info14->mode & FI_LOCAL_MR,
			    "provider requires FI_MR_LOCAL at 1.17 but its 1.4 info lacks FI_LOCAL_MR");
	fi_freeinfo(i17);
	fi_freeinfo(h);
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.version = FI_VERSION(1, 4);
	t.hints = hints14();
	server_listen(&t);
	check_local_mr_compat(t.pep_info);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	check_info(&t);

	char *rbuf = alloc_buf(65536);
	char *mbuf = alloc_buf(8192);
	fill_pattern(rbuf + 32768, 32768, 14);
	struct fid_mr *rmr = mr_reg(&t, rbuf, 65536, FI_REMOTE_READ | FI_REMOTE_WRITE);
	struct fid_mr *mmr = mr_reg(&t, mbuf, 8192, FI_SEND | FI_RECV);
	void *md = fi_mr_desc(mmr);
	CHK(fi_recv(t.ep, mbuf + 4096, 4096, md, 0, &rctx[0]));
	server_accept(&t, NULL, 0);

	struct rma_info ri = { .addr = (uint64_t)(uintptr_t)rbuf, .key = fi_mr_key(rmr),
			       .len = 65536 };
	memcpy(mbuf, &ri, sizeof(ri));
	CHK(fi_send(t.ep, mbuf, sizeof(ri), md, 0, &sctx[0]));
	struct fi_cq_entry tc;
	cq_read_one(t.txcq, &tc, WAIT_MS, "send rma_info");
	EXPECT(tc.op_context == &sctx[0], "op_context %p", tc.op_context);

	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "done message");
	EXPECT(c.op_context == &rctx[0] && c.len == 64, "done: op_context %p len %zu",
	       c.op_context, c.len);
	expect_pattern(mbuf + 4096, 64, 41, "done message data");
	expect_pattern(rbuf, 8192, 13, "fi_write data at target");
	for (int i = 8192; i < 32768; i++)
		EXPECT(rbuf[i] == 0, "byte %d modified", i);
	oob_signal(1);
	oob_wait(2);
	mr_close(rmr);
	mr_close(mmr);
	tctx_close(&t);
	free(rbuf);
	free(mbuf);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.version = FI_VERSION(1, 4);
	t.hints = hints14();
	client_setup(&t);
	check_info(&t);

	char *lbuf = alloc_buf(65536);
	struct fid_mr *lmr = mr_reg(&t, lbuf, 65536, FI_SEND | FI_RECV | FI_READ | FI_WRITE);
	void *ld = fi_mr_desc(lmr);
	CHK(fi_recv(t.ep, lbuf, 4096, ld, 0, &rctx[0]));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "rma_info");
	EXPECT(c.op_context == &rctx[0] && c.len == sizeof(struct rma_info),
	       "rma_info: op_context %p len %zu", c.op_context, c.len);
	struct rma_info ri;
	memcpy(&ri, lbuf, sizeof(ri));

	struct fi_cq_entry tc;
	fill_pattern(lbuf + 8192, 8192, 13);
	CHK(fi_write(t.ep, lbuf + 8192, 8192, ld, 0, ri.addr, ri.key, &sctx[1]));
	cq_read_one(t.txcq, &tc, WAIT_MS, "fi_write");
	EXPECT(tc.op_context == &sctx[1], "write op_context %p", tc.op_context);

	memset(lbuf + 16384, 0, 32768);
	CHK(fi_read(t.ep, lbuf + 16384, 32768, ld, 0, ri.addr + 32768, ri.key, &sctx[2]));
	cq_read_one(t.txcq, &tc, WAIT_MS, "fi_read");
	EXPECT(tc.op_context == &sctx[2], "read op_context %p", tc.op_context);
	expect_pattern(lbuf + 16384, 32768, 14, "fi_read data");

	/* done message after the write completed (transmit complete) */
	fill_pattern(lbuf + 4096, 64, 41);
	CHK(fi_send(t.ep, lbuf + 4096, 64, ld, 0, &sctx[3]));
	cq_read_one(t.txcq, &tc, WAIT_MS, "done send");
	oob_wait(1);
	oob_signal(2);
	mr_close(lmr);
	tctx_close(&t);
	free(lbuf);
	child_done();
}

int main(void)
{
	if (test_start("msg_api14"))
		server();
	else
		client();
	return 0;
}
