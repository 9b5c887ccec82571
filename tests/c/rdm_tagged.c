/*
 * rdm_tagged: FI_EP_RDM tagged messaging (FI_TAGGED, FI_DIRECTED_RECV).
 *
 *  - tag matching with ignore masks (first posted matching receive wins),
 *    tags and FI_TAGGED in completions, fi_trecvv / fi_tsendv / fi_tsendmsg;
 *  - fi_tsenddata (remote CQ data), fi_tinject, fi_tinjectdata;
 *  - unexpected tagged messages, eager and rendezvous, then FI_PEEK (found /
 *    FI_ENOMSG), FI_PEEK|FI_CLAIM followed by an FI_CLAIM receive,
 *    FI_PEEK|FI_DISCARD of a rendezvous message (the sender's send completes);
 *  - directed receives: a receive for another fi_addr is not matched;
 *  - untagged and tagged traffic do not match each other.
 */
#include "rdm_common.h"

#define BUFSZ (1u << 20)

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static void trecv(void *b, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	RETRY(&r, fi_trecv(r.ep, b, len, desc, src, tag, ignore, ctx));
}

static void trecvmsg(void *b, size_t len, uint64_t tag, uint64_t ignore, void *ctx, uint64_t flags)
{
	rdm_trecvmsg(&r, b, len, desc, tag, ignore, ctx, flags);
}

static void expect_tagged(void *ctx, uint64_t tag, size_t len, uint32_t seed, uint8_t *at, const char *what)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r.rxcq, ctx, FI_RECV | FI_TAGGED, &e, what);
	EXPECT(e.tag == tag, "%s: tag %#llx, want %#llx", what, (unsigned long long)e.tag, (unsigned long long)tag);
	EXPECT(e.len == len, "%s: len %zu, want %zu", what, e.len, len);
	EXPECT(src == r.peer, "%s: src %#llx", what, (unsigned long long)src);
	if (at)
		expect_pattern(at, len, seed, what);
}

