/*
 * rdm_multirecv: FI_MULTI_RECV receive buffers on FI_EP_RDM.
 *
 *  - FI_OPT_MIN_MULTI_RECV: a default is reported; fi_setopt changes it and
 *    fi_getopt reads the new value back; it applies to buffers posted after;
 *  - buffer M1 (16 KiB, minimum 2048) and M2 (32 KiB) posted with
 *    fi_recvmsg(FI_MULTI_RECV); nine messages of distinct lengths (1000, 1, 3000,
 *    0, 5000, 4999, then 3001 which is more than M1 has left, 500, 20000 =
 *    rendezvous) sent back to back: the completions' buf pointers increase
 *    inside each buffer, messages never overlap, every byte is exact, eager
 *    messages complete in the order sent;
 *  - the message larger than the space left: fi_msg(3) does not say what
 *    happens; accepted are (a) truncation into M1 (FI_ETRUNC error entry with
 *    buf/len/olen, the bytes that fit exact) or (b) M1 is released and the
 *    message lands whole in M2. rsverbs documents (a), with 8-byte aligned
 *    placement (docs/rdm-protocol.md), which is then checked exactly;
 *  - release: exactly one completion per buffer carries FI_MULTI_RECV, either
 *    on its last message or on a separate entry without FI_RECV, and nothing
 *    completes on the buffer after it;
 *  - a buffer posted after raising the minimum to 8000 is released after its
 *    first 3000-byte message, and the next message goes to the next receive;
 *  - fi_cancel of the partly used M2 and of an unused multi-receive buffer:
 *    FI_ECANCELED, and they take no more messages.
 */
#include "rdm_common.h"

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;
static bool rsverbs;

static const size_t mlen[] = { 1000, 1, 3000, 0, 5000, 4999, 3001, 500, 20000 };
#define NM (sizeof(mlen) / sizeof(mlen[0]))
#define M1 ((void *)0x1001)
#define M2 ((void *)0x1002)
#define M3 ((void *)0x1003)
#define R4 ((void *)0x1004)
#define M5 ((void *)0x1005)
#define M1SZ 16384
#define M2SZ 32768

struct ev {
	bool ok;
	int err;
	void *ctx;
	uint64_t flags;
	uint8_t *buf;
	size_t len, olen;
};

static struct ev next_ev(const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t src;
	struct ev v;
	memset(&v, 0, sizeof(v));
	if (rdm_read_from(r.rxcq, &e, &src, &err, WAIT_MS, what)) {
		v.ok = true;
		v.ctx = e.op_context;
		v.flags = e.flags;
		v.buf = e.buf;
		v.len = e.len;
	} else {
		v.err = err.err;
		v.ctx = err.op_context;
		v.flags = err.flags;
		v.buf = err.buf;
		v.len = err.len;
		v.olen = err.olen;
	}
	char fb[256];
	logmsg("%s: %s ctx %p flags %s buf %+ld len %zu olen %zu", what, v.ok ? "ok" : fi_strerror(v.err), v.ctx,
	       flags_str(v.flags, fb, sizeof(fb)), v.buf ? (long)(v.buf - buf) : -1L, v.len, v.olen);
	return v;
}

static void post_multi(void *b, size_t len, void *ctx)
{
	struct iovec iov = { b, len };
	struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = ctx };
	RETRY(&r, fi_recvmsg(r.ep, &m, FI_MULTI_RECV));
}

static bool is_release_only(const struct ev *v)
{
	return v->ok && (v->flags & FI_MULTI_RECV) && !(v->flags & FI_RECV);
}

