/*
 * rdm_idle_peers: peers that hold an endpoint's receive pool and are never
 * progressed again must not stop it from opening new connections.
 *
 * One process (no fork): a measured endpoint M and N = 24 more endpoints,
 * each of which connects to M by sending it one message; M takes them all.
 * Then the 24 are never progressed again (their CQ is not read): M's credit
 * bank has handed its pool out to them, and the recalls that would free
 * buffers are never answered. Then:
 *   1. M sends 20 messages to itself (a new connection, which must first find
 *      a floor of free receive buffers to grant);
 *   2. a fresh endpoint F connects to M and they exchange a message each way.
 * Every message must arrive (tag, payload) within WAIT_MS; a provider that
 * waits for the idle peers forever fails here (rsverbs before the fix: the
 * connection to itself stayed in "waits for free receive buffers").
 *
 * Output contract as the other tests: one line PASS/FAIL on stdout.
 */
#include "common.h"

#include <stdlib.h>
#include <time.h>

#include <rdma/fi_tagged.h>

#define NIDLE 24

static const char *name = "rdm_idle_peers";

static struct fid_domain *dom;
static struct fi_info *info;
static struct fi_cq_attr ca = { .size = 1024, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq; /* tx and rx */
	struct fid_av *av;
	char name[64];
	size_t nl;
};

static void node_open(struct node *n, struct fid_cq *shared, struct fid_av *av)
{
	n->cq = shared;
	n->av = av;
	if (!n->cq)
		CHK(fi_cq_open(dom, &ca, &n->cq, NULL));
	if (!n->av) {
		struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 8 };
		CHK(fi_av_open(dom, &aa, &n->av, NULL));
	}
	CHK(fi_endpoint(dom, info, &n->ep, NULL));
	CHK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_ep_bind(n->ep, &n->av->fid, 0));
	CHK(fi_enable(n->ep));
	n->nl = sizeof(n->name);
	CHK(fi_getname(&n->ep->fid, n->name, &n->nl));
}

static fi_addr_t insert(struct fid_av *av, const char *addr)
{
	fi_addr_t a;
	if (fi_av_insert(av, addr, 1, &a, 0, NULL) != 1)
		fail("fi_av_insert of one address failed");
	return a;
}

/* Polls the CQs in `cqs` until `want` receive completions with `tag`
 * arrived on `rx`; fails after WAIT_MS. */
static void wait_recvs(struct fid_cq *rx, struct fid_cq **cqs, int ncq, int want, uint64_t tag, const char *what)
{
	uint64_t t0 = now_ms();
	int got = 0;
	while (got < want) {
		for (int i = 0; i < ncq; i++) {
			struct fi_cq_tagged_entry e[8];
			ssize_t n = fi_cq_read(cqs[i], e, 8);
			if (n == -FI_EAGAIN)
				continue;
			if (n < 0) {
				struct fi_cq_err_entry err = { 0 };
				fi_cq_readerr(cqs[i], &err, 0);
				fail("%s: error completion %d (%s)", what, err.err, fi_strerror(err.err));
			}
			for (ssize_t k = 0; k < n; k++) {
				if (cqs[i] != rx || !(e[k].flags & FI_RECV))
					continue;
				if (e[k].tag != tag || e[k].len != 8)
					fail("%s: a receive with tag %#llx, len %zu", what, (unsigned long long)e[k].tag, e[k].len);
				got++;
			}
		}
		if (now_ms() - t0 > WAIT_MS)
			fail("%s: only %d of %d receives in %d ms", what, got, want, WAIT_MS);
	}
}

