/*
 * rdm_inject_burst: send slots are recycled under pressure, for injects sent
 * straight from the call (docs/rdm-protocol.md, "Progress") and through the
 * queue, on a connection that goes quiet and on another that carries on.
 *
 * The client runs with FI_RSVERBS_SEND_SLOTS=8 and one endpoint; the server
 * has two, A and B, and answers every message with an inject of the same
 * tag. The client
 *  1. exchanges 40 messages with A, one at a time (5 times the slots);
 *  2. exchanges 200 with B while A's connection is quiet;
 *  3. sends one more to A, then an fi_tsend with a completion to each.
 * Every message and answer is checked (tag, length, payload). The client's
 * tx CQ must hold exactly the two fi_tsend completions: injects make no
 * entry, and no error entry. A slot that a completed inject did not give
 * back stalls step 1 by the 9th message (the test fails on its time-out).
 */
#include <stdlib.h>

#include <rdma/fi_tagged.h>

#include "common.h"
#include "rdm_common.h"

#define NA 40
#define NB 200
#define MSZ 16
#define BUFSZ (1 << 16)

static struct rctx ra, rb;
static uint8_t *buf;

static void inject(struct rctx *r, fi_addr_t to, uint64_t tag)
{
	uint8_t m[MSZ];
	fill_pattern(m, MSZ, (uint32_t)tag);
	RETRY(r, fi_tinject(r->ep, m, MSZ, to, tag));
}

/* Post a receive for `tag` on r, wait for it, check it. */
static void recv_one(struct rctx *r, void *desc, uint64_t tag, const char *what)
{
	uint8_t *b = buf + (tag % 1024) * MSZ;
	memset(b, 0, MSZ);
	RETRY(r, fi_trecv(r->ep, b, MSZ, desc, FI_ADDR_UNSPEC, tag, 0, (void *)(uintptr_t)(tag + 1)));
	struct fi_cq_tagged_entry e;
	rdm_next(r->rxcq, &e, "%s: message %llu", what, (unsigned long long)tag);
	EXPECT(e.tag == tag && e.len == MSZ && (uint64_t)(uintptr_t)e.op_context == tag + 1,
	       "%s: got tag %llu len %zu context %p for %llu", what, (unsigned long long)e.tag, e.len, e.op_context,
	       (unsigned long long)tag);
	expect_pattern(b, MSZ, (uint32_t)tag, what);
}

static void server(void *desc_a, void *desc_b)
{
	for (uint64_t i = 0; i < NA; i++) {
		recv_one(&ra, desc_a, i, "A");
		inject(&ra, ra.peer, i);
	}
	for (uint64_t i = NA; i < NA + NB; i++) {
		recv_one(&rb, desc_b, i, "B");
		inject(&rb, rb.peer, i);
	}
	recv_one(&ra, desc_a, NA + NB, "A again");
	recv_one(&ra, desc_a, NA + NB + 1, "A, fi_tsend");
	recv_one(&rb, desc_b, NA + NB + 2, "B, fi_tsend");
	oob_wait(3);
	logmsg("all %d messages arrived, %d answered", NA + NB + 3, NA + NB);
}

static void client(fi_addr_t a, fi_addr_t b, void *desc)
{
	for (uint64_t i = 0; i < NA + NB; i++) {
		inject(&ra, i < NA ? a : b, i);
		recv_one(&ra, desc, i, i < NA ? "answer from A" : "answer from B");
	}
	inject(&ra, a, NA + NB);
	uint8_t *t = buf + 2048 * MSZ;
	fill_pattern(t, MSZ, NA + NB + 1);
	RETRY(&ra, fi_tsend(ra.ep, t, MSZ, desc, a, NA + NB + 1, (void *)0x5a));
	fill_pattern(t + MSZ, MSZ, NA + NB + 2);
	RETRY(&ra, fi_tsend(ra.ep, t + MSZ, MSZ, desc, b, NA + NB + 2, (void *)0x5b));
	struct fi_cq_tagged_entry e;
	bool got_a = false, got_b = false;
	for (int k = 0; k < 2; k++) {
		rdm_next(ra.txcq, &e, "client tx CQ entry %d", k);
		EXPECT(e.op_context == (void *)0x5a || e.op_context == (void *)0x5b,
		       "tx CQ entry with context %p: injects must make none", e.op_context);
		got_a |= e.op_context == (void *)0x5a;
		got_b |= e.op_context == (void *)0x5b;
	}
	EXPECT(got_a && got_b, "both fi_tsend completions");
	/* Keep the endpoint progressing until the server has the last two. */
	rdm_progress_start(&ra);
	oob_signal(3);
	cq_expect_empty(ra.txcq, 300, "client tx CQ after the two fi_tsend");
	rdm_progress_stop();
}

int main(void)
{
	bool srv = test_start("rdm_inject_burst");
	if (!srv)
		setenv("FI_RSVERBS_SEND_SLOTS", "8", 1);
	rdm_open(&ra, FI_TAGGED | FI_MSG);
	buf = alloc_buf(BUFSZ);
	struct fid_mr *mra = rdm_mr_reg(&ra, buf, BUFSZ, FI_SEND | FI_RECV), *mrb = NULL;
	uint32_t l;
	if (srv) {
		rdm_open(&rb, FI_TAGGED | FI_MSG);
		mrb = rdm_mr_reg(&rb, buf, BUFSZ, FI_SEND | FI_RECV);
		struct rctx *mine[2] = { &ra, &rb };
		for (int k = 0; k < 2; k++) {
			l = (uint32_t)mine[k]->namelen;
			oob_send(&l, sizeof(l));
			oob_send(mine[k]->name, mine[k]->namelen);
		}
		char n[64];
		oob_recv(&l, sizeof(l));
		EXPECT(l > 0 && l <= sizeof(n), "client name length %u", l);
		oob_recv(n, l);
		for (int k = 0; k < 2; k++)
			EXPECT(CHK(fi_av_insert(mine[k]->av, n, 1, &mine[k]->peer, 0, NULL)) == 1, "fi_av_insert");
		server(fi_mr_desc(mra), fi_mr_desc(mrb));
		mr_close(mrb);
		rdm_close(&rb);
	} else {
		fi_addr_t ab[2];
		char n[64];
		for (int k = 0; k < 2; k++) {
			oob_recv(&l, sizeof(l));
			EXPECT(l > 0 && l <= sizeof(n), "server name length %u", l);
			oob_recv(n, l);
			EXPECT(CHK(fi_av_insert(ra.av, n, 1, &ab[k], 0, NULL)) == 1, "fi_av_insert");
		}
		l = (uint32_t)ra.namelen;
		oob_send(&l, sizeof(l));
		oob_send(ra.name, ra.namelen);
		client(ab[0], ab[1], fi_mr_desc(mra));
	}
	rdm_test_end(srv, &ra, mra, buf);
}