static void server(void)
{
	size_t def = 0, glen = sizeof(def);
	CHK(fi_getopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &def, &glen));
	EXPECT(glen == sizeof(size_t) && def > 0, "default FI_OPT_MIN_MULTI_RECV %zu (optlen %zu)", def, glen);
	logmsg("default FI_OPT_MIN_MULTI_RECV %zu", def);
	size_t min = 2048;
	CHK(fi_setopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)));
	size_t got = 0;
	glen = sizeof(got);
	CHK(fi_getopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &glen));
	EXPECT(got == 2048, "FI_OPT_MIN_MULTI_RECV reads back %zu after setting 2048", got);

	uint8_t *b1 = buf, *b2 = buf + 65536;
	memset(buf, 0xee, 131072);
	post_multi(b1, M1SZ, M1);
	post_multi(b2, M2SZ, M2);
	oob_signal(1);

	/* collect until every message is accounted for */
	bool seen[NM] = { 0 };
	int last_eager = -1, ndata = 0, rel1 = 0, rel2 = 0;
	bool m1_released = false, truncated = false;
	uint8_t *end1 = b1, *end2 = b2; /* end of the last message in each buffer */
	while (ndata < (int)NM) {
		struct ev v = next_ev("phase 1");
		EXPECT(v.ctx == M1 || v.ctx == M2, "completion for op_context %p", v.ctx);
		bool in1 = v.ctx == M1;
		EXPECT(!(in1 && m1_released), "a completion on M1 after its release (flags %#llx)", (unsigned long long)v.flags);
		if (is_release_only(&v)) {
			EXPECT(v.len == 0, "separate release entry with len %zu", v.len);
			EXPECT(in1, "M2 released (32 KiB, at most ~26 KiB used, minimum 2048)");
			rel1++;
			m1_released = true;
			continue;
		}
		EXPECT(v.ok || v.err == FI_ETRUNC, "error %d (%s) on %s", v.err, fi_strerror(v.err), in1 ? "M1" : "M2");
		/* which message: by length; a truncated one by len + olen */
		int i = -1;
		for (size_t k = 0; k < NM; k++)
			if (!seen[k] && (v.ok ? mlen[k] == v.len : mlen[k] == v.len + v.olen))
				i = (int)k;
		if (i < 0 && !v.ok && v.len == mlen[6] && !seen[6]) {
			/* libfabric 1.17's rxm reports the message's full length in len */
			EXPECT_SOFT(false, "truncated completion: len %zu is the message's length, not the %zu bytes placed",
				    v.len, mlen[6] - v.olen);
			i = 6;
		}
		EXPECT(i >= 0, "completion of %zu (+%zu) bytes matches no message not yet seen", v.len, v.olen);
		seen[i] = true;
		ndata++;
		size_t placed = v.ok ? v.len : mlen[i] - v.olen;
		EXPECT(v.flags & FI_RECV, "message %d: flags %#llx", i, (unsigned long long)v.flags);
		if (mlen[i] <= 16384) {
			EXPECT(i > last_eager, "eager message %d completed after message %d", i, last_eager);
			last_eager = i;
		}
		uint8_t *base = in1 ? b1 : b2, **end = in1 ? &end1 : &end2;
		size_t sz = in1 ? M1SZ : M2SZ;
		EXPECT(v.buf >= *end && v.buf + placed <= base + sz, "message %d (%zu B) at offset %ld of %s: overlaps the "
		       "previous one (which ended at %ld) or runs past the end", i, placed, (long)(v.buf - base),
		       in1 ? "M1" : "M2", (long)(*end - base));
		*end = v.buf + placed;
		char w[64];
		snprintf(w, sizeof(w), "message %d (%zu of %zu B)", i, placed, mlen[i]);
		expect_pattern(v.buf, placed, 50 + i, w);
		if (!v.ok) {
			EXPECT(in1 && i == 6, "message %d truncated in %s", i, in1 ? "M1" : "M2");
			EXPECT(placed == (size_t)(b1 + M1SZ - v.buf), "truncated into %zu B, but M1 had %ld left", placed,
			       (long)(b1 + M1SZ - v.buf));
			truncated = true;
		}
		if (i <= 5)
			EXPECT(in1, "message %d (fits) not in M1", i);
		if (i >= 7)
			EXPECT(!in1, "message %d in M1 after the overflowing one", i);
		if (v.flags & FI_MULTI_RECV) {
			EXPECT(in1, "M2 released on message %d", i);
			rel1++;
			m1_released = true;
		}
	}
	/* a separate release entry for M1 may still follow the last message */
	if (!m1_released) {
		struct fi_cq_tagged_entry e;
		ssize_t ret = -FI_EAGAIN;
		for (uint64_t t0 = now_ms(); ret == -FI_EAGAIN && now_ms() - t0 < 3000;)
			ret = fi_cq_read(r.rxcq, &e, 1);
		if (ret == 1) {
			EXPECT(e.op_context == M1 && (e.flags & FI_MULTI_RECV) && !(e.flags & FI_RECV) && e.len == 0,
			       "expected M1's release entry (ctx %p flags %#llx len %zu)", e.op_context,
			       (unsigned long long)e.flags, e.len);
			rel1++;
		} else {
			/* soft, so the rest still runs: libfabric 1.17's rxm never releases it */
			EXPECT_SOFT(false, "M1 full (message 6 truncated into it) but never released (fi_cq_read %zd)", ret);
			CHK(fi_cancel(&r.ep->fid, M1));
			struct fi_cq_err_entry err = rdm_expect_err(r.rxcq, FI_ECANCELED, "cancel of the unreleased M1");
			EXPECT(err.op_context == M1, "cancel: op_context %p", err.op_context);
			rel1 = 1;
		}
	}
	EXPECT(rel1 == 1 && rel2 == 0, "M1 released %d times", rel1);
	logmsg("phase 1: message 6 %s", truncated ? "truncated into M1 (FI_ETRUNC)" : "went whole into M2");
	if (rsverbs) {
		/* docs/rdm-protocol.md: 8-byte aligned placement, truncation */
		EXPECT(truncated, "rsverbs documents truncation");
		EXPECT(end1 == b1 + M1SZ, "M1 filled up to %ld", (long)(end1 - b1));
		EXPECT(end2 == b2 + 504 + 20000, "M2: message 8 ends at %ld, want 20504", (long)(end2 - b2));
	}
	cq_expect_empty(r.rxcq, 200, "phase 1: nothing more");
	oob_wait(2);

	/* 2. cancel the partly used M2 (it must not take the next message); then a
	 * higher minimum, which applies to buffers posted after */
	CHK(fi_cancel(&r.ep->fid, M2));
	struct fi_cq_err_entry cerr = rdm_expect_err(r.rxcq, FI_ECANCELED, "cancel of the partly used M2");
	EXPECT(cerr.op_context == M2, "cancel of M2: op_context %p", cerr.op_context);
	cq_expect_empty(r.rxcq, 200, "nothing more for M2 after its cancel");
	min = 8000;
	CHK(fi_setopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)));
	glen = sizeof(got);
	CHK(fi_getopt(&r.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &glen));
	EXPECT(got == 8000, "FI_OPT_MIN_MULTI_RECV reads back %zu", got);
	uint8_t *b3 = buf + 16384 * 8, *b4 = b3 + 16384;
	post_multi(b3, 10000, M3);
	RETRY(&r, fi_recv(r.ep, b4, 4096, desc, FI_ADDR_UNSPEC, R4));
	oob_signal(3);
	struct ev v = next_ev("phase 2 first");
	EXPECT(v.ok && v.ctx == M3 && v.len == 3000 && v.buf == b3 && (v.flags & FI_RECV), "3000 B into M3 at 0");
	expect_pattern(b3, 3000, 60, "M3 message");
	bool rel3 = v.flags & FI_MULTI_RECV;
	v = next_ev("phase 2 second");
	if (!rel3) {
		EXPECT(v.ctx == M3 && is_release_only(&v), "M3 (10000 B, 7000 free < 8000) not released");
		v = next_ev("phase 2 second");
	}
	EXPECT(v.ok && v.ctx == R4 && v.len == 100, "the next message did not go to the next receive (ctx %p len %zu)",
	       v.ctx, v.len);
	expect_pattern(b4, 100, 61, "R4 message");
	logmsg("phase 2 (FI_OPT_MIN_MULTI_RECV 8000 releases after 3000 of 10000 B) ok");

	/* 3. cancel a fresh multi-receive buffer */
	uint8_t *b5 = buf + 16384 * 10;
	post_multi(b5, 8192, M5);
	CHK(fi_cancel(&r.ep->fid, M5));
	v = next_ev("cancel");
	EXPECT(!v.ok && v.err == FI_ECANCELED && v.ctx == M5, "cancel of M5: ctx %p err %d", v.ctx, v.err);
	cq_expect_empty(r.rxcq, 200, "nothing after the cancel");
	/* the canceled buffers are gone: the next message goes to a new receive */
	RETRY(&r, fi_recv(r.ep, b4, 4096, desc, FI_ADDR_UNSPEC, (void *)0x1006));
	oob_signal(4);
	v = next_ev("after cancel");
	EXPECT(v.ok && v.ctx == (void *)0x1006 && v.len == 200, "after cancel: ctx %p len %zu", v.ctx, v.len);
	expect_pattern(b4, 200, 62, "after cancel");
	logmsg("phase 3 (cancel) ok");
	oob_wait(5);
}

