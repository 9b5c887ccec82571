/*
 * rdm_peek: FI_PEEK, FI_CLAIM, FI_DISCARD and fi_cancel on FI_EP_RDM
 * (beyond rdm_tagged's basic cases).
 *
 * The client sends a batch of tagged messages (eager and rendezvous, with
 * remote CQ data) that all wait unexpected at the server (a marker message,
 * sent last, is the only one the server has a receive for). Then:
 *  - FI_PEEK of a rendezvous message: success with its len, tag, CQ data and
 *    source (fi_cq_readfrom); peeking again finds it again (not consumed);
 *  - FI_PEEK with an ignore mask finds the oldest matching message;
 *  - FI_PEEK of an absent tag: FI_ENOMSG error entry with the peek's context;
 *  - FI_PEEK|FI_CLAIM of a rendezvous message: an ordinary receive for its
 *    tag posted afterwards does not get it; the FI_CLAIM receive with the
 *    same fi_context does, byte-exact; the ordinary receive is then canceled
 *    (FI_ECANCELED, right op_context);
 *  - FI_PEEK|FI_CLAIM then FI_CLAIM|FI_DISCARD of an eager and of a
 *    rendezvous message: completions, the messages are gone (FI_ENOMSG), the
 *    sender's rendezvous send completes;
 *  - FI_PEEK|FI_DISCARD of an eager message: gone afterwards;
 *  - a peeked message is still received normally;
 *  - fi_cancel of the middle one of three posted tagged receives and of an
 *    untagged receive: FI_ECANCELED entries with the right contexts; the
 *    other receives still match; the message meant for the canceled receive
 *    waits unexpected; canceling an unknown context completes nothing.
 */
#include "rdm_common.h"

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

struct m {
	uint64_t tag;
	size_t len;
	uint64_t data;
};
static const struct m batch[] = {
	{ 0x101, 1000, 0xd1 }, { 0x102, 100000, 0xd2 }, { 0x103, 2000, 0xd3 }, { 0x104, 50000, 0xd4 },
	{ 0x105, 300, 0xd5 },  { 0x106, 40000, 0xd6 },  { 0x199, 8, 0xd9 },
};
#define NB (sizeof(batch) / sizeof(batch[0]))

static void tmsg(void *b, size_t len, uint64_t tag, uint64_t ignore, void *ctx, uint64_t flags)
{
	rdm_trecvmsg(&r, b, len, desc, tag, ignore, ctx, flags);
}

/* A successful peek/discard/receive completion describing batch[i]. */
static void expect_found(void *ctx, int i, const char *what)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r.rxcq, ctx, FI_RECV | FI_TAGGED, &e, what);
	EXPECT(e.tag == batch[i].tag, "%s: tag %#llx, want %#llx", what, (unsigned long long)e.tag,
	       (unsigned long long)batch[i].tag);
	EXPECT(e.len == batch[i].len, "%s: len %zu, want %zu", what, e.len, batch[i].len);
	EXPECT(e.data == batch[i].data, "%s: CQ data %#llx", what, (unsigned long long)e.data);
	/* soft: libfabric 1.17's rxm gives the data without the flag on peeks */
	EXPECT_SOFT(e.flags & FI_REMOTE_CQ_DATA, "%s: CQ data without FI_REMOTE_CQ_DATA (flags %#llx)", what,
		    (unsigned long long)e.flags);
	EXPECT(src == r.peer, "%s: source %#llx, want %#llx", what, (unsigned long long)src, (unsigned long long)r.peer);
}

static void expect_nomsg(void *ctx, const char *what)
{
	struct fi_cq_err_entry err = rdm_expect_err(r.rxcq, FI_ENOMSG, what);
	EXPECT(err.op_context == ctx, "%s: op_context %p, want %p", what, err.op_context, ctx);
}

static void expect_canceled(void *ctx, const char *what)
{
	struct fi_cq_err_entry err = rdm_expect_err(r.rxcq, FI_ECANCELED, what);
	EXPECT(err.op_context == ctx, "%s: op_context %p, want %p", what, err.op_context, ctx);
	EXPECT(err.flags & FI_RECV, "%s: flags %#llx", what, (unsigned long long)err.flags);
}

