/*
 * rdm_rma: RMA by fi_addr on FI_EP_RDM endpoints.
 *
 * The server exposes a 1 MiB buffer (FI_REMOTE_READ|FI_REMOTE_WRITE) and
 * sends its address and key over the out-of-band channel. The client:
 *  - fi_write / fi_writev / fi_writemsg, checked by the server;
 *  - fi_read / fi_readv / fi_readmsg of a pattern the server wrote;
 *  - fi_inject_write, then a read of the same bytes (RC order);
 *  - fi_writedata / fi_inject_writedata: the server gets an rx completion with
 *    FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA and the data;
 *  - a 1 MiB write and read;
 *  - completion flags (FI_RMA | FI_WRITE / FI_READ);
 *  - 64-bit atomics: fi_atomic / fi_inject_atomic (FI_SUM), fi_fetch_atomic
 *    (FI_SUM, FI_ATOMIC_READ), fi_compare_atomic (FI_CSWAP, hit and miss),
 *    fi_atomicvalid & co and fi_query_atomic for supported and unsupported ops.
 * The RMA is the first traffic between the two: it opens the connection.
 */
#include "rdm_common.h"

#include <rdma/fi_atomic.h>

#define SZ (1u << 20)

static struct rctx r;

int main(void)
{
	struct fi_cq_tagged_entry e;
	bool srv = test_start("rdm_rma");
	rdm_open(&r, FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	rdm_exchange(&r, true);
	EXPECT(r.info->tx_attr->rma_iov_limit >= 1, "rma_iov_limit %zu", r.info->tx_attr->rma_iov_limit);
	uint8_t *buf = alloc_buf(SZ);
	struct fid_mr *mr = rdm_mr_reg(&r, buf, SZ, FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE | FI_SEND | FI_RECV);
	void *desc = fi_mr_desc(mr);
	struct rma_info ri;

	if (srv) {
		ri.addr = (r.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
		ri.key = fi_mr_key(mr);
		ri.len = SZ;
		fill_pattern(buf + 65536, 8192, 21);
		oob_send(&ri, sizeof(ri));
		/* the client's RMA needs this side to accept the connection: progress meanwhile */
		rdm_progress_start(&r);
		/* writes */
		oob_wait(1);
		expect_pattern(buf, 4096, 1, "fi_write");
		expect_pattern(buf + 4096, 3000, 2, "fi_writev");
		expect_pattern(buf + 8192, 100, 3, "fi_writemsg");
		logmsg("server: writes landed");
		/* writedata: remote CQ data on the receive CQ */
		rdm_expect(r.rxcq, NULL, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, &e, "writedata at the target");
		EXPECT(e.data == 0xc0ffee, "writedata: data %#llx", (unsigned long long)e.data);
		/* fi_cq(3) of 2.x: len is what the write placed (1.x leaves it unspecified). */
		EXPECT(e.len == 2000, "writedata: len %zu, want 2000", e.len);
		rdm_expect(r.rxcq, NULL, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, &e, "inject_writedata at the target");
		EXPECT(e.data == 0xfeed, "inject_writedata: data %#llx", (unsigned long long)e.data);
		EXPECT(e.len == 32, "inject_writedata: len %zu, want 32", e.len);
		oob_signal(2);
		oob_wait(3);
		expect_pattern(buf + 16384, 2000, 4, "writedata payload");
		expect_pattern(buf + 20480, 32, 5, "inject_writedata payload");
		expect_pattern(buf + 131072, SZ - 131072, 6, "large write");
		logmsg("server: all writes checked");
		/* the atomics' target: a counter at offset 32768 */
		uint64_t *ctr = (uint64_t *)(buf + 32768);
		*ctr = 1000;
		oob_signal(4);
		oob_wait(5);
		EXPECT(*ctr == 7777, "counter after the atomics: %llu, want 7777", (unsigned long long)*ctr);
		oob_signal(6);
		rdm_progress_stop();
	} else {
		oob_recv(&ri, sizeof(ri));
		uint8_t *rb = (uint8_t *)(uintptr_t)ri.addr;
		/* fi_write */
		fill_pattern(buf, 4096, 1);
		RETRY(&r, fi_write(r.ep, buf, 4096, desc, r.peer, (uint64_t)(uintptr_t)rb, ri.key, (void *)1));
		rdm_expect(r.txcq, (void *)1, FI_RMA | FI_WRITE, &e, "fi_write");
		/* fi_writev: 2 local pieces */
		fill_pattern(buf + 4096, 3000, 2);
		{
			struct iovec iov[2] = { { buf + 4096, 1000 }, { buf + 5096, 2000 } };
			void *d[2] = { desc, desc };
			RETRY(&r, fi_writev(r.ep, iov, d, 2, r.peer, (uint64_t)(uintptr_t)(rb + 4096), ri.key, (void *)2));
		}
		rdm_expect(r.txcq, (void *)2, FI_RMA | FI_WRITE, &e, "fi_writev");
		/* fi_writemsg */
		fill_pattern(buf + 8192, 100, 3);
		{
			struct iovec iov = { buf + 8192, 100 };
			struct fi_rma_iov rio = { (uint64_t)(uintptr_t)(rb + 8192), 100, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer,
						.rma_iov = &rio, .rma_iov_count = 1, .context = (void *)3 };
			RETRY(&r, fi_writemsg(r.ep, &m, FI_COMPLETION));
		}
		rdm_expect(r.txcq, (void *)3, FI_RMA | FI_WRITE, &e, "fi_writemsg");
		oob_signal(1);
		/* reads of the server's pattern */
		memset(buf + 65536, 0, 8192);
		RETRY(&r, fi_read(r.ep, buf + 65536, 4096, desc, r.peer, (uint64_t)(uintptr_t)(rb + 65536), ri.key, (void *)4));
		rdm_expect(r.txcq, (void *)4, FI_RMA | FI_READ, &e, "fi_read");
		{
			struct iovec iov[2] = { { buf + 65536 + 4096, 1000 }, { buf + 65536 + 5096, 1000 } };
			void *d[2] = { desc, desc };
			RETRY(&r, fi_readv(r.ep, iov, d, 2, r.peer, (uint64_t)(uintptr_t)(rb + 65536 + 4096), ri.key, (void *)5));
		}
		rdm_expect(r.txcq, (void *)5, FI_RMA | FI_READ, &e, "fi_readv");
		{
			struct iovec iov = { buf + 65536 + 6096, 2096 };
			struct fi_rma_iov rio = { (uint64_t)(uintptr_t)(rb + 65536 + 6096), 2096, ri.key };
			struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = r.peer,
						.rma_iov = &rio, .rma_iov_count = 1, .context = (void *)6 };
			RETRY(&r, fi_readmsg(r.ep, &m, FI_COMPLETION));
		}
		rdm_expect(r.txcq, (void *)6, FI_RMA | FI_READ, &e, "fi_readmsg");
		expect_pattern(buf + 65536, 8192, 21, "reads");
		/* inject_write, then read it back */
		uint8_t small[64];
		fill_pattern(small, 64, 22);
		RETRY(&r, fi_inject_write(r.ep, small, 64, r.peer, (uint64_t)(uintptr_t)(rb + 24576), ri.key));
		memset(small, 0, sizeof(small));
		memset(buf + 24576, 0, 64);
		RETRY(&r, fi_read(r.ep, buf + 24576, 64, desc, r.peer, (uint64_t)(uintptr_t)(rb + 24576), ri.key, (void *)7));
		rdm_expect(r.txcq, (void *)7, FI_RMA | FI_READ, &e, "read after inject_write");
		expect_pattern(buf + 24576, 64, 22, "inject_write data read back");
		/* writedata / inject_writedata */
		fill_pattern(buf + 16384, 2000, 4);
		RETRY(&r, fi_writedata(r.ep, buf + 16384, 2000, desc, 0xc0ffee, r.peer, (uint64_t)(uintptr_t)(rb + 16384), ri.key,
				       (void *)8));
		rdm_expect(r.txcq, (void *)8, FI_RMA | FI_WRITE, &e, "fi_writedata");
		fill_pattern(small, 32, 5);
		RETRY(&r, fi_inject_writedata(r.ep, small, 32, 0xfeed, r.peer, (uint64_t)(uintptr_t)(rb + 20480), ri.key));
		oob_wait(2);
		/* large write, then read back */
		fill_pattern(buf + 131072, SZ - 131072, 6);
		RETRY(&r, fi_write(r.ep, buf + 131072, SZ - 131072, desc, r.peer, (uint64_t)(uintptr_t)(rb + 131072), ri.key,
				   (void *)9));
		rdm_expect(r.txcq, (void *)9, FI_RMA | FI_WRITE, &e, "large write");
		memset(buf + 131072, 0, SZ - 131072);
		RETRY(&r, fi_read(r.ep, buf + 131072, SZ - 131072, desc, r.peer, (uint64_t)(uintptr_t)(rb + 131072), ri.key,
				  (void *)10));
		rdm_expect(r.txcq, (void *)10, FI_RMA | FI_READ, &e, "large read");
		expect_pattern(buf + 131072, SZ - 131072, 6, "large read back");
		cq_expect_empty(r.txcq, 100, "inject writes complete silently");
		oob_signal(3);
		oob_wait(4);

		/* atomics on the server's counter (1000) */
		uint64_t ca = (uint64_t)(uintptr_t)(rb + 32768);
		uint64_t *op = (uint64_t *)buf, *res = (uint64_t *)(buf + 64), *cmp = (uint64_t *)(buf + 128);
		size_t cnt = 0;
		struct fi_atomic_attr aa;
		CHK(fi_atomicvalid(r.ep, FI_UINT64, FI_SUM, &cnt));
		EXPECT(cnt >= 1, "fi_atomicvalid count %zu", cnt);
		CHK(fi_fetch_atomicvalid(r.ep, FI_INT64, FI_ATOMIC_READ, &cnt));
		CHK(fi_compare_atomicvalid(r.ep, FI_UINT64, FI_CSWAP, &cnt));
		EXPECT(fi_atomicvalid(r.ep, FI_UINT32, FI_SUM, &cnt) == -FI_EOPNOTSUPP, "32-bit atomics reported valid");
		EXPECT(fi_atomicvalid(r.ep, FI_UINT64, FI_MIN, &cnt) == -FI_EOPNOTSUPP, "FI_MIN reported valid");
		CHK(fi_query_atomic(r.domain, FI_UINT64, FI_CSWAP, &aa, FI_COMPARE_ATOMIC));
		EXPECT(aa.count >= 1 && aa.size == 8, "fi_query_atomic: count %zu size %zu", aa.count, aa.size);
		EXPECT(fi_query_atomic(r.domain, FI_DOUBLE, FI_SUM, &aa, 0) == -FI_EOPNOTSUPP, "double sum reported supported");
		*op = 5;
		RETRY(&r, fi_atomic(r.ep, op, 1, desc, r.peer, ca, ri.key, FI_UINT64, FI_SUM, (void *)20));
		rdm_expect(r.txcq, (void *)20, FI_ATOMIC | FI_WRITE, &e, "fi_atomic sum");
		*op = 3;
		*res = 0;
		RETRY(&r, fi_fetch_atomic(r.ep, op, 1, desc, res, desc, r.peer, ca, ri.key, FI_UINT64, FI_SUM, (void *)21));
		rdm_expect(r.txcq, (void *)21, FI_ATOMIC | FI_READ, &e, "fi_fetch_atomic sum");
		EXPECT(*res == 1005, "fetch-add old value %llu, want 1005", (unsigned long long)*res);
		RETRY(&r, fi_fetch_atomic(r.ep, NULL, 1, NULL, res, desc, r.peer, ca, ri.key, FI_UINT64, FI_ATOMIC_READ, (void *)22));
		rdm_expect(r.txcq, (void *)22, FI_ATOMIC | FI_READ, &e, "fi_fetch_atomic read");
		EXPECT(*res == 1008, "atomic read %llu, want 1008", (unsigned long long)*res);
		*cmp = 1; /* miss */
		*op = 1;
		RETRY(&r, fi_compare_atomic(r.ep, op, 1, desc, cmp, desc, res, desc, r.peer, ca, ri.key, FI_UINT64, FI_CSWAP,
					    (void *)23));
		rdm_expect(r.txcq, (void *)23, FI_ATOMIC | FI_READ, &e, "fi_compare_atomic miss");
		EXPECT(*res == 1008, "cswap miss returned %llu", (unsigned long long)*res);
		*cmp = 1008; /* hit */
		*op = 7000;
		RETRY(&r, fi_compare_atomic(r.ep, op, 1, desc, cmp, desc, res, desc, r.peer, ca, ri.key, FI_UINT64, FI_CSWAP,
					    (void *)24));
		rdm_expect(r.txcq, (void *)24, FI_ATOMIC | FI_READ, &e, "fi_compare_atomic hit");
		EXPECT(*res == 1008, "cswap hit returned %llu", (unsigned long long)*res);
		uint64_t seven = 777;
		RETRY(&r, fi_inject_atomic(r.ep, &seven, 1, r.peer, ca, ri.key, FI_UINT64, FI_SUM));
		RETRY(&r, fi_fetch_atomic(r.ep, NULL, 1, NULL, res, desc, r.peer, ca, ri.key, FI_UINT64, FI_ATOMIC_READ, (void *)25));
		rdm_expect(r.txcq, (void *)25, FI_ATOMIC | FI_READ, &e, "read after inject_atomic");
		EXPECT(*res == 7777, "counter %llu after inject_atomic, want 7777", (unsigned long long)*res);
		oob_signal(5);
		oob_wait(6);
	}
	rdm_test_end(srv, &r, mr, buf);
}
