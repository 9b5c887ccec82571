/*
 * Helpers for the FI_EP_RDM tests (rdm_*.c), on top of common.h.
 *
 * Both processes open an RDM endpoint of their own (fi_getinfo without a
 * node: the provider picks an address on the RDMA interface), exchange
 * their fi_getname addresses over the out-of-band channel and insert the
 * peer's into their address vector.  Everything is static inline so every
 * test includes only what it uses.
 */
#ifndef RSVERBS_CTEST_RDM_COMMON_H
#define RSVERBS_CTEST_RDM_COMMON_H

#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <rdma/fi_tagged.h>

/* The provider answering is rsverbs (provider version 1000.x), not libfabric's
 * verbs;ofi_rxm (set by rdm_open; only rsverbs' prov_errno convention is checked). */
static bool rdm_rsverbs;

struct rctx {
	struct fi_info *hints;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *txcq;
	struct fid_cq *rxcq;
	char name[64];
	size_t namelen;
	char peer_name[64];
	size_t peer_namelen;
	fi_addr_t peer; /* the peer's fi_addr (FI_ADDR_NOTAVAIL until inserted) */
	enum fi_wait_obj wait_obj; /* of both CQs (FI_WAIT_NONE unless set before opening) */
};

static inline struct fi_info *rdm_hints(uint64_t caps)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		fail("fi_allocinfo returned NULL");
	const char *prov = getenv("TEST_PROVIDER");
	h->fabric_attr->prov_name = strdup(prov && *prov ? prov : "verbs");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = caps;
	h->addr_format = FI_SOCKADDR_IN;
	h->domain_attr->mr_mode = MR_MODE_117;
	h->domain_attr->av_type = FI_AV_TABLE;
	return h;
}

/* getinfo -> fabric -> domain -> av -> cqs (FORMAT_TAGGED) -> ep -> bind -> enable. */
static inline void rdm_open_ep(struct rctx *r)
{
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	char abuf[128];

	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.size = 1024;
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj = r->wait_obj;
	CHK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	CHK(fi_cq_open(r->domain, &cq_attr, &r->txcq, NULL));
	CHK(fi_cq_open(r->domain, &cq_attr, &r->rxcq, NULL));
	if (!r->av) {
		memset(&av_attr, 0, sizeof(av_attr));
		av_attr.type = FI_AV_TABLE;
		CHK(fi_av_open(r->domain, &av_attr, &r->av, NULL));
	}
	CHK(fi_ep_bind(r->ep, &r->av->fid, 0));
	CHK(fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV));
	CHK(fi_enable(r->ep));
	r->namelen = sizeof(r->name);
	CHK(fi_getname(&r->ep->fid, r->name, &r->namelen));
	EXPECT(r->namelen == sizeof(struct sockaddr_in), "fi_getname addrlen %zu", r->namelen);
	const struct sockaddr_in *sin = (const void *)r->name;
	EXPECT(sin->sin_family == AF_INET && sin->sin_port != 0 && sin->sin_addr.s_addr != htonl(INADDR_ANY),
	       "fi_getname gave %s, not a concrete address", addr_str(r->name, r->namelen, abuf, sizeof(abuf)));
	logmsg("RDM endpoint at %s", addr_str(r->name, r->namelen, abuf, sizeof(abuf)));
	r->peer = FI_ADDR_NOTAVAIL;
}

static inline void rdm_open(struct rctx *r, uint64_t caps)
{
	memset(r, 0, sizeof(*r));
	r->hints = rdm_hints(caps);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r->hints, &r->info));
	rdm_rsverbs = FI_MAJOR(r->info->fabric_attr->prov_version) >= 1000;
	EXPECT(r->info->ep_attr->type == FI_EP_RDM, "ep type %d", r->info->ep_attr->type);
	EXPECT((r->info->caps & caps) == caps, "caps %#llx lack %#llx", (unsigned long long)r->info->caps,
	       (unsigned long long)(caps & ~r->info->caps));
	CHK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	rdm_open_ep(r);
}

/* Exchange names (the server sends first); insert the peer unless !insert. */
static inline void rdm_exchange(struct rctx *r, bool insert)
{
	uint32_t l32 = (uint32_t)r->namelen;
	if (!is_child) {
		oob_send(&l32, sizeof(l32));
		oob_send(r->name, r->namelen);
	}
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= sizeof(r->peer_name), "peer name length %u", l32);
	oob_recv(r->peer_name, l32);
	r->peer_namelen = l32;
	if (is_child) {
		l32 = (uint32_t)r->namelen;
		oob_send(&l32, sizeof(l32));
		oob_send(r->name, r->namelen);
	}
	if (insert) {
		int n = (int)CHK(fi_av_insert(r->av, r->peer_name, 1, &r->peer, 0, NULL));
		EXPECT(n == 1, "fi_av_insert inserted %d of 1", n);
		EXPECT(r->peer != FI_ADDR_NOTAVAIL, "fi_av_insert gave FI_ADDR_NOTAVAIL");
	}
}

