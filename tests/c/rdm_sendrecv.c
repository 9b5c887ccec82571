/*
 * rdm_sendrecv: FI_EP_RDM untagged messaging between two processes.
 *
 *  - fi_send/fi_sendv/fi_sendmsg into fi_recv/fi_recvv/fi_recvmsg, sizes
 *    0 B .. 1 MiB (eager and rendezvous), data checked byte by byte,
 *    completion flags/len/op_context, the sender's fi_addr via fi_cq_readfrom;
 *  - fi_senddata / fi_inject / fi_injectdata (remote CQ data, no tx completion);
 *  - 32 messages in flight, matched in order;
 *  - unexpected messages (eager and rendezvous sent before the receive is posted);
 *  - truncation (FI_ETRUNC with olen) for eager and rendezvous;
 *  - fi_cancel of a posted receive (FI_ECANCELED);
 *  - FI_MULTI_RECV buffers (placement, FI_MULTI_RECV on the last completion).
 * The server receives, the client sends; they step through phases with the
 * out-of-band channel.
 */
#include "rdm_common.h"

#define MAXSZ (1u << 20)

static const size_t sizes[] = { 0, 1, 64, 4095, 16384, 16385, 65536, 200000, MAXSZ };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

/* server: post a receive of `len` bytes at buf with variant v (0 recv, 1 recvv, 2 recvmsg). */
static void post_recv(int v, void *ctx, size_t len)
{
	switch (v) {
	case 0:
		RETRY(&r, fi_recv(r.ep, buf, len, desc, FI_ADDR_UNSPEC, ctx));
		break;
	case 1: {
		size_t h = len / 3;
		struct iovec iov[2] = { { buf, h }, { buf + h, len - h } };
		void *d[2] = { desc, desc };
		RETRY(&r, fi_recvv(r.ep, iov, d, 2, FI_ADDR_UNSPEC, ctx));
		break;
	}
	default: {
		struct iovec iov = { buf, len };
		struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = ctx };
		RETRY(&r, fi_recvmsg(r.ep, &m, FI_COMPLETION));
	}
	}
}

/* client: send `len` bytes of pattern seed at buf with variant v. */
static void post_send(int v, void *ctx, size_t len)
{
	switch (v) {
	case 0:
		RETRY(&r, fi_send(r.ep, buf, len, desc, r.peer, ctx));
		break;
	case 1: {
		size_t h = len / 2;
		struct iovec iov[3] = { { buf, h / 2 }, { buf + h / 2, h - h / 2 }, { buf + h, len - h } };
		void *d[3] = { desc, desc, desc };
		RETRY(&r, fi_sendv(r.ep, iov, d, 3, r.peer, ctx));
		break;
	}
	default: {
		struct iovec iov = { buf, len };
		struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer, .context = ctx };
		RETRY(&r, fi_sendmsg(r.ep, &m, FI_COMPLETION));
	}
	}
}

/* n completions with contexts base..base+n-1, in any order; receive lengths
 * must match the sizes sent (1000 for even, 20000 for odd indices). */
static void expect_set(struct fid_cq *cq, long base, int n, uint64_t flags, const char *what)
{
	uint64_t seen = 0;
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry e;
		rdm_next(cq, &e, "%s", what);
		long i = (long)e.op_context - base;
		EXPECT(i >= 0 && i < n && !(seen & (1ull << i)), "%s: unexpected op_context %p", what, e.op_context);
		seen |= 1ull << i;
		EXPECT((e.flags & flags) == flags, "%s #%ld: flags %#llx", what, i, (unsigned long long)e.flags);
		if (flags & FI_RECV)
			EXPECT(e.len == ((i % 2) ? 20000u : 1000u), "%s #%ld: len %zu (matched out of order?)", what, i, e.len);
	}
}

