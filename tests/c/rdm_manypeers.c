/*
 * rdm_manypeers: one server RDM endpoint reached by many client endpoints
 * (NCLIENTS, all in the child process) that all send to it at once, more
 * peers than the server's receive pool can give full credit grants to.
 *
 *  - every client sends NMSG messages (eager and rendezvous sizes, up to
 *    WINDOW in flight per client) with a header (client, sequence) and a
 *    pattern; the server checks source (FI_SOURCE), length, that each message
 *    arrives exactly once and every byte, then answers each client with a
 *    "done" message (completion order is per-client message order only among
 *    eager messages: a rendezvous receive completes when its reads finish,
 *    docs/rdm-protocol.md "Ordering"); each client is done when it has the
 *    done message and the completions of all its sends, in either order (the
 *    acknowledgement of a send may reach the client after the answer);
 *  - the server reads rsverbs' "registered bytes" log lines (FI_LOG_LEVEL=
 *    info, captured from its stderr) and asserts that its registered memory
 *    does not grow with the number of peers: with a shared receive queue the
 *    total is the same after the first and the last peer, and nothing is per
 *    connection; without one ("perqp"), it grows by exactly the connection's
 *    own receive buffers per peer.
 *
 * Modes (argv[1]): (none) the default pool; "small": FI_RSVERBS_SRQ_SIZE=64
 * at the server, so 16 peers get only the floor of 3 credits each (quotas
 * shrink as they join, the first ones are recalled); "perqp":
 * FI_RSVERBS_SRQ_SIZE=0 (the fallback for devices without SRQ).
 * argv[2]: number of clients (default 16).
 */
#include "rdm_common.h"
#include "logtee.h"

#include <fcntl.h>

#define MAXCLIENTS 80
#define NMSG 120
#define WINDOW 8
#define MAXLEN 65536
#define NRECV 64

static int nclients = 16;
static const char *mode = "";

static size_t msg_len(int c, uint32_t seq)
{
	uint32_t h = (uint32_t)c * 2654435761u ^ seq * 40503u;
	if (seq % 8 == 7)
		return 20000 + h % (MAXLEN - 20000); /* rendezvous */
	return 8 + h % 3000;
}

static uint32_t msg_seed(int c, uint32_t seq)
{
	return (uint32_t)c * 100000u + seq;
}

struct regline {
	long long total, pool, pool_bufs, send, per_conn, conns, peers;
	char mode[16];
};

/* The "registered bytes" lines of the log, in order. */
static int reg_lines(struct regline *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&loglock);
	const char *p = logbuf ? logbuf : "";
	while ((p = strstr(p, "rdm: registered bytes (")) && n < max) {
		const char *q = strstr(p, "total=");
		struct regline r;
		memset(&r, 0, sizeof(r));
		if (q && sscanf(q, "total=%lld pool=%lld pool_bufs=%lld send=%lld per_conn=%lld conns=%lld peers=%lld mode=%15s",
				&r.total, &r.pool, &r.pool_bufs, &r.send, &r.per_conn, &r.conns, &r.peers, r.mode) == 8)
			out[n++] = r;
		p += 10;
	}
	pthread_mutex_unlock(&loglock);
	return n;
}

