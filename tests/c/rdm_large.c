/*
 * rdm_large: 8 MiB rendezvous messages, byte-exact (needs ~64 MiB of pinned
 * memory per process: run the lab with --mem 4G).
 *
 *  - one 8 MiB fi_send from a buffer registered FI_SEND (the provider adds
 *    remote read for RDM) into one receive buffer;
 *  - an 8 MiB fi_sendv of 3 pieces from a buffer registered FI_RECV only (the
 *    provider registers it for remote read itself) into a 4-piece fi_recvv;
 *  - the same 8 MiB the other way round, sent before the receive is posted
 *    (unexpected rendezvous), and a tagged 8 MiB + 1 B message.
 */
#include "rdm_common.h"

#define BIG (8u << 20)

static struct rctx r;

static void recv_big(uint8_t *b, void *d, void *ctx, uint32_t seed, size_t len, const char *what)
{
	struct fi_cq_tagged_entry e;
	memset(b, 0, len);
	RETRY(&r, fi_recv(r.ep, b, len, d, FI_ADDR_UNSPEC, ctx));
	oob_signal(1);
	rdm_expect(r.rxcq, ctx, FI_RECV | FI_MSG, &e, what);
	EXPECT(e.len == len, "%s: len %zu", what, e.len);
	expect_pattern(b, len, seed, what);
}

int main(void)
{
	struct fi_cq_tagged_entry e;
	bool srv = test_start("rdm_large");
	rdm_open(&r, FI_MSG | FI_TAGGED);
	rdm_exchange(&r, true);
	EXPECT(r.info->ep_attr->max_msg_size >= BIG + 1, "max_msg_size %zu < 8 MiB", r.info->ep_attr->max_msg_size);
	uint8_t *a = alloc_buf(BIG + 4096);
	uint8_t *b = alloc_buf(BIG + 4096);
	struct fid_mr *ma = rdm_mr_reg(&r, a, BIG + 4096, FI_SEND | FI_RECV);
	struct fid_mr *mb = rdm_mr_reg(&r, b, BIG + 4096, FI_RECV);
	void *da = fi_mr_desc(ma), *db = fi_mr_desc(mb);

	if (srv) {
		/* 1. one buffer each side */
		recv_big(a, da, (void *)1, 11, BIG, "8 MiB into one buffer");
		/* 2. 4-piece receive */
		memset(b, 0, BIG);
		struct iovec iov[4] = { { b, 4096 }, { b + 4096, 3u << 20 }, { b + 4096 + (3u << 20), 1 },
					{ b + 4097 + (3u << 20), BIG - 4097 - (3u << 20) } };
		void *d[4] = { db, db, db, db };
		RETRY(&r, fi_recvv(r.ep, iov, d, 4, FI_ADDR_UNSPEC, (void *)2));
		oob_signal(2);
		rdm_expect(r.rxcq, (void *)2, FI_RECV | FI_MSG, &e, "8 MiB sendv into recvv");
		EXPECT(e.len == BIG, "recvv len %zu", e.len);
		expect_pattern(b, BIG, 12, "8 MiB sendv into recvv");
		logmsg("server: received both 8 MiB messages");
		/* 3. the other way, unexpected at the client */
		fill_pattern(a, BIG, 13);
		RETRY(&r, fi_send(r.ep, a, BIG, da, r.peer, (void *)3));
		oob_signal(3);
		rdm_expect(r.txcq, (void *)3, FI_SEND | FI_MSG, &e, "8 MiB send to the client");
		fill_pattern(b, BIG + 1, 14);
		RETRY(&r, fi_tsend(r.ep, b, BIG + 1, db, r.peer, 0xbeef, (void *)4));
		rdm_expect(r.txcq, (void *)4, FI_SEND | FI_TAGGED, &e, "8 MiB + 1 tagged send");
		oob_wait(4);
	} else {
		fill_pattern(a, BIG, 11);
		oob_wait(1);
		RETRY(&r, fi_send(r.ep, a, BIG, da, r.peer, (void *)0x11));
		rdm_expect(r.txcq, (void *)0x11, FI_SEND | FI_MSG, &e, "8 MiB send");
		fill_pattern(b, BIG, 12);
		oob_wait(2);
		struct iovec iov[3] = { { b, 1u << 20 }, { b + (1u << 20), 5 }, { b + (1u << 20) + 5, BIG - (1u << 20) - 5 } };
		void *d[3] = { db, db, db };
		RETRY(&r, fi_sendv(r.ep, iov, d, 3, r.peer, (void *)0x12));
		rdm_expect(r.txcq, (void *)0x12, FI_SEND | FI_MSG, &e, "8 MiB sendv");
		/* unexpected: let the server's send arrive first */
		oob_wait(3);
		cq_expect_empty(r.rxcq, 300, "no receive posted yet");
		memset(a, 0, BIG);
		RETRY(&r, fi_recv(r.ep, a, BIG, da, FI_ADDR_UNSPEC, (void *)0x13));
		rdm_expect(r.rxcq, (void *)0x13, FI_RECV | FI_MSG, &e, "unexpected 8 MiB");
		EXPECT(e.len == BIG, "unexpected 8 MiB len %zu", e.len);
		expect_pattern(a, BIG, 13, "unexpected 8 MiB");
		memset(b, 0, BIG + 1);
		RETRY(&r, fi_trecv(r.ep, b, BIG + 4096, db, FI_ADDR_UNSPEC, 0xbeef, 0, (void *)0x14));
		rdm_expect(r.rxcq, (void *)0x14, FI_RECV | FI_TAGGED, &e, "tagged 8 MiB + 1");
		EXPECT(e.len == BIG + 1 && e.tag == 0xbeef, "tagged 8 MiB + 1: len %zu tag %#llx", e.len,
		       (unsigned long long)e.tag);
		expect_pattern(b, BIG + 1, 14, "tagged 8 MiB + 1");
		oob_signal(4);
	}
	mr_close(ma);
	mr_close(mb);
	rdm_close(&r);
	free(a);
	free(b);
	if (srv)
		test_finish();
	child_done();
}
