//! Tests of the CQ's work-request ids, queue order and translation.

use super::*;

#[test]
fn wr_id_roundtrip() {
    for kind in [OpKind::Send, OpKind::Write, OpKind::Read, OpKind::Recv, OpKind::Atomic, OpKind::AtomicFetch] {
        for ctx in [0u64, 1, 0x7fff_ffff_f000, CTX_MASK] {
            for (indirect, silent) in [(false, false), (true, false), (false, true), (true, true)] {
                for batch in [false, true] {
                    let id = WrId { kind, ctx, indirect, silent, batch };
                    assert_eq!(WrId::decode(id.encode()), Some(id));
                }
            }
        }
    }
    assert_eq!(WrId::decode(0), None, "kind 0 is not ours");
}

#[test]
fn errors_do_not_overtake_earlier_completions() {
    let ok = |ctx| Completion { op_context: ctx, ..Default::default() };
    let mut st = State::default();
    assert!(!st.head_is_ok(), "empty: a read progresses first");
    st.push_ok(ok(1));
    assert!(st.head_is_ok(), "a success first: a read hands it out without progress");
    st.push_ok(ok(2));
    st.push_err(CqErr { op_context: 3, err: FI_ETRUNC, ..Default::default() });
    st.push_ok(ok(4));
    let mut got = Vec::new();
    assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 2, "the two successes before the error");
    assert_eq!(got, [1, 2]);
    assert!(st.head_is_err(), "then FI_EAVAIL");
    assert!(!st.head_is_ok(), "an error first: a read progresses, then reports FI_EAVAIL");
    assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 0, "nothing passes the error");
    assert_eq!(st.pop_err().map(|e| e.op_context), Some(3));
    assert!(!st.head_is_err());
    assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 1);
    assert_eq!(got, [1, 2, 4]);
    assert_eq!((st.nerr, st.queue.len()), (0, 0));
    // fi_cq_readerr without a preceding FI_EAVAIL still finds a queued error.
    st.push_ok(ok(5));
    st.push_err(CqErr { op_context: 6, ..Default::default() });
    assert_eq!(st.pop_err().map(|e| e.op_context), Some(6));
    assert_eq!(st.pop_ready(1, &mut |c| got.push(c.op_context)), 1);
    assert_eq!(st.pop_err(), None);
}