static void server(void)
{
	uint8_t *rb = buf;
	struct fi_context claim_b[2], claim_a[2], claim_f[2];
	memset(buf, 0, 1 << 20);

	tmsg(rb, 64, 0x199, 0, (void *)0x99, 0);
	oob_signal(1);
	expect_found((void *)0x99, 6, "marker (everything before it is unexpected now)");

	/* peek a rendezvous message, twice */
	tmsg(NULL, 0, 0x102, 0, (void *)0x10, FI_PEEK);
	expect_found((void *)0x10, 1, "FI_PEEK of the rendezvous message");
	tmsg(NULL, 0, 0x102, 0, (void *)0x11, FI_PEEK);
	expect_found((void *)0x11, 1, "second FI_PEEK (a peek does not consume)");
	/* an ignore mask: 0x100..0x1ff, the oldest is 0x101 */
	tmsg(NULL, 0, 0x100, 0xff, (void *)0x12, FI_PEEK);
	expect_found((void *)0x12, 0, "FI_PEEK with an ignore mask (oldest match)");
	tmsg(NULL, 0, 0x107, 0, (void *)0x13, FI_PEEK);
	expect_nomsg((void *)0x13, "FI_PEEK of an absent tag");
	logmsg("peek ok");

	/* claim the rendezvous message; an ordinary receive must not get it */
	tmsg(NULL, 0, 0x102, 0, claim_b, FI_PEEK | FI_CLAIM);
	expect_found(claim_b, 1, "FI_PEEK|FI_CLAIM");
	tmsg(rb + 200000, 200000, 0x102, 0, (void *)0x20, 0);
	cq_expect_empty(r.rxcq, 300, "a claimed message does not match an ordinary receive");
	tmsg(NULL, 0, 0x102, 0, (void *)0x21, FI_PEEK);
	expect_nomsg((void *)0x21, "FI_PEEK of a claimed message");
	tmsg(rb, 200000, 0x102, 0, claim_b, FI_CLAIM);
	expect_found(claim_b, 1, "FI_CLAIM receive");
	expect_pattern(rb, 100000, 2, "claimed rendezvous data");
	CHK(fi_cancel(&r.ep->fid, (void *)0x20));
	expect_canceled((void *)0x20, "cancel of the ordinary receive left posted");
	logmsg("claim ok");

	/* claim + discard, eager (0x101) and rendezvous (0x106) */
	tmsg(NULL, 0, 0x101, 0, claim_a, FI_PEEK | FI_CLAIM);
	expect_found(claim_a, 0, "FI_PEEK|FI_CLAIM of the eager message");
	tmsg(NULL, 0, 0x106, 0, claim_f, FI_PEEK | FI_CLAIM);
	expect_found(claim_f, 5, "FI_PEEK|FI_CLAIM of a rendezvous message");
	tmsg(NULL, 0, 0x101, 0, claim_a, FI_CLAIM | FI_DISCARD);
	expect_found(claim_a, 0, "FI_CLAIM|FI_DISCARD of the eager message");
	tmsg(NULL, 0, 0x106, 0, claim_f, FI_CLAIM | FI_DISCARD);
	expect_found(claim_f, 5, "FI_CLAIM|FI_DISCARD of the rendezvous message");
	tmsg(NULL, 0, 0x101, 0, (void *)0x30, FI_PEEK);
	expect_nomsg((void *)0x30, "FI_PEEK after FI_CLAIM|FI_DISCARD (eager)");
	tmsg(NULL, 0, 0x106, 0, (void *)0x31, FI_PEEK);
	expect_nomsg((void *)0x31, "FI_PEEK after FI_CLAIM|FI_DISCARD (rendezvous)");
	/* peek + discard, eager */
	tmsg(NULL, 0, 0x103, 0, (void *)0x32, FI_PEEK | FI_DISCARD);
	expect_found((void *)0x32, 2, "FI_PEEK|FI_DISCARD of an eager message");
	tmsg(NULL, 0, 0x103, 0, (void *)0x33, FI_PEEK);
	expect_nomsg((void *)0x33, "FI_PEEK after FI_PEEK|FI_DISCARD");
	logmsg("discard ok");

	/* peeked messages are still received normally */
	tmsg(NULL, 0, 0x104, 0, (void *)0x40, FI_PEEK);
	expect_found((void *)0x40, 3, "FI_PEEK of 0x104");
	memset(rb, 0, 200000);
	tmsg(rb, 200000, 0x104, 0, (void *)0x41, 0);
	expect_found((void *)0x41, 3, "receive of the peeked rendezvous message");
	expect_pattern(rb, 50000, 4, "peeked rendezvous data");
	RETRY(&r, fi_trecv(r.ep, rb, 4096, desc, r.peer, 0x105, 0, (void *)0x42));
	expect_found((void *)0x42, 4, "receive of the never-peeked eager message");
	expect_pattern(rb, 300, 5, "eager data");
	cq_expect_empty(r.rxcq, 200, "batch consumed");
	logmsg("receive after peek ok");

	/* cancel the middle of three posted receives, and an untagged one */
	RETRY(&r, fi_trecv(r.ep, rb, 4096, desc, FI_ADDR_UNSPEC, 0x210, 0, (void *)0x50));
	RETRY(&r, fi_trecv(r.ep, rb + 4096, 4096, desc, FI_ADDR_UNSPEC, 0x211, 0, (void *)0x51));
	RETRY(&r, fi_trecv(r.ep, rb + 8192, 4096, desc, FI_ADDR_UNSPEC, 0x212, 0, (void *)0x52));
	RETRY(&r, fi_recv(r.ep, rb + 12288, 4096, desc, FI_ADDR_UNSPEC, (void *)0x53));
	CHK(fi_cancel(&r.ep->fid, (void *)0x51));
	expect_canceled((void *)0x51, "cancel of the middle tagged receive");
	CHK(fi_cancel(&r.ep->fid, (void *)0x53));
	expect_canceled((void *)0x53, "cancel of the untagged receive");
	(void)fi_cancel(&r.ep->fid, (void *)0x5555);
	(void)fi_cancel(&r.ep->fid, (void *)0x51); /* already canceled */
	cq_expect_empty(r.rxcq, 200, "canceling unknown contexts completes nothing");
	oob_signal(2); /* the client sends 0x212, 0x211, 0x210 and an untagged one */
	struct fi_cq_tagged_entry e;
	rdm_expect(r.rxcq, (void *)0x52, FI_RECV | FI_TAGGED, &e, "0x212 into its receive");
	EXPECT(e.len == 100 && e.tag == 0x212, "0x212: len %zu tag %#llx", e.len, (unsigned long long)e.tag);
	rdm_expect(r.rxcq, (void *)0x50, FI_RECV | FI_TAGGED, &e, "0x210 into its receive");
	EXPECT(e.len == 100 && e.tag == 0x210, "0x210: len %zu tag %#llx", e.len, (unsigned long long)e.tag);
	expect_pattern(rb, 100, 0x210, "0x210 data");
	expect_pattern(rb + 8192, 100, 0x212, "0x212 data");
	cq_expect_empty(r.rxcq, 300, "the canceled receives stay canceled");
	tmsg(NULL, 0, 0x211, 0, (void *)0x54, FI_PEEK);
	rdm_expect(r.rxcq, (void *)0x54, FI_RECV | FI_TAGGED, &e, "0x211 waits unexpected");
	RETRY(&r, fi_trecv(r.ep, rb, 4096, desc, FI_ADDR_UNSPEC, 0x211, 0, (void *)0x55));
	rdm_expect(r.rxcq, (void *)0x55, FI_RECV | FI_TAGGED, &e, "0x211");
	expect_pattern(rb, 100, 0x211, "0x211 data");
	RETRY(&r, fi_recv(r.ep, rb, 4096, desc, FI_ADDR_UNSPEC, (void *)0x56));
	rdm_expect(r.rxcq, (void *)0x56, FI_RECV | FI_MSG, &e, "untagged");
	expect_pattern(rb, 100, 0x300, "untagged data");
	logmsg("cancel ok");
	rdm_progress_start(&r);
	oob_wait(3);
	rdm_progress_stop();
}