static void check_memory(void)
{
	static struct regline l[4 * MAXCLIENTS + 8];
	/* the log lines of the last connections may lag a little behind the data */
	int n = 0;
	uint64_t start = now_ms();
	for (;;) {
		n = reg_lines(l, (int)(sizeof(l) / sizeof(l[0])));
		if (n > 0 && l[n - 1].peers >= nclients)
			break;
		if (now_ms() - start > 5000)
			fail("no 'registered bytes' log line with %d peers (%d lines; is FI_LOG_LEVEL=info honoured?)", nclients, n);
		sleep_ms(50);
	}
	struct regline *first = NULL, *last = &l[n - 1];
	for (int i = 0; i < n; i++)
		if (l[i].conns >= 1 && !first)
			first = &l[i];
	EXPECT(first, "no log line with a connection");
	for (int i = 0; i < n; i++)
		EXPECT(l[i].total == l[i].pool + l[i].send + l[i].conns * l[i].per_conn,
		       "line %d: total %lld != pool %lld + send %lld + %lld conns x %lld", i, l[i].total, l[i].pool, l[i].send,
		       l[i].conns, l[i].per_conn);
	logmsg("registered bytes: %lld with %lld peer(s), %lld with %lld peers (pool %lld B in %lld buffers, send %lld B, per connection %lld B, mode %s)",
	       first->total, first->peers, last->total, last->peers, last->pool, last->pool_bufs, last->send, last->per_conn,
	       last->mode);
	EXPECT(last->conns == nclients, "%lld connections for %d clients", last->conns, nclients);
	if (!strcmp(mode, "perqp")) {
		EXPECT(!strcmp(last->mode, "per-qp"), "mode %s, want per-qp", last->mode);
		EXPECT(last->per_conn > 0 && last->pool == 0, "per-qp: per_conn %lld pool %lld", last->per_conn, last->pool);
		EXPECT(last->total - first->total == (last->conns - first->conns) * last->per_conn,
		       "per-qp: memory grew by %lld for %lld more connections of %lld B", last->total - first->total,
		       last->conns - first->conns, last->per_conn);
	} else {
		EXPECT(!strcmp(last->mode, "srq"), "mode %s, want srq (the lab device has SRQs)", last->mode);
		EXPECT(last->per_conn == 0, "per-connection registered bytes %lld with a shared receive queue", last->per_conn);
		EXPECT(last->total == first->total && last->pool_bufs == first->pool_bufs,
		       "registered memory grew with the peers: %lld B (%lld buffers) with %lld peer(s), %lld B (%lld buffers) with %lld",
		       first->total, first->pool_bufs, first->peers, last->total, last->pool_bufs, last->peers);
		if (!strcmp(mode, "small"))
			EXPECT(last->pool_bufs == 64, "pool of %lld buffers, want FI_RSVERBS_SRQ_SIZE=64", last->pool_bufs);
	}
}

/* ---- server ---- */

static void server(void)
{
	struct rctx r;
	char cname[MAXCLIENTS][64];
	uint32_t l32;

	tee_stderr();
	setenv("FI_LOG_LEVEL", "info", 1);
	if (!strcmp(mode, "small"))
		setenv("FI_RSVERBS_SRQ_SIZE", "64", 1);
	else if (!strcmp(mode, "perqp"))
		setenv("FI_RSVERBS_SRQ_SIZE", "0", 1);
	rdm_open(&r, FI_MSG | FI_SOURCE);
	uint8_t *buf = alloc_buf((size_t)NRECV * MAXLEN);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, (size_t)NRECV * MAXLEN, FI_SEND | FI_RECV);
	void *desc = fi_mr_desc(mr);

	/* names: ours to the child, then all of the child's */
	l32 = (uint32_t)r.namelen;
	oob_send(&l32, sizeof(l32));
	oob_send(r.name, r.namelen);
	for (int c = 0; c < nclients; c++) {
		oob_recv(&l32, sizeof(l32));
		EXPECT(l32 > 0 && l32 <= 64, "client name length %u", l32);
		oob_recv(cname[c], l32);
		fi_addr_t fa;
		EXPECT(fi_av_insert(r.av, cname[c], 1, &fa, 0, NULL) == 1, "fi_av_insert of client %d", c);
		EXPECT(fa == (fi_addr_t)c, "client %d got fi_addr %llu", c, (unsigned long long)fa);
	}

	for (int i = 0; i < NRECV; i++)
		RETRY(&r, fi_recv(r.ep, buf + (size_t)i * MAXLEN, MAXLEN, desc, FI_ADDR_UNSPEC, (void *)(uintptr_t)(i + 1)));
	oob_signal(1); /* go */

	static bool seen[MAXCLIENTS][NMSG];
	uint32_t count[MAXCLIENTS] = {0}, last_eager[MAXCLIENTS];
	memset(last_eager, 0xff, sizeof(last_eager));
	long total = (long)nclients * NMSG, got = 0;
	uint64_t start = now_ms();
	while (got < total) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = rdm_next(r.rxcq, &e, "receive %ld", got);
		int slot = (int)(uintptr_t)e.op_context - 1;
		EXPECT(slot >= 0 && slot < NRECV, "op_context %p", e.op_context);
		uint8_t *m = buf + (size_t)slot * MAXLEN;
		EXPECT(src < (fi_addr_t)nclients, "source fi_addr %#llx", (unsigned long long)src);
		int c = (int)src;
		uint32_t hc, hs;
		memcpy(&hc, m, 4);
		memcpy(&hs, m + 4, 4);
		EXPECT(hc == (uint32_t)c, "message from fi_addr %d says client %u", c, hc);
		EXPECT(hs < NMSG && !seen[c][hs], "client %d: message %u twice or out of range", c, hs);
		seen[c][hs] = true;
		if (msg_len(c, hs) <= 16384) {
			/* eager messages complete in the order they were sent */
			EXPECT(last_eager[c] == UINT32_MAX || hs > last_eager[c], "client %d: eager message %u after %u (order)", c,
			       hs, last_eager[c]);
			last_eager[c] = hs;
		}
		EXPECT(e.len == msg_len(c, hs), "client %d message %u: len %zu, want %zu", c, hs, e.len, msg_len(c, hs));
		char what[64];
		snprintf(what, sizeof(what), "client %d message %u", c, hs);
		expect_pattern(m + 8, e.len - 8, msg_seed(c, hs), what);
		count[c]++;
		got++;
		RETRY(&r, fi_recv(r.ep, m, MAXLEN, desc, FI_ADDR_UNSPEC, e.op_context));
		if (got % 400 == 0)
			logmsg("%ld of %ld messages (%llu ms)", got, total, (unsigned long long)(now_ms() - start));
	}
	for (int c = 0; c < nclients; c++)
		EXPECT(count[c] == NMSG, "client %d: %u messages", c, count[c]);
	logmsg("all %ld messages from %d clients arrived intact, eager ones in order (%llu ms)", total, nclients,
	       (unsigned long long)(now_ms() - start));

	/* the answers go back over the connections the clients opened */
	uint8_t *sb = alloc_buf(64);
	for (int c = 0; c < nclients; c++) {
		struct fi_cq_tagged_entry e;
		memcpy(sb, &c, 4);
		RETRY(&r, fi_send(r.ep, sb, 4, NULL, (fi_addr_t)c, (void *)0x77));
		rdm_expect(r.txcq, (void *)0x77, FI_SEND | FI_MSG, &e, "done message");
	}
	check_memory();
	rdm_progress_start(&r);
	oob_wait(2);
	rdm_progress_stop();
	mr_close(mr);
	rdm_close(&r);
	free(buf);
	free(sb);
	tee_end();
	test_finish();
}

