/*
 * time.pml: the instance lock in explicit time, checked with spin: the
 * judgements of ADR 0028 (no takeover on one machine's clock) and the
 * fenced data writes and release of ADR 0026 (the release a released
 * record, ADR 0066; in claims mode no look, ADR 0067), where cas.pml and
 * claims.pml keep time abstract. doc.go in this directory says how to run
 * it.
 *
 * Time is a global tick t. Every process's monotonic clock is t (clock
 * rates agree: the models' one timing assumption). Wall clocks: the
 * holder's is t, the judge's t + sk with |sk| <= TOL, chosen once (two
 * machines' wall clocks agree within the stale window's margin, the stated
 * tolerance). The storage has two nodes; node n's clock is t + off[n], and
 * an environment may step either offset to any value in -S..S at any time
 * (up to MAXSTEP steps): a write is stamped by the node that applies it,
 * an age is judged against the node that answers, so steps of any size and
 * nodes skewed by any amount are in reach (S exceeds every window).
 *
 * SCEN 0, a holder and a judge. A holds the lock (epoch 1) in one record
 * (the lock object; a held claim behaves the same for these rules): it
 * heartbeats whenever it likes (a conditional PUT on its version that
 * lands within RT of its sending or never, its answer possibly lost); its
 * fence is open while t - conf < L and no heartbeat saw the lease run out
 * since; it counts itself lost at t - conf >= LL; a heartbeat that
 * confirms after the lease ran out checks the markers before reopening
 * (claims mode; in compare-and-swap mode its 412 already tells). A
 * writes one data object through its fence: a write sent while the fence
 * is open carries the deadline conf + L (the client gives up then), is
 * conditional on the version A knows, and is applied by the storage at any
 * later time or never (late delivery, unbounded). A may release: its
 * fence closes, it waits until its write is answered or cut off (the
 * drain), then writes a released record (conditionally on its version);
 * the record is never deleted but out of band (-DOOB, once, whoever holds
 * it). B, with A's instance id
 * or another (chosen once), looks at the record again and again, judging
 * it as lock.go does: watched unchanged for W (another id) or MHB (the
 * same id, a PID space it cannot probe), or old on the storage's clock
 * and on the second clock (its own wall clock against A's stamp), all >=
 * W. A released or absent record it takes at once. It takes over (its
 * record, epoch 2), opens its fence and writes the data object on the
 * version it reads. An operator may break the lock once (-DBREAK),
 * writing a released record on the version it judged: without force only
 * what a boot would take at once; with -DFORCE whatever it finds.
 *
 * SCEN 1, two acquirers in claims mode. Each writes an intent (stamped
 * with its wall clock), lists, and confirms before its intent deadline
 * (IW - IM after its start) unless it sees the other's held claim or a
 * live intent: an intent is dead when watched unchanged for IW or old on
 * the storage's clock and on the second clock, both >= IW. A holder keeps
 * its intent until it releases, without a look, by deleting its held
 * claim and its intent in either order (one multi-object delete, not
 * atomic): the other may then confirm, judging what it finds.
 *
 * Properties:
 *   (a) mutual exclusion: never two fences open (not with -DFORCE or
 *       -DOOB, whose window until the old holder's next heartbeat is
 *       documented);
 *   (b) a data write of epoch 1 never lands after one of a later epoch
 *       (with -DOOB too: the storage's conditions keep it);
 *   (c) a takeover only when the holder counts itself lost (another id)
 *       or its fence has closed (the same id): the premise the claims
 *       heartbeat's reopening rests on (claims.pml, -DOTHER_ID_SHORT).
 *
 * Known-bad variants (each must fail):
 *   -DNO_DRAIN              release deletes the record without waiting
 *                           for the write in flight (finding 1), with
 *                           -DNOCOND: storage without conditions, whose
 *                           writes land only before their client cut-off
 *                           (the residual window's assumption). (b).
 *   -DBLIND_DATA            fenced data writes unconditional, delivered
 *                           late (finding 2). (b).
 *   -DINTENT_STORAGE_AGE    SCEN 1: an intent judged dead on the storage's
 *                           clock alone (finding 3). (a).
 *   -DOTHER_ID_MISSED_HB    another id takes over a record old on the
 *                           storage's clock after MHB of watching (finding
 *                           4). (c).
 *   -DSTORAGE_AGE_ONLY      a record judged stale on the storage's clock
 *                           alone. (c).
 *   -DBREAK_WATCHING        with -DBREAK: a break without force takes a
 *                           record a boot would watch (finding 5). (c).
 * Finding 6 (the heartbeat decides "suspended" at its send) is
 * claims.pml's -DSUSPEND_AT_SEND (cas.pml's until ADR 0066: a compare-
 * and-swap heartbeat has no check after a suspension any more).
 */

