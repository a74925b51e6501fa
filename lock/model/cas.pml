/*
 * cas.pml: the compare-and-swap lock of ADR 0066 (a persistent lock object
 * with released records, epochs reserved in blocks), checked with spin.
 * doc.go in this directory says how to run it, what it covers and what it
 * does not.
 *
 * Processes P0 and P1 share an instance id, P2 has another (run with
 * -DNPROC=2 for P0 and P1 only). Each makes up to MAXATT acquisition
 * attempts (a new acquisition id each) and up to MAXHB heartbeats per hold.
 *
 * The storage: the lock object .lock (present; acquisition id, write
 * number, epoch, ceiling, state, and the writer's tag, below) with atomic
 * conditional PUT (if-absent, if-version); reservation markers
 * .lock.d/epoch-<n>, created if-absent, listed as their maximum. A version
 * is the (acquisition id, write number) pair: the same request landing
 * twice gives the same version (the same bytes, the same ETag), different
 * writes never do. A record is held, released (by its holder) or root
 * (held, written by a create whose post-check has not passed yet). The
 * protocol never deletes .lock; an operator does: up to MAXOOB out-of-band
 * deletes, of a released or a stale lock (its holder's leases ran out
 * first; a deleted live lock is a forced break, docs/lock.md).
 *
 * The protocol (lock/cas.go), BLK epochs to a block, every block's marker
 * a multiple of BLK:
 *   acquire: GET .lock.
 *     - held: judged (below); refused means look again;
 *     - released, or held and judged takeable: epoch e = its epoch + 1,
 *       ceiling C = its ceiling; when e > C, reserve the next block: the
 *       marker C + BLK, PUT if-absent; then PUT .lock if-version with the
 *       record (held, e, ceiling). The fence opens at the answer: the
 *       compare-and-swap on an object nothing deletes orders the
 *       acquisitions.
 *     - root (another's create not yet confirmed), taken: counted from the
 *       markers as below, then PUT .lock if-version;
 *     - absent (a new store; deleted out of band): LIST the markers,
 *       highest M: e = M + 1, reserve M + BLK; PUT .lock if-absent with a
 *       root record; LIST again: a marker above ours means another
 *       reserved after us, abandon (a released record If-Match ours, the
 *       highest marker as its epoch and ceiling). Else PUT .lock
 *       if-version, held (no root any more), and the fence opens at its
 *       answer.
 *     A reservation counts only if it created its marker: a 412 means
 *     another acquisition owns that block, so LIST and reserve above the
 *     highest; no answer, start over. So no two acquisitions share a
 *     block, and a block's epochs are used in one chain of versions.
 *   a 412 or no answer on the lock write reads .lock: our acquisition id
 *     means our write landed.
 *   heartbeat: PUT .lock if-version (a held record). Confirmed, it proves
 *     nobody wrote .lock since we did, and reopens a suspended fence as it
 *     is. A 412 or no answer reads: ours at another version is adopted,
 *     not confirmed (rule 1, ADR 0019: the next heartbeat, conditioned on
 *     it, confirms); anything else is lost.
 *   release: close the fence, PUT .lock if-version with a released record
 *     (our epoch, our ceiling).
 *   After acquiring, the markers below the ceiling are deleted. Every
 *   epoch used is at most the highest marker, which only an operator
 *   deletes, so a lost .lock never brings an epoch back.
 *
 * THE ASSUMPTION, besides conditions the storage enforces: a lock write
 * sent before an out-of-band delete of .lock is applied before it, or
 * never (the delete drops the pending writes). -DLATE_ACROSS_DELETE lifts
 * it and (b) fails: a create re-sent by the SDK and applied after the
 * delete brings back a record that later acquisitions in the same block
 * had already passed, and nothing outside .lock records epochs inside a
 * block (that is what the blocks save), so no reader can tell.
 *
 * Faults, at most MAXFAULT in all: a write's answer is lost and the write
 * lands now, or is kept in its sender's pending slot to land at any later
 * time or never; an if-absent create lands now, answered, and its first
 * copy (an SDK re-send's) lands again later. A lost answer reads as
 * "failed". Pauses are the interleaving; a crash is a process that stops
 * for good (doc.go: the PID probe's "dead, take over at once" is then the
 * same as letting its lease run out, and a restart is another process).
 *
 * TIME IS ABSTRACT (the model's assumption). Every lock write sent (the
 * sends a lease counts from) takes the next stamp of a global clock gt, so
 * stamps order sends in real time. E[p] = k says p's leases from its sends
 * stamped <= k have run out (one process's leases run out in its send
 * order; nothing relates different processes' leases, which may be
 * configured differently). conf[p] is the stamp of p's last confirmed
 * write; p's fence is open only while conf[p] > E[p]: when the lease runs
 * out the fence closes (suspended) and only a confirmed heartbeat reopens
 * it. A version of the lock records the tag gt at the moment it landed: it
 * landed after every send stamped <= tag. Another process may judge a held
 * version stale, missed-heartbeat (the same-id watch) or unreadable-and-
 * old only once its writer's leases up to its tag ran out; it lets time
 * pass to get there (expiry is lazy: it happens when a judge needs it). A
 * released version is taken at once: its writer closed its fence first.
 *
 * Properties, checked where a fence opens:
 *   (a) mutual exclusion: at most one fence open (assert nopen <= 1);
 *   (b) epochs grow: an acquisition whose fence opens when another
 *       acquisition was the last to open has an epoch above every epoch
 *       that ever opened (assert lastopen == myacq || myep > maxopened).
 *
 * Known-bad variants (each must fail):
 *   -DSAME_ID_AT_ONCE       ADR 0008's rule: a record with our instance id
 *                           is taken over at once, whatever its writer's
 *                           fence. Violates (a).
 *   -DRELEASE_UNCOND        the release is an unconditional PUT: delivered
 *                           after a takeover, it releases the new holder's
 *                           lock. Violates (a).
 *   -DROOT_NO_MARKERS       an absent lock counts from 1, without the
 *                           markers. With out-of-band deletes, (b).
 *   -DNO_BLOCK_MARKER       an epoch past the ceiling is used without a
 *                           reservation. With out-of-band deletes, (b).
 *   -DROOT_SHARED_BLOCK     a create accepts a marker that exists (412):
 *                           two slow creates share a block. (b).
 *   -DBOUNDARY_SHARED_BLOCK a block's end accepts a marker that exists:
 *                           a chain shares a slow create's block. (b).
 *   -DNO_ROOT_POSTCHECK     a create opens without the second LIST. (b).
 *   -DROOT_UNFLAGGED        a create's record is continued in its block
 *                           before its post-check passed. (b).
 * -DLATE_ACROSS_DELETE (above) is the assumption lifted, also expected to
 * fail. -DCANARY is not a variant: it asserts that no second acquisition's
 * fence ever opens, so that its failure shows the good model is not
 * vacuous. ADR 0019's -DNO_POSTCHECK, -DNO_REOPEN_CHECK, -DOURS_CONFIRMS
 * and -DSUSPEND_AT_SEND are gone with the steps they removed or the
 * deleted lock object their counterexamples needed (ADR 0066).
 */