int main(void)
{
	test_name = name;
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->domain_attr->mr_mode = MR_MODE_117;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(getenv("TEST_PROV") ? getenv("TEST_PROV") : "verbs");
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab;
	CHK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHK(fi_domain(fab, info, &dom, NULL));

	static char rbuf[4096], sbuf[8] = "idle-pr";
	struct node m, f, idle[NIDLE];
	node_open(&m, NULL, NULL);
	struct fid_cq *icq;
	struct fid_av *iav;
	CHK(fi_cq_open(dom, &ca, &icq, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 8 };
	CHK(fi_av_open(dom, &aa, &iav, NULL));
	fi_addr_t m_from_idle = insert(iav, m.name);
	static struct fi_context ctx[NIDLE + 64];
	for (int k = 0; k < NIDLE; k++)
		CHK(fi_trecv(m.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 1, 0, &ctx[k]));
	for (int k = 0; k < NIDLE; k++) {
		node_open(&idle[k], icq, iav);
		ssize_t r;
		while ((r = fi_tinject(idle[k].ep, sbuf, 8, m_from_idle, 1)) == -FI_EAGAIN) {
			struct fi_cq_tagged_entry e[8];
			(void)fi_cq_read(icq, e, 8);
		}
		CHK(r);
	}
	struct fid_cq *both[] = { m.cq, icq };
	wait_recvs(m.cq, both, 2, NIDLE, 1, "the idle peers' first messages");
	fprintf(stderr, "[%s] %d peers connected; they are not progressed from here on\n", name, NIDLE);

	/* 1. to itself: a new connection from M */
	fi_addr_t self = insert(m.av, m.name);
	struct fid_cq *monly[] = { m.cq };
	for (int i = 0; i < 20; i++) {
		CHK(fi_trecv(m.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 2, 0, &ctx[NIDLE]));
		ssize_t r;
		uint64_t t0 = now_ms();
		while ((r = fi_tinject(m.ep, sbuf, 8, self, 2)) == -FI_EAGAIN) {
			struct fi_cq_tagged_entry e[8];
			(void)fi_cq_read(m.cq, e, 8);
			if (now_ms() - t0 > WAIT_MS)
				fail("message %d to itself: fi_tinject kept returning -FI_EAGAIN", i);
		}
		CHK(r);
		wait_recvs(m.cq, monly, 1, 1, 2, "a message to itself");
	}
	fprintf(stderr, "[%s] 20 messages to itself arrived\n", name);

	/* 2. a fresh endpoint connects to M; one message each way */
	node_open(&f, NULL, NULL);
	fi_addr_t m_from_f = insert(f.av, m.name);
	fi_addr_t f_from_m = insert(m.av, f.name);
	CHK(fi_trecv(m.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 3, 0, &ctx[NIDLE + 1]));
	CHK(fi_trecv(f.ep, rbuf + 64, 64, NULL, FI_ADDR_UNSPEC, 4, 0, &ctx[NIDLE + 2]));
	ssize_t r;
	while ((r = fi_tinject(f.ep, sbuf, 8, m_from_f, 3)) == -FI_EAGAIN) {
		struct fi_cq_tagged_entry e[8];
		(void)fi_cq_read(f.cq, e, 8);
	}
	CHK(r);
	struct fid_cq *mf[] = { m.cq, f.cq };
	wait_recvs(m.cq, mf, 2, 1, 3, "the new peer's message");
	while ((r = fi_tinject(m.ep, sbuf, 8, f_from_m, 4)) == -FI_EAGAIN) {
		struct fi_cq_tagged_entry e[8];
		(void)fi_cq_read(m.cq, e, 8);
	}
	CHK(r);
	struct fid_cq *fm[] = { f.cq, m.cq };
	wait_recvs(f.cq, fm, 2, 1, 4, "the answer to the new peer");

	CHK(fi_close(&f.ep->fid));
	CHK(fi_close(&f.cq->fid));
	CHK(fi_close(&f.av->fid));
	for (int k = 0; k < NIDLE; k++)
		CHK(fi_close(&idle[k].ep->fid));
	CHK(fi_close(&icq->fid));
	CHK(fi_close(&iav->fid));
	CHK(fi_close(&m.ep->fid));
	CHK(fi_close(&m.cq->fid));
	CHK(fi_close(&m.av->fid));
	CHK(fi_close(&dom->fid));
	CHK(fi_close(&fab->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS %s\n", name);
	return 0;
}
