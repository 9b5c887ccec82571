/*
 * A test's own stderr, teed into memory (and still to the real stderr), so
 * it can check what the provider logged (FI_LOG_LEVEL=info): rdm_manypeers,
 * rdm_recall.  tee_stderr() before the first libfabric call, tee_end()
 * before reading logbuf for the last time; logbuf/loglen under loglock.
 */
#ifndef RSVERBS_CTEST_LOGTEE_H
#define RSVERBS_CTEST_LOGTEE_H

#include "common.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static int saved_err = -1;
static char *logbuf;
static size_t loglen, logcap;
static pthread_mutex_t loglock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t teethr;
static int teefd = -1;

static void *tee_fn(void *arg)
{
	(void)arg;
	char b[4096];
	for (;;) {
		ssize_t n = read(teefd, b, sizeof(b));
		if (n <= 0)
			return NULL;
		if (write(saved_err, b, (size_t)n) < 0) {
			/* keep capturing */
		}
		pthread_mutex_lock(&loglock);
		if (loglen + (size_t)n + 1 > logcap) {
			logcap = (loglen + (size_t)n + 1) * 2;
			logbuf = realloc(logbuf, logcap);
		}
		memcpy(logbuf + loglen, b, (size_t)n);
		loglen += (size_t)n;
		logbuf[loglen] = '\0';
		pthread_mutex_unlock(&loglock);
	}
}

static void tee_stderr(void)
{
	int p[2];
	if (pipe(p))
		fail("pipe failed");
	fflush(stderr);
	saved_err = dup(2);
	if (saved_err < 0 || dup2(p[1], 2) < 0)
		fail("dup2 failed");
	close(p[1]);
	teefd = p[0];
	if (pthread_create(&teethr, NULL, tee_fn, NULL))
		fail("pthread_create failed");
}

/*
 * End of the capture: the tee thread copies what is left, then stderr goes to
 * /dev/null, because FI_LOG_LEVEL=info makes libfabric's core log at exit,
 * after the final PASS line (which goes to stdout).
 */
static void tee_end(void)
{
	fflush(stderr);
	int nul = open("/dev/null", O_WRONLY);
	if (nul < 0 || dup2(nul, 2) < 0)
		fail("dup2 /dev/null failed");
	close(nul);
	pthread_join(teethr, NULL);
}

#endif
