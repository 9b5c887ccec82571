/*
 * dgram_sendrecv: FI_EP_DGRAM endpoints (UD QPs), one process, two
 * endpoints A and B on one domain and one FI_AV_TABLE address vector,
 * run twice: with FI_MSG_PREFIX in the hints (40-byte prefix on receive
 * buffers, as libfabric's verbs) and without (no prefix).
 *
 *  - fi_getinfo: FI_EP_DGRAM, FI_ADDR_IB_UD, protocol FI_PROTO_IB_UD,
 *    msg_prefix_size 40 (prefix run) or 0, FI_MSG_PREFIX in mode,
 *    tx_attr->mode and rx_attr->mode only in the prefix run (send buffers
 *    start with the prefix too, which is not sent), no FI_LOCAL_COMM/FI_REMOTE_COMM in
 *    rx_attr->caps, max_msg_size > 0 (the port MTU);
 *  - fi_getname gives 32 bytes that go straight into fi_av_insert;
 *    fi_av_lookup gives them back; fi_av_straddr says fi_addr_ib_ud://;
 *  - both ways (A->B, B->A): fi_send (a full max_msg_size message), fi_senddata
 *    (FI_REMOTE_CQ_DATA and its data at the receiver), fi_inject and
 *    fi_injectdata (no transmit completion), and fi_sendmsg with
 *    FI_DELIVERY_COMPLETE (accepted as libfabric's verbs DGRAM does, with a
 *    transmit completion: fabtests 1.22's in-band sync sends so on DGRAM
 *    endpoints); each receive checks its bytes
 *    (after the prefix), its len (payload + prefix, as libfabric's verbs
 *    counts the GRH), FI_RECV|FI_MSG, its buf, and FI_SOURCE: fi_cq_readfrom
 *    names the sender's fi_addr;
 *  - counters bound with FI_SEND (A) and FI_RECV (B) count A's 7 sends
 *    (injects included) and B's 7 receives of the first direction;
 *  - a send one byte over max_msg_size and an inject over inject_size fail
 *    with -FI_EMSGSIZE; a send to an fi_addr not in the AV fails;
 *    fi_sendmsg with FI_COMMIT_COMPLETE (persistent memory, reliable
 *    endpoints only) fails with -FI_EBADFLAGS.
 *
 * Output: PASS dgram_sendrecv / FAIL dgram_sendrecv: <first failure>.
 */
#include "common.h"

#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

static const char *name = "dgram_sendrecv";

static const char *asked_prov(void)
{
	const char *prov = getenv("TEST_PROVIDER");
	return prov && *prov ? prov : "verbs";
}

struct side {
	const char *tag;
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr; /* its own fi_addr in the AV */
	char *tx, *rx;
};

static struct fid_mr *mr;
static void *desc;
static size_t prefix, max_msg, inject_size;

static void wait_comp(struct side *s, struct fi_cq_data_entry *e, fi_addr_t *src, const char *what)
{
	uint64_t t0 = now_ms();
	for (;;) {
		ssize_t r = src ? fi_cq_readfrom(s->cq, e, 1, src) : fi_cq_read(s->cq, e, 1);
		if (r == 1)
			return;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(s->cq, &err, 0);
			fail("%s on %s: error completion %d (%s), prov_errno %d", what, s->tag, err.err,
			     fi_strerror(err.err), err.prov_errno);
		}
		if (r != -FI_EAGAIN)
			fail("%s on %s: fi_cq_read returned %zd (%s)", what, s->tag, r, fi_strerror((int)-r));
		if (now_ms() - t0 > WAIT_MS)
			fail("%s on %s: no completion after %d ms", what, s->tag, WAIT_MS);
	}
}

static void fill(char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(seed * 31 + i * 7);
}

/* One message from x to y: kind 0 send, 1 senddata, 2 inject, 3 injectdata,
 * 4 sendmsg with FI_DELIVERY_COMPLETE. */
