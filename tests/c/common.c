/* Shared helpers for the rsverbs C operation tests.  See common.h. */
#include "common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *test_name = "unnamed";
bool is_child;

static int oob_fd = -1;
static int res_fd = -1;   /* child: write end; parent: read end */
static pid_t child_pid = -1;
static pid_t parent_pid = -1;
static bool child_reaped;
static int child_status;

/* ---- time ---------------------------------------------------------------- */

uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- logging / failure ----------------------------------------------------- */

static const char *role(void)
{
	return is_child ? "client" : "server";
}

void logmsg(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%s] %s\n", role(), buf);
	fflush(stderr);
}

/* Read whatever the child reported through the result pipe. */
static void read_child_reason(char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	if (res_fd < 0)
		return;
	int fl = fcntl(res_fd, F_GETFL);
	if (fl >= 0)
		fcntl(res_fd, F_SETFL, fl | O_NONBLOCK);
	while (off + 1 < len) {
		ssize_t n = read(res_fd, buf + off, len - 1 - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
}

static void describe_child_status(int st, char *buf, size_t len)
{
	char reason[900];
	read_child_reason(reason, sizeof(reason));
	if (WIFEXITED(st))
		snprintf(buf, len, "client exited with status %d%s%s", WEXITSTATUS(st),
			 reason[0] ? ": " : "", reason);
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "client killed by signal %d%s%s", WTERMSIG(st),
			 reason[0] ? ": " : "", reason);
	else
		snprintf(buf, len, "client ended with wait status 0x%x", st);
}

static bool child_failed_status(int st)
{
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void final_fail(const char *reason) __attribute__((noreturn));
static void final_fail(const char *reason)
{
	fflush(stderr);
	printf("FAIL %s: %s\n", test_name, reason);
	fflush(stdout);
	_exit(1);
}

void fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	fprintf(stderr, "[%s] FAIL: %s\n", role(), msg);
	fflush(stderr);

	if (is_child) {
		if (res_fd >= 0) {
			ssize_t r = write(res_fd, msg, strlen(msg));
			(void)r;
		}
		_exit(1);
	}

	/* Parent: include the client's reason if it already failed. */
	char out[2200];
	char cdesc[1000] = "";
	if (child_pid > 0 && !child_reaped) {
		int st;
		pid_t r = waitpid(child_pid, &st, WNOHANG);
		if (r == child_pid) {
			child_reaped = true;
			child_status = st;
			if (child_failed_status(st))
				describe_child_status(st, cdesc, sizeof(cdesc));
		} else {
			kill(child_pid, SIGKILL);
			waitpid(child_pid, &st, 0);
			child_reaped = true;
		}
	}
	if (cdesc[0])
		snprintf(out, sizeof(out), "server: %s (%s)", msg, cdesc);
	else
		snprintf(out, sizeof(out), "server: %s", msg);
	final_fail(out);
}

static int ndeviations;
static char deviations[1024];

void deviation(const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%s] MAN-PAGE DEVIATION: %s\n", role(), msg);
	fflush(stderr);
	size_t off = strlen(deviations);
	if (off + 4 < sizeof(deviations))
		snprintf(deviations + off, sizeof(deviations) - off, "%s%s", off ? "; " : "", msg);
	ndeviations++;
}

static void on_alarm(int sig)
{
	(void)sig;
	if (is_child) {
		static const char m[] = "client watchdog expired (no progress for the alarm period)";
		ssize_t r = write(res_fd, m, sizeof(m) - 1);
		(void)r;
		_exit(1);
	}
	char out[1200];
	char cdesc[1000] = "";
	if (child_pid > 0 && !child_reaped) {
		int st;
		/* give the child's own watchdog a moment to report */
		if (waitpid(child_pid, &st, WNOHANG) == child_pid) {
			child_reaped = true;
			if (child_failed_status(st))
				describe_child_status(st, cdesc, sizeof(cdesc));
		} else {
			kill(child_pid, SIGKILL);
			waitpid(child_pid, &st, 0);
			child_reaped = true;
		}
	}
	snprintf(out, sizeof(out), "server watchdog expired after %d s%s%s%s",
		 TEST_ALARM_SECS, cdesc[0] ? " (" : "", cdesc, cdesc[0] ? ")" : "");
	final_fail(out);
}