#ifndef SCEN
#define SCEN 0
#endif
#ifndef MAXSTEP
#define MAXSTEP 2
#endif
#ifndef TMAX
#define TMAX 30
#endif

#define H   4    /* heartbeat interval */
#define L   5    /* lease: 1.25 H */
#define W   9    /* stale window: at least 2 H */
#define LL  7    /* W less its margin: the holder counts itself lost (> MHB) */
#define MHB 6    /* 1.5 H: the same-id watch */
#define RT  2    /* a heartbeat's request timeout */
#define TOL 2    /* wall clocks agree within the margin of W */
#define IW  4    /* intent window */
#define ID  3    /* intent deadline: IW less its margin */
#define ITOL 1   /* wall clocks agree within the margin of IW */
#ifndef S
#define S   10   /* storage offsets range over -S..S: above every window */
#endif
#define NONE 255

byte t;
short off[2];
short stepv;        /* scratch for a step */
byte nstep;
short sk;        /* the judge's wall clock: t + sk */
byte mk = 1;     /* highest epoch marker */

/* a step of a storage node's clock, to any offset */
#define STEP \
	atomic { nstep < MAXSTEP -> nstep++; \
		select(stepv : -S .. S); \
		if \
		:: off[0] = stepv \
		:: off[1] = stepv \
		fi; \
		stepv = 0 }

#if SCEN == 0 || SCEN == 2

/* the record (lock object): it exists (only an out-of-band delete removes
 * it), whose it is, and whether it is released */
bool rex = true;
byte rown;       /* 0 A, 1 B, 2 the operator's break */
bool rrel;       /* a released record: taken at once */
bool rchg;       /* written since B last looked: a new version */
short rmod;      /* its modification time, on the node that applied it */
short rwall;     /* its writer's wall clock at the send */

/* A */
byte aconf;      /* send time of the last confirmed write */
bool asusp, alost, arel, adel;
byte hbs = NONE; /* send time of the heartbeat in flight */
bool hbland;     /* it landed (its answer not yet) */
/* A's data write */
bool dwnet, dwcli, dwsent;
byte dwdl, dwcond, akv;

/* the data object */
byte dver, dep;

/* B */
bool bsame, bopen, bwrote, bseen;
byte bseent, bep;
bool broke, oob;

/* a forced break and an out-of-band delete of a live lock leave the old
 * holder writing until its next heartbeat: mutual exclusion (a) and the
 * takeover premise (c) are not checked then, (b) is */
#if defined(FORCE) || defined(OOB)
#define UNGUARDED
#endif

/* B's judgement of A's record, looked at through node n */
#define RULES(n) ((t - bseent >= W) || (AGE(n) >= W && OWNAGE >= W) || (bsame && t - bseent >= MHB))
#if SCEN == 0 && defined(BREAK)
/* the break is what is judged: B only acquires a lock the break removed */
#define TAKE(n) false
#elif SCEN == 2
/* the judgement is SCEN 0's: here B takes over at the earliest its rules
 * allow — A counts itself lost (another id), or the watch of MHB from no
 * earlier than A's last confirmed send (our id) — or after a break */
#define TAKE(n) (bsame && t - aconf >= MHB || AGONE || broke)
#elif defined(OTHER_ID_MISSED_HB)
#define TAKE(n) (RULES(n) || (AGE(n) >= W && t - bseent >= MHB))
#elif defined(STORAGE_AGE_ONLY)
#define TAKE(n) (RULES(n) || AGE(n) >= W)
#else
#define TAKE(n) RULES(n)
#endif

#ifdef NO_DRAIN
#define DRAINED true
#else
#define DRAINED (!dwcli && hbs == NONE)
#endif
#define AOPEN (!alost && !arel && !asusp && t - aconf < L)
#define AGE(n) ((t + off[n]) - rmod)
/* a write applied by node n, sent at wall time w: its modification time
 * on n's clock and its writer's stamp (only the judging scenario reads
 * them) */
#if SCEN == 0
#define STAMP(n, w) rmod = t + off[n]; rwall = w
#else
#define STAMP(n, w) skip
#endif
#define OWNAGE ((t + sk) - rwall)
/* A counts itself lost, or has let go */
#define AGONE (alost || adel || t - aconf >= LL)

