/* apiver: rsverbs under a libfabric core, asked for each API version given.
 *
 *   apiver VERSION...      (VERSION as MAJOR.MINOR, e.g. 1.4 1.17 1.20 2.1)
 *
 * Compiled against the headers of the core it runs on (ci/guest/cores.sh), so
 * its structs have that core's layout. For each version:
 *  - above the core's fi_version(): fi_getinfo must answer -FI_ENOSYS;
 *  - otherwise fi_getinfo(prov_name "verbs", FI_EP_RDM and FI_EP_MSG) must
 *    list rsverbs (prov_version 1000.x) with api_version = the one asked, and
 *    the RDM info must open a fabric, domain, AV, CQ and an enabled endpoint,
 *    whose name fi_getname gives; the MSG info a passive endpoint that
 *    listens. Pre-1.5 versions ask in the old style (FI_MR_BASIC + FI_LOCAL_MR);
 *  - API >= 2.0 on a 2.x core: FI_TAGGED_DIRECTED_RECV is granted on RDM,
 *    FI_EXACT_DIRECTED_RECV too (and refuses receives from FI_ADDR_UNSPEC),
 *    FI_TAGGED_MULTI_RECV is refused (-FI_ENODATA), and (2.5 headers) the
 *    counter limits come back as UINT64_MAX through the core's copies.
 * Prints "ok VERSION" or "FAIL VERSION: why" per version; exit 0 iff all ok.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define FAIL(...) do { printf("FAIL %u.%u: ", FI_MAJOR(v), FI_MINOR(v)); printf(__VA_ARGS__); printf("\n"); return 1; } while (0)
#define CHECK(call) do { int _r = (int)(call); if (_r) FAIL("%s = %d (%s)", #call, _r, fi_strerror(-_r)); } while (0)

static struct fi_info *hints_for(uint32_t v, enum fi_ep_type type, uint64_t caps)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = type;
	h->caps = caps;
	h->fabric_attr->prov_name = strdup("verbs");
	h->addr_format = FI_SOCKADDR_IN;
	if (FI_VERSION_LT(v, FI_VERSION(1, 5))) {
		h->domain_attr->mr_mode = 1 /* FI_MR_BASIC */;
		h->mode = (1ULL << 55) /* FI_LOCAL_MR */ | FI_CONTEXT;
	} else {
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		h->mode = FI_CONTEXT;
	}
	return h;
}

static int check_rsverbs(uint32_t v, struct fi_info *i)
{
	if (!i->fabric_attr || !i->fabric_attr->prov_name || strcmp(i->fabric_attr->prov_name, "verbs"))
		FAIL("first info is not from 'verbs' (%s)", i->fabric_attr ? i->fabric_attr->prov_name : "no fabric_attr");
	if (FI_MAJOR(i->fabric_attr->prov_version) < 1000)
		FAIL("provider version %u.%u is not rsverbs' (1000.x)", FI_MAJOR(i->fabric_attr->prov_version),
		     FI_MINOR(i->fabric_attr->prov_version));
	if (i->fabric_attr->api_version != v)
		FAIL("api_version %#x, asked %#x", i->fabric_attr->api_version, v);
	return 0;
}

/* Opens an RDM endpoint with caps FI_MSG | FI_TAGGED | FI_RMA | extra; with
 * FI_EXACT_DIRECTED_RECV in extra (2.x), a tagged receive from FI_ADDR_UNSPEC
 * must be refused with -FI_EINVAL. */
static int rdm(uint32_t v, uint64_t extra)
{
	struct fi_info *h = hints_for(v, FI_EP_RDM, FI_MSG | FI_TAGGED | FI_RMA | extra), *info = NULL;
	struct fid_fabric *fab; struct fid_domain *dom; struct fid_av *av; struct fid_cq *cq; struct fid_ep *ep;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 64 };
	char name[64]; size_t len = sizeof(name);
	struct fi_cq_err_entry err;

	if (!h)
		FAIL("fi_allocinfo");
	CHECK(fi_getinfo(v, NULL, NULL, 0, h, &info));
	if (check_rsverbs(v, info))
		return 1;
	CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK(fi_domain(fab, info, &dom, NULL));
	CHECK(fi_av_open(dom, &av_attr, &av, NULL));
	CHECK(fi_cq_open(dom, &cq_attr, &cq, NULL));
	CHECK(fi_endpoint(dom, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(ep));
	CHECK(fi_getname(&ep->fid, name, &len));
	if (extra) {
		static char buf[64];
		struct fid_mr *mr;
		ssize_t r;
		if ((info->caps & extra) != extra)
			FAIL("caps %#jx asked, not granted", (uintmax_t)extra);
		CHECK(fi_mr_reg(dom, buf, sizeof(buf), FI_RECV, 0, 0, 0, &mr, NULL));
		r = fi_trecv(ep, buf, sizeof(buf), fi_mr_desc(mr), FI_ADDR_UNSPEC, 1, 0, NULL);
		if (r != -FI_EINVAL)
			FAIL("FI_EXACT_DIRECTED_RECV: fi_trecv from FI_ADDR_UNSPEC = %zd, not -FI_EINVAL", r);
		CHECK(fi_close(&mr->fid));
	}
	memset(&err, 0xa5, sizeof(err));
	if (fi_cq_readerr(cq, &err, 0) != -FI_EAGAIN)
		FAIL("fi_cq_readerr on an empty CQ is not -FI_EAGAIN");
	CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&cq->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&dom->fid));
	CHECK(fi_close(&fab->fid));
	fi_freeinfo(info);
	fi_freeinfo(h);
	return 0;
}