/* ---- process structure ---------------------------------------------------- */

const char *test_name_env(const char *dflt)
{
	const char *tn = getenv("TEST_NAME");
	return tn && *tn ? tn : dflt;
}

bool test_start(const char *name)
{
	int sv[2], rp[2];

	test_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(TEST_ALARM_SECS);

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(rp)) {
		final_fail("socketpair/pipe failed");
	}
	parent_pid = getpid();
	fflush(stdout);
	fflush(stderr);
	child_pid = fork();
	if (child_pid < 0)
		final_fail("fork failed");
	if (child_pid == 0) {
		is_child = true;
		close(sv[0]);
		close(rp[0]);
		oob_fd = sv[1];
		res_fd = rp[1];
		/* the child's watchdog fires first so its reason reaches the parent */
		alarm(TEST_ALARM_SECS - 10);
		return false;
	}
	close(sv[1]);
	close(rp[1]);
	oob_fd = sv[0];
	res_fd = rp[0];
	return true;
}

void check_child(void)
{
	if (is_child) {
		if (getppid() != parent_pid) {
			fprintf(stderr, "[client] parent went away, exiting\n");
			_exit(1);
		}
		return;
	}
	if (child_reaped || child_pid <= 0)
		return;
	int st;
	pid_t r = waitpid(child_pid, &st, WNOHANG);
	if (r == child_pid) {
		child_reaped = true;
		child_status = st;
		if (child_failed_status(st)) {
			char d[1100];
			describe_child_status(st, d, sizeof(d));
			final_fail(d);
		}
	}
}

bool child_exited_ok(void)
{
	check_child();
	return child_reaped && !child_failed_status(child_status);
}

pid_t test_child_pid(void)
{
	return child_pid;
}

void test_forget_child(void)
{
	child_reaped = true;
	child_status = 0;
}

void test_rebind_child(int fd)
{
	is_child = true;
	parent_pid = getppid();
	oob_fd = fd;
	res_fd = -1;
	ndeviations = 0;
	alarm(TEST_ALARM_SECS - 10);
}

void test_finish(void)
{
	uint64_t start = now_ms();
	while (!child_reaped) {
		check_child();
		if (child_reaped)
			break;
		if (now_ms() - start > 60000) {
			kill(child_pid, SIGKILL);
			waitpid(child_pid, NULL, 0);
			child_reaped = true;
			final_fail("client did not exit within 60 s after the server finished");
		}
		sleep_ms(5);
	}
	if (ndeviations) {
		char out[1200];
		snprintf(out, sizeof(out), "server: %d man-page deviation(s): %s", ndeviations,
			 deviations);
		final_fail(out);
	}
	fflush(stderr);
	printf("PASS %s\n", test_name);
	fflush(stdout);
	exit(0);
}

void child_done(void)
{
	if (ndeviations) {
		char out[1200];
		snprintf(out, sizeof(out), "%d man-page deviation(s): %s", ndeviations, deviations);
		if (res_fd >= 0) {
			ssize_t r = write(res_fd, out, strlen(out));
			(void)r;
		}
		fflush(stderr);
		exit(1);
	}
	fflush(stderr);
	exit(0);
}

/* ---- out-of-band channel ---------------------------------------------------- */

