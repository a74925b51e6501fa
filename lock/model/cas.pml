/*
 * cas.pml: the compare-and-swap lock of ADR 0019 (docs/adr/0019-instance-
 * lock-live-means-live.md), checked with spin. doc.go in this directory
 * says how to run it, what it covers and what it does not.
 *
 * Processes P0 and P1 share an instance id, P2 has another (run with
 * -DNPROC=2 for P0 and P1 only). Each makes up to MAXATT acquisition
 * attempts (a new acquisition id each) and up to MAXHB heartbeats per hold.
 *
 * The storage: the lock object (present; acquisition id, write number,
 * epoch, and the writer's tag, below) with atomic conditional PUT
 * (if-absent, if-version) and conditional DELETE (if-version); epoch
 * markers created if-absent and listed as their maximum. A version is the
 * (acquisition id, write number) pair: the same request landing twice
 * gives the same version (the same bytes, the same ETag), different writes
 * never do.
 *
 * Faults, at most MAXFAULT in all: a write's answer is lost and the write
 * lands now, or is kept in its sender's pending slot to land at any later
 * time or never; an if-absent create lands now, answered, and its first
 * copy (an SDK re-send's) lands again later, after a delete; a delete
 * never lands. A lost answer reads as "failed". Pauses are the
 * interleaving; a crash is a process that stops for good (doc.go: the PID
 * probe's "dead, take over at once" is then the same as letting its lease
 * run out, and a restart is another process).
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
 * landed after every send stamped <= tag. Another process may judge a
 * version stale, missed-heartbeat (the same-id watch) or unreadable-and-
 * old only once its writer's leases up to its tag ran out; it lets time
 * pass to get there (expiry is lazy: it happens when a judge needs it).
 * This encodes "a paused process's fence closes on its own clock before
 * others may judge it stale": W > L and, for the watch, L < H + G, both
 * counted from no earlier than the landing.
 *
 * Two rules this model found missing from ADR 0019, modelled as fixed:
 *   1. a heartbeat whose 412 (or lost answer) reads a record with our
 *      acquisition id adopts its version but does not confirm the lease
 *      (the record may be an older write of ours, or our own if-absent
 *      create landing again); the next heartbeat, conditioned on it,
 *      confirms;
 *   2. a heartbeat that confirms after a suspension LISTs the markers
 *      before the fence reopens: a marker above our epoch means someone
 *      held the lock meanwhile, and we lost it (a re-sent if-absent create
 *      of ours can land after their release and look exactly like our
 *      record, so the conditional write alone cannot tell).
 *
 * Properties, checked where a fence opens:
 *   (a) mutual exclusion: at most one fence open (assert nopen <= 1);
 *   (b) epochs grow: an acquisition whose fence opens when another
 *       acquisition was the last to open has an epoch above every epoch
 *       that ever opened (assert lastopen == myacq || myep > maxopened).
 *
 * Known-bad variants (each must fail):
 *   -DSAME_ID_AT_ONCE   ADR 0008's rule: a record with our instance id is
 *                       taken over at once, whatever its writer's fence
 *                       (in abstract time also what a single lease W - m
 *                       with the same-id watch amounts to). Violates (a).
 *   -DNO_POSTCHECK      the acquirer opens its fence whatever its marker
 *                       write answered and without listing again.
 *                       Violates (b).
 *   -DOURS_CONFIRMS     without rule 1: a 412 that reads our acquisition
 *                       id confirms the lease from the first heartbeat
 *                       since the last confirmed one. Violates (a).
 *   -DNO_REOPEN_CHECK   without rule 2. Violates (b).
 *   -DSUSPEND_AT_SEND   the heartbeat decides "suspended" before its PUT,
 *                       as lock.go did before ADR 0027 (finding 6): a
 *                       lease that runs out while the PUT is in flight is
 *                       confirmed without rule 2. Violates (b).
 * -DCANARY is not a variant: it asserts that no second acquisition's fence
 * ever opens, so that its failure shows the good model is not vacuous.
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
#define MAXOOB 0      /* out-of-band deletes of a stale lock, in all */
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
#define R_DELETE 3   /* DELETE .lock If-Match: version */
#define R_MARK   4   /* PUT epoch marker If-None-Match: * */

