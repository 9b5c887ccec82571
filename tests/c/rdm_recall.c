/*
 * rdm_recall: peers that stay idle but keep progressing give back the
 * credits an endpoint recalls from them, so a busy peer of that endpoint
 * never starves.
 *
 * The child opens NIDLE endpoints (one domain, one CQ for all), each of
 * which connects to the server's endpoint M by sending it one message; then
 * they send nothing more, but the child reads their CQ every millisecond
 * (as a server's other clients do while they wait for something). M's pool
 * was handed out to the first of them in large grants; the quota shrinks as
 * the others join, and M recalls the excess. Then M sends NMSG messages to
 * itself (a new connection, whose grant must come out of those recalls), one
 * at a time, each received before the next.
 *
 * Every message must arrive (tag, length, payload). And, with rsverbs
 * (FI_LOG_LEVEL=info, M's stderr teed), the recalls must have been
 * answered: M's log must show neither a connection that "waited ... for free
 * receive buffers" nor a pool grown "for peers stuck without credits". Both
 * are rsverbs' remedies, after a second, for peers that are never
 * progressed (rdm_idle_peers); with progressing peers they are a second's
 * stall each. The log is checked from M's "peers connected" line on: while
 * the child sets up its next endpoint (fi_enable pins its buffers, which can
 * take over a second under emulation) it progresses none of the connected
 * ones, whose last message may still wait for credits, so the remedy may
 * rightly run then (seen once in the lab, session 31). Before the fix the idle endpoints never answered a recall:
 * receiving one did not list them for sending (they had nothing queued), so
 * M's connection to itself waited 1 s and then stalled for 1 s about every
 * 80 messages.
 *
 * Output contract as the other tests: one line PASS/FAIL on stdout.
 */
#include "rdm_common.h"
#include "logtee.h"

#define NIDLE 16
#define NMSG 1000

static const char *name = "rdm_recall";

static void server(void)
{
	struct rctx r;
	uint32_t l32;

	tee_stderr();
	setenv("FI_LOG_LEVEL", "info", 1);
	rdm_open(&r, FI_MSG | FI_TAGGED);
	l32 = (uint32_t)r.namelen;
	oob_send(&l32, sizeof(l32));
	oob_send(r.name, r.namelen);

	uint8_t *rb = alloc_buf(4096), *sb = alloc_buf(64);
	static struct fi_context ctx[NIDLE + 1];
	for (int k = 0; k < NIDLE; k++)
		RETRY(&r, fi_trecv(r.ep, rb, 64, NULL, FI_ADDR_UNSPEC, 1, 0, &ctx[k]));
	oob_signal(1);
	for (int k = 0; k < NIDLE; k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.rxcq, &e, "idle peer message %d", k);
		EXPECT(e.tag == 1 && e.len == 8, "idle peer message: tag %#llx len %zu", (unsigned long long)e.tag, e.len);
	}
	logmsg("%d peers connected; they stay idle (progressed every ms)", NIDLE);

	fi_addr_t self;
	EXPECT(fi_av_insert(r.av, r.name, 1, &self, 0, NULL) == 1, "fi_av_insert of its own address");
	uint64_t t0 = now_ms();
	for (uint32_t i = 0; i < NMSG; i++) {
		struct fi_cq_tagged_entry e;
		RETRY(&r, fi_trecv(r.ep, rb, 64, NULL, FI_ADDR_UNSPEC, 2, 0, &ctx[NIDLE]));
		memcpy(sb, &i, 4);
		fill_pattern(sb + 4, 12, i);
		RETRY(&r, fi_tinject(r.ep, sb, 16, self, 2));
		rdm_next(r.rxcq, &e, "message %u to itself", i);
		EXPECT(e.tag == 2 && e.len == 16 && e.op_context == &ctx[NIDLE], "message %u: tag %#llx len %zu", i,
		       (unsigned long long)e.tag, e.len);
		uint32_t got;
		memcpy(&got, rb, 4);
		EXPECT(got == i, "message %u carries sequence %u", i, got);
		expect_pattern(rb + 4, 12, i, "message to itself");
	}
	logmsg("%d messages to itself (%llu ms)", NMSG, (unsigned long long)(now_ms() - t0));

	pthread_mutex_lock(&loglock);
	const char *log = logbuf ? logbuf : "";
	if (rdm_rsverbs) {
		EXPECT(strstr(log, "rdm: registered bytes (") != NULL,
		       "no 'registered bytes' line in the log (is FI_LOG_LEVEL=info honoured?)");
		/* from the moment every idle peer is connected and progressed (the
		 * logmsg above goes through the same teed stderr, in order) */
		const char *idle = strstr(log, "peers connected; they stay idle");
		EXPECT(idle != NULL, "no 'peers connected' line of this test in the log");
		const char *w = strstr(idle, "for free receive buffers");
		EXPECT(!w, "a connection waited for free receive buffers: the idle peers did not answer recalls");
		const char *s = strstr(idle, "for peers stuck without credits");
		EXPECT(!s, "the pool was grown for a starving peer: the idle peers did not answer recalls");
	} else {
		logmsg("not rsverbs: only the deliveries are checked");
	}
	pthread_mutex_unlock(&loglock);

	oob_signal(2);
	oob_wait(3);
	rdm_close(&r);
	free(rb);
	free(sb);
	tee_end();
	test_finish();
}

