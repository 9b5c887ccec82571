/*
 * msg_pep_handle: an active endpoint opened from an info whose handle is a
 * bound passive endpoint keeps that endpoint's address (fabtests'
 * fi_msg_sockets, client side).
 *
 * Client, as fi_msg_sockets does it:
 *  - fi_getinfo(FI_SOURCE) for the RDMA interface, fi_passive_ep from that
 *    info with src_addr removed, fi_setname(interface address, port 0) and
 *    fi_getname: the bound address (a port was picked);
 *  - hints->handle = the pep (and hints->src_addr the interface address with
 *    port 0), fi_getinfo toward the server: info->handle is the pep;
 *  - fi_domain, fi_getname(pep) still the bound address; fi_endpoint from
 *    that info; a second fi_endpoint from it -> -FI_EINVAL (the pep's address
 *    was taken over); fi_close(pep) (the address stays the endpoint's);
 *  - fi_getname(ep) after fi_enable and after FI_CONNECTED: the bound
 *    address (before the fix rsverbs bound an ephemeral port: "address
 *    changed after fi_endpoint (ep)", and fi_msg_sockets' server then waited
 *    forever for a connection that never came);
 *  - a message each way.
 * Server: fi_getname of the accepted endpoint is the listening address
 * (fi_msg_sockets' server check), fi_getpeer is the client's bound address.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

#define MSG_LEN 64

static const char *sa_str(const struct sockaddr_in *a, char *b, size_t n)
{
	return addr_str(a, sizeof(*a), b, n);
}

static void expect_same(const struct sockaddr_in *got, size_t gotlen, const struct sockaddr_in *want,
			const char *when)
{
	char b1[128], b2[128];
	EXPECT(gotlen == sizeof(*want) && got->sin_family == AF_INET &&
		       got->sin_port == want->sin_port && got->sin_addr.s_addr == want->sin_addr.s_addr,
	       "address changed %s: got %s (len %zu), expected %s", when, sa_str(got, b1, sizeof(b1)),
	       gotlen, sa_str(want, b2, sizeof(b2)));
	logmsg("address %s: %s (unchanged)", when, sa_str(got, b1, sizeof(b1)));
}

static void getname_is(struct fid *f, const struct sockaddr_in *want, const char *when)
{
	struct sockaddr_in a;
	size_t len = sizeof(a);
	memset(&a, 0, sizeof(a));
	CHK(fi_getname(f, &a, &len));
	expect_same(&a, len, want, when);
}

static void server(void)
{
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	server_listen(&t);
	struct sockaddr_in listen_addr;
	size_t alen = sizeof(listen_addr);
	CHK(fi_getname(&t.pep->fid, &listen_addr, &alen));

	struct fi_info *info = server_wait_connreq(&t, NULL, NULL, NULL);
	setup_active(&t, info);
	char *buf = alloc_buf(2 * MSG_LEN);
	struct fid_mr *mr = mr_reg(&t, buf, 2 * MSG_LEN, FI_SEND | FI_RECV);
	CHK(fi_recv(t.ep, buf, MSG_LEN, fi_mr_desc(mr), 0, NULL));
	server_accept(&t, NULL, 0);
	getname_is(&t.ep->fid, &listen_addr, "after fi_accept (server)");

	struct sockaddr_in client_addr;
	oob_recv(&client_addr, sizeof(client_addr));
	struct sockaddr_in peer;
	size_t plen = sizeof(peer);
	memset(&peer, 0, sizeof(peer));
	CHK(fi_getpeer(t.ep, &peer, &plen));
	expect_same(&peer, plen, &client_addr, "(fi_getpeer at the server = the client's pep address)");

	struct fi_cq_data_entry d;
	cq_read_one(t.rxcq, &d, WAIT_MS, "client's message");
	EXPECT(d.len == MSG_LEN, "received %zu bytes", d.len);
	expect_pattern(buf, MSG_LEN, 0x51, "client's message");
	fill_pattern(buf + MSG_LEN, MSG_LEN, 0x52);
	CHK(fi_send(t.ep, buf + MSG_LEN, MSG_LEN, fi_mr_desc(mr), 0, NULL));
	struct fi_cq_entry c;
	cq_read_one(t.txcq, &c, WAIT_MS, "server's send");
	oob_wait(1); /* the client has the answer */
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	test_finish();
}