/* answers */
#define A_OK   0
#define A_FAIL 1     /* 412 */
#define A_LOST 2     /* no answer */

/* the lock object; its version is (lk_acq, lk_ws) */
bool lk;
byte lk_acq, lk_ws, lk_ep, lk_tag;

/* epoch markers: bit e set = marker e exists; mkmax = what a LIST gives */
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

/* one pending (late) request per process */
byte pk[NP], pca[NP], pcw[NP], pa[NP], pe[NP], pw[NP];

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

/* a request (kind k, condition version (ca, cw), content acquisition a,
 * epoch e, write number ws) is evaluated by the store; r = its answer */
inline land(k, ca, cw, a, e, ws, r) {
	if
	:: k == R_CREATE ->
		if
		:: !lk ->
			lk = true; lk_acq = a; lk_ws = ws; lk_ep = e;
			lk_tag = gt; r = A_OK;
			printf("MSC: create lands: (%d,%d) epoch %d tag %d\n", a, ws, e, lk_tag)
		:: else -> r = A_FAIL
		fi
	:: k == R_UPDATE ->
		if
		:: lk && lk_acq == ca && lk_ws == cw ->
			lk_acq = a; lk_ws = ws; lk_ep = e;
			lk_tag = gt; r = A_OK;
			printf("MSC: update of (%d,%d) lands: (%d,%d) epoch %d tag %d\n", ca, cw, a, ws, e, lk_tag)
		:: else -> r = A_FAIL
		fi
	:: k == R_DELETE ->
		if
		:: lk && lk_acq == ca && lk_ws == cw ->
			lk = false; lk_acq = 0; lk_ws = 0; lk_ep = 0; lk_tag = 0; r = A_OK;
			printf("MSC: delete of (%d,%d) lands\n", ca, cw)
		:: else -> r = A_FAIL
		fi
	:: k == R_MARK ->
		if
		:: mk & (1 << e) -> r = A_FAIL
		:: else ->
			mk = mk | (1 << e);
			if
			:: e > mkmax -> mkmax = e
			:: else
			fi;
			r = A_OK;
			printf("MSC: marker %d lands\n", e)
		fi
	fi
}

/*
 * A pending if-version write or delete whose version is gone for good (not
 * the lock's now, and no pending create can bring it back) and a pending
 * marker that exists can never land: dropping them changes nothing that
 * can be observed and keeps the state space small.
 */
#define LIVEVER(ca, cw) ((lk && lk_acq == (ca) && lk_ws == (cw)) || \
	(pk[OWNER(ca)] == R_CREATE && pa[OWNER(ca)] == (ca) && pw[OWNER(ca)] == (cw)))
#define DEAD(i) (((pk[i] == R_UPDATE || pk[i] == R_DELETE) && !LIVEVER(pca[i], pcw[i])) || \
	(pk[i] == R_MARK && (mk & (1 << pe[i]))))
#define DROP(i) \
	if \
	:: DEAD(i) -> pk[i] = R_NONE; pca[i] = 0; pcw[i] = 0; pa[i] = 0; pe[i] = 0; pw[i] = 0 \
	:: else \
	fi

inline gc() {
	DROP(0); DROP(1); DROP(2)
}

inline keep(k, ca, cw, a, e, ws) {
	pk[me] = k; pca[me] = ca; pcw[me] = cw; pa[me] = a; pe[me] = e; pw[me] = ws
}

