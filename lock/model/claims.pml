/*
 * claims.pml: the claims lock of ADR 0020 (docs/adr/0020-claims-lock-
 * without-compare-and-swap.md), with the release of ADR 0067, checked with
 * spin. doc.go in this directory says how to run it, what it covers and
 * what it does not.
 *
 * Processes P0, P1 (and P2 with -DNPROC=3) each make up to MAXATT
 * acquisition attempts and up to MAXHB heartbeats per hold. Each has an
 * instance id, ID0..ID2: by default P0 and P1 share one (a crash-restart
 * of the same instance on another host, or a duplicate) and P2 has
 * another; -DID1=1 gives P1 another id too. Attempt slot
 * x = attempt * NPROC + process owns the keys claim-<x>-1-intent (I[x])
 * and claim-<x>-2-held (H[x]); slots sort in that order, so a listing
 * reads, for each attempt, its intent slot and then its held slot, and
 * the epoch markers after every claim.
 *
 * The storage has no conditions: PUT and DELETE always apply. A LIST reads
 * the keys one by one, each read a separate atomic step (not a snapshot);
 * a GET of a held claim (in a suspended heartbeat also of an intent) is a
 * step of its own after the listing.
 *
 * Faults, at most MAXFAULT in all: a write's answer is lost and the write
 * lands now, or is kept in its sender's pending slot to land at any later
 * time or never (a timeout); a PUT lands now, answered, and a copy lands
 * again later (an SDK re-send). A lost answer reads as "failed". Pauses
 * are the interleaving; a crash is a process that stops for good (doc.go),
 * its pending writes still landing.
 *
 * TIME IS ABSTRACT (the model's assumption), as in cas.pml. Every held-
 * claim PUT (the sends a lease counts from) takes the next stamp of a
 * global clock gt; E[p] = k says p's leases from its sends stamped <= k
 * have run out; conf[p] is the stamp of p's last confirmed write, and p's
 * fence is open only while conf[p] > E[p]. EL[p] = k says p's long leases
 * (the stale window less its margin, lock.go leaseLong) from its sends
 * stamped <= k have run out too (EL[p] <= E[p]); a process whose long
 * lease from its last confirmed write ran out counts itself lost: it
 * neither heartbeats nor reopens. A held claim records the tag gt when it
 * landed (it landed after every send stamped <= tag). Another process may
 * judge it dead only once its owner's leases up to that tag ran out,
 * letting time pass to get there, counted from no earlier than the
 * landing: a judge with the owner's instance id once the (short) leases
 * ran out (it watched the claim miss a heartbeat, 1.5 H > L = 1.25 H); a
 * judge with another id once the long leases ran out (stale: W > W less
 * its margin). A dead PID is a process that stopped for good, covered by
 * the long leases (it is lost at its next look, as if it had released).
 * Nothing else relates the processes' clocks (in particular the model does
 * not know that W >= 2L).
 * The intent deadline: dl[x] is set once attempt x's deadline (s + I - m_I)
 * has passed. A reader that reads an intent may judge it dead only if dl[x]
 * is set at that read (it may let time pass and set it: an intent whose
 * storage age is I was sent more than I - m_I ago). The owner accepts its
 * held PUT's answer only if dl[x] is not set when the answer arrives (it
 * may set it then: the answer came late).
 *
 * The heartbeat after a suspension (lock.go claimsLost) yields only to
 * what may have judged us dead, i.e. an acquirer with our id: a marker
 * above our epoch or our claim gone (always); a held claim above our
 * epoch; a listed held claim gone at its GET; a held claim of our id not
 * stale (its judge watches nothing, so only the long window); a live
 * intent of our id whose held claim is not listed. The intents' ids are
 * in their content: the heartbeat GETs them after the held claims. Other
 * ids' intents, and their held claims at or below our epoch, are ignored
 * (and the held ones deleted once the fence is open).
 *
 * An acquirer's listing, as lock.go decide: a live intent whose held claim
 * the listing shows too is not a reason to back off; the held claim is
 * judged instead.
 *
 * The release (ADR 0067) does not look: it closes the fence and sends one
 * multi-object delete of its held claim, its intent (kept until then),
 * the dead intents its acquisition listed, and the markers below its
 * epoch. The storage deletes the keys one by one: the held claim and the
 * intent in either order, each possibly late; the rest last. Keeping the
 * intent changes no decision of anyone else's while the held claim is
 * there (a listing reads the intent slot, then the held slot, and judges
 * the held claim): before the held claim lands the intent is an
 * acquisition in progress, as it always was; between the release's two
 * deletes a listing may find the intent alone and back off, as from any
 * acquisition in progress, or, in a suspended heartbeat of the same id,
 * look for it again and find the released attempt's marker (lost, rightly:
 * it held after us). A release that meets a loss it had not seen deletes
 * only its own keys and what was dead or below its epoch: nothing of a
 * successor's, whose marker is above ours.
 *
 * Three rules this model found missing from ADR 0020, modelled as fixed:
 *   1. a held claim that the listing showed and whose GET then answers 404
 *      sends the acquirer back to list again (and ends a suspended
 *      holder's heartbeat as lost): ignoring it loses its epoch, and the
 *      marker of that epoch may have landed after the listing read the
 *      markers;
 *   2. after a suspension, a heartbeat that GETs another held claim with
 *      an epoch above ours is lost, dead or alive: the claim's owner held
 *      the lock meanwhile (its marker may have landed after our listing
 *      read the markers); without this the ADR needs W >= 2L;
 *   3. after a suspension, a live intent that the listing showed and whose
 *      GET then answers 404 is looked for again in a second listing: its
 *      id is unknown, and an acquirer of our id that judged us dead
 *      deletes its intent once its held claim and marker landed, after
 *      our first listing read them. The second listing shows that marker
 *      (and that held claim, judged as above) if there is one; without
 *      either, the intent's attempt backed off (lock.go claimsLost).
 *      -DGONE_INTENT_LOST (the heartbeat ends as lost) and
 *      -DGONE_INTENT_RETRY (not confirmed, the next heartbeat looks
 *      again; lock.go until a standby whose intents came and went at
 *      every read ended a holder on a paused Garage node) are as safe.
 *
 * Properties, checked where a fence opens:
 *   (a) mutual exclusion: at most one fence open (assert nopen <= 1);
 *   (b) epochs grow: an attempt whose fence opens when another attempt was
 *       the last to open has an epoch above every epoch that ever opened
 *       (assert lastopen == a + 1 || myep > maxopened).
 *
 * Known-bad variants (each must fail):
 *   -DREAD_THEN_WRITE   list first, then write (no claim of one's own
 *                       before the listing). Violates (a).
 *   -DEARLY_INTENT_DELETE  the intent is deleted before the held claim is
 *                       written. Violates (a).
 *   -DLATE_CONFIRM      the held PUT's answer is accepted after the
 *                       deadline. Violates (a).
 *   -DHELD_FIRST        the listing reads an attempt's held slot before its
 *                       intent slot. Violates (a).
 *   -DJUDGE_LATE        an intent's age is taken after the listing (e.g.
 *                       from the LIST response's Date when the listing took
 *                       longer than m_I), not at the read. Violates (a).
 *   -DHB_UNCONFIRMED    a heartbeat whose PUT got no answer is confirmed by
 *                       its listing alone. Violates (a).
 *   -DGET_404_IGNORED   without rule 1. Violates (b).
 *   -DHB_NO_EPOCH_CHECK without rule 2. Violates (b); checked with
 *                       -DSAMECONFIG (one lease for every instance: all
 *                       leases run out in send order), whose counterexample
 *                       is real when W < 2L.
 *   -DGONE_INTENT_SKIPPED  without rule 3: the vanished intent is skipped
 *                       (lock.go as this model was written). Violated (a)
 *                       while the intent was deleted once the marker
 *                       landed; with it kept until the release, (b).
 *   -DRELIST_NO_MARKERS rule 3's second listing without its markers (the
 *                       held claim alone). Violates (b). (Its markers
 *                       alone, -DRELIST_NO_HELD, verify at claimsBad's
 *                       bounds: lock.go judges both.)
 *   -DRELEASE_OWN_MARKER the release deletes the markers up to its own
 *                       epoch, its own included: the release cannot know
 *                       whether a later holder's marker is there, and the
 *                       next acquirer repeats its epoch. Violates (b).
 *   -DSUSPEND_AT_SEND   the heartbeat decides "suspended" before its PUT
 *                       (ADR 0027's finding 6, cas.pml's until ADR 0066):
 *                       a lease that runs out while the heartbeat is under
 *                       way is confirmed without the suspended look.
 *                       Violates (a) at the faults' bounds.
 *   -DREOPEN_IGNORES_SAME_ID  the suspended heartbeat ignores live claims
 *                       of its own id (treats them as another id's).
 *                       Violates (a) with a shared id; passes with -DID1=1.
 *   -DOTHER_ID_SHORT    a judge of another id judges after the short lease
 *                       (as one of our id). Violates (a) with -DID1=1.
 * -DCANARY is not a variant: it asserts that no second attempt's fence ever
 * opens, so that its failure shows the good model is not vacuous.
 * -DDELETE_INTENT_AT_ONCE is ADR 0020's protocol (the intent deleted once
 * the marker landed); it verifies too. -DRELEASE_KEEPS_DEAD leaves the
 * dead intents the acquisition listed behind at the release (as one that
 * did not get to delete them), and -DRELEASE_ATOMIC deletes the held claim
 * and the intent in one step: the three-process run uses both to fit.
 */

