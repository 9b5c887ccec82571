/*
 * rdm_atomic: atomics by fi_addr on FI_EP_RDM (beyond rdm_rma's basics).
 *
 *  - the whole datatype x op matrix of fi_atomicvalid, fi_fetch_atomicvalid,
 *    fi_compare_atomicvalid and fi_query_atomic (flags 0, FI_FETCH_ATOMIC,
 *    FI_COMPARE_ATOMIC): every answer is 0 with a count >= 1 or
 *    -FI_EOPNOTSUPP, fi_query_atomic agrees with the *valid call and gives
 *    the datatype's size; over rsverbs the supported set is exactly the
 *    README's (FI_SUM on FI_INT64/FI_UINT64 for fi_atomic and fi_fetch_atomic,
 *    FI_ATOMIC_READ for fi_fetch_atomic, FI_CSWAP for fi_compare_atomic, one
 *    element), and calling an unsupported combination (or count 2) fails
 *    with a negative code and completes nothing;
 *  - FI_UINT64 fi_fetch_atomic FI_SUM wraps around 2^64; FI_INT64 with
 *    negative operands: fi_atomic, fi_fetch_atomic FI_ATOMIC_READ,
 *    fi_inject_atomic, fi_compare_atomic FI_CSWAP hit and miss; the target
 *    checks its memory, the initiator the fetched values;
 *  - atomicity: the client (64 pipelined fi_fetch_atomic +1) and the server
 *    (64 on its own memory through its own fi_addr) hit one counter at the
 *    same time: the 128 fetched values are exactly start..start+127, the
 *    final value start+128;
 *  - the server's atomics on the client's memory, checked by the client.
 */
#include "rdm_common.h"

#include <rdma/fi_atomic.h>

static struct rctx r;
static uint64_t *mem;      /* exposed: [0] uint, [1] int, [2] shared counter, [3] client counter */
static uint64_t *res;      /* local results / operands */
static struct fid_mr *mmr, *rmr;
static void *rdesc;
static bool rsverbs;

static bool readme_supported(int fam, int dt, int op)
{
	if (dt != FI_INT64 && dt != FI_UINT64)
		return false;
	switch (fam) {
	case 0:
		return op == FI_SUM;
	case 1:
		return op == FI_SUM || op == FI_ATOMIC_READ;
	default:
		return op == FI_CSWAP;
	}
}

static void matrix(void)
{
	static const char *fams[] = { "fi_atomicvalid", "fi_fetch_atomicvalid", "fi_compare_atomicvalid" };
	static const uint64_t qflags[] = { 0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC };
	int nsup = 0;
	for (int fam = 0; fam < 3; fam++) {
		for (int dt = 0; dt < FI_DATATYPE_LAST; dt++) {
			for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
				size_t cnt = 12345;
				int ret = fam == 0 ? fi_atomicvalid(r.ep, dt, op, &cnt)
					  : fam == 1 ? fi_fetch_atomicvalid(r.ep, dt, op, &cnt)
						     : fi_compare_atomicvalid(r.ep, dt, op, &cnt);
				EXPECT(ret == 0 || ret == -FI_EOPNOTSUPP, "%s(dt %d, op %d) = %d", fams[fam], dt, op, ret);
				if (ret == 0) {
					EXPECT(cnt >= 1 && cnt != 12345, "%s(dt %d, op %d): count %zu", fams[fam], dt, op, cnt);
					nsup++;
				}
				struct fi_atomic_attr aa = { .count = 777, .size = 777 };
				int q = fi_query_atomic(r.domain, dt, op, &aa, qflags[fam]);
				EXPECT(q == ret, "fi_query_atomic(dt %d, op %d, flags %#llx) = %d but %s = %d", dt, op,
				       (unsigned long long)qflags[fam], q, fams[fam], ret);
				if (q == 0) {
					EXPECT(aa.count == cnt, "fi_query_atomic(dt %d, op %d): count %zu, %s: %zu", dt, op,
					       aa.count, fams[fam], cnt);
					if (dt == FI_INT64 || dt == FI_UINT64)
						EXPECT(aa.size == 8, "fi_query_atomic: size %zu for a 64-bit type", aa.size);
				}
				if (rsverbs) {
					bool want = readme_supported(fam, dt, op);
					EXPECT((ret == 0) == want, "README: %s(dt %d, op %d) should be %s, got %d", fams[fam], dt,
					       op, want ? "supported" : "-FI_EOPNOTSUPP", ret);
					if (want)
						EXPECT(cnt == 1, "README: one element, %s says %zu", fams[fam], cnt);
				}
			}
		}
	}
	logmsg("matrix: %d supported combinations", nsup);
}

