/*
 * rdm_nomrlocal: native RDM endpoints for applications without FI_MR_LOCAL.
 *
 * Hints with mr_mode FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY (no
 * FI_MR_LOCAL): the answer must be rsverbs' own RDM (no ofi_rxm) without
 * FI_MR_LOCAL. Local buffers are never registered by the test (desc NULL);
 * only the RMA target is (fi_mr_reg for its key, as RMA requires).
 *  - eager (64 B) and rendezvous (1 MiB) messages, untagged and tagged, both
 *    ways; the 1 MiB ones three times from and into the same buffers: the
 *    provider's registration cache must hit (fi_control
 *    RSVERBS_MR_CACHE_STATS, rsverbs-specific);
 *  - fi_write / fi_read of 1 MiB and a fetching atomic from/into buffers
 *    without descriptors;
 *  - a 1 MiB mmap'd send buffer (client) and receive buffer (server) are
 *    unmapped and mapped again at the same address with a new pattern: the
 *    receiver must see the new pattern (a stale registration would move the
 *    old pages), and both caches must count an invalidation.
 * With FI_MR_CACHE_MONITOR=disabled (test rdm_nomrlocal_nocache) nothing is
 * cached: the same transfers must work with registrations per operation
 * (no hits, every registration counted "uncached").
 */
#include "rdm_common.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <sys/mman.h>

#define BIG (1u << 20)
#define SMALL 64
#define NOLOCAL (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)
#define RSVERBS_MR_CACHE_STATS 0x72736d63

static struct rctx r;
static bool nocache;

struct cstats {
	uint64_t hits, misses, evictions, invalidations, uncached, entries, bytes;
};

static struct cstats stats(const char *when)
{
	struct cstats s;
	memset(&s, 0, sizeof(s));
	CHK(fi_control(&r.domain->fid, RSVERBS_MR_CACHE_STATS, &s));
	logmsg("%s: mr cache %s: hits %llu misses %llu evictions %llu invalidations %llu uncached %llu entries %llu",
	       is_child ? "client" : "server", when, (unsigned long long)s.hits, (unsigned long long)s.misses,
	       (unsigned long long)s.evictions, (unsigned long long)s.invalidations, (unsigned long long)s.uncached,
	       (unsigned long long)s.entries);
	return s;
}

static void open_nolocal(uint64_t caps)
{
	memset(&r, 0, sizeof(r));
	r.hints = rdm_hints(caps);
	r.hints->domain_attr->mr_mode = NOLOCAL;
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r.hints, &r.info));
	EXPECT(r.info->ep_attr->type == FI_EP_RDM, "ep type %d", r.info->ep_attr->type);
	EXPECT(FI_MAJOR(r.info->fabric_attr->prov_version) >= 1000, "provider %s %u.%u answered, not rsverbs",
	       r.info->fabric_attr->prov_name, FI_MAJOR(r.info->fabric_attr->prov_version),
	       FI_MINOR(r.info->fabric_attr->prov_version));
	EXPECT(strstr(r.info->fabric_attr->prov_name, "rxm") == NULL, "prov_name %s", r.info->fabric_attr->prov_name);
	EXPECT(!(r.info->domain_attr->mr_mode & FI_MR_LOCAL), "mr_mode %#x has FI_MR_LOCAL",
	       r.info->domain_attr->mr_mode);
	EXPECT((r.info->domain_attr->mr_mode & ~NOLOCAL) == 0, "mr_mode %#x has bits the hints lack",
	       r.info->domain_attr->mr_mode);
	CHK(fi_fabric(r.info->fabric_attr, &r.fabric, NULL));
	CHK(fi_domain(r.fabric, r.info, &r.domain, NULL));
	rdm_open_ep(&r);
}

static void recv_one(void *b, size_t len, bool tagged, uint64_t tag, uint32_t seed, const char *what)
{
	struct fi_cq_tagged_entry e;
	memset(b, 0, len);
	if (tagged)
		RETRY(&r, fi_trecv(r.ep, b, len, NULL, FI_ADDR_UNSPEC, tag, 0, (void *)0x77));
	else
		RETRY(&r, fi_recv(r.ep, b, len, NULL, FI_ADDR_UNSPEC, (void *)0x77));
	oob_signal(40);
	rdm_expect(r.rxcq, (void *)0x77, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), &e, what);
	EXPECT(e.len == len, "%s: len %zu, want %zu", what, e.len, len);
	if (tagged)
		EXPECT(e.tag == tag, "%s: tag %#llx", what, (unsigned long long)e.tag);
	expect_pattern(b, len, seed, what);
}

static void send_one(void *b, size_t len, bool tagged, uint64_t tag, uint32_t seed, const char *what)
{
	struct fi_cq_tagged_entry e;
	fill_pattern(b, len, seed);
	oob_wait(40); /* the receive is posted */
	if (tagged)
		RETRY(&r, fi_tsend(r.ep, b, len, NULL, r.peer, tag, (void *)0x66));
	else
		RETRY(&r, fi_send(r.ep, b, len, NULL, r.peer, (void *)0x66));
	rdm_expect(r.txcq, (void *)0x66, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), &e, what);
}

/* One message from `from_srv`'s side to the other. */
static void xfer(bool srv, bool from_srv, void *b, size_t len, bool tagged, uint32_t seed, const char *what)
{
	if (srv == from_srv)
		send_one(b, len, tagged, 0x1000 + seed, seed, what);
	else
		recv_one(b, len, tagged, 0x1000 + seed, seed, what);
}