void oob_send(const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(oob_fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			check_child();
			fail("oob write failed: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

void oob_recv(void *buf, size_t len)
{
	char *p = buf;
	uint64_t start = now_ms();
	while (len) {
		struct pollfd pfd = { .fd = oob_fd, .events = POLLIN };
		int r = poll(&pfd, 1, 100);
		check_child();
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fail("oob poll failed: %s", strerror(errno));
		}
		if (r == 0) {
			if (now_ms() - start > 100000)
				fail("timed out waiting for the peer on the oob channel");
			continue;
		}
		ssize_t n = read(oob_fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail("oob read failed: %s", strerror(errno));
		}
		if (n == 0) {
			/* peer closed: in the parent give the child's exit a chance
			 * to be reported with its own reason */
			for (int i = 0; i < 400 && !is_child; i++) {
				check_child();
				if (child_reaped)
					break;
				sleep_ms(5);
			}
			fail("oob channel closed by the peer");
		}
		p += n;
		len -= (size_t)n;
	}
}

void oob_signal(uint8_t tag)
{
	oob_send(&tag, 1);
}

void oob_wait(uint8_t tag)
{
	uint8_t got;
	oob_recv(&got, 1);
	if (got != tag)
		fail("oob protocol: expected tag %u, got %u", tag, got);
}

void oob_barrier(bool server, uint8_t a, uint8_t b)
{
	if (server) {
		oob_wait(a);
		oob_signal(b);
	} else {
		oob_signal(a);
		oob_wait(b);
	}
}

/* ---- strings ----------------------------------------------------------------- */

const char *addr_str(const void *addr, size_t len, char *buf, size_t blen)
{
	const struct sockaddr *sa = addr;
	char ip[INET6_ADDRSTRLEN];
	if (!addr || len < sizeof(sa->sa_family)) {
		snprintf(buf, blen, "(none, len %zu)", len);
	} else if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = addr;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, blen, "%s:%u", ip, ntohs(s->sin_port));
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = addr;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, blen, "[%s]:%u", ip, ntohs(s->sin6_port));
	} else {
		snprintf(buf, blen, "(family %d, len %zu)", sa->sa_family, len);
	}
	return buf;
}

const char *ev_name(uint32_t event)
{
	switch (event) {
	case FI_NOTIFY: return "FI_NOTIFY";
	case FI_CONNREQ: return "FI_CONNREQ";
	case FI_CONNECTED: return "FI_CONNECTED";
	case FI_SHUTDOWN: return "FI_SHUTDOWN";
	case FI_MR_COMPLETE: return "FI_MR_COMPLETE";
	case FI_AV_COMPLETE: return "FI_AV_COMPLETE";
	case FI_JOIN_COMPLETE: return "FI_JOIN_COMPLETE";
	default: return "unknown-event";
	}
}

const char *flags_str(uint64_t flags, char *buf, size_t len)
{
	static const struct { uint64_t f; const char *n; } names[] = {
		{ FI_MSG, "MSG" }, { FI_RMA, "RMA" }, { FI_TAGGED, "TAGGED" },
		{ FI_ATOMIC, "ATOMIC" }, { FI_READ, "READ" }, { FI_WRITE, "WRITE" },
		{ FI_RECV, "RECV" }, { FI_SEND, "SEND" },
		{ FI_REMOTE_READ, "REMOTE_READ" }, { FI_REMOTE_WRITE, "REMOTE_WRITE" },
		{ FI_REMOTE_CQ_DATA, "REMOTE_CQ_DATA" }, { FI_MULTI_RECV, "MULTI_RECV" },
		{ FI_MORE, "MORE" }, { FI_CLAIM, "CLAIM" },
	};
	size_t off = 0;
	buf[0] = '\0';
	uint64_t rest = flags;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (flags & names[i].f) {
			off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s",
						off ? "|" : "", names[i].n);
			rest &= ~names[i].f;
		}
	}
	if (rest)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s0x%llx",
					off ? "|" : "", (unsigned long long)rest);
	if (!off)
		snprintf(buf, len, "0");
	return buf;
}

void eq_expect(struct tctx *t, uint32_t event, struct fid_ep *ep, const char *what)
{
	union eqbuf u;
	uint32_t ev = 0;
	eq_wait(t, &ev, &u, sizeof(u), WAIT_MS);
	EXPECT(ev == event && u.e.fid == &ep->fid, "%s: %s fid %p, expected %s of ep %p", what,
	       ev_name(ev), (void *)u.e.fid, ev_name(event), (void *)&ep->fid);
}

const char *eq_err_str(struct fid_eq *eq, const struct fi_eq_err_entry *e, char *buf,
		       size_t len)
{
	char pbuf[256] = "";
	const char *ps = fi_eq_strerror(eq, e->prov_errno, e->err_data, pbuf, sizeof(pbuf));
	snprintf(buf, len, "err=%d (%s) prov_errno=%d (%s) fid=%p err_data_size=%zu",
		 e->err, fi_strerror(e->err), e->prov_errno, ps ? ps : "(null)",
		 (void *)e->fid, e->err_data_size);
	return buf;
}

