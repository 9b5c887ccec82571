/*
 * Shared helpers for the rsverbs C operation tests.
 *
 * Every test is a standalone program that forks: the parent is the server
 * (passive endpoint, listens, accepts), the child is the client (connects to
 * the address the parent sends it through an out-of-band socketpair).  Only
 * the public libfabric API is used, so the same binaries run against
 * libfabric's built-in verbs provider and against rsverbs.
 *
 * Output contract: diagnostics go to stderr prefixed with [server]/[client];
 * the parent prints exactly one final line on stdout,
 *     PASS <name>            (exit 0)
 *     FAIL <name>: <reason>  (exit 1)
 * The child never prints PASS/FAIL; it reports its failure reason to the
 * parent through a pipe and exits non-zero.
 */
#ifndef RSVERBS_CTEST_COMMON_H
#define RSVERBS_CTEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

/* Overall watchdog per process (seconds). */
#define TEST_ALARM_SECS 120
/* Default timeout for a single wait (event, completion, oob message), ms. */
#define WAIT_MS 30000

#define API_VERSION FI_VERSION(1, 17)

#define MR_MODE_117 (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)

extern const char *test_name;
extern bool is_child;

/* ---- failure reporting ------------------------------------------------ */

void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * CHK(expr): evaluate a libfabric call; a negative result fails the test
 * with the call text, function, line, return value and fi_strerror.
 * Evaluates to the (non-negative) result.
 */
#define CHK(expr)                                                              \
	({                                                                     \
		long chk_ret__ = (long)(expr);                                 \
		if (chk_ret__ < 0)                                             \
			fail("%s() line %d: %s returned %ld (%s)", __func__,   \
			     __LINE__, #expr, chk_ret__,                       \
			     fi_strerror((int)-chk_ret__));                    \
		chk_ret__;                                                     \
	})

/* EXPECT(cond, fmt, ...): assertion with a descriptive message. */
#define EXPECT(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			char expect_buf__[768];                                \
			snprintf(expect_buf__, sizeof(expect_buf__),           \
				 __VA_ARGS__);                                 \
			fail("%s() line %d: expected %s: %s", __func__,        \
			     __LINE__, #cond, expect_buf__);                   \
		}                                                              \
	} while (0)

/*
 * EXPECT_SOFT(cond, fmt, ...): a man-page assertion whose failure does not
 * stop the test.  The deviation is logged and the remaining checks still
 * run; the test fails at the end (test_finish / child_done) listing the
 * deviations.  Used where continuing is safe, so one provider deviation does
 * not hide the results of the later checks.
 */
