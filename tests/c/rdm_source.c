/*
 * rdm_source: address vectors, FI_SOURCE and connection management of
 * FI_EP_RDM endpoints.
 *
 *  - AV calls: fi_av_insert (a bad address gives FI_ADDR_NOTAVAIL and is not
 *    counted), fi_av_insertsvc, fi_av_lookup (full and short buffer),
 *    fi_av_straddr, fi_av_remove (then lookup fails);
 *  - FI_SOURCE: a message from a peer not in the AV reports FI_ADDR_NOTAVAIL;
 *    after fi_av_insert of its address, fi_cq_readfrom reports its fi_addr,
 *    and replies to that fi_addr use the connection the peer opened;
 *  - simultaneous connects: two fresh endpoints send to each other at the
 *    same moment; both messages arrive, and traffic keeps flowing (the
 *    provider keeps one connection per pair, see docs/rdm-protocol.md);
 *  - phase 2 and 3 endpoints use CQs with a wait object and fi_cq_sread, which
 *    must also wake for connection events and incoming data (manual progress);
 *  - a message to the endpoint's own address (FI_LOCAL_COMM); after
 *    fi_av_remove of that address, sends and injects to it fail with
 *    -FI_EINVAL.
 */
#include "rdm_common.h"

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static void av_calls(void)
{
	char out[64], s[128];
	size_t olen;
	fi_addr_t fa[3];

	/* a bad address (port 0) in the middle */
	struct sockaddr_in three[3];
	memcpy(&three[0], r.peer_name, sizeof(three[0]));
	memcpy(&three[1], r.peer_name, sizeof(three[1]));
	three[1].sin_port = 0;
	memcpy(&three[2], r.name, sizeof(three[2]));
	int n = fi_av_insert(r.av, three, 3, fa, 0, NULL);
	EXPECT(n == 2, "fi_av_insert of 3 (one bad) returned %d", n);
	EXPECT(fa[0] != FI_ADDR_NOTAVAIL && fa[1] == FI_ADDR_NOTAVAIL && fa[2] != FI_ADDR_NOTAVAIL,
	       "fi_addrs %#llx %#llx %#llx", (unsigned long long)fa[0], (unsigned long long)fa[1],
	       (unsigned long long)fa[2]);
	olen = sizeof(out);
	CHK(fi_av_lookup(r.av, fa[0], out, &olen));
	EXPECT(olen == sizeof(struct sockaddr_in) && !memcmp(out, r.peer_name, olen), "fi_av_lookup: %zu bytes", olen);
	olen = 4;
	memset(out, 0, sizeof(out));
	CHK(fi_av_lookup(r.av, fa[2], out, &olen));
	EXPECT(olen == sizeof(struct sockaddr_in) && !memcmp(out, r.name, 4),
	       "fi_av_lookup with a short buffer: addrlen %zu (truncated copy expected)", olen);
	size_t slen = sizeof(s);
	const char *str = fi_av_straddr(r.av, r.name, s, &slen);
	EXPECT(str && !strncmp(str, "fi_sockaddr_in://", 17), "fi_av_straddr gave '%s'", str ? str : "(null)");
	EXPECT(slen == strlen(s) + 1, "fi_av_straddr len %zu for '%s'", slen, s);
	logmsg("straddr: %s", s);

	/* insertsvc with the numeric form of our own address */
	const struct sockaddr_in *me = (const void *)r.name;
	char host[64], svc[16];
	inet_ntop(AF_INET, &me->sin_addr, host, sizeof(host));
	snprintf(svc, sizeof(svc), "%u", ntohs(me->sin_port));
	fi_addr_t fsvc;
	n = fi_av_insertsvc(r.av, host, svc, &fsvc, 0, NULL);
	EXPECT(n == 1, "fi_av_insertsvc(%s, %s) returned %d", host, svc, n);
	olen = sizeof(out);
	CHK(fi_av_lookup(r.av, fsvc, out, &olen));
	EXPECT(!memcmp(out, r.name, sizeof(struct sockaddr_in)), "insertsvc address differs from fi_getname's");

	CHK(fi_av_remove(r.av, &fsvc, 1, 0));
	olen = sizeof(out);
	int ret = fi_av_lookup(r.av, fsvc, out, &olen);
	EXPECT(ret == -FI_EINVAL, "lookup after remove returned %d", ret);
	ret = fi_av_remove(r.av, &fsvc, 1, 0);
	EXPECT(ret == -FI_EINVAL, "second remove returned %d", ret);
	r.peer = fa[0];
}

/* Sends `len` bytes (pattern seed) to `to` and waits for the send completion. */
static void send_to(struct rctx *x, fi_addr_t to, size_t len, uint32_t seed, void *ctx)
{
	struct fi_cq_tagged_entry e;
	fill_pattern(buf, len, seed);
	RETRY(x, fi_send(x->ep, buf, len, desc, to, ctx));
	rdm_expect(x->txcq, ctx, FI_SEND | FI_MSG, &e, "send");
}

static fi_addr_t recv_from(struct rctx *x, size_t len, uint32_t seed, void *ctx, const char *what)
{
	struct fi_cq_tagged_entry e;
	uint8_t *rb = buf + 65536;
	RETRY(x, fi_recv(x->ep, rb, 65536, desc, FI_ADDR_UNSPEC, ctx));
	fi_addr_t src = rdm_expect(x->rxcq, ctx, FI_RECV | FI_MSG, &e, what);
	EXPECT(e.len == len, "%s: len %zu", what, e.len);
	expect_pattern(rb, len, seed, what);
	return src;
}

