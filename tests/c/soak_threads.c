/*
 * soak_threads: several threads posting and polling on one FI_THREAD_SAFE
 * domain, checksummed payloads of mixed sizes, for a bounded time.
 *
 *   soak_threads msg   (test name soak_threads_msg): FI_EP_MSG
 *   soak_threads rdm   (test name soak_threads_rdm): FI_EP_RDM, tagged
 *
 * Each process (the parent and the child, symmetric) runs on ONE endpoint and
 * its two CQs, shared by all threads:
 *   NSEND sender threads  mixed sizes (RDM: eager and rendezvous), a window of
 *                         WIN messages each;
 *   NRECV receiver threads (RDM: thread i receives the peer's sender i, exact
 *                         tags in sequence; MSG: any message, identified by a
 *                         header in its payload), every byte checked;
 *   one RMA thread        fi_write a pattern into the peer's memory, fi_read it
 *                         back, compare;
 *   one poller thread     progress and completions, like every other thread:
 *                         whoever reads a completion hands it to its owner
 *                         (the op_context is the operation's record).
 * Senders stop after TEST_SOAK_SECS (env, default 30 s per entry;
 * longer soaks: TEST_SOAK_SECS=600); the message counts go over the out-of-band channel, so the
 * receivers know when they are done; receives posted beyond the count are
 * canceled (RDM) or flushed at shutdown (MSG).  Printed: messages and bytes
 * verified per process.  Then teardown in the wrong order first: fi_close of
 * a CQ, AV or domain still in use -> -FI_EBUSY, then the right order works.
 */
#include "rdm_common.h"

#include <stdatomic.h>
#include <stdlib.h>

#define NSEND 2
#define NRECV 2
#define WIN 4
#define MAXMSG (1 << 20)
#define MSG_MAXMSG 65536
#define RMA_REGION (1 << 20)
#define HDRLEN 24

static bool rdm;
static int soak_secs = 30;
static struct rctx R;     /* rdm */
static struct tctx T;     /* msg */
static struct fid_ep *ep;
static struct fid_cq *txcq, *rxcq;
static struct fid_domain *dom;

static atomic_int stop_send, stop_all;
static atomic_ullong bytes_verified, msgs_verified, rma_verified, completions;
static uint64_t sent_count[NSEND];
static uint64_t expect_count[NRECV]; /* RDM: per receiver thread; MSG: [0] = total */
static atomic_int expect_known;
static atomic_ullong msg_received; /* MSG: total received */
static struct rma_info peer_rma;
static struct fid_mr *recv_mr[NRECV]; /* closed after the endpoint (MSG: receives still posted) */
static uint8_t *recv_buf[NRECV];

struct op {
	atomic_int state; /* 0 pending, 1 done, 2 error */
	int err;
	size_t len;
	uint64_t tag;
};

static void op_done(void *ctx, int err, size_t len, uint64_t tag)
{
	struct op *o = ctx;
	EXPECT(o != NULL, "completion without a context");
	EXPECT(atomic_load(&o->state) == 0, "an operation completed twice");
	o->err = err;
	o->len = len;
	o->tag = tag;
	atomic_store_explicit(&o->state, err ? 2 : 1, memory_order_release);
	atomic_fetch_add(&completions, 1);
}

static void poll_cq(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e[16];
	ssize_t r = fi_cq_read(cq, e, 16);
	if (r == -FI_EAGAIN)
		return;
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		r = fi_cq_readerr(cq, &err, 0);
		if (r == -FI_EAGAIN)
			return; /* another thread took it */
		EXPECT(r == 1, "fi_cq_readerr returned %zd", r);
		op_done(err.op_context, err.err, err.len, err.tag);
		return;
	}
	EXPECT(r > 0, "fi_cq_read returned %zd (%s)", r, fi_strerror((int)-r));
	for (ssize_t i = 0; i < r; i++)
		op_done(e[i].op_context, 0, e[i].len, e[i].tag);
}

static void poll_all(void)
{
	poll_cq(txcq);
	poll_cq(rxcq);
}

static void wait_op(struct op *o, const char *what)
{
	uint64_t t0 = now_ms();
	while (atomic_load_explicit(&o->state, memory_order_acquire) == 0) {
		poll_all();
		if (now_ms() - t0 > 2 * WAIT_MS)
			fail("%s: no completion within %d ms", what, 2 * WAIT_MS);
	}
}