void deviation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define EXPECT_SOFT(cond, ...)                                                 \
	do {                                                                   \
		if (!(cond)) {                                                 \
			char expect_buf__[768];                                \
			snprintf(expect_buf__, sizeof(expect_buf__),           \
				 __VA_ARGS__);                                 \
			deviation("%s() line %d: expected %s: %s", __func__,   \
				  __LINE__, #cond, expect_buf__);              \
		}                                                              \
	} while (0)

/* ---- process structure ------------------------------------------------ */

/*
 * test_start: record the name, install the watchdog, create the oob channel
 * and fork.  Returns true in the parent (server), false in the child.
 */
bool test_start(const char *name);
/* The name the suite gives a rerun of a test in TEST_NAME (a variant with
 * other settings), else dflt. */
const char *test_name_env(const char *dflt);
/* Parent: wait for the child, print PASS (or FAIL if the child failed), exit. */
void test_finish(void) __attribute__((noreturn));
/* Child: successful end of the client. */
void child_done(void) __attribute__((noreturn));
/* Parent: poll the child; fails the test if the child failed. */
void check_child(void);
/* Parent: true once the child exited with status 0. */
bool child_exited_ok(void);
/* Parent: the child's pid (for tests that kill it). */
pid_t test_child_pid(void);
/* Parent: the test reaped the child itself (killed it); stop watching it. */
void test_forget_child(void);
/* In a process the test forked itself: become a client talking to the
 * parent over oob_fd (out-of-band channel), with the client watchdog. */
void test_rebind_child(int oob_fd);

/* ---- out-of-band channel (socketpair between parent and child) -------- */

void oob_send(const void *buf, size_t len);
void oob_recv(void *buf, size_t len);
void oob_signal(uint8_t tag);
void oob_wait(uint8_t tag);
/* Both processes got here: the client signals a and waits for b, the server
 * (server true) waits for a and signals b. */
void oob_barrier(bool server, uint8_t a, uint8_t b);

/* ---- timing ---------------------------------------------------------- */

uint64_t now_ms(void);
/* Threads of this process (/proc/self/task; -1 if unreadable). */
int thread_count(void);
void sleep_ms(unsigned ms);

/* ---- libfabric context ------------------------------------------------- */

struct tctx {
	uint32_t version;
	struct fi_info *hints;
	struct fi_info *info;       /* info of the active endpoint */
	struct fi_info *pep_info;   /* server: info used for the pep */
	struct fid_fabric *fabric;
	struct fid_eq *eq;
	struct fid_domain *domain;
	struct fid_pep *pep;
	struct fid_ep *ep;
	struct fid_cq *txcq;
	struct fid_cq *rxcq;
	/* configuration, set before setup */
	enum fi_cq_format tx_format;
	enum fi_cq_format rx_format;
	enum fi_wait_obj tx_wait;
	enum fi_wait_obj rx_wait;
	uint64_t tx_bind_flags;     /* FI_TRANSMIT | optional FI_SELECTIVE_COMPLETION */
	uint64_t rx_bind_flags;     /* FI_RECV | ... */
	size_t cq_size;
	bool clear_tx_completion;   /* clear FI_COMPLETION from tx op_flags */
	void (*pre_enable)(struct tctx *t); /* called by setup_active before fi_enable */
};

/* Initialise a context with defaults (1.17 API, FORMAT_CONTEXT/DATA). */
void tctx_init(struct tctx *t);
/*
 * Build hints: FI_EP_MSG, prov_name from $TEST_PROVIDER (default "verbs"),
 * FI_SOCKADDR_IN, the given caps and mode, mr_mode MR_MODE_117.
 */
struct fi_info *make_hints(uint64_t caps, uint64_t mode);

/* Server: getinfo (no node) -> fabric -> eq -> pep -> bind -> listen ->
 * getname; sends the listen address to the child over the oob channel. */
void server_listen(struct tctx *t);
/* Server: wait for FI_CONNREQ; returns the info (caller owns).  Data of the
 * request is copied into data (up to *datalen), *datalen set to its size.
 * *evlen receives the fi_eq_read return value. */
struct fi_info *server_wait_connreq(struct tctx *t, void *data, size_t *datalen,
				    ssize_t *evlen);
/* Open domain/ep/cqs from a CONNREQ info, bind, enable. */
void setup_active(struct tctx *t, struct fi_info *info);
/* Server: fi_accept with param, wait for FI_CONNECTED on the ep. */
void server_accept(struct tctx *t, const void *param, size_t len);

/* Client: receive address, getinfo with dest_addr, fabric, eq, setup_active. */
void client_setup(struct tctx *t);
/* Client: fi_connect with param; waits for FI_CONNECTED; copies its data. */
void client_connect(struct tctx *t, const void *param, size_t len, void *data,
		    size_t *datalen, ssize_t *evlen);

/* Close everything that is open (checked). */
void tctx_close(struct tctx *t);
/* One more endpoint on t's domain from info, bound to t's EQ and CQs,
 * enabled (the caller closes it). */
struct fid_ep *tctx_open_ep(struct tctx *t, struct fi_info *info);

/* ---- event queue helpers --------------------------------------------- */

/* Room for one CM entry and its connection data. */
union eqbuf {
	struct fi_eq_cm_entry e;
	uint8_t raw[sizeof(struct fi_eq_cm_entry) + 512];
};

/* Poll the EQ until an event arrives (fails on error entry / timeout). */
ssize_t eq_wait(struct tctx *t, uint32_t *event, void *buf, size_t len,
		int timeout_ms);
/* The next EQ entry is event for ep (fails on anything else, an error entry
 * or a time-out); what names the wait in the message. */
void eq_expect(struct tctx *t, uint32_t event, struct fid_ep *ep, const char *what);
/* Describe an EQ error entry (for messages). */
const char *eq_err_str(struct fid_eq *eq, const struct fi_eq_err_entry *e,
		       char *buf, size_t len);
const char *ev_name(uint32_t event);

/* ---- completion queue helpers ----------------------------------------- */

/* Read exactly one successful completion into entry (format-sized buffer).
 * Fails on an error completion or timeout. */
void cq_read_one(struct fid_cq *cq, void *entry, int timeout_ms, const char *what);
/* Read one completion: returns 1 if successful (entry filled), 0 if an error
 * entry was read (err filled).  Fails on timeout. err->err_data_size is used
 * as given on input. */
int cq_read_one_or_err(struct fid_cq *cq, void *entry, struct fi_cq_err_entry *err,
		       int timeout_ms, const char *what);
/* The outcome of one read of one entry (ret: what fi_cq_read / fi_cq_sread,
 * named by call, returned): 1 = an entry, 0 = -FI_EAGAIN; fails on an error
 * entry (with its cq_err_str) and on any other return. */
int cq_one_or_again(struct fid_cq *cq, ssize_t ret, const char *call, const char *what);
/* Assert no completion (success or error) shows up within ms. */
void cq_expect_empty(struct fid_cq *cq, int ms, const char *what);
const char *cq_err_str(struct fid_cq *cq, const struct fi_cq_err_entry *e,
		       char *buf, size_t len);
const char *flags_str(uint64_t flags, char *buf, size_t len);

/* ---- memory ------------------------------------------------------------ */

void *alloc_buf(size_t len);
struct fid_mr *mr_reg(struct tctx *t, void *buf, size_t len, uint64_t access);
void mr_close(struct fid_mr *mr);

void fill_pattern(void *buf, size_t len, uint32_t seed);
/* Returns -1 if OK, else the first mismatching offset. */
long check_pattern(const void *buf, size_t len, uint32_t seed);
/* Fail with a message if the pattern does not match. */
void expect_pattern(const void *buf, size_t len, uint32_t seed, const char *what);

/* ---- addresses --------------------------------------------------------- */

const char *addr_str(const void *addr, size_t len, char *buf, size_t blen);

/* Remote memory description exchanged in a message. */
struct rma_info {
	uint64_t addr;
	uint64_t key;
	uint64_t len;
};

#endif