#ifndef NPROC
#define NPROC 2       /* processes run: P0, P1, P2 */
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
/* instance ids: P0 and P1 share one by default, P2 has another */
#ifndef ID0
#define ID0 0
#endif
#ifndef ID1
#define ID1 0
#endif
#ifndef ID2
#define ID2 1
#endif
#define ID(p) ((p) == 0 -> ID0 : ((p) == 1 -> ID1 : ID2))

#define NP 3
#define NA (NPROC * MAXATT)          /* attempt slots, in key order */
#define SLOT(p, a) ((a) * NPROC + (p))
#define OWNER(x) ((x) % NPROC)
#define BIT(x) (1 << (x))

/* request kinds */
#define R_NONE 0
#define R_PUTI 1     /* PUT claim-<x>-1-intent */
#define R_PUTH 2     /* PUT claim-<x>-2-held   */
#define R_DELI 3     /* DELETE the intent      */
#define R_DELH 4     /* DELETE the held claim  */
#define R_MARK 5     /* PUT epoch-<e>          */

#define A_OK   0
#define A_LOST 2

/* the claims */
bool I[NA];          /* claim-<x>-1-intent exists */
bool H[NA];          /* claim-<x>-2-held exists */
byte ep[NA];         /* the epoch in attempt x's held claim */
byte htag[NA];       /* H[x]'s tag: sent[owner] when it landed */
bool dl[NA];         /* attempt x's intent deadline has passed */
bool cur[NA];        /* attempt x is its owner's current attempt */

