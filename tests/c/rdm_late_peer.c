/*
 * rdm_late_peer: an RDM send to a peer whose process is not listening yet
 * (a client started before its server: runfabtests starts fabtests' client
 * one second after the server, and a loaded machine can let it win; a
 * Mercury client started with its server).
 *
 *  1. The server opens an endpoint, sends the client its address and closes
 *     it: nobody listens there. The client sends a tagged message to that
 *     address at once and waits for its completion with fi_cq_sread (a CQ
 *     with FI_WAIT_FD: the retry's timer must wake it). The server opens a
 *     new endpoint on the same address 1.5 s later. The message must arrive
 *     there, whole, and the send complete successfully, no sooner than the
 *     server's endpoint existed (so the first attempt was indeed refused).
 *  2. An address where nobody ever listens: the send completes with
 *     FI_ECONNREFUSED once the retry window is over (the client runs with
 *     FI_RSVERBS_CONNECT_RETRY_MS=3000), not at the first refusal and not
 *     never.
 */
#include "rdm_procs.h"

#define LEN 3000
#define RETRY_MS 3000
#define LATE_MS 1500

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static void open_at(const char *name, bool wait_fd)
{
	memset(&r, 0, sizeof(r));
	r.hints = rdm_hints(FI_MSG | FI_TAGGED | FI_SOURCE);
	if (name) {
		const struct sockaddr_in *sin = (const void *)name;
		char host[64], svc[16];
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(svc, sizeof(svc), "%u", ntohs(sin->sin_port));
		CHK(fi_getinfo(API_VERSION, host, svc, FI_SOURCE, r.hints, &r.info));
	} else {
		CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, r.hints, &r.info));
	}
	rdm_rsverbs = FI_MAJOR(r.info->fabric_attr->prov_version) >= 1000;
	CHK(fi_fabric(r.info->fabric_attr, &r.fabric, NULL));
	CHK(fi_domain(r.fabric, r.info, &r.domain, NULL));
	r.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
	rdm_open_ep(&r);
	if (name)
		EXPECT(!memcmp(r.name, name, sizeof(struct sockaddr_in)), "the new endpoint is not on the old address");
	buf = alloc_buf(LEN);
	mr = rdm_mr_reg(&r, buf, LEN, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
}

static void close_all(void)
{
	mr_close(mr);
	mr = NULL;
	rdm_close(&r);
	free(buf);
	buf = NULL;
}

static void send_name(const char *name)
{
	uint32_t l = sizeof(struct sockaddr_in);
	oob_send(&l, sizeof(l));
	oob_send(name, l);
}

static void recv_name(char *name)
{
	uint32_t l;
	oob_recv(&l, sizeof(l));
	EXPECT(l == sizeof(struct sockaddr_in), "name length %u", l);
	oob_recv(name, l);
}

static void server(void)
{
	char addr[64], dead[64], client[64];
	/* 1: an address, closed before the client sends */
	open_at(NULL, false);
	memcpy(addr, r.name, sizeof(struct sockaddr_in));
	close_all();
	send_name(addr);
	recv_name(client);
	oob_wait(1); /* the client has sent */
	sleep_ms(LATE_MS);
	open_at(addr, false);
	logmsg("server endpoint open again on its old address, %d ms after the client sent", LATE_MS);
	oob_signal(2);
	fi_addr_t fc = av_insert_one(r.av, client);
	rdm_recv_check(&r, buf, desc, fc, 0x5, LEN, 4242, "the late server's message");
	logmsg("phase 1: the message sent before the server existed arrived");
	oob_wait(3); /* the client saw its send complete */
	close_all();

	/* 2: an address nobody will ever listen on */
	open_at(NULL, false);
	memcpy(dead, r.name, sizeof(struct sockaddr_in));
	close_all();
	send_name(dead);
	oob_wait(4);
	test_finish();
}

static void client(void)
{
	char addr[64], dead[64];
	recv_name(addr);
	open_at(NULL, true);
	send_name(r.name);
	fi_addr_t srv = av_insert_one(r.av, addr);
	fill_pattern(buf, LEN, 4242);
	uint64_t t0 = now_ms();
	RETRY(&r, fi_tsend(r.ep, buf, LEN, desc, srv, 0x5, (void *)0x51));
	oob_signal(1);
	/* blocking wait: nothing arrives on the CQ until the retry (timer) connects */
	rdm_sread_expect(r.txcq, (void *)0x51, FI_SEND, NULL, "send to a server not yet listening");
	uint64_t took = now_ms() - t0;
	oob_wait(2);
	EXPECT(took >= LATE_MS - 200, "the send completed after %llu ms, before the server existed",
	       (unsigned long long)took);
	logmsg("phase 1: the send completed after %llu ms (server late by %d ms)", (unsigned long long)took, LATE_MS);
	oob_signal(3);

	recv_name(dead);
	fi_addr_t d = av_insert_one(r.av, dead);
	t0 = now_ms();
	RETRY(&r, fi_tsend(r.ep, buf, LEN, desc, d, 0x6, (void *)0x61));
	struct fi_cq_err_entry err = rdm_expect_err(r.txcq, FI_ECONNREFUSED, "send to an address nobody listens on");
	took = now_ms() - t0;
	EXPECT(err.op_context == (void *)0x61, "error op_context %p", err.op_context);
	EXPECT(took >= RETRY_MS - 500 && took < RETRY_MS + 10000,
	       "refused after %llu ms, want about the retry window of %d ms", (unsigned long long)took, RETRY_MS);
	logmsg("phase 2: FI_ECONNREFUSED after %llu ms (window %d ms)", (unsigned long long)took, RETRY_MS);
	close_all();
	oob_signal(4);
	child_done();
}

int main(void)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", RETRY_MS);
	setenv("FI_RSVERBS_CONNECT_RETRY_MS", v, 1);
	bool srv = test_start("rdm_late_peer");
	if (srv)
		server();
	else
		client();
	return 0;
}
