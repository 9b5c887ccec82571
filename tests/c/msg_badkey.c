/*
 * msg_badkey: an RMA write with a wrong remote key.
 *
 * Asserts (fi_cq(3)):
 *  - the write is reported through the client's tx CQ as an error:
 *    fi_cq_read returns -FI_EAVAIL (never a successful completion);
 *  - fi_cq_readerr returns 1 with op_context == the write's context and a
 *    positive err (FI_EIO, FI_EACCES, ... are all accepted; logged);
 *    err_data_size == 0 on input (provider-owned err_data, compat path);
 *  - fi_cq_strerror(cq, prov_errno, err_data, buf, len) returns non-NULL;
 *  - fi_cq_readerr on the now-empty error queue returns -FI_EAGAIN.
 * Completion flags of the error entry are only logged (fi_verbs(7): "Completion
 * flags are not reported if a request posted to an endpoint completes in
 * error").  After the error the connection is unusable; the server only drains
 * its EQ (events logged, nothing asserted) and both sides close cleanly.
 */
#include "common.h"

#include <stdlib.h>

static struct fi_context rctx[2], sctx[4];

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);

	char *rbuf = alloc_buf(65536);
	char *mbuf = alloc_buf(4096);
	struct fid_mr *rmr = mr_reg(&t, rbuf, 65536, FI_REMOTE_READ | FI_REMOTE_WRITE);
	struct fid_mr *mmr = mr_reg(&t, mbuf, 4096, FI_SEND | FI_RECV);
	server_accept(&t, NULL, 0);

	struct rma_info ri = {
		.addr = (t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)rbuf : 0,
		.key = fi_mr_key(rmr),
		.len = 65536,
	};
	memcpy(mbuf, &ri, sizeof(ri));
	CHK(fi_send(t.ep, mbuf, sizeof(ri), fi_mr_desc(mmr), 0, &sctx[0]));
	struct fi_cq_entry c;
	cq_read_one(t.txcq, &c, WAIT_MS, "send rma_info");

	oob_wait(1); /* client saw its error */

	/* drain whatever the provider reports; nothing is promised here */
	for (int i = 0; i < 50; i++) {
		union {
			struct fi_eq_cm_entry e;
			uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
		} u;
		uint32_t ev;
		ssize_t r = fi_eq_read(t.eq, &ev, &u, sizeof(u), 0);
		if (r == -FI_EAVAIL) {
			struct fi_eq_err_entry e;
			char b[512];
			memset(&e, 0, sizeof(e));
			fi_eq_readerr(t.eq, &e, 0);
			logmsg("server EQ error entry: %s", eq_err_str(t.eq, &e, b, sizeof(b)));
		} else if (r >= 0) {
			logmsg("server EQ event %s", ev_name(ev));
		}
		sleep_ms(10);
	}
	for (int i = 0; i < 8; i++) {
		struct fi_cq_data_entry d;
		ssize_t r = fi_cq_read(t.rxcq, &d, 1);
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry e;
			char b[512];
			memset(&e, 0, sizeof(e));
			fi_cq_readerr(t.rxcq, &e, 0);
			logmsg("server rx CQ error entry: %s", cq_err_str(t.rxcq, &e, b, sizeof(b)));
		} else if (r != -FI_EAGAIN) {
			logmsg("server rx CQ read returned %zd", r);
		}
	}

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
	t.tx_format = FI_CQ_FORMAT_DATA;
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	client_setup(&t);

	char *lbuf = alloc_buf(65536);
	struct fid_mr *lmr = mr_reg(&t, lbuf, 65536, FI_SEND | FI_RECV | FI_READ | FI_WRITE);
	void *ld = fi_mr_desc(lmr);
	CHK(fi_recv(t.ep, lbuf, 4096, ld, 0, &rctx[0]));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "rma_info message");
	struct rma_info ri;
	memcpy(&ri, lbuf, sizeof(ri));
	logmsg("remote addr 0x%llx key 0x%llx; writing with key 0x%llx",
	       (unsigned long long)ri.addr, (unsigned long long)ri.key,
	       (unsigned long long)(ri.key + 1000));

	fill_pattern(lbuf + 8192, 4096, 9);
	CHK(fi_write(t.ep, lbuf + 8192, 4096, ld, 0, ri.addr, ri.key + 1000, &sctx[1]));

	uint64_t start = now_ms();
	ssize_t r;
	for (;;) {
		r = fi_cq_read(t.txcq, &c, 1);
		if (r != -FI_EAGAIN)
			break;
		EXPECT(now_ms() - start < WAIT_MS, "no completion for the bad-key write in %d ms",
		       WAIT_MS);
		check_child();
		sleep_ms(1);
	}
	EXPECT(r == -FI_EAVAIL, "fi_cq_read after a bad-key write returned %zd (%s)%s", r,
	       r < 0 ? fi_strerror((int)-r) : "",
	       r == 1 ? ": the write completed successfully" : "");

	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof(err));
	err.err_data_size = 0;
	r = fi_cq_readerr(t.txcq, &err, 0);
	EXPECT(r == 1, "fi_cq_readerr returned %zd (%s)", r, r < 0 ? fi_strerror((int)-r) : "");
	char sbuf[256] = "";
	const char *s = fi_cq_strerror(t.txcq, err.prov_errno, err.err_data, sbuf, sizeof(sbuf));
	char fb[128];
	logmsg("error entry: err=%d (%s) prov_errno=%d op_context=%p flags=%s err_data=%p "
	       "err_data_size=%zu strerror=\"%s\" buf=\"%s\"",
	       err.err, fi_strerror(err.err), err.prov_errno, err.op_context,
	       flags_str(err.flags, fb, sizeof(fb)), err.err_data, err.err_data_size,
	       s ? s : "(null)", sbuf);
	EXPECT(err.op_context == &sctx[1], "error op_context %p, want %p", err.op_context,
	       (void *)&sctx[1]);
	EXPECT(err.err > 0, "err %d is not a positive fabric errno", err.err);
	EXPECT(s != NULL, "fi_cq_strerror returned NULL");

	struct fi_cq_err_entry err2;
	memset(&err2, 0, sizeof(err2));
	r = fi_cq_readerr(t.txcq, &err2, 0);
	EXPECT(r == -FI_EAGAIN, "second fi_cq_readerr returned %zd (%s)", r,
	       r < 0 ? fi_strerror((int)-r) : "another error entry");

	oob_signal(1);
	oob_signal(2);
	mr_close(lmr);
	tctx_close(&t);
	free(lbuf);
	child_done();
}

int main(void)
{
	if (test_start("msg_badkey"))
		server();
	else
		client();
	return 0;
}
