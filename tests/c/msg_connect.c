/*
 * msg_connect: connection setup with CM private data in both directions.
 *
 * Asserts (fi_cm(3), fi_eq(3), fi_endpoint(3)):
 *  - fi_getopt(FI_OPT_CM_DATA_SIZE) on the pep and on the client ep returns a
 *    size >= the private data used;
 *  - the server's FI_CONNREQ entry: fid == &pep->fid, info with a handle,
 *    fi_eq_read returns sizeof(struct fi_eq_cm_entry) + datalen and the data
 *    bytes equal the client's fi_connect param;
 *  - the client's FI_CONNECTED entry: fid == &ep->fid, fi_eq_read returns
 *    sizeof(struct fi_eq_cm_entry) + datalen, data equals the fi_accept param;
 *  - the server's FI_CONNECTED entry refers to the accepting ep;
 *  - fi_getname/fi_getpeer give AF_INET sockaddr_in; the server's peer is the
 *    client's name and vice versa; too-small addrlen gives -FI_ETOOSMALL,
 *    reports the needed size and writes nothing past the given length
 *    (checked softly: a deviation is reported but the test goes on);
 *  - fi_eq_sread with a short timeout on an idle EQ returns -FI_EAGAIN (and
 *    blocks roughly for the timeout);
 *  - one message each way over the connection.
 */
#include "common.h"

#include <netinet/in.h>
#include <stdlib.h>

#define CDATA_LEN 40
#define SDATA_LEN 24

struct names {
	struct sockaddr_in name;
	struct sockaddr_in peer;
};

static void get_names(struct tctx *t, struct names *n)
{
	char b1[64], b2[64];
	size_t len = sizeof(n->name);
	memset(n, 0, sizeof(*n));
	CHK(fi_getname(&t->ep->fid, &n->name, &len));
	EXPECT(len == sizeof(struct sockaddr_in), "fi_getname addrlen %zu", len);
	EXPECT(n->name.sin_family == AF_INET, "fi_getname family %d", n->name.sin_family);
	EXPECT(n->name.sin_port != 0, "fi_getname port 0");
	len = sizeof(n->peer);
	CHK(fi_getpeer(t->ep, &n->peer, &len));
	EXPECT(len == sizeof(struct sockaddr_in), "fi_getpeer addrlen %zu", len);
	EXPECT(n->peer.sin_family == AF_INET, "fi_getpeer family %d", n->peer.sin_family);
	EXPECT(n->peer.sin_port != 0, "fi_getpeer port 0");
	logmsg("ep name %s peer %s", addr_str(&n->name, sizeof(n->name), b1, sizeof(b1)),
	       addr_str(&n->peer, sizeof(n->peer), b2, sizeof(b2)));

	/* too small a buffer: -FI_ETOOSMALL, the needed size in addrlen, and
	 * nothing written past the given length (fi_cm(3) fi_getname) */
	uint8_t guard[64];
	memset(guard, 0xA5, sizeof(guard));
	len = 4;
	ssize_t r = fi_getname(&t->ep->fid, guard, &len);
	EXPECT_SOFT(r == -FI_ETOOSMALL, "fi_getname with addrlen 4 returned %zd (%s)", r,
		    fi_strerror((int)-r));
	EXPECT_SOFT(len >= sizeof(struct sockaddr_in), "needed addrlen reported as %zu", len);
	bool clobbered = false;
	for (size_t i = 4; i < sizeof(guard); i++)
		clobbered |= guard[i] != 0xA5;
	EXPECT_SOFT(!clobbered, "fi_getname with addrlen 4 wrote past the 4-byte buffer");
	memset(guard, 0xA5, sizeof(guard));
	len = 4;
	r = fi_getpeer(t->ep, guard, &len);
	EXPECT_SOFT(r == -FI_ETOOSMALL, "fi_getpeer with addrlen 4 returned %zd (%s)", r,
		    fi_strerror((int)-r));
	EXPECT_SOFT(len >= sizeof(struct sockaddr_in), "fi_getpeer: needed addrlen reported as %zu",
		    len);
	clobbered = false;
	for (size_t i = 4; i < sizeof(guard); i++)
		clobbered |= guard[i] != 0xA5;
	EXPECT_SOFT(!clobbered, "fi_getpeer with addrlen 4 wrote past the 4-byte buffer");
}

static bool same_sin(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static void check_cm_data_size(fid_t fid, size_t need, const char *what)
{
	size_t sz = 0, optlen = sizeof(sz);
	CHK(fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &sz, &optlen));
	logmsg("%s FI_OPT_CM_DATA_SIZE = %zu", what, sz);
	EXPECT(optlen == sizeof(size_t), "optlen %zu", optlen);
	EXPECT(sz >= need, "%s CM data size %zu < %zu used by the test", what, sz, need);
}

