/*
 * rdm_simul: two RDM endpoints that know each other's address start sending
 * to each other at the same moment, so both connect at once.
 *
 * Four rounds, each with fresh endpoints (so a fresh pair of connects): both
 * sides post eight receives, meet on the out-of-band channel, and on the
 * go signal both fi_send eight messages (eager and rendezvous: 100, 50000,
 * 0, 16385, 1000, 300000, 16384, 7 bytes, patterns unique per side, round
 * and message) without waiting. Each side then receives everything exactly
 * once, byte-exact, message j in receive j (matching in the order sent),
 * and all its sends complete. Finally the RC QPs each process owns are
 * counted with `rdma res show qp` (iproute2): docs/rdm-protocol.md says
 * exactly one connection per pair survives a simultaneous connect, so each
 * process must own exactly one RC QP once both have settled. The built-in
 * verbs;ofi_rxm gets the same count check (libfabric's rxm also resolves
 * connect collisions to one connection).
 */
#include "rdm_common.h"

#include <stdio.h>

#define NMSG 8
#define ROUNDS 4
#define SLOT 400000
static const size_t sizes[NMSG] = { 100, 50000, 0, 16385, 1000, 300000, 16384, 7 };

static struct rctx r;
static uint8_t *buf;
static struct fid_mr *mr;
static void *desc;

static uint32_t seed(int side, int round, int j)
{
	return (uint32_t)(side * 1000 + round * 100 + j);
}

/* RC QPs owned by pid, from `rdma res show qp`; -1 if the tool gave nothing. */
static int count_rc_qps(pid_t pid, bool dump)
{
	FILE *f = popen("rdma res show qp 2>&1", "r");
	if (!f)
		return -1;
	char line[1024], key[32];
	int n = 0, lines = 0;
	snprintf(key, sizeof(key), " pid %d ", (int)pid);
	while (fgets(line, sizeof(line), f)) {
		lines++;
		size_t l = strlen(line);
		if (l && line[l - 1] == '\n')
			line[l - 1] = ' ';
		if (dump)
			logmsg("rdma res show qp: %s", line);
		if (strstr(line, " type RC ") && strstr(line, key))
			n++;
	}
	pclose(f);
	return lines ? n : -1;
}

static void round_run(int round, bool srv)
{
	int side = srv ? 0 : 1;
	uint8_t *rx = buf, *tx = buf + (size_t)NMSG * SLOT;
	memset(rx, 0xee, (size_t)NMSG * SLOT);
	for (int j = 0; j < NMSG; j++) {
		fill_pattern(tx + (size_t)j * SLOT, sizes[j], seed(side, round, j));
		RETRY(&r, fi_recv(r.ep, rx + (size_t)j * SLOT, SLOT - 64, desc, FI_ADDR_UNSPEC, (void *)(0x100L + j)));
	}
	/* both ready; then go, and send without waiting for anything */
	oob_barrier(srv, 1, 2);
	for (int j = 0; j < NMSG; j++)
		RETRY(&r, fi_send(r.ep, tx + (size_t)j * SLOT, sizes[j], desc, r.peer, (void *)(0x200L + j)));

	bool rdone[NMSG] = { 0 }, sdone[NMSG] = { 0 };
	int nr = 0, ns = 0;
	uint64_t start = now_ms();
	while (nr < NMSG || ns < NMSG) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = 0xdeadbeef;
		ssize_t ret = fi_cq_readfrom(r.rxcq, &e, 1, &src);
		if (ret == 1) {
			long j = (long)(uintptr_t)e.op_context - 0x100;
			EXPECT(j >= 0 && j < NMSG && !rdone[j], "round %d: receive op_context %p (twice?)", round,
			       e.op_context);
			rdone[j] = true;
			nr++;
			char w[64];
			snprintf(w, sizeof(w), "round %d receive %ld", round, j);
			EXPECT(e.len == sizes[j], "%s: len %zu, want %zu (out of order?)", w, e.len, sizes[j]);
			EXPECT(src == r.peer, "%s: source %#llx", w, (unsigned long long)src);
			expect_pattern(rx + (size_t)j * SLOT, sizes[j], seed(1 - side, round, (int)j), w);
			EXPECT(rx[(size_t)j * SLOT + sizes[j]] == 0xee, "%s: byte after the message overwritten", w);
		} else if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			char b[512];
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r.rxcq, &err, 0);
			fail("round %d: receive error: %s", round, cq_err_str(r.rxcq, &err, b, sizeof(b)));
		} else if (ret != -FI_EAGAIN) {
			fail("fi_cq_readfrom: %zd", ret);
		}
		ret = fi_cq_read(r.txcq, &e, 1);
		if (ret == 1) {
			long j = (long)(uintptr_t)e.op_context - 0x200;
			EXPECT(j >= 0 && j < NMSG && !sdone[j], "round %d: send op_context %p (twice?)", round, e.op_context);
			sdone[j] = true;
			ns++;
		} else if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			char b[512];
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(r.txcq, &err, 0);
			fail("round %d: send error: %s", round, cq_err_str(r.txcq, &err, b, sizeof(b)));
		} else if (ret != -FI_EAGAIN) {
			fail("fi_cq_read: %zd", ret);
		}
		if (now_ms() - start > WAIT_MS)
			fail("round %d: %d of %d receives, %d of %d sends after %d ms", round, nr, NMSG, ns, NMSG, WAIT_MS);
		check_child();
	}
	cq_expect_empty(r.rxcq, 200, "nothing received twice");
}

int main(void)
{
	bool srv = test_start("rdm_simul");
	pid_t peer_pid = 0, my_pid = getpid();
	rdm_open(&r, FI_MSG | FI_SOURCE);
	buf = alloc_buf((size_t)2 * NMSG * SLOT);
	mr = rdm_mr_reg(&r, buf, (size_t)2 * NMSG * SLOT, FI_SEND | FI_RECV);
	desc = fi_mr_desc(mr);
	if (srv) {
		oob_recv(&peer_pid, sizeof(peer_pid));
	} else {
		oob_send(&my_pid, sizeof(my_pid));
	}
	for (int round = 0; round < ROUNDS; round++) {
		if (round > 0) {
			/* fresh endpoints (same domain and MR): a fresh pair of connects */
			rdm_close_ep(&r);
			RCLOSE(r.av);
			rdm_open_ep(&r);
		}
		rdm_exchange(&r, true);
		round_run(round, srv);
		/* both settle (keep progressing), then count the QPs */
		rdm_progress_start(&r);
		if (srv) {
			oob_wait(3);
			int a = -1, b = -1;
			uint64_t t0 = now_ms();
			do {
				sleep_ms(200);
				a = count_rc_qps(my_pid, false);
				b = count_rc_qps(peer_pid, false);
			} while ((a != 1 || b != 1) && a >= 0 && now_ms() - t0 < 5000);
			if (a != 1 || b != 1)
				count_rc_qps(0, true);
			EXPECT(a >= 0, "`rdma res show qp` gave no output: cannot count the connections");
			EXPECT(a == 1 && b == 1, "round %d: RC QPs after a simultaneous connect: %d in this process, %d in "
			       "the peer (one connection per pair expected)", round, a, b);
			logmsg("round %d: all %d messages each way ok; one RC QP per process", round, NMSG);
			oob_signal(4);
		} else {
			oob_signal(3);
			oob_wait(4);
		}
		rdm_progress_stop();
	}
	rdm_test_end(srv, &r, mr, buf);
}