/* epoch markers: bit e set = marker e exists; mkmax = the highest */
int mk;
byte mkmax;

byte nfault;

/* abstract time and fences */
byte gt;             /* lease-relevant sends so far, by anyone: a global clock */
byte E[NP];          /* p's leases from its sends stamped <= E[p] ran out */
byte EL[NP];         /* p's long leases from its sends stamped <= EL[p] ran
                      * out (EL[p] <= E[p]): p counts itself lost */
byte sent[NP];       /* the stamp of p's latest send */
byte conf[NP];       /* the stamp of p's last confirmed write */
bool open[NP];
byte nopen;
byte maxopened;      /* the highest epoch whose fence ever opened */
byte lastopen;       /* the attempt (slot + 1) that opened last */

/* one pending (late) request per process: kind, key (slot or epoch) */
byte pk[NP], px[NP];

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

/* Time passes until p's long leases (the stale window less its margin)
 * from its sends stamped <= k have run out: the short ones too. */
#define EXPIREL1(q, k) \
	if \
	:: EL[q] < k -> \
		EL[q] = k; \
		printf("MSC: time passes: P%d's long leases from its sends up to %d run out\n", q, k); \
		EXPIRE1(q, k) \
	:: else \
	fi

inline expire_long(p, k) {
#ifdef SAMECONFIG
	EXPIREL1(0, k); EXPIREL1(1, k); EXPIREL1(2, k)
#else
	EXPIREL1(p, k)
#endif
}