static void client(void)
{
	struct tctx t;
	char b[128];
	tctx_init(&t);
	uint32_t l32;
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 == sizeof(struct sockaddr_in), "server address length %u", l32);
	struct sockaddr_in srv;
	oob_recv(&srv, sizeof(srv));

	/* the interface address, as fi_msg_sockets' -s names it */
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &srv.sin_addr, ip, sizeof(ip));
	t.hints = make_hints(FI_MSG, FI_CONTEXT);
	struct fi_info *pinfo = NULL;
	CHK(fi_getinfo(t.version, ip, NULL, FI_SOURCE, t.hints, &pinfo));
	void *saved = pinfo->src_addr;
	size_t savedlen = pinfo->src_addrlen;
	pinfo->src_addr = NULL;
	pinfo->src_addrlen = 0;
	struct fi_eq_attr eq_attr = { .size = 64, .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_fabric(pinfo->fabric_attr, &t.fabric, NULL));
	CHK(fi_eq_open(t.fabric, &eq_attr, &t.eq, NULL));
	CHK(fi_passive_ep(t.fabric, pinfo, &t.pep, NULL));
	pinfo->src_addr = saved;
	pinfo->src_addrlen = savedlen;
	fi_freeinfo(pinfo);

	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr = srv.sin_addr;
	CHK(fi_setname(&t.pep->fid, &sin, sizeof(sin)));
	struct sockaddr_in bound;
	size_t blen = sizeof(bound);
	memset(&bound, 0, sizeof(bound));
	CHK(fi_getname(&t.pep->fid, &bound, &blen));
	EXPECT(blen == sizeof(bound) && bound.sin_port != 0, "port number is 0 after fi_setname (len %zu)", blen);
	EXPECT(bound.sin_addr.s_addr == srv.sin_addr.s_addr, "fi_setname bound %s", sa_str(&bound, b, sizeof(b)));
	logmsg("pep bound to %s", sa_str(&bound, b, sizeof(b)));

	/* hints: handle = pep, src_addr = the interface address with port 0
	 * (what fabtests' ft_getsrcaddr puts there), dest_addr = the server */
	t.hints->handle = &t.pep->fid;
	t.hints->src_addr = malloc(sizeof(sin));
	memcpy(t.hints->src_addr, &sin, sizeof(sin));
	t.hints->src_addrlen = sizeof(sin);
	t.hints->dest_addr = malloc(sizeof(srv));
	memcpy(t.hints->dest_addr, &srv, sizeof(srv));
	t.hints->dest_addrlen = sizeof(srv);
	CHK(fi_getinfo(t.version, NULL, NULL, 0, t.hints, &t.info));
	EXPECT(t.info->handle == &t.pep->fid, "info->handle %p, the pep is %p", (void *)t.info->handle,
	       (void *)&t.pep->fid);
	t.hints->handle = NULL;

	CHK(fi_domain(t.fabric, t.info, &t.domain, NULL));
	getname_is(&t.pep->fid, &bound, "after fi_domain (pep)");
	CHK(fi_endpoint(t.domain, t.info, &t.ep, NULL));
	struct fid_ep *again = NULL;
	int r = fi_endpoint(t.domain, t.info, &again, NULL);
	EXPECT(r == -FI_EINVAL, "a second fi_endpoint from the pep's info returned %d (%s)", r, fi_strerror(-r));
	/* close the passive endpoint whose address the endpoint took over */
	CHK(fi_close(&t.pep->fid));
	t.pep = NULL;
	t.info->handle = NULL;

	struct fi_cq_attr ca = { .size = 64, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(t.domain, &ca, &t.txcq, NULL));
	CHK(fi_cq_open(t.domain, &ca, &t.rxcq, NULL));
	CHK(fi_ep_bind(t.ep, &t.eq->fid, 0));
	CHK(fi_ep_bind(t.ep, &t.txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(t.ep, &t.rxcq->fid, FI_RECV));
	CHK(fi_enable(t.ep));
	char *buf = alloc_buf(2 * MSG_LEN);
	struct fid_mr *mr = mr_reg(&t, buf, 2 * MSG_LEN, FI_SEND | FI_RECV);
	CHK(fi_recv(t.ep, buf + MSG_LEN, MSG_LEN, fi_mr_desc(mr), 0, NULL));
	getname_is(&t.ep->fid, &bound, "after fi_endpoint (ep)");

	client_connect(&t, NULL, 0, NULL, NULL, NULL);
	getname_is(&t.ep->fid, &bound, "after connect");
	oob_send(&bound, sizeof(bound));

	fill_pattern(buf, MSG_LEN, 0x51);
	CHK(fi_send(t.ep, buf, MSG_LEN, fi_mr_desc(mr), 0, NULL));
	struct fi_cq_data_entry d;
	cq_read_one(t.txcq, &d, WAIT_MS, "client's send");
	cq_read_one(t.rxcq, &d, WAIT_MS, "server's answer");
	EXPECT(d.len == MSG_LEN, "received %zu bytes", d.len);
	expect_pattern(buf + MSG_LEN, MSG_LEN, 0x52, "server's answer");
	oob_signal(1);
	mr_close(mr);
	tctx_close(&t);
	free(buf);
	child_done();
}

int main(void)
{
	if (test_start("msg_pep_handle"))
		server();
	else
		client();
	return 0;
}