inline land_data(ep) {
	assert(dep <= ep);   /* (b) */
	dver++; dep = ep
}

inline takeover(n) {
	bep = mk + 1; mk = bep;
	rex = true; rown = 1; rrel = false; rchg = true; STAMP(n, t + sk);
	bopen = true;
	printf("MSC: t=%d B takes the lock, epoch %d\n", t, bep);
#ifndef UNGUARDED
	assert(!AOPEN)       /* (a) */
#endif
}

active proctype world() {
	byte n;
	bool take;
	atomic {
		if
		:: sk = -TOL
		:: sk = 0
		:: sk = TOL
		fi;
		if
		:: bsame = true
		:: bsame = false
		fi;
		rown = 0; rmod = 0; rwall = 0; aconf = 0; akv = 0
	}
end:
	do
	/* time passes; A's own clock closes its fence and counts it lost */
	:: atomic { t < TMAX ->
		t++;
		if
		:: !alost && t - aconf >= L -> asusp = true
		:: else
		fi;
		if
		:: !alost && t - aconf >= LL -> alost = true
		:: else
		fi;
		if
		:: dwcli && t >= dwdl -> dwcli = false;
#ifdef NOCOND
			dwnet = false  /* the assumption: never applied after its cut-off */
#else
			skip
#endif
		:: else
		fi;
		if
		:: hbs != NONE && t >= hbs + RT -> hbs = NONE; hbland = false
		:: else
		fi }
#if SCEN == 0
	:: STEP
#endif
	/* A's heartbeat: sent, lands within RT (conditional on its version),
	 * answered at the landing or never */
	:: atomic { !alost && !arel && hbs == NONE && t >= aconf + H -> hbs = t }
	:: atomic { hbs != NONE && !hbland ->
		if
		:: rex && rown == 0 && !rrel ->
			if
			:: n = 0
			:: n = 1
			fi;
			rchg = true; STAMP(n, hbs); n = 0;
			if
			:: hbland = true     /* answered */
			:: hbs = NONE        /* its answer lost: not confirmed */
			fi
		:: else -> /* 412: another holder, or gone */
			alost = true; hbs = NONE
		fi }
	:: atomic { hbland && !alost ->
		if
		:: asusp || t - aconf >= L ->
			/* a confirm after a suspension checks the markers */
			if
			:: mk > 1 -> alost = true
			:: else -> aconf = hbs; asusp = false
			fi
		:: else -> aconf = hbs
		fi;
		hbs = NONE; hbland = false;
#ifndef UNGUARDED
		assert(!AOPEN || !bopen)   /* (a) at a reopening */
#endif
	   }
#if SCEN == 2
	/* A's fenced data write */
	:: atomic { AOPEN && !dwsent ->
		dwsent = true; dwnet = true; dwcli = true; dwdl = aconf + L;
#ifdef BLIND_DATA
		dwcond = NONE
#else
		dwcond = akv
#endif
	   }
	:: atomic { dwnet ->
		dwnet = false;
		if
#if defined(NOCOND) || defined(BLIND_DATA)
		:: true ->
#else
		:: dver == dwcond ->
#endif
			land_data(1);
			if
			:: dwcli -> akv = dver
			:: else
			fi
		:: else -> skip   /* 412: refused */
		fi;
		dwcli = false }
	:: atomic { dwnet -> dwnet = false }   /* never applied */
	/* B writes the data object on the version it reads */
	:: atomic { bopen && !bwrote -> bwrote = true; land_data(bep) }
#endif
#if SCEN == 2
	/* A releases: the fence closes, the writes in flight drain, then a
	 * released record is written if-version (A's) */
	:: atomic { !alost && !arel -> arel = true }
	:: atomic { arel && !adel && DRAINED ->
		adel = true;
		if
		:: rex && rown == 0 && !rrel -> rrel = true; rchg = true
		:: else
		fi }
#endif
#ifdef OOB
	/* an out-of-band delete of the lock object, whoever holds it */
	:: atomic { !oob && rex -> oob = true; rex = false;
		printf("MSC: t=%d the lock is deleted out of band\n", t) }
#endif
	/* B looks at the record through node n */
	:: atomic { !bopen ->
		if
		:: n = 0
		:: n = 1
		fi;
		if
		:: !rex || rrel -> takeover(n)   /* absent or released: at once */
		:: rex && rown == 0 && !rrel ->
			if
			:: !bseen || rchg -> bseen = true; rchg = false; bseent = t
			:: else
			fi;
			take = TAKE(n);
			if
			:: take ->
#ifndef UNGUARDED
				if
				:: bsame -> assert(!AOPEN)   /* (c) */
				:: else -> assert(AGONE)     /* (c) */
				fi;
#endif
				takeover(n)
			:: else
			fi
		:: else
		fi;
		take = false; n = 0 }
#ifdef BREAK
	/* an operator breaks the lock once, judging it with a fresh look */
	:: atomic { !broke && rex && rown == 0 && !rrel ->
		broke = true;
		if
		:: n = 0
		:: n = 1
		fi;
#if defined(FORCE)
		take = true;
#elif defined(BREAK_WATCHING)
		take = AGE(n) >= W;
#else
		take = AGE(n) >= W && OWNAGE >= W;
#endif
		if
		:: take ->
#ifndef UNGUARDED
			assert(AGONE);   /* (c): a break takes only what a boot takes */
#endif
			/* a released record, if-version (the one judged) */
			rown = 2; rrel = true; rchg = true;
			printf("MSC: t=%d the lock is broken: a released record\n", t)
		:: else
		fi;
		take = false; n = 0 }
#endif
	od
}