int main(void)
{
	bool srv = test_start("rdm_source");
	rdm_open(&r, FI_MSG | FI_SOURCE);
	buf = alloc_buf(1 << 20);
	mr = rdm_mr_reg(&r, buf, 1 << 20, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);

	/* 1. the server does not know the client yet */
	rdm_exchange(&r, is_child);
	if (srv) {
		fi_addr_t src = recv_from(&r, 100, 1, (void *)1, "from an unknown peer");
		EXPECT(src == FI_ADDR_NOTAVAIL, "src of an unknown peer: %#llx, want FI_ADDR_NOTAVAIL",
		       (unsigned long long)src);
		av_calls();
		/* only now may the second message come: arriving (and being taken
		 * in by the same progress call) before the insert, it would rightly
		 * report FI_ADDR_NOTAVAIL too */
		oob_signal(5);
		src = recv_from(&r, 200, 2, (void *)2, "from a known peer");
		EXPECT(src == r.peer, "src %#llx, want %#llx", (unsigned long long)src, (unsigned long long)r.peer);
		/* the reply rides on the connection the client opened */
		send_to(&r, r.peer, 300, 3, (void *)3);
		logmsg("phase 1 (FI_SOURCE, AV calls) ok");
	} else {
		send_to(&r, r.peer, 100, 1, (void *)0x11);
		oob_wait(5);
		send_to(&r, r.peer, 200, 2, (void *)0x12);
		fi_addr_t src = recv_from(&r, 300, 3, (void *)0x13, "reply");
		EXPECT(src == r.peer, "reply src %#llx", (unsigned long long)src);
	}

	/* 2. simultaneous connects between two fresh endpoints */
	rdm_close_ep(&r);
	RCLOSE(r.av);
	r.wait_obj = FI_WAIT_UNSPEC;
	rdm_open_ep(&r);
	rdm_exchange(&r, true);
	for (int round = 0; round < 3; round++) {
		uint8_t *rb = buf + 65536;
		struct fi_cq_tagged_entry e;
		RETRY(&r, fi_recv(r.ep, rb, 65536, desc, FI_ADDR_UNSPEC, (void *)0x20));
		if (srv)
			oob_signal(10);
		else
			oob_wait(10);
		fill_pattern(buf, 1000, 30 + round + (srv ? 0 : 100));
		RETRY(&r, fi_send(r.ep, buf, 1000, desc, r.peer, (void *)0x21));
		rdm_sread_expect(r.txcq, (void *)0x21, FI_SEND | FI_MSG, &e, "simultaneous send (sread)");
		rdm_sread_expect(r.rxcq, (void *)0x20, FI_RECV | FI_MSG, &e, "simultaneous receive (sread)");
		EXPECT(e.len == 1000, "simultaneous receive len %zu", e.len);
		expect_pattern(rb, 1000, 30 + round + (srv ? 100 : 0), "simultaneous receive");
		/* both sides done with this round before the next */
		oob_barrier(srv, 11, 12);
	}
	logmsg("phase 2 (simultaneous connects) ok");

	/* 3. to ourselves */
	fi_addr_t self;
	EXPECT(fi_av_insert(r.av, r.name, 1, &self, 0, NULL) == 1, "insert own address");
	send_to(&r, self, 5000, 40, (void *)0x30);
	fi_addr_t src = recv_from(&r, 5000, 40, (void *)0x31, "message to self");
	EXPECT(src == self, "self src %#llx, want %#llx", (unsigned long long)src, (unsigned long long)self);
	{
		/* rendezvous: the send completes only once our own receive has read it */
		struct fi_cq_tagged_entry e;
		RETRY(&r, fi_recv(r.ep, buf + 65536, 65536, desc, FI_ADDR_UNSPEC, (void *)0x33));
		fill_pattern(buf, 50000, 41);
		RETRY(&r, fi_send(r.ep, buf, 50000, desc, self, (void *)0x32));
		rdm_expect(r.rxcq, (void *)0x33, FI_RECV | FI_MSG, &e, "rendezvous to self");
		EXPECT(e.len == 50000, "rendezvous to self: len %zu", e.len);
		expect_pattern(buf + 65536, 50000, 41, "rendezvous to self");
		rdm_expect(r.txcq, (void *)0x32, FI_SEND | FI_MSG, &e, "rendezvous send to self");
	}
	/* a removed fi_addr is refused, right after sends to it too (the
	 * provider may keep the last address it looked up: not past a remove) */
	CHK(fi_av_remove(r.av, &self, 1, 0));
	int ret = fi_send(r.ep, buf, 10, desc, self, (void *)0x34);
	EXPECT(ret == -FI_EINVAL, "send to a removed fi_addr returned %d, want -FI_EINVAL", ret);
	ret = fi_inject(r.ep, buf, 10, self);
	EXPECT(ret == -FI_EINVAL, "inject to a removed fi_addr returned %d, want -FI_EINVAL", ret);
	logmsg("phase 3 (self) ok");

	if (srv) {
		oob_wait(13);
	} else {
		oob_signal(13);
	}
	rdm_test_end(srv, &r, mr, buf);
}
