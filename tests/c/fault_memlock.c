/*
 * fault_memlock: memory-lock limits too low for a registration.
 *
 * Run it with a small RLIMIT_MEMLOCK and without CAP_IPC_LOCK (root ignores
 * the limit), e.g. as the device suite does:
 *   setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
 *       bash -c 'ulimit -l 256; exec fault_memlock'
 * It checks the limit is in force (getrlimit), then:
 *   1  fi_mr_reg of a 64 MiB buffer fails with a negative FI_E* code (and
 *      does not crash); a 4 KiB registration still works, and so does the
 *      domain afterwards;
 *   2  an RDM endpoint, whose bounce buffers (32 x 16 KiB per peer) cannot be
 *      pinned, gives a clear error at fi_enable, or at its first use: a send
 *      to itself completes with an error entry (or the call fails) within
 *      WAIT_MS, never a success, never a hang.
 * Single process; prints PASS fault_memlock / FAIL fault_memlock: why.
 */
#include "rdm_common.h"

#include <signal.h>
#include <sys/resource.h>

static void on_alarm(int sig)
{
	(void)sig;
	fail("watchdog expired");
}

int main(void)
{
	test_name = "fault_memlock";
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	alarm(TEST_ALARM_SECS);

	struct rlimit rl;
	EXPECT(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	EXPECT(rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= 1024 * 1024,
	       "RLIMIT_MEMLOCK is %llu: run me with ulimit -l 256 (see the header)", (unsigned long long)rl.rlim_cur);
	logmsg("RLIMIT_MEMLOCK %llu bytes", (unsigned long long)rl.rlim_cur);

	/* 1: a big registration on a MSG domain */
	struct tctx t;
	tctx_init(&t);
	t.hints = make_hints(FI_MSG | FI_RMA, 0);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, t.hints, &t.info));
	CHK(fi_fabric(t.info->fabric_attr, &t.fabric, NULL));
	CHK(fi_domain(t.fabric, t.info, &t.domain, NULL));
	size_t big = 64u << 20;
	uint8_t *b = alloc_buf(big);
	memset(b, 1, big); /* fault the pages in: only pinning can fail */
	struct fid_mr *mr = NULL;
	int r = fi_mr_reg(t.domain, b, big, FI_SEND | FI_RECV | FI_REMOTE_READ, 0, 1, 0, &mr, NULL);
	logmsg("fi_mr_reg(64 MiB) with the limit: %d (%s)", r, fi_strerror(-r));
	EXPECT(r < 0, "fi_mr_reg of 64 MiB succeeded beyond RLIMIT_MEMLOCK (ran with CAP_IPC_LOCK?)");
	EXPECT(r == -FI_ENOMEM || r == -FI_EPERM || r == -FI_EACCES || r == -FI_ENOSPC,
	       "fi_mr_reg of 64 MiB: %d (%s); want -FI_ENOMEM/-FI_EPERM/-FI_EACCES/-FI_ENOSPC", r, fi_strerror(-r));
	EXPECT(mr == NULL, "a failed fi_mr_reg left an MR behind");
	r = fi_mr_reg(t.domain, b, 4096, FI_SEND | FI_RECV, 0, 2, 0, &mr, NULL);
	EXPECT(r == 0, "fi_mr_reg of 4 KiB after the failure: %d (%s)", r, fi_strerror(-r));
	CHK(fi_close(&mr->fid));
	free(b);
	CHK(fi_close(&t.domain->fid));
	t.domain = NULL;
	CHK(fi_close(&t.fabric->fid));
	t.fabric = NULL;
	fi_freeinfo(t.info);
	fi_freeinfo(t.hints);

	/* 2: an RDM endpoint whose internal registrations cannot be pinned */
	struct rctx rc;
	memset(&rc, 0, sizeof(rc));
	rc.hints = rdm_hints(FI_MSG);
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, rc.hints, &rc.info));
	CHK(fi_fabric(rc.info->fabric_attr, &rc.fabric, NULL));
	CHK(fi_domain(rc.fabric, rc.info, &rc.domain, NULL));
	struct fi_cq_attr ca = {.size = 64, .format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	CHK(fi_endpoint(rc.domain, rc.info, &rc.ep, NULL));
	CHK(fi_cq_open(rc.domain, &ca, &rc.txcq, NULL));
	CHK(fi_cq_open(rc.domain, &ca, &rc.rxcq, NULL));
	CHK(fi_av_open(rc.domain, &aa, &rc.av, NULL));
	CHK(fi_ep_bind(rc.ep, &rc.av->fid, 0));
	CHK(fi_ep_bind(rc.ep, &rc.txcq->fid, FI_TRANSMIT));
	CHK(fi_ep_bind(rc.ep, &rc.rxcq->fid, FI_RECV));
	r = fi_enable(rc.ep);
	if (r < 0) {
		logmsg("RDM fi_enable with the limit: %d (%s): refused at enable", r, fi_strerror(-r));
		EXPECT(r != -FI_EOTHER, "fi_enable: an unspecific -FI_EOTHER");
	} else {
		rc.namelen = sizeof(rc.name);
		CHK(fi_getname(&rc.ep->fid, rc.name, &rc.namelen));
		fi_addr_t self;
		EXPECT(fi_av_insert(rc.av, rc.name, 1, &self, 0, NULL) == 1, "fi_av_insert");
		static char msg[64] = "hello";
		ssize_t s = fi_inject(rc.ep, msg, sizeof(msg), self);
		if (s < 0) {
			logmsg("RDM first use (fi_inject to itself) with the limit: %zd (%s)", s, fi_strerror((int)-s));
			EXPECT(s != -FI_EAGAIN, "fi_inject: -FI_EAGAIN is not an error report");
		} else {
			/* The connection setup fails: the queued send gets an error entry. */
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;
			fi_addr_t src;
			int ok = rdm_read_from(rc.txcq, &e, &src, &err, WAIT_MS, "first send under the limit");
			EXPECT(!ok, "the first send succeeded although its connection's buffers cannot be pinned");
			logmsg("RDM first use with the limit: send error entry %d (%s), prov_errno %d", err.err,
			       fi_strerror(err.err), err.prov_errno);
			EXPECT(err.err > 0, "error entry without an error code");
		}
	}
	r = fi_close(&rc.ep->fid);
	EXPECT(r == 0, "fi_close(ep) after the failure: %d", r);
	rc.ep = NULL;
	rdm_close(&rc);
	printf("PASS %s\n", test_name);
	return 0;
}