#define POST(expr)                                                             \
	do {                                                                   \
		ssize_t post_r__;                                              \
		uint64_t post_t0__ = now_ms();                                 \
		while ((post_r__ = (expr)) == -FI_EAGAIN) {                     \
			poll_all();                                            \
			if (now_ms() - post_t0__ > 2 * WAIT_MS)                \
				fail("%s: -FI_EAGAIN for %d ms", #expr, 2 * WAIT_MS); \
		}                                                              \
		CHK(post_r__);                                                 \
	} while (0)

static const size_t rdm_sizes[] = {1, 64, 1000, 4096, 16384, 16385, 70000, 262144, 1 << 20};
static const size_t msg_sizes[] = {HDRLEN, 64, 1000, 4096, 16384, 65536};

static size_t size_for(uint64_t seq, unsigned tid)
{
	if (rdm)
		return rdm_sizes[(seq * 7 + tid) % (sizeof(rdm_sizes) / sizeof(rdm_sizes[0]))];
	return msg_sizes[(seq * 5 + tid) % (sizeof(msg_sizes) / sizeof(msg_sizes[0]))];
}

static uint32_t seed_for(unsigned tid, uint64_t seq, bool parent)
{
	return (uint32_t)(tid * 1000003u + seq * 7919u + (parent ? 17u : 91u));
}

static struct fid_mr *reg(void *b, size_t len, uint64_t acc)
{
	struct fid_mr *m = NULL;
	static atomic_ulong key = 1000;
	CHK(fi_mr_reg(dom, b, len, acc, 0, atomic_fetch_add(&key, 1), 0, &m, NULL));
	return m;
}

/* Header for MSG payloads: who sent it, which one, how long. */
static void put_hdr(uint8_t *b, unsigned tid, uint64_t seq, uint64_t len)
{
	uint64_t h[3] = {tid, seq, len};
	memcpy(b, h, HDRLEN);
}

static void *sender(void *arg)
{
	unsigned tid = (unsigned)(uintptr_t)arg;
	size_t maxm = rdm ? MAXMSG : MSG_MAXMSG;
	uint8_t *buf = alloc_buf(WIN * maxm);
	struct fid_mr *mr = reg(buf, WIN * maxm, FI_SEND);
	struct op ops[WIN];
	uint64_t seq = 0;
	for (int i = 0; i < WIN; i++)
		atomic_store(&ops[i].state, 1);
	while (!atomic_load(&stop_send)) {
		int w = seq % WIN;
		wait_op(&ops[w], "send");
		EXPECT(atomic_load(&ops[w].state) == 1, "send %llu failed: %s", (unsigned long long)seq - WIN,
		       fi_strerror(ops[w].err));
		size_t len = size_for(seq, tid);
		uint8_t *b = buf + (size_t)w * maxm;
		uint32_t seed = seed_for(tid, seq, !is_child);
		atomic_store(&ops[w].state, 0);
		if (rdm) {
			fill_pattern(b, len, seed);
			uint64_t tag = (uint64_t)tid << 40 | seq;
			POST(fi_tsend(ep, b, len, fi_mr_desc(mr), R.peer, tag, &ops[w]));
		} else {
			put_hdr(b, tid, seq, len);
			fill_pattern(b + HDRLEN, len - HDRLEN, seed);
			POST(fi_send(ep, b, len, fi_mr_desc(mr), 0, &ops[w]));
		}
		seq++;
	}
	for (int i = 0; i < WIN; i++) {
		wait_op(&ops[i], "last sends");
		EXPECT(atomic_load(&ops[i].state) == 1, "send failed: %s", fi_strerror(ops[i].err));
	}
	sent_count[tid] = seq;
	CHK(fi_close(&mr->fid));
	free(buf);
	return NULL;
}

static void verify_msg(const uint8_t *b, size_t len)
{
	uint64_t h[3];
	EXPECT(len >= HDRLEN, "message of %zu bytes", len);
	memcpy(h, b, HDRLEN);
	EXPECT(h[0] < NSEND && h[2] == len && len == size_for(h[1], (unsigned)h[0]),
	       "message header tid %llu seq %llu len %llu, completion len %zu", (unsigned long long)h[0],
	       (unsigned long long)h[1], (unsigned long long)h[2], len);
	expect_pattern(b + HDRLEN, len - HDRLEN, seed_for((unsigned)h[0], h[1], is_child), "message payload");
}

static void *receiver(void *arg)
{
	unsigned tid = (unsigned)(uintptr_t)arg;
	size_t maxm = rdm ? MAXMSG : MSG_MAXMSG;
	uint8_t *buf = alloc_buf(WIN * maxm);
	struct fid_mr *mr = reg(buf, WIN * maxm, FI_RECV);
	struct op ops[WIN];
	uint64_t posted_seq[WIN];
	uint64_t next_post = 0, received = 0;
	for (int w = 0; w < WIN; w++) {
		atomic_store(&ops[w].state, 0);
		posted_seq[w] = next_post++;
		if (rdm)
			POST(fi_trecv(ep, buf + (size_t)w * maxm, maxm, fi_mr_desc(mr), R.peer,
				      (uint64_t)tid << 40 | posted_seq[w], 0, &ops[w]));
		else
			POST(fi_recv(ep, buf + (size_t)w * maxm, maxm, fi_mr_desc(mr), 0, &ops[w]));
	}
	for (;;) {
		if (atomic_load(&expect_known)) {
			uint64_t want = rdm ? expect_count[tid] : expect_count[0];
			if (rdm ? received >= want : atomic_load(&msg_received) >= want)
				break;
		}
		bool any = false;
		for (int w = 0; w < WIN; w++) {
			if (atomic_load_explicit(&ops[w].state, memory_order_acquire) == 0)
				continue;
			any = true;
			EXPECT(atomic_load(&ops[w].state) == 1, "receive failed: %s", fi_strerror(ops[w].err));
			uint8_t *b = buf + (size_t)w * maxm;
			if (rdm) {
				size_t len = size_for(posted_seq[w], tid);
				EXPECT(ops[w].len == len && ops[w].tag == ((uint64_t)tid << 40 | posted_seq[w]),
				       "receive seq %llu: len %zu tag %#llx", (unsigned long long)posted_seq[w], ops[w].len,
				       (unsigned long long)ops[w].tag);
				expect_pattern(b, len, seed_for(tid, posted_seq[w], is_child), "tagged payload");
			} else {
				verify_msg(b, ops[w].len);
				atomic_fetch_add(&msg_received, 1);
			}
			atomic_fetch_add(&bytes_verified, ops[w].len);
			atomic_fetch_add(&msgs_verified, 1);
			received++;
			atomic_store(&ops[w].state, 0);
			posted_seq[w] = next_post++;
			if (rdm)
				POST(fi_trecv(ep, b, maxm, fi_mr_desc(mr), R.peer, (uint64_t)tid << 40 | posted_seq[w], 0,
					      &ops[w]));
			else
				POST(fi_recv(ep, b, maxm, fi_mr_desc(mr), 0, &ops[w]));
		}
		if (!any)
			poll_all();
	}
	if (rdm) {
		/* The receives beyond the peer's count: cancel, each gives one FI_ECANCELED entry. */
		for (int w = 0; w < WIN; w++) {
			if (atomic_load(&ops[w].state) != 0)
				continue;
			CHK(fi_cancel(&ep->fid, &ops[w]));
			wait_op(&ops[w], "canceled receive");
			EXPECT(atomic_load(&ops[w].state) == 2 && ops[w].err == FI_ECANCELED,
			       "canceled receive: state %d err %d", atomic_load(&ops[w].state), ops[w].err);
		}
	}
	/* MSG: the posted receives stay until the endpoint closes. */
	recv_mr[tid] = mr;
	recv_buf[tid] = buf;
	return NULL;
}

static void *rma_thread(void *arg)
{
	(void)arg;
	size_t n = sizeof(rdm_sizes) / sizeof(rdm_sizes[0]);
	uint8_t *w = alloc_buf(RMA_REGION), *r = alloc_buf(RMA_REGION);
	struct fid_mr *mw = reg(w, RMA_REGION, FI_WRITE), *mrd = reg(r, RMA_REGION, FI_READ);
	fi_addr_t dst = rdm ? R.peer : 0;
	struct op o;
	for (uint64_t i = 0; !atomic_load(&stop_send); i++) {
		size_t len = rdm_sizes[i % n];
		uint32_t seed = (uint32_t)(i * 31 + (is_child ? 5 : 3));
		fill_pattern(w, len, seed);
		memset(r, 0, len);
		atomic_store(&o.state, 0);
		POST(fi_write(ep, w, len, fi_mr_desc(mw), dst, peer_rma.addr, peer_rma.key, &o));
		wait_op(&o, "rma write");
		EXPECT(atomic_load(&o.state) == 1, "fi_write failed: %s", fi_strerror(o.err));
		atomic_store(&o.state, 0);
		POST(fi_read(ep, r, len, fi_mr_desc(mrd), dst, peer_rma.addr, peer_rma.key, &o));
		wait_op(&o, "rma read");
		EXPECT(atomic_load(&o.state) == 1, "fi_read failed: %s", fi_strerror(o.err));
		expect_pattern(r, len, seed, "rma read back");
		atomic_fetch_add(&rma_verified, len);
	}
	CHK(fi_close(&mw->fid));
	CHK(fi_close(&mrd->fid));
	free(w);
	free(r);
	return NULL;
}

static void *poller(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_all)) {
		poll_all();
		usleep(50);
	}
	return NULL;
}