const char *cq_err_str(struct fid_cq *cq, const struct fi_cq_err_entry *e, char *buf,
		       size_t len)
{
	char pbuf[256] = "";
	char fb[160];
	const char *ps = fi_cq_strerror(cq, e->prov_errno, e->err_data, pbuf, sizeof(pbuf));
	snprintf(buf, len,
		 "err=%d (%s) prov_errno=%d (%s) op_context=%p flags=%s len=%zu olen=%zu",
		 e->err, fi_strerror(e->err), e->prov_errno, ps ? ps : "(null)",
		 e->op_context, flags_str(e->flags, fb, sizeof(fb)), e->len, e->olen);
	return buf;
}

/* ---- context ------------------------------------------------------------------ */

void tctx_init(struct tctx *t)
{
	memset(t, 0, sizeof(*t));
	t->version = API_VERSION;
	t->tx_format = FI_CQ_FORMAT_CONTEXT;
	t->rx_format = FI_CQ_FORMAT_DATA;
	t->tx_wait = FI_WAIT_NONE;
	t->rx_wait = FI_WAIT_NONE;
	t->tx_bind_flags = FI_TRANSMIT;
	t->rx_bind_flags = FI_RECV;
	t->cq_size = 512;
}

struct fi_info *make_hints(uint64_t caps, uint64_t mode)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		fail("fi_allocinfo returned NULL");
	const char *prov = getenv("TEST_PROVIDER");
	h->fabric_attr->prov_name = strdup(prov && *prov ? prov : "verbs");
	h->ep_attr->type = FI_EP_MSG;
	h->caps = caps;
	h->mode = mode;
	h->addr_format = FI_SOCKADDR_IN;
	h->domain_attr->mr_mode = MR_MODE_117;
	return h;
}

static void open_fabric_eq(struct tctx *t, struct fi_info *info)
{
	struct fi_eq_attr eq_attr = { .size = 64, .wait_obj = FI_WAIT_UNSPEC };
	CHK(fi_fabric(info->fabric_attr, &t->fabric, NULL));
	CHK(fi_eq_open(t->fabric, &eq_attr, &t->eq, NULL));
}

void server_listen(struct tctx *t)
{
	char abuf[128];
	char addr[128];
	size_t alen = sizeof(addr);

	CHK(fi_getinfo(t->version, NULL, NULL, 0, t->hints, &t->pep_info));
	logmsg("provider %s, fabric %s, domain %s, src_addr %s",
	       t->pep_info->fabric_attr->prov_name, t->pep_info->fabric_attr->name,
	       t->pep_info->domain_attr->name,
	       addr_str(t->pep_info->src_addr, t->pep_info->src_addrlen, abuf, sizeof(abuf)));
	open_fabric_eq(t, t->pep_info);
	CHK(fi_passive_ep(t->fabric, t->pep_info, &t->pep, NULL));
	CHK(fi_pep_bind(t->pep, &t->eq->fid, 0));
	CHK(fi_listen(t->pep));
	CHK(fi_getname(&t->pep->fid, addr, &alen));
	EXPECT(alen >= sizeof(struct sockaddr_in) && alen <= sizeof(addr),
	       "fi_getname(pep) addrlen %zu", alen);
	const struct sockaddr_in *sin = (const void *)addr;
	EXPECT(sin->sin_family == AF_INET, "listen address family %d", sin->sin_family);
	EXPECT(sin->sin_port != 0, "listen port is 0");
	EXPECT(sin->sin_addr.s_addr != htonl(INADDR_ANY),
	       "listen address is INADDR_ANY; the provider must pick an RDMA interface address");
	logmsg("listening on %s", addr_str(addr, alen, abuf, sizeof(abuf)));
	uint32_t l32 = (uint32_t)alen;
	oob_send(&l32, sizeof(l32));
	oob_send(addr, alen);
}

