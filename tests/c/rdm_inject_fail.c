/*
 * rdm_inject_fail: injects to a peer that died without its disconnect
 * reaching us fail, each with one error entry, and injects to a live peer
 * arrive.
 *
 * Injects that fit inline go out unsignaled (docs/rdm-protocol.md,
 * "Unsignaled sends"): no completion is polled for them on success, and
 * each keeps its error report until a later signaled send retires it. This
 * test reaches the case where nothing retires them: the connection fails
 * under them.
 *
 *  - client A (an extra process) and child 0 each exchange a message with
 *    the server; the server then injects NOK messages to A, which A
 *    receives (byte-exact): they went out unsignaled, and nothing retired
 *    them before the connection failed below, yet they succeeded, so they
 *    must never get an error entry;
 *  - the server SIGKILLs A and reaps it, losing A's disconnect
 *    (FI_RSVERBS_FAULT_LOSE_DISCONNECT=1): its connection to A still stands,
 *    with credits, so the injects below leave at once, unsignaled;
 *  - the server injects NINJ messages to A. Within BOUND_MS the transmit CQ
 *    has exactly NINJ error entries (op_context NULL, FI_SEND), no success
 *    entry, and no more for 300 ms after (none reported twice, none for the
 *    NOK delivered ones). The suite checks the server's log for the line
 *    saying NINJ unsignaled sends failed with their connection (not in a
 *    queue), so the test cannot pass without them having been posted;
 *  - then NINJ injects (and one fi_tsend) to child 0 arrive byte-exact.
 */
#include "rdm_procs.h"

#define BOUND_MS 60000
#define NINJ 4
#define NOK 2
#define ILEN 64
#define TAG_A 0xa
#define TAG_B 0xb

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static void recv_one(fi_addr_t from, uint64_t tag, size_t len, uint32_t seed, const char *what)
{
	rdm_recv_check(&r, buf, desc, from, tag, len, seed, what);
}

static void send_one(fi_addr_t to, uint64_t tag, size_t len, uint32_t seed, const char *what)
{
	rdm_send_check(&r, buf + (1 << 19), desc, to, tag, len, seed, what);
}

static void inject_one(fi_addr_t to, uint64_t tag, uint32_t seed)
{
	uint8_t p[ILEN];
	fill_pattern(p, ILEN, seed);
	RETRY(&r, fi_tinject(r.ep, p, ILEN, to, tag));
	memset(p, 0xee, ILEN); /* the buffer is ours again at once */
}

/* Reads the transmit CQ for `ms`: counts error entries of injects (op_context
 * NULL); any other entry fails the test. */
static int inject_errors(int ms, int want)
{
	int n = 0;
	char b[512];
	for (uint64_t t0 = now_ms(); now_ms() - t0 < (uint64_t)ms && (want < 0 || n < want);) {
		struct fi_cq_tagged_entry e;
		ssize_t ret = fi_cq_read(r.txcq, &e, 1);
		if (ret == 1)
			fail("transmit completion (op_context %p, flags %#llx): injects to a dead peer succeeded?", e.op_context,
			     (unsigned long long)e.flags);
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			EXPECT(fi_cq_readerr(r.txcq, &err, 0) == 1, "fi_cq_readerr");
			EXPECT(err.op_context == NULL, "error entry with op_context %p: %s", err.op_context,
			       cq_err_str(r.txcq, &err, b, sizeof(b)));
			EXPECT(err.flags & FI_SEND, "error entry without FI_SEND (flags %#llx)", (unsigned long long)err.flags);
			EXPECT(err.err != 0, "error entry with err 0");
			rdm_check_prov_errno(r.txcq, &err, "inject error entry");
			logmsg("inject %d to the dead A: %s", n, cq_err_str(r.txcq, &err, b, sizeof(b)));
			n++;
			continue;
		}
		if (ret != -FI_EAGAIN)
			fail("fi_cq_read: %zd (%s)", ret, fi_strerror((int)-ret));
		sleep_ms(1);
	}
	return n;
}