static void setup_rdm(void)
{
	R.hints = rdm_hints(FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV);
	R.hints->domain_attr->threading = FI_THREAD_SAFE;
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, R.hints, &R.info));
	EXPECT(R.info->domain_attr->threading == FI_THREAD_SAFE, "threading %d", R.info->domain_attr->threading);
	CHK(fi_fabric(R.info->fabric_attr, &R.fabric, NULL));
	CHK(fi_domain(R.fabric, R.info, &R.domain, NULL));
	rdm_open_ep(&R);
	rdm_exchange(&R, true);
	ep = R.ep;
	txcq = R.txcq;
	rxcq = R.rxcq;
	dom = R.domain;
}

static void setup_msg(void)
{
	tctx_init(&T);
	T.tx_format = T.rx_format = FI_CQ_FORMAT_TAGGED;
	T.cq_size = 1024;
	T.hints = make_hints(FI_MSG | FI_RMA, 0);
	T.hints->domain_attr->threading = FI_THREAD_SAFE;
	T.hints->tx_attr->size = 256;
	T.hints->rx_attr->size = 256;
	if (!is_child) {
		server_listen(&T);
		struct fi_info *ci = server_wait_connreq(&T, NULL, NULL, NULL);
		EXPECT(ci->domain_attr->threading == FI_THREAD_SAFE, "threading %d", ci->domain_attr->threading);
		setup_active(&T, ci);
	} else {
		client_setup(&T);
	}
	ep = T.ep;
	txcq = T.txcq;
	rxcq = T.rxcq;
	dom = T.domain;
}