struct fi_info *server_wait_connreq(struct tctx *t, void *data, size_t *datalen,
				    ssize_t *evlen)
{
	union eqbuf u;
	uint32_t event = 0;
	memset(&u, 0, sizeof(u));
	ssize_t ret = eq_wait(t, &event, &u, sizeof(u), WAIT_MS);
	EXPECT(event == FI_CONNREQ, "got %s (%u)", ev_name(event), event);
	EXPECT(ret >= (ssize_t)sizeof(struct fi_eq_cm_entry), "fi_eq_read returned %zd", ret);
	EXPECT(u.e.fid == &t->pep->fid, "CONNREQ fid %p, pep fid %p", (void *)u.e.fid,
	       (void *)&t->pep->fid);
	EXPECT(u.e.info != NULL, "CONNREQ entry without info");
	EXPECT(u.e.info->handle != NULL, "CONNREQ info without handle");
	size_t dl = (size_t)ret - sizeof(struct fi_eq_cm_entry);
	if (datalen) {
		size_t n = dl < *datalen ? dl : *datalen;
		if (n)
			memcpy(data, u.e.data, n);
		*datalen = dl;
	}
	if (evlen)
		*evlen = ret;
	return u.e.info;
}

/* Binds ep to t's EQ and CQs. */
static void bind_tctx(struct tctx *t, struct fid_ep *ep)
{
	CHK(fi_ep_bind(ep, &t->eq->fid, 0));
	CHK(fi_ep_bind(ep, &t->txcq->fid, t->tx_bind_flags));
	CHK(fi_ep_bind(ep, &t->rxcq->fid, t->rx_bind_flags));
}

void setup_active(struct tctx *t, struct fi_info *info)
{
	struct fi_cq_attr cq_attr;

	t->info = info;
	if (t->clear_tx_completion)
		info->tx_attr->op_flags &= ~FI_COMPLETION;
	if (!t->fabric)
		open_fabric_eq(t, info);
	CHK(fi_domain(t->fabric, info, &t->domain, NULL));
	CHK(fi_endpoint(t->domain, info, &t->ep, NULL));

	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.size = t->cq_size;
	cq_attr.format = t->tx_format;
	cq_attr.wait_obj = t->tx_wait;
	CHK(fi_cq_open(t->domain, &cq_attr, &t->txcq, NULL));
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.size = t->cq_size;
	cq_attr.format = t->rx_format;
	cq_attr.wait_obj = t->rx_wait;
	CHK(fi_cq_open(t->domain, &cq_attr, &t->rxcq, NULL));

	bind_tctx(t, t->ep);
	if (t->pre_enable)
		t->pre_enable(t);
	CHK(fi_enable(t->ep));
}

struct fid_ep *tctx_open_ep(struct tctx *t, struct fi_info *info)
{
	struct fid_ep *ep;
	CHK(fi_endpoint(t->domain, info, &ep, NULL));
	bind_tctx(t, ep);
	CHK(fi_enable(ep));
	return ep;
}

void server_accept(struct tctx *t, const void *param, size_t len)
{
	union eqbuf u;
	uint32_t event = 0;
	CHK(fi_accept(t->ep, param, len));
	ssize_t ret = eq_wait(t, &event, &u, sizeof(u), WAIT_MS);
	EXPECT(event == FI_CONNECTED, "got %s (%u)", ev_name(event), event);
	EXPECT(ret >= (ssize_t)sizeof(struct fi_eq_cm_entry), "fi_eq_read returned %zd", ret);
	EXPECT(u.e.fid == &t->ep->fid, "server FI_CONNECTED fid %p, ep fid %p",
	       (void *)u.e.fid, (void *)&t->ep->fid);
	logmsg("connected (server side)");
}

void client_setup(struct tctx *t)
{
	uint32_t l32;
	char abuf[128];
	oob_recv(&l32, sizeof(l32));
	EXPECT(l32 > 0 && l32 <= 128, "address length %u", l32);
	void *addr = malloc(l32);
	if (!addr)
		fail("malloc");
	oob_recv(addr, l32);
	t->hints->dest_addr = addr;
	t->hints->dest_addrlen = l32;
	struct fi_info *info = NULL;
	CHK(fi_getinfo(t->version, NULL, NULL, 0, t->hints, &info));
	logmsg("provider %s, domain %s, dest %s", info->fabric_attr->prov_name,
	       info->domain_attr->name, addr_str(info->dest_addr, info->dest_addrlen, abuf,
						  sizeof(abuf)));
	EXPECT(info->dest_addr != NULL, "fi_getinfo result has no dest_addr");
	open_fabric_eq(t, info);
	setup_active(t, info);
}

