/*
 * msg_cq_sread: blocking CQ reads.
 *
 * The client's rx CQ is opened with wait_obj FI_WAIT_UNSPEC.
 * Asserts (fi_cq(3)):
 *  - fi_cq_sread with a 300 ms timeout returns -FI_EAGAIN when nothing
 *    arrives, after roughly the timeout;
 *  - fi_cq_sread with a long timeout returns 1 with the completion (right
 *    op_context, len, data) when the server sends ~1 s later;
 *  - fi_cq_sread with timeout -1 (infinite) returns the next completion when
 *    the server sends after another delay.
 */
#include "common.h"

#include <stdlib.h>

static struct fi_context rctx[2], sctx[2];

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	char *buf = alloc_buf(8192);
	struct fid_mr *mr = mr_reg(&t, buf, 8192, FI_SEND);
	server_accept(&t, NULL, 0);

	for (int i = 0; i < 2; i++) {
		oob_wait((uint8_t)(1 + i)); /* client is about to block */
		sleep_ms(1000);
		fill_pattern(buf + i * 4096, 777, 60u + (uint32_t)i);
		CHK(fi_send(t.ep, buf + i * 4096, 777, fi_mr_desc(mr), 0, &sctx[i]));
		struct fi_cq_entry c;
		cq_read_one(t.txcq, &c, WAIT_MS, "send");
	}
	oob_wait(3);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.rx_wait = FI_WAIT_UNSPEC;
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	char *buf = alloc_buf(8192);
	struct fid_mr *mr = mr_reg(&t, buf, 8192, FI_RECV);
	for (int i = 0; i < 2; i++)
		CHK(fi_recv(t.ep, buf + i * 4096, 4096, fi_mr_desc(mr), 0, &rctx[i]));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	struct fi_cq_data_entry c;
	uint64_t t0 = now_ms();
	ssize_t r = fi_cq_sread(t.rxcq, &c, 1, NULL, 300);
	uint64_t dt = now_ms() - t0;
	EXPECT(r == -FI_EAGAIN, "idle fi_cq_sread(300 ms) returned %zd (%s)", r,
	       r < 0 ? fi_strerror((int)-r) : "a completion");
	EXPECT(dt >= 150, "idle fi_cq_sread(300 ms) returned after only %llu ms",
	       (unsigned long long)dt);
	EXPECT(dt < 20000, "idle fi_cq_sread(300 ms) took %llu ms", (unsigned long long)dt);
	logmsg("idle fi_cq_sread returned -FI_EAGAIN after %llu ms", (unsigned long long)dt);

	for (int i = 0; i < 2; i++) {
		int timeout = i == 0 ? 30000 : -1;
		oob_signal((uint8_t)(1 + i));
		t0 = now_ms();
		do {
			r = fi_cq_sread(t.rxcq, &c, 1, NULL, timeout);
			/* a signal may interrupt the wait; retry within the budget */
		} while (r == -FI_EAGAIN && timeout > 0 && now_ms() - t0 < (uint64_t)timeout);
		dt = now_ms() - t0;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry e;
			char b[512];
			memset(&e, 0, sizeof(e));
			fi_cq_readerr(t.rxcq, &e, 0);
			fail("fi_cq_sread: error completion: %s", cq_err_str(t.rxcq, &e, b, sizeof(b)));
		}
		EXPECT(r == 1, "fi_cq_sread(timeout %d) returned %zd (%s)", timeout, r,
		       r < 0 ? fi_strerror((int)-r) : "");
		EXPECT(c.op_context == &rctx[i], "op_context %p, want %p", c.op_context,
		       (void *)&rctx[i]);
		EXPECT(c.len == 777, "len %zu", c.len);
		expect_pattern(buf + i * 4096, 777, 60u + (uint32_t)i, "received data");
		logmsg("fi_cq_sread(timeout %d) returned the completion after %llu ms", timeout,
		       (unsigned long long)dt);
	}
	oob_signal(3);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("msg_cq_sread"))
		server();
	else
		client();
	return 0;
}
