/*
 * fi_msgcost: the CPU cost of one small RDM message and of one empty CQ poll,
 * in one process, with no peer to wait for.  A ping-pong between two
 * processes mixes the provider's work with scheduling and the other side's
 * reaction; this measures the provider's own path: the endpoint sends to
 * itself (its own address in its AV), so one iteration is a receive post,
 * an inject, and the polls until the receive completes — both ends of a
 * message, through the public libfabric API only (any RDM provider).
 *
 *   fi_msgcost [-p PROV] [-t] [-n ITERS] [-s SIZE] [-r ROUNDS] [-P POLLS] [-c PEERS] [-w MS]
 *   fi_msgcost -p PROV -c PEERS -I HEXADDR     (the idle peers: internal)
 *
 * -P: empty polls timed per round (default 10 x ITERS; 0: none).
 * -c: first connect PEERS more endpoints to the measured one (each sends it
 *     one message), which then stay open and idle: the measured endpoint has
 *     PEERS + 1 connections, so a provider's per-peer work on every message
 *     shows.  The idle endpoints live in a child process (this program again,
 *     exec'd with -I, so not under callgrind and not in the counts) that
 *     reads their CQ every millisecond: idle, as a server's other clients
 *     are, but progressing, so they answer what the provider asks of them
 *     (credit recalls).  It is killed after the last round.
 * -w: after the idle peers connected, keep polling (no messages) for MS
 *     milliseconds before the first message: the peers have then been idle
 *     that long, as a server's idle clients are (rsverbs tells idle peers
 *     from senders after 250-500 ms without data; default 0).
 *
 * Under callgrind the counts start after the first round's warm-up
 * (CALLGRIND_ZERO_STATS, when <valgrind/callgrind.h> is there): connection
 * set-up, whose polling follows elapsed time, stays out of them, and so do
 * the sort and print of each round's timings (CALLGRIND_TOGGLE_COLLECT).
 *
 * Prints, per round:
 *   MSGCOST prov=verbs mode=tagged size=8 iters=20000 p50_ns=.. avg_ns=.. min_ns=..
 *   POLLCOST prov=verbs iters=200000 avg_ns=..
 * Part of ci/bench (see docs/benchmarks.md).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#define BENCH_NAME "fi_msgcost"
#include "bench.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define CHK(x) BENCH_CHK(x)

static struct fid_cq *txcq, *rxcq;

/* Polls rx until one completion; reaps tx meanwhile. */
static void wait_rx(void)
{
	struct fi_cq_tagged_entry c[8];
	uint64_t spins = 0;
	for (;;) {
		ssize_t n = fi_cq_read(rxcq, c, 8);
		if (n > 0)
			return;
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_msgcost: fi_cq_read(rx) = %zd (%s)\n", n, fi_strerror((int)-n));
			exit(1);
		}
		n = fi_cq_read(txcq, c, 8);
		if (n < 0 && n != -FI_EAGAIN) {
			fprintf(stderr, "fi_msgcost: fi_cq_read(tx) = %zd (%s)\n", n, fi_strerror((int)-n));
			exit(1);
		}
		if (++spins > 200000000u) {
			fprintf(stderr, "fi_msgcost: no completion\n");
			exit(1);
		}
	}
}

/* -I: the idle peers' process.  PEERS endpoints of a domain of their own
 * each send the endpoint at HEXADDR one tagged message (tag 99), then are
 * progressed (their CQ read) every millisecond until the process is killed. */
static int idle_peers(const char *prov, unsigned long extra, const char *hex)
{
	char name[128];
	size_t nl = strlen(hex) / 2;
	if (nl == 0 || nl > sizeof(name))
		return 2;
	for (size_t i = 0; i < nl; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return 2;
		name[i] = (char)v;
	}
	struct fi_info *hints = bench_hints(FI_EP_RDM, FI_MSG | FI_TAGGED, prov), *info;
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *xcq;
	struct fid_av *xav;
	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cq_attr ca = { .size = 1024, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(domain, &ca, &xcq, NULL));
	struct fi_av_attr xa = { .type = FI_AV_TABLE, .count = 4 };
	CHK(fi_av_open(domain, &xa, &xav, NULL));
	fi_addr_t to;
	if (fi_av_insert(xav, name, 1, &to, 0, NULL) != 1) {
		fprintf(stderr, "fi_msgcost -I: fi_av_insert failed\n");
		return 1;
	}
	char sb[64] = { 0 };
	struct fi_cq_tagged_entry c[8];
	for (unsigned long k = 0; k < extra; k++) {
		struct fid_ep *e;
		CHK(fi_endpoint(domain, info, &e, NULL));
		CHK(fi_ep_bind(e, &xcq->fid, FI_TRANSMIT | FI_RECV));
		CHK(fi_ep_bind(e, &xav->fid, 0));
		CHK(fi_enable(e));
		ssize_t rc;
		while ((rc = fi_tinject(e, sb, 8, to, 99)) == -FI_EAGAIN)
			(void)fi_cq_read(xcq, c, 8);
		CHK(rc);
		/* progressed while the next ones are opened (each registers its
		 * receive pool, which takes a while): the connections complete
		 * meanwhile instead of all waiting for the loop below */
		(void)fi_cq_read(xcq, c, 8);
	}
	for (;;) {
		ssize_t n = fi_cq_read(xcq, c, 8);
		if (n < 0 && n != -FI_EAGAIN) {
			fprintf(stderr, "fi_msgcost -I: fi_cq_read = %zd (%s)\n", n, fi_strerror((int)-n));
			return 1;
		}
		usleep(1000);
	}
}