/* ---- clients (all in the child) ---- */

struct client {
	struct rctx r;
	struct fid_mr *mr;
	void *desc;
	uint8_t *buf; /* WINDOW send slots + the done receive */
	uint32_t next;      /* next message to send */
	int inflight;
	bool slot_busy[WINDOW];
	bool got_done; /* the server's done message arrived */
	bool done;     /* ... and every send has completed */
};

static struct client cl[MAXCLIENTS];

static void clients(void)
{
	/* each client endpoint has one peer: a small pool is plenty */
	setenv("FI_RSVERBS_SRQ_SIZE", "32", 1);
	rdm_open(&cl[0].r, FI_MSG | FI_SOURCE);
	for (int c = 1; c < nclients; c++) {
		struct rctx *x = &cl[c].r;
		memset(x, 0, sizeof(*x));
		x->info = fi_dupinfo(cl[0].r.info);
		x->fabric = cl[0].r.fabric;
		x->domain = cl[0].r.domain;
		rdm_open_ep(x);
	}
	uint32_t l32;
	char sname[64];
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= sizeof(sname), "server name length %u", l32);
	oob_recv(sname, l32);
	for (int c = 0; c < nclients; c++) {
		struct client *k = &cl[c];
		EXPECT(fi_av_insert(k->r.av, sname, 1, &k->r.peer, 0, NULL) == 1, "client %d: fi_av_insert", c);
		l32 = (uint32_t)k->r.namelen;
		oob_send(&l32, sizeof(l32));
		oob_send(k->r.name, k->r.namelen);
		k->buf = alloc_buf((size_t)(WINDOW + 1) * MAXLEN);
		k->mr = rdm_mr_reg(&k->r, k->buf, (size_t)(WINDOW + 1) * MAXLEN, FI_SEND | FI_RECV | FI_REMOTE_READ);
		k->desc = fi_mr_desc(k->mr);
		RETRY(&k->r, fi_recv(k->r.ep, k->buf + (size_t)WINDOW * MAXLEN, MAXLEN, k->desc, FI_ADDR_UNSPEC, (void *)0x99));
	}
	oob_wait(1);

	int finished = 0;
	uint64_t start = now_ms(), last_progress = now_ms();
	while (finished < nclients) {
		bool any = false;
		for (int c = 0; c < nclients; c++) {
			struct client *k = &cl[c];
			if (k->done)
				continue;
			/* post sends up to the window */
			while (k->next < NMSG && k->inflight < WINDOW) {
				int s = 0;
				while (k->slot_busy[s])
					s++;
				uint8_t *m = k->buf + (size_t)s * MAXLEN;
				size_t len = msg_len(c, k->next);
				uint32_t cc = (uint32_t)c;
				memcpy(m, &cc, 4);
				memcpy(m + 4, &k->next, 4);
				fill_pattern(m + 8, len - 8, msg_seed(c, k->next));
				ssize_t ret = fi_send(k->r.ep, m, len, k->desc, k->r.peer, (void *)(uintptr_t)(s + 1));
				if (ret == -FI_EAGAIN)
					break;
				CHK(ret);
				k->slot_busy[s] = true;
				k->inflight++;
				k->next++;
				any = true;
			}
			struct fi_cq_tagged_entry e;
			ssize_t n = fi_cq_read(k->r.txcq, &e, 1);
			if (n == 1) {
				int s = (int)(uintptr_t)e.op_context - 1;
				EXPECT(s >= 0 && s < WINDOW && k->slot_busy[s], "client %d: send completion %p", c, e.op_context);
				k->slot_busy[s] = false;
				k->inflight--;
				any = true;
			} else if (n == -FI_EAVAIL) {
				struct fi_cq_err_entry err;
				char b[512];
				memset(&err, 0, sizeof(err));
				fi_cq_readerr(k->r.txcq, &err, 0);
				fail("client %d: send error: %s", c, cq_err_str(k->r.txcq, &err, b, sizeof(b)));
			} else if (n != -FI_EAGAIN) {
				fail("client %d: fi_cq_read(tx) returned %zd", c, n);
			}
			n = fi_cq_read(k->r.rxcq, &e, 1);
			if (n == 1) {
				EXPECT(e.op_context == (void *)0x99 && e.len == 4, "client %d: done message ctx %p len %zu", c,
				       e.op_context, e.len);
				int who;
				memcpy(&who, k->buf + (size_t)WINDOW * MAXLEN, 4);
				EXPECT(who == c, "client %d got the done message of %d", c, who);
				/* The server answers once it has every message; the
				 * acknowledgements of the last ones (our send
				 * completions) may still be on their way: nothing
				 * orders them before a message coming back. They must
				 * all come (the no-progress bound below). */
				EXPECT(k->next == NMSG, "client %d: done message with only %u of %d sent", c, k->next, NMSG);
				k->got_done = true;
				any = true;
			} else if (n != -FI_EAGAIN) {
				fail("client %d: fi_cq_read(rx) returned %zd", c, n);
			}
			if (k->got_done && k->inflight == 0) {
				k->done = true;
				finished++;
				any = true;
			}
		}
		if (any)
			last_progress = now_ms();
		else if (now_ms() - last_progress > WAIT_MS)
			fail("no progress for %d ms (%d of %d clients done)", WAIT_MS, finished, nclients);
	}
	logmsg("%d clients sent %d messages each (%llu ms)", nclients, NMSG, (unsigned long long)(now_ms() - start));
	oob_signal(2);
	for (int c = nclients - 1; c >= 0; c--) {
		struct client *k = &cl[c];
		mr_close(k->mr);
		rdm_close_ep(&k->r);
		RCLOSE(k->r.av);
		free(k->buf);
		if (c > 0)
			fi_freeinfo(k->r.info);
	}
	cl[0].r.av = NULL;
	rdm_close(&cl[0].r);
	child_done();
}

int main(int argc, char **argv)
{
	char name[64];
	if (argc > 1)
		mode = argv[1];
	if (argc > 2)
		nclients = atoi(argv[2]);
	if (nclients < 1 || nclients > MAXCLIENTS) {
		fprintf(stderr, "clients: 1..%d\n", MAXCLIENTS);
		return 2;
	}
	snprintf(name, sizeof(name), "rdm_manypeers%s%s", *mode ? "_" : "", mode);
	if (argc > 2 && nclients != 16) {
		size_t l = strlen(name);
		snprintf(name + l, sizeof(name) - l, "_%d", nclients);
	}
	if (test_start(strdup(name)))
		server();
	else
		clients();
	return 0;
}
