/*
 * rdm_hostile: a hostile raw-verbs peer against an rsverbs RDM endpoint.
 *
 * LIBS: -libverbs -lrdmacm   (tests/c/build.sh links what this line names)
 *
 * The parent is the victim: an rsverbs RDM endpoint ("ep1") with guarded
 * receive buffers, plus a second, well-behaved rsverbs RDM endpoint ("ep2",
 * the friend) that talks to ep1 before and after every attack, to show that
 * other peers carry on.  The child is the attacker: it speaks the RDM wire
 * protocol (docs/rdm-protocol.md) by hand over librdmacm/libibverbs, connects
 * with a valid HELLO and then:
 *   1  sends malformed messages (short, bad version/op/flags, reserved fields,
 *      length mismatches, bad segment lists), FIN/NACK for unknown ids, then
 *      a valid EAGER, which must be the first thing ep1 receives;
 *   2  grants bogus credits (65535), then a valid EAGER;
 *   3  sends an EAGER larger than the posted receive -> FI_ETRUNC, guards intact;
 *   4  sends an RTS larger than the posted receive -> ep1 reads only what fits,
 *      FI_ETRUNC, the FIN it sends back says how much it read;
 *   5  sends an RTS whose segment runs past its registered memory -> FI_EIO at
 *      ep1, the connection is closed (the attacker sees it go);
 *   6  (new connection) an RTS with a wrong rkey -> the same;
 *   7  (new connection) an EAGER larger than ep1's bounce buffers -> the
 *      connection is closed, no receive of ep1 is touched;
 *   8  (new connection) RDMA WRITE into ep1's receive buffer, whose key and
 *      address it is told (registered FI_RECV only, no remote access) -> the
 *      write fails at the attacker, the buffer is untouched.
 * After each step the parent checks the guard bytes around its receive
 * buffers and runs the friend exchange (eager and rendezvous) ep2 -> ep1.
 */
#include "rdm_common.h"

#include <errno.h>
#include <poll.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define GUARD 4096
#define GUARD_BYTE 0xAB
#define RBUF 65536 /* user receive area between the guards */
#define EAGER_SIZE 16384 /* rsverbs' default FI_RSVERBS_EAGER_SIZE */
#define HDR 40

/* ---- wire format (docs/rdm-protocol.md) -------------------------------- */

/* The RDM wire protocol version this attacker speaks (docs/rdm-protocol.md). */
#define PROTO_VERSION 4
enum { OP_EAGER = 1, OP_RTS = 2, OP_FIN = 3, OP_NACK = 4, OP_CREDIT = 5 };

static void put16(uint8_t *b, uint16_t v) { b[0] = v; b[1] = v >> 8; }
static void put32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = v >> (8 * i); }
static void put64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = v >> (8 * i); }
static uint16_t get16(const uint8_t *b) { return b[0] | (uint16_t)b[1] << 8; }
static uint64_t get64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static void hdr(uint8_t *b, uint8_t op, uint16_t flags, uint16_t credits, uint16_t aux, uint64_t tag, uint64_t data,
		uint64_t msg_id, uint64_t len)
{
	memset(b, 0, HDR);
	b[0] = PROTO_VERSION;
	b[1] = op;
	put16(b + 2, flags);
	put16(b + 4, credits);
	put16(b + 6, aux);
	put64(b + 8, tag);
	put64(b + 16, data);
	put64(b + 24, msg_id);
	put64(b + 32, len);
}

static void seg(uint8_t *b, uint64_t addr, uint64_t len, uint32_t rkey)
{
	put64(b, addr);
	put64(b + 8, len);
	put32(b + 16, rkey);
	put32(b + 20, 0);
}

/* ---- the attacker (child) ------------------------------------------------ */

#define A_RECVS 32
#define A_RSLOT 512
#define A_SSLOT (EAGER_SIZE + HDR + 4096)
#define A_SRC (256 * 1024) /* rendezvous source buffer */

struct atk {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *rmr, *smr, *srcmr;
	uint8_t *rbuf, *sbuf, *src;
	uint16_t victim_bufs;
	uint64_t msg_id;
	int fins; /* FIN messages seen */
	uint64_t last_fin_id, last_fin_len;
	int nacks;
	bool qp_broken;
};

static struct sockaddr_in victim;