#define RCLOSE(p)                                                              \
	do {                                                                   \
		if (p) {                                                       \
			CHK(fi_close(&(p)->fid));                              \
			(p) = NULL;                                            \
		}                                                              \
	} while (0)

static inline void rdm_close_ep(struct rctx *r)
{
	RCLOSE(r->ep);
	RCLOSE(r->txcq);
	RCLOSE(r->rxcq);
}

static inline void rdm_close(struct rctx *r)
{
	rdm_close_ep(r);
	RCLOSE(r->av);
	RCLOSE(r->domain);
	RCLOSE(r->fabric);
	if (r->info)
		fi_freeinfo(r->info);
	if (r->hints)
		fi_freeinfo(r->hints);
	r->info = r->hints = NULL;
}

static inline struct fid_mr *rdm_mr_reg(struct rctx *r, void *b, size_t len, uint64_t access)
{
	static uint64_t next_key = 100;
	struct fid_mr *m = NULL;
	CHK(fi_mr_reg(r->domain, b, len, access, 0, next_key++, 0, &m, NULL));
	EXPECT(m != NULL, "fi_mr_reg returned no mr");
	return m;
}

/* The end of a two-process RDM test's main(): close and free what it set up,
 * then the server's final line (test_finish) or the child's exit (child_done). */
static inline __attribute__((noreturn)) void rdm_test_end(bool srv, struct rctx *r, struct fid_mr *mr, void *buf)
{
	mr_close(mr);
	rdm_close(r);
	free(buf);
	if (srv)
		test_finish();
	child_done();
}

/* Poll a CQ with fi_cq_readfrom: 1 = success (entry, *src), 0 = error entry (err). */
static inline int rdm_read_from(struct fid_cq *cq, struct fi_cq_tagged_entry *entry, fi_addr_t *src,
				struct fi_cq_err_entry *err, int timeout_ms, const char *what)
{
	uint64_t start = now_ms();
	unsigned spins = 0;
	for (;;) {
		ssize_t ret = fi_cq_readfrom(cq, entry, 1, src);
		if (ret == 1)
			return 1;
		if (ret == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			ssize_t e = fi_cq_readerr(cq, err, 0);
			if (e != 1)
				fail("%s: fi_cq_readerr returned %zd", what, e);
			return 0;
		}
		if (ret != -FI_EAGAIN)
			fail("%s: fi_cq_readfrom returned %zd (%s)", what, ret, fi_strerror((int)-ret));
		if (++spins % 64 == 0) {
			if (now_ms() - start > (uint64_t)timeout_ms)
				fail("%s: timed out after %d ms waiting for a completion", what, timeout_ms);
			check_child();
		}
	}
}

/* The next completion within WAIT_MS, which must be a success (of any
 * context: the caller checks it); returns its src (readfrom; 0xdeadbeef if
 * the provider left it). what (printf format) names it in the failures. */
