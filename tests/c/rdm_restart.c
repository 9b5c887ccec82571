/*
 * rdm_restart: a peer's process dies without its disconnect reaching us,
 * and a new process starts on the same address (a DAOS engine restarting
 * on its old URI after a crash).
 *
 * Soft-RoCE delivers packets between its own addresses inside the kernel,
 * past any packet filter (checked: a tc drop filter on lo sees none), so the
 * lab cannot lose the dead process's DREQ on the wire. The server loses it
 * instead: it runs with FI_RSVERBS_FAULT_LOSE_DISCONNECT=1 (RDM endpoints
 * ignore DISCONNECTED, and log it). The suite checks the server's log for
 * that line and for the restart line, so the test cannot pass without the
 * scenario having happened.
 *
 *  - client A (an extra process) connects to the server: a message each
 *    way (A's connect request, so the server's connection is the passive
 *    one);
 *  - the server SIGKILLs A and reaps it; A's disconnect is ignored: the
 *    server's connection to A still stands (nothing was outstanding on it,
 *    so nothing failed);
 *  - A' starts on A's address and sends the server a message: its connect
 *    request meets the standing connection. Within BOUND_MS the message
 *    arrives from A's fi_addr (FI_SOURCE), and the server's answer to A's
 *    fi_addr reaches A'. (Before HELLO carried an incarnation, the server
 *    refused A''s request as a duplicate of the standing connection.)
 *  - child 0 is a bystander connected throughout: its ping-pong before,
 *    between and after must not notice.
 */
#include "rdm_procs.h"

#define BOUND_MS 30000
#define TAG_A 0xa
#define TAG_A2 0xa2

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

static void pingpong_b(fi_addr_t fb, int round)
{
	char w[64];
	snprintf(w, sizeof(w), "bystander round %d", round);
	recv_one(fb, 0xb, 1000, 7000 + round, w);
	send_one(fb, 0xb, 1000, 8000 + round, w);
}

static void server(void)
{
	char nb[64], na[64];
	chan_send_name(0, r.name, r.namelen);
	chan_send_name(1, r.name, r.namelen);
	chan_recv_name(0, nb, sizeof(nb));
	size_t la = chan_recv_name(1, na, sizeof(na));
	fi_addr_t fb = av_insert_one(r.av, nb);
	fi_addr_t fa = av_insert_one(r.av, na);

	pingpong_b(fb, 0);
	/* A connects (its request) and gets an answer */
	recv_one(fa, TAG_A, 2000, 5000, "A's message");
	send_one(fa, TAG_A, 2000, 5001, "answer to A");
	chan_wait(1, 1); /* A has the answer */

	/* A dies; the server ignores its disconnect (FI_RSVERBS_FAULT_LOSE_DISCONNECT) */
	kill(xprocs[1].pid, SIGKILL);
	xprocs[1].reaped = true;
	int st;
	EXPECT(waitpid(xprocs[1].pid, &st, 0) == xprocs[1].pid && WIFSIGNALED(st), "A did not die of SIGKILL (%#x)", st);
	for (uint64_t t0 = now_ms(); now_ms() - t0 < 1000;) { /* progress: the DISCONNECTED event is read (and ignored) */
		struct fi_cq_tagged_entry e;
		(void)fi_cq_read(r.rxcq, &e, 0);
		sleep_ms(5);
	}
	logmsg("A killed and reaped");

	/* the bystander did not notice */
	pingpong_b(fb, 1);

	/* A' on A's address */
	chan_send_name(2, na, la);
	chan_send_name(2, r.name, r.namelen);
	uint64_t t0 = now_ms();
	recv_one(fa, TAG_A2, 3000, 9000, "A''s message");
	send_one(fa, TAG_A2, 3000, 9001, "answer to A'");
	uint64_t t1 = now_ms() - t0;
	chan_wait(2, 1);
	EXPECT(t1 < BOUND_MS, "A' served after %llu ms", (unsigned long long)t1);
	logmsg("A' on A's address served %llu ms after it was told to start", (unsigned long long)t1);

	pingpong_b(fb, 2);
	chan_signal(0, 1);
	rdm_progress_start(&r);
	chan_wait(2, 2);
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
	for (int k = 0; k < 3; k++) {
		char w[64];
		snprintf(w, sizeof(w), "bystander round %d", k);
		send_one(srv, 0xb, 1000, 7000 + k, w);
		recv_one(srv, 0xb, 1000, 8000 + k, w);
	}
	chan_wait(0, 1);
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
	send_one(srv, TAG_A, 2000, 5000, "A's message");
	recv_one(srv, TAG_A, 2000, 5001, "answer to A");
	chan_signal(CHAN_SELF, 1);
	for (;;) /* until SIGKILL; no progress calls */
		pause();
}

static void client_a2(void)
{
	fi_addr_t srv = rdm_open_restarted(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV, 1 << 20, &buf, &mr, &desc);
	send_one(srv, TAG_A2, 3000, 9000, "A''s message");
	recv_one(srv, TAG_A2, 3000, 9001, "answer to A'");
	chan_signal(CHAN_SELF, 1);
	logmsg("A': ok");
	xclient_end(&r, mr, buf, 2, 300);
}

int main(void)
{
	bool srv = test_start("rdm_restart");
	int role = xspawn_two(&srv); /* 0 server or bystander, 1 A, 2 A' */
	if (role == 2)
		client_a2(); /* opens nothing before A is dead */
	if (srv) {
		/* the server only: the children were forked before, without it */
		setenv("FI_RSVERBS_FAULT_LOSE_DISCONNECT", "1", 1);
	}
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
