/*
 * rdm_unknown_src: messages from a sender that is not in the receiver's
 * address vector yet, then inserted (fabtests' fi_unexpected_msg; rxm does
 * the same on fi_av_insert).
 *
 * The client inserts the server and sends it, in order, tagged messages
 * 0x1 (100 B), 0x2 (2000 B, eager), 0x3 (300000 B, rendezvous), 0x4 (64 B)
 * and a marker 0x9. The server has not inserted the client. Its one posted
 * receive, for the marker from any source, completes with source
 * FI_ADDR_NOTAVAIL (FI_SOURCE: the sender is unknown); by RC order the
 * four earlier messages have arrived and wait unexpected. The server then
 * inserts the client's address and:
 *  - a receive directed at the client (FI_DIRECTED_RECV) takes 0x2, and
 *    one takes 0x3 (a rendezvous read from a sender that was unknown when
 *    its request arrived), each with the client as its source;
 *  - an any-source receive takes 0x1, and its completion names the client
 *    (the sender is known now), not FI_ADDR_NOTAVAIL;
 *  - an FI_PEEK directed at the client finds 0x4, which a directed receive
 *    then takes.
 * Data are checked byte for byte; the server then sends the client a reply.
 * Before the fix, the directed receive never completed: the queued
 * message kept source FI_ADDR_NOTAVAIL.
 */
#include "rdm_procs.h"

#define BIG 300000
#define SLOT 4096
#define BLEN (BIG + 8 * SLOT)

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static const struct {
	uint64_t tag;
	size_t len;
	uint32_t seed;
} msgs[] = { { 0x1, 100, 11 }, { 0x2, 2000, 12 }, { 0x3, BIG, 13 }, { 0x4, 64, 14 }, { 0x9, 8, 19 } };

static void server(void)
{
	rdm_exchange(&r, false);
	oob_wait(1); /* the client has posted its sends */
	/* The marker, from whoever sent it: the sender is unknown. */
	memset(buf, 0, 8);
	RETRY(&r, fi_trecv(r.ep, buf, 8, desc, FI_ADDR_UNSPEC, 0x9, 0, (void *)0x90));
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r.rxcq, (void *)0x90, FI_RECV | FI_TAGGED, &e, "the marker");
	EXPECT(src == FI_ADDR_NOTAVAIL, "the marker's source is %#llx, want FI_ADDR_NOTAVAIL (the client is not inserted)",
	       (unsigned long long)src);
	expect_pattern(buf, 8, 19, "the marker");
	logmsg("marker from an unknown sender; four messages wait unexpected");

	fi_addr_t fc = av_insert_one(r.av, r.peer_name);
	rdm_recv_check(&r, buf, desc, fc, 0x2, 2000, 12, "directed receive of 0x2 (eager) after fi_av_insert");
	rdm_recv_check(&r, buf, desc, fc, 0x3, BIG, 13, "directed receive of 0x3 (rendezvous) after fi_av_insert");
	logmsg("directed receives took the queued messages of the sender just inserted");

	memset(buf, 0, 100);
	RETRY(&r, fi_trecv(r.ep, buf, 100, desc, FI_ADDR_UNSPEC, 0x1, 0, (void *)0x10));
	src = rdm_expect(r.rxcq, (void *)0x10, FI_RECV | FI_TAGGED, &e, "any-source receive of 0x1");
	EXPECT(src == fc, "0x1's source is %#llx, want the inserted client %#llx", (unsigned long long)src,
	       (unsigned long long)fc);
	expect_pattern(buf, 100, 11, "0x1");

	struct fi_msg_tagged m;
	struct iovec iov = { .iov_base = buf, .iov_len = 64 };
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.desc = &desc;
	m.iov_count = 1;
	m.addr = fc;
	m.tag = 0x4;
	m.context = (void *)0x40;
	RETRY(&r, fi_trecvmsg(r.ep, &m, FI_PEEK));
	src = rdm_expect(r.rxcq, (void *)0x40, FI_RECV | FI_TAGGED, &e, "FI_PEEK directed at the client for 0x4");
	EXPECT(src == fc && e.len == 64, "peek: source %#llx len %zu", (unsigned long long)src, e.len);
	rdm_recv_check(&r, buf, desc, fc, 0x4, 64, 14, "directed receive of 0x4");
	logmsg("any-source and peeked messages name the inserted sender");

	rdm_send_check(&r, buf, desc, fc, 0x7, 500, 77, "reply to the client");
	oob_wait(2);
}

static void client(void)
{
	rdm_exchange(&r, true);
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		uint8_t *b = buf + (i == 2 ? 0 : BIG + SLOT * i);
		fill_pattern(b, msgs[i].len, msgs[i].seed);
		RETRY(&r, fi_tsend(r.ep, b, msgs[i].len, desc, r.peer, msgs[i].tag, (void *)(uintptr_t)(0x100 + i)));
	}
	oob_signal(1);
	/* The sends complete in any order (0x3 only once the server has read it). */
	unsigned seen = 0;
	for (size_t k = 0; k < sizeof(msgs) / sizeof(msgs[0]); k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "send completion %zu of 5", k + 1);
		uintptr_t i = (uintptr_t)e.op_context - 0x100;
		EXPECT(i < 5 && !(seen & (1u << i)) && (e.flags & FI_SEND), "send completion with op_context %p flags %#llx",
		       e.op_context, (unsigned long long)e.flags);
		seen |= 1u << i;
	}
	rdm_recv_check(&r, buf, desc, r.peer, 0x7, 500, 77, "the server's reply");
	oob_signal(2);
}

int main(void)
{
	bool srv = test_start("rdm_unknown_src");
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV);
	buf = alloc_buf(BLEN);
	mr = rdm_mr_reg(&r, buf, BLEN, FI_SEND | FI_RECV | FI_REMOTE_READ);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client();
	rdm_test_end(srv, &r, mr, buf);
}