#ifndef NPROC
#define NPROC 3       /* processes run: P0, P1 (same id), P2 (other id) */
#endif
#ifndef MAXATT
#define MAXATT 2      /* acquisition attempts per process */
#endif
#ifndef MAXHB
#define MAXHB 1       /* heartbeats per hold */
#endif
#ifndef MAXFAULT
#define MAXFAULT 2    /* lost answers, late or re-sent writes, in all */
#endif
#ifndef MAXOOB
#define MAXOOB 0      /* out-of-band deletes of .lock, in all */
#endif
#ifndef BLK
#define BLK 2         /* epochs per reserved block (lock.go: epochBlock) */
#endif

#define NP 3

/* acquisition ids: 1 + (process, attempt); 0 = none */
#define ACQ(p, a)  (1 + (p) * MAXATT + (a))
#define OWNER(q)   (((q) - 1) / MAXATT)

#define IID(p)  ((p) == 2 -> 1 : 0)

/* request kinds */
#define R_NONE   0
#define R_CREATE 1   /* PUT .lock If-None-Match: *     */
#define R_UPDATE 2   /* PUT .lock If-Match: version    */
#define R_MARK   3   /* PUT epoch marker If-None-Match: * */
#define R_PUT    4   /* PUT .lock, unconditional (-DRELEASE_UNCOND) */

