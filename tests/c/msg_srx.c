/*
 * msg_srx: shared receive contexts of MSG endpoints (fi_srx_context(3) in
 * fi_endpoint(3)), what verbs;ofi_rxm uses with FI_OFI_RXM_USE_SRX=1.
 *
 * Server:
 *  - fi_getinfo with ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT: an info that
 *    keeps FI_SHARED_CONTEXT, domain_attr->max_ep_srx_ctx >= 1; with
 *    tx_ctx_cnt = FI_SHARED_CONTEXT: -FI_ENODATA; fi_stx_context: -FI_ENOSYS
 *    (verbs has no shared send queue);
 *  - fi_srx_context with rx_attr->size 4; 4 buffers posted to it
 *    (fi_recv, fi_recvv, fi_recvmsg), a 5th -> -FI_EAGAIN; fi_send on it ->
 *    -FI_ENOSYS;
 *  - two connections accepted, both endpoints bound to the context, each
 *    with its own receive CQ; fi_recv on such an endpoint -> -FI_EOPNOTSUPP;
 *    fi_close(srx) while bound -> -FI_EBUSY;
 *  - two rounds of 2 messages per connection (8 messages through the same 4
 *    buffers, each reposted after its completion): each message completes
 *    on the receive CQ of the connection it came on, in order, with the
 *    context of a buffer that holds exactly its bytes;
 *  - after the endpoints are closed the context closes.
 * Client: two plain MSG endpoints, one per connection.
 */
#include "common.h"

#include <stdlib.h>

#define NBUF 4
#define BUFLEN 256
#define MSGLEN 200
#define ROUNDS 2

