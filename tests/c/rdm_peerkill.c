/*
 * rdm_peerkill: a peer dies (SIGKILL) in the middle of traffic.
 *
 * The server talks to client B (the usual child) and client A (an extra
 * process); A' is a third process that waits until A is dead.
 *  - B ping-pongs with the server for the whole test (1000 B and 50000 B
 *    messages, each answered with the same size), and must never see an
 *    error or wrong data: traffic with B is unaffected by A's death;
 *  - A streams tagged eager and rendezvous messages to the server (which
 *    has 64 receives bound to A posted) and posts no receives itself; the
 *    server sends A 8 eager and 4 rendezvous messages (the rendezvous ones
 *    wait for A's read, which never comes);
 *  - once 6 of A's messages have arrived the server SIGKILLs A and sends it
 *    two more messages. Within BOUND_MS every send to A has exactly one
 *    completion (none lost, none twice): eager ones success or error, the
 *    rendezvous ones an error. Receives bound to A that completed have A's
 *    exact data in order; the rest are canceled (FI_ECANCELED), so every
 *    receive has exactly one completion too;
 *  - then A' starts and binds A's address (fi_getinfo node/service with
 *    FI_SOURCE): fi_getname equals A's name; the server's next sends to A's
 *    fi_addr connect again and arrive, and A''s reply arrives from A's
 *    fi_addr (FI_SOURCE).
 */
#include "rdm_procs.h"


#define BOUND_MS 30000
#define NRA 64      /* receives bound to A */
#define RASZ 131072
#define NSA_E 8     /* eager sends to A before the kill */
#define NSA_R 4     /* rendezvous sends to A */
#define NSA_LATE 2  /* eager sends to A right after the kill */
#define NSA (NSA_E + NSA_R + NSA_LATE)
#define A_LEN(j) (((j) % 3 == 2) ? 100000u : 1000u)
#define B_LEN(k) (((k) % 2) ? 50000u : 1000u)
#define TAG_A 0xa
#define TAG_A2 0xa2

enum { C_RA = 1, C_SA, C_RB, C_SB, C_SA2, C_RA2 };
#define CTX(c, i) ((void *)(uintptr_t)(((uint64_t)(c) << 16) | (uint64_t)(i)))
#define CLS(p) ((int)((uintptr_t)(p) >> 16))
#define IDX(p) ((int)((uintptr_t)(p) & 0xffff))

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

/* ---- server state ---- */
static fi_addr_t fa, fb;
static uint8_t *ra_buf, *sa_buf, *rb_buf, *sb_buf, *a2_buf;
static int ra_state[NRA];   /* 0 posted, 1 ok, 2 error, 3 canceled */
static int sa_state[NSA];   /* 0 not sent, 1 outstanding, 2 ok, 3 error */
static int sa_err[NSA];
static int ra_ok, ra_err, sa_ok, sa_errs, nsa;
static int b_rounds, b_stop, b_done;
static int sa2_ok, ra2_ok;

static void post_rb(int k)
{
	RETRY(&r, fi_recv(r.ep, rb_buf + (size_t)(k % 2) * 65536, 65536, desc, fb, CTX(C_RB, k)));
}