/* record states */
#define S_HELD 0
#define S_REL  1     /* released */
#define S_ROOT 2     /* held, written by a create not yet confirmed by its
                      * post-check: not continued in its block */

/* answers */
#define A_OK   0
#define A_FAIL 1     /* 412 */
#define A_LOST 2     /* no answer */

#define BIT(x) (1 << (x))

/* the lock object; its version is (lk_acq, lk_ws) */
bool lk;
byte lk_acq, lk_ws, lk_ep, lk_cl, lk_st, lk_tag;

/* reservation markers: bit n set = marker n exists; mkmax = what a LIST
 * gives (markers are deleted only below one that exists) */
int mk;
byte mkmax;

byte noob, nfault;

/* abstract time and fences */
byte gt;             /* lease-relevant sends so far, by anyone: a global clock */
byte E[NP];          /* p's leases from its sends stamped <= E[p] ran out */
byte sent[NP];       /* the stamp of p's latest send */
byte conf[NP];       /* the stamp of p's last confirmed write */
bool open[NP];
byte nopen;
byte maxopened;      /* the highest epoch whose fence ever opened */
byte lastopen;       /* the acquisition that opened last */

/* one pending (late) request per process: kind, condition version, and
 * the record it writes (acquisition, write number, epoch, ceiling,
 * released) */
byte pk[NP], pca[NP], pcw[NP], pa[NP], pw[NP], pe[NP], pc[NP], pr[NP];

/* p's fence closes if the lease of its last confirmed write ran out */
#define SUSPEND(p) \
	if \
	:: open[p] && conf[p] <= E[p] -> \
		open[p] = false; nopen--; \
		printf("MSC: P%d's fence closes (suspended)\n", p) \
	:: else \
	fi

/*
 * Time passes until p's leases from its sends stamped <= k have run out.
 * With -DSAMECONFIG every instance has the same lease, so all leases from
 * sends stamped <= k have run out (the global clock orders them).
 */
#define EXPIRE1(q, k) \
	if \
	:: E[q] < k -> \
		E[q] = k; \
		printf("MSC: time passes: P%d's leases from its sends up to %d run out\n", q, k); \
		SUSPEND(q) \
	:: else \
	fi

inline expire(p, k) {
#ifdef SAMECONFIG
	EXPIRE1(0, k); EXPIRE1(1, k); EXPIRE1(2, k)
#else
	EXPIRE1(p, k)
#endif
}

/* the record lands: version (a, ws), epoch e, ceiling c, released r */
#define WRITE(a, ws, e, c, st) \
	lk = true; lk_acq = a; lk_ws = ws; lk_ep = e; lk_cl = c; lk_st = st; lk_tag = gt

/* a request (kind k, condition version (ca, cw), record (a, ws, e, c, r);
 * a marker's number is e) is evaluated by the store; ans = its answer */
inline land(ld_k, ld_ca, ld_cw, ld_a, ld_w, ld_e, ld_c, ld_r, ld_ans) {
	if
	:: ld_k == R_CREATE ->
		if
		:: !lk ->
			WRITE(ld_a, ld_w, ld_e, ld_c, ld_r); ld_ans = A_OK;
			printf("MSC: create lands: (%d,%d) epoch %d ceiling %d state %d tag %d\n", ld_a, ld_w, ld_e, ld_c, ld_r, lk_tag)
		:: else -> ld_ans = A_FAIL
		fi
	:: ld_k == R_UPDATE ->
		if
		:: lk && lk_acq == ld_ca && lk_ws == ld_cw ->
			WRITE(ld_a, ld_w, ld_e, ld_c, ld_r); ld_ans = A_OK;
			printf("MSC: update of (%d,%d) lands: (%d,%d) epoch %d ceiling %d state %d tag %d\n", ld_ca, ld_cw, ld_a, ld_w, ld_e, ld_c, ld_r, lk_tag)
		:: else -> ld_ans = A_FAIL
		fi
	:: ld_k == R_PUT ->
		WRITE(ld_a, ld_w, ld_e, ld_c, ld_r); ld_ans = A_OK;
		printf("MSC: unconditional put lands: (%d,%d) epoch %d state %d\n", ld_a, ld_w, ld_e, ld_r)
	:: ld_k == R_MARK ->
		if
		:: mk & BIT(ld_e) -> ld_ans = A_FAIL
		:: else ->
			mk = mk | BIT(ld_e);
			if
			:: ld_e > mkmax -> mkmax = ld_e
			:: else
			fi;
			ld_ans = A_OK;
			printf("MSC: marker %d lands\n", ld_e)
		fi
	fi
}

