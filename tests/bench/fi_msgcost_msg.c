/*
 * fi_msgcost_msg: the CPU cost of one small operation on a connected MSG
 * endpoint pair, both ends in one process (fi_msgcost does the same for
 * RDM). A passive endpoint listens on ADDR:PORT, a second endpoint connects
 * to it, and the accepted endpoint is the other end; one iteration is then
 *
 *   send:   fi_recv at the server, fi_send at the client (completion
 *           requested), polls until both completions are read;
 *   inject: fi_recv at the server, fi_inject at the client, polls until the
 *           receive completes;
 *   write:  fi_write from the client into a buffer the server registered
 *           (FI_REMOTE_WRITE), polls until the write completes;
 *
 * through the public libfabric API only (any MSG provider that takes
 * FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED and FI_MR_PROV_KEY).
 *
 *   fi_msgcost_msg -a ADDR [-o PORT] [-p PROV] [-m send|inject|write] [-n ITERS] [-s SIZE]
 *
 * Under callgrind the counts start after the warm-up (CALLGRIND_ZERO_STATS,
 * when <valgrind/callgrind.h> is there) and stop after the timed loop
 * (CALLGRIND_TOGGLE_COLLECT): the connection set-up, the sort of the timings
 * and the tear-down stay out, so the count divided by ITERS is one
 * iteration.
 * Prints one line:
 *   MSGCOST prov=verbs ep=msg mode=send size=8 iters=N p50_ns=.. avg_ns=..
 * Part of ci/guest/msgcost.sh (MSGCOST_EP=msg; see docs/benchmarks.md).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "fi_msgcost_msg"
#include "bench.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define CHK(x) BENCH_CHK(x)

/* Polls cq until one completion; exits on an error or after too many spins. */
static void wait_one(struct fid_cq *cq, const char *what)
{
	struct fi_cq_entry c[8];
	uint64_t spins = 0;
	for (;;) {
		ssize_t n = fi_cq_read(cq, c, 1);
		if (n > 0)
			return;
		if (n != -FI_EAGAIN) {
			struct fi_cq_err_entry e = { 0 };
			if (n == -FI_EAVAIL && fi_cq_readerr(cq, &e, 0) > 0)
				fprintf(stderr, "fi_msgcost_msg: %s completion error %d (%s)\n", what, e.err,
					fi_strerror(e.err));
			else
				fprintf(stderr, "fi_msgcost_msg: fi_cq_read(%s) = %zd (%s)\n", what, n,
					fi_strerror((int)-n));
			exit(1);
		}
		if (++spins > 200000000u) {
			fprintf(stderr, "fi_msgcost_msg: no %s completion\n", what);
			exit(1);
		}
	}
}

/* Reads the EQ until an event of type want arrives; its entry goes to *out. */
static void wait_event(struct fid_eq *eq, uint32_t want, struct fi_eq_cm_entry *out)
{
	uint32_t ev;
	struct fi_eq_cm_entry entry;
	for (int tries = 0; tries < 600; tries++) {
		ssize_t n = fi_eq_sread(eq, &ev, &entry, sizeof(entry), 100, 0);
		if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT)
			continue;
		if (n < 0) {
			struct fi_eq_err_entry e = { 0 };
			if (n == -FI_EAVAIL && fi_eq_readerr(eq, &e, 0) > 0)
				fprintf(stderr, "fi_msgcost_msg: EQ error %d (%s)\n", e.err, fi_strerror(e.err));
			else
				fprintf(stderr, "fi_msgcost_msg: fi_eq_sread = %zd (%s)\n", n, fi_strerror((int)-n));
			exit(1);
		}
		if (ev != want) {
			fprintf(stderr, "fi_msgcost_msg: EQ event %u, expected %u\n", ev, want);
			exit(1);
		}
		if (out)
			*out = entry;
		return;
	}
	fprintf(stderr, "fi_msgcost_msg: no EQ event %u within 60 s\n", want);
	exit(1);
}

