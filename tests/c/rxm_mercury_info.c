/*
 * rxm_mercury_info: what a stock Mercury (NA OFI plugin) build asks of
 * libfabric on a verbs host, issued verbatim, and a little traffic over what
 * it gets.
 *
 * fi_getinfo, API 1.13, prov_name "verbs;ofi_rxm" (libfabric's ofi_rxm
 * stacked on the verbs MSG provider, which is rsverbs when it is on
 * FI_PROVIDER_PATH): FI_EP_RDM, FI_PROTO_RXM, caps FI_MSG | FI_TAGGED |
 * FI_RMA | FI_DIRECTED_RECV | FI_MULTI_RECV, mode FI_CONTEXT | FI_ASYNC_IOV,
 * tx op_flags FI_INJECT_COMPLETE, mr_mode FI_MR_LOCAL | FI_MR_VIRT_ADDR |
 * FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT, manual control and data
 * progress, FI_RM_ENABLED, FI_THREAD_SAFE, FI_SOCKADDR_IN. Asserted on the
 * first info (the one Mercury takes): provider name "verbs;ofi_rxm", FI_EP_RDM,
 * the caps, mr_key_size <= 8, cq_data_size >= 4.
 *
 * Then, like Mercury: one CQ of 131072 entries, FI_CQ_FORMAT_TAGGED,
 * FI_WAIT_FD, for both directions; FI_OPT_MIN_MULTI_RECV 4096; fi_enable.
 * Traffic between the two processes (the server waits for its first
 * completions the Mercury way: fi_trywait, then epoll_wait on the CQ's fd):
 *  - fi_tsend -> fi_trecv (tag, length, data, flags);
 *  - fi_senddata x2 -> one FI_MULTI_RECV fi_recvmsg buffer (remote CQ data,
 *    both messages inside the buffer, FI_MULTI_RECV on the buffer's release);
 *  - fi_writemsg(FI_COMPLETION | FI_DELIVERY_COMPLETE) of 64 KiB and
 *    fi_readmsg of 8 KiB into the server's buffer (keys from the provider,
 *    MRs bound to the endpoint when the info says FI_MR_ENDPOINT).
 * The log also lists what fi_getinfo(prov_name "verbs", FI_EP_RDM) returns,
 * in order (native rsverbs RDM and/or ofi_rxm over rsverbs).
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <rdma/fi_tagged.h>

#define MERCURY_API FI_VERSION(1, 13)
#define CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV | FI_MULTI_RECV)
#define TAG 0x123456789aULL
#define TSZ 4096
#define MSZ (64 * 1024)
#define WSZ (64 * 1024)
#define RSZ 8192
#define RMA_SZ (WSZ + RSZ)

static struct fi_info *hints, *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_cq *cq;
static int cq_fd = -1;
static fi_addr_t peer = FI_ADDR_NOTAVAIL;
static bool mr_endpoint;

/* FI_CONTEXT: every operation gets a struct fi_context of its own. */
static struct fi_context ctx[16];

static struct fi_info *mercury_hints(const char *prov)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		fail("fi_allocinfo returned NULL");
	h->fabric_attr->prov_name = strdup(prov);
	h->ep_attr->type = FI_EP_RDM;
	h->ep_attr->protocol = FI_PROTO_RXM;
	h->caps = CAPS;
	h->mode = FI_CONTEXT | FI_ASYNC_IOV;
	h->tx_attr->op_flags = FI_INJECT_COMPLETE;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->addr_format = FI_SOCKADDR_IN;
	return h;
}

/* Logs what prov_name "verbs" offers for FI_EP_RDM, in fi_getinfo's order. */
static void log_verbs_rdm(void)
{
	struct fi_info *h = mercury_hints("verbs"), *list = NULL, *i;
	int n = 0;
	h->ep_attr->protocol = FI_PROTO_UNSPEC;
	int ret = fi_getinfo(MERCURY_API, NULL, NULL, 0, h, &list);
	if (ret) {
		logmsg("fi_getinfo(prov_name verbs, FI_EP_RDM): %d (%s)", ret, fi_strerror(-ret));
	} else {
		for (i = list; i; i = i->next, n++)
			logmsg("fi_getinfo(prov_name verbs, FI_EP_RDM) #%d: provider %s version %u.%u domain %s",
			       n, i->fabric_attr->prov_name, FI_MAJOR(i->fabric_attr->prov_version),
			       FI_MINOR(i->fabric_attr->prov_version), i->domain_attr->name);
		fi_freeinfo(list);
	}
	fi_freeinfo(h);
}