/*
 * A pending if-version write whose version is gone for good (not the
 * lock's now, and no pending create can bring it back) and a pending
 * marker that exists can never land: dropping them changes nothing that
 * can be observed and keeps the state space small.
 */
#define LIVEVER(ca, cw) ((lk && lk_acq == (ca) && lk_ws == (cw)) || \
	(pk[OWNER(ca)] == R_CREATE && pa[OWNER(ca)] == (ca) && pw[OWNER(ca)] == (cw)))
#define DEAD(i) ((pk[i] == R_UPDATE && !LIVEVER(pca[i], pcw[i])) || \
	(pk[i] == R_MARK && (mk & BIT(pe[i]))))
#define CLEAR(i) pk[i] = R_NONE; pca[i] = 0; pcw[i] = 0; pa[i] = 0; pw[i] = 0; pe[i] = 0; pc[i] = 0; pr[i] = 0
#define DROP(i) \
	if \
	:: DEAD(i) -> CLEAR(i) \
	:: else \
	fi

inline gc() {
	DROP(0); DROP(1); DROP(2)
}

inline keep(kp_k, kp_ca, kp_cw, kp_a, kp_w, kp_e, kp_c, kp_r) {
	pk[me] = kp_k; pca[me] = kp_ca; pcw[me] = kp_cw; pa[me] = kp_a; pw[me] = kp_w; pe[me] = kp_e; pc[me] = kp_c; pr[me] = kp_r
}

/* the process sends a request; ans is the answer it gets */
inline send(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r) {
	if
	:: land(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r, ans)
	:: nfault < MAXFAULT && pk[me] == R_NONE ->
		nfault++; keep(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r); ans = A_LOST
	:: nfault < MAXFAULT && pk[me] != R_NONE ->
		nfault++; land(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r, ans); ans = A_LOST
	:: nfault < MAXFAULT && s_k == R_CREATE && pk[me] == R_NONE ->
		nfault++; land(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r, ans); keep(s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r)
	fi;
	gc();
	printf("MSC: P%d sends %d (1 create, 2 update, 3 marker, 4 put) if (%d,%d): (%d,%d) epoch %d ceiling %d state %d; answer %d (0 ok, 1 412, 2 lost); pending %d\n",
		me, s_k, s_ca, s_cw, s_a, s_w, s_e, s_c, s_r, ans, pk[me])
}

inline open_fence() {
	open[me] = true;
	nopen++;
	printf("MSC: P%d acquisition %d epoch %d ceiling %d: fence OPENS (lease from send %d; expired up to %d)\n",
		me, myacq, myep, mycl, conf[me], E[me]);
	assert(nopen <= 1);
	assert(lastopen == myacq || myep > maxopened);
#ifdef CANARY
	/* not a property: shows that a second attempt's fence opens at all */
	assert(lastopen == 0 || lastopen == myacq);
#endif
	lastopen = myacq;
	if
	:: myep > maxopened -> maxopened = myep
	:: else
	fi
}

inline close_fence() {
	if
	:: open[me] -> open[me] = false; nopen--; printf("MSC: P%d closes its fence\n", me)
	:: else
	fi
}

/*
 * May me take over the lock's current (held) version? Stale (rule 1 or 2),
 * a missed heartbeat (the same-id watch), unreadable-and-stale: all only
 * once the writer's lease from the version's tag ran out; the judge lets
 * time pass to get there. A dead PID in our PID space (taken over at once)
 * is a process that stopped for good: letting its lease run out is the
 * same (doc.go). Anything else is a refusal, which the judge may always
 * choose.
 */