static void server(void)
{
	struct fi_cq_tagged_entry e;
	char what[64];

	/* 1. sizes x variants; the sender's fi_addr comes back with readfrom */
	for (int v = 0; v < 3; v++) {
		for (size_t i = 0; i < NSIZES; i++) {
			size_t len = sizes[i];
			memset(buf, 0xee, len + 16);
			post_recv(v, (void *)(0x1000 + i), MAXSZ);
			oob_signal(1);
			snprintf(what, sizeof(what), "recv v%d %zu B", v, len);
			fi_addr_t src = rdm_expect(r.rxcq, (void *)(0x1000 + i), FI_RECV | FI_MSG, &e, what);
			EXPECT(e.len == len, "%s: len %zu", what, e.len);
			EXPECT(src == r.peer, "%s: fi_cq_readfrom src %#llx, want %#llx", what, (unsigned long long)src,
			       (unsigned long long)r.peer);
			EXPECT(!(e.flags & FI_REMOTE_CQ_DATA), "%s: FI_REMOTE_CQ_DATA set", what);
			expect_pattern(buf, len, (uint32_t)(len + v), what);
			EXPECT(buf[len] == 0xee, "%s: byte after the message overwritten", what);
		}
	}
	logmsg("phase 1 (sizes, send/sendv/sendmsg) ok");

	/* 2. senddata, inject, injectdata */
	/* three receives into separate buffers: all three may land before the first is read */
	for (int i = 0; i < 3; i++)
		RETRY(&r, fi_recv(r.ep, buf + (size_t)i * 65536, 65536, desc, FI_ADDR_UNSPEC, (void *)(0x2000L + i)));
	oob_signal(2);
	rdm_expect(r.rxcq, (void *)0x2000, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, &e, "senddata");
	EXPECT(e.data == 0xabcd1234 && e.len == 3000, "senddata: data %#llx len %zu", (unsigned long long)e.data, e.len);
	expect_pattern(buf, 3000, 9, "senddata data");
	rdm_expect(r.rxcq, (void *)0x2001, FI_RECV | FI_MSG, &e, "inject");
	EXPECT(e.len == 100, "inject: len %zu", e.len);
	expect_pattern(buf + 65536, 100, 77, "inject data");
	rdm_expect(r.rxcq, (void *)0x2002, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, &e, "injectdata");
	EXPECT(e.data == 0x5eed && e.len == 8, "injectdata: data %#llx len %zu", (unsigned long long)e.data, e.len);
	EXPECT(*(uint64_t *)(buf + 131072) == 42, "injectdata payload %llu", (unsigned long long)*(uint64_t *)(buf + 131072));
	logmsg("phase 2 (senddata/inject/injectdata) ok");

	/* 3. 32 in flight into separate buffers, matched in order */
	for (int i = 0; i < 32; i++)
		RETRY(&r, fi_recv(r.ep, buf + (size_t)i * 32768, 32768, desc, FI_ADDR_UNSPEC, (void *)(0x3000L + i)));
	oob_signal(3);
	/* eager receives complete on arrival, rendezvous ones when read: any order */
	expect_set(r.rxcq, 0x3000, 32, FI_RECV | FI_MSG, "in-flight receive");
	for (int i = 0; i < 32; i++) {
		snprintf(what, sizeof(what), "in-flight data #%d", i);
		expect_pattern(buf + (size_t)i * 32768, (i % 2) ? 20000 : 1000, 300 + i, what);
	}
	logmsg("phase 3 (32 in flight) ok");

	/* 4. unexpected: the client sends before the receives exist */
	oob_wait(4);
	cq_expect_empty(r.rxcq, 300, "unexpected: nothing completes without a receive");
	post_recv(0, (void *)0x4000, MAXSZ);
	rdm_expect(r.rxcq, (void *)0x4000, FI_RECV | FI_MSG, &e, "unexpected eager");
	EXPECT(e.len == 5000, "unexpected eager len %zu", e.len);
	expect_pattern(buf, 5000, 41, "unexpected eager data");
	post_recv(1, (void *)0x4001, MAXSZ);
	rdm_expect(r.rxcq, (void *)0x4001, FI_RECV | FI_MSG, &e, "unexpected rendezvous");
	EXPECT(e.len == 300000, "unexpected rendezvous len %zu", e.len);
	expect_pattern(buf, 300000, 42, "unexpected rendezvous data");
	oob_signal(5);
	logmsg("phase 4 (unexpected eager + rendezvous) ok");

	/* 5. truncation */
	RETRY(&r, fi_recv(r.ep, buf, 100, desc, FI_ADDR_UNSPEC, (void *)0x5000));
	RETRY(&r, fi_recv(r.ep, buf + 65536, 20000, desc, FI_ADDR_UNSPEC, (void *)0x5001));
	oob_signal(6);
	struct fi_cq_err_entry err = rdm_expect_err(r.rxcq, FI_ETRUNC, "truncated eager");
	EXPECT(err.op_context == (void *)0x5000 && err.len == 100 && err.olen == 900,
	       "truncated eager: ctx %p len %zu olen %zu", err.op_context, err.len, err.olen);
	expect_pattern(buf, 100, 51, "truncated eager data");
	err = rdm_expect_err(r.rxcq, FI_ETRUNC, "truncated rendezvous");
	EXPECT(err.op_context == (void *)0x5001 && err.len == 20000 && err.olen == 80000,
	       "truncated rendezvous: ctx %p len %zu olen %zu", err.op_context, err.len, err.olen);
	expect_pattern(buf + 65536, 20000, 52, "truncated rendezvous data");
	logmsg("phase 5 (truncation) ok");

	/* 6. cancel */
	post_recv(0, (void *)0x6000, 64);
	CHK(fi_cancel(&r.ep->fid, (void *)0x6000));
	err = rdm_expect_err(r.rxcq, FI_ECANCELED, "canceled receive");
	EXPECT(err.op_context == (void *)0x6000, "canceled: op_context %p", err.op_context);
	EXPECT(err.flags & FI_RECV, "canceled: flags %#llx", (unsigned long long)err.flags);
	logmsg("phase 6 (cancel) ok");

	/* 7. multi-receive: 8 KiB buffer, minimum 4 KiB free */
	size_t min = 4096;
	CHK(fi_setopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)));
	size_t got = 0, glen = sizeof(got);
	CHK(fi_getopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &glen));
	EXPECT(got == 4096, "FI_OPT_MIN_MULTI_RECV reads back %zu", got);
	{
		struct iovec iov = { buf, 8192 };
		struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = (void *)0x7000 };
		RETRY(&r, fi_recvmsg(r.ep, &m, FI_MULTI_RECV));
	}
	oob_signal(7);
	const size_t mlen[3] = { 1000, 1001, 3000 };
	const size_t moff[3] = { 0, 1000, 2008 };
	for (int i = 0; i < 3; i++) {
		snprintf(what, sizeof(what), "multi-recv #%d", i);
		rdm_expect(r.rxcq, (void *)0x7000, FI_RECV | FI_MSG, &e, what);
		EXPECT(e.len == mlen[i], "%s: len %zu", what, e.len);
		EXPECT(e.buf == buf + moff[i], "%s: buf %p, want %p", what, e.buf, (void *)(buf + moff[i]));
		EXPECT(!!(e.flags & FI_MULTI_RECV) == (i == 2), "%s: FI_MULTI_RECV %s", what,
		       (e.flags & FI_MULTI_RECV) ? "set" : "missing");
		expect_pattern(buf + moff[i], mlen[i], 70 + i, what);
	}
	logmsg("phase 7 (multi-receive) ok");
	oob_signal(8);
	oob_wait(9);
}

