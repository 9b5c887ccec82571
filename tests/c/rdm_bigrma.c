/*
 * rdm_bigrma: transfers longer than the device's largest message on FI_EP_RDM
 * (issue 25; rxe's max_msg_sz is 8 MiB). Needs ~200 MiB per process: run the
 * lab with --mem 4G.
 *
 *  - max_msg_size (rsverbs) is at least 1 GiB;
 *  - RMA write and read of 8 MiB + 4 bytes, 16 MiB (fi_writev, 3 local
 *    iovs; fi_readv likewise) and 64 MiB (fi_writemsg / fi_readmsg), each
 *    with exactly one completion, byte-checked at both ends, the bytes past
 *    the end untouched;
 *  - fi_writedata of 16 MiB + 4: the target's remote CQ data arrives after
 *    every byte landed (checked as soon as it is read), one completion at
 *    the initiator;
 *  - untagged and tagged sends of 16 MiB (rendezvous in pieces);
 *  - the Mercury shape: an RPC header by eager send, the server pulls 8 MiB
 *    + 4 bytes with one fi_readmsg, then answers;
 *  - a split write whose remote key covers only its first 12 of 24 MiB: one
 *    error completion, nothing more (the pieces after the failed one flush).
 *
 * "rdm_bigrma rxm" (test rdm_bigrma_rxm): the same, named for the suite's
 * run through "verbs;ofi_rxm" (libfabric's rxm over rsverbs' MSG endpoints,
 * which passes the RMA, and its rendezvous reads, to them whole).
 *
 * "rdm_bigrma kill" (test rdm_bigrma_kill): the server posts a 32 MiB write
 * and a 32 MiB read to the client, then SIGKILLs it: each has exactly one
 * completion, an error, within BOUND_MS, and nothing else comes.
 */
#include "rdm_common.h"
#include "bigpat.h"

#include <signal.h>
#include <sys/wait.h>

#define MIB (1u << 20)
#define BIG (64u * MIB)
#define BUFSZ (BIG + 4096)
#define BOUND_MS 30000

static struct rctx r;
static uint64_t client_key; /* the client's buffer, pulled in the RPC */

struct hdr {
	uint64_t addr, key, len;
};

static void expect_zero(const uint8_t *b, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		EXPECT(b[i] == 0, "%s: byte %zu is %#x, want 0 (past the transfer)", what, i, b[i]);
}

/* Exactly one completion with ctx on the transmit CQ, then nothing. */
static void tx_one(void *ctx, uint64_t flags, const char *what)
{
	struct fi_cq_tagged_entry e;
	rdm_expect(r.txcq, ctx, flags, &e, what);
	cq_expect_empty(r.txcq, 50, what);
}

static const size_t sizes[3] = { 8 * MIB + 4, 16 * MIB, 64 * MIB };