inline judge() {
	if
	:: expire(OWNER(lk_acq), lk_tag); ok = true
#ifdef SAME_ID_AT_ONCE
	:: IID(OWNER(lk_acq)) == IID(me) -> ok = true
#endif
	:: ok = false
	fi
}

proctype P(byte me) {
	byte myacq, myws, myep, mycl, e, c, ca, cw, att, hb, ans;
	bool ok, root, top;

attempt:
	atomic {
		myacq = 0; myws = 0; myep = 0; mycl = 0; e = 0; c = 0; ca = 0; cw = 0;
		hb = 0; ans = 0; root = false; top = false;
		if
		:: att >= MAXATT -> goto done
		:: else
		fi;
		myacq = ACQ(me, att);
		att++
	}
look:
	/*
	 * GET .lock and judge it. For a lock whose next epoch needs no
	 * reservation, the GET, the judgement and the conditional write are
	 * one step: a GET whose version changed before the write is answered
	 * 412 and reads again, which the failure path below does.
	 */
	atomic {
		if
		:: !lk ->
			/* absent: a create, counted from the markers */
			root = true; top = true
		:: lk ->
			if
			:: lk_st == S_REL -> ok = true     /* released: take it at once */
			:: else -> judge()
			fi;
			if
			:: ok ->
				ok = false; ca = lk_acq; cw = lk_ws;
				if
#ifndef ROOT_UNFLAGGED
				:: lk_st == S_ROOT ->
					/* a create not confirmed by its post-check: not
					 * continued in its block, counted from the markers */
					top = true
#endif
				:: else ->
					e = lk_ep + 1; c = lk_cl;
					if
					:: e <= c ->
						gt++; sent[me] = gt;
						send(R_UPDATE, ca, cw, myacq, sent[me], e, c, S_HELD);
						goto written
					:: else -> c = c + BLK   /* the next block */
					fi
				fi
			:: else -> goto look       /* refuse, or watch: look again */
			fi
		fi
	}
	/*
	 * A reservation: the marker of our block, created by us (PUT
	 * if-absent). At a block's end the next block; counted from the
	 * markers (LIST), the block above the highest. A 412 means another
	 * acquisition owns that block: LIST, and reserve above the highest.
	 * No answer: start over.
	 */
#ifdef ROOT_NO_MARKERS
	if
	:: root -> e = 1; c = BLK; goto write
	:: else
	fi;
#endif
	if
	:: top -> atomic { e = mkmax + 1; c = mkmax + BLK }
	:: else
	fi;
#ifdef NO_BLOCK_MARKER
	if
	:: !top -> goto write
	:: else
	fi;
#endif
reserve:
	atomic {
		send(R_MARK, 0, 0, myacq, 0, c, 0, S_HELD);
		if
		:: ans == A_OK -> ans = 0
#ifdef ROOT_SHARED_BLOCK
		:: ans == A_FAIL && root -> ans = 0     /* shared with another root */
#endif
#ifdef BOUNDARY_SHARED_BLOCK
		:: ans == A_FAIL && !top -> ans = 0     /* shared: "it exists" */
#endif
		:: ans == A_FAIL ->
			ans = 0; e = mkmax + 1; c = mkmax + BLK; top = true;
			goto reserve
		:: ans == A_LOST -> ans = 0; goto attempt
		fi
	}
write:
	atomic {
		gt++; sent[me] = gt;
		if
		:: root -> send(R_CREATE, 0, 0, myacq, sent[me], e, c, S_ROOT)
		:: else -> send(R_UPDATE, ca, cw, myacq, sent[me], e, c, S_HELD)
		fi
	}
written:
	atomic {
		if
		:: ans == A_OK -> ans = 0
		:: else ->
			/* a 412 or no answer: read again; our acquisition id = ours */
			ans = 0;
			if
			:: lk && lk_acq == myacq && lk_ws == sent[me]
			:: else -> goto attempt
			fi
		fi;
		/* our record is (myacq, sent[me]) */
		myws = sent[me]; conf[me] = sent[me]; myep = e; mycl = c; e = 0; c = 0; ca = 0; cw = 0;
		/* the markers below our ceiling are deleted (cleanup) */
		mk = mk & ~(BIT(mycl) - 1);
#ifndef NO_ROOT_POSTCHECK
		if
		:: root -> goto postcheck
		:: else
		fi;
#endif
		if
		:: conf[me] > E[me] -> open_fence()
		:: else
		fi;
		goto hold
	}
postcheck:
	/* a create LISTs the markers again: one above its own means another
	 * reserved after it (it may have held, and its lock been deleted out
	 * of band, before our create landed); abandon: a released record,
	 * If-Match ours, with the highest marker as its epoch and ceiling */
	atomic {
		if
		:: mkmax > mycl ->
			gt++;
			send(R_UPDATE, myacq, myws, myacq, gt, mkmax, mkmax, S_REL);
			ans = 0;
			goto attempt
		:: else
		fi
	}
	/* passed: the record is written again, no root any more (so that a
	 * crash from here leaves one counted on from), and the fence opens
	 * at that write's answer; a 412 or no answer starts over */
	atomic {
		gt++; sent[me] = gt;
		send(R_UPDATE, myacq, myws, myacq, sent[me], myep, mycl, S_HELD);
		if
		:: ans == A_OK ->
			ans = 0; myws = sent[me]; conf[me] = sent[me];
			if
			:: conf[me] > E[me] -> open_fence()
			:: else
			fi
		:: else -> ans = 0; goto attempt
		fi
	}
hold:
	do
	:: atomic {
			/* heartbeat: PUT .lock if-version. Confirmed, it proves nobody
			 * wrote .lock since our last write (it is never deleted by
			 * the protocol), so it reopens a suspended fence as it is */
			hb < MAXHB ->
			hb++;
			gt++; sent[me] = gt;
			send(R_UPDATE, myacq, myws, myacq, sent[me], myep, mycl, S_HELD);
			if
			:: ans == A_OK ->
				ans = 0; myws = sent[me]; conf[me] = sent[me];
				if
				:: !open[me] && conf[me] > E[me] -> open_fence()
				:: else
				fi;
				goto hold
			:: else -> ans = 0
			fi
		}
		/* a 412 or no answer: read */
		atomic {
			if
			:: lk && lk_acq == myacq && lk_st != S_REL && lk_ws != myws ->
				/* ours: a write of ours landed, its answer lost; adopted,
				 * not confirmed (rule 1): the next heartbeat confirms */
				myws = lk_ws
			:: lk && lk_acq == myacq && lk_st != S_REL && lk_ws == myws
				/* not landed (yet): try again */
			:: else ->
				/* lost */
				close_fence();
				goto attempt
			fi
		}
	:: atomic {
			/* release: PUT a released record if-version */
			close_fence();
			gt++;
#ifdef RELEASE_UNCOND
			send(R_PUT, 0, 0, myacq, gt, myep, mycl, S_REL);
#else
			send(R_UPDATE, myacq, myws, myacq, gt, myep, mycl, S_REL);
#endif
			ans = 0;
			goto attempt
		}
	od;
done:
	skip
}