static void on_ok(struct fi_cq_tagged_entry *e, fi_addr_t src)
{
	int c = CLS(e->op_context), i = IDX(e->op_context);
	char w[64];
	switch (c) {
	case C_RA:
		EXPECT(i < NRA && ra_state[i] == 0, "receive from A #%d completed twice", i);
		ra_state[i] = 1;
		ra_ok++;
		snprintf(w, sizeof(w), "A's message %d", i);
		EXPECT(e->len == A_LEN(i) && e->tag == TAG_A, "%s: len %zu tag %#llx", w, e->len, (unsigned long long)e->tag);
		EXPECT(src == fa, "%s: source %#llx", w, (unsigned long long)src);
		expect_pattern(ra_buf + (size_t)i * RASZ, e->len, 5000 + i, w);
		break;
	case C_SA:
		EXPECT(i < NSA && sa_state[i] == 1, "send to A #%d completed twice (state %d)", i, sa_state[i]);
		sa_state[i] = 2;
		sa_ok++;
		break;
	case C_RB: {
		snprintf(w, sizeof(w), "B's message %d", i);
		EXPECT(i == b_rounds, "%s: expected %d", w, b_rounds);
		EXPECT(e->len == B_LEN(i) && src == fb, "%s: len %zu src %#llx", w, e->len, (unsigned long long)src);
		expect_pattern(rb_buf + (size_t)(i % 2) * 65536, e->len, 7000 + i, w);
		uint8_t *sb = sb_buf + (size_t)(i % 2) * 65536;
		fill_pattern(sb, B_LEN(i), 8000 + i);
		RETRY(&r, fi_senddata(r.ep, sb, B_LEN(i), desc, b_stop ? 2 : 1, fb, CTX(C_SB, i)));
		b_rounds++;
		if (!b_stop)
			post_rb(i + 1);
		else
			b_done = 1;
		break;
	}
	case C_SB:
		break;
	case C_SA2:
		sa2_ok++;
		break;
	case C_RA2:
		EXPECT(e->len == 5000 && e->tag == TAG_A2 && src == fa, "A''s message: len %zu tag %#llx src %#llx", e->len,
		       (unsigned long long)e->tag, (unsigned long long)src);
		expect_pattern(a2_buf, 5000, 9100, "A''s message");
		ra2_ok++;
		break;
	default:
		fail("completion with op_context %p", e->op_context);
	}
}

static void on_err(struct fi_cq_err_entry *err, struct fid_cq *cq)
{
	int c = CLS(err->op_context), i = IDX(err->op_context);
	char b[512];
	switch (c) {
	case C_RA:
		EXPECT(i < NRA && ra_state[i] == 0, "receive from A #%d completed twice", i);
		if (err->err == FI_ECANCELED) {
			ra_state[i] = 3;
		} else {
			logmsg("receive from A #%d: %s", i, cq_err_str(cq, err, b, sizeof(b)));
			ra_state[i] = 2;
			ra_err++;
		}
		break;
	case C_SA:
		EXPECT(i < NSA && sa_state[i] == 1, "send to A #%d completed twice (state %d)", i, sa_state[i]);
		sa_state[i] = 3;
		sa_err[i] = err->err;
		sa_errs++;
		logmsg("send to A #%d: %s", i, cq_err_str(cq, err, b, sizeof(b)));
		break;
	default:
		fail("error completion (op_context %p): %s", err->op_context, cq_err_str(cq, err, b, sizeof(b)));
	}
}

/* Reads what both CQs have (at most a few entries). */
static void pump(void)
{
	for (int n = 0; n < 8; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src = 0xdeadbeef;
		struct fid_cq *cq = n % 2 ? r.txcq : r.rxcq;
		ssize_t ret = fi_cq_readfrom(cq, &e, 1, &src);
		if (ret == 1) {
			on_ok(&e, src);
		} else if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			EXPECT(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
			on_err(&err, cq);
		} else if (ret != -FI_EAGAIN) {
			fail("fi_cq_readfrom: %zd (%s)", ret, fi_strerror((int)-ret));
		}
	}
	xcheck();
}

#define PUMP_UNTIL(cond, ms, ...)                                              \
	do {                                                                   \
		uint64_t pu_t0__ = now_ms();                                   \
		while (!(cond)) {                                              \
			pump();                                                \
			if (now_ms() - pu_t0__ > (uint64_t)(ms))               \
				fail(__VA_ARGS__);                             \
		}                                                              \
	} while (0)

