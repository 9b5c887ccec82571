/*
 * rdm_multi: one RDM server, four client processes talking to it at once.
 *
 *  - every client sends the server, all at the same time, untagged
 *    (fi_senddata) and tagged (fi_tsenddata) messages of 0 B, 64 B, 16 KiB,
 *    16 KiB + 1 and 1 MiB (eager and rendezvous) with byte patterns unique per
 *    client and message; the remote CQ data and the tag name the client and
 *    the message;
 *  - the server receives them all with fi_cq_readfrom into any-source
 *    receives: each arrives exactly once, byte-exact, with the right length,
 *    and FI_SOURCE gives the fi_addr the server's AV holds for the client that
 *    sent it (the clients' names come over the out-of-band channels and are
 *    inserted in a different order than the clients' numbers);
 *  - the server then replies with the same set to every client (all clients
 *    in flight at once); each client checks data, length, tag, CQ data and
 *    that the source is the server's fi_addr.
 */
#include "rdm_procs.h"

#define NCLI 4
#define BIG (1u << 20)
static const size_t sizes[] = { 0, 64, 16384, 16385, BIG };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NMSG (2 * NSIZES) /* per client and direction: untagged + tagged */
#define NPOST 8           /* receives of each kind posted at a time by the server */
#define SLOT (BIG + 4096)

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static uint32_t seed_of(int cli, int dir, int kind, size_t i)
{
	return (uint32_t)(1000 * (cli + 1) + 100 * dir + 10 * kind + i);
}

/* CQ data / tag naming a message: client, kind (0 untagged, 1 tagged), size index */
static uint64_t id_of(int cli, int kind, size_t i)
{
	return ((uint64_t)cli << 8) | ((uint64_t)kind << 4) | i;
}

static void post_rx(int kind, int slot)
{
	uint8_t *b = buf + (size_t)slot * SLOT;
	void *ctx = (void *)(uintptr_t)(0x10000 + slot);
	memset(b, 0xee, SLOT);
	if (kind == 0)
		RETRY(&r, fi_recv(r.ep, b, SLOT - 64, desc, FI_ADDR_UNSPEC, ctx));
	else
		RETRY(&r, fi_trecv(r.ep, b, SLOT - 64, desc, FI_ADDR_UNSPEC, 0, ~0ULL, ctx));
}

/* Check one received message (at slot) against what client cli sent. */
static void check_msg(const struct fi_cq_tagged_entry *e, const uint8_t *b, int expect_kind, int dir, const char *who)
{
	char what[96];
	EXPECT(e->flags & FI_REMOTE_CQ_DATA, "%s: no FI_REMOTE_CQ_DATA (flags %#llx)", who, (unsigned long long)e->flags);
	int cli = (int)(e->data >> 8), kind = (int)((e->data >> 4) & 0xf);
	size_t i = e->data & 0xf;
	EXPECT(cli >= 0 && cli < NCLI && (kind == 0 || kind == 1) && i < NSIZES, "%s: CQ data %#llx", who,
	       (unsigned long long)e->data);
	snprintf(what, sizeof(what), "%s: client %d %s %zu B", who, cli, kind ? "tagged" : "untagged", sizes[i]);
	EXPECT(kind == expect_kind, "%s: arrived on a %s receive", what, expect_kind ? "tagged" : "untagged");
	EXPECT((e->flags & (FI_RECV | (kind ? FI_TAGGED : FI_MSG))) == (FI_RECV | (kind ? FI_TAGGED : FI_MSG)),
	       "%s: flags %#llx", what, (unsigned long long)e->flags);
	if (kind)
		EXPECT(e->tag == e->data, "%s: tag %#llx", what, (unsigned long long)e->tag);
	EXPECT(e->len == sizes[i], "%s: len %zu", what, e->len);
	expect_pattern(b, sizes[i], seed_of(cli, dir, kind, i), what);
	EXPECT(b[sizes[i]] == 0xee, "%s: byte after the message overwritten", what);
}