#define DELIVER(i) \
	atomic { pk[i] != R_NONE -> \
		land(pk[i], pca[i], pcw[i], pa[i], pw[i], pe[i], pc[i], pr[i], tmp); \
		CLEAR(i); tmp = 0; \
		gc() }

/* the network (late writes) and an operator */
active proctype env() {
	byte tmp;
end:
	do
	:: DELIVER(0)
	:: DELIVER(1)
	:: DELIVER(2)
	:: atomic {
		/* an out-of-band delete of .lock (rm, a lifecycle rule), of a
		 * released or a stale lock (a live one's is a forced break) */
		noob < MAXOOB && lk ->
		noob++;
		if
		:: lk_st != S_REL -> expire(OWNER(lk_acq), lk_tag)
		:: else
		fi;
		printf("MSC: .lock is deleted out of band\n");
		lk = false; lk_st = 0; lk_acq = 0; lk_ws = 0; lk_ep = 0; lk_cl = 0; lk_tag = 0;
#ifndef LATE_ACROSS_DELETE
		/* the assumption: a lock write sent before the delete was
		 * applied before it, or is never applied */
		CLEAR(0); CLEAR(1); CLEAR(2);
#endif
		gc()
	   }
	od
}

init {
	atomic {
		run P(0);
		run P(1);
#if NPROC > 2
		run P(2)
#endif
	}
}