#else /* SCEN == 1: two acquirers in claims mode */

/* per acquirer p: phase 0 not started, 1 intent written, 2 listed clear,
 * 3 open, 4 released (its intent and held claim may still be being
 * deleted), 5 gone, 9 gave up */
byte ph[2], t0[2];
bool iex[2], hex[2];
short imod[2], iwall[2];
byte seent[2];
bool iseen[2];

#define WALL(p) ((p) == 1 -> t + sk : t)
#define OTHER(p) (1 - (p))
/* p's judgement of the other's intent, listed through node n */
#define ISAGE(p, n) ((t + off[n]) - imod[OTHER(p)] >= IW)
#ifdef INTENT_STORAGE_AGE
#define IDEAD(p, n) (t - seent[p] >= IW || ISAGE(p, n))
#else
#define IDEAD(p, n) (t - seent[p] >= IW || ISAGE(p, n) && WALL(p) - iwall[OTHER(p)] >= IW)
#endif

inline start(p) {
	atomic { ph[p] == 0 ->
		ph[p] = 1; t0[p] = t; iex[p] = true; iwall[p] = WALL(p);
		if
		:: imod[p] = t + off[0]
		:: imod[p] = t + off[1]
		fi }
}

/* list: the other's held claim refuses; its live intent backs off */
inline look(p, n) {
	atomic { ph[p] == 1 && t - t0[p] < ID ->
		if
		:: n = 0
		:: n = 1
		fi;
		if
		:: hex[OTHER(p)] -> ph[p] = 9
		:: !hex[OTHER(p)] && iex[OTHER(p)] ->
			if
			:: !iseen[p] -> iseen[p] = true; seent[p] = t
			:: else
			fi;
			if
			:: IDEAD(p, n) -> ph[p] = 2   /* judged dead */
			:: else -> skip    /* live: back off, look again */
			fi
		:: else -> ph[p] = 2
		fi;
		n = 0 }
}

/* confirm: the held claim lands; its answer counts before the deadline */
inline confirm(p) {
	atomic { ph[p] == 2 ->
		hex[p] = true;
		if
		:: t - t0[p] < ID ->
			ph[p] = 3;
			printf("MSC: t=%d P%d opens\n", t, p);
			assert(ph[OTHER(p)] != 3)   /* (a) */
		:: else -> ph[p] = 9
		fi }
}

/* release: no look; one multi-object delete of the held claim and the
 * intent (kept until now), their keys deleted in either order */
inline release(p) {
	atomic { ph[p] == 3 -> ph[p] = 4;
		if
		:: hex[p] = false
		:: iex[p] = false
		fi }
}

inline released(p) {
	atomic { ph[p] == 4 -> ph[p] = 5; hex[p] = false; iex[p] = false }
}

active proctype world() {
	byte n;
	atomic { select(sk : -ITOL .. ITOL) }
end:
	do
	:: atomic { t < TMAX -> t++ }
	:: STEP
	:: start(0)
	:: start(1)
	:: look(0, n)
	:: look(1, n)
	:: confirm(0)
	:: confirm(1)
	:: release(0)
	:: release(1)
	:: released(0)
	:: released(1)
	od
}

#endif