/// The inlined fast path of `translate` gives what the general path
/// gives, result, queue and credits alike, for every completion it
/// takes; and it leaves the rest (another QP, an error, a stashed
/// context, immediate data, a split RMA's piece) to the general path.
/// (A counter to feed needs a domain: the device suites cover it.)
#[test]
fn translate_fast_path_agrees_with_the_general_path() {
    let (qpn, other) = (7u32, 9u32);
    let mk = || {
        let q = QpCounters::new(64, 64);
        // Every credit taken, so each give-back shows.
        q.tx.store(64, Ordering::Relaxed);
        q.rx.store(64, Ordering::Relaxed);
        Arc::new(q)
    };
    let kinds = [OpKind::Send, OpKind::Write, OpKind::Read, OpKind::Recv, OpKind::Atomic, OpKind::AtomicFetch];
    for kind in kinds {
        for (indirect, silent, batch) in [(false, false, false), (false, true, false), (false, true, true), (true, false, false), (true, true, true)] {
            for status in [wc_status::SUCCESS, wc_status::WR_FLUSH_ERR, 4 /* LOC_PROT_ERR */] {
                for opcode in [wc_opcode::SEND, wc_opcode::RECV, wc_opcode::RECV_RDMA_WITH_IMM] {
                    for imm in [None, Some(0xabcd)] {
                        for wc_qp in [qpn, other] {
                            let ctx = if batch { 3 } else { 0x1234 };
                            let raw = WrId { kind, ctx, indirect, silent, batch }.encode();
                            let wc = Wc::for_test(raw, status, opcode, wc_qp, 8, imm);
                            let run = |fast: bool| {
                                let q = mk();
                                let qps: QpTable = RwLock::new(HashMap::default());
                                qps.write().insert(qpn, q.clone());
                                qps.write().insert(other, mk());
                                let mut st = State::default();
                                st.stash.push(Some(0x5678)); // index 0x1234 is not there: resolves to 0
                                st.last_qp = Some((qpn, q.clone()));
                                let t = if fast { Cq::translate_with(&qps, &mut st, &wc) } else { Cq::translate_slow(&qps, &mut st, &wc) };
                                let credits = [qpn, other].map(|n| {
                                    let t = qps.read();
                                    (t[&n].tx.load(Ordering::Relaxed), t[&n].rx.load(Ordering::Relaxed))
                                });
                                let queued: Vec<_> = st.queue.iter().map(|e| e.as_ref().map(|c| *c).map_err(|e| (e.op_context, e.err))).collect();
                                (t, credits, queued, st.last_qp.map(|(n, _)| n))
                            };
                            let fast = run(true);
                            let slow = run(false);
                            assert_eq!(fast, slow, "{kind:?} indirect={indirect} silent={silent} batch={batch} status={status} opcode={opcode} imm={imm:?} qp={wc_qp}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn completion_flags_by_kind() {
    assert_eq!(OpKind::Send.flags(), FI_SEND | FI_MSG);
    assert_eq!(OpKind::Recv.flags(), FI_RECV | FI_MSG);
    assert_eq!(OpKind::Write.flags(), FI_RMA | FI_WRITE);
    assert_eq!(OpKind::Read.flags(), FI_RMA | FI_READ);
}

#[test]
fn credits_bound_outstanding_requests() {
    let c = QpCounters::new(2, 1);
    assert!(c.take_tx());
    assert!(c.take_tx());
    assert!(!c.take_tx(), "third send must find the queue full");
    c.give_tx();
    assert!(c.take_tx());
    assert!(c.take_rx());
    assert!(!c.take_rx());
    assert_eq!(c.tx.load(Ordering::Relaxed), 2);
}

#[test]
fn unsignalled_injects_give_back_every_credit_once() {
    let c = QpCounters::new(64, 1);
    assert_eq!(c.unsig_batch, UNSIG_BATCH);
    let mut held = 0; // credits taken by unsignalled posts, not yet given back
    let mut signalled = 0;
    for _ in 0..(UNSIG_BATCH * 10) {
        assert!(c.take_tx());
        match c.unsignalled() {
            None => held += 1,
            Some(n) => {
                assert_eq!(n, held + 1, "a signalled inject absorbs exactly the unsignalled ones before it");
                signalled += 1;
                c.give_tx_n(n); // its completion
                held = 0;
            }
        }
        assert!(held < UNSIG_BATCH, "at most UNSIG_BATCH - 1 credits held");
    }
    assert_eq!(signalled, 10, "one inject in UNSIG_BATCH is signalled");
    assert_eq!(c.tx.load(Ordering::Relaxed), held);
    // A failed signalled post holds the absorbed credits again.
    for _ in 0..(UNSIG_BATCH - 1) {
        assert!(c.take_tx());
        assert_eq!(c.unsignalled(), None);
    }
    assert!(c.take_tx());
    let n = c.unsignalled().expect("the batch is full");
    c.unabsorb(n);
    assert_eq!(c.tx.load(Ordering::Relaxed), UNSIG_BATCH - 1);
    assert!(c.take_tx());
    assert_eq!(c.unsignalled(), Some(UNSIG_BATCH), "the next signalled one absorbs them and itself");
    // Small queues still work: a batch of 1 signals every inject.
    let s = QpCounters::new(2, 1);
    assert!(s.take_tx());
    assert_eq!(s.unsignalled(), Some(1));
}

#[test]
fn status_mapping() {
    assert_eq!(status_to_err(wc_status::WR_FLUSH_ERR), FI_ECANCELED);
    assert_eq!(status_to_err(wc_status::LOC_LEN_ERR), FI_ETRUNC);
    assert_eq!(status_to_err(wc_status::REM_ACCESS_ERR), FI_EACCES);
    assert_eq!(status_to_err(9999), FI_EIO);
}