static void run(void)
{
	const char *s = getenv("TEST_SOAK_SECS");
	if (s && atoi(s) > 0)
		soak_secs = atoi(s);
	alarm((unsigned)soak_secs + (is_child ? 170 : 180));
	if (rdm)
		setup_rdm();
	else
		setup_msg();

	/* RMA target region for the peer. */
	uint8_t *region = alloc_buf(RMA_REGION);
	struct fid_mr *rmr = reg(region, RMA_REGION, FI_REMOTE_READ | FI_REMOTE_WRITE);
	struct rma_info mine = {.addr = (uintptr_t)region, .key = fi_mr_key(rmr), .len = RMA_REGION};

	pthread_t th[NSEND + NRECV + 2];
	int nt = 0;
	if (pthread_create(&th[nt++], NULL, poller, NULL))
		fail("pthread_create");
	/* MSG: receives go up before the connection completes (no RNR at the start). */
	for (unsigned i = 0; i < NRECV; i++)
		if (pthread_create(&th[nt++], NULL, receiver, (void *)(uintptr_t)i))
			fail("pthread_create");
	if (!rdm) {
		sleep_ms(200);
		if (!is_child)
			server_accept(&T, NULL, 0);
		else
			client_connect(&T, NULL, 0, NULL, NULL, NULL);
	}
	if (!is_child) {
		oob_send(&mine, sizeof(mine));
		oob_recv(&peer_rma, sizeof(peer_rma));
	} else {
		oob_recv(&peer_rma, sizeof(peer_rma));
		oob_send(&mine, sizeof(mine));
	}
	int first_sender = nt;
	for (unsigned i = 0; i < NSEND; i++)
		if (pthread_create(&th[nt++], NULL, sender, (void *)(uintptr_t)i))
			fail("pthread_create");
	if (pthread_create(&th[nt++], NULL, rma_thread, NULL))
		fail("pthread_create");
	uint64_t t0 = now_ms();
	while (now_ms() - t0 < (uint64_t)soak_secs * 1000) {
		sleep_ms(200);
		check_child();
	}
	atomic_store(&stop_send, 1);
	for (int i = first_sender; i < nt; i++)
		pthread_join(th[i], NULL);
	/* Counts both ways. */
	uint64_t peer_sent[NSEND];
	if (!is_child) {
		oob_send(sent_count, sizeof(sent_count));
		oob_recv(peer_sent, sizeof(peer_sent));
	} else {
		oob_recv(peer_sent, sizeof(peer_sent));
		oob_send(sent_count, sizeof(sent_count));
	}
	if (rdm) {
		for (int i = 0; i < NRECV; i++)
			expect_count[i] = peer_sent[i];
	} else {
		expect_count[0] = peer_sent[0] + peer_sent[1];
	}
	atomic_store(&expect_known, 1);
	for (int i = 1; i < first_sender; i++)
		pthread_join(th[i], NULL);
	uint64_t sent = sent_count[0] + sent_count[1];
	logmsg("soak %s %d s: sent %llu messages; received and verified %llu messages, %llu bytes; "
	       "RMA write+read verified %llu bytes; %llu completions",
	       rdm ? "rdm" : "msg", soak_secs, (unsigned long long)sent, (unsigned long long)atomic_load(&msgs_verified),
	       (unsigned long long)atomic_load(&bytes_verified), (unsigned long long)atomic_load(&rma_verified),
	       (unsigned long long)atomic_load(&completions));
	EXPECT(atomic_load(&msgs_verified) == (rdm ? expect_count[0] + expect_count[1] : expect_count[0]),
	       "verified %llu messages, the peer sent %llu", (unsigned long long)atomic_load(&msgs_verified),
	       (unsigned long long)(peer_sent[0] + peer_sent[1]));
	EXPECT(atomic_load(&msgs_verified) > 0 && atomic_load(&rma_verified) > 0, "no traffic");
	/* Both sides done before anyone tears down (the poller keeps progressing). */
	oob_signal(9);
	oob_wait(9);
	atomic_store(&stop_all, 1);
	pthread_join(th[0], NULL);

	/* Teardown in the wrong order first. */
	int r = fi_close(&dom->fid);
	EXPECT(r == -FI_EBUSY, "fi_close(domain) with an endpoint open: %d, want -FI_EBUSY", r);
	r = fi_close(&txcq->fid);
	EXPECT(r == -FI_EBUSY, "fi_close(cq) bound to an endpoint: %d, want -FI_EBUSY", r);
	if (rdm) {
		r = fi_close(&R.av->fid);
		EXPECT(r == -FI_EBUSY, "fi_close(av) bound to an endpoint: %d, want -FI_EBUSY", r);
	} else {
		r = fi_close(&T.eq->fid);
		EXPECT(r == -FI_EBUSY, "fi_close(eq) bound to an endpoint: %d, want -FI_EBUSY", r);
		r = fi_close(&T.fabric->fid);
		EXPECT(r == -FI_EBUSY, "fi_close(fabric) with a domain open: %d, want -FI_EBUSY", r);
	}
	CHK(fi_close(&ep->fid));
	if (rdm)
		R.ep = NULL;
	else
		T.ep = NULL;
	r = fi_close(&dom->fid);
	EXPECT(r == -FI_EBUSY, "fi_close(domain) with memory regions and CQs open: %d, want -FI_EBUSY", r);
	/* The objects refused above still work: a CQ read after its refused close. */
	struct fi_cq_tagged_entry ce;
	r = (int)fi_cq_read(txcq, &ce, 1);
	EXPECT(r == -FI_EAGAIN, "fi_cq_read after a refused fi_close: %d", r);
	for (int i = 0; i < NRECV; i++) {
		CHK(fi_close(&recv_mr[i]->fid));
		free(recv_buf[i]);
	}
	CHK(fi_close(&rmr->fid));
	free(region);
	logmsg("teardown: every close of an object in use gave -FI_EBUSY; the right order closed everything");
	if (rdm)
		rdm_close(&R);
	else
		tctx_close(&T);
	if (is_child)
		child_done();
	test_finish();
}

int main(int argc, char **argv)
{
	rdm = argc > 1 && strcmp(argv[1], "rdm") == 0;
	if (argc < 2 || (!rdm && strcmp(argv[1], "msg") != 0)) {
		fprintf(stderr, "usage: soak_threads msg|rdm\n");
		return 2;
	}
	test_start(rdm ? "soak_threads_rdm" : "soak_threads_msg");
	run();
}