/* Completion of one atomic on the tx CQ. */
static void done(void *ctx, uint64_t flags, const char *what)
{
	rdm_expect(r.txcq, ctx, FI_ATOMIC | flags, NULL, what);
}

static void fetch(fi_addr_t to, uint64_t addr, uint64_t key, int dt, int op, uint64_t operand, uint64_t *out,
		  void *ctx, const char *what)
{
	res[16] = operand;
	res[24] = 0x5a5a5a5a5a5a5a5aULL; /* the result lands in registered memory */
	RETRY(&r, fi_fetch_atomic(r.ep, op == FI_ATOMIC_READ ? NULL : &res[16], 1, rdesc, &res[24], rdesc, to, addr, key,
				  dt, op, ctx));
	done(ctx, FI_READ, what);
	*out = res[24];
}

static void cswap(fi_addr_t to, uint64_t addr, uint64_t key, uint64_t compare, uint64_t swap, uint64_t *out,
		  void *ctx, const char *what)
{
	res[17] = swap;
	res[18] = compare;
	res[25] = 0x5a5a5a5a5a5a5a5aULL;
	RETRY(&r, fi_compare_atomic(r.ep, &res[17], 1, rdesc, &res[18], rdesc, &res[25], rdesc, to, addr, key, FI_INT64,
				    FI_CSWAP, ctx));
	done(ctx, FI_READ, what);
	*out = res[25];
}

/* rsverbs: what it does not support fails at the call, with nothing completing. */
static void unsupported(fi_addr_t to, uint64_t addr, uint64_t key)
{
	if (!rsverbs)
		return;
	uint32_t v32 = 1;
	int ret = (int)fi_atomic(r.ep, &v32, 1, rdesc, to, addr, key, FI_UINT32, FI_SUM, (void *)0x90);
	EXPECT(ret == -FI_EOPNOTSUPP, "fi_atomic FI_UINT32 FI_SUM returned %d", ret);
	res[20] = 1;
	ret = (int)fi_atomic(r.ep, &res[20], 1, rdesc, to, addr, key, FI_UINT64, FI_MIN, (void *)0x91);
	EXPECT(ret == -FI_EOPNOTSUPP, "fi_atomic FI_UINT64 FI_MIN returned %d", ret);
	ret = (int)fi_atomic(r.ep, &res[20], 2, rdesc, to, addr, key, FI_UINT64, FI_SUM, (void *)0x92);
	EXPECT(ret == -FI_EOPNOTSUPP || ret == -FI_EINVAL, "fi_atomic with count 2 returned %d", ret);
	ret = (int)fi_fetch_atomic(r.ep, &res[20], 1, rdesc, &res[21], rdesc, to, addr, key, FI_UINT64, FI_BOR,
				   (void *)0x93);
	EXPECT(ret == -FI_EOPNOTSUPP, "fi_fetch_atomic FI_BOR returned %d", ret);
	ret = (int)fi_compare_atomic(r.ep, &res[20], 1, rdesc, &res[21], rdesc, &res[22], rdesc, to, addr, key,
				     FI_UINT64, FI_CSWAP_NE, (void *)0x94);
	EXPECT(ret == -FI_EOPNOTSUPP, "fi_compare_atomic FI_CSWAP_NE returned %d", ret);
	ret = (int)fi_inject_atomic(r.ep, &res[20], 1, to, addr, key, FI_DOUBLE, FI_SUM);
	EXPECT(ret == -FI_EOPNOTSUPP, "fi_inject_atomic FI_DOUBLE returned %d", ret);
	cq_expect_empty(r.txcq, 200, "refused atomics complete nothing");
	logmsg("unsupported combinations refused at the call");
}