static void *map_at(void *hint, size_t len)
{
	int fl = MAP_PRIVATE | MAP_ANONYMOUS | (hint ? MAP_FIXED : 0);
	void *p = mmap(hint, len, PROT_READ | PROT_WRITE, fl, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap(%p, %zu) failed: %s", hint, len, strerror(errno));
	return p;
}

int main(void)
{
	struct fi_cq_tagged_entry e;
	struct rma_info ri;
	const char *mon = getenv("FI_MR_CACHE_MONITOR");
	nocache = mon && !strcmp(mon, "disabled");
	/* TEST_NAME: the suite's drop-in run */
	bool srv = test_start(test_name_env(nocache ? "rdm_nomrlocal_nocache" : "rdm_nomrlocal"));
	open_nolocal(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	rdm_exchange(&r, true);
	/* Plain malloc: the heap, as applications allocate. */
	uint8_t *small = malloc(SMALL);
	uint8_t *big = malloc(BIG);
	if (!small || !big)
		fail("malloc failed");

	/* 1. eager and rendezvous, untagged and tagged, both ways */
	for (int dir = 0; dir < 2; dir++) {
		bool from_srv = dir == 1;
		xfer(srv, from_srv, small, SMALL, false, 1 + dir * 10, "eager untagged");
		xfer(srv, from_srv, small, SMALL, true, 2 + dir * 10, "eager tagged");
		for (int i = 0; i < 3; i++) {
			xfer(srv, from_srv, big, BIG, false, 3 + i + dir * 10, "1 MiB untagged");
			xfer(srv, from_srv, big, BIG, true, 6 + i + dir * 10, "1 MiB tagged");
		}
	}
	struct cstats s1 = stats("after the messages");
	EXPECT(s1.misses > 0, "no registrations at all");
	if (nocache)
		EXPECT(s1.hits == 0 && s1.uncached == s1.misses && s1.entries == 0,
		       "caching disabled, yet %llu hits, %llu of %llu uncached, %llu entries", (unsigned long long)s1.hits,
		       (unsigned long long)s1.uncached, (unsigned long long)s1.misses, (unsigned long long)s1.entries);
	else
		EXPECT(s1.hits > 0, "no cache hits after 12 rendezvous transfers from and into the same buffer");
	logmsg("%s: messages both ways checked", srv ? "server" : "client");

	/* 2. RMA into/from buffers without descriptors; the target is registered */
	if (srv) {
		uint8_t *t = alloc_buf(BIG);
		struct fid_mr *mr = rdm_mr_reg(&r, t, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE);
		ri.addr = (uint64_t)(uintptr_t)t;
		ri.key = fi_mr_key(mr);
		ri.len = BIG;
		fill_pattern(t + BIG / 2, BIG / 2, 52);
		*(uint64_t *)t = 40; /* atomic counter */
		oob_send(&ri, sizeof(ri));
		rdm_progress_start(&r);
		oob_wait(50);
		expect_pattern(t + 8, BIG / 2 - 8, 51, "fi_write without a descriptor");
		EXPECT(*(uint64_t *)t == 42, "atomic counter %llu, want 42", (unsigned long long)*(uint64_t *)t);
		rdm_progress_stop();
		mr_close(mr);
		free(t);
		logmsg("server: RMA checked");
	} else {
		oob_recv(&ri, sizeof(ri));
		fill_pattern(big, BIG / 2 - 8, 51);
		RETRY(&r, fi_write(r.ep, big, BIG / 2 - 8, NULL, r.peer, ri.addr + 8, ri.key, (void *)0x51));
		rdm_expect(r.txcq, (void *)0x51, FI_RMA | FI_WRITE, &e, "fi_write without a descriptor");
		memset(big, 0, BIG);
		RETRY(&r, fi_read(r.ep, big, BIG / 2, NULL, r.peer, ri.addr + BIG / 2, ri.key, (void *)0x52));
		rdm_expect(r.txcq, (void *)0x52, FI_RMA | FI_READ, &e, "fi_read without a descriptor");
		expect_pattern(big, BIG / 2, 52, "fi_read without a descriptor");
		uint64_t add = 2, *res = malloc(sizeof(*res));
		if (!res)
			fail("malloc failed");
		*res = 0;
		RETRY(&r, fi_fetch_atomic(r.ep, &add, 1, NULL, res, NULL, r.peer, ri.addr, ri.key, FI_UINT64, FI_SUM,
					  (void *)0x53));
		rdm_expect(r.txcq, (void *)0x53, FI_ATOMIC | FI_READ, &e, "fi_fetch_atomic without a result descriptor");
		EXPECT(*res == 40, "fetch_atomic result %llu, want 40", (unsigned long long)*res);
		free(res);
		oob_signal(50);
		logmsg("client: RMA done");
	}

	/* 3. unmap and map again at the same address: the client sends from
	 * such a buffer, the server receives into one. */
	uint8_t *m = map_at(NULL, BIG);
	xfer(srv, false, m, BIG, false, 61, "1 MiB from/into a mapping");
	xfer(srv, false, m, BIG, false, 62, "1 MiB from/into a mapping, again");
	struct cstats s2 = stats("before the remap");
	CHK(munmap(m, BIG));
	uint8_t *m2 = map_at(m, BIG);
	EXPECT(m2 == m, "mapped at %p, not at %p again", (void *)m2, (void *)m);
	xfer(srv, false, m2, BIG, false, 63, "1 MiB from/into a new mapping at the same address");
	struct cstats s3 = stats("after the remap");
	if (!nocache)
		EXPECT(s3.invalidations > s2.invalidations, "munmap of a cached buffer invalidated nothing");
	logmsg("%s: new mapping at the same address carried the new pattern", srv ? "server" : "client");
	CHK(munmap(m2, BIG));
	oob_signal(70);
	oob_wait(70);

	rdm_close(&r);
	free(small);
	free(big);
	if (srv)
		test_finish();
	child_done();
}