static uint32_t seed(int conn, int round, int j)
{
	return (uint32_t)(0x1000 + conn * 100 + round * 10 + j);
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	t.hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;

	struct fi_info *h2 = fi_dupinfo(t.hints), *none = NULL;
	h2->ep_attr->rx_ctx_cnt = 0;
	h2->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	int r = fi_getinfo(t.version, NULL, NULL, 0, h2, &none);
	EXPECT(r == -FI_ENODATA, "fi_getinfo with tx_ctx_cnt FI_SHARED_CONTEXT returned %d (%s)", r, fi_strerror(-r));
	fi_freeinfo(h2);

	server_listen(&t);
	EXPECT(t.pep_info->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT, "info rx_ctx_cnt %zu",
	       t.pep_info->ep_attr->rx_ctx_cnt);
	EXPECT(t.pep_info->domain_attr->max_ep_srx_ctx >= 1, "max_ep_srx_ctx %zu",
	       t.pep_info->domain_attr->max_ep_srx_ctx);
	CHK(fi_domain(t.fabric, t.pep_info, &t.domain, NULL));

	struct fid_stx *stx = NULL;
	r = fi_stx_context(t.domain, NULL, &stx, NULL);
	EXPECT(r == -FI_ENOSYS, "fi_stx_context returned %d (%s)", r, fi_strerror(-r));

	struct fi_rx_attr ra = *t.pep_info->rx_attr;
	ra.size = NBUF;
	struct fid_ep *srx = NULL;
	CHK(fi_srx_context(t.domain, &ra, &srx, NULL));

	char *buf = alloc_buf(NBUF * BUFLEN + 64);
	struct fid_mr *mr = mr_reg(&t, buf, NBUF * BUFLEN + 64, FI_RECV | FI_SEND);
	void *desc = fi_mr_desc(mr);
	static struct fi_context ctx[NBUF];
	for (int i = 0; i < NBUF; i++) {
		char *b = buf + i * BUFLEN;
		memset(b, 0xEE, BUFLEN);
		if (i == 1) {
			struct iovec iov[2] = { { b, 100 }, { b + 100, BUFLEN - 100 } };
			void *d[2] = { desc, desc };
			CHK(fi_recvv(srx, iov, d, 2, FI_ADDR_UNSPEC, &ctx[i]));
		} else if (i == 2) {
			struct iovec iov = { b, BUFLEN };
			struct fi_msg m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .context = &ctx[i] };
			CHK(fi_recvmsg(srx, &m, 0));
		} else {
			CHK(fi_recv(srx, b, BUFLEN, desc, FI_ADDR_UNSPEC, &ctx[i]));
		}
	}
	ssize_t sr = fi_recv(srx, buf + NBUF * BUFLEN, 64, desc, FI_ADDR_UNSPEC, NULL);
	EXPECT(sr == -FI_EAGAIN, "a 5th buffer on a 4-buffer context: %zd (%s)", sr, fi_strerror((int)-sr));
	sr = fi_send(srx, buf, 8, desc, 0, NULL);
	EXPECT(sr == -FI_ENOSYS, "fi_send on a shared receive context: %zd (%s)", sr, fi_strerror((int)-sr));

	struct fid_ep *ep[2];
	struct fid_cq *rxcq[2];
	struct fi_cq_attr ca = { .size = 64, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(t.domain, &ca, &t.txcq, NULL));
	for (int k = 0; k < 2; k++) {
		struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
		CHK(fi_endpoint(t.domain, info, &ep[k], NULL));
		fi_freeinfo(info);
		CHK(fi_cq_open(t.domain, &ca, &rxcq[k], NULL));
		CHK(fi_ep_bind(ep[k], &t.eq->fid, 0));
		CHK(fi_ep_bind(ep[k], &t.txcq->fid, FI_TRANSMIT));
		CHK(fi_ep_bind(ep[k], &rxcq[k]->fid, FI_RECV));
		CHK(fi_ep_bind(ep[k], &srx->fid, 0));
		CHK(fi_enable(ep[k]));
		sr = fi_recv(ep[k], buf, BUFLEN, desc, FI_ADDR_UNSPEC, NULL);
		EXPECT(sr == -FI_EOPNOTSUPP, "fi_recv on an endpoint bound to a shared receive context: %zd (%s)", sr,
		       fi_strerror((int)-sr));
		CHK(fi_accept(ep[k], NULL, 0));
		union {
			struct fi_eq_cm_entry e;
			uint8_t raw[sizeof(struct fi_eq_cm_entry) + 64];
		} u;
		uint32_t ev = 0;
		eq_wait(&t, &ev, &u, sizeof(u), WAIT_MS);
		EXPECT(ev == FI_CONNECTED && u.e.fid == &ep[k]->fid, "connection %d: %s", k, ev_name(ev));
		logmsg("connection %d up", k);
	}
	r = fi_close(&srx->fid);
	EXPECT(r == -FI_EBUSY, "fi_close(srx) with endpoints bound: %d (%s)", r, fi_strerror(-r));

	for (int round = 0; round < ROUNDS; round++) {
		oob_signal((uint8_t)(10 + round));
		for (int k = 0; k < 2; k++) {
			for (int j = 0; j < 2; j++) {
				struct fi_cq_data_entry d;
				char what[64];
				snprintf(what, sizeof(what), "round %d, connection %d, message %d", round, k, j);
				cq_read_one(rxcq[k], &d, WAIT_MS, what);
				int i = (int)((struct fi_context *)d.op_context - ctx);
				EXPECT(i >= 0 && i < NBUF, "%s: op_context %p is none of the posted ones", what, d.op_context);
				EXPECT(d.len == MSGLEN, "%s: len %zu", what, d.len);
				EXPECT(d.flags & FI_RECV, "%s: flags %#llx", what, (unsigned long long)d.flags);
				char *b = buf + i * BUFLEN;
				expect_pattern(b, MSGLEN, seed(k, round, j), what);
				logmsg("%s: in buffer %d", what, i);
				memset(b, 0xEE, BUFLEN);
				CHK(fi_recv(srx, b, BUFLEN, desc, FI_ADDR_UNSPEC, &ctx[i]));
			}
		}
		struct fi_cq_data_entry d;
		for (int k = 0; k < 2; k++)
			EXPECT(fi_cq_read(rxcq[k], &d, 1) == -FI_EAGAIN, "round %d: connection %d has more completions", round, k);
	}
	oob_wait(99);
	for (int k = 0; k < 2; k++) {
		CHK(fi_close(&ep[k]->fid));
		CHK(fi_close(&rxcq[k]->fid));
	}
	CHK(fi_close(&srx->fid));
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	uint32_t l32;
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= 128, "address length %u", l32);
	t.hints->dest_addr = malloc(l32);
	oob_recv(t.hints->dest_addr, l32);
	t.hints->dest_addrlen = l32;
	CHK(fi_getinfo(t.version, NULL, NULL, 0, t.hints, &t.info));
	struct fi_eq_attr ea = { .size = 64, .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_fabric(t.info->fabric_attr, &t.fabric, NULL));
	CHK(fi_eq_open(t.fabric, &ea, &t.eq, NULL));
	CHK(fi_domain(t.fabric, t.info, &t.domain, NULL));
	struct fi_cq_attr ca = { .size = 64, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(t.domain, &ca, &t.txcq, NULL));
	CHK(fi_cq_open(t.domain, &ca, &t.rxcq, NULL));
	struct fid_ep *ep[2];
	for (int k = 0; k < 2; k++) {
		CHK(fi_endpoint(t.domain, t.info, &ep[k], NULL));
		CHK(fi_ep_bind(ep[k], &t.eq->fid, 0));
		CHK(fi_ep_bind(ep[k], &t.txcq->fid, FI_TRANSMIT));
		CHK(fi_ep_bind(ep[k], &t.rxcq->fid, FI_RECV));
		CHK(fi_enable(ep[k]));
		CHK(fi_connect(ep[k], t.info->dest_addr, NULL, 0));
		union {
			struct fi_eq_cm_entry e;
			uint8_t raw[sizeof(struct fi_eq_cm_entry) + 64];
		} u;
		uint32_t ev = 0;
		eq_wait(&t, &ev, &u, sizeof(u), WAIT_MS);
		EXPECT(ev == FI_CONNECTED && u.e.fid == &ep[k]->fid, "connection %d: %s", k, ev_name(ev));
	}
	char *buf = alloc_buf(4 * MSGLEN);
	struct fid_mr *mr = mr_reg(&t, buf, 4 * MSGLEN, FI_SEND);
	for (int round = 0; round < ROUNDS; round++) {
		oob_wait((uint8_t)(10 + round));
		/* interleaved: connection 0, 1, 0, 1 */
		for (int j = 0; j < 2; j++) {
			for (int k = 0; k < 2; k++) {
				char *b = buf + (j * 2 + k) * MSGLEN;
				fill_pattern(b, MSGLEN, seed(k, round, j));
				CHK(fi_send(ep[k], b, MSGLEN, fi_mr_desc(mr), 0, NULL));
			}
		}
		for (int n = 0; n < 4; n++) {
			struct fi_cq_data_entry d;
			cq_read_one(t.txcq, &d, WAIT_MS, "send");
		}
	}
	oob_signal(99);
	for (int k = 0; k < 2; k++)
		CHK(fi_close(&ep[k]->fid));
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("msg_srx"))
		server();
	else
		client();
	return 0;
}
