/*
 * msg_peerkill: a MSG peer SIGKILLed in the middle of eager sends and large
 * RMA transfers.
 *
 * The parent (server, the survivor) accepts the child and posts NRECV
 * receives, NSEND/2 4 KiB sends (the child has posted only VICTIM_RECVS
 * receives, so the later ones wait in RNR retry), NRMA 1 MiB RDMA writes into
 * and NRMA 1 MiB RDMA reads from the child's memory (queued behind them),
 * SIGKILLs the child, then posts the other NSEND/2 sends (as long as the
 * provider accepts them).
 * Then, within KILL_BOUND_MS:
 *   - FI_SHUTDOWN arrives on the EQ (an error entry also counts: the peer is
 *     gone either way), and
 *   - every operation posted completes exactly once, successfully or with an
 *     error entry: each context is seen once, none is unknown, none missing.
 * No call may hang (watchdog).  Then a new client process connects to the
 * same passive endpoint and a clean exchange (send both ways, pattern
 * checked) shows the provider is fine after the loss.
 */
#include "common.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRECV 64
#define NSEND 256
#define NRMA 16
#define MSG 4096
#define RMA_LEN (1 << 20)
#define NOPS (NRECV + NSEND + 2 * NRMA)
#define KILL_BOUND_MS 60000
#define VICTIM_RECVS 32

static uint8_t seen[NOPS];
static uint8_t posted_flag[NOPS];
static void *ctx_of(int i) { return (void *)(uintptr_t)(0x1000 + i); }
static int idx_of(void *c)
{
	uintptr_t v = (uintptr_t)c;
	return v >= 0x1000 && v < 0x1000 + NOPS ? (int)(v - 0x1000) : -1;
}

/* ---- the peer that gets killed -------------------------------------------- */

static void victim_client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, 0);
	client_setup(&t);
	uint8_t *rma = alloc_buf((size_t)NRMA * RMA_LEN);
	fill_pattern(rma, (size_t)NRMA * RMA_LEN, 5);
	struct fid_mr *rmr = mr_reg(&t, rma, (size_t)NRMA * RMA_LEN, FI_REMOTE_READ | FI_REMOTE_WRITE);
	/* Fewer receives than the survivor sends, never reposted: its later sends
	 * wait in RNR retry, and the RMA queued behind them too (RC executes a
	 * send queue in order), so they are surely in flight at the kill. */
	uint8_t *rb = alloc_buf((size_t)NSEND * MSG);
	struct fid_mr *rbm = mr_reg(&t, rb, (size_t)NSEND * MSG, FI_RECV);
	for (int i = 0; i < VICTIM_RECVS; i++)
		CHK(fi_recv(t.ep, rb + (size_t)i * MSG, MSG, fi_mr_desc(rbm), 0, NULL));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	struct rma_info ri = {.addr = (uintptr_t)rma, .key = fi_mr_key(rmr), .len = (uint64_t)NRMA * RMA_LEN};
	oob_send(&ri, sizeof(ri));
	/* Receive until killed. */
	for (;;) {
		struct fi_cq_data_entry e;
		ssize_t r = fi_cq_read(t.rxcq, &e, 1);
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(t.rxcq, &err, 0);
		}
		(void)fi_cq_read(t.txcq, &e, 0);
		check_child();
	}
}

/* ---- the clean client after the loss --------------------------------------- */

