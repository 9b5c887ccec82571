/*
 * msg_mrcache: fi_mr_reg on an MSG domain goes through rsverbs' registration
 * cache (as libfabric's verbs provider caches fi_mr_reg), and the cache stays
 * correct when the application unmaps the memory and maps new memory at the
 * same address.
 *
 * The server maps a 64 KiB anonymous buffer B and, three times, registers it
 * with FI_REMOTE_WRITE, hands {addr, key} to the client out of band, lets the
 * client fi_write a pattern into it and checks the bytes:
 *   1. the first registration (a miss);
 *   2. after fi_close, the same buffer again: with the cache (the counters of
 *      fi_control(RSVERBS_MR_CACHE_STATS), rsverbs-specific) one hit more and
 *      the same key;
 *   3. after munmap(B) and a new anonymous mapping at the same address (new
 *      physical pages): one invalidation more, one miss more, and the
 *      client's write must land in the new pages. A stale registration would
 *      put it into the old pages and the check of step 3 would fail.
 * With FI_MR_CACHE_MAX_COUNT=0 (test msg_mrcache_nocache) every region is
 * registered on its own: the counters stay 0 apart from "uncached" (no
 * entry is kept), and steps 1-3 move the same data.
 */
#include "common.h"

#include <rdma/fi_rma.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BLEN (64 * 1024)
#define RSVERBS_MR_CACHE_STATS 0x72736d63

struct cstats {
	uint64_t hits, misses, evictions, invalidations, uncached, entries, bytes;
};

struct target {
	uint64_t addr, key;
	uint32_t seed;
};

static bool nocache;
static struct fi_context sctx[4];

static struct cstats stats(struct tctx *t, const char *when)
{
	struct cstats s;
	memset(&s, 0, sizeof(s));
	CHK(fi_control(&t->domain->fid, RSVERBS_MR_CACHE_STATS, &s));
	logmsg("server: mr cache %s: hits %llu misses %llu evictions %llu invalidations %llu uncached %llu entries %llu",
	       when, (unsigned long long)s.hits, (unsigned long long)s.misses,
	       (unsigned long long)s.evictions, (unsigned long long)s.invalidations,
	       (unsigned long long)s.uncached, (unsigned long long)s.entries);
	return s;
}