static void open_all(void)
{
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;

	hints = mercury_hints("verbs;ofi_rxm");
	CHK(fi_getinfo(MERCURY_API, NULL, NULL, 0, hints, &info));
	logmsg("got provider %s version %u.%u, fabric %s, domain %s, mr_mode %#x, key size %zu, cq data %zu",
	       info->fabric_attr->prov_name, FI_MAJOR(info->fabric_attr->prov_version),
	       FI_MINOR(info->fabric_attr->prov_version), info->fabric_attr->name, info->domain_attr->name,
	       info->domain_attr->mr_mode, info->domain_attr->mr_key_size, info->domain_attr->cq_data_size);
	EXPECT(strcmp(info->fabric_attr->prov_name, "verbs;ofi_rxm") == 0, "provider %s",
	       info->fabric_attr->prov_name);
	EXPECT(info->ep_attr->type == FI_EP_RDM, "ep type %d", info->ep_attr->type);
	EXPECT((info->caps & CAPS) == CAPS, "caps %#llx lack %#llx", (unsigned long long)info->caps,
	       (unsigned long long)(CAPS & ~info->caps));
	EXPECT(info->domain_attr->mr_key_size <= 8, "mr_key_size %zu", info->domain_attr->mr_key_size);
	EXPECT(info->domain_attr->cq_data_size >= 4, "cq_data_size %zu", info->domain_attr->cq_data_size);
	EXPECT((info->mode & ~(uint64_t)(FI_CONTEXT | FI_ASYNC_IOV)) == 0, "mode %#llx beyond the hints'",
	       (unsigned long long)info->mode);
	EXPECT((info->domain_attr->mr_mode & ~hints->domain_attr->mr_mode) == 0, "mr_mode %#x beyond the hints'",
	       info->domain_attr->mr_mode);
	mr_endpoint = info->domain_attr->mr_mode & FI_MR_ENDPOINT;

	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.size = 131072;
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj = FI_WAIT_FD;
	CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHK(fi_control(&cq->fid, FI_GETWAIT, &cq_fd));
	EXPECT(cq_fd >= 0, "FI_GETWAIT fd %d", cq_fd);
	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_MAP;
	CHK(fi_av_open(domain, &av_attr, &av, NULL));
	CHK(fi_endpoint(domain, info, &ep, NULL));
	CHK(fi_ep_bind(ep, &av->fid, 0));
	CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	size_t min_multi = 4096;
	CHK(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_multi, sizeof(min_multi)));
	CHK(fi_enable(ep));
}

static void exchange(void)
{
	char name[64], pname[64], abuf[128];
	size_t len = sizeof(name);
	uint32_t l32;
	CHK(fi_getname(&ep->fid, name, &len));
	EXPECT(len == sizeof(struct sockaddr_in), "fi_getname length %zu", len);
	logmsg("endpoint at %s", addr_str(name, len, abuf, sizeof(abuf)));
	l32 = (uint32_t)len;
	if (!is_child) {
		oob_send(&l32, sizeof(l32));
		oob_send(name, len);
	}
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= sizeof(pname), "peer name length %u", l32);
	oob_recv(pname, l32);
	if (is_child) {
		l32 = (uint32_t)len;
		oob_send(&l32, sizeof(l32));
		oob_send(name, len);
	}
	EXPECT(CHK(fi_av_insert(av, pname, 1, &peer, 0, NULL)) == 1, "fi_av_insert");
	EXPECT(peer != FI_ADDR_NOTAVAIL, "fi_av_insert gave FI_ADDR_NOTAVAIL");
}

static struct fid_mr *reg(void *buf, size_t len, uint64_t access)
{
	struct fid_mr *mr = NULL;
	CHK(fi_mr_reg(domain, buf, len, access, 0, 0, 0, &mr, NULL));
	if (mr_endpoint) {
		CHK(fi_mr_bind(mr, &ep->fid, 0));
		CHK(fi_mr_enable(mr));
	}
	return mr;
}

