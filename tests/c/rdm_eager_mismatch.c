/*
 * rdm_eager_mismatch: two processes with different FI_RSVERBS_EAGER_SIZE
 * (16384 in the server, "big"; 4096 in the client, "small") exchange
 * messages both ways without loss.
 *
 * A receiver's bounce buffers hold its own eager size (plus a header,
 * rounded up to 64: 4160 bytes for 4096). Before protocol version 4 the
 * big side sent EAGER everything up to its 16384 bytes, so its 8192- and
 * 16384-byte messages (and its 16384-byte inject) overran the small side's
 * buffers: a local length error at the receive, the connection broken, the
 * sends failed and the receives never completed. Since version 4 the HELLO
 * carries each side's largest EAGER payload, and the big side sends
 * anything longer than 4096 to the small one by rendezvous.
 *
 * Every burst: fi_send and fi_tsend of 0, 1, 4096, 4097, 8192, 16384,
 * 16385 and 1 MiB bytes, then fi_inject and fi_tinject of the sender's
 * inject size (its eager size over rsverbs: 16384 from the big side), whose
 * source is overwritten right after the call. The receiver checks every
 * byte, the length, the tag, and that the byte after each message is
 * untouched; the sender gets exactly one success per fi_send/fi_tsend and
 * none for the injects.
 *
 *  round 1 (the big side connects):
 *    1  big -> small before any connection exists: the small side makes no
 *       call (so cannot accept) until the big side has posted the whole
 *       burst; everything waits for the connection, EAGER up to 16384,
 *       and must leave by rendezvous above 4096 once the accept's HELLO
 *       told the limit;
 *    2  small -> big;
 *    3  big -> small on the established connection.
 *  round 2 (fresh endpoints; the small side connects):
 *    4  small -> big before any connection exists;
 *    5  big -> small: the big side learnt the limit from the connect
 *       request's HELLO.
 */
#include "rdm_common.h"

#define BIG_EAGER 16384
#define SMALL_EAGER 4096
#define MIB (1u << 20)
#define AREA (4u * MIB)
#define SLACK 64     /* each receive buffer is this much longer than its message */
#define GUARD 0xee   /* receive areas are filled with this first */
#define SCRIBBLE 0x5a /* an inject's source is overwritten with this after the call */
#define TAG_BASE 0x7a00
#define TAG_INJ 0x7aff
#define MAX_INJ (256u * 1024) /* a burst then still fits AREA */

