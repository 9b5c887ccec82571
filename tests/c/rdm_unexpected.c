/*
 * rdm_unexpected: messages that arrive before their receive is posted, and
 * directed receives (FI_DIRECTED_RECV) with two senders.
 *
 * Sender 1 is the usual child, sender 2 an extra process. A sender posts a
 * batch of sends when the server asks, then a tagged "marker" message last;
 * the server has a receive posted only for the marker, so once the marker
 * completes every earlier message of that batch has arrived (RC order) and
 * sits in the unexpected queue.
 *
 *  1. unexpected, one sender: untagged 5000 B, 200000 B, 0 B, 16385 B and
 *     tagged 64 B (tag 0x11), 1 MiB (0x22), 16384 B (0x33), 300000 B (0x11);
 *     receives then posted tagged first, out of arrival order (0x22 before
 *     0x11): each gets the first unexpected message its tag matches, in
 *     arrival order; untagged ones come out in arrival order; data exact;
 *  2. directed, unexpected: sender 2's untagged eager and tagged rendezvous
 *     message arrive before sender 1's; a receive bound to sender 1 takes
 *     sender 1's message (FI_SOURCE says so), an any-source receive then
 *     takes sender 2's;
 *  3. directed, posted first: receives bound to sender 1 are posted, sender
 *     2's messages arrive and must not match them (they wait unexpected),
 *     sender 1's then complete them.
 * Every sender checks that all its sends complete successfully.
 */
#include "rdm_procs.h"

#define BIG (1u << 20)
#define SLOT (BIG + 4096)
#define NSLOT 12

struct m {
	int tagged;
	uint64_t tag;
	size_t len;
	uint32_t seed;
};

#define MARK(t) { 1, t, 8, 0 }
static const struct m b1[] = { { 0, 0, 5000, 101 },  { 0, 0, 200000, 102 }, { 0, 0, 0, 103 },      { 0, 0, 16385, 104 },
			       { 1, 0x11, 64, 105 }, { 1, 0x22, BIG, 106 },  { 1, 0x33, 16384, 107 }, { 1, 0x11, 300000, 108 },
			       MARK(0x99) };
static const struct m b2[] = { { 0, 0, 3000, 201 }, { 1, 0x44, 100000, 202 }, MARK(0x98) }; /* sender 2 */
static const struct m b3[] = { { 0, 0, 3000, 301 }, { 1, 0x44, 100000, 302 }, MARK(0x97) }; /* sender 1 */
static const struct m b4[] = { { 0, 0, 2000, 401 }, { 1, 0x55, 20000, 402 }, MARK(0x96) };  /* sender 2 */
static const struct m b5[] = { { 0, 0, 2000, 501 }, { 1, 0x55, 20000, 502 } };             /* sender 1 */
#define N(a) (sizeof(a) / sizeof(a[0]))

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static uint8_t *slot(int i)
{
	return buf + (size_t)i * SLOT;
}

/* ---- server ---- */

static void post(int s, fi_addr_t src, int tagged, uint64_t tag)
{
	memset(slot(s), 0xee, SLOT);
	void *ctx = (void *)(uintptr_t)(0x100 + s);
	if (tagged)
		RETRY(&r, fi_trecv(r.ep, slot(s), SLOT - 64, desc, src, tag, 0, ctx));
	else
		RETRY(&r, fi_recv(r.ep, slot(s), SLOT - 64, desc, src, ctx));
}

/* Receive completion e (source src) in slot s carries message mm from fi_addr from. */
static void check_in(const struct fi_cq_tagged_entry *e, fi_addr_t src, int s, const struct m *mm, fi_addr_t from,
		     const char *what)
{
	EXPECT(e->len == mm->len, "%s: len %zu, want %zu (another message matched?)", what, e->len, mm->len);
	if (mm->tagged)
		EXPECT(e->tag == mm->tag, "%s: tag %#llx", what, (unsigned long long)e->tag);
	EXPECT(src == from, "%s: source %#llx, want %#llx", what, (unsigned long long)src, (unsigned long long)from);
	expect_pattern(slot(s), mm->len, mm->seed, what);
	EXPECT(slot(s)[mm->len] == 0xee, "%s: byte after the message overwritten", what);
}