static void client(void)
{
	oob_wait(1);
	size_t off = 0;
	for (size_t i = 0; i < NM; i++) {
		fill_pattern(buf + off, mlen[i], 50 + (uint32_t)i);
		RETRY(&r, fi_send(r.ep, buf + off, mlen[i], desc, r.peer, (void *)(0x2000 + i)));
		off += mlen[i] + 64;
	}
	for (size_t i = 0; i < NM; i++) {
		struct fi_cq_tagged_entry e;
		rdm_next(r.txcq, &e, "send");
	}
	oob_signal(2);
	oob_wait(3);
	fill_pattern(buf, 3000, 60);
	fill_pattern(buf + 4096, 100, 61);
	RETRY(&r, fi_send(r.ep, buf, 3000, desc, r.peer, (void *)0x2100));
	RETRY(&r, fi_send(r.ep, buf + 4096, 100, desc, r.peer, (void *)0x2101));
	rdm_expect(r.txcq, (void *)0x2100, FI_SEND, NULL, "send 3000");
	rdm_expect(r.txcq, (void *)0x2101, FI_SEND, NULL, "send 100");
	oob_wait(4);
	fill_pattern(buf, 200, 62);
	RETRY(&r, fi_send(r.ep, buf, 200, desc, r.peer, (void *)0x2200));
	rdm_expect(r.txcq, (void *)0x2200, FI_SEND, NULL, "send 200");
	oob_signal(5);
}

int main(void)
{
	bool srv = test_start("rdm_multirecv");
	rdm_open(&r, FI_MSG | FI_MULTI_RECV | FI_SOURCE);
	rsverbs = !strcmp(r.info->fabric_attr->prov_name, "verbs") &&
		  FI_MAJOR(r.info->fabric_attr->prov_version) >= 1000;
	rdm_exchange(&r, true);
	buf = alloc_buf(1 << 20);
	mr = rdm_mr_reg(&r, buf, 1 << 20, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv)
		server();
	else
		client();
	rdm_test_end(srv, &r, mr, buf);
}