static void server(void)
{
	fi_addr_t cli_addr[NCLI];
	char names[NCLI][64];
	for (int k = 0; k < NCLI; k++) {
		chan_send_name(k, r.name, r.namelen);
		chan_recv_name(k, names[k], sizeof(names[k]));
	}
	/* insert in reverse order so fi_addr != client number */
	for (int k = NCLI - 1; k >= 0; k--)
		cli_addr[k] = av_insert_one(r.av, names[k]);
	int posted[2] = { NPOST, NPOST };
	for (int i = 0; i < 2 * NPOST; i++)
		post_rx(i < NPOST ? 0 : 1, i);
	for (int k = 0; k < NCLI; k++)
		chan_signal(k, 1);

	/* 1. everything from everyone */
	bool seen[NCLI][2][NSIZES];
	memset(seen, 0, sizeof(seen));
	for (int n = 0; n < NCLI * (int)NMSG; n++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = rdm_next(r.rxcq, &e, "server receive #%d", n);
		long slot = (long)(uintptr_t)e.op_context - 0x10000;
		EXPECT(slot >= 0 && slot < 2 * NPOST, "receive #%d: op_context %p", n, e.op_context);
		int kind = slot >= NPOST;
		check_msg(&e, buf + (size_t)slot * SLOT, kind, 0, "server");
		int cli = (int)(e.data >> 8);
		size_t i = e.data & 0xf;
		EXPECT(!seen[cli][kind][i], "client %d message %d/%zu arrived twice", cli, kind, i);
		seen[cli][kind][i] = true;
		EXPECT(src == cli_addr[cli], "FI_SOURCE of client %d's %zu B message: %#llx, want %#llx", cli, sizes[i],
		       (unsigned long long)src, (unsigned long long)cli_addr[cli]);
		if (posted[kind] < NCLI * (int)NSIZES) {
			post_rx(kind, (int)slot);
			posted[kind]++;
		}
	}
	cq_expect_empty(r.rxcq, 300, "nothing more after all messages");
	logmsg("phase 1: %d messages from %d clients, FI_SOURCE right", NCLI * (int)NMSG, NCLI);

	/* 2. replies to everyone, all in flight. A client says its reply
	 * receives are posted once its own sends have completed, and its
	 * rendezvous sends complete only when our FINs reach it. A FIN may
	 * still wait here for credits: the clients recall an idle peer's
	 * credits to the floor (3) and grant more only when their own progress
	 * gets to it, which can take longer than the 300 ms above under load.
	 * Progress is manual, so we keep reading the CQs while we wait (seen
	 * in CI: without this, a client waited for its last FIN for good). */
	rdm_progress_start(&r);
	for (int k = 0; k < NCLI; k++)
		chan_wait(k, 2); /* the client's reply receives are posted */
	rdm_progress_stop();
	/* one registered source buffer per message, all sends in flight at once */
	size_t nsent = 0;
	static uint8_t *tx[NCLI][2][NSIZES];
	for (int k = 0; k < NCLI; k++)
		for (int kind = 0; kind < 2; kind++)
			for (size_t i = 0; i < NSIZES; i++) {
				tx[k][kind][i] = alloc_buf(sizes[i] + 1);
				fill_pattern(tx[k][kind][i], sizes[i], seed_of(k, 1, kind, i));
			}
	struct fid_mr *tmr[NCLI][2][NSIZES];
	for (int k = 0; k < NCLI; k++)
		for (int kind = 0; kind < 2; kind++)
			for (size_t i = 0; i < NSIZES; i++) {
				tmr[k][kind][i] = rdm_mr_reg(&r, tx[k][kind][i], sizes[i] + 1, FI_SEND);
				void *d = fi_mr_desc(tmr[k][kind][i]);
				void *ctx = (void *)(uintptr_t)(0x20000 + (k << 8) + (kind << 4) + (int)i);
				uint64_t id = id_of(k, kind, i);
				if (kind == 0)
					RETRY(&r, fi_senddata(r.ep, tx[k][kind][i], sizes[i], d, id, cli_addr[k], ctx));
				else
					RETRY(&r, fi_tsenddata(r.ep, tx[k][kind][i], sizes[i], d, id, cli_addr[k], id, ctx));
				nsent++;
			}
	bool done[NCLI][2][NSIZES];
	memset(done, 0, sizeof(done));
	for (size_t n = 0; n < nsent; n++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "reply send");
		long c = (long)(uintptr_t)e.op_context - 0x20000;
		int k = (int)(c >> 8), kind = (int)((c >> 4) & 0xf);
		size_t i = (size_t)(c & 0xf);
		EXPECT(c >= 0 && k < NCLI && kind < 2 && i < NSIZES && !done[k][kind][i], "reply send: op_context %p",
		       e.op_context);
		done[k][kind][i] = true;
		EXPECT(e.flags & FI_SEND, "reply send: flags %#llx", (unsigned long long)e.flags);
	}
	logmsg("phase 2: %zu replies sent", nsent);
	for (int k = 0; k < NCLI; k++)
		chan_wait(k, 3);
	for (int k = 0; k < NCLI; k++)
		chan_signal(k, 4);
	xwait_all();
	for (int k = 0; k < NCLI; k++)
		for (int kind = 0; kind < 2; kind++)
			for (size_t i = 0; i < NSIZES; i++) {
				mr_close(tmr[k][kind][i]);
				free(tx[k][kind][i]);
			}
}

