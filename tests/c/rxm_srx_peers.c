/*
 * rxm_srx_peers: libfabric's ofi_rxm over rsverbs, one server endpoint and
 * NPEERS client endpoints that each connect by one message; the server's
 * pinned memory (VmPin in /proc/self/status: memory registrations pin their
 * pages) is read after the first and after the last peer.
 *
 * Run with TEST_PROVIDER="verbs;ofi_rxm" and FI_PROVIDER unset.
 *  - FI_OFI_RXM_USE_SRX=1: rxm receives through one rsverbs shared receive
 *    context (fi_srx_context): its receive buffers are posted once, so the
 *    server's pinned memory must not grow with the peers (less than 256 KiB
 *    from the first peer to the last);
 *  - otherwise: rxm preposts 128 receive buffers on every connection (from
 *    a pool that grows by 1024 buffers, 16 MiB, at a time); the growth must
 *    be at least (NPEERS - 1) x 256 KiB: with 16 peers the pool grows once
 *    more after the 8th — this shows the measure sees the buffers, so the
 *    first case can fail.
 * The suite runs the first case with FI_OFI_RXM_MSG_RX_SIZE=1024 (the
 * shared context's size: one pool chunk); the client process uses rxm's
 * defaults without a shared context (its memory is not measured).
 * The test's name comes from TEST_NAME (default rxm_srx_peers).  The figures
 * (KiB pinned, per peer) go to stderr.
 */
#include "rdm_common.h"

#include <strings.h>

#define NPEERS 16
#define MSGLEN 64

static long vm_pin_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		fail("fopen /proc/self/status: %s", strerror(errno));
	char line[256];
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &v) == 1)
			break;
	fclose(f);
	EXPECT(v >= 0, "no VmPin in /proc/self/status");
	return v;
}

static bool use_srx(void)
{
	const char *s = getenv("FI_OFI_RXM_USE_SRX");
	return s && (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true"));
}

static void server(void)
{
	struct rctx r;
	rdm_open(&r, FI_MSG);
	logmsg("provider %s, FI_OFI_RXM_USE_SRX=%s", r.info->fabric_attr->prov_name, use_srx() ? "1" : "unset/0");
	char *buf = alloc_buf(NPEERS * MSGLEN);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, NPEERS * MSGLEN, FI_RECV);
	static struct fi_context ctx[NPEERS];
	for (int i = 0; i < NPEERS; i++)
		CHK(fi_recv(r.ep, buf + i * MSGLEN, MSGLEN, fi_mr_desc(mr), FI_ADDR_UNSPEC, &ctx[i]));
	rdm_exchange(&r, false);
	oob_wait(5); /* the client's endpoints are open */
	long base = vm_pin_kib(), first = 0, last = 0;
	logmsg("VmPin before any peer: %ld KiB", base);
	for (int k = 0; k < NPEERS; k++) {
		oob_signal((uint8_t)(10 + k));
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		char what[64];
		snprintf(what, sizeof(what), "message of peer %d", k);
		if (!rdm_read_from(r.rxcq, &e, &src, &err, WAIT_MS, what))
			fail("%s: error entry %d (%s)", what, err.err, fi_strerror(err.err));
		EXPECT(e.len == MSGLEN, "%s: len %zu", what, e.len);
		long now = vm_pin_kib();
		logmsg("VmPin after %d peer(s): %ld KiB", k + 1, now);
		if (k == 0)
			first = now;
		last = now;
	}
	long growth = last - first;
	logmsg("pinned memory from the first peer to peer %d: %+ld KiB (%ld KiB per added peer)", NPEERS, growth,
	       growth / (NPEERS - 1));
	if (use_srx())
		EXPECT(growth < 256, "with a shared receive context the pinned memory grew by %ld KiB over %d peers",
		       growth, NPEERS - 1);
	else
		EXPECT(growth >= (NPEERS - 1) * 256L,
		       "without a shared receive context the pinned memory grew by only %ld KiB over %d peers",
		       growth, NPEERS - 1);
	oob_wait(99);
	rdm_test_end(true, &r, mr, buf);
}

static void client(void)
{
	/* the client's memory is not measured: its endpoints use rxm's defaults
	 * (each has one connection) */
	unsetenv("FI_OFI_RXM_USE_SRX");
	unsetenv("FI_OFI_RXM_MSG_RX_SIZE");
	struct rctx r[NPEERS];
	char peer_name[64];
	char *buf = alloc_buf(MSGLEN);
	fill_pattern(buf, MSGLEN, 7);
	struct fid_mr *mr[NPEERS];
	for (int k = 0; k < NPEERS; k++) {
		rdm_open(&r[k], FI_MSG);
		mr[k] = rdm_mr_reg(&r[k], buf, MSGLEN, FI_SEND);
		if (k == 0) {
			rdm_exchange(&r[0], true);
			memcpy(peer_name, r[0].peer_name, r[0].peer_namelen);
		} else {
			int n = (int)CHK(fi_av_insert(r[k].av, peer_name, 1, &r[k].peer, 0, NULL));
			EXPECT(n == 1, "fi_av_insert inserted %d", n);
		}
	}
	oob_signal(5);
	for (int k = 0; k < NPEERS; k++) {
		oob_wait((uint8_t)(10 + k));
		/* rxm answers -FI_EAGAIN while it connects: progress and retry */
		uint64_t start = now_ms();
		ssize_t sr;
		while ((sr = fi_send(r[k].ep, buf, MSGLEN, fi_mr_desc(mr[k]), r[k].peer, NULL)) == -FI_EAGAIN) {
			struct fi_cq_tagged_entry pe;
			(void)fi_cq_read(r[k].txcq, &pe, 0);
			EXPECT(now_ms() - start < WAIT_MS, "peer %d: fi_send -FI_EAGAIN for %d ms", k, WAIT_MS);
		}
		CHK(sr);
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		if (!rdm_read_from(r[k].txcq, &e, &src, &err, WAIT_MS, "send"))
			fail("peer %d: send error %d (%s)", k, err.err, fi_strerror(err.err));
	}
	oob_signal(99);
	for (int k = 0; k < NPEERS; k++) {
		mr_close(mr[k]);
		rdm_close(&r[k]);
	}
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start(test_name_env("rxm_srx_peers")))
		server();
	else
		client();
	return 0;
}