/* The completion of receive slot s must be message mm from fi_addr from. */
static void expect_in(int s, const struct m *mm, fi_addr_t from, const char *what)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r.rxcq, (void *)(uintptr_t)(0x100 + s), FI_RECV | (mm->tagged ? FI_TAGGED : FI_MSG),
				   &e, what);
	check_in(&e, src, s, mm, from, what);
}

/* Receives in slots 0..n-1 complete in any order, slot i with message *want[i]. */
static void expect_set(int n, const struct m *const *want, fi_addr_t from, const char *const *names)
{
	bool seen[NSLOT] = { 0 };
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = rdm_next(r.rxcq, &e, "receive");
		int s = (int)((uintptr_t)e.op_context - 0x100);
		EXPECT(s >= 0 && s < n && !seen[s], "completion op_context %p", e.op_context);
		seen[s] = true;
		const struct m *mm = want[s];
		const char *what = names[s];
		EXPECT((e.flags & (FI_RECV | (mm->tagged ? FI_TAGGED : FI_MSG))) == (FI_RECV | (mm->tagged ? FI_TAGGED : FI_MSG)),
		       "%s: flags %#llx", what, (unsigned long long)e.flags);
		check_in(&e, src, s, mm, from, what);
	}
}

/* Have sender k post batch `cmd`; wait for its marker (tag) through a receive bound to it. */
static void run_batch(int k, uint8_t cmd, const struct m *b, size_t n, fi_addr_t from)
{
	post(NSLOT - 1, from, 1, b[n - 1].tag);
	chan_signal(k, cmd);
	rdm_progress_start(&r); /* the sender may need us to connect before its sends are taken */
	chan_wait(k, cmd);
	rdm_progress_stop();
	expect_in(NSLOT - 1, &b[n - 1], from, "marker");
}

static void server(fi_addr_t s1, fi_addr_t s2)
{
	/* 1 */
	run_batch(0, 1, b1, N(b1), s1);
	cq_expect_empty(r.rxcq, 200, "unexpected: nothing completes without a receive");
	post(0, FI_ADDR_UNSPEC, 1, 0x22);
	post(1, FI_ADDR_UNSPEC, 1, 0x11);
	post(2, FI_ADDR_UNSPEC, 1, 0x11);
	post(3, FI_ADDR_UNSPEC, 1, 0x33);
	for (int i = 0; i < 4; i++)
		post(4 + i, FI_ADDR_UNSPEC, 0, 0);
	/* eager receives complete at once, rendezvous ones when read: any order */
	const struct m *want[8] = { &b1[5], &b1[4], &b1[7], &b1[6], &b1[0], &b1[1], &b1[2], &b1[3] };
	static const char *names[8] = {
		"unexpected tagged 0x22 (1 MiB rendezvous)", "first unexpected tag 0x11 (64 B)",
		"second unexpected tag 0x11 (300000 B rendezvous)", "unexpected tagged 0x33 (16384 B)",
		"unexpected untagged #0 (5000 B)", "unexpected untagged #1 (200000 B)",
		"unexpected untagged #2 (0 B)", "unexpected untagged #3 (16385 B)",
	};
	expect_set(8, want, s1, names);
	cq_expect_empty(r.rxcq, 200, "phase 1: nothing else");
	logmsg("phase 1 (unexpected, eager + rendezvous, untagged + tagged) ok");

	/* 2: sender 2's messages arrive first */
	run_batch(1, 2, b2, N(b2), s2);
	run_batch(0, 3, b3, N(b3), s1);
	post(0, s1, 0, 0);
	expect_in(0, &b3[0], s1, "untagged receive bound to sender 1 (sender 2's arrived first)");
	post(1, s1, 1, 0x44);
	expect_in(1, &b3[1], s1, "tagged receive bound to sender 1 (rendezvous)");
	post(2, FI_ADDR_UNSPEC, 0, 0);
	expect_in(2, &b2[0], s2, "any-source untagged receive after the directed one");
	post(3, FI_ADDR_UNSPEC, 1, 0x44);
	expect_in(3, &b2[1], s2, "any-source tagged receive after the directed one");
	cq_expect_empty(r.rxcq, 200, "phase 2: nothing else");
	logmsg("phase 2 (directed receive, unexpected) ok");

	/* 3: receives bound to sender 1 posted before sender 2's messages come */
	post(0, s1, 0, 0);
	post(1, s1, 1, 0x55);
	run_batch(1, 4, b4, N(b4), s2);
	cq_expect_empty(r.rxcq, 300, "sender 2's messages must not match receives bound to sender 1");
	chan_signal(0, 5);
	rdm_progress_start(&r);
	chan_wait(0, 5);
	rdm_progress_stop();
	{
		const struct m *want[2] = { &b5[0], &b5[1] };
		static const char *names[2] = { "posted untagged receive bound to sender 1",
						"posted tagged receive bound to sender 1" };
		expect_set(2, want, s1, names);
	}
	post(2, FI_ADDR_UNSPEC, 0, 0);
	expect_in(2, &b4[0], s2, "sender 2's untagged message, waiting unexpected");
	post(3, s2, 1, 0x55);
	expect_in(3, &b4[1], s2, "sender 2's tagged message, waiting unexpected");
	cq_expect_empty(r.rxcq, 200, "phase 3: nothing else");
	logmsg("phase 3 (directed receive, posted first) ok");

	chan_signal(0, 0);
	chan_signal(1, 0);
	rdm_progress_start(&r); /* the senders' rendezvous sends complete on our FIN */
	chan_wait(0, 9);
	chan_wait(1, 9);
	xwait_all();
	rdm_progress_stop();
}

