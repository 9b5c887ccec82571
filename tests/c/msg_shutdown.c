/*
 * msg_shutdown: disconnect notification.
 *
 *   msg_shutdown            (variant A) the client calls fi_shutdown(ep, 0)
 *   msg_shutdown abort      (variant B, test name msg_shutdown_abort) the
 *                           client process _exit()s without closing anything
 *
 * Asserts (fi_cm(3)):
 *  - after a message exchange, the server's EQ delivers FI_SHUTDOWN with
 *    fid == &ep->fid within 30 s (fi_eq_sread with a timeout);
 *  - variant A: fi_shutdown returns 0 at the client;
 *  - the receives the server still had posted either complete with error
 *    entries (err != 0, op_context one of the posted receives) or not at all
 *    -- never as successful completions; nothing hangs or crashes;
 *  - all objects close cleanly (fi_close == 0) on both sides afterwards.
 */
#include "common.h"

#include <stdlib.h>
#include <unistd.h>

#define NPOST 4

static bool abort_variant;
static struct fi_context rctx[NPOST + 1], sctx[2];

/* Read what the rx CQ holds: only error entries for the still-posted
 * receives are acceptable.  Returns the number of error entries read. */
static int drain_rx(struct tctx *t, bool *seen)
{
	int nerr = 0;
	for (;;) {
		struct fi_cq_data_entry c;
		ssize_t r = fi_cq_read(t->rxcq, &c, 1);
		if (r == 1)
			fail("posted receive %p completed successfully after the disconnect",
			     c.op_context);
		if (r == -FI_EAGAIN)
			return nerr;
		EXPECT(r == -FI_EAVAIL, "fi_cq_read returned %zd (%s)", r, fi_strerror((int)-r));
		struct fi_cq_err_entry e;
		char b[512];
		memset(&e, 0, sizeof(e));
		r = fi_cq_readerr(t->rxcq, &e, 0);
		EXPECT(r == 1, "fi_cq_readerr returned %zd", r);
		logmsg("flushed receive: %s", cq_err_str(t->rxcq, &e, b, sizeof(b)));
		EXPECT(e.err > 0, "error entry with err %d", e.err);
		long idx = (struct fi_context *)e.op_context - rctx;
		EXPECT(idx >= 1 && idx <= NPOST, "error entry op_context %p unknown", e.op_context);
		EXPECT(!seen[idx], "receive %ld reported twice", idx);
		seen[idx] = true;
		nerr++;
	}
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);

	char *buf = alloc_buf(65536);
	struct fid_mr *mr = mr_reg(&t, buf, 65536, FI_SEND | FI_RECV);
	void *d = fi_mr_desc(mr);
	/* one receive for the client's message, NPOST that stay posted */
	for (int i = 0; i <= NPOST; i++)
		CHK(fi_recv(t.ep, buf + i * 4096, 4096, d, 0, &rctx[i]));
	server_accept(&t, NULL, 0);

	struct fi_cq_data_entry c;
	cq_read_one(t.rxcq, &c, WAIT_MS, "client message");
	EXPECT(c.op_context == &rctx[0] && c.len == 512, "message op_context %p len %zu",
	       c.op_context, c.len);
	expect_pattern(buf, 512, 31, "client message");
	oob_signal(1); /* go ahead and disconnect */

	/* wait for FI_SHUTDOWN, up to 30 s, with fi_eq_sread.  Between the
	 * sreads the rx CQ is polled too (a provider with manual data progress
	 * needs it; its error entries are collected and checked below). */
	union {
		struct fi_eq_cm_entry e;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} u;
	uint32_t ev = 0;
	uint64_t start = now_ms();
	ssize_t r;
	int nerr = 0;
	bool seen[NPOST + 1] = { false };
	for (;;) {
		r = fi_eq_sread(t.eq, &ev, &u, sizeof(u), 200, 0);
		if (r != -FI_EAGAIN)
			break;
		check_child();
		nerr += drain_rx(&t, seen);
		EXPECT(now_ms() - start < 30000, "no FI_SHUTDOWN within 30 s");
	}
	if (r == -FI_EAVAIL) {
		struct fi_eq_err_entry e;
		char b[512];
		memset(&e, 0, sizeof(e));
		fi_eq_readerr(t.eq, &e, 0);
		fail("EQ error entry instead of FI_SHUTDOWN: %s", eq_err_str(t.eq, &e, b, sizeof(b)));
	}
	EXPECT(r >= (ssize_t)sizeof(struct fi_eq_cm_entry), "fi_eq_sread returned %zd (%s)", r,
	       r < 0 ? fi_strerror((int)-r) : "short");
	EXPECT(ev == FI_SHUTDOWN, "event %s (%u), want FI_SHUTDOWN", ev_name(ev), ev);
	EXPECT(u.e.fid == &t.ep->fid, "FI_SHUTDOWN fid %p, ep fid %p", (void *)u.e.fid,
	       (void *)&t.ep->fid);
	logmsg("FI_SHUTDOWN after %llu ms", (unsigned long long)(now_ms() - start));

	/* the remaining posted receives: error entries or nothing */
	start = now_ms();
	while (now_ms() - start < 2000) {
		nerr += drain_rx(&t, seen);
		sleep_ms(5);
	}
	logmsg("%d of %d posted receives reported as errors after the disconnect", nerr, NPOST);

	mr_close(mr);
	tctx_close(&t);
	free(buf);
	if (!abort_variant)
		oob_signal(2);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	char *buf = alloc_buf(4096);
	struct fid_mr *mr = mr_reg(&t, buf, 4096, FI_SEND | FI_RECV);
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	fill_pattern(buf, 512, 31);
	CHK(fi_send(t.ep, buf, 512, fi_mr_desc(mr), 0, &sctx[0]));
	struct fi_cq_entry c;
	cq_read_one(t.txcq, &c, WAIT_MS, "send");
	oob_wait(1);

	if (abort_variant) {
		logmsg("exiting abruptly without closing anything");
		fflush(stderr);
		_exit(0);
	}

	int r = fi_shutdown(t.ep, 0);
	EXPECT(r == 0, "fi_shutdown returned %d (%s)", r, fi_strerror(-r));
	oob_wait(2); /* server saw FI_SHUTDOWN and closed */
	/* our own EQ may or may not hold an event; nothing is promised */
	union {
		struct fi_eq_cm_entry e;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} u;
	uint32_t ev;
	ssize_t er = fi_eq_read(t.eq, &ev, &u, sizeof(u), 0);
	logmsg("client EQ after fi_shutdown: %s",
	       er >= 0 ? ev_name(ev) : fi_strerror((int)-er));
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(int argc, char **argv)
{
	abort_variant = argc > 1 && strcmp(argv[1], "abort") == 0;
	if (argc > 1 && !abort_variant && strcmp(argv[1], "graceful") != 0) {
		fprintf(stderr, "usage: %s [graceful|abort]\n", argv[0]);
		return 2;
	}
	if (test_start(abort_variant ? "msg_shutdown_abort" : "msg_shutdown"))
		server();
	else
		client();
	return 0;
}