static void second_client(int wfd)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, 0);
	client_setup(&t);
	uint8_t *b = alloc_buf(MSG);
	struct fid_mr *m = mr_reg(&t, b, MSG, FI_SEND | FI_RECV);
	CHK(fi_recv(t.ep, b, MSG, fi_mr_desc(m), 0, (void *)1));
	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	struct fi_cq_data_entry e;
	cq_read_one(t.rxcq, &e, WAIT_MS, "second client: receive");
	EXPECT(e.len == MSG, "len %zu", e.len);
	expect_pattern(b, MSG, 77, "second client: message");
	fill_pattern(b, MSG, 78);
	CHK(fi_send(t.ep, b, MSG, fi_mr_desc(m), 0, (void *)2));
	struct fi_cq_entry te;
	cq_read_one(t.txcq, &te, WAIT_MS, "second client: send");
	/* Tell the server the send is acknowledged: the server's receive
	 * completion can come before its RC ACK is on the wire (rxe posts the
	 * CQE first), and a disconnect in between leaves this send retrying
	 * into a dead QP until "transport retry counter exceeded". */
	ssize_t w = write(wfd, "S", 1);
	(void)w;
	/* Wait for the server's shutdown before closing. */
	uint32_t ev = 0;
	uint8_t buf[256];
	eq_wait(&t, &ev, buf, sizeof(buf), WAIT_MS);
	EXPECT(ev == FI_SHUTDOWN, "second client: %s", ev_name(ev));
	mr_close(m);
	tctx_close(&t);
	free(b);
	w = write(wfd, "K", 1);
	(void)w;
	exit(0);
}

/* ---- the survivor ------------------------------------------------------------ */

static int poll_cq(struct fid_cq *cq, bool tx, int *errors)
{
	int got = 0;
	for (;;) {
		/* tx: FI_CQ_FORMAT_CONTEXT, rx: FI_CQ_FORMAT_DATA (tctx defaults) */
		struct fi_cq_entry ce[16];
		struct fi_cq_data_entry de[16];
		ssize_t r = tx ? fi_cq_read(cq, ce, 16) : fi_cq_read(cq, de, 16);
		if (r == -FI_EAGAIN)
			return got;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			ssize_t n = fi_cq_readerr(cq, &err, 0);
			EXPECT(n == 1, "fi_cq_readerr returned %zd", n);
			int i = idx_of(err.op_context);
			EXPECT(i >= 0, "error entry with an unknown context %p (err %d)", err.op_context, err.err);
			EXPECT(!seen[i], "operation %d completed twice (second: error %d)", i, err.err);
			seen[i] = 2;
			(*errors)++;
			got++;
			continue;
		}
		EXPECT(r > 0, "fi_cq_read returned %zd (%s)", r, fi_strerror((int)-r));
		for (ssize_t k = 0; k < r; k++) {
			void *c = tx ? ce[k].op_context : de[k].op_context;
			int i = idx_of(c);
			EXPECT(i >= 0, "completion with an unknown context %p", c);
			EXPECT(!seen[i], "operation %d completed twice", i);
			seen[i] = 1;
			got++;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "second") == 0) {
		/* The client after the loss, exec'd by the survivor. */
		test_name = "msg_peerkill";
		test_rebind_child(atoi(argv[2]));
		second_client(atoi(argv[3]));
	}
	if (!test_start("msg_peerkill"))
		victim_client();

	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, 0);
	server_listen(&t);
	struct fi_info *ci = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, ci);
	uint8_t *buf = alloc_buf((size_t)NRECV * MSG + (size_t)NSEND * MSG + (size_t)2 * NRMA * RMA_LEN);
	size_t buflen = (size_t)NRECV * MSG + (size_t)NSEND * MSG + (size_t)2 * NRMA * RMA_LEN;
	struct fid_mr *mr = mr_reg(&t, buf, buflen, FI_SEND | FI_RECV | FI_READ | FI_WRITE);
	void *desc = fi_mr_desc(mr);
	uint8_t *rbuf = buf, *sbuf = buf + (size_t)NRECV * MSG, *wbuf = sbuf + (size_t)NSEND * MSG,
		*dbuf = wbuf + (size_t)NRMA * RMA_LEN;
	fill_pattern(sbuf, (size_t)NSEND * MSG + (size_t)NRMA * RMA_LEN, 9);
	for (int i = 0; i < NRECV; i++)
		CHK(fi_recv(t.ep, rbuf + (size_t)i * MSG, MSG, desc, 0, ctx_of(i)));
	server_accept(&t, NULL, 0);
	struct rma_info ri;
	oob_recv(&ri, sizeof(ri));

	/* Post the large RMA first, then the sends; kill the peer when half the
	 * sends are posted, without waiting: large transfers and sends are in
	 * flight.  Posting goes on until the provider refuses (not counted). */
	int posted = NRECV, errors = 0, done = 0;
	int done_at_kill = -1, posted_at_kill = 0;
	bool can_post = true;
	uint64_t tk = 0;
	pid_t child = test_child_pid();
	for (int i = 0; i < NRECV; i++)
		posted_flag[i] = 1;
