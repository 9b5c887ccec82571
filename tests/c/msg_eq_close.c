/*
 * msg_eq_close: closing an endpoint (or a passive endpoint) drops the events
 * it left unread in its EQ.
 *
 * An EQ entry names the object it is about by its fid. Once that object is
 * closed the fid is freed memory, and the next endpoint the application opens
 * may be allocated at the same address: ofi_rxm, for one, reads
 * cm_entry->fid->context for every FI_SHUTDOWN it reads. libfabric's verbs
 * removes a closed endpoint's queued events (vrb_eq_remove_events); a
 * provider that keeps them hands the application a dangling fid.
 *
 * Asserts (fi_eq(3), fi_cm(3), fi_endpoint(3)):
 *  - phase 1: the server accepts two connections (ep A, ep B) on one EQ; the
 *    client closes both. After both disconnects had time to arrive, the
 *    server reads one FI_SHUTDOWN (fid A or B), closes the other endpoint
 *    without reading its event, and from then on fi_eq_read returns
 *    -FI_EAGAIN for a second: no entry for the closed endpoint;
 *  - phase 2: the client connects two more endpoints; the server reads one
 *    FI_CONNREQ (fid == pep), rejects it, closes the passive endpoint and
 *    then reads nothing for a second (the other request's entry, which names
 *    the closed pep, is gone); the client gets FI_ECONNREFUSED for both
 *    endpoints (the dropped request is refused, not left to time out).
 */
#include "common.h"

#include <stdlib.h>

#define SETTLE_MS 1500

