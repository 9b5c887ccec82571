/* Compares rsverbs' drop-in core API with the real libfabric, byte for byte:
 * fi_tostr / fi_tostr_r of a set of fi_infos, attributes and scalar values,
 * fi_strerror, fi_version, and fi_dupinfo (printed back through fi_tostr).
 *
 *   tostr_cmp REAL_LIBFABRIC_SO RSVERBS_SO
 *
 * Both libraries are dlopen'ed with RTLD_LOCAL | RTLD_DEEPBIND and their
 * functions looked up with the symbol versions programs bind to
 * (dlvsym), so this also checks rsverbs' symbol versions.
 * Last line: "N passed, N failed". Exit 0 only if nothing failed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

typedef char *(*tostr_fn)(const void *, enum fi_type);
typedef char *(*tostr_r_fn)(char *, size_t, const void *, enum fi_type);
typedef const char *(*strerror_fn)(int);
typedef uint32_t (*version_fn)(void);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *);
typedef void (*freeinfo_fn)(struct fi_info *);

struct lib {
	const char *path;
	tostr_fn tostr;
	tostr_r_fn tostr_r;
	strerror_fn strerror;
	version_fn version;
	dupinfo_fn dupinfo;
	freeinfo_fn freeinfo;
};

static int passed, failed;

static void *sym(void *h, const char *path, const char *name, const char *ver)
{
	void *p = dlvsym(h, name, ver);
	if (!p) {
		printf("FAIL %s: no %s@%s\n", path, name, ver);
		exit(1);
	}
	return p;
}

static void load(struct lib *l, const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	if (!h) {
		printf("FAIL dlopen %s: %s\n", path, dlerror());
		exit(1);
	}
	l->path = path;
	l->tostr = (tostr_fn) sym(h, path, "fi_tostr", "FABRIC_1.0");
	l->tostr_r = (tostr_r_fn) sym(h, path, "fi_tostr_r", "FABRIC_1.4");
	l->strerror = (strerror_fn) sym(h, path, "fi_strerror", "FABRIC_1.0");
	l->version = (version_fn) sym(h, path, "fi_version", "FABRIC_1.0");
	l->dupinfo = (dupinfo_fn) sym(h, path, "fi_dupinfo", "FABRIC_1.3");
	l->freeinfo = (freeinfo_fn) sym(h, path, "fi_freeinfo", "FABRIC_1.3");
}

static struct lib real, ours;

static void cmp_str(const char *what, const char *a, const char *b)
{
	if ((!a && !b) || (a && b && !strcmp(a, b))) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s\n--- libfabric:\n%s\n--- rsverbs:\n%s\n---\n", what, a ? a : "(NULL)", b ? b : "(NULL)");
	if (a && b) {
		size_t i = 0;
		while (a[i] && a[i] == b[i])
			i++;
		printf("first difference at byte %zu\n", i);
	}
}

/* fi_tostr, and fi_tostr_r with a few buffer sizes (truncation must match too). */
static void cmp(const char *what, const void *data, enum fi_type t)
{
	static const size_t lens[] = { 1, 2, 7, 40, 100, 333, 1000, 4096 };
	char name[256], a[4096], b[4096];
	size_t i;

	cmp_str(what, real.tostr(data, t), ours.tostr(data, t));
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		memset(a, 'x', sizeof(a));
		memset(b, 'x', sizeof(b));
		snprintf(name, sizeof(name), "%s (fi_tostr_r len %zu)", what, lens[i]);
		cmp_str(name, real.tostr_r(a, lens[i], data, t), ours.tostr_r(b, lens[i], data, t));
		/* nothing written past len */
		if (memcmp(a + lens[i], b + lens[i], sizeof(a) - lens[i])) {
			failed++;
			printf("FAIL %s: bytes past the buffer differ\n", name);
		}
	}
}

static struct sockaddr_in sin4;
static struct sockaddr_in6 sin6;

static struct fi_info *make_info(int variant)
{
	struct fi_info *i = real.dupinfo(NULL);