void client_connect(struct tctx *t, const void *param, size_t len, void *data,
		    size_t *datalen, ssize_t *evlen)
{
	union eqbuf u;
	uint32_t event = 0;
	CHK(fi_connect(t->ep, t->info->dest_addr, param, len));
	memset(&u, 0, sizeof(u));
	ssize_t ret = eq_wait(t, &event, &u, sizeof(u), WAIT_MS);
	EXPECT(event == FI_CONNECTED, "got %s (%u)", ev_name(event), event);
	EXPECT(ret >= (ssize_t)sizeof(struct fi_eq_cm_entry), "fi_eq_read returned %zd", ret);
	EXPECT(u.e.fid == &t->ep->fid, "client FI_CONNECTED fid %p, ep fid %p",
	       (void *)u.e.fid, (void *)&t->ep->fid);
	size_t dl = (size_t)ret - sizeof(struct fi_eq_cm_entry);
	if (datalen) {
		size_t n = dl < *datalen ? dl : *datalen;
		if (n)
			memcpy(data, u.e.data, n);
		*datalen = dl;
	}
	if (evlen)
		*evlen = ret;
	logmsg("connected (client side)");
}

#define CLOSE_FID(p)                                                           \
	do {                                                                   \
		if (p) {                                                       \
			CHK(fi_close(&(p)->fid));                              \
			(p) = NULL;                                            \
		}                                                              \
	} while (0)

void tctx_close(struct tctx *t)
{
	CLOSE_FID(t->ep);
	CLOSE_FID(t->pep);
	CLOSE_FID(t->txcq);
	CLOSE_FID(t->rxcq);
	CLOSE_FID(t->domain);
	CLOSE_FID(t->eq);
	CLOSE_FID(t->fabric);
	if (t->info)
		fi_freeinfo(t->info);
	if (t->pep_info)
		fi_freeinfo(t->pep_info);
	if (t->hints)
		fi_freeinfo(t->hints);
	t->info = t->pep_info = t->hints = NULL;
}

/* ---- EQ ---------------------------------------------------------------------------- */

ssize_t eq_wait(struct tctx *t, uint32_t *event, void *buf, size_t len, int timeout_ms)
{
	uint64_t start = now_ms();
	for (;;) {
		ssize_t ret = fi_eq_read(t->eq, event, buf, len, 0);
		if (ret >= 0)
			return ret;
		if (ret == -FI_EAVAIL) {
			struct fi_eq_err_entry e;
			char b[512];
			memset(&e, 0, sizeof(e));
			ssize_t r = fi_eq_readerr(t->eq, &e, 0);
			if (r < 0)
				fail("fi_eq_read returned -FI_EAVAIL but fi_eq_readerr returned %zd (%s)",
				     r, fi_strerror((int)-r));
			fail("unexpected EQ error entry: %s", eq_err_str(t->eq, &e, b, sizeof(b)));
		}
		if (ret != -FI_EAGAIN)
			fail("fi_eq_read returned %zd (%s)", ret, fi_strerror((int)-ret));
		if (now_ms() - start > (uint64_t)timeout_ms)
			fail("timed out after %d ms waiting for an EQ event", timeout_ms);
		check_child();
		sleep_ms(1);
	}
}

/* ---- CQ ----------------------------------------------------------------------------- */