static void server(void)
{
	struct fi_cq_tagged_entry e;

	/* 1. ignore masks: A takes 0x100..0x1ff, B exactly 0x5, C anything */
	trecv(buf, 4096, FI_ADDR_UNSPEC, 0x100, 0xff, (void *)0xa);
	trecv(buf + 4096, 4096, FI_ADDR_UNSPEC, 0x5, 0, (void *)0xb);
	oob_signal(1);
	expect_tagged((void *)0xb, 0x5, 1000, 1, buf + 4096, "tag 0x5 into the exact receive");
	expect_tagged((void *)0xa, 0x1ab, 2000, 2, buf, "tag 0x1ab into the masked receive");
	{
		struct iovec iov[2] = { { buf, 50000 }, { buf + 50000, 200000 } };
		void *d[2] = { desc, desc };
		RETRY(&r, fi_trecvv(r.ep, iov, d, 2, FI_ADDR_UNSPEC, 0xffff0000, 0xffff, (void *)0xc));
	}
	oob_signal(2);
	expect_tagged((void *)0xc, 0xffff1234, 150000, 3, buf, "fi_tsendv rendezvous into fi_trecvv");
	logmsg("phase 1 (ignore masks, iovs) ok");

	/* 2. data, inject */
	trecv(buf, 4096, FI_ADDR_UNSPEC, 0x20, 0, (void *)0x20);
	trecv(buf + 4096, 4096, FI_ADDR_UNSPEC, 0x21, 0, (void *)0x21);
	trecv(buf + 8192, 4096, FI_ADDR_UNSPEC, 0x22, 0, (void *)0x22);
	oob_signal(3);
	rdm_expect(r.rxcq, (void *)0x20, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, &e, "tsenddata");
	EXPECT(e.data == 0x77 && e.tag == 0x20 && e.len == 500, "tsenddata: data %#llx tag %#llx len %zu",
	       (unsigned long long)e.data, (unsigned long long)e.tag, e.len);
	expect_tagged((void *)0x21, 0x21, 64, 4, buf + 4096, "tinject");
	rdm_expect(r.rxcq, (void *)0x22, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, &e, "tinjectdata");
	EXPECT(e.data == 0x99 && e.len == 8, "tinjectdata: data %#llx len %zu", (unsigned long long)e.data, e.len);
	logmsg("phase 2 (data, inject) ok");

	/* 3. unexpected + peek / claim / discard */
	oob_wait(4);
	cq_expect_empty(r.rxcq, 300, "unexpected tagged messages wait");
	trecvmsg(NULL, 0, 8, 0, (void *)0x30, FI_PEEK);
	rdm_expect(r.rxcq, (void *)0x30, FI_RECV | FI_TAGGED, &e, "peek tag 8");
	EXPECT(e.len == 200000 && e.tag == 8 && e.buf == NULL, "peek: len %zu tag %#llx buf %p", e.len,
	       (unsigned long long)e.tag, e.buf);
	trecvmsg(NULL, 0, 9, 0, (void *)0x31, FI_PEEK);
	struct fi_cq_err_entry err = rdm_expect_err(r.rxcq, FI_ENOMSG, "peek tag 9");
	EXPECT(err.op_context == (void *)0x31, "peek tag 9: op_context %p", err.op_context);
	struct fi_context claim_ctx;
	trecvmsg(NULL, 0, 7, 0, &claim_ctx, FI_PEEK | FI_CLAIM);
	rdm_expect(r.rxcq, &claim_ctx, FI_RECV | FI_TAGGED, &e, "peek|claim tag 7");
	EXPECT(e.len == 100, "peek|claim: len %zu", e.len);
	/* a plain receive for tag 7 must not take the claimed message */
	trecv(buf + 65536, 4096, FI_ADDR_UNSPEC, 7, 0, (void *)0x32);
	cq_expect_empty(r.rxcq, 200, "claimed message is reserved");
	trecvmsg(buf, 4096, 7, 0, &claim_ctx, FI_CLAIM);
	expect_tagged(&claim_ctx, 7, 100, 7, buf, "claim tag 7");
	CHK(fi_cancel(&r.ep->fid, (void *)0x32));
	rdm_expect_err(r.rxcq, FI_ECANCELED, "cancel the tag-7 receive");
	trecv(buf, BUFSZ, FI_ADDR_UNSPEC, 8, 0, (void *)0x33);
	expect_tagged((void *)0x33, 8, 200000, 8, buf, "unexpected rendezvous tag 8");
	trecvmsg(NULL, 0, 10, 0, (void *)0x34, FI_PEEK | FI_DISCARD);
	rdm_expect(r.rxcq, (void *)0x34, FI_RECV | FI_TAGGED, &e, "peek|discard tag 10");
	EXPECT(e.len == 300000, "discarded message len %zu", e.len);
	oob_signal(5);
	logmsg("phase 3 (unexpected, peek, claim, discard) ok");

	/* 4. directed receive: the first receive wants fi_addr 1 (another peer) */
	struct sockaddr_in other;
	memcpy(&other, r.peer_name, sizeof(other));
	other.sin_port = htons((uint16_t)(ntohs(other.sin_port) ^ 0x5a5a));
	fi_addr_t other_addr;
	EXPECT(fi_av_insert(r.av, &other, 1, &other_addr, 0, NULL) == 1, "insert a second address");
	trecv(buf, 4096, other_addr, 0x40, 0, (void *)0x40);
	trecv(buf + 4096, 4096, r.peer, 0x40, 0, (void *)0x41);
	/* an untagged send must not match tagged receives */
	oob_signal(6);
	expect_tagged((void *)0x41, 0x40, 300, 40, buf + 4096, "directed receive from the peer");
	cq_expect_empty(r.rxcq, 200, "the receive for the other address stays posted");
	CHK(fi_cancel(&r.ep->fid, (void *)0x40));
	rdm_expect_err(r.rxcq, FI_ECANCELED, "cancel the other-address receive");
	RETRY(&r, fi_recv(r.ep, buf, 4096, desc, FI_ADDR_UNSPEC, (void *)0x42));
	rdm_expect(r.rxcq, (void *)0x42, FI_RECV | FI_MSG, &e, "untagged message into an untagged receive");
	EXPECT(e.len == 10, "untagged len %zu", e.len);
	logmsg("phase 4 (directed receive, untagged vs tagged) ok");
	oob_signal(7);
	oob_wait(8);
}