static void client(int me)
{
	char sname[64];
	chan_recv_name(CHAN_SELF, sname, sizeof(sname));
	chan_send_name(CHAN_SELF, r.name, r.namelen);
	fi_addr_t srv = av_insert_one(r.av, sname);

	/* this client's messages, one buffer each (all in flight at once) */
	uint8_t *tx[2][NSIZES];
	size_t off = 0;
	for (int kind = 0; kind < 2; kind++)
		for (size_t i = 0; i < NSIZES; i++) {
			tx[kind][i] = buf + off;
			fill_pattern(tx[kind][i], sizes[i], seed_of(me, 0, kind, i));
			off += sizes[i] + 64;
		}
	/* reply receives: one buffer each, after the send buffers */
	uint8_t *rx[2][NSIZES];
	for (int kind = 0; kind < 2; kind++)
		for (size_t i = 0; i < NSIZES; i++) {
			rx[kind][i] = buf + off;
			memset(rx[kind][i], 0xee, sizes[i] + 64);
			off += sizes[i] + 64;
		}

	chan_wait(CHAN_SELF, 1);
	for (int kind = 0; kind < 2; kind++)
		for (size_t i = 0; i < NSIZES; i++) {
			void *ctx = (void *)(uintptr_t)(0x30000 + (kind << 4) + (int)i);
			uint64_t id = id_of(me, kind, i);
			if (kind == 0)
				RETRY(&r, fi_senddata(r.ep, tx[kind][i], sizes[i], desc, id, srv, ctx));
			else
				RETRY(&r, fi_tsenddata(r.ep, tx[kind][i], sizes[i], desc, id, srv, id, ctx));
		}
	/* the reply receives: untagged ones match in order (same sizes, in order),
	 * tagged ones by their exact tag */
	for (int kind = 0; kind < 2; kind++)
		for (size_t i = 0; i < NSIZES; i++) {
			void *ctx = (void *)(uintptr_t)(0x40000 + (kind << 4) + (int)i);
			if (kind == 0)
				RETRY(&r, fi_recv(r.ep, rx[kind][i], sizes[i] + 32, desc, FI_ADDR_UNSPEC, ctx));
			else
				RETRY(&r, fi_trecv(r.ep, rx[kind][i], sizes[i] + 32, desc, srv, id_of(me, 1, i), 0, ctx));
		}
	bool done[2][NSIZES];
	memset(done, 0, sizeof(done));
	for (size_t n = 0; n < NMSG; n++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "client %d send", me);
		long c = (long)(uintptr_t)e.op_context - 0x30000;
		EXPECT(c >= 0 && (c >> 4) < 2 && (c & 0xf) < (long)NSIZES && !done[c >> 4][c & 0xf],
		       "client send: op_context %p", e.op_context);
		done[c >> 4][c & 0xf] = true;
	}
	chan_signal(CHAN_SELF, 2);
	memset(done, 0, sizeof(done));
	for (size_t n = 0; n < NMSG; n++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = rdm_next(r.rxcq, &e, "client %d receive", me);
		long c = (long)(uintptr_t)e.op_context - 0x40000;
		EXPECT(c >= 0 && (c >> 4) < 2 && (c & 0xf) < (long)NSIZES && !done[c >> 4][c & 0xf],
		       "client receive: op_context %p", e.op_context);
		int kind = (int)(c >> 4);
		size_t i = (size_t)(c & 0xf);
		done[kind][i] = true;
		EXPECT(src == srv, "client %d: reply source %#llx, want the server %#llx", me, (unsigned long long)src,
		       (unsigned long long)srv);
		EXPECT((int)(e.data >> 8) == me && (e.data & 0xf) == i && (int)((e.data >> 4) & 0xf) == kind,
		       "client %d: reply in receive %d/%zu has CQ data %#llx", me, kind, i, (unsigned long long)e.data);
		check_msg(&e, rx[kind][i], kind, 1, "client");
	}
	logmsg("client %d: all %d replies ok", me, (int)NMSG);
	chan_signal(CHAN_SELF, 3);
	rdm_progress_start(&r);
	chan_wait(CHAN_SELF, 4);
	rdm_progress_stop();
}

int main(void)
{
	bool srv = test_start("rdm_multi");
	int me = 0;
	if (srv) {
		for (int k = 1; k < NCLI; k++) {
			if (xspawn() == 0) {
				srv = false;
				me = xself_idx;
				break;
			}
		}
	}
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	size_t blen = srv ? (size_t)2 * NPOST * SLOT : 4 * (2 * BIG + 4 * 16385 + 1024);
	buf = alloc_buf(blen);
	mr = rdm_mr_reg(&r, buf, blen, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client(me);
	rdm_test_end(srv, &r, mr, buf);
}
