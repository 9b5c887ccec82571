/*
 * msg_reject: the server rejects two connection requests with private data.
 *
 * Asserts (fi_cm(3), fi_eq(3)):
 *  - fi_reject(pep, info->handle, data, len) succeeds;
 *  - the client's EQ reports the rejection as an error: fi_eq_read returns
 *    -FI_EAVAIL, then fi_eq_readerr returns sizeof(struct fi_eq_err_entry)
 *    with err == FI_ECONNREFUSED and fid == &ep->fid;
 *  - the reject private data is delivered as err_data/err_data_size:
 *      attempt 1: err_data_size == 0 on input -> err_data points to a
 *                 provider-owned buffer holding the data;
 *      attempt 2: user buffer on input -> the data is copied into it, err_data
 *                 still points to it and err_data_size is the data length;
 *  - after the error is consumed the EQ is empty (-FI_EAGAIN).
 * fi_connect may only be called once per endpoint, so attempt 2 uses a new ep.
 */
#include "common.h"

#include <stdlib.h>

#define CDATA_LEN 16
#define RDATA1_LEN 20
#define RDATA2_LEN 12

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);

	for (int attempt = 1; attempt <= 2; attempt++) {
		uint8_t cdata[256];
		size_t clen = sizeof(cdata);
		struct fi_info *info = server_wait_connreq(&t, cdata, &clen, NULL);
		EXPECT(clen == CDATA_LEN, "attempt %d: CONNREQ data length %zu", attempt, clen);
		expect_pattern(cdata, CDATA_LEN, (uint32_t)(0x40 + attempt), "CONNREQ data");

		size_t rlen = attempt == 1 ? RDATA1_LEN : RDATA2_LEN;
		uint8_t rdata[RDATA1_LEN];
		fill_pattern(rdata, rlen, (uint32_t)(0x70 + attempt));
		CHK(fi_reject(t.pep, info->handle, rdata, rlen));
		logmsg("attempt %d: rejected with %zu bytes of private data", attempt, rlen);
		fi_freeinfo(info);
		oob_wait((uint8_t)(10 + attempt)); /* client saw the rejection */
	}

	tctx_close(&t);
	test_finish();
}

static void new_ep(struct tctx *t)
{
	/* close the previous endpoint and its CQs, open fresh ones on the same
	 * domain (fi_connect may be called only once per endpoint) */
	if (t->ep) {
		CHK(fi_close(&t->ep->fid));
		t->ep = NULL;
	}
	if (t->txcq) {
		CHK(fi_close(&t->txcq->fid));
		t->txcq = NULL;
	}
	if (t->rxcq) {
		CHK(fi_close(&t->rxcq->fid));
		t->rxcq = NULL;
	}
	struct fi_cq_attr attr = { .size = 64, .format = FI_CQ_FORMAT_CONTEXT,
				   .wait_obj = FI_WAIT_NONE };
	CHK(fi_endpoint(t->domain, t->info, &t->ep, NULL));
	CHK(fi_cq_open(t->domain, &attr, &t->txcq, NULL));
	CHK(fi_cq_open(t->domain, &attr, &t->rxcq, NULL));
	CHK(fi_ep_bind(t->ep, &t->eq->fid, 0));
	CHK(fi_ep_bind(t->ep, &t->txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(t->ep, &t->rxcq->fid, FI_RECV));
	CHK(fi_enable(t->ep));
}

static void expect_reject(struct tctx *t, int attempt)
{
	union {
		struct fi_eq_cm_entry e;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} u;
	uint32_t ev = 0;
	uint64_t start = now_ms();
	ssize_t r;
	for (;;) {
		r = fi_eq_read(t->eq, &ev, &u, sizeof(u), 0);
		if (r != -FI_EAGAIN)
			break;
		EXPECT(now_ms() - start < WAIT_MS, "attempt %d: no EQ event within %d ms", attempt,
		       WAIT_MS);
		check_child();
		sleep_ms(1);
	}
	EXPECT(r == -FI_EAVAIL, "attempt %d: fi_eq_read after reject returned %zd (%s), event %s",
	       attempt, r, r < 0 ? fi_strerror((int)-r) : "an event", r >= 0 ? ev_name(ev) : "-");

	struct fi_eq_err_entry err;
	uint8_t ubuf[128];
	size_t want = attempt == 1 ? RDATA1_LEN : RDATA2_LEN;
	memset(&err, 0, sizeof(err));
	memset(ubuf, 0xEE, sizeof(ubuf));
	if (attempt == 2) {
		err.err_data = ubuf;
		err.err_data_size = sizeof(ubuf);
	}
	r = fi_eq_readerr(t->eq, &err, 0);
	char b[512];
	logmsg("attempt %d: fi_eq_readerr returned %zd: %s err_data=%p", attempt, r,
	       r > 0 ? eq_err_str(t->eq, &err, b, sizeof(b)) : "-", err.err_data);
	EXPECT(r == (ssize_t)sizeof(struct fi_eq_err_entry),
	       "attempt %d: fi_eq_readerr returned %zd (%s)", attempt, r,
	       r < 0 ? fi_strerror((int)-r) : "");
	EXPECT(err.err == FI_ECONNREFUSED, "attempt %d: err %d (%s), want FI_ECONNREFUSED",
	       attempt, err.err, fi_strerror(err.err));
	EXPECT(err.fid == &t->ep->fid, "attempt %d: error fid %p, ep fid %p", attempt,
	       (void *)err.fid, (void *)&t->ep->fid);
	EXPECT(err.err_data_size == want, "attempt %d: err_data_size %zu, reject data was %zu",
	       attempt, err.err_data_size, want);
	EXPECT(err.err_data != NULL, "attempt %d: err_data is NULL", attempt);
	if (attempt == 2)
		EXPECT(err.err_data == ubuf,
		       "attempt 2: err_data %p is not the user buffer %p", err.err_data,
		       (void *)ubuf);
	expect_pattern(err.err_data, want, (uint32_t)(0x70 + attempt), "reject private data");
	if (attempt == 2)
		EXPECT(ubuf[want] == 0xEE, "attempt 2: bytes past err_data_size were modified");

	r = fi_eq_read(t->eq, &ev, &u, sizeof(u), 0);
	EXPECT(r == -FI_EAGAIN, "attempt %d: EQ not empty after the error: %zd (%s)", attempt, r,
	       r < 0 ? fi_strerror((int)-r) : ev_name(ev));
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);

	for (int attempt = 1; attempt <= 2; attempt++) {
		if (attempt > 1)
			new_ep(&t);
		uint8_t cdata[CDATA_LEN];
		fill_pattern(cdata, sizeof(cdata), (uint32_t)(0x40 + attempt));
		CHK(fi_connect(t.ep, t.info->dest_addr, cdata, sizeof(cdata)));
		expect_reject(&t, attempt);
		oob_signal((uint8_t)(10 + attempt));
	}

	tctx_close(&t);
	child_done();
}

int main(void)
{
	if (test_start("msg_reject"))
		server();
	else
		client();
	return 0;
}