static void send_a(int i, size_t len)
{
	uint8_t *p = sa_buf + (size_t)i * 200064;
	fill_pattern(p, len, 6000 + i);
	sa_state[i] = 1;
	nsa++;
	RETRY(&r, fi_send(r.ep, p, len, desc, fa, CTX(C_SA, i)));
}

static void server(void)
{
	char nb[64], na[64];
	chan_send_name(0, r.name, r.namelen);
	chan_send_name(1, r.name, r.namelen);
	size_t lb = chan_recv_name(0, nb, sizeof(nb));
	size_t la = chan_recv_name(1, na, sizeof(na));
	(void)lb;
	fb = av_insert_one(r.av, nb);
	fa = av_insert_one(r.av, na);
	ra_buf = buf;
	sa_buf = ra_buf + (size_t)NRA * RASZ;
	rb_buf = sa_buf + (size_t)NSA * 200064;
	sb_buf = rb_buf + 2 * 65536;
	a2_buf = sb_buf + 2 * 65536;

	/* B's ping-pong runs from now on */
	post_rb(0);
	chan_signal(0, 1);
	PUMP_UNTIL(b_rounds >= 2, 60000, "B's ping-pong did not start (%d rounds)", b_rounds);
	for (int i = 0; i < NRA; i++)
		RETRY(&r, fi_trecv(r.ep, ra_buf + (size_t)i * RASZ, RASZ, desc, fa, TAG_A, 0, CTX(C_RA, i)));
	chan_signal(1, 1);
	for (int i = 0; i < NSA_E; i++)
		send_a(i, 2000);
	for (int i = 0; i < NSA_R; i++)
		send_a(NSA_E + i, 200000);
	PUMP_UNTIL(ra_ok >= 6, 60000, "A's stream did not start (%d received)", ra_ok);
	int b_at_kill = b_rounds;
	EXPECT(sa_state[NSA_E] == 1, "a rendezvous send to A completed although A posted no receive");
	EXPECT(ra_ok < NRA, "all %d receives bound to A completed before the kill (A too fast)", NRA);

	/* kill A in the middle of its stream */
	uint64_t t_kill = now_ms();
	kill(xprocs[1].pid, SIGKILL);
	xprocs[1].reaped = true; /* xcheck() leaves it alone: reaped below */
	bool a_dead = false;
	for (int i = 0; i < NSA_LATE; i++)
		send_a(NSA_E + NSA_R + i, 2000);
	logmsg("A killed after %d of its messages; %d of %d sends to A already complete", ra_ok, sa_ok, NSA_E + NSA_R);
	/* reap A (keep serving meanwhile: the server must not block on anything) */
	PUMP_UNTIL(({
			   int st__;
			   pid_t w__ = waitpid(xprocs[1].pid, &st__, WNOHANG);
			   if (w__ == xprocs[1].pid) {
				   EXPECT(WIFSIGNALED(st__), "A exited with status %#x instead of dying of SIGKILL", st__);
				   a_dead = true;
			   }
			   a_dead;
		   }),
		   BOUND_MS, "A (pid %d) did not die within %d ms of SIGKILL", (int)xprocs[1].pid, BOUND_MS);
	logmsg("A reaped %llu ms after the kill", (unsigned long long)(now_ms() - t_kill));
	PUMP_UNTIL(sa_ok + sa_errs == nsa, BOUND_MS,
		   "%d of %d sends to A still without a completion %d ms after A died (ok %d, errors %d)",
		   nsa - sa_ok - sa_errs, nsa, BOUND_MS, sa_ok, sa_errs);
	uint64_t t_all = now_ms() - t_kill;
	for (int i = NSA_E; i < NSA_E + NSA_R; i++)
		EXPECT(sa_state[i] == 3, "rendezvous send %d to the dead A succeeded", i);
	logmsg("every send to A completed %llu ms after the kill: %d ok, %d errors", (unsigned long long)t_all, sa_ok,
	       sa_errs);
	/* B carried on meanwhile, and carries on */
	PUMP_UNTIL(b_rounds >= b_at_kill + 3, 60000, "B's ping-pong stalled after A died (%d rounds)", b_rounds);
	int ra_before_cancel = ra_ok + ra_err;
	for (int i = 0; i < NRA; i++)
		if (ra_state[i] == 0)
			CHK(fi_cancel(&r.ep->fid, CTX(C_RA, i)));
	int ncanc = 0;
	PUMP_UNTIL(({
			   ncanc = 0;
			   for (int i = 0; i < NRA; i++)
				   ncanc += ra_state[i] == 3;
			   ra_ok + ra_err + ncanc == NRA;
		   }),
		   WAIT_MS, "receives bound to A: %d ok + %d errors + %d canceled of %d", ra_ok, ra_err, ncanc, NRA);
	logmsg("receives bound to A: %d with data, %d errors, %d canceled (%d completed before the cancels)", ra_ok, ra_err,
	       ncanc, ra_before_cancel);
	/* nothing more for A: 200 ms more of completions. B's ping-pong goes on
	 * (its sends complete on the same CQ, so the CQ need not be empty); a
	 * second completion of any of A's operations fails in on_ok/on_err. */
	for (uint64_t t0 = now_ms(); now_ms() - t0 < 200;)
		pump();
	EXPECT(sa_ok + sa_errs == nsa && ra_ok + ra_err + ncanc == NRA, "A's totals changed: sends %d+%d, receives %d+%d+%d",
	       sa_ok, sa_errs, ra_ok, ra_err, ncanc);

	/* A' on A's address */
	chan_send_name(2, na, la);
	chan_send_name(2, r.name, r.namelen);
	for (;;) { /* A' is ready when it says so; keep B going meanwhile */
		struct pollfd pfd = { .fd = xprocs[2].fd, .events = POLLIN };
		if (poll(&pfd, 1, 0) == 1)
			break;
		pump();
	}
	chan_wait(2, 1);
	RETRY(&r, fi_trecv(r.ep, a2_buf, 8192, desc, fa, TAG_A2, 0, CTX(C_RA2, 0)));
	uint8_t *p = sa_buf;
	fill_pattern(p, 3000, 9000);
	fill_pattern(p + 4096, 150000, 9001);
	RETRY(&r, fi_send(r.ep, p, 3000, desc, fa, CTX(C_SA2, 0)));
	RETRY(&r, fi_send(r.ep, p + 4096, 150000, desc, fa, CTX(C_SA2, 1)));
	PUMP_UNTIL(sa2_ok == 2 && ra2_ok == 1, WAIT_MS, "A' after the restart: %d of 2 sends, %d of 1 receives", sa2_ok,
		   ra2_ok);
	logmsg("A' on A's address: sends to A's fi_addr reconnected, reply from A's fi_addr");
	b_stop = 1;
	PUMP_UNTIL(b_done, WAIT_MS, "B's last round");
	logmsg("B: %d rounds, none failed", b_rounds);
	rdm_progress_start(&r);
	chan_wait(2, 2);
	chan_wait(0, 2);
	xwait_all();
	rdm_progress_stop();
}