#define POST_OP(idx, expr)                                                                     \
	do {                                                                                   \
		ssize_t r_;                                                                    \
		if (!can_post)                                                                 \
			break;                                                                 \
		while ((r_ = (expr)) == -FI_EAGAIN)                                            \
			done += poll_cq(t.txcq, true, &errors);                                \
		if (r_ == 0) {                                                                 \
			posted_flag[idx] = 1;                                                  \
			posted++;                                                              \
		} else if (done_at_kill >= 0) {                                                \
			logmsg("posting after the kill: %zd (%s): stop", r_, fi_strerror((int)-r_)); \
			can_post = false;                                                      \
		} else {                                                                       \
			CHK(r_);                                                               \
		}                                                                              \
	} while (0)
	for (int i = 0; i < NSEND / 2; i++)
		POST_OP(NRECV + i, fi_send(t.ep, sbuf + (size_t)i * MSG, MSG, desc, 0, ctx_of(NRECV + i)));
	for (int i = 0; i < NRMA; i++) {
		POST_OP(NRECV + NSEND + i, fi_write(t.ep, wbuf + (size_t)i * RMA_LEN, RMA_LEN, desc, 0,
						   ri.addr + (uint64_t)i * RMA_LEN, ri.key, ctx_of(NRECV + NSEND + i)));
		POST_OP(NRECV + NSEND + NRMA + i,
			fi_read(t.ep, dbuf + (size_t)i * RMA_LEN, RMA_LEN, desc, 0, ri.addr + (uint64_t)i * RMA_LEN, ri.key,
				ctx_of(NRECV + NSEND + NRMA + i)));
	}
	done += poll_cq(t.txcq, true, &errors);
	done_at_kill = done;
	posted_at_kill = posted;
	logmsg("killing the client: %d operations posted, %d complete", posted, done);
	EXPECT(kill(child, SIGKILL) == 0, "kill(%d): %s", (int)child, strerror(errno));
	tk = now_ms();
	{
		int st;
		EXPECT(waitpid(child, &st, 0) == child && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "client not killed");
	}
	test_forget_child();
	for (int i = NSEND / 2; i < NSEND; i++)
		POST_OP(NRECV + i, fi_send(t.ep, sbuf + (size_t)i * MSG, MSG, desc, 0, ctx_of(NRECV + i)));
	EXPECT(posted_at_kill - done_at_kill > NRECV, "nothing but receives in flight at the kill (%d posted, %d done)",
	       posted_at_kill, done_at_kill);

	bool shutdown = false;
	uint64_t t_shut = 0, t_all = 0;
	while (now_ms() - tk < KILL_BOUND_MS && (!shutdown || done < posted)) {
		done += poll_cq(t.txcq, true, &errors);
		done += poll_cq(t.rxcq, false, &errors);
		if (done == posted && !t_all)
			t_all = now_ms() - tk;
		if (!shutdown) {
			uint32_t ev;
			uint8_t eb[256];
			ssize_t r = fi_eq_read(t.eq, &ev, eb, sizeof(eb), 0);
			if (r >= 0) {
				EXPECT(ev == FI_SHUTDOWN, "EQ event %s after the kill", ev_name(ev));
				shutdown = true;
				t_shut = now_ms() - tk;
			} else if (r == -FI_EAVAIL) {
				struct fi_eq_err_entry ee;
				memset(&ee, 0, sizeof(ee));
				CHK(fi_eq_readerr(t.eq, &ee, 0));
				logmsg("EQ error entry after the kill: %s", fi_strerror(ee.err));
				shutdown = true;
				t_shut = now_ms() - tk;
			} else {
				EXPECT(r == -FI_EAGAIN, "fi_eq_read: %zd", r);
			}
		}
		usleep(100);
	}
	EXPECT(shutdown, "no FI_SHUTDOWN within %d ms of the kill", KILL_BOUND_MS);
	int missing = 0;
	for (int i = 0; i < NOPS; i++) {
		missing += posted_flag[i] && !seen[i];
		EXPECT(posted_flag[i] || !seen[i], "operation %d completed but was never posted", i);
	}
	EXPECT(done == posted && !missing, "%d of %d operations never completed within %d ms of the kill", missing,
	       posted, KILL_BOUND_MS);
	logmsg("after the kill: FI_SHUTDOWN at %llu ms; all %d operations posted (%d in flight at the kill, "
	       "%d posted after it) completed exactly once by %llu ms: %d successfully, %d error entries",
	       (unsigned long long)t_shut, posted, posted_at_kill - done_at_kill, posted - posted_at_kill,
	       (unsigned long long)t_all, posted - errors, errors);
	cq_expect_empty(t.txcq, 300, "after every operation completed");
	cq_expect_empty(t.rxcq, 300, "after every operation completed");
	/* Posting on the dead endpoint fails cleanly. */
	ssize_t r = fi_send(t.ep, sbuf, MSG, desc, 0, NULL);
	EXPECT(r < 0, "fi_send on a shut-down endpoint returned %zd", r);
	logmsg("fi_send after the shutdown: %zd (%s)", r, fi_strerror((int)-r));
	mr_close(mr);
	CHK(fi_close(&t.ep->fid));
	t.ep = NULL;
	CHK(fi_close(&t.txcq->fid));
	CHK(fi_close(&t.rxcq->fid));
	t.txcq = t.rxcq = NULL;
	CHK(fi_close(&t.domain->fid));
	t.domain = NULL;
	fi_freeinfo(t.info);
	t.info = NULL;

	/* A new client connects to the same passive endpoint. */
	int pfd[2];
	EXPECT(pipe(pfd) == 0, "pipe");
	char addr[128];
	size_t alen = sizeof(addr);
	CHK(fi_getname(&t.pep->fid, addr, &alen));
	int sv[2];
	EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	/* fork + exec: a process must not use the verbs contexts it inherited. */
	pid_t c2 = fork();
	EXPECT(c2 >= 0, "fork");
	if (c2 == 0) {
		char a1[16], a2[16];
		close(pfd[0]);
		close(sv[0]);
		snprintf(a1, sizeof(a1), "%d", sv[1]);
		snprintf(a2, sizeof(a2), "%d", pfd[1]);
		execl("/proc/self/exe", "msg_peerkill", "second", a1, a2, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	close(sv[1]);
	uint32_t l32 = (uint32_t)alen;
	EXPECT(write(sv[0], &l32, 4) == 4 && write(sv[0], addr, alen) == (ssize_t)alen, "oob to the second client");
	ci = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, ci);
	uint8_t *b = alloc_buf(MSG);
	mr = mr_reg(&t, b, MSG, FI_SEND | FI_RECV);
	CHK(fi_recv(t.ep, b, MSG, fi_mr_desc(mr), 0, (void *)1));
	server_accept(&t, NULL, 0);
	uint8_t *sb = alloc_buf(MSG);
	struct fid_mr *smr = mr_reg(&t, sb, MSG, FI_SEND);
	fill_pattern(sb, MSG, 77);
	CHK(fi_send(t.ep, sb, MSG, fi_mr_desc(smr), 0, (void *)2));
	struct fi_cq_entry te;
	cq_read_one(t.txcq, &te, WAIT_MS, "after the loss: send");
	struct fi_cq_data_entry de;
	cq_read_one(t.rxcq, &de, WAIT_MS, "after the loss: receive");
	expect_pattern(b, MSG, 78, "after the loss: message");
	char ok = 0;
	EXPECT(read(pfd[0], &ok, 1) == 1 && ok == 'S', "the second client's send did not complete");
	CHK(fi_shutdown(t.ep, 0));
	EXPECT(read(pfd[0], &ok, 1) == 1 && ok == 'K', "the second client failed");
	int st;
	EXPECT(waitpid(c2, &st, 0) == c2 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "second client status %#x", st);
	logmsg("a new connection after the loss works");
	mr_close(mr);
	mr_close(smr);
	tctx_close(&t);
	free(buf);
	free(b);
	free(sb);
	printf("PASS %s\n", test_name);
	fflush(stdout);
	return 0;
}