int cq_read_one_or_err(struct fid_cq *cq, void *entry, struct fi_cq_err_entry *err,
		       int timeout_ms, const char *what)
{
	uint64_t start = now_ms();
	unsigned spins = 0;
	for (;;) {
		ssize_t ret = fi_cq_read(cq, entry, 1);
		if (ret == 1)
			return 1;
		if (ret == -FI_EAVAIL) {
			ssize_t r = fi_cq_readerr(cq, err, 0);
			if (r != 1)
				fail("%s: fi_cq_read returned -FI_EAVAIL but fi_cq_readerr returned %zd (%s)",
				     what, r, r < 0 ? fi_strerror((int)-r) : "");
			return 0;
		}
		if (ret != -FI_EAGAIN)
			fail("%s: fi_cq_read returned %zd (%s)", what, ret,
			     ret < 0 ? fi_strerror((int)-ret) : "expected 1");
		if (++spins % 64 == 0) {
			if (now_ms() - start > (uint64_t)timeout_ms)
				fail("%s: timed out after %d ms waiting for a completion", what,
				     timeout_ms);
			check_child();
			sleep_ms(0);
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
}

void cq_read_one(struct fid_cq *cq, void *entry, int timeout_ms, const char *what)
{
	struct fi_cq_err_entry err;
	char b[512];
	memset(&err, 0, sizeof(err));
	if (!cq_read_one_or_err(cq, entry, &err, timeout_ms, what))
		fail("%s: error completion: %s", what, cq_err_str(cq, &err, b, sizeof(b)));
}

int cq_one_or_again(struct fid_cq *cq, ssize_t ret, const char *call, const char *what)
{
	if (ret == 1)
		return 1;
	if (ret == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		char b[512];
		memset(&err, 0, sizeof(err));
		fi_cq_readerr(cq, &err, 0);
		fail("%s: error completion: %s", what, cq_err_str(cq, &err, b, sizeof(b)));
	}
	if (ret != -FI_EAGAIN)
		fail("%s: %s returned %zd (%s)", what, call, ret, fi_strerror((int)-ret));
	return 0;
}

int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

void cq_expect_empty(struct fid_cq *cq, int ms, const char *what)
{
	uint64_t start = now_ms();
	union {
		struct fi_cq_data_entry d;
		struct fi_cq_tagged_entry t;
	} u;
	do {
		ssize_t ret = fi_cq_read(cq, &u, 1);
		if (ret == 1)
			fail("%s: unexpected completion (op_context %p)", what, u.d.op_context);
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			char b[512];
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(cq, &err, 0);
			fail("%s: unexpected error completion: %s", what,
			     cq_err_str(cq, &err, b, sizeof(b)));
		}
		if (ret != -FI_EAGAIN)
			fail("%s: fi_cq_read returned %zd (%s)", what, ret,
			     fi_strerror((int)-ret));
		check_child();
		sleep_ms(2);
	} while (now_ms() - start < (uint64_t)ms);
}

/* ---- memory -------------------------------------------------------------------------- */

void *alloc_buf(size_t len)
{
	void *p = NULL;
	size_t alen = (len + 4095) & ~(size_t)4095;
	if (alen == 0)
		alen = 4096;
	if (posix_memalign(&p, 4096, alen))
		fail("posix_memalign(%zu) failed", alen);
	memset(p, 0, alen);
	return p;
}

struct fid_mr *mr_reg(struct tctx *t, void *buf, size_t len, uint64_t access)
{
	static uint64_t next_key = 1;
	struct fid_mr *mr = NULL;
	/* With FI_MR_PROV_KEY (and FI_MR_BASIC) the provider picks the key and
	 * requested_key is ignored; otherwise the application must supply a
	 * unique one (fi_mr(3)). */
	uint64_t key = next_key++;
	CHK(fi_mr_reg(t->domain, buf, len, access, 0, key, 0, &mr, NULL));
	EXPECT(mr != NULL, "fi_mr_reg returned no mr");
	return mr;
}

void mr_close(struct fid_mr *mr)
{
	if (mr)
		CHK(fi_close(&mr->fid));
}

static inline uint8_t pat_byte(size_t i, uint32_t seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + (uint32_t)(i >> 11);
	return (uint8_t)(x >> 13) ^ (uint8_t)seed;
}

void fill_pattern(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = pat_byte(i, seed);
}

long check_pattern(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat_byte(i, seed))
			return (long)i;
	return -1;
}

void expect_pattern(const void *buf, size_t len, uint32_t seed, const char *what)
{
	long off = check_pattern(buf, len, seed);
	if (off >= 0)
		fail("%s: data mismatch at offset %ld of %zu (got 0x%02x, want 0x%02x)", what,
		     off, len, ((const uint8_t *)buf)[off], pat_byte((size_t)off, seed));
}