/* ---- clients ---- */

static void client_b(fi_addr_t srv)
{
	chan_wait(0, 1);
	uint8_t *sb = buf, *rb = buf + 65536;
	for (int k = 0;; k++) {
		struct fi_cq_tagged_entry e;
		char w[64];
		memset(rb, 0, B_LEN(k));
		RETRY(&r, fi_recv(r.ep, rb, 65536, desc, srv, (void *)0x1));
		fill_pattern(sb, B_LEN(k), 7000 + k);
		RETRY(&r, fi_send(r.ep, sb, B_LEN(k), desc, srv, (void *)0x2));
		snprintf(w, sizeof(w), "B round %d", k);
		rdm_expect(r.txcq, (void *)0x2, FI_SEND, NULL, w);
		fi_addr_t src = rdm_expect(r.rxcq, (void *)0x1, FI_RECV | FI_REMOTE_CQ_DATA, &e, w);
		EXPECT(src == srv && e.len == B_LEN(k), "%s: src %#llx len %zu", w, (unsigned long long)src, e.len);
		expect_pattern(rb, e.len, 8000 + k, w);
		if (e.data == 2)
			break;
		EXPECT(e.data == 1, "%s: data %#llx", w, (unsigned long long)e.data);
	}
	chan_signal(0, 2);
}

