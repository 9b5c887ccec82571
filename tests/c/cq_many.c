/*
 * cq_many: fabtests' fi_cq_test cq_open_close_simultaneous, with the
 * resources it needs measured.  One process, no fork.
 * LIBS: -libverbs
 *
 * Asserts:
 *  - domain_attr->cq_cnt is what the device offers (ibv_query_device
 *    max_cq of the info's domain), as libfabric's verbs reports it;
 *  - a CQ opened with FI_WAIT_NONE takes no file descriptor (64 of them
 *    leave /proc/self/fd as it was) — before the fix every CQ opened a
 *    completion channel, and fi_cq_test failed with "ibv_create_comp_channel
 *    failed: errno 24" once the 1024 fds were gone;
 *  - a CQ opened with FI_WAIT_UNSPEC has its wait fd (fi_control
 *    FI_GETWAIT);
 *  - min(cq_cnt, 32768) CQs open at once, each first with FI_WAIT_UNSPEC
 *    and, when that fails (fds run out), with FI_WAIT_NONE, exactly as
 *    fi_cq_test does; all of them close;
 *  - fi_cq_signal (fi_cq_test's cq_signal): fi_cq_sread with no time-out
 *    (-1) after fi_cq_signal returns -FI_EAGAIN at once, and a thread
 *    blocked in fi_cq_sread(-1) returns -FI_EAGAIN when another calls
 *    fi_cq_signal (before the fix the signal was cleared by the reader's
 *    own arming and sread slept its whole time-out: "signal ignored"; here
 *    the watchdog would end the test);
 *  - their memory is modest: MemAvailable (kernel memory included: the
 *    verbs CQ ring of rxe is kernel memory mapped into the process) drops by
 *    less than 32 KiB per CQ while they are open (before the fix a default
 *    CQ made a 2048-entry verbs CQ, about 512 KiB on rxe).
 *
 * Output: PASS cq_many / FAIL cq_many: <reason>; the per-CQ figures on stderr.
 */
#include "common.h"

#include <dirent.h>
#include <pthread.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <unistd.h>

static const char *name = "cq_many";

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail("opendir /proc/self/fd: %s", strerror(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

static long mem_available_kib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		fail("fopen /proc/meminfo: %s", strerror(errno));
	char line[256];
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &v) == 1)
			break;
	fclose(f);
	EXPECT(v > 0, "no MemAvailable in /proc/meminfo");
	return v;
}

static int open_cq(struct fid_domain *dom, enum fi_wait_obj w, struct fid_cq **cq)
{
	struct fi_cq_attr a = { .size = 0, .format = FI_CQ_FORMAT_UNSPEC, .wait_obj = w };
	return fi_cq_open(dom, &a, cq, NULL);
}

static int device_max_cq(const char *dev)
{
	int n = 0, max = -1;
	struct ibv_device **l = ibv_get_device_list(&n);
	EXPECT(l != NULL, "ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(l[i]), dev))
			continue;
		struct ibv_context *c = ibv_open_device(l[i]);
		EXPECT(c != NULL, "ibv_open_device(%s)", dev);
		struct ibv_device_attr a;
		EXPECT(ibv_query_device(c, &a) == 0, "ibv_query_device(%s)", dev);
		max = a.max_cq;
		ibv_close_device(c);
	}
	ibv_free_device_list(l);
	EXPECT(max > 0, "device %s not found", dev);
	return max;
}

static void *sread_forever(void *arg)
{
	struct fi_cq_entry e;
	return (void *)(intptr_t)fi_cq_sread((struct fid_cq *)arg, &e, 1, NULL, -1);
}