static void idle_sread(struct tctx *t)
{
	union {
		struct fi_eq_cm_entry e;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} u;
	uint32_t ev = 0;
	uint64_t t0 = now_ms();
	ssize_t r = fi_eq_sread(t->eq, &ev, &u, sizeof(u), 300, 0);
	uint64_t dt = now_ms() - t0;
	EXPECT(r == -FI_EAGAIN, "fi_eq_sread(timeout 300) on an idle EQ returned %zd (%s), event %s",
	       r, r < 0 ? fi_strerror((int)-r) : "data", r >= 0 ? ev_name(ev) : "-");
	EXPECT(dt >= 150, "fi_eq_sread(timeout 300) returned after only %llu ms",
	       (unsigned long long)dt);
	EXPECT(dt < 20000, "fi_eq_sread(timeout 300) took %llu ms", (unsigned long long)dt);
	logmsg("idle fi_eq_sread returned -FI_EAGAIN after %llu ms", (unsigned long long)dt);
}

static void exchange_msg(struct tctx *t, bool sender_first)
{
	static struct fi_context rctx, sctx;
	char *buf = alloc_buf(8192);
	struct fid_mr *mr = mr_reg(t, buf, 8192, FI_SEND | FI_RECV);
	void *desc = fi_mr_desc(mr);
	struct fi_cq_data_entry rc;
	struct fi_cq_entry sc;

	CHK(fi_recv(t->ep, buf + 4096, 4096, desc, 0, &rctx));
	oob_signal(1);
	oob_wait(1); /* both sides have a receive posted */
	fill_pattern(buf, 100, is_child ? 11 : 22);
	(void)sender_first;
	CHK(fi_send(t->ep, buf, 100, desc, 0, &sctx));
	cq_read_one(t->txcq, &sc, WAIT_MS, "send completion");
	EXPECT(sc.op_context == &sctx, "send op_context %p", sc.op_context);
	cq_read_one(t->rxcq, &rc, WAIT_MS, "recv completion");
	EXPECT(rc.op_context == &rctx, "recv op_context %p", rc.op_context);
	EXPECT(rc.len == 100, "recv len %zu", rc.len);
	expect_pattern(buf + 4096, 100, is_child ? 22 : 11, "received message");
	mr_close(mr);
	free(buf);
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	check_cm_data_size(&t.pep->fid, CDATA_LEN, "pep");

	uint8_t cdata[256];
	size_t clen = sizeof(cdata);
	ssize_t evlen = 0;
	struct fi_info *info = server_wait_connreq(&t, cdata, &clen, &evlen);
	logmsg("CONNREQ fi_eq_read returned %zd, data %zu bytes", evlen, clen);
	EXPECT(clen == CDATA_LEN, "CONNREQ private data length %zu, client sent %d", clen,
	       CDATA_LEN);
	EXPECT(evlen == (ssize_t)(sizeof(struct fi_eq_cm_entry) + CDATA_LEN),
	       "fi_eq_read(CONNREQ) returned %zd, expected %zu", evlen,
	       sizeof(struct fi_eq_cm_entry) + CDATA_LEN);
	expect_pattern(cdata, CDATA_LEN, 0xC1, "CONNREQ private data");

	setup_active(&t, info);
	check_cm_data_size(&t.ep->fid, SDATA_LEN, "accepting ep");
	uint8_t sdata[SDATA_LEN];
	fill_pattern(sdata, sizeof(sdata), 0x5E);
	server_accept(&t, sdata, sizeof(sdata));

	struct names mine, theirs;
	get_names(&t, &mine);
	oob_send(&mine, sizeof(mine));
	oob_recv(&theirs, sizeof(theirs));
	EXPECT(same_sin(&mine.peer, &theirs.name), "server's peer != client's name");
	EXPECT(same_sin(&mine.name, &theirs.peer), "server's name != client's peer");

	idle_sread(&t);
	exchange_msg(&t, true);

	oob_wait(2); /* client done */
	tctx_close(&t);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	client_setup(&t);
	check_cm_data_size(&t.ep->fid, CDATA_LEN, "client ep");

	uint8_t cdata[CDATA_LEN];
	fill_pattern(cdata, sizeof(cdata), 0xC1);
	uint8_t sdata[256];
	size_t slen = sizeof(sdata);
	ssize_t evlen = 0;
	client_connect(&t, cdata, sizeof(cdata), sdata, &slen, &evlen);
	logmsg("FI_CONNECTED fi_eq_read returned %zd, data %zu bytes", evlen, slen);
	EXPECT(slen == SDATA_LEN, "FI_CONNECTED private data length %zu, server sent %d", slen,
	       SDATA_LEN);
	EXPECT(evlen == (ssize_t)(sizeof(struct fi_eq_cm_entry) + SDATA_LEN),
	       "fi_eq_read(FI_CONNECTED) returned %zd, expected %zu", evlen,
	       sizeof(struct fi_eq_cm_entry) + SDATA_LEN);
	expect_pattern(sdata, SDATA_LEN, 0x5E, "FI_CONNECTED private data");

	struct names mine, theirs;
	get_names(&t, &mine);
	oob_recv(&theirs, sizeof(theirs));
	oob_send(&mine, sizeof(mine));
	EXPECT(same_sin(&mine.peer, &theirs.name), "client's peer != server's name");
	EXPECT(same_sin(&mine.name, &theirs.peer), "client's name != server's peer");

	idle_sread(&t);
	exchange_msg(&t, false);

	oob_signal(2);
	tctx_close(&t);
	child_done();
}

int main(void)
{
	if (test_start("msg_connect"))
		server();
	else
		client();
	return 0;
}