static void expect_nothing(struct tctx *t, const void *closed, const char *what)
{
	union eqbuf u;
	uint64_t t0 = now_ms();
	int reads = 0;
	while (now_ms() - t0 < 1000) {
		uint32_t ev = 0;
		memset(&u, 0, sizeof(u));
		ssize_t r = fi_eq_read(t->eq, &ev, &u, sizeof(u), 0);
		reads++;
		if (r >= 0)
			fail("after closing %s: fi_eq_read returned %s with fid %p%s", what,
			     ev_name(ev), (void *)u.e.fid,
			     (const void *)u.e.fid == closed ? " (the closed object's)" : "");
		if (r == -FI_EAVAIL) {
			struct fi_eq_err_entry e;
			char b[512];
			memset(&e, 0, sizeof(e));
			EXPECT(fi_eq_readerr(t->eq, &e, 0) > 0, "fi_eq_readerr");
			fail("after closing %s: error entry %s%s", what, eq_err_str(t->eq, &e, b, sizeof(b)),
			     (const void *)e.fid == closed ? " (the closed object's)" : "");
		}
		EXPECT(r == -FI_EAGAIN, "fi_eq_read returned %zd (%s)", r, fi_strerror((int)-r));
		sleep_ms(10);
	}
	logmsg("after closing %s: %d reads, all -FI_EAGAIN", what, reads);
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.cq_size = 4096;
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);

	/* phase 1: two connections, both closed by the client */
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	server_accept(&t, NULL, 0);
	struct fi_info *info2 = server_wait_connreq(&t, NULL, NULL, NULL);
	struct fid_ep *ep2 = tctx_open_ep(&t, info2);
	CHK(fi_accept(ep2, NULL, 0));
	eq_expect(&t, FI_CONNECTED, ep2, "second accept");
	fi_freeinfo(info2);
	oob_signal(1);
	oob_wait(2); /* the client closed both endpoints */
	sleep_ms(SETTLE_MS);

	union eqbuf u;
	uint32_t ev = 0;
	eq_wait(&t, &ev, &u, sizeof(u), WAIT_MS);
	EXPECT(ev == FI_SHUTDOWN, "expected FI_SHUTDOWN, got %s", ev_name(ev));
	struct fid_ep *other;
	if (u.e.fid == &t.ep->fid) {
		other = ep2;
		ep2 = NULL;
	} else {
		EXPECT(u.e.fid == &ep2->fid, "FI_SHUTDOWN fid %p is neither endpoint", (void *)u.e.fid);
		other = t.ep;
		t.ep = NULL;
	}
	const void *closed = &other->fid;
	logmsg("read FI_SHUTDOWN of %p; closing %p unread", (void *)u.e.fid, closed);
	CHK(fi_close(&other->fid));
	expect_nothing(&t, closed, "an endpoint with an unread FI_SHUTDOWN");
	if (ep2)
		CHK(fi_close(&ep2->fid));

	/* phase 2: two connection requests, one rejected, the pep closed */
	oob_signal(3);
	oob_wait(4); /* both fi_connect calls made */
	sleep_ms(SETTLE_MS);
	ev = 0;
	ssize_t r = eq_wait(&t, &ev, &u, sizeof(u), WAIT_MS);
	EXPECT(ev == FI_CONNREQ && r >= (ssize_t)sizeof(u.e) && u.e.fid == &t.pep->fid,
	       "expected FI_CONNREQ of the pep, got %s fid %p", ev_name(ev), (void *)u.e.fid);
	CHK(fi_reject(t.pep, u.e.info->handle, NULL, 0));
	fi_freeinfo(u.e.info);
	closed = &t.pep->fid;
	CHK(fi_close(&t.pep->fid));
	t.pep = NULL;
	expect_nothing(&t, closed, "a passive endpoint with an unread FI_CONNREQ");
	oob_signal(5);

	oob_wait(6);
	tctx_close(&t);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.cq_size = 4096;
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	struct fid_ep *ep2 = tctx_open_ep(&t, t.info);
	CHK(fi_connect(ep2, t.info->dest_addr, NULL, 0));
	eq_expect(&t, FI_CONNECTED, ep2, "second connect");
	oob_wait(1);
	CHK(fi_close(&ep2->fid));
	CHK(fi_close(&t.ep->fid));
	t.ep = NULL;
	oob_signal(2);

	oob_wait(3);
	struct fid_ep *e3 = tctx_open_ep(&t, t.info), *e4 = tctx_open_ep(&t, t.info);
	CHK(fi_connect(e3, t.info->dest_addr, NULL, 0));
	CHK(fi_connect(e4, t.info->dest_addr, NULL, 0));
	oob_signal(4);
	/* Both requests are refused: one by fi_reject, the other when the
	 * server closed its passive endpoint with the request unread. */
	bool refused[2] = { false, false };
	union eqbuf u;
	uint32_t ev = 0;
	uint64_t t0 = now_ms();
	while (!(refused[0] && refused[1])) {
		if (now_ms() - t0 > WAIT_MS)
			fail("connection requests not refused within %d ms (e3 %d, e4 %d)", WAIT_MS,
			     refused[0], refused[1]);
		ssize_t r = fi_eq_read(t.eq, &ev, &u, sizeof(u), 0);
		if (r >= 0) {
			EXPECT(ev == FI_SHUTDOWN, "client EQ: unexpected %s", ev_name(ev));
			continue;
		}
		if (r == -FI_EAGAIN) {
			sleep_ms(5);
			continue;
		}
		EXPECT(r == -FI_EAVAIL, "fi_eq_read returned %zd (%s)", r, fi_strerror((int)-r));
		struct fi_eq_err_entry e;
		char b[512];
		memset(&e, 0, sizeof(e));
		EXPECT(fi_eq_readerr(t.eq, &e, 0) > 0, "fi_eq_readerr");
		logmsg("client EQ error: %s", eq_err_str(t.eq, &e, b, sizeof(b)));
		EXPECT(e.err == FI_ECONNREFUSED, "error %d (%s), expected FI_ECONNREFUSED", e.err,
		       fi_strerror(e.err));
		int k = e.fid == &e3->fid ? 0 : e.fid == &e4->fid ? 1 : -1;
		EXPECT(k >= 0, "error entry fid %p is neither connecting endpoint", (void *)e.fid);
		EXPECT(!refused[k], "endpoint %d refused twice", k + 3);
		refused[k] = true;
	}
	oob_wait(5);
	CHK(fi_close(&e3->fid));
	CHK(fi_close(&e4->fid));
	oob_signal(6);
	tctx_close(&t);
	child_done();
}

int main(void)
{
	if (test_start("msg_eq_close"))
		server();
	else
		client();
	return 0;
}