static void client(void)
{
	struct fi_cq_tagged_entry e;
	char what[64];

	for (int v = 0; v < 3; v++) {
		for (size_t i = 0; i < NSIZES; i++) {
			size_t len = sizes[i];
			fill_pattern(buf, len, (uint32_t)(len + v));
			oob_wait(1);
			post_send(v, (void *)(0x1100 + i), len);
			snprintf(what, sizeof(what), "send v%d %zu B", v, len);
			rdm_expect(r.txcq, (void *)(0x1100 + i), FI_SEND | FI_MSG, &e, what);
		}
	}

	oob_wait(2);
	fill_pattern(buf, 3000, 9);
	RETRY(&r, fi_senddata(r.ep, buf, 3000, desc, 0xabcd1234, r.peer, (void *)0x2100));
	rdm_expect(r.txcq, (void *)0x2100, FI_SEND | FI_MSG, &e, "senddata");
	fill_pattern(buf, 100, 77);
	RETRY(&r, fi_inject(r.ep, buf, 100, r.peer));
	memset(buf, 0, 100); /* the buffer is free again at once */
	uint64_t v8 = 42;
	RETRY(&r, fi_injectdata(r.ep, &v8, 8, 0x5eed, r.peer));
	cq_expect_empty(r.txcq, 200, "inject: no transmit completion");

	oob_wait(3);
	for (int i = 0; i < 32; i++) {
		size_t len = (i % 2) ? 20000 : 1000;
		fill_pattern(buf + (size_t)i * 32768, len, 300 + i);
		RETRY(&r, fi_send(r.ep, buf + (size_t)i * 32768, len, desc, r.peer, (void *)(0x3100L + i)));
	}
	/* eager and rendezvous sends complete at different times: any order */
	expect_set(r.txcq, 0x3100, 32, FI_SEND | FI_MSG, "in-flight send");

	/* unexpected: send, then let the server post */
	fill_pattern(buf, 5000, 41);
	RETRY(&r, fi_send(r.ep, buf, 5000, desc, r.peer, (void *)0x4100));
	fill_pattern(buf + 8192, 300000, 42);
	RETRY(&r, fi_send(r.ep, buf + 8192, 300000, desc, r.peer, (void *)0x4101));
	rdm_expect(r.txcq, (void *)0x4100, FI_SEND | FI_MSG, &e, "unexpected eager send");
	oob_signal(4);
	/* the rendezvous send completes once the server has read it */
	rdm_expect(r.txcq, (void *)0x4101, FI_SEND | FI_MSG, &e, "unexpected rendezvous send");
	oob_wait(5);

	oob_wait(6);
	fill_pattern(buf, 1000, 51);
	RETRY(&r, fi_send(r.ep, buf, 1000, desc, r.peer, (void *)0x5100));
	rdm_expect(r.txcq, (void *)0x5100, FI_SEND | FI_MSG, &e, "truncated eager send");
	fill_pattern(buf, 100000, 52);
	RETRY(&r, fi_send(r.ep, buf, 100000, desc, r.peer, (void *)0x5101));
	rdm_expect(r.txcq, (void *)0x5101, FI_SEND | FI_MSG, &e, "truncated rendezvous send (succeeds at the sender)");

	oob_wait(7);
	const size_t mlen[3] = { 1000, 1001, 3000 };
	for (int i = 0; i < 3; i++) {
		fill_pattern(buf + (size_t)i * 4096, mlen[i], 70 + i);
		RETRY(&r, fi_send(r.ep, buf + (size_t)i * 4096, mlen[i], desc, r.peer, (void *)(0x7100L + i)));
		rdm_expect(r.txcq, (void *)(0x7100L + i), FI_SEND | FI_MSG, &e, "multi-recv send");
	}
	oob_wait(8);
	oob_signal(9);
}

int main(void)
{
	bool srv = test_start("rdm_sendrecv");
	rdm_open(&r, FI_MSG | FI_MULTI_RECV | FI_SOURCE);
	rdm_exchange(&r, true);
	buf = alloc_buf(MAXSZ + 65536);
	mr = rdm_mr_reg(&r, buf, MAXSZ + 65536, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client();
	rdm_test_end(srv, &r, mr, buf);
}