int main(int argc, char **argv)
{
	const char *prov = "verbs";
	bool tagged = false;
	unsigned long iters = 20000, size = 8, rounds = 1, polls = (unsigned long)-1, extra = 0, settle_ms = 0;
	const char *idle_hex = NULL;
	int o;
	while ((o = getopt(argc, argv, "p:tn:s:r:P:c:I:w:")) != -1) {
		switch (o) {
		case 'p': prov = optarg; break;
		case 't': tagged = true; break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'r': rounds = strtoul(optarg, NULL, 0); break;
		case 'P': polls = strtoul(optarg, NULL, 0); break;
		case 'c': extra = strtoul(optarg, NULL, 0); break;
		case 'I': idle_hex = optarg; break;
		case 'w': settle_ms = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: fi_msgcost [-p PROV] [-t] [-n ITERS] [-s SIZE] [-r ROUNDS] [-P POLLS] [-c PEERS] [-w MS]\n");
			return 2;
		}
	}
	if (idle_hex)
		return idle_peers(prov, extra, idle_hex);
	struct fi_info *hints = bench_hints(FI_EP_RDM, FI_MSG | FI_TAGGED, prov), *info;
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cq_attr ca = { .size = 1024, .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	CHK(fi_cq_open(domain, &ca, &txcq, NULL));
	CHK(fi_cq_open(domain, &ca, &rxcq, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 4 };
	CHK(fi_av_open(domain, &aa, &av, NULL));
	CHK(fi_endpoint(domain, info, &ep, NULL));
	CHK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
	CHK(fi_ep_bind(ep, &av->fid, 0));
	CHK(fi_enable(ep));
	char name[128];
	size_t nl = sizeof(name);
	CHK(fi_getname(&ep->fid, name, &nl));
	fi_addr_t self;
	if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1) {
		fprintf(stderr, "fi_msgcost: fi_av_insert of its own address failed\n");
		return 1;
	}
	size_t bl = size < 64 ? 64 : size;
	char *rb = calloc(1, bl), *sb = calloc(1, bl);
	struct fid_mr *mr;
	CHK(fi_mr_reg(domain, rb, bl, FI_RECV, 0, 1, 0, &mr, NULL));
	void *desc = fi_mr_desc(mr);
	struct fi_context rctx;
	bool inj = size <= info->tx_attr->inject_size;
	if (!inj) {
		fprintf(stderr, "fi_msgcost: size %lu exceeds inject_size %zu\n", size, info->tx_attr->inject_size);
		return 1;
	}
	/* idle peers: a child process (this program, -I) connects them, each by
	 * sending the measured endpoint one message, and keeps them progressing */
	pid_t child = 0;
	if (extra) {
		if (extra > info->rx_attr->size) {
			fprintf(stderr, "fi_msgcost: -c %lu exceeds rx_size %zu\n", extra, info->rx_attr->size);
			return 1;
		}
		struct fi_context *xctx = calloc(extra, sizeof(*xctx));
		for (unsigned long k = 0; k < extra; k++)
			CHK(fi_trecv(ep, rb, size, desc, FI_ADDR_UNSPEC, 99, 0, &xctx[k]));
		char hex[2 * sizeof(name) + 1], cnt[32];
		for (size_t i = 0; i < nl; i++)
			sprintf(hex + 2 * i, "%02x", (unsigned char)name[i]);
		snprintf(cnt, sizeof(cnt), "%lu", extra);
		fflush(NULL);
		child = fork();
		if (child < 0) {
			perror("fi_msgcost: fork");
			return 1;
		}
		if (child == 0) {
			/* exec'd (not only forked): under valgrind the child runs
			 * natively (no --trace-children), outside the counts */
			execlp(argv[0], argv[0], "-p", prov, "-c", cnt, "-I", hex, (char *)NULL);
			perror("fi_msgcost: exec");
			_exit(127);
		}
		unsigned long got = 0;
		uint64_t spins = 0;
		while (got < extra) {
			struct fi_cq_tagged_entry c[8];
			ssize_t n = fi_cq_read(rxcq, c, 8);
			if (n > 0)
				got += (unsigned long)n;
			else if (n != -FI_EAGAIN) {
				fprintf(stderr, "fi_msgcost: fi_cq_read(rx) while connecting = %zd\n", n);
				return 1;
			}
			(void)fi_cq_read(txcq, c, 8);
			int st;
			if (waitpid(child, &st, WNOHANG) == child) {
				fprintf(stderr, "fi_msgcost: the idle peers' process ended (status %#x)\n", st);
				return 1;
			}
			if (++spins > 200000000u) {
				fprintf(stderr, "fi_msgcost: the idle peers did not connect (%lu of %lu)\n", got, extra);
				return 1;
			}
		}
		free(xctx);
		/* the peers stay idle for settle_ms, the measured endpoint polled */
		uint64_t until = now_ns() + settle_ms * 1000000ull;
		while (now_ns() < until) {
			struct fi_cq_tagged_entry c[8];
			ssize_t n = fi_cq_read(rxcq, c, 8);
			if (n < 0 && n != -FI_EAGAIN) {
				fprintf(stderr, "fi_msgcost: fi_cq_read(rx) while the peers idle = %zd\n", n);
				return 1;
			}
			(void)fi_cq_read(txcq, c, 8);
		}
	}
	uint64_t *t = calloc(iters, sizeof(*t));
	unsigned long warm = iters / 10 + 10;
	for (unsigned long r = 0; r < rounds; r++) {
		for (unsigned long i = 0; i < warm + iters; i++) {
			uint64_t t0 = now_ns();
			ssize_t rc;
			do
				rc = tagged ? fi_trecv(ep, rb, size, desc, FI_ADDR_UNSPEC, 7, 0, &rctx)
					    : fi_recv(ep, rb, size, desc, FI_ADDR_UNSPEC, &rctx);
			while (rc == -FI_EAGAIN);
			CHK(rc);
			do {
				rc = tagged ? fi_tinject(ep, sb, size, self, 7) : fi_inject(ep, sb, size, self);
				if (rc == -FI_EAGAIN) {
					struct fi_cq_tagged_entry c[8];
					(void)fi_cq_read(txcq, c, 8);
				}
			} while (rc == -FI_EAGAIN);
			CHK(rc);
			wait_rx();
			if (i >= warm)
				t[i - warm] = now_ns() - t0;
			/* Under callgrind, count from here: set-up (connections, the
			 * idle peers' pool waits, which follow elapsed time) and the
			 * warm-up stay out of the counts. */
			if (r == 0 && i + 1 == warm)
				CALLGRIND_ZERO_STATS;
		}
		/* The sort and print of the timings are the harness's, not the
		 * provider's: left out of the counts (they grow with ITERS). */
		CALLGRIND_TOGGLE_COLLECT;
		double sum = 0;
		for (unsigned long i = 0; i < iters; i++)
			sum += (double)t[i];
		qsort(t, iters, sizeof(*t), cmp_u64);
		printf("MSGCOST prov=%s mode=%s size=%lu iters=%lu p50_ns=%llu avg_ns=%.0f min_ns=%llu\n", prov,
		       tagged ? "tagged" : "msg", size, iters, (unsigned long long)t[iters / 2], sum / (double)iters,
		       (unsigned long long)t[0]);
		fflush(stdout);
		CALLGRIND_TOGGLE_COLLECT;
		unsigned long np = polls == (unsigned long)-1 ? iters * 10 : polls;
		if (np == 0) {
			fflush(stdout);
			continue;
		}
		struct fi_cq_tagged_entry c[8];
		uint64_t p0 = now_ns();
		for (unsigned long i = 0; i < np; i++) {
			ssize_t n = fi_cq_read(rxcq, c, 8);
			if (n != -FI_EAGAIN) {
				fprintf(stderr, "fi_msgcost: idle fi_cq_read = %zd\n", n);
				return 1;
			}
		}
		printf("POLLCOST prov=%s iters=%lu avg_ns=%.1f\n", prov, np, (double)(now_ns() - p0) / (double)np);
		fflush(stdout);
	}
	if (child > 0) {
		kill(child, SIGKILL);
		(void)waitpid(child, NULL, 0);
	}
	CHK(fi_close(&ep->fid));
	CHK(fi_close(&mr->fid));
	CHK(fi_close(&av->fid));
	CHK(fi_close(&txcq->fid));
	CHK(fi_close(&rxcq->fid));
	CHK(fi_close(&domain->fid));
	CHK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