static void client_a(fi_addr_t srv)
{
	chan_wait(CHAN_SELF, 1);
	bool busy[16] = { 0 };
	for (int j = 0;; j++) {
		int s = -1;
		while (s < 0) {
			for (int k = 0; k < 16 && s < 0; k++)
				if (!busy[k])
					s = k;
			if (s >= 0)
				break;
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;
			fi_addr_t src;
			char b[512];
			if (!rdm_read_from(r.txcq, &e, &src, &err, 100000, "A's send"))
				fail("A's send: %s", cq_err_str(r.txcq, &err, b, sizeof(b)));
			busy[(uintptr_t)e.op_context - 0x100] = false;
		}
		uint8_t *p = buf + (size_t)s * 131072;
		fill_pattern(p, A_LEN(j), 5000 + j);
		busy[s] = true;
		RETRY(&r, fi_tsend(r.ep, p, A_LEN(j), desc, srv, TAG_A, (void *)(uintptr_t)(0x100 + s)));
	}
}

static void client_a2(void)
{
	fi_addr_t srv = rdm_open_restarted(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV, 1 << 20, &buf, &mr, &desc);
	memset(buf, 0, 1 << 20);
	RETRY(&r, fi_recv(r.ep, buf, 8192, desc, srv, (void *)0x1));
	RETRY(&r, fi_recv(r.ep, buf + 8192, 200000, desc, srv, (void *)0x2));
	chan_signal(CHAN_SELF, 1);
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r.rxcq, (void *)0x1, FI_RECV, &e, "A': first message");
	EXPECT(src == srv && e.len == 3000, "A': first message src %#llx len %zu", (unsigned long long)src, e.len);
	expect_pattern(buf, 3000, 9000, "A': first message");
	src = rdm_expect(r.rxcq, (void *)0x2, FI_RECV, &e, "A': rendezvous message");
	EXPECT(src == srv && e.len == 150000, "A': second message src %#llx len %zu", (unsigned long long)src, e.len);
	expect_pattern(buf + 8192, 150000, 9001, "A': rendezvous message");
	fill_pattern(buf + 300000, 5000, 9100);
	RETRY(&r, fi_tsend(r.ep, buf + 300000, 5000, desc, srv, TAG_A2, (void *)0x3));
	rdm_expect(r.txcq, (void *)0x3, FI_SEND, NULL, "A': reply");
	logmsg("A': ok");
	xclient_end(&r, mr, buf, 2, 500);
}

int main(void)
{
	bool srv = test_start("rdm_peerkill");
	int role = xspawn_two(&srv); /* 0 server or B, 1 A, 2 A' */
	if (role == 2)
		client_a2(); /* opens nothing before A is dead */
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	size_t blen = srv ? (size_t)NRA * RASZ + (size_t)NSA * 200064 + 5 * 65536 + 8192 : 4u << 20;
	buf = alloc_buf(blen);
	mr = rdm_mr_reg(&r, buf, blen, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv) {
		server();
	} else {
		char sn[64];
		chan_recv_name(CHAN_SELF, sn, sizeof(sn));
		chan_send_name(CHAN_SELF, r.name, r.namelen);
		fi_addr_t s = av_insert_one(r.av, sn);
		if (role == 1)
			client_a(s);
		else
			client_b(s);
	}
	rdm_test_end(srv, &r, mr, buf);
}