static const size_t sizes[] = { 0, 1, 4096, 4097, 8192, 16384, 16385, MIB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
/* per burst: untagged sizes, tagged sizes, fi_inject, fi_tinject */
#define NMSG (2 * NSIZES + 2)

static struct rctx r;
static uint8_t *sbuf, *rbuf;
static struct fid_mr *smr, *rmr;
static void *sdesc, *rdesc;
static bool big;

/* Message k of a burst: its length (inj = the sender's inject size), tag
 * (0: untagged) and pattern seed. */
static size_t msg_len(int k, size_t inj)
{
	return k < (int)(2 * NSIZES) ? sizes[k % NSIZES] : inj;
}

static uint64_t msg_tag(int k)
{
	if (k < (int)NSIZES || k == (int)(2 * NSIZES))
		return 0;
	return k == (int)(2 * NSIZES + 1) ? TAG_INJ : TAG_BASE + (uint64_t)(k - NSIZES);
}

static uint32_t msg_seed(int phase, int k)
{
	return (uint32_t)(phase * 100 + k + 1);
}

/* Offsets of the messages in a burst's area (64-byte aligned, SLACK apart). */
static size_t msg_off(int k, size_t inj)
{
	size_t off = 0;
	for (int j = 0; j < k; j++)
		off += (msg_len(j, inj) + SLACK + 63) & ~(size_t)63;
	return off;
}

/* An endpoint, the peer's name in its AV, both areas registered. */
static void open_pair(void)
{
	rdm_open(&r, FI_MSG | FI_TAGGED);
	rdm_exchange(&r, true);
	smr = rdm_mr_reg(&r, sbuf, AREA, FI_SEND | FI_RECV);
	rmr = rdm_mr_reg(&r, rbuf, AREA, FI_SEND | FI_RECV);
	sdesc = fi_mr_desc(smr);
	rdesc = fi_mr_desc(rmr);
	size_t inj = r.info->tx_attr->inject_size;
	logmsg("%s side: inject_size %zu", big ? "big" : "small", inj);
	if (rdm_rsverbs)
		EXPECT(inj == (big ? BIG_EAGER : SMALL_EAGER), "inject_size %zu: FI_RSVERBS_EAGER_SIZE not in effect", inj);
	EXPECT(inj >= 1 && inj <= MAX_INJ, "inject_size %zu", inj);
}

static void close_pair(void)
{
	mr_close(smr);
	mr_close(rmr);
	smr = rmr = NULL;
	rdm_close(&r);
}

/* Post a whole burst to the peer, without waiting for anything. */
static void burst_post(int phase)
{
	size_t inj = r.info->tx_attr->inject_size;
	for (int k = 0; k < (int)NMSG; k++) {
		size_t len = msg_len(k, inj);
		uint8_t *b = sbuf + msg_off(k, inj);
		uint64_t tag = msg_tag(k);
		void *ctx = (void *)(uintptr_t)(0x10000 * phase + k);
		fill_pattern(b, len, msg_seed(phase, k));
		if (k < (int)NSIZES)
			RETRY(&r, fi_send(r.ep, b, len, sdesc, r.peer, ctx));
		else if (k < (int)(2 * NSIZES))
			RETRY(&r, fi_tsend(r.ep, b, len, sdesc, r.peer, tag, ctx));
		else if (tag == 0)
			RETRY(&r, fi_inject(r.ep, b, len, r.peer));
		else
			RETRY(&r, fi_tinject(r.ep, b, len, r.peer, tag));
		if (k >= (int)(2 * NSIZES))
			memset(b, SCRIBBLE, len); /* the provider copied it, or the peer reads garbage */
	}
	logmsg("phase %d: %d messages posted (%s -> %s)", phase, (int)NMSG, big ? "big" : "small", big ? "small" : "big");
}

/* Wait for the burst's send completions: one success each for the
 * fi_send/fi_tsend (any order: eager ones complete when sent, rendezvous
 * ones when the peer has read them), nothing for the injects. */
static void burst_sent(int phase)
{
	bool seen[NMSG] = { false };
	for (int n = 0; n < (int)(2 * NSIZES); n++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "phase %d: send completion %d", phase, n);
		long k = (long)((uintptr_t)e.op_context - 0x10000 * (uintptr_t)phase);
		EXPECT(k >= 0 && k < (long)(2 * NSIZES) && !seen[k], "phase %d: send completion with op_context %p", phase,
		       e.op_context);
		seen[k] = true;
		EXPECT(e.flags & FI_SEND, "phase %d: send %ld: flags %#llx", phase, k, (unsigned long long)e.flags);
	}
	cq_expect_empty(r.txcq, 100, "injects complete silently");
	logmsg("phase %d: all sends complete", phase);
}

/* Post the burst's receives (untagged in send order, tagged by tag), each
 * SLACK bytes longer than its message, into guarded buffers laid out as the
 * sender's (`inj`: the sender's inject size). Messages that arrived already
 * wait as unexpected ones. */
static void burst_recv_post(int phase, size_t inj)
{
	memset(rbuf, GUARD, msg_off(NMSG, inj));
	for (int k = 0; k < (int)NMSG; k++) {
		size_t len = msg_len(k, inj);
		uint8_t *b = rbuf + msg_off(k, inj);
		uint64_t tag = msg_tag(k);
		void *ctx = (void *)(uintptr_t)(0x20000 * phase + k);
		if (tag == 0)
			RETRY(&r, fi_recv(r.ep, b, len + SLACK, rdesc, FI_ADDR_UNSPEC, ctx));
		else
			RETRY(&r, fi_trecv(r.ep, b, len + SLACK, rdesc, FI_ADDR_UNSPEC, tag, 0, ctx));
	}
}

/* Every receive of the burst completes once (any order: eager ones on
 * arrival, rendezvous ones when read): flags, length, tag, every byte, and
 * the SLACK bytes after the message untouched. */