/* One completion by polling (fi_cq_read); fails on error entries / timeout. */
static void poll_one(struct fi_cq_tagged_entry *e, const char *what)
{
	uint64_t start = now_ms();
	for (;;) {
		if (cq_one_or_again(cq, fi_cq_read(cq, e, 1), "fi_cq_read", what))
			return;
		if (now_ms() - start > WAIT_MS)
			fail("%s: no completion after %d ms", what, WAIT_MS);
		check_child();
	}
}

/* One completion the Mercury way: poll; when empty, fi_trywait and sleep in
 * epoll_wait on the CQ's fd. Counts the sleeps. */
static int sleeps;
static void wait_one(int epfd, struct fi_cq_tagged_entry *e, const char *what)
{
	uint64_t start = now_ms();
	struct fid *fids[1] = { &cq->fid };
	for (;;) {
		if (cq_one_or_again(cq, fi_cq_read(cq, e, 1), "fi_cq_read", what))
			return;
		if (now_ms() - start > WAIT_MS)
			fail("%s: no completion after %d ms (%d sleeps)", what, WAIT_MS, sleeps);
		int tw = fi_trywait(fabric, fids, 1);
		if (tw == 0) {
			struct epoll_event ev;
			sleeps++;
			int n = epoll_wait(epfd, &ev, 1, 1000);
			EXPECT(n >= 0, "epoll_wait: %m");
		} else {
			EXPECT(tw == -FI_EAGAIN, "fi_trywait returned %d (%s)", tw, fi_strerror(-tw));
		}
		check_child();
	}
}

static void expect_comp(const struct fi_cq_tagged_entry *e, void *c, uint64_t flags, const char *what)
{
	char fb[256];
	EXPECT(e->op_context == c, "%s: op_context %p, want %p", what, e->op_context, c);
	EXPECT((e->flags & flags) == flags, "%s: flags %s lack %#llx", what, flags_str(e->flags, fb, sizeof(fb)),
	       (unsigned long long)(flags & ~e->flags));
}

