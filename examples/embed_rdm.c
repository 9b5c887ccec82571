/*
 * rsverbs embedded: a program that uses libfabric's API (<rdma/fabric.h>)
 * and rsverbs' own header, linked against rsverbs alone (no -lfabric):
 *
 *   cc -std=c99 embed_rdm.c $(PKG_CONFIG_PATH=target/pkgconfig pkg-config --cflags --libs rsverbs)
 *
 * One process, two FI_EP_RDM endpoints in one domain: endpoint A sends a
 * message to B (send/recv), then writes into B's registered buffer (RMA
 * write with remote CQ data); every byte is checked. Progress is manual, so
 * the wait loop polls both endpoints' CQs. Ends with "PASS embed_rdm" or
 * "FAIL embed_rdm: why" (exit status 0 / 1).
 *
 *   embed_rdm [SIZE...]   message sizes (default: 1 4096 65536 1048576)
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <rsverbs.h>

static void fail(const char *fmt, ...)
{
	va_list ap;
	printf("FAIL embed_rdm: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

#define CHK(call)                                                              \
	do {                                                                   \
		ssize_t rc_ = (call);                                          \
		if (rc_ < 0)                                                   \
			fail("%s: %s (%zd)", #call, fi_strerror((int) -rc_), rc_); \
	} while (0)

static void watchdog(int sig)
{
	(void) sig;
	printf("FAIL embed_rdm: watchdog expired\n");
	fflush(stdout);
	_exit(1);
}

struct side {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
	char name[64];
	size_t namelen;
	fi_addr_t addr; /* in the shared AV */
};

static struct side a, b;
/* FI_CONTEXT mode: every operation gets a context the provider may use. */
static struct fi_context ctx[4];

/* Completions read while waiting for another CQ, per CQ (in order). */
#define STASH 8
static struct fi_cq_data_entry stash[4][STASH];
static int stashed[4];

/* Polls every CQ (manual progress: each endpoint progresses inside its CQ
 * reads) until `cq` yields a completion; others are kept for later. */
static void wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *out)
{
	struct fid_cq *all[4] = { a.txcq, a.rxcq, b.txcq, b.rxcq };
	struct fi_cq_err_entry err;
	int i, want = -1;

	for (i = 0; i < 4; i++)
		if (all[i] == cq)
			want = i;
	if (want < 0)
		fail("wait_cq: unknown CQ");
	for (;;) {
		if (stashed[want]) {
			*out = stash[want][0];
			memmove(&stash[want][0], &stash[want][1], (size_t) (--stashed[want]) * sizeof(stash[0][0]));
			return;
		}
		for (i = 0; i < 4; i++) {
			struct fi_cq_data_entry e;
			ssize_t n = fi_cq_read(all[i], &e, 1);
			if (n == -FI_EAVAIL) {
				memset(&err, 0, sizeof(err));
				fi_cq_readerr(all[i], &err, 0);
				fail("completion error %d (%s), prov_errno %d", err.err, fi_strerror(err.err), err.prov_errno);
			}
			if (n < 0 && n != -FI_EAGAIN)
				fail("fi_cq_read: %s", fi_strerror((int) -n));
			if (n == 1) {
				if (stashed[i] == STASH)
					fail("too many unexpected completions (flags %#llx)", (unsigned long long) e.flags);
				stash[i][stashed[i]++] = e;
			}
		}
	}
}