static void client(void)
{
	struct fi_cq_tagged_entry e;

	oob_wait(1);
	fill_pattern(buf, 1000, 1);
	RETRY(&r, fi_tsend(r.ep, buf, 1000, desc, r.peer, 0x5, (void *)0x105));
	rdm_expect(r.txcq, (void *)0x105, FI_SEND | FI_TAGGED, &e, "tsend 0x5");
	fill_pattern(buf, 2000, 2);
	RETRY(&r, fi_tsend(r.ep, buf, 2000, desc, r.peer, 0x1ab, (void *)0x106));
	rdm_expect(r.txcq, (void *)0x106, FI_SEND | FI_TAGGED, &e, "tsend 0x1ab");
	oob_wait(2);
	fill_pattern(buf, 150000, 3);
	{
		struct iovec iov[3] = { { buf, 1 }, { buf + 1, 70000 }, { buf + 70001, 79999 } };
		void *d[3] = { desc, desc, desc };
		RETRY(&r, fi_tsendv(r.ep, iov, d, 3, r.peer, 0xffff1234, (void *)0x107));
	}
	rdm_expect(r.txcq, (void *)0x107, FI_SEND | FI_TAGGED, &e, "tsendv");

	oob_wait(3);
	fill_pattern(buf, 500, 5);
	RETRY(&r, fi_tsenddata(r.ep, buf, 500, desc, 0x77, r.peer, 0x20, (void *)0x120));
	rdm_expect(r.txcq, (void *)0x120, FI_SEND | FI_TAGGED, &e, "tsenddata");
	fill_pattern(buf, 64, 4);
	RETRY(&r, fi_tinject(r.ep, buf, 64, r.peer, 0x21));
	uint64_t v = 1;
	RETRY(&r, fi_tinjectdata(r.ep, &v, 8, 0x99, r.peer, 0x22));

	/* unexpected: tag 7 eager, tag 8 rendezvous, tag 10 rendezvous (discarded) */
	fill_pattern(buf, 100, 7);
	RETRY(&r, fi_tsend(r.ep, buf, 100, desc, r.peer, 7, (void *)0x130));
	fill_pattern(buf + 4096, 200000, 8);
	RETRY(&r, fi_tsend(r.ep, buf + 4096, 200000, desc, r.peer, 8, (void *)0x131));
	RETRY(&r, fi_tsend(r.ep, buf + 262144, 300000, desc, r.peer, 10, (void *)0x132));
	rdm_expect(r.txcq, (void *)0x130, FI_SEND | FI_TAGGED, &e, "unexpected eager tsend");
	cq_expect_empty(r.txcq, 100, "rendezvous sends wait for the receiver");
	oob_signal(4);
	/* both rendezvous sends complete (tag 10 through the receiver's discard), in any order */
	{
		bool seen131 = false, seen132 = false;
		for (int i = 0; i < 2; i++) {
			rdm_next(r.txcq, &e, "rendezvous tsend");
			EXPECT(e.flags & FI_TAGGED, "rendezvous tsend flags %#llx", (unsigned long long)e.flags);
			if (e.op_context == (void *)0x131 && !seen131)
				seen131 = true;
			else if (e.op_context == (void *)0x132 && !seen132)
				seen132 = true;
			else
				fail("rendezvous tsend: unexpected op_context %p", e.op_context);
		}
	}
	oob_wait(5);

	oob_wait(6);
	fill_pattern(buf, 10, 9);
	RETRY(&r, fi_send(r.ep, buf, 10, desc, r.peer, (void *)0x141));
	fill_pattern(buf + 4096, 300, 40);
	RETRY(&r, fi_tsend(r.ep, buf + 4096, 300, desc, r.peer, 0x40, (void *)0x140));
	rdm_expect(r.txcq, (void *)0x141, FI_SEND | FI_MSG, &e, "untagged send");
	rdm_expect(r.txcq, (void *)0x140, FI_SEND | FI_TAGGED, &e, "directed tsend");
	oob_wait(7);
	oob_signal(8);
}

int main(void)
{
	bool srv = test_start("rdm_tagged");
	rdm_open(&r, FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE);
	rdm_exchange(&r, true);
	buf = alloc_buf(BUFSZ);
	mr = rdm_mr_reg(&r, buf, BUFSZ, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client();
	rdm_test_end(srv, &r, mr, buf);
}