/*
 * me judges p's held claim with tag k dead: a judge with p's instance id
 * once p's leases up to k ran out (it watched the claim miss a heartbeat,
 * 1.5 H > L); a judge with another id only once p's long leases ran out
 * (the stale window W > W - margin). A same-id judge may also find the
 * claim stale; that only makes p lose sooner, as a release would.
 */
inline judge_dead(p, k) {
	if
#ifdef OTHER_ID_SHORT
	:: true -> expire(p, k)
#else
	:: ID(p) == ID(me) -> expire(p, k)
	:: else -> expire_long(p, k)
#endif
	fi
}

inline land(k, x) {
	if
	:: k == R_PUTI -> I[x] = true; printf("MSC: intent %d lands\n", x)
	:: k == R_PUTH -> H[x] = true; htag[x] = gt;
		printf("MSC: held %d lands (epoch %d, tag %d)\n", x, ep[x], htag[x])
	:: k == R_DELI -> I[x] = false; printf("MSC: intent %d deleted\n", x)
	:: k == R_DELH -> H[x] = false; htag[x] = 0; printf("MSC: held %d deleted\n", x)
	:: k == R_MARK ->
		mk = mk | BIT(x);
		if
		:: x > mkmax -> mkmax = x
		:: else
		fi;
		printf("MSC: marker %d lands\n", x)
	fi
}

/*
 * A pending request that can no longer change anything is dropped (no
 * observable difference, a smaller state space): a marker that exists; a
 * delete of a key that is absent and that nobody can write again.
 */
#define DEAD(i) ((pk[i] == R_MARK && (mk & BIT(px[i]))) || \
	(pk[i] == R_DELI && !I[px[i]] && \
		!(pk[OWNER(px[i])] == R_PUTI && px[OWNER(px[i])] == px[i])) || \
	(pk[i] == R_DELH && !H[px[i]] && !cur[px[i]] && \
		!(pk[OWNER(px[i])] == R_PUTH && px[OWNER(px[i])] == px[i])))
#define DROP(i) \
	if \
	:: DEAD(i) -> pk[i] = R_NONE; px[i] = 0 \
	:: else \
	fi

inline gc() {
	DROP(0); DROP(1); DROP(2)
}

/* the process sends a request; ans is the answer it gets */
inline send(k, x) {
	if
	:: land(k, x); ans = A_OK
	:: nfault < MAXFAULT && (k == R_PUTI || k == R_PUTH || k == R_MARK) ->
		nfault++; land(k, x); ans = A_LOST   /* a delete's answer is not read */
	:: nfault < MAXFAULT && pk[me] == R_NONE ->
		nfault++; pk[me] = k; px[me] = x; ans = A_LOST
	:: nfault < MAXFAULT && pk[me] == R_NONE && (k == R_PUTI || k == R_PUTH) ->
		nfault++; land(k, x); pk[me] = k; px[me] = x; ans = A_OK
	fi;
	gc();
	printf("MSC: P%d sends %d (1 put intent, 2 put held, 3 del intent, 4 del held, 5 marker) %d: answer %d (0 ok, 2 lost), pending %d\n",
		me, k, x, ans, pk[me])
}