static char *map_at(void *want)
{
	int fl = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_FIXED_NOREPLACE
	if (want)
		fl |= MAP_FIXED_NOREPLACE;
#endif
	void *p = mmap(want, BLEN, PROT_READ | PROT_WRITE, fl, -1, 0);
	if (p == MAP_FAILED && want) {
		logmsg("mmap at %p failed (%s): mapping elsewhere", want, strerror(errno));
		p = mmap(NULL, BLEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	return p;
}

/* Registers b, lets the client write pattern `seed` into it, checks it; returns the key. */
static uint64_t round_trip(struct tctx *t, char *b, uint32_t seed, struct fid_mr **out)
{
	memset(b, 0, BLEN);
	struct fid_mr *mr = mr_reg(t, b, BLEN, FI_REMOTE_WRITE);
	struct target tg = {
		.addr = (t->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)b : 0,
		.key = fi_mr_key(mr),
		.seed = seed,
	};
	EXPECT(tg.key != FI_KEY_NOTAVAIL, "fi_mr_key returned FI_KEY_NOTAVAIL");
	oob_send(&tg, sizeof(tg));
	oob_wait((uint8_t)seed);
	char what[64];
	snprintf(what, sizeof(what), "write %u at the target", seed);
	expect_pattern(b, BLEN, seed, what);
	*out = mr;
	return tg.key;
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	server_listen(&t);
	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	EXPECT(FI_MAJOR(t.info->fabric_attr->prov_version) >= 1000, "provider %s %u.%u answered, not rsverbs",
	       t.info->fabric_attr->prov_name, FI_MAJOR(t.info->fabric_attr->prov_version),
	       FI_MINOR(t.info->fabric_attr->prov_version));
	server_accept(&t, NULL, 0);

	char *b = map_at(NULL);
	struct fid_mr *mr;
	struct cstats s0 = stats(&t, "before");
	uint64_t k1 = round_trip(&t, b, 11, &mr);
	struct cstats s1 = stats(&t, "after the first registration");
	mr_close(mr);
	bool cached = s1.entries > 0;
	if (nocache) {
		EXPECT(!cached && s1.hits == 0, "FI_MR_CACHE_MAX_COUNT=0: %llu entries, %llu hits",
		       (unsigned long long)s1.entries, (unsigned long long)s1.hits);
	} else {
		EXPECT(cached, "the registration was not cached (%llu uncached): is userfaultfd unavailable?",
		       (unsigned long long)s1.uncached);
		EXPECT(s1.misses == s0.misses + 1, "first registration: misses %llu -> %llu",
		       (unsigned long long)s0.misses, (unsigned long long)s1.misses);
	}

	uint64_t k2 = round_trip(&t, b, 12, &mr);
	struct cstats s2 = stats(&t, "after registering the same buffer again");
	mr_close(mr);
	if (!nocache) {
		EXPECT(s2.hits == s1.hits + 1, "same buffer again: hits %llu -> %llu",
		       (unsigned long long)s1.hits, (unsigned long long)s2.hits);
		EXPECT(k2 == k1, "same buffer again: key %#llx, first %#llx", (unsigned long long)k2,
		       (unsigned long long)k1);
	} else {
		EXPECT(s2.hits == 0 && s2.entries == 0, "no cache: hits %llu entries %llu",
		       (unsigned long long)s2.hits, (unsigned long long)s2.entries);
	}

	/* New pages at the same address. */
	CHK(munmap(b, BLEN));
	char *b2 = map_at(b);
	logmsg("remapped: %p -> %p", (void *)b, (void *)b2);
	struct cstats s3 = stats(&t, "after munmap + mmap");
	if (!nocache)
		EXPECT(s3.invalidations == s2.invalidations + 1, "munmap: invalidations %llu -> %llu",
		       (unsigned long long)s2.invalidations, (unsigned long long)s3.invalidations);
	(void)round_trip(&t, b2, 13, &mr);
	struct cstats s4 = stats(&t, "after registering the new mapping");
	mr_close(mr);
	if (!nocache)
		EXPECT(s4.misses == s3.misses + 1 && s4.hits == s3.hits,
		       "new mapping: misses %llu -> %llu, hits %llu -> %llu (a stale hit?)",
		       (unsigned long long)s3.misses, (unsigned long long)s4.misses,
		       (unsigned long long)s3.hits, (unsigned long long)s4.hits);
	CHK(munmap(b2, BLEN));

	oob_signal(100);
	oob_wait(101);
	tctx_close(&t);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, FI_CONTEXT | FI_RX_CQ_DATA);
	client_setup(&t);
	client_connect(&t, NULL, 0, NULL, NULL, NULL);

	char *l = alloc_buf(BLEN);
	struct fid_mr *lmr = mr_reg(&t, l, BLEN, FI_WRITE);
	for (int i = 0; i < 3; i++) {
		struct target tg;
		oob_recv(&tg, sizeof(tg));
		fill_pattern(l, BLEN, tg.seed);
		CHK(fi_write(t.ep, l, BLEN, fi_mr_desc(lmr), 0, tg.addr, tg.key, &sctx[i]));
		struct fi_cq_entry c;
		char what[64];
		snprintf(what, sizeof(what), "fi_write %u", tg.seed);
		cq_read_one(t.txcq, &c, WAIT_MS, what);
		EXPECT(c.op_context == &sctx[i], "%s: op_context %p", what, c.op_context);
		oob_signal((uint8_t)tg.seed);
	}
	oob_wait(100);
	oob_signal(101);
	mr_close(lmr);
	tctx_close(&t);
	free(l);
	child_done();
}

int main(void)
{
	const char *n = getenv("FI_MR_CACHE_MAX_COUNT");
	nocache = n && !strcmp(n, "0");
	if (test_start(nocache ? "msg_mrcache_nocache" : "msg_mrcache"))
		server();
	else
		client();
	return 0;
}