static int msg(uint32_t v)
{
	struct fi_info *h = hints_for(v, FI_EP_MSG, FI_MSG | FI_RMA), *info = NULL;
	struct fid_fabric *fab; struct fid_eq *eq; struct fid_pep *pep;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };

	if (!h)
		FAIL("fi_allocinfo");
	const char *ip = getenv("LAB_IP") ? getenv("LAB_IP") : "10.99.0.1";
	CHECK(fi_getinfo(v, ip, "0", FI_SOURCE, h, &info));
	if (check_rsverbs(v, info))
		return 1;
	CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK(fi_eq_open(fab, &eq_attr, &eq, NULL));
	CHECK(fi_passive_ep(fab, info, &pep, NULL));
	CHECK(fi_pep_bind(pep, &eq->fid, 0));
	CHECK(fi_listen(pep));
	CHECK(fi_close(&pep->fid));
	CHECK(fi_close(&eq->fid));
	CHECK(fi_close(&fab->fid));
	fi_freeinfo(info);
	fi_freeinfo(h);
	return 0;
}

static int v2(uint32_t v)
{
#if FI_MAJOR_VERSION >= 2
	struct fi_info *h, *info = NULL;
	int r;

	h = hints_for(v, FI_EP_RDM, FI_TAGGED | FI_TAGGED_DIRECTED_RECV);
	CHECK(fi_getinfo(v, NULL, NULL, 0, h, &info));
	if (!(info->caps & FI_TAGGED_DIRECTED_RECV))
		FAIL("FI_TAGGED_DIRECTED_RECV asked, not granted");
#if FI_MINOR_VERSION >= 5
	if (info->domain_attr->max_cntr_value != UINT64_MAX || info->domain_attr->max_err_cntr_value != UINT64_MAX)
		FAIL("max_cntr_value %#jx / max_err_cntr_value %#jx, not UINT64_MAX",
		     (uintmax_t)info->domain_attr->max_cntr_value, (uintmax_t)info->domain_attr->max_err_cntr_value);
#endif
	fi_freeinfo(info);
	fi_freeinfo(h);
	info = NULL;
	if (rdm(v, FI_EXACT_DIRECTED_RECV))
		return 1;
	h = hints_for(v, FI_EP_RDM, FI_TAGGED | FI_TAGGED_MULTI_RECV);
	r = fi_getinfo(v, NULL, NULL, 0, h, &info);
	if (r != -FI_ENODATA)
		FAIL("FI_TAGGED_MULTI_RECV: fi_getinfo = %d, not -FI_ENODATA", r);
	fi_freeinfo(h);
#else
	(void)v;
#endif
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t core = fi_version();
	int bad = 0;

	printf("core %u.%u, headers %u.%u\n", FI_MAJOR(core), FI_MINOR(core), FI_MAJOR_VERSION, FI_MINOR_VERSION);
	for (int a = 1; a < argc; a++) {
		unsigned maj, min;
		if (sscanf(argv[a], "%u.%u", &maj, &min) != 2) {
			fprintf(stderr, "bad version %s\n", argv[a]);
			return 2;
		}
		uint32_t v = FI_VERSION(maj, min);
		if (FI_VERSION_LT(core, v)) {
			struct fi_info *info = NULL;
			int r = fi_getinfo(v, NULL, NULL, 0, NULL, &info);
			if (r != -FI_ENOSYS) {
				printf("FAIL %u.%u: above the core's version, fi_getinfo = %d\n", maj, min, r);
				bad++;
			} else {
				printf("ok %u.%u (above the core: -FI_ENOSYS)\n", maj, min);
			}
			continue;
		}
		if (rdm(v, 0) || msg(v) || (maj >= 2 && v2(v))) {
			bad++;
			continue;
		}
		printf("ok %u.%u\n", maj, min);
	}
	return bad ? 1 : 0;
}