static void server(uint8_t *buf, struct fid_mr *mr, void *desc)
{
	struct fi_cq_tagged_entry e;
	struct hdr ri = {
		.addr = (r.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0,
		.key = fi_mr_key(mr),
		.len = BUFSZ,
	};
	/* a key over the first 12 MiB only */
	struct fid_mr *part = rdm_mr_reg(&r, buf, 12 * MIB, FI_REMOTE_WRITE);
	struct hdr rp = ri;
	rp.key = fi_mr_key(part);
	oob_send(&ri, sizeof(ri));
	oob_send(&rp, sizeof(rp));
	rdm_progress_start(&r);
	for (int k = 0; k < 3; k++) {
		size_t s = sizes[k];
		memset(buf, 0, BUFSZ);
		oob_signal(10 + k);
		big_rearm();
		oob_wait(20 + k); /* the client's write completed */
		big_expect(buf, s, 1 + k, "RMA write at the target");
		expect_zero(buf + s, 4096, "RMA write");
		big_fill(buf, s, 50 + k);
		oob_signal(30 + k);
		big_rearm();
		oob_wait(40 + k);
		logmsg("server: %zu-byte write checked, read served", s);
	}
	/* fi_writedata: the data is there when its CQ data is */
	memset(buf, 0, BUFSZ);
	oob_signal(50);
	rdm_expect(r.rxcq, NULL, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, &e, "writedata at the target");
	EXPECT(e.data == 0xbeef, "writedata: data %#llx", (unsigned long long)e.data);
	big_expect(buf, 16 * MIB + 4, 60, "writedata payload when its CQ data arrived");
	expect_zero(buf + 16 * MIB + 4, 4096, "writedata");
	logmsg("server: writedata checked");
	/* 16 MiB sends, untagged into buf, tagged into buf + 32 MiB */
	memset(buf, 0, BUFSZ);
	RETRY(&r, fi_recv(r.ep, buf, 16 * MIB, desc, FI_ADDR_UNSPEC, (void *)71));
	RETRY(&r, fi_trecv(r.ep, buf + 32 * MIB, 16 * MIB, desc, FI_ADDR_UNSPEC, 0x77, 0, (void *)72));
	oob_signal(60);
	rdm_expect(r.rxcq, (void *)71, FI_RECV | FI_MSG, &e, "16 MiB send");
	EXPECT(e.len == 16 * MIB, "16 MiB send: len %zu", e.len);
	rdm_expect(r.rxcq, (void *)72, FI_RECV | FI_TAGGED, &e, "16 MiB tagged send");
	EXPECT(e.len == 16 * MIB && e.tag == 0x77, "16 MiB tagged send: len %zu tag %#llx", e.len,
	       (unsigned long long)e.tag);
	big_expect(buf, 16 * MIB, 70, "16 MiB send");
	big_expect(buf + 32 * MIB, 16 * MIB, 71, "16 MiB tagged send");
	logmsg("server: 16 MiB sends checked");
	/* Mercury: an eager RPC header, then one fi_readmsg of its payload */
	uint8_t *hb = buf + BIG;
	memset(buf, 0, BUFSZ);
	RETRY(&r, fi_recv(r.ep, hb, sizeof(struct hdr), desc, FI_ADDR_UNSPEC, (void *)81));
	oob_signal(70);
	rdm_expect(r.rxcq, (void *)81, FI_RECV | FI_MSG, &e, "RPC header");
	struct hdr h;
	memcpy(&h, hb, sizeof(h));
	EXPECT(h.len == 8 * MIB + 4, "RPC header: len %llu", (unsigned long long)h.len);
	{
		struct iovec iov = { buf, h.len };
		struct fi_rma_iov rio = { h.addr, h.len, h.key };
		struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer,
					.rma_iov = &rio, .rma_iov_count = 1, .context = (void *)82 };
		RETRY(&r, fi_readmsg(r.ep, &m, FI_COMPLETION));
	}
	tx_one((void *)82, FI_RMA | FI_READ, "RPC pull (fi_readmsg)");
	big_expect(buf, 8 * MIB + 4, 80, "RPC payload pulled");
	expect_zero(buf + 8 * MIB + 4, 4096, "RPC pull");
	memcpy(hb, "done", 4);
	RETRY(&r, fi_send(r.ep, hb, 4, desc, r.peer, (void *)83));
	tx_one((void *)83, FI_SEND | FI_MSG, "RPC response");
	logmsg("server: Mercury-shaped RPC served");
	big_rearm();
	oob_wait(80);
	rdm_progress_stop();
	mr_close(part);
}