	switch (variant) {
	case 0: /* what rsverbs' MSG getinfo returns, roughly */
		i->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_RECV | FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM;
		i->mode = FI_CONTEXT | FI_RX_CQ_DATA;
		i->addr_format = FI_SOCKADDR_IN;
		i->src_addr = malloc(sizeof(sin4));
		memcpy(i->src_addr, &sin4, sizeof(sin4));
		i->src_addrlen = sizeof(sin4);
		i->tx_attr->caps = FI_MSG | FI_RMA | FI_SEND | FI_WRITE | FI_READ;
		i->tx_attr->op_flags = FI_COMPLETION | FI_TRANSMIT_COMPLETE;
		i->tx_attr->msg_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_SAS | FI_ORDER_RMA_WAW;
		i->tx_attr->comp_order = FI_ORDER_STRICT;
		i->tx_attr->inject_size = 512;
		i->tx_attr->size = 384;
		i->tx_attr->iov_limit = 4;
		i->tx_attr->rma_iov_limit = 4;
		i->rx_attr->caps = FI_MSG | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
		i->rx_attr->comp_order = FI_ORDER_STRICT | FI_ORDER_DATA;
		i->rx_attr->size = 384;
		i->rx_attr->iov_limit = 4;
		i->ep_attr->type = FI_EP_MSG;
		i->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC;
		i->ep_attr->protocol_version = 1;
		i->ep_attr->max_msg_size = 1 << 30;
		i->ep_attr->tx_ctx_cnt = 1;
		i->ep_attr->rx_ctx_cnt = 1;
		i->domain_attr->name = strdup("rxe0");
		i->domain_attr->threading = FI_THREAD_SAFE;
		i->domain_attr->control_progress = FI_PROGRESS_AUTO;
		i->domain_attr->data_progress = FI_PROGRESS_AUTO;
		i->domain_attr->resource_mgmt = FI_RM_ENABLED;
		i->domain_attr->av_type = FI_AV_UNSPEC;
		i->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		i->domain_attr->mr_key_size = 4;
		i->domain_attr->cq_data_size = 4;
		i->domain_attr->cq_cnt = 16384;
		i->domain_attr->ep_cnt = 16384;
		i->domain_attr->max_ep_tx_ctx = 1;
		i->domain_attr->mr_iov_limit = 1;
		i->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
		i->domain_attr->mr_cnt = 65536;
		i->fabric_attr->name = strdup("fe80::/64");
		i->fabric_attr->prov_name = strdup("verbs");
		i->fabric_attr->prov_version = FI_VERSION(1000, 1);
		i->fabric_attr->api_version = FI_VERSION(1, 17);
		break;
	case 1: /* RDM over IPv6, everything odd */
		i->caps = FI_MSG | FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV | FI_HMEM | FI_COLLECTIVE;
		i->mode = FI_CONTEXT2 | FI_MSG_PREFIX | FI_LOCAL_MR | FI_BUFFERED_RECV;
		i->addr_format = FI_SOCKADDR_IN6;
		i->dest_addr = malloc(sizeof(sin6));
		memcpy(i->dest_addr, &sin6, sizeof(sin6));
		i->dest_addrlen = sizeof(sin6);
		i->tx_attr->comp_order = FI_ORDER_DATA | FI_ORDER_RAR; /* neither NONE nor STRICT */
		i->tx_attr->tclass = FI_TC_LOW_LATENCY;
		i->ep_attr->type = FI_EP_RDM;
		i->ep_attr->protocol = FI_PROTO_RXM;
		i->ep_attr->protocol_version = (uint32_t) -1;
		i->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
		i->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
		i->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
		i->domain_attr->domain = (struct fid_domain *) (uintptr_t) 0x7f12345678abULL;
		i->domain_attr->threading = FI_THREAD_DOMAIN;
		i->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		i->domain_attr->av_type = FI_AV_TABLE;
		i->domain_attr->mr_mode = FI_MR_BASIC | FI_MR_SCALABLE | FI_MR_ENDPOINT | FI_MR_HMEM;
		i->domain_attr->tclass = 0x1ff;
		i->fabric_attr->prov_name = strdup("verbs;ofi_rxm");
		i->fabric_attr->prov_version = FI_VERSION(117, 0);
		i->fabric_attr->api_version = FI_VERSION(1, 9);
		break;
	case 2: /* missing attribute structs, unknown enum values */
		free(i->tx_attr);
		free(i->domain_attr);
		i->tx_attr = NULL;
		i->domain_attr = NULL;
		i->addr_format = FI_ADDR_STR;
		i->src_addr = strdup("fi_sockaddr_in://10.0.0.1:99");
		i->src_addrlen = strlen(i->src_addr) + 1;
		i->ep_attr->type = 77;
		i->ep_attr->protocol = FI_PROV_SPECIFIC | 5;
		i->caps = ~0ULL;
		i->mode = ~0ULL;
		break;
	case 3: /* an address format libfabric cannot print, a provider-specific one */
		i->addr_format = FI_PROV_SPECIFIC | 3;
		i->src_addr = malloc(sizeof(sin4));
		memcpy(i->src_addr, &sin4, sizeof(sin4));
		i->src_addrlen = sizeof(sin4);
		free(i->fabric_attr);
		i->fabric_attr = NULL;
		break;
	case 4: /* FI_SOCKADDR with an IPv6 address */
		i->addr_format = FI_SOCKADDR;
		i->src_addr = malloc(sizeof(sin6));
		memcpy(i->src_addr, &sin6, sizeof(sin6));
		i->src_addrlen = sizeof(sin6);
		break;
	}
	return i;
}