static struct fid_cq *icq;
static volatile int stop;

static void *idle_progress(void *arg)
{
	(void)arg;
	while (!stop) {
		struct fi_cq_tagged_entry e[8];
		ssize_t n = fi_cq_read(icq, e, 8);
		if (n < 0 && n != -FI_EAGAIN)
			fail("idle peers: fi_cq_read returned %zd", n);
		sleep_ms(1);
	}
	return NULL;
}

static void client(void)
{
	struct rctx r;
	char sname[64];
	uint32_t l32;

	/* one fabric and domain for all (rdm_open's endpoint is closed again) */
	rdm_open(&r, FI_MSG | FI_TAGGED);
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= sizeof(sname), "server name length %u", l32);
	oob_recv(sname, l32);
	fi_addr_t to;
	EXPECT(fi_av_insert(r.av, sname, 1, &to, 0, NULL) == 1, "fi_av_insert of the server");
	struct fi_cq_attr ca = { .size = 1024, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(r.domain, &ca, &icq, NULL));
	struct fid_ep *ep[NIDLE];
	uint8_t *sb = alloc_buf(64);
	memcpy(sb, "idlepeer", 8);
	oob_wait(1);
	for (int k = 0; k < NIDLE; k++) {
		CHK(fi_endpoint(r.domain, r.info, &ep[k], NULL));
		CHK(fi_ep_bind(ep[k], &icq->fid, FI_TRANSMIT | FI_RECV));
		CHK(fi_ep_bind(ep[k], &r.av->fid, 0));
		CHK(fi_enable(ep[k]));
		ssize_t rc;
		uint64_t t0 = now_ms();
		while ((rc = fi_tinject(ep[k], sb, 8, to, 1)) == -FI_EAGAIN) {
			struct fi_cq_tagged_entry e[8];
			(void)fi_cq_read(icq, e, 8);
			if (now_ms() - t0 > WAIT_MS)
				fail("idle peer %d: fi_tinject kept returning -FI_EAGAIN", k);
		}
		CHK(rc);
	}
	pthread_t t;
	if (pthread_create(&t, NULL, idle_progress, NULL))
		fail("pthread_create failed");
	oob_wait(2);
	stop = 1;
	pthread_join(t, NULL);
	for (int k = 0; k < NIDLE; k++)
		CHK(fi_close(&ep[k]->fid));
	CHK(fi_close(&icq->fid));
	free(sb);
	rdm_close(&r);
	oob_signal(3);
	child_done();
}

int main(void)
{
	if (test_start(name))
		server();
	else
		client();
	return 0;
}