static void cq_signal_checks(struct fid_domain *dom)
{
	struct fid_cq *cq;
	struct fi_cq_attr a = { .size = 1, .format = FI_CQ_FORMAT_UNSPEC, .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_cq_open(dom, &a, &cq, NULL));
	CHK(fi_cq_signal(cq));
	struct fi_cq_entry e;
	ssize_t r = fi_cq_sread(cq, &e, 1, NULL, -1);
	EXPECT(r == -FI_EAGAIN || r == -FI_ECANCELED, "fi_cq_sread(-1) after fi_cq_signal returned %zd", r);
	/* a reader already blocked */
	pthread_t th;
	EXPECT(pthread_create(&th, NULL, sread_forever, cq) == 0, "pthread_create");
	sleep_ms(200); /* let it block (if it has not yet, the signal still ends its sread) */
	CHK(fi_cq_signal(cq));
	void *res;
	pthread_join(th, &res);
	r = (ssize_t)(intptr_t)res;
	EXPECT(r == -FI_EAGAIN || r == -FI_ECANCELED, "blocked fi_cq_sread(-1) after fi_cq_signal returned %zd", r);
	r = fi_cq_read(cq, &e, 1);
	EXPECT(r == -FI_EAGAIN, "fi_cq_read after the signals returned %zd", r);
	CHK(fi_close(&cq->fid));
	logmsg("fi_cq_signal: fi_cq_sread(-1) returned -FI_EAGAIN, before and while blocked");
}

int main(void)
{
	test_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(TEST_ALARM_SECS);

	struct fi_info *hints = make_hints(FI_MSG, FI_CONTEXT), *info = NULL;
	CHK(fi_getinfo(API_VERSION, NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab;
	struct fid_domain *dom;
	CHK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHK(fi_domain(fab, info, &dom, NULL));

	int max_cq = device_max_cq(info->domain_attr->name);
	logmsg("domain %s: cq_cnt %zu, device max_cq %d", info->domain_attr->name, info->domain_attr->cq_cnt,
	       max_cq);
	EXPECT(info->domain_attr->cq_cnt == (size_t)max_cq, "cq_cnt %zu, the device offers %d",
	       info->domain_attr->cq_cnt, max_cq);

	cq_signal_checks(dom);

	/* FI_WAIT_NONE: no fd */
	struct fid_cq *few[64];
	int fd0 = count_fds();
	for (int i = 0; i < 64; i++)
		CHK(open_cq(dom, FI_WAIT_NONE, &few[i]));
	int fd1 = count_fds();
	logmsg("64 FI_WAIT_NONE CQs: %d fds before, %d after", fd0, fd1);
	EXPECT(fd1 == fd0, "64 FI_WAIT_NONE CQs took %d file descriptors", fd1 - fd0);
	for (int i = 0; i < 64; i++)
		CHK(fi_close(&few[i]->fid));

	/* FI_WAIT_UNSPEC: a wait fd */
	struct fid_cq *w;
	CHK(open_cq(dom, FI_WAIT_UNSPEC, &w));
	int wfd = -1;
	CHK(fi_control(&w->fid, FI_GETWAIT, &wfd));
	EXPECT(wfd >= 0, "FI_GETWAIT gave fd %d", wfd);
	CHK(fi_close(&w->fid));

	/* fi_cq_test's cq_open_close_simultaneous */
	size_t count = info->domain_attr->cq_cnt < 32768 ? info->domain_attr->cq_cnt : 32768;
	struct fid_cq **cqs = calloc(count, sizeof(*cqs));
	EXPECT(cqs != NULL, "calloc");
	long mem0 = mem_available_kib();
	size_t opened, with_wait = 0;
	int ret = 0;
	for (opened = 0; opened < count && !ret; opened++) {
		ret = open_cq(dom, FI_WAIT_UNSPEC, &cqs[opened]);
		if (ret)
			ret = open_cq(dom, FI_WAIT_NONE, &cqs[opened]);
		else
			with_wait++;
	}
	EXPECT(!ret, "fi_cq_open failed after %zu CQs (cq_cnt %zu): %d (%s)", opened - 1,
	       info->domain_attr->cq_cnt, ret, fi_strerror(-ret));
	long mem1 = mem_available_kib();
	long per = (mem0 - mem1) * 1024 / (long)count;
	logmsg("%zu CQs open (%zu with a wait fd); MemAvailable %ld -> %ld KiB: %ld bytes per CQ", opened,
	       with_wait, mem0, mem1, per);
	EXPECT(per < 32 * 1024, "%ld bytes of memory per CQ", per);
	for (size_t i = 0; i < opened; i++)
		CHK(fi_close(&cqs[i]->fid));
	free(cqs);
	int fd2 = count_fds();
	EXPECT(fd2 == fd0, "after closing every CQ %d fds are open, %d before", fd2, fd0);

	CHK(fi_close(&dom->fid));
	CHK(fi_close(&fab->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("PASS %s\n", name);
	return 0;
}