int main(int argc, char **argv)
{
	char name[128];
	int v, k;

	if (argc != 3) {
		fprintf(stderr, "usage: %s REAL_LIBFABRIC_SO RSVERBS_SO\n", argv[0]);
		return 2;
	}
	load(&real, argv[1]);
	load(&ours, argv[2]);

	sin4.sin_family = AF_INET;
	sin4.sin_port = htons(7471);
	inet_pton(AF_INET, "10.99.0.1", &sin4.sin_addr);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(65000);
	inet_pton(AF_INET6, "fe80::1:2ff:fe03:405", &sin6.sin6_addr);

	for (v = 0; v <= 4; v++) {
		struct fi_info *i = make_info(v), *d1, *d2;
		snprintf(name, sizeof(name), "FI_TYPE_INFO #%d", v);
		cmp(name, i, FI_TYPE_INFO);
		if (i->tx_attr) {
			snprintf(name, sizeof(name), "FI_TYPE_TX_ATTR #%d", v);
			cmp(name, i->tx_attr, FI_TYPE_TX_ATTR);
		}
		snprintf(name, sizeof(name), "FI_TYPE_RX_ATTR #%d", v);
		cmp(name, i->rx_attr, FI_TYPE_RX_ATTR);
		snprintf(name, sizeof(name), "FI_TYPE_EP_ATTR #%d", v);
		cmp(name, i->ep_attr, FI_TYPE_EP_ATTR);
		if (i->domain_attr) {
			snprintf(name, sizeof(name), "FI_TYPE_DOMAIN_ATTR #%d", v);
			cmp(name, i->domain_attr, FI_TYPE_DOMAIN_ATTR);
		}
		if (i->fabric_attr) {
			snprintf(name, sizeof(name), "FI_TYPE_FABRIC_ATTR #%d", v);
			cmp(name, i->fabric_attr, FI_TYPE_FABRIC_ATTR);
		}
		/* rsverbs' fi_dupinfo makes the same info as libfabric's. */
		d1 = real.dupinfo(i);
		d2 = ours.dupinfo(i);
		snprintf(name, sizeof(name), "fi_dupinfo #%d", v);
		{
			char *a = strdup(real.tostr(d1, FI_TYPE_INFO));
			cmp_str(name, a, real.tostr(d2, FI_TYPE_INFO));
			free(a);
		}
		real.freeinfo(d1);
		ours.freeinfo(d2);
		real.freeinfo(i);
	}

	/* An info from rsverbs' fi_allocinfo, freed by rsverbs. */
	{
		struct fi_info *a = real.dupinfo(NULL), *b = ours.dupinfo(NULL);
		char *x = strdup(real.tostr(a, FI_TYPE_INFO));
		cmp_str("fi_allocinfo", x, ours.tostr(b, FI_TYPE_INFO));
		free(x);
		b->fabric_attr->prov_name = strdup("verbs");
		b->domain_attr->name = strdup("rxe0");
		ours.freeinfo(b);
		real.freeinfo(a);
	}

	{
		static const enum fi_type flag_types[] = {
			FI_TYPE_CAPS, FI_TYPE_OP_FLAGS, FI_TYPE_MSG_ORDER, FI_TYPE_MODE, FI_TYPE_CQ_EVENT_FLAGS,
		};
		for (k = 0; k < (int) (sizeof(flag_types) / sizeof(flag_types[0])); k++) {
			uint64_t f;
			for (v = 0; v < 64; v++) {
				f = 1ULL << v;
				snprintf(name, sizeof(name), "flags type %d bit %d", flag_types[k], v);
				cmp(name, &f, flag_types[k]);
			}
			f = ~0ULL;
			snprintf(name, sizeof(name), "flags type %d all", flag_types[k]);
			cmp(name, &f, flag_types[k]);
			f = 0;
			snprintf(name, sizeof(name), "flags type %d none", flag_types[k]);
			cmp(name, &f, flag_types[k]);
		}
	}
	for (v = -1; v < 32; v++) {
		int m = v < 0 ? -1 : 1 << v;
		snprintf(name, sizeof(name), "FI_TYPE_MR_MODE %#x", m);
		cmp(name, &m, FI_TYPE_MR_MODE);
	}
	{
		static const enum fi_type enum_types[] = {
			FI_TYPE_EP_TYPE, FI_TYPE_ADDR_FORMAT, FI_TYPE_THREADING, FI_TYPE_PROGRESS,
			FI_TYPE_PROTOCOL, FI_TYPE_AV_TYPE, FI_TYPE_ATOMIC_TYPE, FI_TYPE_ATOMIC_OP,
			FI_TYPE_EQ_EVENT, FI_TYPE_OP_TYPE, FI_TYPE_COLLECTIVE_OP, FI_TYPE_HMEM_IFACE,
			FI_TYPE_CQ_FORMAT, FI_TYPE_LOG_LEVEL, FI_TYPE_LOG_SUBSYS,
		};
		for (k = 0; k < (int) (sizeof(enum_types) / sizeof(enum_types[0])); k++) {
			for (v = -2; v < 40; v++) {
				/* 64 bits: libfabric reads FI_TYPE_PROTOCOL as uint32 but the word is 64-bit here */
				uint64_t e = (uint32_t) v;
				snprintf(name, sizeof(name), "enum type %d value %d", enum_types[k], v);
				cmp(name, &e, enum_types[k]);
			}
			{
				uint64_t e = FI_PROV_SPECIFIC | 9;
				snprintf(name, sizeof(name), "enum type %d prov-specific", enum_types[k]);
				cmp(name, &e, enum_types[k]);
			}
		}
	}
	/* Types this libfabric does not know. */
	for (v = FI_TYPE_LOG_SUBSYS + 1; v < FI_TYPE_LOG_SUBSYS + 8; v++) {
		uint64_t x = 0;
		snprintf(name, sizeof(name), "unknown type %d", v);
		cmp(name, &x, (enum fi_type) v);
	}
	/* A fid without a tostr op prints its address. */
	{
		struct fid f;
		memset(&f, 0, sizeof(f));
		cmp("FI_TYPE_FID", &f, FI_TYPE_FID);
	}
	/* NULL data gives NULL. */
	cmp_str("fi_tostr(NULL)", real.tostr(NULL, FI_TYPE_CAPS), ours.tostr(NULL, FI_TYPE_CAPS));

	for (v = -300; v < 300; v++) {
		snprintf(name, sizeof(name), "fi_strerror(%d)", v);
		cmp_str(name, real.strerror(v), ours.strerror(v));
	}
	cmp_str("fi_strerror(INT_MIN+1)", real.strerror(-2147483647), ours.strerror(-2147483647));
	/* rsverbs speaks API 1.0 to 2.6: its fi_version() is 2.6, at least the real one's. */
	if (ours.version() == FI_VERSION(2, 6) && ours.version() >= real.version()) {
		passed++;
	} else {
		failed++;
		printf("FAIL fi_version: %#x (real %#x), expected 2.6\n", ours.version(), real.version());
	}
	/* FI_TYPE_VERSION names rsverbs: it must start with that API version. */
	{
		uint64_t x = 0;
		const char *r = ours.tostr(&x, FI_TYPE_VERSION);
		if (r && !strncmp(r, "2.6.0-rsverbs-", strlen("2.6.0-rsverbs-"))) {
			passed++;
		} else {
			failed++;
			printf("FAIL FI_TYPE_VERSION: '%s'\n", r ? r : "(NULL)");
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