#define NCONC 64
#define START 1000000

int main(void)
{
	bool srv = test_start("rdm_atomic");
	rdm_open(&r, FI_MSG | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	rsverbs = !strcmp(r.info->fabric_attr->prov_name, "verbs") &&
		  FI_MAJOR(r.info->fabric_attr->prov_version) >= 1000;
	rdm_exchange(&r, true);
	mem = alloc_buf(4096);
	res = alloc_buf(4096);
	memset(mem, 0, 4096);
	mmr = rdm_mr_reg(&r, mem, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
	rmr = rdm_mr_reg(&r, res, 4096, FI_READ | FI_WRITE);
	rdesc = fi_mr_desc(rmr);
	struct rma_info me = { (uint64_t)(uintptr_t)mem, fi_mr_key(mmr), 4096 }, peer;
	mem[0] = 0xfffffffffffffff0ULL;
	mem[1] = (uint64_t)(int64_t)-5;
	mem[2] = START;
	mem[3] = 7;
	if (srv) {
		oob_send(&me, sizeof(me));
		oob_recv(&peer, sizeof(peer));
	} else {
		oob_recv(&peer, sizeof(peer));
		oob_send(&me, sizeof(me));
	}
	uint64_t a0 = peer.addr, a1 = peer.addr + 8, a2 = peer.addr + 16, a3 = peer.addr + 24;

	if (srv) {
		matrix();
		fi_addr_t self = FI_ADDR_NOTAVAIL;
		EXPECT(fi_av_insert(r.av, r.name, 1, &self, 0, NULL) == 1, "insert own address");
		rdm_progress_start(&r);
		oob_signal(1);
		oob_wait(2); /* the client's 64-bit checks are done */
		rdm_progress_stop();
		EXPECT(mem[0] == 0x10, "FI_UINT64 wrap-around: memory %#llx, want 0x10", (unsigned long long)mem[0]);
		EXPECT((int64_t)mem[1] == -1, "FI_INT64 after sum/inject/cswap: %lld, want -1", (long long)(int64_t)mem[1]);
		logmsg("target memory after the client's atomics ok");

		/* atomicity: both hit mem[2] at once */
		oob_signal(3);
		uint64_t *mine = res + 64;
		for (int i = 0; i < NCONC; i++) {
			res[16 + 0] = 1;
			RETRY(&r, fi_fetch_atomic(r.ep, &res[16], 1, rdesc, &mine[i], rdesc, self, me.addr + 16, me.key,
						  FI_UINT64, FI_SUM, (void *)(0x300L + i)));
		}
		for (int i = 0; i < NCONC; i++) {
			struct fi_cq_tagged_entry e;
			rdm_next(r.txcq, &e, "own fetch-add");
		}
		uint64_t theirs[NCONC];
		rdm_progress_start(&r);
		oob_recv(theirs, sizeof(theirs));
		rdm_progress_stop();
		static bool got[2 * NCONC];
		for (int i = 0; i < 2 * NCONC; i++) {
			uint64_t v = i < NCONC ? mine[i] : theirs[i - NCONC];
			EXPECT(v >= START && v < START + 2 * NCONC && !got[v - START],
			       "fetched %llu twice or out of range (an add was not atomic)", (unsigned long long)v);
			got[v - START] = true;
		}
		EXPECT(mem[2] == START + 2 * NCONC, "counter %llu, want %u", (unsigned long long)mem[2], START + 2 * NCONC);
		logmsg("atomicity: 128 fetch-adds from two initiators, all distinct");

		/* the server's atomics on the client's memory */
		uint64_t out;
		fetch(r.peer, a3, peer.key, FI_UINT64, FI_SUM, 3, &out, (void *)0x400, "server fetch-add on the client");
		EXPECT(out == 7, "server fetched %llu from the client, want 7", (unsigned long long)out);
		unsupported(r.peer, a3, peer.key);
		oob_signal(4);
		rdm_progress_start(&r);
		oob_wait(5);
		rdm_progress_stop();
	} else {
		uint64_t out;
		rdm_progress_start(&r);
		oob_wait(1);
		rdm_progress_stop();
		fetch(r.peer, a0, peer.key, FI_UINT64, FI_SUM, 0x20, &out, (void *)0x100, "fetch-add UINT64 (wraps)");
		EXPECT(out == 0xfffffffffffffff0ULL, "fetched %#llx", (unsigned long long)out);
		fetch(r.peer, a0, peer.key, FI_UINT64, FI_ATOMIC_READ, 0, &out, (void *)0x101, "read UINT64");
		EXPECT(out == 0x10, "after wrap-around: %#llx, want 0x10", (unsigned long long)out);
		res[19] = (uint64_t)(int64_t)-10;
		RETRY(&r, fi_atomic(r.ep, &res[19], 1, rdesc, r.peer, a1, peer.key, FI_INT64, FI_SUM, (void *)0x102));
		done((void *)0x102, FI_WRITE, "fi_atomic INT64 -10");
		fetch(r.peer, a1, peer.key, FI_INT64, FI_ATOMIC_READ, 0, &out, (void *)0x103, "read INT64");
		EXPECT((int64_t)out == -15, "INT64 -5 + -10 = %lld", (long long)(int64_t)out);
		int64_t hundred = 100;
		RETRY(&r, fi_inject_atomic(r.ep, &hundred, 1, r.peer, a1, peer.key, FI_INT64, FI_SUM));
		hundred = 0; /* the buffer is free again at once */
		fetch(r.peer, a1, peer.key, FI_INT64, FI_SUM, (uint64_t)(int64_t)-85, &out, (void *)0x104,
		      "fetch-add INT64 -85 after the inject");
		EXPECT((int64_t)out == 85, "after inject +100: %lld, want 85", (long long)(int64_t)out);
		cswap(r.peer, a1, peer.key, 0, (uint64_t)(int64_t)-1, &out, (void *)0x105, "cswap hit (0 -> -1)");
		EXPECT(out == 0, "cswap hit fetched %lld, want 0", (long long)(int64_t)out);
		cswap(r.peer, a1, peer.key, 5, 77, &out, (void *)0x106, "cswap miss");
		EXPECT((int64_t)out == -1, "cswap miss fetched %lld, want -1", (long long)(int64_t)out);
		cq_expect_empty(r.txcq, 100, "no completion for fi_inject_atomic");
		oob_signal(2);

		oob_wait(3);
		uint64_t *mine = res + 64;
		for (int i = 0; i < NCONC; i++) {
			res[16] = 1;
			RETRY(&r, fi_fetch_atomic(r.ep, &res[16], 1, rdesc, &mine[i], rdesc, r.peer, a2, peer.key, FI_UINT64,
						  FI_SUM, (void *)(0x200L + i)));
		}
		for (int i = 0; i < NCONC; i++) {
			struct fi_cq_tagged_entry e;
			rdm_next(r.txcq, &e, "fetch-add");
		}
		oob_send(mine, NCONC * sizeof(uint64_t));
		rdm_progress_start(&r);
		oob_wait(4);
		rdm_progress_stop();
		EXPECT(mem[3] == 10, "the server's fetch-add +3 left %llu, want 10", (unsigned long long)mem[3]);
		oob_signal(5);
	}
	mr_close(mmr);
	mr_close(rmr);
	rdm_close(&r);
	free(mem);
	free(res);
	if (srv)
		test_finish();
	child_done();
}
