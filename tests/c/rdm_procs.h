/*
 * More than one client process (rdm_multi, rdm_unexpected, rdm_peerkill).
 *
 * test_start() forks the usual client (child 0, talking over the oob
 * channel). Right after it, before any libfabric call (so no verbs resources,
 * no registered memory is inherited), the server forks the extra clients
 * with xspawn(): each has its own socketpair to the server. In an extra
 * client is_child is true, so CHK/EXPECT/fail end it with status 1 and its
 * reason on stderr; it notices the server going away in check_child() (its
 * parent pid changes), which the CQ helpers call while waiting.
 *
 * Channel calls name the client: chan 0 is the oob channel of child 0,
 * chan k > 0 the socketpair of extra client k. In a client, CHAN_SELF is its
 * own channel to the server.
 */
#ifndef RSVERBS_CTEST_RDM_PROCS_H
#define RSVERBS_CTEST_RDM_PROCS_H

#include "rdm_common.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define XMAX 8
#define CHAN_SELF (-1)

struct xproc {
	pid_t pid;
	int fd;
	bool reaped;
	int status;
};

static struct xproc xprocs[XMAX]; /* server: index 1.. are the extra clients */
static int xnprocs = 1;           /* server: next index */
static int xself_fd = -1;         /* extra client: its channel */
static int xself_idx;             /* client: its index (0 = oob child) */

/* Server: fork extra client number xnprocs. Returns its index in the server,
 * 0 in the new client (where xself_idx is set). */
static inline int xspawn(void)
{
	int sv[2];
	if (xnprocs >= XMAX)
		fail("too many client processes");
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair failed: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		fail("fork failed: %s", strerror(errno));
	int idx = xnprocs++;
	if (pid == 0) {
		is_child = true;
		close(sv[0]);
		xself_fd = sv[1];
		xself_idx = idx;
		alarm(TEST_ALARM_SECS - 10);
		return 0;
	}
	close(sv[1]);
	xprocs[idx].pid = pid;
	xprocs[idx].fd = sv[0];
	return idx;
}

/* Server: fail if an extra client exited with an error (dead ones that were
 * killed on purpose are marked reaped by the caller). */
static inline void xcheck(void)
{
	check_child();
	for (int k = 1; k < xnprocs; k++) {
		struct xproc *p = &xprocs[k];
		if (p->reaped || p->pid <= 0)
			continue;
		int st;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->reaped = true;
			p->status = st;
			if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
				fail("client %d (pid %d) failed: %s %d (its reason is on stderr above)", k, (int)p->pid,
				     WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		}
	}
}

/* Server: wait for every extra client to exit successfully. */
static inline void xwait_all(void)
{
	uint64_t start = now_ms();
	for (int k = 1; k < xnprocs; k++) {
		while (!xprocs[k].reaped) {
			xcheck();
			if (now_ms() - start > 60000)
				fail("client %d did not exit", k);
			sleep_ms(5);
		}
	}
}

static inline int chan_fd(int k)
{
	if (k == CHAN_SELF)
		k = xself_idx;
	if (k == 0)
		return -1;
	return is_child ? xself_fd : xprocs[k].fd;
}

static inline void chan_send(int k, const void *buf, size_t len)
{
	int fd = chan_fd(k);
	if (fd < 0) {
		oob_send(buf, len);
		return;
	}
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("channel %d: write failed: %s", k, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Progress hook while waiting on a channel (e.g. read a CQ with count 0). */
static void (*chan_idle)(void);

static inline void chan_recv(int k, void *buf, size_t len)
{
	int fd = chan_fd(k);
	if (fd < 0 && !chan_idle) {
		oob_recv(buf, len);
		return;
	}
	if (fd < 0)
		fail("chan_recv: the oob channel cannot be polled with an idle hook");
	char *p = buf;
	uint64_t start = now_ms();
	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = poll(&pfd, 1, chan_idle ? 1 : 100);
		if (is_child)
			check_child();
		else
			xcheck();
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("channel %d: poll failed: %s", k, strerror(errno));
		if (r == 0) {
			if (chan_idle)
				chan_idle();
			if (now_ms() - start > 100000)
				fail("channel %d: timed out waiting for the peer", k);
			continue;
		}
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("channel %d: read failed: %s", k, strerror(errno));
		if (n == 0)
			fail("channel %d closed by the peer", k);
		p += n;
		len -= (size_t)n;
	}
}

static inline void chan_signal(int k, uint8_t tag)
{
	chan_send(k, &tag, 1);
}

static inline void chan_wait(int k, uint8_t tag)
{
	uint8_t got;
	chan_recv(k, &got, 1);
	if (got != tag)
		fail("channel %d protocol: expected tag %u, got %u", k, tag, got);
}

/* Send / receive an endpoint name. */
static inline void chan_send_name(int k, const void *name, size_t len)
{
	uint32_t l = (uint32_t)len;
	chan_send(k, &l, sizeof(l));
	chan_send(k, name, len);
}

static inline size_t chan_recv_name(int k, void *name, size_t cap)
{
	uint32_t l;
	chan_recv(k, &l, sizeof(l));
	EXPECT(l > 0 && l <= cap, "channel %d: name length %u", k, l);
	chan_recv(k, name, l);
	return l;
}

static inline fi_addr_t av_insert_one(struct fid_av *av, const void *name)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int n = (int)CHK(fi_av_insert(av, name, 1, &a, 0, NULL));
	EXPECT(n == 1 && a != FI_ADDR_NOTAVAIL, "fi_av_insert: %d, fi_addr %#llx", n, (unsigned long long)a);
	return a;
}