static void client(void)
{
	size_t off = 0;
	oob_wait(1);
	for (size_t i = 0; i < NB; i++) {
		fill_pattern(buf + off, batch[i].len, (uint32_t)i + 1);
		RETRY(&r, fi_tsenddata(r.ep, buf + off, batch[i].len, desc, batch[i].data, r.peer, batch[i].tag,
				       (void *)(0x1000 + i)));
		off += batch[i].len + 64;
	}
	bool seen[NB] = { 0 };
	for (size_t k = 0; k < NB; k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "send");
		size_t i = (size_t)(uintptr_t)e.op_context - 0x1000;
		EXPECT(i < NB && !seen[i], "send completion op_context %p", e.op_context);
		seen[i] = true;
	}
	logmsg("all batch sends completed (claimed, discarded and received ones)");
	oob_wait(2);
	static const uint64_t tags[] = { 0x212, 0x211, 0x210 };
	for (int i = 0; i < 3; i++) {
		fill_pattern(buf + (size_t)i * 4096, 100, (uint32_t)tags[i]);
		RETRY(&r, fi_tsend(r.ep, buf + (size_t)i * 4096, 100, desc, r.peer, tags[i], (void *)(0x2000L + i)));
	}
	fill_pattern(buf + 3 * 4096, 100, 0x300);
	RETRY(&r, fi_send(r.ep, buf + 3 * 4096, 100, desc, r.peer, (void *)0x2003));
	for (int i = 0; i < 4; i++)
		rdm_expect(r.txcq, (void *)(0x2000L + i), FI_SEND, NULL, "send");
	oob_signal(3);
}

int main(void)
{
	bool srv = test_start("rdm_peek");
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	rdm_exchange(&r, true);
	buf = alloc_buf(1 << 20);
	mr = rdm_mr_reg(&r, buf, 1 << 20, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client();
	rdm_test_end(srv, &r, mr, buf);
}