static void burst_recv_wait(int phase, size_t inj)
{
	char what[96];
	bool seen[NMSG] = { false };
	for (int n = 0; n < (int)NMSG; n++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.rxcq, &e, "phase %d: receive %d", phase, n);
		long k = (long)((uintptr_t)e.op_context - 0x20000 * (uintptr_t)phase);
		EXPECT(k >= 0 && k < (long)NMSG && !seen[k], "phase %d: receive completion with op_context %p", phase,
		       e.op_context);
		seen[k] = true;
		size_t len = msg_len((int)k, inj);
		uint64_t tag = msg_tag((int)k);
		uint8_t *b = rbuf + msg_off((int)k, inj);
		snprintf(what, sizeof(what), "phase %d: %s%s of %zu bytes", phase,
			 k >= (long)(2 * NSIZES) ? "inject" : "message", tag ? " (tagged)" : "", len);
		EXPECT((e.flags & FI_RECV) && !!(e.flags & FI_TAGGED) == !!tag, "%s: flags %#llx", what,
		       (unsigned long long)e.flags);
		EXPECT(e.len == len, "%s: len %zu (matched out of order?)", what, e.len);
		if (tag)
			EXPECT(e.tag == tag, "%s: tag %#llx", what, (unsigned long long)e.tag);
		expect_pattern(b, len, msg_seed(phase, (int)k), what);
		for (size_t i = len; i < len + SLACK; i++)
			EXPECT(b[i] == GUARD, "%s: byte %zu after the message overwritten (0x%02x)", what, i - len, b[i]);
	}
	logmsg("phase %d: %d messages received and checked", phase, (int)NMSG);
}

/* The peer's inject size travels over the oob channel: the receiver lays
 * its buffers out as the sender does. */
static size_t oob_inject_size(void)
{
	uint64_t mine = r.info->tx_attr->inject_size, theirs = 0;
	if (big) {
		oob_send(&mine, sizeof(mine));
		oob_recv(&theirs, sizeof(theirs));
	} else {
		oob_recv(&theirs, sizeof(theirs));
		oob_send(&mine, sizeof(mine));
	}
	EXPECT(theirs >= 1 && theirs <= MAX_INJ, "the peer's inject_size %llu", (unsigned long long)theirs);
	return (size_t)theirs;
}

/* The sender of a phase: post the burst (tell the receiver when it is all
 * posted), then wait for its completions. */
static void send_phase(int phase, bool first)
{
	if (!first)
		oob_wait((uint8_t)phase); /* the receiver posted its receives */
	burst_post(phase);
	if (first)
		oob_signal((uint8_t)phase); /* everything queued before the peer made a call */
	burst_sent(phase);
	oob_signal((uint8_t)(phase + 100));
}

/* The receiver of a phase; `first`: make no call until the sender has posted
 * its whole burst (over rsverbs no connection can be accepted meanwhile, so
 * all of it waits for the connection). Keeps progressing until the sender
 * has all its completions (FINs). */
static void recv_phase(int phase, bool first, size_t peer_inj)
{
	if (first) {
		/* Over rsverbs the sends queue until the connection is up. Other
		 * providers (ofi_rxm) answer -FI_EAGAIN until then: progress for
		 * them meanwhile, or the sender would wait forever. */
		if (!rdm_rsverbs)
			rdm_progress_start(&r);
		oob_wait((uint8_t)phase);
		if (!rdm_rsverbs)
			rdm_progress_stop();
		burst_recv_post(phase, peer_inj);
	} else {
		/* receives first, then the sender goes */
		burst_recv_post(phase, peer_inj);
		oob_signal((uint8_t)phase);
	}
	burst_recv_wait(phase, peer_inj);
	rdm_progress_start(&r);
	oob_wait((uint8_t)(phase + 100));
	rdm_progress_stop();
}

int main(void)
{
	bool srv = test_start("rdm_eager_mismatch");
	big = srv;
	/* Before any libfabric call (rsverbs reads its knobs once per process):
	 * each process its own eager size. */
	setenv("FI_RSVERBS_EAGER_SIZE", big ? "16384" : "4096", 1);
	sbuf = alloc_buf(AREA);
	rbuf = alloc_buf(AREA);

	/* round 1: the big side's first sends make the connection */
	open_pair();
	size_t peer_inj = oob_inject_size();
	if (big) {
		send_phase(1, true);
		recv_phase(2, false, peer_inj);
		send_phase(3, false);
	} else {
		recv_phase(1, true, peer_inj);
		send_phase(2, false);
		recv_phase(3, false, peer_inj);
	}
	oob_barrier(big, 50, 51);
	close_pair();

	/* round 2: fresh endpoints, the small side's first sends make the connection */
	open_pair();
	peer_inj = oob_inject_size();
	if (big) {
		recv_phase(4, true, peer_inj);
		send_phase(5, false);
	} else {
		send_phase(4, true);
		recv_phase(5, false, peer_inj);
	}
	oob_barrier(big, 52, 53);
	mr_close(smr);
	mr_close(rmr);
	rdm_close(&r);
	free(rbuf);
	if (srv) {
		free(sbuf);
		test_finish();
	}
	free(sbuf);
	child_done();
}