/* An extra client standing in for a dead one: the server sends it the dead
 * client's endpoint name (IPv4) and its own. Opens an endpoint on the dead
 * one's address (fi_getinfo(node, service, FI_SOURCE); its name must be the
 * same), inserts the server, allocates and registers `blen` bytes. Returns
 * the server's fi_addr. */
static inline fi_addr_t rdm_open_restarted(struct rctx *r, uint64_t caps, size_t blen, uint8_t **buf, struct fid_mr **mr,
					   void **desc)
{
	char name[64], srv[64];
	size_t namelen = chan_recv_name(CHAN_SELF, name, sizeof(name));
	chan_recv_name(CHAN_SELF, srv, sizeof(srv));
	const struct sockaddr_in *sin = (const void *)name;
	char host[64], svc[16];
	inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
	snprintf(svc, sizeof(svc), "%u", ntohs(sin->sin_port));
	memset(r, 0, sizeof(*r));
	r->hints = rdm_hints(caps);
	CHK(fi_getinfo(API_VERSION, host, svc, FI_SOURCE, r->hints, &r->info));
	CHK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CHK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	rdm_open_ep(r);
	EXPECT(r->namelen == namelen && !memcmp(r->name, name, namelen), "the new endpoint is not on %s:%s", host, svc);
	fi_addr_t s = av_insert_one(r->av, srv);
	*buf = alloc_buf(blen);
	*mr = rdm_mr_reg(r, *buf, blen, FI_SEND | FI_RECV);
	*desc = fi_mr_desc(*mr);
	return s;
}

/* The server forks two extra clients. Returns the caller's role: 0 in the
 * server and in child 0 (*srv tells them apart), 1 and 2 in the extra ones
 * (where *srv becomes false). */
static inline int xspawn_two(bool *srv)
{
	if (!*srv)
		return 0;
	if (xspawn() == 0) {
		*srv = false;
		return 1;
	}
	if (xspawn() == 0) {
		*srv = false;
		return 2;
	}
	return 0;
}

/* An extra client's last steps: tell the server (tag `tag`), keep making
 * progress for `ms` (the server may still be reading our memory), close and
 * exit. */
static inline __attribute__((noreturn)) void xclient_end(struct rctx *r, struct fid_mr *mr, void *buf, uint8_t tag, int ms)
{
	rdm_progress_start(r);
	chan_signal(CHAN_SELF, tag);
	sleep_ms(ms);
	rdm_progress_stop();
	mr_close(mr);
	rdm_close(r);
	free(buf);
	child_done();
}

/* One tagged message from `from` into `b` (registered, `desc`) within
 * WAIT_MS: its source (FI_SOURCE), length, tag and bytes (pattern `seed`)
 * are checked. */
static inline void rdm_recv_check(struct rctx *r, uint8_t *b, void *desc, fi_addr_t from, uint64_t tag, size_t len,
				  uint32_t seed, const char *what)
{
	memset(b, 0, len);
	RETRY(r, fi_trecv(r->ep, b, len, desc, from, tag, 0, (void *)0x77));
	struct fi_cq_tagged_entry e;
	fi_addr_t src = rdm_expect(r->rxcq, (void *)0x77, FI_RECV | FI_TAGGED, &e, what);
	EXPECT(src == from && e.len == len && e.tag == tag, "%s: src %#llx len %zu tag %#llx", what,
	       (unsigned long long)src, e.len, (unsigned long long)e.tag);
	expect_pattern(b, len, seed, what);
}

/* One tagged message of `len` bytes (pattern `seed`) from `b` to `to`, and
 * its completion. */
static inline void rdm_send_check(struct rctx *r, uint8_t *b, void *desc, fi_addr_t to, uint64_t tag, size_t len,
				  uint32_t seed, const char *what)
{
	fill_pattern(b, len, seed);
	RETRY(r, fi_tsend(r->ep, b, len, desc, to, tag, (void *)0x78));
	rdm_expect(r->txcq, (void *)0x78, FI_SEND, NULL, what);
}

#endif