static void server(void)
{
	char nb[64], na[64];
	chan_send_name(0, r.name, r.namelen);
	chan_send_name(1, r.name, r.namelen);
	chan_recv_name(0, nb, sizeof(nb));
	chan_recv_name(1, na, sizeof(na));
	fi_addr_t fb = av_insert_one(r.av, nb);
	fi_addr_t fa = av_insert_one(r.av, na);

	recv_one(fb, TAG_B, 1000, 7000, "child 0's message");
	recv_one(fa, TAG_A, 1000, 5000, "A's message");
	send_one(fa, TAG_A, 1000, 5001, "answer to A");
	for (int i = 0; i < NOK; i++)
		inject_one(fa, TAG_A, 5100 + i);
	chan_wait(1, 1); /* A has the answer and the injects */

	kill(xprocs[1].pid, SIGKILL);
	xprocs[1].reaped = true;
	int st;
	EXPECT(waitpid(xprocs[1].pid, &st, 0) == xprocs[1].pid && WIFSIGNALED(st), "A did not die of SIGKILL (%#x)", st);
	for (uint64_t t0 = now_ms(); now_ms() - t0 < 1000;) { /* the DISCONNECTED event is read (and ignored) */
		struct fi_cq_tagged_entry e;
		(void)fi_cq_read(r.rxcq, &e, 0);
		sleep_ms(5);
	}
	logmsg("A killed and reaped; its disconnect ignored");

	uint64_t t0 = now_ms();
	for (int i = 0; i < NINJ; i++)
		inject_one(fa, TAG_A, 6000 + i);
	int n = inject_errors(BOUND_MS, NINJ);
	EXPECT(n == NINJ, "%d of %d injects to the dead A reported an error within %d ms", n, NINJ, BOUND_MS);
	logmsg("%d injects to the dead A failed, %llu ms after they were posted", n, (unsigned long long)(now_ms() - t0));
	n = inject_errors(300, -1);
	EXPECT(n == 0, "%d more error entries for the injects to A (%d of them were delivered)", n, NOK);

	/* a live peer: injects arrive */
	for (int i = 0; i < NINJ; i++)
		inject_one(fb, TAG_B, 8000 + i);
	send_one(fb, TAG_B, 1000, 8100, "fi_tsend to child 0 after the injects");
	chan_wait(0, 1);
	logmsg("child 0 has the %d injects and the send", NINJ);
	rdm_progress_start(&r);
	chan_wait(0, 2);
	xwait_all();
	rdm_progress_stop();
}

static void client_b(void)
{
	char sn[64];
	chan_recv_name(0, sn, sizeof(sn));
	chan_send_name(0, r.name, r.namelen);
	fi_addr_t srv = av_insert_one(r.av, sn);
	send_one(srv, TAG_B, 1000, 7000, "child 0's message");
	for (int i = 0; i < NINJ; i++) {
		char w[64];
		snprintf(w, sizeof(w), "inject %d from the server", i);
		recv_one(srv, TAG_B, ILEN, 8000 + i, w);
	}
	recv_one(srv, TAG_B, 1000, 8100, "the server's fi_tsend");
	chan_signal(0, 1);
	rdm_progress_start(&r);
	chan_signal(0, 2);
	sleep_ms(300);
	rdm_progress_stop();
}

static void client_a(void)
{
	char sn[64];
	chan_recv_name(CHAN_SELF, sn, sizeof(sn));
	chan_send_name(CHAN_SELF, r.name, r.namelen);
	fi_addr_t srv = av_insert_one(r.av, sn);
	send_one(srv, TAG_A, 1000, 5000, "A's message");
	recv_one(srv, TAG_A, 1000, 5001, "answer to A");
	for (int i = 0; i < NOK; i++) {
		char w[64];
		snprintf(w, sizeof(w), "inject %d to A", i);
		recv_one(srv, TAG_A, ILEN, 5100 + i, w);
	}
	chan_signal(CHAN_SELF, 1);
	for (;;) /* until SIGKILL; no progress calls */
		pause();
}

int main(void)
{
	bool srv = test_start("rdm_inject_fail");
	int role = 0;
	if (srv && xspawn() == 0) {
		srv = false;
		role = 1;
	}
	if (srv)
		setenv("FI_RSVERBS_FAULT_LOSE_DISCONNECT", "1", 1);
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	buf = alloc_buf(1 << 20);
	mr = rdm_mr_reg(&r, buf, 1 << 20, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else if (role == 1)
		client_a();
	else
		client_b();
	rdm_test_end(srv, &r, mr, buf);
}