static void one(struct side *x, struct side *y, int kind, size_t len, int seed)
{
	static const char *kinds[] = { "fi_send", "fi_senddata", "fi_inject", "fi_injectdata",
				       "fi_sendmsg(FI_DELIVERY_COMPLETE)" };
	bool inj = kind == 2 || kind == 3;
	char what[128];
	snprintf(what, sizeof(what), "%s %s->%s len %zu (prefix %zu)", kinds[kind], x->tag, y->tag, len, prefix);
	memset(y->rx, 0xee, prefix + max_msg + 1); /* one byte past the posted buffer too */
	CHK(fi_recv(y->ep, y->rx, prefix + max_msg, desc, FI_ADDR_UNSPEC, y->rx));
	/* with FI_MSG_PREFIX, send buffers start with the prefix too (not sent) */
	memset(x->tx, 0x5c, prefix);
	fill(x->tx + prefix, len, seed);
	uint64_t data = 0xa5000000u | (uint64_t)seed;
	size_t n = len + prefix;
	switch (kind) {
	case 0: CHK(fi_send(x->ep, x->tx, n, desc, y->addr, x->tx)); break;
	case 1: CHK(fi_senddata(x->ep, x->tx, n, desc, data, y->addr, x->tx)); break;
	case 2: CHK(fi_inject(x->ep, x->tx, n, y->addr)); break;
	case 3: CHK(fi_injectdata(x->ep, x->tx, n, data, y->addr)); break;
	case 4: {
		struct iovec iov = { .iov_base = x->tx, .iov_len = n };
		struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = y->addr, .context = x->tx };
		CHK(fi_sendmsg(x->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
		break;
	}
	}
	struct fi_cq_data_entry e;
	if (!inj) {
		wait_comp(x, &e, NULL, what);
		EXPECT(e.op_context == x->tx, "%s: send completion context %p", what, e.op_context);
		EXPECT((e.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG), "%s: send completion flags %#llx", what,
		       (unsigned long long)e.flags);
	}
	if (inj)
		memset(x->tx, 0, n); /* inject: the buffer is ours again at once */
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	wait_comp(y, &e, &src, what);
	EXPECT(e.op_context == y->rx, "%s: receive context %p", what, e.op_context);
	EXPECT((e.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG), "%s: receive flags %#llx", what,
	       (unsigned long long)e.flags);
	EXPECT(e.len == len + prefix, "%s: receive len %zu, want %zu", what, e.len, len + prefix);
	EXPECT(e.buf == NULL || e.buf == y->rx, "%s: receive buf %p (posted %p)", what, e.buf, (void *)y->rx);
	EXPECT(src == x->addr, "%s: FI_SOURCE gave fi_addr %#llx, the sender is %#llx", what, (unsigned long long)src,
	       (unsigned long long)x->addr);
	if (kind == 1 || kind == 3) {
		EXPECT(e.flags & FI_REMOTE_CQ_DATA, "%s: no FI_REMOTE_CQ_DATA", what);
		EXPECT(e.data == data, "%s: data %#llx, want %#llx", what, (unsigned long long)e.data,
		       (unsigned long long)data);
	} else {
		EXPECT(!(e.flags & FI_REMOTE_CQ_DATA), "%s: unexpected FI_REMOTE_CQ_DATA", what);
	}
	char *want = malloc(len + 1);
	fill(want, len, seed);
	for (size_t i = 0; i < len; i++)
		if (y->rx[prefix + i] != want[i])
			fail("%s: byte %zu is %#x, sent %#x", what, i, (unsigned char)y->rx[prefix + i], (unsigned char)want[i]);
	free(want);
	EXPECT((unsigned char)y->rx[prefix + len] == 0xee, "%s: the receive wrote past the message", what);
	if (inj) {
		ssize_t r = fi_cq_read(x->cq, &e, 1);
		EXPECT(r == -FI_EAGAIN, "%s: the inject gave a transmit completion (%zd)", what, r);
	}
}

static void run(bool with_prefix)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG | FI_SOURCE;
	hints->mode = FI_CONTEXT | (with_prefix ? FI_MSG_PREFIX : 0);
	hints->domain_attr->mr_mode = MR_MODE_117;
	hints->fabric_attr->prov_name = strdup(asked_prov());
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);

	EXPECT(info->ep_attr->type == FI_EP_DGRAM, "ep type %d", info->ep_attr->type);
	EXPECT(info->addr_format == FI_ADDR_IB_UD, "addr_format %u", info->addr_format);
	EXPECT(info->ep_attr->protocol == FI_PROTO_IB_UD, "protocol %u", info->ep_attr->protocol);
	EXPECT(!(info->rx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)), "rx caps %#llx",
	       (unsigned long long)info->rx_attr->caps);
	EXPECT(info->caps & FI_SOURCE, "caps %#llx lack FI_SOURCE", (unsigned long long)info->caps);
	if (with_prefix) {
		EXPECT((info->mode & FI_MSG_PREFIX) && (info->rx_attr->mode & FI_MSG_PREFIX) &&
			       (info->tx_attr->mode & FI_MSG_PREFIX),
		       "mode %#llx tx mode %#llx rx mode %#llx", (unsigned long long)info->mode,
		       (unsigned long long)info->tx_attr->mode, (unsigned long long)info->rx_attr->mode);
		EXPECT(info->ep_attr->msg_prefix_size == 40, "msg_prefix_size %zu", info->ep_attr->msg_prefix_size);
	} else {
		EXPECT(!(info->mode & FI_MSG_PREFIX) && !(info->rx_attr->mode & FI_MSG_PREFIX), "mode %#llx",
		       (unsigned long long)info->mode);
		EXPECT(info->ep_attr->msg_prefix_size == 0, "msg_prefix_size %zu", info->ep_attr->msg_prefix_size);
	}
	prefix = info->ep_attr->msg_prefix_size;
	max_msg = info->ep_attr->max_msg_size;
	inject_size = info->tx_attr->inject_size;
	EXPECT(max_msg > 0 && max_msg <= 4096, "max_msg_size %zu (the port MTU)", max_msg);
	logmsg("%s: prefix %zu, max_msg_size %zu, inject_size %zu, device %s", with_prefix ? "FI_MSG_PREFIX" : "no prefix",
	       prefix, max_msg, inject_size, info->domain_attr->name);

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	CHK(fi_av_open(domain, &aa, &av, NULL));
	size_t region = 4 * (prefix + max_msg + 64);
	char *mem = calloc(1, region);
	CHK(fi_mr_reg(domain, mem, region, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
	desc = fi_mr_desc(mr);

	/* counters: A's sends, B's receives */
	struct fid_cntr *csend, *crecv;
	struct fi_cntr_attr cta = { .events = FI_CNTR_EVENTS_COMP };
	CHK(fi_cntr_open(domain, &cta, &csend, NULL));
	CHK(fi_cntr_open(domain, &cta, &crecv, NULL));

	struct side s[2] = { { .tag = "A" }, { .tag = "B" } };
	char names[2][64];
	for (int i = 0; i < 2; i++) {
		struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA, .size = 64 };
		CHK(fi_endpoint(domain, info, &s[i].ep, NULL));
		CHK(fi_cq_open(domain, &ca, &s[i].cq, NULL));
		CHK(fi_ep_bind(s[i].ep, &s[i].cq->fid, FI_TRANSMIT | FI_RECV));
		CHK(fi_ep_bind(s[i].ep, &av->fid, 0));
		CHK(fi_ep_bind(s[i].ep, i == 0 ? &csend->fid : &crecv->fid, i == 0 ? FI_SEND : FI_RECV));
		CHK(fi_enable(s[i].ep));
		size_t len = sizeof(names[i]);
		CHK(fi_getname(&s[i].ep->fid, names[i], &len));
		EXPECT(len == 32, "fi_getname length %zu (struct ofi_ib_ud_ep_name is 32)", len);
		CHK(fi_av_insert(av, names[i], 1, &s[i].addr, 0, NULL) == 1 ? 0 : -FI_EINVAL);
		s[i].tx = mem + i * 2 * (prefix + max_msg + 64);
		s[i].rx = s[i].tx + prefix + max_msg + 64;
		char str[128];
		size_t sl = sizeof(str);
		fi_av_straddr(av, names[i], str, &sl);
		EXPECT(!strncmp(str, "fi_addr_ib_ud://", 16), "fi_av_straddr gave '%s'", str);
		logmsg("endpoint %s: %s (fi_addr %llu)", s[i].tag, str, (unsigned long long)s[i].addr);
		char back[64];
		size_t bl = sizeof(back);
		CHK(fi_av_lookup(av, s[i].addr, back, &bl));
		EXPECT(bl == 32 && !memcmp(back, names[i], 32), "fi_av_lookup gave another address (%zu bytes)", bl);
	}

	for (int dir = 0; dir < 2; dir++) {
		struct side *x = &s[dir], *y = &s[1 - dir];
		one(x, y, 0, max_msg, 1 + dir);
		one(x, y, 0, 1, 2 + dir);
		one(x, y, 1, 100, 3 + dir);
		one(x, y, 2, inject_size < 64 ? inject_size : 64, 4 + dir);
		one(x, y, 3, 8, 5 + dir);
		one(x, y, 0, 0, 6 + dir);
		one(x, y, 4, 16, 7 + dir);
	}

	/* A sent 7 messages (injects included) and B received 7, in the first
	 * direction; the counters get them as the endpoints progress (a counter
	 * read progresses its endpoints). */
	uint64_t t0 = now_ms();
	while ((fi_cntr_read(csend) < 7 || fi_cntr_read(crecv) < 7) && now_ms() - t0 < WAIT_MS)
		;
	EXPECT(fi_cntr_read(csend) == 7 && fi_cntr_read(crecv) == 7 && fi_cntr_readerr(csend) == 0 &&
		       fi_cntr_readerr(crecv) == 0,
	       "counters: A's sends %llu (err %llu), B's receives %llu (err %llu), want 7 and 7",
	       (unsigned long long)fi_cntr_read(csend), (unsigned long long)fi_cntr_readerr(csend),
	       (unsigned long long)fi_cntr_read(crecv), (unsigned long long)fi_cntr_readerr(crecv));

	/* too long */
	ssize_t r = fi_send(s[0].ep, s[0].tx, prefix + max_msg + 1, desc, s[1].addr, NULL);
	EXPECT(r == -FI_EMSGSIZE, "fi_send of max_msg_size + 1 returned %zd, want -FI_EMSGSIZE", r);
	r = fi_inject(s[0].ep, s[0].tx, prefix + inject_size + 1, s[1].addr);
	EXPECT(r == -FI_EMSGSIZE, "fi_inject of inject_size + 1 returned %zd, want -FI_EMSGSIZE", r);
	r = fi_send(s[0].ep, s[0].tx, 8, desc, 77, NULL);
	EXPECT(r < 0, "fi_send to an fi_addr not in the AV returned %zd", r);
	struct iovec iov = { .iov_base = s[0].tx, .iov_len = prefix + 8 };
	struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = s[1].addr };
	r = fi_sendmsg(s[0].ep, &m, FI_COMPLETION | FI_COMMIT_COMPLETE);
	EXPECT(r == -FI_EBADFLAGS, "fi_sendmsg with FI_COMMIT_COMPLETE returned %zd, want -FI_EBADFLAGS", r);

	for (int i = 0; i < 2; i++) {
		CHK(fi_close(&s[i].ep->fid));
		CHK(fi_close(&s[i].cq->fid));
	}
	CHK(fi_close(&csend->fid));
	CHK(fi_close(&crecv->fid));
	CHK(fi_close(&mr->fid));
	CHK(fi_close(&av->fid));
	CHK(fi_close(&domain->fid));
	CHK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	free(mem);
}

int main(void)
{
	test_name = name;
	alarm(TEST_ALARM_SECS);
	run(true);
	run(false);
	printf("PASS %s\n", name);
	return 0;
}