/* ---- senders ---- */

static void sender(fi_addr_t srv)
{
	size_t off = 0, nsent = 0;
	for (;;) {
		uint8_t cmd;
		rdm_progress_start(&r);
		chan_recv(CHAN_SELF, &cmd, 1);
		rdm_progress_stop();
		if (cmd == 0)
			break;
		const struct m *b = cmd == 1 ? b1 : cmd == 2 ? b2 : cmd == 3 ? b3 : cmd == 4 ? b4 : b5;
		size_t n = cmd == 1 ? N(b1) : cmd == 2 ? N(b2) : cmd == 3 ? N(b3) : cmd == 4 ? N(b4) : N(b5);
		for (size_t i = 0; i < n; i++) {
			uint8_t *p = buf + off;
			off += b[i].len + 64;
			EXPECT(off <= 4 * BIG, "sender buffer too small");
			fill_pattern(p, b[i].len, b[i].seed);
			void *ctx = (void *)(uintptr_t)(0x1000 + nsent++);
			if (b[i].tagged)
				RETRY(&r, fi_tsend(r.ep, p, b[i].len, desc, srv, b[i].tag, ctx));
			else
				RETRY(&r, fi_send(r.ep, p, b[i].len, desc, srv, ctx));
		}
		chan_signal(CHAN_SELF, cmd);
	}
	bool seen[64] = { 0 };
	for (size_t k = 0; k < nsent; k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "send");
		size_t i = (size_t)(uintptr_t)e.op_context - 0x1000;
		EXPECT(i < nsent && !seen[i], "send completion op_context %p", e.op_context);
		seen[i] = true;
	}
	logmsg("sender %d: all %zu sends completed", xself_idx + 1, nsent);
	chan_signal(CHAN_SELF, 9);
}

int main(void)
{
	bool srv = test_start("rdm_unexpected");
	if (srv && xspawn() == 0)
		srv = false;
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE);
	size_t blen = srv ? (size_t)NSLOT * SLOT : 4 * BIG;
	buf = alloc_buf(blen);
	mr = rdm_mr_reg(&r, buf, blen, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv) {
		char n1[64], n2[64];
		chan_send_name(0, r.name, r.namelen);
		chan_send_name(1, r.name, r.namelen);
		chan_recv_name(0, n1, sizeof(n1));
		chan_recv_name(1, n2, sizeof(n2));
		fi_addr_t s2 = av_insert_one(r.av, n2);
		fi_addr_t s1 = av_insert_one(r.av, n1);
		server(s1, s2);
	} else {
		char sn[64];
		chan_recv_name(CHAN_SELF, sn, sizeof(sn));
		chan_send_name(CHAN_SELF, r.name, r.namelen);
		sender(av_insert_one(r.av, sn));
	}
	rdm_test_end(srv, &r, mr, buf);
}