int main(int argc, char **argv)
{
	const char *prov = "verbs", *addr = NULL, *port = "47990", *mode = "send";
	unsigned long iters = 20000, size = 8;
	int o;
	while ((o = getopt(argc, argv, "a:o:p:m:n:s:")) != -1) {
		switch (o) {
		case 'a': addr = optarg; break;
		case 'o': port = optarg; break;
		case 'p': prov = optarg; break;
		case 'm': mode = optarg; break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		default: addr = NULL; optind = argc + 1; break;
		}
	}
	bool send = !strcmp(mode, "send"), inject = !strcmp(mode, "inject"), write = !strcmp(mode, "write");
	if (!addr || optind > argc || !(send || inject || write) || iters == 0) {
		fprintf(stderr, "usage: fi_msgcost_msg -a ADDR [-o PORT] [-p PROV] [-m send|inject|write] [-n ITERS] "
				"[-s SIZE]\n");
		return 2;
	}
	struct fi_info *hints = bench_hints(FI_EP_MSG, FI_MSG | FI_RMA, prov), *sinfo, *cinfo;
	CHK(fi_getinfo(FI_VERSION(1, 17), addr, port, FI_SOURCE, hints, &sinfo));
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_pep *pep;
	CHK(fi_fabric(sinfo->fabric_attr, &fabric, NULL));
	CHK(fi_domain(fabric, sinfo, &domain, NULL));
	struct fi_eq_attr ea = { .size = 16, .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_eq_open(fabric, &ea, &eq, NULL));
	CHK(fi_passive_ep(fabric, sinfo, &pep, NULL));
	CHK(fi_pep_bind(pep, &eq->fid, 0));
	CHK(fi_listen(pep));
	CHK(fi_getinfo(FI_VERSION(1, 17), addr, port, 0, hints, &cinfo));

	/* Each end: one CQ for both directions (CONTEXT format: libfabric's
	 * verbs offers no other on MSG). */
	struct fi_cq_attr ca = { .size = 1024, .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fid_cq *ccq, *scq;
	CHK(fi_cq_open(domain, &ca, &ccq, NULL));
	CHK(fi_cq_open(domain, &ca, &scq, NULL));
	struct fid_ep *cep, *sep;
	CHK(fi_endpoint(domain, cinfo, &cep, NULL));
	CHK(fi_ep_bind(cep, &eq->fid, 0));
	CHK(fi_ep_bind(cep, &ccq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(cep));
	CHK(fi_connect(cep, cinfo->dest_addr, NULL, 0));
	struct fi_eq_cm_entry req;
	wait_event(eq, FI_CONNREQ, &req);
	CHK(fi_endpoint(domain, req.info, &sep, NULL));
	CHK(fi_ep_bind(sep, &eq->fid, 0));
	CHK(fi_ep_bind(sep, &scq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(sep));
	CHK(fi_accept(sep, NULL, 0));
	wait_event(eq, FI_CONNECTED, NULL);
	wait_event(eq, FI_CONNECTED, NULL);

	size_t bl = size < 64 ? 64 : size;
	char *rb = calloc(1, bl), *sb = calloc(1, bl);
	struct fid_mr *rmr, *smr;
	CHK(fi_mr_reg(domain, rb, bl, FI_RECV | FI_REMOTE_WRITE, 0, 0, 0, &rmr, NULL));
	CHK(fi_mr_reg(domain, sb, bl, FI_SEND | FI_WRITE, 0, 0, 0, &smr, NULL));
	void *rdesc = fi_mr_desc(rmr), *sdesc = fi_mr_desc(smr);
	uint64_t rkey = fi_mr_key(rmr);
	if (inject && size > cinfo->tx_attr->inject_size) {
		fprintf(stderr, "fi_msgcost_msg: size %lu exceeds inject_size %zu\n", size, cinfo->tx_attr->inject_size);
		return 1;
	}
	struct fi_context rctx, sctx;
	uint64_t *t = calloc(iters, sizeof(*t));
	unsigned long warm = iters / 10 + 10;
	for (unsigned long i = 0; i < warm + iters; i++) {
		uint64_t t0 = now_ns();
		ssize_t rc;
		if (!write) {
			CHK(fi_recv(sep, rb, size, rdesc, 0, &rctx));
			do {
				rc = send ? fi_send(cep, sb, size, sdesc, 0, &sctx) : fi_inject(cep, sb, size, 0);
				if (rc == -FI_EAGAIN) {
					struct fi_cq_entry c[8];
					(void)fi_cq_read(ccq, c, 8);
				}
			} while (rc == -FI_EAGAIN);
			CHK(rc);
			wait_one(scq, "receive");
			if (send)
				wait_one(ccq, "send");
		} else {
			CHK(fi_write(cep, sb, size, sdesc, 0, (uint64_t)(uintptr_t)rb, rkey, &sctx));
			wait_one(ccq, "write");
		}
		if (i >= warm)
			t[i - warm] = now_ns() - t0;
		if (i + 1 == warm)
			CALLGRIND_ZERO_STATS;
	}
	/* Stop counting: the sort below grows faster than the iterations. */
	CALLGRIND_TOGGLE_COLLECT;
	double sum = 0;
	for (unsigned long i = 0; i < iters; i++)
		sum += (double)t[i];
	qsort(t, iters, sizeof(*t), cmp_u64);
	printf("MSGCOST prov=%s ep=msg mode=%s size=%lu iters=%lu p50_ns=%llu avg_ns=%.0f\n", prov, mode, size, iters,
	       (unsigned long long)t[iters / 2], sum / (double)iters);
	fflush(stdout);
	CHK(fi_shutdown(cep, 0));
	CHK(fi_close(&cep->fid));
	CHK(fi_close(&sep->fid));
	CHK(fi_close(&pep->fid));
	CHK(fi_close(&rmr->fid));
	CHK(fi_close(&smr->fid));
	CHK(fi_close(&ccq->fid));
	CHK(fi_close(&scq->fid));
	CHK(fi_close(&eq->fid));
	CHK(fi_close(&domain->fid));
	CHK(fi_close(&fabric->fid));
	fi_freeinfo(req.info);
	fi_freeinfo(cinfo);
	fi_freeinfo(sinfo);
	fi_freeinfo(hints);
	free(t);
	free(rb);
	free(sb);
	return 0;
}