/* the process sends a request; ans is the answer it gets */
inline send(k, ca, cw, a, e, ws) {
	if
	:: land(k, ca, cw, a, e, ws, ans)
	:: nfault < MAXFAULT && k == R_DELETE ->
		nfault++; ans = A_LOST   /* never lands */
	:: nfault < MAXFAULT && k != R_DELETE && pk[me] == R_NONE ->
		nfault++; keep(k, ca, cw, a, e, ws); ans = A_LOST
	:: nfault < MAXFAULT && k != R_DELETE && pk[me] != R_NONE ->
		nfault++; land(k, ca, cw, a, e, ws, ans); ans = A_LOST
	:: nfault < MAXFAULT && k == R_CREATE && pk[me] == R_NONE ->
		nfault++; land(k, ca, cw, a, e, ws, ans); keep(k, ca, cw, a, e, ws)
	fi;
	gc();
	printf("MSC: P%d sends %d (1 create, 2 update, 3 delete, 4 marker) if (%d,%d): (%d,%d) epoch %d; answer %d (0 ok, 1 412, 2 lost); pending %d\n",
		me, k, ca, cw, a, ws, e, ans, pk[me])
}

inline open_fence() {
	open[me] = true;
	nopen++;
	printf("MSC: P%d acquisition %d epoch %d: fence OPENS (lease from send %d; expired up to %d)\n",
		me, myacq, myep, conf[me], E[me]);
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
 * May me take over the lock's current version? Stale (rule 1 or 2), a
 * missed heartbeat (the same-id watch), unreadable-and-stale: all only once
 * the writer's lease from the version's tag ran out; the judge lets time
 * pass to get there. A dead PID in our PID space (taken over at once) is a
 * process that stopped for good: letting its lease run out is the same
 * (doc.go). Anything else is a refusal, which the judge may always choose.
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
	byte myacq, myws, myep, e, att, hb, ans;
	bool ok;
#ifdef SUSPEND_AT_SEND
	bool wassusp;
#endif
#ifdef OURS_CONFIRMS
	byte hbfirst, seq;
#endif

attempt:
	atomic {
		myacq = 0; myws = 0; myep = 0; e = 0; hb = 0; ans = 0;
#ifdef OURS_CONFIRMS
		hbfirst = 0; seq = 0;
#endif
		if
		:: att >= MAXATT -> goto done
		:: else
		fi;
		myacq = ACQ(me, att);
		att++;
		/* LIST the prefix: the highest marker */
		e = mkmax;
		goto getwrite
	}
relist:
	e = mkmax;
getwrite:
	/*
	 * GET .lock, judge, and the conditional write, as one step: a GET whose
	 * version changed before the write is answered 412 and backs off, which
	 * is what a refusal does; an unchanged one is this.
	 */
	atomic {
		if
		:: !lk ->
			e++;
			gt++; sent[me] = gt;
			send(R_CREATE, 0, 0, myacq, e, sent[me])
		:: lk ->
			judge();
			if
			:: ok ->
				ok = false;
				e = ((lk_ep > e) -> lk_ep : e) + 1;
				gt++; sent[me] = gt;
				send(R_UPDATE, lk_acq, lk_ws, myacq, e, sent[me])
			:: else -> e = 0; goto relist   /* refuse, or watch: read again */
			fi
		fi;
		if
		:: ans == A_OK -> ans = 0; goto won
		:: else -> ans = 0
		fi
	}
	/* a 412 or no answer: read again; our acquisition id = ours */
	atomic {
		if
		:: lk && lk_acq == myacq
		:: else -> goto attempt
		fi
	}
won:
	/* our record is (myacq, sent[me]); the epoch marker, if-absent */
	atomic {
		myws = sent[me]; conf[me] = sent[me]; myep = e; e = 0;
		send(R_MARK, 0, 0, myacq, myep, 0);
#ifndef NO_POSTCHECK
		if
		:: ans != A_OK -> ans = 0; goto abandon   /* taken, or cannot tell */
		:: else
		fi;
#endif
		ans = 0
	}
	/* the post-check LIST: a marker above ours; then the fence opens,
	 * unless the lease ran out meanwhile (then it is suspended) */
	atomic {
#ifndef NO_POSTCHECK
		if
		:: mkmax > myep -> goto abandon
		:: else
		fi;
#endif
		if
		:: conf[me] > E[me] -> open_fence()
		:: else
		fi
	}
hold:
	do
	:: atomic {
			/* heartbeat: PUT .lock if-version */
			hb < MAXHB ->
			hb++;
#ifdef SUSPEND_AT_SEND
			/* decided before the PUT, as lock.go did: the lease may run
			 * out between here and the answer */
			wassusp = !(E[me] < conf[me])
		}
		atomic {
#endif
			gt++; sent[me] = gt;
#ifdef OURS_CONFIRMS
			if
			:: hbfirst == 0 -> hbfirst = sent[me]
			:: else
			fi;
			seq = sent[me];
#endif
			send(R_UPDATE, myacq, myws, myacq, myep, sent[me]);
			if
			:: ans == A_OK ->
				ans = 0; myws = sent[me];
				if
#ifdef SUSPEND_AT_SEND
				:: !wassusp ->
					/* "not suspended" as decided at the send: confirmed,
					 * and a fence that closed meanwhile reopens unchecked */
					conf[me] = sent[me];
					if
					:: !open[me] && conf[me] > E[me] -> open_fence()
					:: else
					fi;
					goto hold
#else
				:: E[me] < conf[me] ->
					/* not suspended at the answer: confirmed, the fence
					 * stays open */
					conf[me] = sent[me];
#ifdef OURS_CONFIRMS
					hbfirst = 0; seq = 0;
#endif
					goto hold
#endif
				:: else -> goto reopen
				fi
			:: else -> ans = 0
			fi
		}
		/* a 412 or no answer: read */
		atomic {
			if
			:: lk && lk_acq == myacq && lk_ws != myws ->
				/* ours: a write of ours landed, its answer lost */
				myws = lk_ws;
#ifdef OURS_CONFIRMS
				/* taken as confirmed, from the first heartbeat since */
				seq = hbfirst;
				if
				:: E[me] < conf[me] -> conf[me] = seq; hbfirst = 0; seq = 0
				:: else -> goto reopen
				fi
#endif
				/* else adopted, not confirmed: the next heartbeat confirms */
			:: lk && lk_acq == myacq && lk_ws == myws
				/* not landed (yet): try again */
			:: else ->
				/* lost */
				close_fence();
				goto attempt
			fi
		}
	:: atomic {
			/* release: DELETE .lock if-version */
			close_fence();
			send(R_DELETE, myacq, myws, 0, 0, 0);
			ans = 0;
			goto attempt
		}
	od;
reopen:
	/* a write was confirmed after a suspension: LIST, and a marker above
	 * ours means someone held the lock meanwhile */
	atomic {
#ifndef NO_REOPEN_CHECK
		if
		:: mkmax > myep -> goto attempt
		:: else
		fi;
#endif
#ifdef OURS_CONFIRMS
		conf[me] = seq; hbfirst = 0; seq = 0;
#else
		conf[me] = sent[me];
#endif
		if
		:: conf[me] > E[me] -> open_fence()
		:: else
		fi;
		goto hold
	}
abandon:
	atomic {
		send(R_DELETE, myacq, myws, 0, 0, 0);
		ans = 0;
		goto attempt
	}
done:
	skip
}

#define DELIVER(i) \
	atomic { pk[i] != R_NONE -> \
		land(pk[i], pca[i], pcw[i], pa[i], pe[i], pw[i], tmp); \
		pk[i] = R_NONE; pca[i] = 0; pcw[i] = 0; pa[i] = 0; pe[i] = 0; pw[i] = 0; tmp = 0; \
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
		/* an out-of-band delete (rm, a lifecycle rule) of a stale lock */
		noob < MAXOOB && lk ->
		noob++;
		expire(OWNER(lk_acq), lk_tag);
		printf("MSC: the lock is deleted out of band\n");
		lk = false; lk_acq = 0; lk_ws = 0; lk_ep = 0; lk_tag = 0;
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