static void client(uint8_t *buf, void *desc)
{
	struct fi_cq_tagged_entry e;
	struct hdr ri, rp;
	oob_recv(&ri, sizeof(ri));
	oob_recv(&rp, sizeof(rp));
	for (int k = 0; k < 3; k++) {
		size_t s = sizes[k];
		char what[96];
		big_rearm();
		oob_wait(10 + k);
		big_fill(buf, s, 1 + k);
		void *ctx = (void *)(uintptr_t)(100 + k);
		snprintf(what, sizeof(what), "write of %zu bytes", s);
		if (k == 1) {
			/* 3 local iovs, not on piece bounds */
			struct iovec iov[3] = { { buf, 3 * MIB + 5 }, { buf + 3 * MIB + 5, 7 * MIB - 9 },
						{ buf + 10 * MIB - 4, s - 10 * MIB + 4 } };
			void *d[3] = { desc, desc, desc };
			RETRY(&r, fi_writev(r.ep, iov, d, 3, r.peer, ri.addr, ri.key, ctx));
		} else {
			struct iovec iov = { buf, s };
			struct fi_rma_iov rio = { ri.addr, s, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer,
						.rma_iov = &rio, .rma_iov_count = 1, .context = ctx };
			RETRY(&r, fi_writemsg(r.ep, &m, FI_COMPLETION));
		}
		tx_one(ctx, FI_RMA | FI_WRITE, what);
		oob_signal(20 + k);
		big_rearm();
		oob_wait(30 + k);
		memset(buf, 0, BUFSZ);
		ctx = (void *)(uintptr_t)(110 + k);
		snprintf(what, sizeof(what), "read of %zu bytes", s);
		if (k == 1) {
			struct iovec iov[3] = { { buf, MIB + 1 }, { buf + MIB + 1, 9 * MIB }, { buf + 10 * MIB + 1, s - 10 * MIB - 1 } };
			void *d[3] = { desc, desc, desc };
			RETRY(&r, fi_readv(r.ep, iov, d, 3, r.peer, ri.addr, ri.key, ctx));
		} else {
			struct iovec iov = { buf, s };
			struct fi_rma_iov rio = { ri.addr, s, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer,
						.rma_iov = &rio, .rma_iov_count = 1, .context = ctx };
			RETRY(&r, fi_readmsg(r.ep, &m, FI_COMPLETION));
		}
		tx_one(ctx, FI_RMA | FI_READ, what);
		big_expect(buf, s, 50 + k, what);
		expect_zero(buf + s, 4096, what);
		logmsg("client: %zu bytes written and read back", s);
		oob_signal(40 + k);
	}
	big_rearm();
	oob_wait(50);
	big_fill(buf, 16 * MIB + 4, 60);
	RETRY(&r, fi_writedata(r.ep, buf, 16 * MIB + 4, desc, 0xbeef, r.peer, ri.addr, ri.key, (void *)120));
	tx_one((void *)120, FI_RMA | FI_WRITE, "writedata of 16 MiB + 4");
	big_rearm();
	oob_wait(60);
	big_fill(buf, 16 * MIB, 70);
	big_fill(buf + 32 * MIB, 16 * MIB, 71);
	RETRY(&r, fi_send(r.ep, buf, 16 * MIB, desc, r.peer, (void *)121));
	RETRY(&r, fi_tsend(r.ep, buf + 32 * MIB, 16 * MIB, desc, r.peer, 0x77, (void *)122));
	for (int n = 0; n < 2; n++) {
		rdm_next(r.txcq, &e, "16 MiB send %d", n);
		EXPECT(e.op_context == (void *)121 || e.op_context == (void *)122, "16 MiB send: op_context %p",
		       e.op_context);
	}
	cq_expect_empty(r.txcq, 50, "16 MiB sends");
	/* Mercury: the header (eager), the payload pulled by the server */
	big_rearm();
	oob_wait(70);
	uint8_t *hb = buf + BIG;
	big_fill(buf, 8 * MIB + 4, 80);
	RETRY(&r, fi_recv(r.ep, hb + 64, 64, desc, FI_ADDR_UNSPEC, (void *)131));
	struct hdr h = { (r.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0, client_key,
			 8 * MIB + 4 };
	memcpy(hb, &h, sizeof(h));
	RETRY(&r, fi_send(r.ep, hb, sizeof(h), desc, r.peer, (void *)130));
	tx_one((void *)130, FI_SEND | FI_MSG, "RPC header");
	rdm_expect(r.rxcq, (void *)131, FI_RECV | FI_MSG, &e, "RPC response");
	EXPECT(e.len == 4 && memcmp(hb + 64, "done", 4) == 0, "RPC response: len %zu", e.len);
	logmsg("client: RPC answered");
	/* a split write failing in its middle: one error completion */
	big_fill(buf, 24 * MIB, 90);
	RETRY(&r, fi_write(r.ep, buf, 24 * MIB, desc, r.peer, rp.addr, rp.key, (void *)140));
	struct fi_cq_err_entry err;
	fi_addr_t src;
	char b[512];
	if (rdm_read_from(r.txcq, &e, &src, &err, WAIT_MS, "split write past its key"))
		fail("a 24 MiB write under a 12 MiB key succeeded");
	EXPECT(err.op_context == (void *)140, "split write error: op_context %p", err.op_context);
	logmsg("client: split write past its key: %s", cq_err_str(r.txcq, &err, b, sizeof(b)));
	cq_expect_empty(r.txcq, 2000, "after the failed split write");
	oob_signal(80);
}

/* ---- kill mode ---- */

static void kill_server(uint8_t *buf, void *desc)
{
	struct hdr ri;
	struct fi_cq_tagged_entry e0;
	oob_recv(&ri, sizeof(ri));
	/* connect first: a small read */
	RETRY(&r, fi_read(r.ep, buf, 4096, desc, r.peer, ri.addr, ri.key, (void *)9));
	rdm_expect(r.txcq, (void *)9, FI_RMA | FI_READ, &e0, "small read");
	big_fill(buf, 32 * MIB, 3);
	RETRY(&r, fi_write(r.ep, buf, 32 * MIB, desc, r.peer, ri.addr, ri.key, (void *)1));
	RETRY(&r, fi_read(r.ep, buf + 32 * MIB, 32 * MIB, desc, r.peer, ri.addr + 32 * MIB, ri.key, (void *)2));
	/* let the first pieces go, then kill (32 MiB take far longer on rxe) */
	for (uint64_t t0 = now_ms(); now_ms() - t0 < 10;)
		(void)fi_cq_read(r.rxcq, NULL, 0);
	pid_t pid = test_child_pid();
	test_forget_child();
	uint64_t t_kill = now_ms();
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	int seen[3] = { 0, 0, 0 };
	for (int n = 0; n < 2; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		char b[512];
		if (rdm_read_from(r.txcq, &e, &src, &err, BOUND_MS, "split RMA to a killed peer"))
			fail("split RMA %p completed successfully: the peer died after it, not in its middle", e.op_context);
		uintptr_t c = (uintptr_t)err.op_context;
		EXPECT(c == 1 || c == 2, "error completion with op_context %p", err.op_context);
		seen[c]++;
		logmsg("split %s: %s, %llu ms after the kill", c == 1 ? "write" : "read", cq_err_str(r.txcq, &err, b, sizeof(b)),
		       (unsigned long long)(now_ms() - t_kill));
		rdm_check_prov_errno(r.txcq, &err, "split RMA to a killed peer");
	}
	EXPECT(seen[1] == 1 && seen[2] == 1, "completions: write %d, read %d", seen[1], seen[2]);
	cq_expect_empty(r.txcq, 2000, "after the two errors");
	logmsg("server: one error completion each, nothing more");
}

static void kill_client(uint8_t *buf, struct fid_mr *mr)
{
	struct hdr ri = {
		.addr = (r.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0,
		.key = fi_mr_key(mr),
		.len = BUFSZ,
	};
	oob_send(&ri, sizeof(ri));
	/* serve the connection until killed */
	for (;;) {
		(void)fi_cq_read(r.txcq, NULL, 0);
		(void)fi_cq_read(r.rxcq, NULL, 0);
		usleep(200);
	}
}

int main(int argc, char **argv)
{
	/* an argument names the variant: "kill", or "rxm" (the same test, run
	 * through libfabric's ofi_rxm over rsverbs' MSG endpoints by the suite) */
	bool kill_mode = argc > 1 && strcmp(argv[1], "kill") == 0;
	char name[64];
	snprintf(name, sizeof(name), "rdm_bigrma%s%s", argc > 1 ? "_" : "", argc > 1 ? argv[1] : "");
	bool srv = test_start(name);
	rdm_open(&r, FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	rdm_exchange(&r, true);
	logmsg("max_msg_size %zu", r.info->ep_attr->max_msg_size);
	if (rdm_rsverbs)
		EXPECT(r.info->ep_attr->max_msg_size >= (1ul << 30), "max_msg_size %zu < 1 GiB", r.info->ep_attr->max_msg_size);
	uint8_t *buf = alloc_buf(BUFSZ);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, BUFSZ, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE | FI_SEND | FI_RECV);
	void *desc = fi_mr_desc(mr);
	if (kill_mode) {
		if (srv)
			kill_server(buf, desc);
		else
			kill_client(buf, mr);
		mr_close(mr);
		rdm_close(&r);
		free(buf);
		test_finish();
	}
	if (srv) {
		server(buf, mr, desc);
	} else {
		client_key = fi_mr_key(mr);
		client(buf, desc);
	}
	rdm_test_end(srv, &r, mr, buf);
}