/* Retries -FI_EAGAIN (resource management / connection setup), progressing. */
#define POST(expr)                                                             \
	({                                                                     \
		ssize_t post_ret__;                                            \
		uint64_t post_start__ = now_ms();                              \
		while ((post_ret__ = (expr)) == -FI_EAGAIN) {                  \
			(void)fi_cq_read(cq, NULL, 0);                         \
			if (now_ms() - post_start__ > WAIT_MS)                 \
				fail("%s: -FI_EAGAIN for %d ms", #expr, WAIT_MS); \
		}                                                              \
		CHK(post_ret__);                                               \
	})

/* Manual progress while this side waits on the out-of-band channel. */
static volatile int prog_on;
static pthread_t prog_thread;
static void *prog_fn(void *arg)
{
	(void)arg;
	while (prog_on) {
		(void)fi_cq_read(cq, NULL, 0);
		usleep(200);
	}
	return NULL;
}
static void progress_start(void)
{
	prog_on = 1;
	if (pthread_create(&prog_thread, NULL, prog_fn, NULL))
		fail("pthread_create failed");
}
static void progress_stop(void)
{
	prog_on = 0;
	pthread_join(prog_thread, NULL);
}

static void server(void)
{
	struct fi_cq_tagged_entry e;
	uint8_t *tbuf = alloc_buf(TSZ), *mbuf = alloc_buf(MSZ), *rbuf = alloc_buf(RMA_SZ);
	struct fid_mr *tmr = reg(tbuf, TSZ, FI_RECV), *mmr = reg(mbuf, MSZ, FI_RECV);
	struct fid_mr *rmr = reg(rbuf, RMA_SZ, FI_REMOTE_READ | FI_REMOTE_WRITE);
	void *mdesc = fi_mr_desc(mmr);
	static struct iovec miov;
	struct fi_msg mmsg;
	int epfd = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	EXPECT(epfd >= 0, "epoll_create1: %m");
	EXPECT(epoll_ctl(epfd, EPOLL_CTL_ADD, cq_fd, &ev) == 0, "epoll_ctl: %m");

	/* tagged receive and a multi-receive buffer, posted before the client sends */
	POST(fi_trecv(ep, tbuf, TSZ, fi_mr_desc(tmr), peer, TAG, 0, &ctx[0]));
	miov.iov_base = mbuf;
	miov.iov_len = MSZ;
	memset(&mmsg, 0, sizeof(mmsg));
	mmsg.msg_iov = &miov;
	mmsg.desc = &mdesc;
	mmsg.iov_count = 1;
	mmsg.addr = FI_ADDR_UNSPEC;
	mmsg.context = &ctx[1];
	POST(fi_recvmsg(ep, &mmsg, FI_MULTI_RECV | FI_COMPLETION));
	oob_signal(1);

	wait_one(epfd, &e, "fi_trecv");
	expect_comp(&e, &ctx[0], FI_TAGGED | FI_RECV, "fi_trecv");
	EXPECT(e.tag == TAG && e.len == TSZ, "fi_trecv: tag %#llx len %zu", (unsigned long long)e.tag, e.len);
	expect_pattern(tbuf, TSZ, 1, "tagged message");
	logmsg("tagged message received (%d sleeps in epoll_wait)", sleeps);

	/* two messages with remote CQ data into the multi-receive buffer */
	size_t lens[2] = { 100, 2000 };
	uint64_t datas[2] = { 0xabcd0001, 0xabcd0002 };
	bool released = false;
	for (int i = 0; i < 2; i++) {
		wait_one(epfd, &e, "multi-recv");
		expect_comp(&e, &ctx[1], FI_MSG | FI_RECV | FI_REMOTE_CQ_DATA, "multi-recv");
		EXPECT(e.len == lens[i], "multi-recv #%d: len %zu, want %zu", i, e.len, lens[i]);
		EXPECT(e.data == datas[i], "multi-recv #%d: data %#llx", i, (unsigned long long)e.data);
		EXPECT((uint8_t *)e.buf >= mbuf && (uint8_t *)e.buf + e.len <= mbuf + MSZ,
		       "multi-recv #%d: buf %p outside [%p, +%d)", i, e.buf, (void *)mbuf, MSZ);
		expect_pattern(e.buf, e.len, 10 + i, "multi-recv message");
		if (e.flags & FI_MULTI_RECV)
			released = true;
	}
	logmsg("two messages in the multi-receive buffer (%d sleeps)", sleeps);

	/* RMA target */
	struct rma_info ri = { (uint64_t)(uintptr_t)rbuf, fi_mr_key(rmr), RMA_SZ };
	if (!(info->domain_attr->mr_mode & FI_MR_VIRT_ADDR))
		ri.addr = 0;
	EXPECT(ri.key != FI_KEY_NOTAVAIL, "fi_mr_key: FI_KEY_NOTAVAIL");
	fill_pattern(rbuf + WSZ, RSZ, 30);
	oob_send(&ri, sizeof(ri));
	progress_start();
	oob_wait(2);
	progress_stop();
	expect_pattern(rbuf, WSZ, 20, "fi_writemsg data at the target");
	logmsg("64 KiB fi_writemsg(FI_DELIVERY_COMPLETE) landed");

	/* cancel the multi-receive buffer unless the provider released it already */
	if (!released) {
		CHK(fi_cancel(&ep->fid, &ctx[1]));
		struct fi_cq_err_entry err;
		uint64_t start = now_ms();
		for (;;) {
			ssize_t ret = fi_cq_read(cq, &e, 1);
			if (ret == -FI_EAVAIL) {
				memset(&err, 0, sizeof(err));
				EXPECT(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
				EXPECT(err.err == FI_ECANCELED && err.op_context == &ctx[1], "cancel: err %d ctx %p",
				       err.err, err.op_context);
				break;
			}
			EXPECT(ret == -FI_EAGAIN, "after fi_cancel: fi_cq_read %zd", ret);
			EXPECT(now_ms() - start < WAIT_MS, "no FI_ECANCELED entry for the multi-receive buffer");
		}
	}
	oob_signal(3);
	close(epfd);
	CHK(fi_close(&tmr->fid));
	CHK(fi_close(&mmr->fid));
	progress_start();
	oob_wait(4); /* the client is done with this side's memory */
	progress_stop();
	CHK(fi_close(&rmr->fid));
}

static void client(void)
{
	struct fi_cq_tagged_entry e;
	uint8_t *sbuf = alloc_buf(TSZ + 4096), *lbuf = alloc_buf(RMA_SZ);
	struct fid_mr *smr = reg(sbuf, TSZ + 4096, FI_SEND), *lmr = reg(lbuf, RMA_SZ, FI_READ | FI_WRITE);
	void *ldesc = fi_mr_desc(lmr);
	static struct iovec wiov, riov;
	static struct fi_rma_iov wrio, rrio;
	struct fi_msg_rma m;
	struct rma_info ri;

	oob_wait(1);
	fill_pattern(sbuf, TSZ, 1);
	POST(fi_tsend(ep, sbuf, TSZ, fi_mr_desc(smr), peer, TAG, &ctx[2]));
	poll_one(&e, "fi_tsend");
	expect_comp(&e, &ctx[2], FI_TAGGED | FI_SEND, "fi_tsend");

	fill_pattern(sbuf, 100, 10);
	POST(fi_senddata(ep, sbuf, 100, fi_mr_desc(smr), 0xabcd0001, peer, &ctx[3]));
	poll_one(&e, "fi_senddata #0");
	expect_comp(&e, &ctx[3], FI_MSG | FI_SEND, "fi_senddata #0");
	fill_pattern(sbuf + 4096, 2000, 11);
	POST(fi_senddata(ep, sbuf + 4096, 2000, fi_mr_desc(smr), 0xabcd0002, peer, &ctx[4]));
	poll_one(&e, "fi_senddata #1");
	expect_comp(&e, &ctx[4], FI_MSG | FI_SEND, "fi_senddata #1");

	oob_recv(&ri, sizeof(ri));
	fill_pattern(lbuf, WSZ, 20);
	wiov.iov_base = lbuf;
	wiov.iov_len = WSZ;
	wrio.addr = ri.addr;
	wrio.len = WSZ;
	wrio.key = ri.key;
	memset(&m, 0, sizeof(m));
	m.msg_iov = &wiov;
	m.desc = &ldesc;
	m.iov_count = 1;
	m.addr = peer;
	m.rma_iov = &wrio;
	m.rma_iov_count = 1;
	m.context = &ctx[5];
	POST(fi_writemsg(ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
	poll_one(&e, "fi_writemsg");
	expect_comp(&e, &ctx[5], FI_RMA | FI_WRITE, "fi_writemsg");

	memset(lbuf + WSZ, 0, RSZ);
	riov.iov_base = lbuf + WSZ;
	riov.iov_len = RSZ;
	rrio.addr = ri.addr + WSZ;
	rrio.len = RSZ;
	rrio.key = ri.key;
	m.msg_iov = &riov;
	m.rma_iov = &rrio;
	m.context = &ctx[6];
	POST(fi_readmsg(ep, &m, FI_COMPLETION));
	poll_one(&e, "fi_readmsg");
	expect_comp(&e, &ctx[6], FI_RMA | FI_READ, "fi_readmsg");
	expect_pattern(lbuf + WSZ, RSZ, 30, "fi_readmsg data");
	oob_signal(2);

	/* keep progressing (the server may still need this side) until it is done */
	progress_start();
	oob_wait(3);
	progress_stop();
	CHK(fi_close(&smr->fid));
	CHK(fi_close(&lmr->fid));
	oob_signal(4);
}

int main(void)
{
	/* TEST_NAME: the suite runs it again as rxm_mercury_info_srx
	 * (FI_OFI_RXM_USE_SRX=1: rxm receives through rsverbs' shared
	 * receive contexts). */
	bool srv = test_start(test_name_env("rxm_mercury_info"));
	if (srv)
		log_verbs_rdm();
	open_all();
	exchange();
	if (srv)
		server();
	else
		client();
	CHK(fi_close(&ep->fid));
	CHK(fi_close(&av->fid));
	CHK(fi_close(&cq->fid));
	CHK(fi_close(&domain->fid));
	CHK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	if (srv)
		test_finish();
	child_done();
}