static inline fi_addr_t rdm_next(struct fid_cq *cq, struct fi_cq_tagged_entry *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline fi_addr_t rdm_next(struct fid_cq *cq, struct fi_cq_tagged_entry *e, const char *fmt, ...)
{
	struct fi_cq_err_entry err;
	fi_addr_t src = 0xdeadbeef;
	char what[256], b[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!rdm_read_from(cq, e, &src, &err, WAIT_MS, what))
		fail("%s: error completion: %s", what, cq_err_str(cq, &err, b, sizeof(b)));
	return src;
}

/* One successful completion, fields checked; returns its src (readfrom). */
static inline fi_addr_t rdm_expect(struct fid_cq *cq, void *ctx, uint64_t flags, struct fi_cq_tagged_entry *out,
				   const char *what)
{
	struct fi_cq_tagged_entry e;
	char fb[256];
	fi_addr_t src = rdm_next(cq, &e, "%s", what);
	EXPECT(e.op_context == ctx, "%s: op_context %p, want %p", what, e.op_context, ctx);
	EXPECT((e.flags & flags) == flags, "%s: flags %s lack %#llx", what, flags_str(e.flags, fb, sizeof(fb)),
	       (unsigned long long)(flags & ~e.flags));
	if (out)
		*out = e;
	return src;
}

/* One successful completion through fi_cq_sread (blocking; CQ with a wait object). */
static inline void rdm_sread_expect(struct fid_cq *cq, void *ctx, uint64_t flags, struct fi_cq_tagged_entry *out,
				    const char *what)
{
	struct fi_cq_tagged_entry e;
	uint64_t start = now_ms();
	for (;;) {
		if (cq_one_or_again(cq, fi_cq_sread(cq, &e, 1, NULL, 1000), "fi_cq_sread", what))
			break;
		if (now_ms() - start > WAIT_MS)
			fail("%s: fi_cq_sread: nothing after %d ms", what, WAIT_MS);
		check_child();
	}
	EXPECT(e.op_context == ctx, "%s: op_context %p, want %p", what, e.op_context, ctx);
	EXPECT((e.flags & flags) == flags, "%s: flags %#llx lack %#llx", what, (unsigned long long)e.flags,
	       (unsigned long long)(flags & ~e.flags));
	if (out)
		*out = e;
}

/* An error entry's prov_errno is something fi_cq_strerror can tell (never
 * "unknown"): a verbs status, or on rsverbs, where every RDM error entry is
 * rsverbs' own, -err, printed as "rsverbs: " and fi_strerror's text. */
static inline void rdm_check_prov_errno(struct fid_cq *cq, const struct fi_cq_err_entry *err, const char *what)
{
	char sb[160], want[160];
	const char *ps = fi_cq_strerror(cq, err->prov_errno, err->err_data, sb, sizeof(sb));
	EXPECT(ps && strcmp(ps, "unknown") != 0, "%s: fi_cq_strerror(prov_errno %d) = \"%s\"", what, err->prov_errno,
	       ps ? ps : "(null)");
	if (rdm_rsverbs) {
		EXPECT(err->prov_errno == -err->err, "%s: prov_errno %d for err %d", what, err->prov_errno, err->err);
		snprintf(want, sizeof(want), "rsverbs: %s", fi_strerror(err->err));
		EXPECT(strcmp(ps, want) == 0, "%s: fi_cq_strerror(prov_errno %d) = \"%s\", not \"%s\"", what,
		       err->prov_errno, ps, want);
	}
}

/* One error completion; returns it. */
static inline struct fi_cq_err_entry rdm_expect_err(struct fid_cq *cq, int err_code, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t src;
	char b[512];
	if (rdm_read_from(cq, &e, &src, &err, WAIT_MS, what))
		fail("%s: expected an error completion (%s), got a success (op_context %p, len %zu)", what,
		     fi_strerror(err_code), e.op_context, e.len);
	EXPECT(err.err == err_code, "%s: error %s", what, cq_err_str(cq, &err, b, sizeof(b)));
	rdm_check_prov_errno(cq, &err, what);
	return err;
}

/* Retry an operation that may return -FI_EAGAIN, progressing the CQs meanwhile. */
#define RETRY(r, expr)                                                         \
	({                                                                     \
		ssize_t retry_ret__;                                           \
		uint64_t retry_start__ = now_ms();                             \
		while ((retry_ret__ = (expr)) == -FI_EAGAIN) {                  \
			struct fi_cq_tagged_entry retry_e__;                    \
			(void)fi_cq_read((r)->txcq, &retry_e__, 0);             \
			(void)fi_cq_read((r)->rxcq, &retry_e__, 0);             \
			if (now_ms() - retry_start__ > WAIT_MS)                 \
				fail("%s: -FI_EAGAIN for %d ms", #expr, WAIT_MS); \
		}                                                              \
		CHK(retry_ret__);                                              \
	})

/* fi_trecvmsg of one buffer (none if b is NULL) from any source, -FI_EAGAIN
 * retried. */
static inline void rdm_trecvmsg(struct rctx *r, void *b, size_t len, void *desc, uint64_t tag, uint64_t ignore,
				void *ctx, uint64_t flags)
{
	struct iovec iov = { b, len };
	struct fi_msg_tagged m = {
		.msg_iov = b ? &iov : NULL, .desc = b ? &desc : NULL, .iov_count = b ? 1 : 0,
		.addr = FI_ADDR_UNSPEC, .tag = tag, .ignore = ignore, .context = ctx,
	};
	RETRY(r, fi_trecvmsg(r->ep, &m, flags));
}

/*
 * Background progress: RDM endpoints progress (accept connections, answer
 * rendezvous, complete RMA at the target) only inside calls into the
 * provider (FI_PROGRESS_MANUAL). A process that waits on the out-of-band
 * channel while its peer works on it runs this thread meanwhile: it reads the
 * CQs with count 0, which progresses without consuming completions.
 */
static volatile int rdm_prog_on;
static pthread_t rdm_prog_thread;

static inline void *rdm_prog_fn(void *arg)
{
	struct rctx *r = arg;
	while (rdm_prog_on) {
		(void)fi_cq_read(r->txcq, NULL, 0);
		(void)fi_cq_read(r->rxcq, NULL, 0);
		usleep(200);
	}
	return NULL;
}

static inline void rdm_progress_start(struct rctx *r)
{
	rdm_prog_on = 1;
	if (pthread_create(&rdm_prog_thread, NULL, rdm_prog_fn, r))
		fail("pthread_create failed");
}

static inline void rdm_progress_stop(void)
{
	rdm_prog_on = 0;
	pthread_join(rdm_prog_thread, NULL);
}

#endif