inline open_fence() {
	open[me] = true;
	nopen++;
	printf("MSC: P%d attempt %d epoch %d: fence OPENS (lease from send %d; expired up to %d)\n",
		me, a, myep, conf[me], E[me]);
	assert(nopen <= 1);
	assert(lastopen == a + 1 || myep > maxopened);
#ifdef CANARY
	/* not a property: shows that a second attempt's fence opens at all */
	assert(lastopen == 0 || lastopen == a + 1);
#endif
	lastopen = a + 1;
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

/* read attempt x's intent slot during a listing: absent, dead (into
 * dead), or live (livei) */
inline read_intent() {
	if
	:: !I[x]
	:: I[x] && dl[x] -> dead = dead | BIT(x)
	:: I[x] && !dl[x] -> dl[x] = true; dead = dead | BIT(x)  /* time passed */
	:: I[x] && !dl[x] -> livei = true
	fi
}

inline read_held() {
	if
	:: H[x] -> seen = seen | BIT(x)
	:: else
	fi
}

/* x: to the next slot the listing reads (other processes' attempts, and
 * in a heartbeat our own held slot) */
inline next_listed() {
	do
	:: x < NA && OWNER(x) == me && !(inhb && x == a) -> x++
	:: else -> break
	od
}

/* x: to the next held claim seen */
inline next_seen() {
	do
	:: x < NA && !(seen & BIT(x)) -> x++
	:: else -> break
	od
}

/* x: to the lowest bit of m */
inline lowest(m) {
	x = 0;
	do
	:: !(m & BIT(x)) -> x++
	:: else -> break
	od
}

/* mkmax again, after markers were deleted: the highest left */
inline relistmax() {
	mkmax = 0; x = 0;
	do
	:: x < 31 -> if :: mk & BIT(x) -> mkmax = x :: else fi; x++
	:: else -> break
	od;
	x = 0
}

proctype P(byte me) {
	byte a, att, x, e, hb, ans, myep;
	byte seen;          /* held claims seen by the listing */
	byte dead;          /* intents judged dead by the listing */
	byte rdead;         /* those of the acquisition's listing: deleted at
	                     * the release (lock.go cleanupList) */
	byte livem;         /* live intents of our id a suspended heartbeat GETs */
	byte gonem;         /* those whose GET answered 404: listed again */
	bool own, livei, inhb, relisted;
#ifdef SUSPEND_AT_SEND
	bool wassusp;
#endif
#ifdef JUDGE_LATE
	byte seeni;         /* intents seen, judged after the listing */
#endif

attempt:
	atomic {
		x = 0; e = 0; hb = 0; ans = 0; myep = 0; seen = 0; dead = 0; rdead = 0; livem = 0;
		gonem = 0; own = false; livei = false; inhb = false; relisted = false;
#ifdef JUDGE_LATE
		seeni = 0;
#endif
		if
		:: att > 0 -> cur[a] = false
		:: else
		fi;
		if
		:: att >= MAXATT -> a = 0; goto done
		:: else
		fi;
		a = SLOT(me, att);
		att++;
		cur[a] = true;
		next_listed();
#ifndef READ_THEN_WRITE
		/* 1. PUT the intent; the deadline counts from here */
		send(R_PUTI, a);
		if
		:: ans != A_OK -> ans = 0; goto backoff
		:: else -> ans = 0
		fi
#endif
	}
	/* 2. LIST, key by key: each attempt's intent, then its held claim;
	 * the markers last */
	do
	:: atomic {
			x < NA ->
#ifdef HELD_FIRST
			read_held()
#else
#ifdef JUDGE_LATE
			if
			:: I[x] -> seeni = seeni | BIT(x)
			:: else
			fi
#else
			read_intent()
#endif
#endif
		}
		atomic {
#ifdef HELD_FIRST
			read_intent();
			if
			:: livei -> goto backoff
			:: else
			fi;
#else
			read_held();
			/* a live intent backs us off, unless its held claim is listed
			 * too: that is judged instead (decide's "confirmed") */
			if
			:: livei && !H[x] -> goto backoff
			:: else -> livei = false
			fi;
#endif
			x++;
			next_listed()
		}
	:: atomic { x >= NA -> e = mkmax; x = 0; next_seen() }; break
	od;
#ifdef JUDGE_LATE
	/* the intents' ages, taken now */
	atomic {
		do
		:: x < NA && (seeni & BIT(x)) ->
			if
			:: dl[x]
			:: !dl[x] -> dl[x] = true
			:: !dl[x] -> goto backoff
			fi;
			dead = dead | BIT(x);
			x++
		:: x < NA && !(seeni & BIT(x)) -> x++
		:: x >= NA -> break
		od;
		seeni = 0; x = 0; next_seen()
	}
#endif
	/* 3. GET and judge each other held claim */
	do
	:: atomic {
			x < NA ->
			if
#ifdef GET_404_IGNORED
			:: !H[x]     /* gone: ignored */
#else
			:: !H[x] -> goto backoff   /* gone since the listing: list again */
#endif
			:: H[x] ->
				if
				:: ep[x] > e -> e = ep[x]
				:: else
				fi;
				if
				:: judge_dead(OWNER(x), htag[x])   /* judged dead */
				:: goto backoff      /* live: refuse */
				fi
			fi;
			x++;
			next_seen()
		}
	:: atomic { x >= NA -> x = 0; seen = 0 }; break
	od;
	/* dead intents are deleted at the release, if this attempt holds
	 * (-DRELEASE_KEEPS_DEAD: left behind, as by a release that did not
	 * get to delete them, for the three-process run to fit) */
	atomic {
#if !defined(NOCLEANUP) && !defined(RELEASE_KEEPS_DEAD)
		rdead = dead;
#endif
		dead = 0; x = 0
	}
#ifdef READ_THEN_WRITE
	atomic {
		send(R_PUTI, a);
		if
		:: ans != A_OK -> ans = 0; goto backoff
		:: else -> ans = 0
		fi
	}
#endif
#ifdef EARLY_INTENT_DELETE
	atomic { send(R_DELI, a); ans = 0 }
#endif
	/* 5. PUT the held claim, under the deadline */
	atomic {
		e++; ep[a] = e; myep = e; e = 0;
		gt++; sent[me] = gt;
		send(R_PUTH, a);
#ifndef LATE_CONFIRM
		if
		:: ans == A_OK && !dl[a] -> skip
		:: ans == A_OK && !dl[a] -> dl[a] = true   /* the answer came late */
		:: else
		fi;
		if
		:: ans == A_OK && !dl[a] -> conf[me] = sent[me]
		:: else -> ans = 0; goto abort
		fi;
#else
		if
		:: ans == A_OK -> conf[me] = sent[me]
		:: else -> ans = 0; goto abort
		fi;
#endif
		ans = 0
	}
	/* 6. PUT the marker */
	atomic {
		send(R_MARK, myep);
		if
		:: ans != A_OK -> ans = 0; goto abort
		:: else -> ans = 0
		fi
	}
	/* the fence opens, unless the lease ran out; the intent stays until
	 * the release (it sorts before our held claim, which a listing then
	 * shows too: judged by the held claim, it changes nobody's decision) */
	atomic {
#ifdef DELETE_INTENT_AT_ONCE
		send(R_DELI, a);
		ans = 0;
#endif
		inhb = true;
		if
		:: conf[me] > E[me] -> open_fence()
		:: else
		fi
	}
hold:
	do
	:: atomic {
			/* heartbeat: PUT our held claim, then LIST */
			hb < MAXHB && EL[me] < conf[me] ->
			hb++;
#ifdef SUSPEND_AT_SEND
			/* decided before the PUT: the lease may run out while the
			 * heartbeat is under way */
			wassusp = E[me] >= conf[me];
#endif
			gt++; sent[me] = gt;
			send(R_PUTH, a);
#ifndef HB_UNCONFIRMED
			if
			:: ans != A_OK -> ans = 0; goto hold   /* not confirmed */
			:: else
			fi;
#endif
			ans = 0; own = false; livei = false; livem = 0; seen = 0; dead = 0;
			x = 0; next_listed()
		}
		do
		:: atomic {
				x < NA && x == a -> own = H[a]; x++; next_listed()
			}
		:: atomic { x < NA && x != a -> read_intent() }
			atomic {
				read_held();
				/* a live intent whose held claim is not listed: GET it
				 * later if suspended, to read its instance id (another
				 * id's is ignored) */
#ifndef REOPEN_IGNORES_SAME_ID
				if
				:: livei && !H[x] && ID(OWNER(x)) == ID(me) -> livem = livem | BIT(x)
				:: else
				fi;
#endif
				livei = false;
				x++; next_listed()
			}
		:: atomic {
				x >= NA -> x = 0;
				printf("MSC: P%d's heartbeat listing: markers up to %d, own claim %d, held claims (bits) %d, live intents of our id (bits) %d\n",
					me, mkmax, own, seen, livem);
				if
				:: mkmax > myep || !own -> goto lost
				:: else
				fi;
				if
				:: EL[me] >= conf[me] -> goto lost   /* the long lease ran out */
				:: else
				fi;
				if
#ifdef SUSPEND_AT_SEND
				:: wassusp ->
#else
				:: E[me] >= conf[me] ->
#endif
					/* suspended since the last confirmed heartbeat: an
					 * acquirer with our id may have judged us dead */
					next_seen(); goto hbsusp
				:: else
				fi;
				/* confirmed, the fence stays open: clean up */
				livem = 0;
				conf[me] = sent[me];
#ifdef SUSPEND_AT_SEND
				/* a fence that closed since the send reopens unchecked */
				if
				:: !open[me] && conf[me] > E[me] -> open_fence()
				:: else
				fi;
#endif
				goto cleanup
			}
		od;
hbsusp:
		/* GET and judge the other held claims, then the live intents of
		 * our instance id (claimsLost) */
		do
		:: atomic {
				x < NA ->
				if
#ifdef GET_404_IGNORED
				:: !H[x]
#else
				:: !H[x] -> goto lost   /* gone since the listing */
#endif
				:: H[x] ->
#ifndef HB_NO_EPOCH_CHECK
					if
					:: ep[x] > myep -> goto lost   /* a higher epoch held it */
					:: else
					fi;
#endif
#ifndef REOPEN_IGNORES_SAME_ID
					if
					:: ID(OWNER(x)) == ID(me) ->
						/* our id: a threat unless stale or its PID dead (the
						 * heartbeat's judge watches nothing: no missed-
						 * heartbeat judgement) */
						if
						:: expire_long(OWNER(x), htag[x])
						:: goto lost
						fi
					:: else   /* another id's, at or below our epoch: ignored */
					fi
#else
					skip      /* every id's ignored */
#endif
				fi;
				x++;
				next_seen()
			}
		:: atomic { x >= NA -> x = 0 }; break
		od;
		do
		:: atomic {
				livem != 0 ->
				lowest(livem);
				livem = livem & ~BIT(x);
				printf("MSC: P%d's heartbeat GETs intent %d: %d (1 there, 0 gone)\n", me, x, I[x]);
				if
				:: I[x] -> goto lost     /* a live intent of our id */
#ifdef GONE_INTENT_SKIPPED
				:: !I[x]                 /* gone since the listing: ignored */
#elif defined(GONE_INTENT_LOST)
				:: !I[x] -> goto lost    /* gone since the listing: whose? */
#elif defined(GONE_INTENT_RETRY)
				:: !I[x] ->              /* not confirmed: heartbeat again */
					x = 0; seen = 0; dead = 0; livem = 0; goto hold
#else
				:: !I[x] -> gonem = gonem | BIT(x)   /* listed again below */
#endif
				fi;
				x = 0
			}
		:: atomic {
				/* rule 3: the listing again, for a vanished intent's
				 * attempt: its held claim, if any, is judged as above
				 * (its epoch, its id's liveness) */
				livem == 0 && gonem != 0 ->
				lowest(gonem);
				gonem = gonem & ~BIT(x);
				relisted = true;
				printf("MSC: P%d's heartbeat lists again for intent %d: held claim %d\n", me, x, H[x]);
				if
#ifndef RELIST_NO_HELD
				:: H[x] ->
					if
					:: ep[x] > myep -> goto lost
					:: else
					fi;
					if
					:: expire_long(OWNER(x), htag[x])
					:: goto lost
					fi
#endif
				:: else
				fi;
				x = 0
			}
		:: atomic {
				livem == 0 && gonem == 0 ->
				x = 0;
				/* the markers of the second listing */
				if
#ifndef RELIST_NO_MARKERS
				:: relisted && mkmax > myep -> relisted = false; goto lost
#endif
				:: else -> relisted = false
				fi;
				conf[me] = sent[me];
				if
				:: conf[me] > E[me] -> open_fence()
				:: else -> seen = 0; dead = 0   /* not open: no cleanup */
				fi
			};
			break
		od;
cleanup:
		/* other held claims and dead intents are deleted while we hold */
#ifdef NOCLEANUP
		seen = 0; dead = 0;
#endif
		do
		:: atomic { seen == 0 && dead == 0 -> x = 0 }; break
		:: atomic {
				seen != 0 ->
				lowest(seen);
				seen = seen & ~BIT(x);
				send(R_DELH, x);
				ans = 0; x = 0
			}
		:: atomic {
				seen == 0 && dead != 0 ->
				lowest(dead);
				dead = dead & ~BIT(x);
				send(R_DELI, x);
				ans = 0; x = 0
			}
		od
	:: atomic {
			/* release: no look; one multi-object delete of our held claim,
			 * our intent, the dead intents our acquisition listed and the
			 * markers below our epoch. The storage deletes its keys one by
			 * one: the held claim and the intent in either order, each
			 * possibly late; the dead intents and lower markers last (what
			 * no one counts on) */
			close_fence();
			if
			:: send(R_DELH, a); ans = 0; x = 1
#ifndef RELEASE_ATOMIC
			:: send(R_DELI, a); ans = 0; x = 2
			fi
		}
		atomic {
#else
			fi;
#endif
			if
			:: x == 1 -> send(R_DELI, a)
			:: else -> send(R_DELH, a)
			fi;
			ans = 0; x = 0;
			do
			:: rdead == 0 -> break
			:: rdead != 0 ->
				lowest(rdead);
				rdead = rdead & ~BIT(x);
				I[x] = false;
				printf("MSC: intent %d deleted\n", x)
			od;
			/* the markers below our epoch (ours and any above stay) */
#ifdef RELEASE_OWN_MARKER
			mk = mk & ~(BIT(myep + 1) - 1);
			relistmax();
#else
			mk = mk & ~(BIT(myep) - 1);
#endif
			x = 0;
			gc();
			goto attempt
		}
	od;
lost:
	atomic {
		x = 0; seen = 0; dead = 0; own = false; livei = false; livem = 0;
		gonem = 0; relisted = false;
		close_fence();
		printf("MSC: P%d lost the lock\n", me);
		send(R_DELH, a);
		ans = 0;
		send(R_DELI, a);
		ans = 0; rdead = 0;
		goto attempt
	}
abort:
	atomic { send(R_DELH, a); ans = 0 }
backoff:
	atomic {
		x = 0; seen = 0; dead = 0; rdead = 0; e = 0; livei = false;
#ifdef JUDGE_LATE
		seeni = 0;
#endif
		send(R_DELI, a);
		ans = 0;
		goto attempt
	}
done:
	skip
}

#define DELIVER(i) \
	atomic { pk[i] != R_NONE -> \
		land(pk[i], px[i]); pk[i] = R_NONE; px[i] = 0; gc() }

/* the network: late writes */
active proctype net() {
end:
	do
	:: DELIVER(0)
	:: DELIVER(1)
	:: DELIVER(2)
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