static struct rdma_cm_event *atk_event(struct atk *a, int timeout_ms)
{
	struct pollfd p = {.fd = a->ch->fd, .events = POLLIN};
	int r = poll(&p, 1, timeout_ms);
	if (r <= 0)
		return NULL;
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(a->ch, &ev))
		fail("rdma_get_cm_event: %s", strerror(errno));
	return ev;
}

static void atk_expect_event(struct atk *a, enum rdma_cm_event_type want, const char *what)
{
	struct rdma_cm_event *ev = atk_event(a, WAIT_MS);
	if (!ev)
		fail("%s: no rdma-cm event within %d ms", what, WAIT_MS);
	if (ev->event != want)
		fail("%s: rdma-cm event %s (status %d), want %s", what, rdma_event_str(ev->event), ev->status,
		     rdma_event_str(want));
	rdma_ack_cm_event(ev);
}

static void atk_post_recv(struct atk *a, int i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(a->rbuf + i * A_RSLOT), .length = A_RSLOT, .lkey = a->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(a->id->qp, &wr, &bad))
		fail("ibv_post_recv: %s", strerror(errno));
}

/* Handle one receive completion: parse what ep1 sent us (CREDIT, FIN, NACK). */
static void atk_on_recv(struct atk *a, struct ibv_wc *wc)
{
	const uint8_t *m = a->rbuf + wc->wr_id * A_RSLOT;
	if (wc->byte_len >= HDR && m[0] == PROTO_VERSION) {
		if (m[1] == OP_FIN) {
			a->fins++;
			a->last_fin_id = get64(m + 24);
			a->last_fin_len = get64(m + 32);
			logmsg("victim sent FIN msg_id %llu len %llu", (unsigned long long)a->last_fin_id,
			       (unsigned long long)a->last_fin_len);
		} else if (m[1] == OP_NACK) {
			a->nacks++;
			logmsg("victim sent NACK msg_id %llu err %u", (unsigned long long)get64(m + 24), get16(m + 6));
		}
	}
	atk_post_recv(a, (int)wc->wr_id);
}

/* Poll the CQ for up to ms; returns the send completion status seen (or -1). */
static int atk_poll(struct atk *a, int ms, bool until_send)
{
	uint64_t t0 = now_ms();
	do {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(a->cq, 8, wc);
		if (n < 0)
			fail("ibv_poll_cq failed");
		int send_status = -1;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				/* The opcode of a completion in error is undefined: our
				 * only send has wr_id UINT64_MAX. */
				if (!a->qp_broken)
					logmsg("attacker: %s completion: %s", wc[i].wr_id == UINT64_MAX ? "send" : "recv",
					       ibv_wc_status_str(wc[i].status));
				a->qp_broken = true;
				if (wc[i].wr_id == UINT64_MAX)
					send_status = wc[i].status;
				continue;
			}
			if (wc[i].opcode & IBV_WC_RECV)
				atk_on_recv(a, &wc[i]);
			else
				send_status = IBV_WC_SUCCESS;
		}
		if (until_send && send_status >= 0)
			return send_status;
		if (!n)
			usleep(200);
	} while (now_ms() - t0 < (uint64_t)ms);
	return -1;
}

/* Send len bytes of the send buffer; waits for the send completion (status). */
static int atk_send(struct atk *a, size_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)a->sbuf, .length = (uint32_t)len, .lkey = a->smr->lkey};
	struct ibv_send_wr wr = {.wr_id = UINT64_MAX, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	if (ibv_post_send(a->id->qp, &wr, &bad))
		fail("ibv_post_send: %s", strerror(errno));
	int st = atk_poll(a, WAIT_MS, true);
	if (st < 0)
		fail("attacker: no send completion within %d ms", WAIT_MS);
	return st;
}

static void atk_send_ok(struct atk *a, size_t len, const char *what)
{
	int st = atk_send(a, len);
	if (st != IBV_WC_SUCCESS)
		fail("attacker: send of %s failed: %s", what, ibv_wc_status_str(st));
}

/*
 * Send a message whose purpose is to make the victim close the connection.
 * The victim's RDMA READ that fails at our responder puts our QP in error,
 * and rxe may do so before it has processed the ACK of this very SEND: the
 * send then completes as flushed, although the victim received it (the
 * parent checks that it did: FI_EIO at ep1).  Any other failure is one.
 */