int main(int argc, char **argv)
{
	static const size_t default_sizes[] = { 1, 4096, 65536, 1048576 };
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_mr *mr_a, *mr_b;
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	struct fi_cq_data_entry e;
	struct rsverbs_stats st;
	size_t sizes[16], nsizes = 0, max = 0, i, k;
	char *abuf, *bbuf;

	signal(SIGALRM, watchdog);
	alarm(120);
	for (i = 1; i < (size_t) argc && nsizes < 16; i++)
		sizes[nsizes++] = (size_t) strtoul(argv[i], NULL, 0);
	if (!nsizes)
		for (i = 0; i < sizeof(default_sizes) / sizeof(default_sizes[0]); i++)
			sizes[nsizes++] = default_sizes[i];
	for (i = 0; i < nsizes; i++)
		if (sizes[i] > max)
			max = sizes[i];

	printf("rsverbs %s, provider '%s' %u.%u, libfabric API %u.%u (fi_version %u.%u)\n", rsverbs_version(),
	       rsverbs_prov_name(), FI_MAJOR(rsverbs_prov_version()), FI_MINOR(rsverbs_prov_version()),
	       FI_MAJOR(rsverbs_api_version()), FI_MINOR(rsverbs_api_version()), FI_MAJOR(fi_version()),
	       FI_MINOR(fi_version()));
	if (fi_version() != rsverbs_api_version())
		fail("fi_version() is not rsverbs' (another libfabric bound?)");

	hints = fi_allocinfo();
	if (!hints)
		fail("fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("verbs;ofi_rxm"); /* Mercury's name for it */
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->av_type = FI_AV_TABLE;
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	printf("%s", fi_tostr(info, FI_TYPE_INFO));
	if (info->ep_attr->protocol != FI_PROTO_RXM)
		fail("protocol %s, expected FI_PROTO_RXM", fi_tostr(&info->ep_attr->protocol, FI_TYPE_PROTOCOL));
	if (strcmp(info->fabric_attr->prov_name, "verbs;ofi_rxm"))
		fail("prov_name '%s'", info->fabric_attr->prov_name);

	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_TABLE;
	CHK(fi_av_open(domain, &av_attr, &av, NULL));
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.size = 256;
	cq_attr.format = FI_CQ_FORMAT_DATA;
	for (k = 0; k < 2; k++) {
		struct side *s = k ? &b : &a;
		CHK(fi_endpoint(domain, info, &s->ep, NULL));
		CHK(fi_cq_open(domain, &cq_attr, &s->txcq, NULL));
		CHK(fi_cq_open(domain, &cq_attr, &s->rxcq, NULL));
		CHK(fi_ep_bind(s->ep, &av->fid, 0));
		CHK(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT));
		CHK(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV));
		CHK(fi_enable(s->ep));
		s->namelen = sizeof(s->name);
		CHK(fi_getname(&s->ep->fid, s->name, &s->namelen));
	}
	if (fi_av_insert(av, a.name, 1, &a.addr, 0, NULL) != 1 || fi_av_insert(av, b.name, 1, &b.addr, 0, NULL) != 1)
		fail("fi_av_insert");

	abuf = malloc(max);
	bbuf = malloc(max);
	if (!abuf || !bbuf)
		fail("malloc");
	CHK(fi_mr_reg(domain, abuf, max, FI_SEND | FI_WRITE, 0, 0, 0, &mr_a, NULL));
	CHK(fi_mr_reg(domain, bbuf, max, FI_RECV | FI_REMOTE_WRITE, 0, 0, 0, &mr_b, NULL));

	for (i = 0; i < nsizes; i++) {
		size_t n = sizes[i], j;
		uint64_t key = fi_mr_key(mr_b);
		uint64_t raddr = (uint64_t) (uintptr_t) bbuf; /* FI_MR_VIRT_ADDR */

		/* send/recv: A -> B */
		for (j = 0; j < n; j++)
			abuf[j] = (char) (j * 7 + i + 1);
		memset(bbuf, 0, n);
		CHK(fi_recv(b.ep, bbuf, n, fi_mr_desc(mr_b), a.addr, &ctx[0]));
		CHK(fi_send(a.ep, abuf, n, fi_mr_desc(mr_a), b.addr, &ctx[1]));
		wait_cq(b.rxcq, &e);
		if (e.len != n || !(e.flags & FI_RECV))
			fail("recv completion: len %zu flags %#llx, expected %zu", e.len, (unsigned long long) e.flags, n);
		wait_cq(a.txcq, &e);
		if (memcmp(abuf, bbuf, n))
			fail("received data differ (size %zu)", n);

		/* RMA write with remote CQ data: A -> B's buffer */
		for (j = 0; j < n; j++)
			abuf[j] = (char) (j * 13 + i + 3);
		memset(bbuf, 0, n);
		CHK(fi_writedata(a.ep, abuf, n, fi_mr_desc(mr_a), 0x5eed0000u + (uint32_t) i, b.addr, raddr, key, &ctx[2]));
		wait_cq(a.txcq, &e);
		wait_cq(b.rxcq, &e);
		if (!(e.flags & FI_REMOTE_CQ_DATA) || e.data != 0x5eed0000u + (uint32_t) i)
			fail("write completion at the target: flags %#llx data %#llx", (unsigned long long) e.flags,
			     (unsigned long long) e.data);
		if (memcmp(abuf, bbuf, n))
			fail("written data differ (size %zu)", n);
		for (j = 0; j < 4; j++)
			if (stashed[j])
				fail("%d extra completion(s) on CQ %zu (flags %#llx)", stashed[j], j,
				     (unsigned long long) stash[j][0].flags);
		printf("size %zu: send/recv and RMA write checked\n", n);
	}

	CHK(fi_close(&mr_a->fid));
	CHK(fi_close(&mr_b->fid));
	for (k = 0; k < 2; k++) {
		struct side *s = k ? &b : &a;
		CHK(fi_close(&s->ep->fid));
		CHK(fi_close(&s->txcq->fid));
		CHK(fi_close(&s->rxcq->fid));
	}
	CHK(fi_close(&av->fid));
	CHK(fi_close(&domain->fid));
	CHK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(abuf);
	free(bbuf);

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	CHK(rsverbs_stats(&st));
	printf("rsverbs_stats: mode %d, fi_prov_ini %llu, fi_getinfo %llu, fi_fabric %llu, infos %llu allocated / %llu freed\n",
	       rsverbs_mode(), (unsigned long long) st.prov_ini_calls, (unsigned long long) st.getinfo_calls,
	       (unsigned long long) st.fabric_calls, (unsigned long long) st.infos_allocated,
	       (unsigned long long) st.infos_freed);
	if (rsverbs_mode() != RSVERBS_MODE_DIRECT || st.prov_ini_calls != 0)
		fail("rsverbs was not used directly (mode %d)", rsverbs_mode());
	if (st.infos_allocated != st.infos_freed)
		fail("fi_info leak: %llu allocated, %llu freed", (unsigned long long) st.infos_allocated,
		     (unsigned long long) st.infos_freed);
	printf("PASS embed_rdm\n");
	return 0;
}