static void atk_send_provoking(struct atk *a, size_t len, const char *what)
{
	int st = atk_send(a, len);
	if (st == IBV_WC_WR_FLUSH_ERR)
		logmsg("%s: our send was flushed by the close it provoked", what);
	else if (st != IBV_WC_SUCCESS)
		fail("attacker: send of %s failed: %s", what, ibv_wc_status_str(st));
}

static void atk_connect(struct atk *a)
{
	memset(a, 0, sizeof(*a));
	a->ch = rdma_create_event_channel();
	if (!a->ch)
		fail("rdma_create_event_channel: %s", strerror(errno));
	if (rdma_create_id(a->ch, &a->id, NULL, RDMA_PS_TCP))
		fail("rdma_create_id: %s", strerror(errno));
	if (rdma_resolve_addr(a->id, NULL, (struct sockaddr *)&victim, 2000))
		fail("rdma_resolve_addr: %s", strerror(errno));
	atk_expect_event(a, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve addr");
	if (rdma_resolve_route(a->id, 2000))
		fail("rdma_resolve_route: %s", strerror(errno));
	atk_expect_event(a, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route");

	a->pd = ibv_alloc_pd(a->id->verbs);
	a->cq = ibv_create_cq(a->id->verbs, 256, NULL, NULL, 0);
	if (!a->pd || !a->cq)
		fail("ibv_alloc_pd/ibv_create_cq failed");
	struct ibv_qp_init_attr qa = {
		.send_cq = a->cq,
		.recv_cq = a->cq,
		.cap = {.max_send_wr = 64, .max_recv_wr = A_RECVS, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	if (rdma_create_qp(a->id, a->pd, &qa))
		fail("rdma_create_qp: %s", strerror(errno));
	a->rbuf = alloc_buf(A_RECVS * A_RSLOT);
	a->sbuf = alloc_buf(A_SSLOT);
	a->src = alloc_buf(A_SRC);
	a->rmr = ibv_reg_mr(a->pd, a->rbuf, A_RECVS * A_RSLOT, IBV_ACCESS_LOCAL_WRITE);
	a->smr = ibv_reg_mr(a->pd, a->sbuf, A_SSLOT, IBV_ACCESS_LOCAL_WRITE);
	a->srcmr = ibv_reg_mr(a->pd, a->src, A_SRC, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!a->rmr || !a->smr || !a->srcmr)
		fail("ibv_reg_mr failed: %s", strerror(errno));
	for (int i = 0; i < A_RECVS; i++)
		atk_post_recv(a, i);

	/* HELLO (protocol version 4): version, name_len, grant (credits we give
	 * the victim), max_credits (the most it may hold), incarnation (non-zero),
	 * max_eager (the largest EAGER payload our receive slots take), name = a
	 * sockaddr_in of ours (nobody listens there: the victim never needs to
	 * connect back). */
	uint8_t hello[18 + sizeof(struct sockaddr_in)];
	struct sockaddr_in me = *(struct sockaddr_in *)rdma_get_local_addr(a->id);
	me.sin_port = htons(9);
	hello[0] = PROTO_VERSION;
	hello[1] = sizeof(me);
	put16(hello + 2, A_RECVS);
	put16(hello + 4, A_RECVS);
	put64(hello + 6, 0x0123456789abcdefull ^ (uint64_t)getpid());
	put32(hello + 14, A_RSLOT - HDR);
	memcpy(hello + 18, &me, sizeof(me));
	struct rdma_conn_param cp = {.private_data = hello, .private_data_len = sizeof(hello),
				     .responder_resources = 4, .initiator_depth = 4, .retry_count = 7,
				     .rnr_retry_count = 7};
	if (rdma_connect(a->id, &cp))
		fail("rdma_connect: %s", strerror(errno));
	struct rdma_cm_event *ev = atk_event(a, WAIT_MS);
	if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED)
		fail("connect: %s (status %d)", ev ? rdma_event_str(ev->event) : "no event", ev ? ev->status : 0);
	const uint8_t *pd = ev->param.conn.private_data;
	if (!pd || ev->param.conn.private_data_len < 18 || pd[0] != PROTO_VERSION || pd[1] != 0)
		fail("the victim's accept carries no valid HELLO");
	/* version 4: the largest EAGER payload the victim takes (its eager size) */
	uint32_t vmax = pd[14] | (uint32_t)pd[15] << 8 | (uint32_t)pd[16] << 16 | (uint32_t)pd[17] << 24;
	if (vmax != EAGER_SIZE)
		fail("the victim's HELLO advertises max_eager %u, want %u", vmax, EAGER_SIZE);
	a->victim_bufs = get16(pd + 2); /* its grant */
	rdma_ack_cm_event(ev);
	logmsg("attacker connected; victim posts %u buffers for us", a->victim_bufs);
	a->msg_id = 1;
}

/* Wait until the victim closes the connection (DISCONNECTED, or our QP in error). */
static void atk_expect_closed(struct atk *a, const char *what)
{
	uint64_t t0 = now_ms();
	while (now_ms() - t0 < WAIT_MS) {
		atk_poll(a, 50, false);
		struct rdma_cm_event *ev = atk_event(a, 50);
		if (ev) {
			enum rdma_cm_event_type t = ev->event;
			rdma_ack_cm_event(ev);
			if (t == RDMA_CM_EVENT_DISCONNECTED) {
				logmsg("%s: the victim closed the connection (DISCONNECTED after %llu ms)", what,
				       (unsigned long long)(now_ms() - t0));
				return;
			}
			logmsg("%s: rdma-cm event %s", what, rdma_event_str(t));
		}
	}
	fail("%s: the victim did not close the connection within %d ms (qp %s)", what, WAIT_MS,
	     a->qp_broken ? "in error" : "fine");
}

static void atk_close(struct atk *a)
{
	rdma_disconnect(a->id);
	rdma_destroy_qp(a->id);
	ibv_dereg_mr(a->rmr);
	ibv_dereg_mr(a->smr);
	ibv_dereg_mr(a->srcmr);
	ibv_destroy_cq(a->cq);
	ibv_dealloc_pd(a->pd);
	rdma_destroy_id(a->id);
	rdma_destroy_event_channel(a->ch);
	free(a->rbuf);
	free(a->sbuf);
	free(a->src);
}

static void eager_msg(struct atk *a, uint16_t credits, size_t len, uint32_t seed)
{
	hdr(a->sbuf, OP_EAGER, 0, credits, 0, 0, 0, a->msg_id++, len);
	fill_pattern(a->sbuf + HDR, len, seed);
}


static void garbage(struct atk *a)
{
	uint8_t *b = a->sbuf;
	/* short */
	memset(b, 1, 10);
	atk_send_ok(a, 10, "short");
	/* bad version */
	eager_msg(a, 0, 8, 9);
	b[0] = PROTO_VERSION - 1; /* the previous version */
	atk_send_ok(a, HDR + 8, "bad version");
	/* unknown ops */
	eager_msg(a, 0, 8, 9);
	b[1] = 0;
	atk_send_ok(a, HDR + 8, "op 0");
	b[1] = 77;
	atk_send_ok(a, HDR + 8, "op 77");
	/* unknown flag */
	eager_msg(a, 0, 8, 9);
	put16(b + 2, 0x80);
	atk_send_ok(a, HDR + 8, "bad flags");
	/* tag without F_TAGGED */
	eager_msg(a, 0, 8, 9);
	put64(b + 8, 5);
	atk_send_ok(a, HDR + 8, "tag without flag");
	/* eager length says more than arrived, then less */
	eager_msg(a, 0, 8, 9);
	put64(b + 32, 4000);
	atk_send_ok(a, HDR + 8, "eager len > arrived");
	put64(b + 32, 2);
	atk_send_ok(a, HDR + 8, "eager len < arrived");
	put64(b + 32, UINT64_MAX);
	atk_send_ok(a, HDR + 8, "eager len 2^64-1");
	/* RTS: 0 segments, 17 segments, count > arrived, zero-length segment,
	 * wrapping segment, sum != len, reserved bytes, len > 2^40 */
	hdr(b, OP_RTS, 0, 0, 0, 0, 0, 100, 4096);
	atk_send_ok(a, HDR, "rts 0 segs");
	hdr(b, OP_RTS, 0, 0, 17, 0, 0, 101, 17 * 10);
	for (int i = 0; i < 17; i++)
		seg(b + HDR + 24 * i, (uintptr_t)a->src, 10, a->srcmr->rkey);
	atk_send_ok(a, HDR + 17 * 24, "rts 17 segs");
	hdr(b, OP_RTS, 0, 0, 3, 0, 0, 102, 30);
	seg(b + HDR, (uintptr_t)a->src, 10, a->srcmr->rkey);
	atk_send_ok(a, HDR + 24, "rts count > arrived");
	hdr(b, OP_RTS, 0, 0, 1, 0, 0, 103, 0);
	seg(b + HDR, (uintptr_t)a->src, 0, a->srcmr->rkey);
	atk_send_ok(a, HDR + 24, "rts zero-length seg");
	hdr(b, OP_RTS, 0, 0, 1, 0, 0, 104, 4096);
	seg(b + HDR, UINT64_MAX - 100, 4096, a->srcmr->rkey);
	atk_send_ok(a, HDR + 24, "rts wrapping seg");
	hdr(b, OP_RTS, 0, 0, 2, 0, 0, 105, 4096);
	seg(b + HDR, (uintptr_t)a->src, 4096, a->srcmr->rkey);
	seg(b + HDR + 24, (uintptr_t)a->src, 4096, a->srcmr->rkey);
	atk_send_ok(a, HDR + 48, "rts sum != len");
	hdr(b, OP_RTS, 0, 0, 1, 0, 0, 106, 4096);
	seg(b + HDR, (uintptr_t)a->src, 4096, a->srcmr->rkey);
	b[HDR + 23] = 1;
	atk_send_ok(a, HDR + 24, "rts reserved");
	hdr(b, OP_RTS, 0, 0, 1, 0, 0, 107, (1ULL << 40) + 1);
	seg(b + HDR, 0, (1ULL << 40) + 1, a->srcmr->rkey);
	atk_send_ok(a, HDR + 24, "rts len > 2^40");
	/* control messages with junk */
	hdr(b, OP_CREDIT, 0, 1, 0, 0, 0, 5, 0);
	atk_send_ok(a, HDR, "credit with msg_id");
	hdr(b, OP_FIN, 1, 0, 0, 0, 0, 1, 0);
	atk_send_ok(a, HDR, "fin with flags");
	hdr(b, OP_NACK, 0, 0, 0, 0, 0, 1, 0);
	atk_send_ok(a, HDR, "nack without code");
	hdr(b, OP_FIN, 0, 0, 0, 0, 0, 1, 8);
	atk_send_ok(a, HDR + 8, "fin with a body");
	/* well-formed, but for rendezvous sends that do not exist */
	hdr(b, OP_FIN, 0, 0, 0, 0, 0, 424242, 10);
	atk_send_ok(a, HDR, "fin unknown id");
	hdr(b, OP_NACK, 0, 0, 5, 0, 0, 424243, 0);
	atk_send_ok(a, HDR, "nack unknown id");
}

static void attacker(void)
{
	struct atk a;
	struct rma_info rinfo;
	uint8_t step;

	oob_recv(&victim, sizeof(victim));
	atk_connect(&a);

	/* 1: malformed messages, then one valid EAGER */
	oob_wait(1);
	garbage(&a);
	eager_msg(&a, 0, 100, 1);
	atk_send_ok(&a, HDR + 100, "valid eager after garbage");
	oob_signal(1);

	/* 2: bogus credits */
	oob_wait(2);
	hdr(a.sbuf, OP_CREDIT, 0, 65535, 0, 0, 0, 0, 0);
	atk_send_ok(&a, HDR, "credit 65535");
	eager_msg(&a, 65535, 50, 2);
	atk_send_ok(&a, HDR + 50, "eager with 65535 credits");
	oob_signal(2);

	/* 3: EAGER of 1000 bytes into a 100-byte receive */
	oob_wait(3);
	eager_msg(&a, 0, 1000, 3);
	atk_send_ok(&a, HDR + 1000, "eager 1000");
	oob_signal(3);

	/* 4: RTS of 64 KiB into a 4 KiB receive: the FIN must say 4096 */
	oob_wait(4);
	fill_pattern(a.src, 65536, 4);
	uint64_t id4 = a.msg_id++;
	hdr(a.sbuf, OP_RTS, 0, 0, 1, 0, 0, id4, 65536);
	seg(a.sbuf + HDR, (uintptr_t)a.src, 65536, a.srcmr->rkey);
	atk_send_ok(&a, HDR + 24, "rts 64k");
	uint64_t t0 = now_ms();
	while (a.fins == 0 && now_ms() - t0 < WAIT_MS)
		atk_poll(&a, 50, false);
	EXPECT(a.fins == 1, "no FIN for the truncated rendezvous");
	EXPECT(a.last_fin_id == id4 && a.last_fin_len == 4096, "FIN msg_id %llu len %llu, want %llu 4096",
	       (unsigned long long)a.last_fin_id, (unsigned long long)a.last_fin_len, (unsigned long long)id4);
	oob_signal(4);

	/* 5: RTS whose segment runs past the end of our registered buffer */
	oob_wait(5);
	hdr(a.sbuf, OP_RTS, 0, 0, 1, 0, 0, a.msg_id++, 4096);
	seg(a.sbuf + HDR, (uintptr_t)a.src + A_SRC - 100, 4096, a.srcmr->rkey);
	atk_send_provoking(&a, HDR + 24, "rts out of bounds");
	atk_expect_closed(&a, "rts out of bounds");
	atk_close(&a);
	oob_signal(5);

	/* 6: wrong rkey, on a new connection */
	oob_wait(6);
	atk_connect(&a);
	hdr(a.sbuf, OP_RTS, 0, 0, 1, 0, 0, a.msg_id++, 4096);
	seg(a.sbuf + HDR, (uintptr_t)a.src, 4096, a.srcmr->rkey ^ 0x5a5a00);
	atk_send_provoking(&a, HDR + 24, "rts wrong rkey");
	atk_expect_closed(&a, "rts wrong rkey");
	atk_close(&a);
	oob_signal(6);

	/* 7: an EAGER larger than the victim's bounce buffers */
	oob_wait(7);
	atk_connect(&a);
	eager_msg(&a, 0, EAGER_SIZE + 1000, 7);
	int st = atk_send(&a, HDR + EAGER_SIZE + 1000);
	logmsg("oversized eager: send completion %s", ibv_wc_status_str(st));
	atk_expect_closed(&a, "eager larger than the bounce buffer");
	atk_close(&a);
	oob_signal(7);

	/* 8: RDMA WRITE into the victim's receive buffer (no remote access) */
	oob_recv(&rinfo, sizeof(rinfo));
	atk_connect(&a);
	memset(a.sbuf, 0x66, 256);
	struct ibv_sge sge = {.addr = (uintptr_t)a.sbuf, .length = 256, .lkey = a.smr->lkey};
	struct ibv_send_wr wr = {.wr_id = UINT64_MAX, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = rinfo.addr;
	wr.wr.rdma.rkey = (uint32_t)rinfo.key;
	if (ibv_post_send(a.id->qp, &wr, &bad))
		fail("ibv_post_send(RDMA_WRITE): %s", strerror(errno));
	st = atk_poll(&a, WAIT_MS, true);
	logmsg("RDMA WRITE into the victim's receive buffer: %s", st < 0 ? "no completion" : ibv_wc_status_str(st));
	EXPECT(st >= 0 && st != IBV_WC_SUCCESS, "an RDMA WRITE to memory registered without remote access succeeded");
	atk_close(&a);
	step = 8;
	oob_signal(step);
	child_done();
}

/* ---- the victim (parent) -------------------------------------------------- */

static struct rctx r1, r2; /* victim, friend */
static uint8_t *area;      /* [GUARD][RBUF][GUARD] */
static struct fid_mr *area_mr;
static uint8_t *fbuf;      /* friend's send buffer */
static struct fid_mr *fbuf_mr;

static void check_guards(const char *what)
{
	for (size_t i = 0; i < GUARD; i++) {
		EXPECT(area[i] == GUARD_BYTE, "%s: guard byte %zu before the receive buffer overwritten (%#x)", what,
		       GUARD - i, area[i]);
		EXPECT(area[GUARD + RBUF + i] == GUARD_BYTE, "%s: guard byte %zu after the receive buffer overwritten (%#x)",
		       what, i, area[GUARD + RBUF + i]);
	}
}

static uint8_t *ubuf(void) { return area + GUARD; }

static void post_recv(size_t len, void *ctx)
{
	memset(ubuf(), 0, RBUF);
	RETRY(&r1, fi_recv(r1.ep, ubuf(), len, fi_mr_desc(area_mr), FI_ADDR_UNSPEC, ctx));
}

/* The friend sends an eager and a rendezvous message; ep1 receives both. */
static void friend_exchange(const char *when)
{
	static uint32_t seed = 1000;
	size_t sizes[2] = {1000, 60000}; /* eager, rendezvous; both fit RBUF */
	for (int i = 0; i < 2; i++) {
		struct fi_cq_tagged_entry e;
		post_recv(sizes[i], &r2);
		fill_pattern(fbuf, sizes[i], ++seed);
		RETRY(&r2, fi_send(r2.ep, fbuf, sizes[i], fi_mr_desc(fbuf_mr), r2.peer, &r1));
		fi_addr_t src = rdm_expect(r1.rxcq, &r2, FI_RECV | FI_MSG, &e, "friend's message");
		EXPECT(e.len == sizes[i], "%s: friend's message len %zu, want %zu", when, e.len, sizes[i]);
		EXPECT(src == r1.peer, "%s: friend's message from fi_addr %llu, want %llu", when, (unsigned long long)src,
		       (unsigned long long)r1.peer);
		expect_pattern(ubuf(), sizes[i], seed, "friend's message");
		rdm_expect(r2.txcq, &r1, FI_SEND | FI_MSG, NULL, "friend's send");
		check_guards(when);
	}
	logmsg("friend exchange %s: ok", when);
}

/* Both endpoints progress in the background (manual progress: the friend's
 * connection and rendezvous, the attacker's accept and reads), while the main
 * thread waits on the out-of-band channel or reads completions. */
static volatile int prog_on;
static pthread_t prog_thread;

static void *prog_fn(void *arg)
{
	(void)arg;
	while (prog_on) {
		(void)fi_cq_read(r1.txcq, NULL, 0);
		(void)fi_cq_read(r1.rxcq, NULL, 0);
		(void)fi_cq_read(r2.txcq, NULL, 0);
		(void)fi_cq_read(r2.rxcq, NULL, 0);
		usleep(200);
	}
	return NULL;
}

/* Waits for the attacker's step-done signal while the CQs progress. */
static void wait_step(uint8_t step)
{
	oob_wait(step);
}

int main(void)
{
	if (!test_start("rdm_hostile"))
		attacker();

	rdm_open(&r1, FI_MSG | FI_SOURCE);
	/* The friend: its own endpoint, AV and CQs on the same domain. */
	memset(&r2, 0, sizeof(r2));
	r2.info = r1.info;
	r2.fabric = r1.fabric;
	r2.domain = r1.domain;
	rdm_open_ep(&r2);
	int n = (int)CHK(fi_av_insert(r2.av, r1.name, 1, &r2.peer, 0, NULL));
	EXPECT(n == 1, "friend: fi_av_insert %d", n);
	n = (int)CHK(fi_av_insert(r1.av, r2.name, 1, &r1.peer, 0, NULL));
	EXPECT(n == 1, "victim: fi_av_insert %d", n);

	area = alloc_buf(GUARD + RBUF + GUARD);
	memset(area, GUARD_BYTE, GUARD + RBUF + GUARD);
	area_mr = rdm_mr_reg(&r1, ubuf(), RBUF, FI_RECV);
	fbuf = alloc_buf(RBUF);
	fbuf_mr = rdm_mr_reg(&r2, fbuf, RBUF, FI_SEND);
	memset(ubuf(), 0, RBUF);
	prog_on = 1;
	if (pthread_create(&prog_thread, NULL, prog_fn, NULL))
		fail("pthread_create failed");
	friend_exchange("before the attack");

	oob_send(r1.name, sizeof(struct sockaddr_in));
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	/* 1: garbage, then a valid 100-byte eager: the first completion is it. */
	post_recv(4096, (void *)1);
	oob_signal(1);
	wait_step(1);
	rdm_expect(r1.rxcq, (void *)1, FI_RECV | FI_MSG, &e, "valid eager after garbage");
	EXPECT(e.len == 100, "eager after garbage: len %zu", e.len);
	expect_pattern(ubuf(), 100, 1, "eager after garbage");
	cq_expect_empty(r1.rxcq, 500, "after the garbage");
	check_guards("garbage");
	logmsg("step 1: the malformed messages were dropped, the valid one delivered first");

	/* 2: bogus credits */
	post_recv(4096, (void *)2);
	oob_signal(2);
	wait_step(2);
	rdm_expect(r1.rxcq, (void *)2, FI_RECV | FI_MSG, &e, "eager with bogus credits");
	EXPECT(e.len == 50, "len %zu", e.len);
	expect_pattern(ubuf(), 50, 2, "eager with bogus credits");
	check_guards("bogus credits");
	friend_exchange("after garbage and bogus credits");

	/* 3: eager truncation */
	post_recv(100, (void *)3);
	oob_signal(3);
	wait_step(3);
	err = rdm_expect_err(r1.rxcq, FI_ETRUNC, "eager 1000 into 100");
	EXPECT(err.op_context == (void *)3 && err.len == 100 && err.olen == 900, "FI_ETRUNC entry: ctx %p len %zu olen %zu",
	       err.op_context, err.len, err.olen);
	expect_pattern(ubuf(), 100, 3, "truncated eager");
	for (size_t i = 100; i < RBUF; i++)
		EXPECT(ubuf()[i] == 0, "byte %zu past the 100-byte receive written", i);
	check_guards("eager truncation");

	/* 4: rendezvous truncation */
	post_recv(4096, (void *)4);
	oob_signal(4);
	wait_step(4);
	err = rdm_expect_err(r1.rxcq, FI_ETRUNC, "rts 64k into 4k");
	EXPECT(err.op_context == (void *)4 && err.len == 4096 && err.olen == 65536 - 4096,
	       "FI_ETRUNC entry: ctx %p len %zu olen %zu", err.op_context, err.len, err.olen);
	expect_pattern(ubuf(), 4096, 4, "truncated rendezvous");
	for (size_t i = 4096; i < RBUF; i++)
		EXPECT(ubuf()[i] == 0, "byte %zu past the 4096-byte receive written", i);
	check_guards("rendezvous truncation");
	friend_exchange("after truncation");

	/* 5, 6: rendezvous reads the attacker's memory cannot serve */
	for (uint8_t s = 5; s <= 6; s++) {
		post_recv(8192, (void *)(uintptr_t)s);
		oob_signal(s);
		wait_step(s);
		err = rdm_expect_err(r1.rxcq, FI_EIO, s == 5 ? "rts out of bounds" : "rts wrong rkey");
		EXPECT(err.op_context == (void *)(uintptr_t)s, "error entry ctx %p", err.op_context);
		check_guards(s == 5 ? "rts out of bounds" : "rts wrong rkey");
		cq_expect_empty(r1.rxcq, 300, "after the failed rendezvous");
		friend_exchange(s == 5 ? "after an out-of-bounds RTS" : "after a wrong rkey");
	}

	/* 7: eager larger than the bounce buffer: no user receive involved */
	post_recv(RBUF, (void *)7);
	oob_signal(7);
	wait_step(7);
	cq_expect_empty(r1.rxcq, 500, "after the oversized eager");
	check_guards("oversized eager");
	for (size_t i = 0; i < RBUF; i++)
		EXPECT(ubuf()[i] == 0, "oversized eager: receive byte %zu written", i);
	/* The posted receive is still there: the friend's message takes it. */
	fill_pattern(fbuf, 777, 77);
	RETRY(&r2, fi_send(r2.ep, fbuf, 777, fi_mr_desc(fbuf_mr), r2.peer, NULL));
	rdm_expect(r1.rxcq, (void *)7, FI_RECV | FI_MSG, &e, "friend's message into the receive the attack left");
	EXPECT(e.len == 777, "len %zu", e.len);
	expect_pattern(ubuf(), 777, 77, "friend after the oversized eager");
	rdm_expect(r2.txcq, NULL, FI_SEND, NULL, "friend's send");

	/* 8: tell the attacker where our receive buffer is (FI_RECV access only) */
	memset(ubuf(), 0x11, RBUF);
	struct rma_info ri = {.addr = (uintptr_t)ubuf(), .key = fi_mr_key(area_mr), .len = RBUF};
	oob_send(&ri, sizeof(ri));
	wait_step(8);
	for (size_t i = 0; i < RBUF; i++)
		EXPECT(ubuf()[i] == 0x11, "RDMA WRITE by the attacker changed byte %zu of the receive buffer", i);
	check_guards("rdma write attempt");
	memset(ubuf(), 0, RBUF);
	friend_exchange("at the end");

	prog_on = 0;
	pthread_join(prog_thread, NULL);
	CHK(fi_close(&area_mr->fid));
	CHK(fi_close(&fbuf_mr->fid));
	rdm_close_ep(&r2);
	RCLOSE(r2.av);
	rdm_close(&r1);
	free(area);
	free(fbuf);
	test_finish();
}
