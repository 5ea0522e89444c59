/* SPDX-License-Identifier: MIT */
/*
 * watch.c — the watch lists: a hash table of keys split into shards with
 * a lock each, every key's list of watch entries (the callers' struct
 * tw_watch), and what walks them: try_complete_else_watch (check, watch,
 * check again under the op's lock), check_and_complete (the list pinned
 * under the shard lock, then walked without it, each op tried as the walk
 * passes it) and its form for several keys (their lists walked side by
 * side), cancel_for_key, and the one walker over every list that purge,
 * shutdown and destroy share. A shard lock is never held while user code
 * runs, and an op's lock is taken before a shard lock, never after. A
 * list is pinned by the key checks in progress on it (core.h, Pins): no
 * entry leaves a pinned list, the last check out unlinks the completed
 * ones, and a pinned list is never freed.
 */
#include "core.h"

pg_hot_inline struct tw_watchers *find(struct pshard *sh, uint64_t h,
				       const void *key, size_t len)
{
	/* The spare first: its fields are on the lock's line. */
	if (sh->spare.hash == h && sh->spare.len == len &&
	    key_equal(sh->spare.key, key, len))
		return &sh->spare;
	for (struct tw_watchers *ws = *slot_for(sh, h); ws; ws = ws->next)
		if (ws->hash == h && ws->len == len && key_equal(ws->key, key, len))
			return ws;
	return NULL;
}

static void grow(struct pshard *sh)
{
	size_t n = sh->nbuckets * 2;
	struct tw_watchers **table = calloc(n, sizeof(*table));

	if (!table)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < sh->nbuckets; i++) {
		while (sh->table[i]) {
			struct tw_watchers *ws = sh->table[i];

			sh->table[i] = ws->next;
			ws->next = table[bucket_index(ws->hash, n)];
			table[bucket_index(ws->hash, n)] = ws;
		}
	}
	free(sh->table);
	sh->table = table;
	sh->nbuckets = n;
}

static struct tw_watchers *find_or_add(struct pshard *sh, uint64_t h,
				       const void *key, size_t len)
{
	struct tw_watchers *ws = find(sh, h, key, len), **slot;

	if (ws)
		return ws;
	/* The test point fails the spare too: the tests of a list that
	 * cannot be had need no shard already holding a key. */
	if (TW_TEST_FAIL("watchers.alloc", key))
		return NULL;
	if (!sh->spare.len && len <= SPARE_KEY_MAX) {
		ws = &sh->spare;
		ws->key = sh->spare_key;
	} else {
		ws = malloc(sizeof(*ws) + len);
		if (!ws)
			return NULL;
		ws->key = (unsigned char *)(ws + 1);
	}
	ws->hash = h;
	ws->len = (uint16_t)len;
	atomic_init(&ws->walkers, 0);
	list_init(&ws->entries);
	memcpy(ws->key, key, len);
	if (sh->nkeys >= sh->nbuckets)
		grow(sh);
	slot = slot_for(sh, h);
	ws->next = *slot;
	*slot = ws;
	sh->nkeys++;
	return ws;
}

/* ---- pins (core.h) ---- */

/* Under the shard lock. Acquire: a check that let go of its pin without
 * the lock did so after its last touch of an op, and whoever finds the
 * list unpinned may unlink an entry and drop the op's last reference. */
static bool pinned(struct tw_watchers *ws)
{
	return (atomic_load_explicit(&ws->walkers, memory_order_acquire) &
		~PIN_DIRTY) != 0;
}

/* Under the shard lock. An atomic add, not a plain one: a check lets go
 * of its pin without the lock. */
static void pin(struct tw_watchers *ws)
{
	atomic_fetch_add_explicit(&ws->walkers, 1, memory_order_relaxed);
}

/* Under the shard lock, on a list this thread pins: in the pins' word,
 * which a check lets go of without the lock. */
static void mark_dirty(struct tw_watchers *ws)
{
	atomic_fetch_or_explicit(&ws->walkers, PIN_DIRTY, memory_order_relaxed);
}

/* Under the shard lock: the list marked for the last one out if a check
 * pins it, in one swap of the pins' word -- a look at the count and then
 * a mark could mark a list whose last check left in between, without the
 * lock, and the mark would wait for no one. False: nothing pins it, and
 * nothing can while the lock is held (acquire, as pinned()). */
static bool mark_if_pinned(struct tw_watchers *ws)
{
	unsigned pins = atomic_load_explicit(&ws->walkers, memory_order_acquire);

	while (pins & ~PIN_DIRTY)
		if (atomic_compare_exchange_weak_explicit(
			    &ws->walkers, &pins, pins | PIN_DIRTY,
			    memory_order_acquire, memory_order_acquire))
			return true;
	return false;
}

/* Free the list once nothing is in it and nothing pins it. */
static void remove_if_empty(struct pshard *sh, struct tw_watchers *ws)
{
	struct tw_watchers **pp = slot_for(sh, ws->hash);

	if (!list_empty(&ws->entries) || pinned(ws))
		return;
	while (*pp != ws)
		pp = &(*pp)->next;
	*pp = ws->next;
	sh->nkeys--;
	if (ws == &sh->spare)
		ws->len = 0; /* free for the shard's next key */
	else
		free(ws);
}

/* Validate a key and find its shard; NULL if the key is not acceptable. */
static struct pshard *locate(struct tw_purgatory *p, const void *key, size_t len,
			     uint64_t *h)
{
	if (!p || !key || len == 0 || len > TW_KEY_MAX)
		return NULL;
	*h = hash_key(key, len);
	return shard_for(p, *h);
}

/* A key call's refusal (locate() found no shard): TW_EINVAL, and in the
 * debug build which argument it was. */
static int64_t refuse_key_call(const char *call, const struct tw_purgatory *p,
			       const void *key, size_t len)
{
	(void)call;
	(void)p;
	(void)key;
	(void)len;
	return TW_EINVAL_BECAUSE(call, "%s",
				 !p     ? "the purgatory is NULL"
				 : !key ? "the key is NULL"
				 : !len ? "the key is empty (len 0)"
					: "the key is longer than TW_KEY_MAX");
}

/* Under the shard lock; the entry's reference is dropped later, from the
 * chain (claimed: the caller claimed its op and took a second one). */
static void unlink_entry(struct pshard *sh, struct tw_watch *w,
			 struct entry_chain *puts, bool claimed)
{
	list_unlink(&w->link); /* leaves link.next NULL: in no list */
	OP_SUB(w->op->linked, 1);
	count_watched(sh, -1);
	chain_push(puts, w, claimed);
}

/* Unlink the completed entries of one list; a pinned list is marked
 * instead, for the last check out. */
static void drop_completed(struct pshard *sh, struct tw_watchers *ws,
			   struct entry_chain *puts)
{
	struct tw_link *l = ws->entries.next;

	if (mark_if_pinned(ws))
		return;
	if (atomic_load_explicit(&ws->walkers, memory_order_relaxed) & PIN_DIRTY)
		atomic_fetch_and_explicit(&ws->walkers, ~PIN_DIRTY,
					  memory_order_relaxed);
	while (l != &ws->entries) {
		struct tw_watch *w = tw_container_of(l, struct tw_watch, link);

		l = l->next;
		if (OP_LOAD(w->op->completed))
			unlink_entry(sh, w, puts, false);
	}
}

/* Let go of a pin under the shard lock (acquire: the other pins' last
 * touches of their ops come before what the last one out unlinks): the
 * last one out drops the completed entries and frees the list if that
 * empties it. */
static void unpin_locked(struct pshard *sh, struct tw_watchers *ws,
			 struct entry_chain *puts)
{
	if ((atomic_fetch_sub_explicit(&ws->walkers, 1, memory_order_acq_rel) &
	     ~PIN_DIRTY) != 1)
		return;
	drop_completed(sh, ws, puts);
	remove_if_empty(sh, ws);
}

/* ---- calls in progress ---- */

_Thread_local unsigned tw__pg_tls_stripe TW_PG_TLS;
_Thread_local unsigned tw__pg_tls_calling TW_PG_TLS;
_Thread_local unsigned tw__pg_tls_pins TW_PG_TLS;
atomic_uint tw__pg_stripes_handed;

/* A call's way in: NULL once shutdown began. seq_cst on both sides (the
 * count here, closing there) so that shutdown sees the count or this call
 * sees closing. */
static struct entry_stripe *enter(struct tw_purgatory *p)
{
	struct entry_stripe *st = my_stripe(p);

	atomic_fetch_add(&st->active, 1);
	if (atomic_load(&p->closing)) {
		atomic_fetch_sub(&st->active, 1);
		return NULL;
	}
	calling_begin(); /* up to the call's last put: its on_release too */
	return st;
}

static void leave(struct entry_stripe *st)
{
	atomic_fetch_sub_explicit(&st->active, 1, memory_order_release);
}

/* leave(), for a call that ends with no put to make. */
static void leave_call(struct entry_stripe *st)
{
	leave(st);
	calling_end();
}

/* Watch op on one key, under the op's lock. */
static int watch(struct tw_purgatory *p, struct tw_delayed_op *op,
		 const void *key, size_t len, struct tw_watch *w)
{
	uint64_t h = hash_key(key, len);
	struct pshard *sh = shard_for(p, h);
	struct tw_watchers *ws;

	pshard_lock(sh);
	ws = find_or_add(sh, h, key, len);
	if (!ws) {
		pshard_unlock(sh);
		return TW_ENOMEM;
	}
	w->op = op;
	list_append(&ws->entries, &w->link); /* its reference and count: the
						caller's, taken for every key */
	count_watched(sh, 1);
	pshard_unlock(sh);
	return TW_OK;
}

/* Take back an entry of a watch that failed half-way, if it is still in
 * its key's list: the op is not completed by this call, but another thread
 * may have forced it, and a key check since then may have unlinked the
 * entry already. An entry does not say which list it is in (8 bytes per
 * entry saved); its key does, and this is the rare path. */
static void unwatch(struct tw_purgatory *p, struct tw_watch *w,
		    const void *key, size_t len)
{
	uint64_t h = hash_key(key, len);
	struct pshard *sh = shard_for(p, h);
	struct entry_chain puts;

	chain_init(&puts);
	pshard_lock(sh);
	if (w->link.next) {
		struct tw_watchers *ws = find(sh, h, key, len);

		if (!mark_if_pinned(ws)) { /* else for the last one out */
			unlink_entry(sh, w, &puts, false);
			remove_if_empty(sh, ws);
		}
	}
	pshard_unlock(sh);
	chain_put_all(&puts);
}

/* The call's arguments, before anything changes: TW_EINVAL (saying which)
 * or TW_OK. */
static int check_watch_args(const struct tw_purgatory *p,
			    const struct tw_delayed_op *op,
			    const void *const *keys, const size_t *lens,
			    size_t nkeys, const struct tw_watch *watches)
{
	if (!p || !op || !keys || !lens || !watches || nkeys == 0)
		return TW_EINVAL_BECAUSE("tw_purgatory_try_complete_else_watch",
					 "%s", nkeys == 0 ? "no keys (nkeys 0)"
					 : "a NULL purgatory, op, keys, lens or "
					   "watches");
	if (nkeys > TW_WATCH_KEYS_MAX)
		return TW_EINVAL_BECAUSE("tw_purgatory_try_complete_else_watch",
					 "%zu keys, more than TW_WATCH_KEYS_MAX "
					 "(65536)", nkeys);
	for (size_t i = 0; i < nkeys; i++)
		if (!keys[i] || lens[i] == 0 || lens[i] > TW_KEY_MAX)
			return TW_EINVAL_BECAUSE("tw_purgatory_try_complete_else_watch",
						 "key %zu is %s", i,
						 !keys[i] ? "NULL"
						 : lens[i] == 0 ? "empty"
						 : "longer than TW_KEY_MAX (4096)");
	return TW_OK;
}

/*
 * Kafka's safeTryCompleteOrElse: check, watch, check again, all under the
 * op's lock. A key check that ran between the first check and the watch
 * saw no entry of this op: the second check sees the condition it was
 * checking for. *done: the op's condition held at either check.
 *
 * A watch that fails (no memory) claims the op, as a cancel does, before
 * it lets go of the op's lock, takes back the entries made before it, and
 * returns its code: from TW_ENOMEM on nothing completes the op. A key
 * check may still have it ahead in its walk (the op was briefly on the
 * list the check pinned), and the check's try would otherwise complete
 * it after the call returned, on_complete after TW_ENOMEM. The claim
 * loses only to a completion from outside the op's lock (a
 * force_complete, a cancel of a key it was on): the op completed, as if
 * watched and completed since, and the call returns TW_OK (0 to its
 * caller). The call does not wait for the
 * other holders to let go (purgatory.h, TW_ENOMEM): one may be running
 * user code that waits for a lock its caller holds.
 */
static int check_watch_check(struct tw_purgatory *p, struct tw_delayed_op *op,
			     const void *const *keys, const size_t *lens,
			     size_t nkeys, struct tw_watch *watches, bool *done)
{
	int rc = TW_OK;
	bool failed;
	size_t i;

	lock_op(op);
	*done = op->ops->try_complete(op);
	TW_TEST_POINT("watch.checked", op);
	if (!*done) {
		/* Every entry's reference and count, at once, before the
		 * first is linked (where an unlink may drop it). */
		tr_ref_get_n(op, (int)nkeys);
		OP_ADD(op->linked, (int)nkeys);
	}
	for (i = 0; !*done && i < nkeys && rc == TW_OK; i++)
		rc = watch(p, op, keys[i], lens[i], &watches[i]);
	failed = rc != TW_OK;
	if (failed)
		OP_SUB(op->linked, (int)(nkeys - (i - 1))); /* not linked */
	if (!*done && !failed)
		*done = op->ops->try_complete(op);
	if (failed) {
		TW_TEST_POINT("watch.failing", op);
		if (!tr_claim(op))
			rc = TW_OK; /* completed from outside first */
	}
	unlock_op(op);
	if (failed) {
		TW_TEST_POINT("watch.failed", op);
		/* The references of the entries never linked; the call holds
		 * its own, so none of these is the last. */
		for (size_t k = i - 1; k < nkeys; k++)
			op_put(op);
		while (i-- > 1)
			unwatch(p, &watches[i - 1], keys[i - 1], lens[i - 1]);
	}
	return rc;
}

/* Arm the timeout of a watched op not completed yet, with its own
 * reference. One the clock cannot reach (now + timeout overflows) is the
 * end of time, not no timeout (the op would then wait for its condition
 * alone, and delayed() would not count it). One that cannot be armed at
 * all gives its count and reference back; one completed meanwhile is
 * taken out again. */
static void arm_timeout(struct tw_purgatory *p, struct tw_delayed_op *op)
{
	int64_t tolerance = op_tolerance(op);
	int rc;

	count_delayed(p, 1);
	tr_ref_get(op); /* the timeout's reference */
	rc = tolerance ? tw__service_add_in_range(p->svc, &op->timer,
						  op->timeout, tolerance)
		       : tw_service_add_in(p->svc, &op->timer, op->timeout);
	if (rc == TW_EOVERFLOW)
		rc = tw_service_add(p->svc, &op->timer, INT64_MAX);
	if (rc != TW_OK) {
		count_delayed(p, -1);
		op_put(op);
	} else if (OP_LOAD(op->completed)) {
		/* Completed before its timeout was armed. */
		tw__pg_drop_timeout(p, op);
	}
}

/* The debug build's table keeps an op from its first watch to its
 * on_release (opstate.h); after a watch that failed, the op's entry says
 * so (the purgatory's tag with bit 0 set), so that a tw_op_init before
 * that on_release names this case (op.c). Before the call's own put:
 * until then nothing can release the op. */
static void debug_watch_failed(struct tw_delayed_op *op, struct tw_purgatory *p)
{
#ifdef TW_DEBUG
	tw__debug_set(TW_DBG_OP, op, true, (uint64_t)(uintptr_t)p | 1);
#endif
	(void)op;
	(void)p;
}

int tw_purgatory_try_complete_else_watch(struct tw_purgatory *p,
					 struct tw_delayed_op *op,
					 const void *const *keys,
					 const size_t *lens, size_t nkeys,
					 struct tw_watch *watches)
{
	struct entry_stripe *stripe;
	bool done;
	int rc = check_watch_args(p, op, keys, lens, nkeys, watches);

	if (rc)
		return rc;
	stripe = enter(p);
	if (!stripe)
		return TW_ESHUTDOWN;
	if (OP_LOAD(op->completed)) {
		leave_call(stripe);
		/* Completed while watched (a key check), or before it was
		 * ever watched (a force_complete). */
		return op_purgatory(op) ? TW_EBUSY : TW_EINVAL;
	}
	/* One watch per tw_op_init (opstate.h, op->purgatory). */
	TW_TEST_POINT("watch.claiming", op);
	{
		struct tw_purgatory *seen;

		if (!tr_watch_start(op, &seen)) {
			leave_call(stripe);
			/* Claimed from outside before any watch: completed. */
			return seen == OP_NEVER_WATCHED ? TW_EINVAL : TW_EBUSY;
		}
	}
	TW_TEST_POINT("watch.claimed", op);
	/* Refused, for the timeout could not be armed, with the claim given
	 * back (no reference taken yet): the op counts as never watched. Read
	 * only now: the tolerance waits in the timer's due time, which the
	 * claimer's arming overwrites, so a racing second watch must not
	 * read it (it finds the claim and answers TW_EBUSY). */
	if (p->kafka_mode && op_tolerance(op) > 0) {
		tr_watch_refused(op);
		leave_call(stripe);
		return TW_EINVAL_BECAUSE("tw_purgatory_try_complete_else_watch",
					 "%s", "the op has a tolerance "
					 "(tw_op_set_tolerance) and this purgatory's "
					 "service is in TW_MODE_KAFKA, which has no "
					 "windows");
	}
	TW_TEST_POINT("watch.open", op);
	tr_ref_first(op, p); /* this call's reference: the op's first */
	tr_watch_name(op, p); /* only now that it holds a reference */

	rc = check_watch_check(p, op, keys, lens, nkeys, watches, &done);
	if (rc) {
		debug_watch_failed(op, p);
		op_put(op);
		leave_call(stripe);
		return rc;
	}
	if (!done && !OP_LOAD(op->completed))
		arm_timeout(p, op);
	/* Until this put, another thread's completion cannot release the op
	 * (purgatory.h: it may be released once the call returns). */
	TW_TEST_POINT("watch.armed", op);
	op_put(op);
	calling_end();
	pg_maybe_purge(p);
	/* Last: shutdown waits for the call up to here, its put (the op's
	 * release, once shutdown hands it back) and its purge (a walk of
	 * every list, in memory a destroy after shutdown frees) included.
	 * An on_release the purge runs is inside the purge's own call, so
	 * it cannot start the shutdown that would wait for this one. */
	leave(stripe);
	return done ? 1 : 0;
}

/*
 * A key check's walk. Under the shard lock a check pins its key's list
 * and notes the list's last entry; then it lets go of the lock and walks
 * from the first entry to that one, trying each op as it passes it. The
 * pin is what makes a walk without the lock safe (core.h, Pins): while a
 * list is pinned no entry leaves it, so every entry between the first and
 * the noted last keeps its links and its op's reference until the check
 * lets go; the one link that changes meanwhile is the last entry's next,
 * where watches append, and the walk stops at that entry without reading
 * that link. Ops appended after it are not tried: their watch checks them
 * itself, after linking, under their lock, so no condition that came true
 * is lost; and a check that followed them would never end on a key
 * watched faster than it can try.
 *
 * Each entry costs a walk one look: its op's flag, then (uncompleted) the
 * op's may_complete and, if that says yes, its lock and try_complete. No
 * entry is unlinked on the way: the entries a walk finds completed or
 * completes itself are noted (up to WALK_DROPS; past that the list's
 * completed entries are dropped as a whole) and unlinked on the way out,
 * under the lock, by the last check out of the list; a check that is not
 * the last marks the list dirty, and the last one out, finding it dirty,
 * drops every completed entry. A walk holds nothing on the stack but its
 * place and the entries it noted, however long the list (one partition,
 * many produce requests: Kafka's common case).
 */
#define WALK_DROPS 8

struct key_walk {
	struct pshard *sh;
	struct tw_watchers *ws;
	struct tw_link *next;  /* the entry to look at next; NULL: the list was
				* empty (walk_step says when the walk is done) */
	struct tw_link *last;  /* the list's last entry when the check began */
	struct key_walk *ring; /* the group's next walk still going (check_group) */
	struct tw_watch *drops[WALK_DROPS]; /* completed entries, to unlink */
	unsigned ndrops;
	bool drop_all;         /* more than WALK_DROPS of them */
	int64_t completed;
};

/* Under the shard lock: pin the list and note where the walk goes. */
pg_hot_inline void walk_begin(struct key_walk *k, struct pshard *sh,
			      struct tw_watchers *ws)
{
	k->sh = sh;
	k->ws = ws;
	k->ndrops = 0;
	k->drop_all = false;
	k->completed = 0;
	pin(ws);
	tw__pg_tls_pins++; /* the gate: this thread's checks do not wait for it */
	k->last = list_empty(&ws->entries) ? NULL : ws->entries.prev;
	k->next = k->last ? ws->entries.next : NULL;
}

pg_hot_inline void walk_note(struct key_walk *k, struct tw_watch *w)
{
	if (k->ndrops < WALK_DROPS)
		k->drops[k->ndrops++] = w;
	else
		k->drop_all = true;
}

/* Entry l's op, with no lock held: its flag, then (uncompleted) its
 * may_complete and, if that says yes, its lock and try_complete. */
pg_hot_inline void walk_visit(struct key_walk *k, struct tw_link *l)
{
	struct tw_watch *w = tw_container_of(l, struct tw_watch, link);
	struct tw_delayed_op *op = w->op;

	if (OP_LOAD(op->completed)) {
		walk_note(k, w);
	} else if ((!op->ops->may_complete || op->ops->may_complete(op)) &&
		   try_complete_locked(op)) {
		k->completed++;
		walk_note(k, w);
	}
}

/* One entry; the next one's line is fetched while this one's op is
 * looked at and tried. Whether an entry follows is its answer (k->next
 * is left at the last entry). The last entry has a copy of the look of
 * its own, so that the common step tests for the end once, before the
 * look, and its answer is a constant after it: the caller's loop tests
 * nothing more. This runs once per entry of the key's list (dozens a
 * check at Kafka's rates): the flag's load, the look and the locked
 * section are inlined. */
pg_hot_inline bool walk_step(struct key_walk *k)
{
	struct tw_link *l = k->next;

	if (__builtin_expect(l == k->last, 0)) {
		walk_visit(k, l);
		return false;
	}
	k->next = l->next;
	__builtin_prefetch(k->next);
	walk_visit(k, l);
	return true;
}

/*
 * The check's way out. One that noted nothing lets go of its pin with one
 * compare-and-swap of the pins' word (release: its touches of the ops
 * come first) and no lock -- the usual check, whose ops are not ready
 * yet -- unless it is the last one out of a dirty list. The mark lives
 * in the same word, so a mark made after the check looked (a purge, or
 * a shutdown or cancel_for_key that claimed the ops in place and let go
 * of its own pin) fails the swap, and the check looks again: nothing a
 * mark asks of the last one out is lost. Otherwise under the lock: the
 * last one out unlinks the entries it noted (each still linked: the pin
 * kept them) or, the list dirty or its notes overflowed, every completed
 * entry, and frees an emptied list; one that is not the last marks the
 * list dirty for the last.
 */
pg_hot_inline void walk_done(struct key_walk *k)
{
	struct tw_watchers *ws = k->ws;
	struct entry_chain puts;
	unsigned pins;

	tw__pg_tls_pins--;
	if (!k->ndrops && !k->drop_all) {
		pins = atomic_load_explicit(&ws->walkers, memory_order_relaxed);
		TW_TEST_POINT("check.leaving", ws);
		while (pins != (PIN_DIRTY | 1))
			if (atomic_compare_exchange_weak_explicit(
				    &ws->walkers, &pins, pins - 1,
				    memory_order_release, memory_order_relaxed))
				return;
	}
	chain_init(&puts);
	pshard_lock(k->sh);
	/* The pin let go of and the list marked for the last one out in one
	 * add: apart, another check's way out without the lock could leave
	 * the list last, unmarked, between the two. (The mark changes only
	 * under this lock, so the add knows whether to set it.) */
	pins = atomic_load_explicit(&ws->walkers, memory_order_relaxed);
	pins = atomic_fetch_add_explicit(&ws->walkers,
					 pins & PIN_DIRTY ? (unsigned)-1
							  : PIN_DIRTY - 1,
					 memory_order_acq_rel);
	if ((pins & ~PIN_DIRTY) == 1) {
		/* The last one out: nothing pins the list, nor can while
		 * the lock is held. */
		if (k->drop_all || (pins & PIN_DIRTY)) {
			drop_completed(k->sh, ws, &puts);
		} else {
			atomic_store_explicit(&ws->walkers, 0,
					      memory_order_relaxed);
			for (unsigned i = 0; i < k->ndrops; i++)
				unlink_entry(k->sh, k->drops[i], &puts, false);
		}
		remove_if_empty(k->sh, ws);
	}
	pshard_unlock(k->sh);
	chain_put_all(&puts);
}

/*
 * The gate. A check that would pin a list whose unlinks wait for the last
 * check out (dirty, and pinned) waits for the checks in it to leave first,
 * yielding, so that one of them is the last out and unlinks the completed
 * entries. Without it, checks that keep overlapping on one key (three
 * threads checking it continuously: a partition's produce and fetch
 * threads) leave no last one out: no completed entry was ever unlinked,
 * and no op released, while they kept at it (129,984 ops in 20 s, the
 * list growing as long: docs/purgatory.md), a purge or a shutdown only
 * marking the list again.
 *
 * The wait is bounded in time (GATE_WAIT_NS), not in yields: a check may
 * be made with a lock held that a pinning check's callback waits for,
 * and a yield to a busy CPU's other thread gives up a whole time slice
 * (10,000 yields were 28 s). A check whose thread pins a list itself
 * (from a callback of its walk, or of a claim in place) never waits: the
 * pins it would wait for include its own. The protocol is unchanged: a
 * pin taken later is one of the schedules the model already has.
 */
#define GATE_WAIT_NS 1000000

static bool gate_closed(const struct tw_watchers *ws)
{
	unsigned pins = atomic_load_explicit(&ws->walkers, memory_order_relaxed);

	return (pins & PIN_DIRTY) && (pins & ~PIN_DIRTY);
}

/* Whether a check may wait at the gate (its thread pins no list). */
static bool may_wait_at_gate(void)
{
	return tw__pg_tls_pins == 0;
}

/* Yield once at the gate; false when the wait that began at *since (0:
 * now) has lasted GATE_WAIT_NS. */
static bool gate_yield(const void *key, int64_t *since)
{
	int64_t now;

	(void)key; /* the test point's, in the test build only */
	TW_TEST_POINT("check.gate", key);
	sched_yield();
	now = tw__svc_monotonic_ns(NULL);
	if (!*since)
		*since = now;
	return now - *since < GATE_WAIT_NS;
}

/* Under sh's lock, ws (key's list, found there) gate_closed: let go of
 * the lock and yield until the list is no longer dirty and pinned, or
 * gone, or GATE_WAIT_NS have passed; back under the lock, the key's list
 * found again (NULL: none). */
static __attribute__((noinline)) struct tw_watchers *
wait_at_gate(struct pshard *sh, uint64_t h, const void *key, size_t len)
{
	struct tw_watchers *ws;
	int64_t since = 0;
	bool more;

	do {
		pshard_unlock(sh);
		more = gate_yield(key, &since);
		pshard_lock(sh);
		ws = find(sh, h, key, len);
	} while (more && ws && gate_closed(ws));
	return ws;
}

int64_t tw_purgatory_check_and_complete(struct tw_purgatory *p,
					const void *key, size_t len)
{
	uint64_t h;
	struct pshard *sh;
	struct tw_watchers *ws;
	struct key_walk k;

	sh = locate(p, key, len, &h);
	if (!sh)
		return refuse_key_call("tw_purgatory_check_and_complete", p, key, len);
	pshard_lock(sh);
	ws = find(sh, h, key, len);
	if (ws && __builtin_expect(gate_closed(ws), 0) && may_wait_at_gate())
		ws = wait_at_gate(sh, h, key, len);
	if (!ws) {
		pshard_unlock(sh);
		pg_maybe_purge(p);
		return 0;
	}
	calling_begin();
	walk_begin(&k, sh, ws);
	pshard_unlock(sh);
	TW_TEST_POINT("check.walk", key);
	if (k.next)
		while (walk_step(&k))
			;
	walk_done(&k);
	calling_end();
	pg_maybe_purge(p); /* with no pin held: it would defer */
	return k.completed;
}

/*
 * Several keys checked at once (tw_purgatory_check_and_complete_keys): up
 * to CHECK_GROUP keys a group, their lists pinned under their shards'
 * locks taken together, in the order of the shards array (so two groups,
 * or a group and any one-shard caller, never wait on each other in a
 * cycle: no shard lock is ever taken while an op's lock or a later
 * shard's lock is held), then walked side by side with no lock held, an
 * entry of each list in turn. What that buys: a list is a chain of
 * entries in the callers' memory, each one's address in the one before,
 * so one key's walk waits for one cache miss after another; walking three
 * lists in turn keeps three misses in flight. Everything else is each
 * key's own check: the same pin, the same walk, the same way out.
 */
#define CHECK_GROUP 4

static int64_t check_group(struct tw_purgatory *p, const void *const *keys,
			   const size_t *lens, const uint64_t *hashes, size_t n,
			   bool gate)
{
	int64_t gate_since = 0;
	struct key_walk kw[CHECK_GROUP], *k_at, *before;
	struct tw_watchers *found[CHECK_GROUP];
	struct pshard *sh_of[CHECK_GROUP], *locked[CHECK_GROUP];
	size_t nlocked = 0, nwalks = 0, k;
	int64_t completed = 0;

	/* The shards to lock, in the array's order, each once: an insertion
	 * by swaps (a few pointers: no call into libc). */
	for (k = 0; k < n; k++) {
		struct pshard *sh = shard_for(p, hashes[k]);
		size_t i;
		bool seen = false;

		sh_of[k] = sh;
		for (i = 0; i < nlocked; i++)
			seen |= locked[i] == sh;
		if (seen)
			continue;
		locked[nlocked] = sh;
		for (i = nlocked++; i > 0 && locked[i - 1] > locked[i]; i--) {
			struct pshard *moved = locked[i - 1];

			locked[i - 1] = locked[i];
			locked[i] = moved;
		}
	}
	for (;;) {
		bool closed = false;

		for (k = 0; k < nlocked; k++) {
			pshard_lock(locked[k]);
			if (k == 0 && nlocked > 1)
				TW_TEST_POINT("check.locking", keys[0]);
		}
		for (k = 0; k < n; k++) {
			found[k] = find(sh_of[k], hashes[k], keys[k], lens[k]);
			closed |= found[k] && gate_closed(found[k]);
		}
		/* The gate (above), for all the group's lists at once. */
		if (!closed || !gate)
			break;
		for (k = nlocked; k-- > 0;)
			pshard_unlock(locked[k]);
		gate = gate_yield(keys[0], &gate_since);
	}
	for (k = 0; k < n; k++)
		if (found[k])
			walk_begin(&kw[nwalks++], sh_of[k], found[k]);
	for (k = nlocked; k-- > 0;)
		pshard_unlock(locked[k]);
	for (k = 0; k < n; k++)
		if (found[k])
			TW_TEST_POINT("check.walk", keys[k]);
	/* The walks with an entry to look at, in a ring: a step, then the
	 * next walk's; a walk that ends leaves the ring. */
	before = NULL;
	k_at = NULL;
	for (k = nwalks; k-- > 0;)
		if (kw[k].next) {
			kw[k].ring = k_at;
			k_at = &kw[k];
			if (!before)
				before = k_at;
		}
	if (k_at) {
		before->ring = k_at;
		for (;;) {
			if (walk_step(k_at)) {
				before = k_at;
			} else if (before == k_at) {
				break; /* the last walk going ended */
			} else {
				before->ring = k_at->ring;
			}
			k_at = before->ring;
		}
	}
	for (k = 0; k < nwalks; k++) {
		walk_done(&kw[k]);
		completed += kw[k].completed;
	}
	return completed;
}

int64_t tw_purgatory_check_and_complete_keys(struct tw_purgatory *p,
					     const void *const *keys,
					     const size_t *lens, size_t nkeys)
{
	uint64_t hashes[CHECK_GROUP];
	int64_t completed = 0;
	bool gate;

	if (!p || !keys || !lens || nkeys == 0)
		return TW_EINVAL_BECAUSE("tw_purgatory_check_and_complete_keys",
					 "%s", !p ? "the purgatory is NULL"
					       : nkeys == 0 ? "no keys (nkeys 0)"
							    : "keys or lens is NULL");
	/* Every key looked at before any is checked: bad input checks
	 * nothing. Hashed a group at a time, as the group is checked. */
	for (size_t i = 0; i < nkeys; i++)
		if (!keys[i] || lens[i] == 0 || lens[i] > TW_KEY_MAX)
			return refuse_key_call("tw_purgatory_check_and_complete_keys",
					       p, keys[i], lens[i]);
	gate = may_wait_at_gate();
	calling_begin();
	for (size_t i = 0; i < nkeys; i += CHECK_GROUP) {
		size_t n = nkeys - i < CHECK_GROUP ? nkeys - i : CHECK_GROUP;

		for (size_t k = 0; k < n; k++)
			hashes[k] = hash_key(keys[i + k], lens[i + k]);
		completed += check_group(p, keys + i, lens + i, hashes, n, gate);
	}
	calling_end();
	pg_maybe_purge(p); /* with no pin held: it would defer */
	return completed;
}

/* Claim the uncompleted ops of one list no check pins, unlinking all its
 * entries onto puts, a claimed op's entry marked; the caller hands them
 * back. A pinned list is left as it is, and *left (if arg) says so:
 * claim_pinned() is for those (tw__pg_claim_pinned_lists, at shutdown). */
void tw__pg_claim_list(struct tw_purgatory *p, struct pshard *sh,
		       struct tw_watchers *ws, struct entry_chain *puts, void *arg)
{
	struct tw_link *l = ws->entries.next;

	(void)p;
	if (pinned(ws)) {
		if (arg)
			*(bool *)arg = true;
		return;
	}
	while (l != &ws->entries) {
		struct tw_watch *w = tw_container_of(l, struct tw_watch, link);
		bool claimed;

		l = l->next;
		claimed = tr_claim(w->op);
		if (claimed)
			tr_ref_get(w->op); /* the claim's: its entry's goes too */
		unlink_entry(sh, w, puts, claimed);
	}
}

/*
 * Claim the uncompleted ops of a list that a check pins, in place: the
 * entries cannot leave it, so this call pins it too and claims its ops
 * without a reference of its own (each one's entry, which stays, keeps
 * the op), CLAIM_BATCH at a time on the stack, each batch's timeouts
 * stopped and handed back with the shard lock let go; then it lets go of
 * its pin as a check does, the last one out dropping the completed
 * entries onto puts. It goes up to the list's last entry when it began,
 * as a check does, and allocates nothing. Under the shard lock; returns
 * with it released.
 */
#define CLAIM_BATCH 64

static int64_t claim_pinned(struct tw_purgatory *p, struct pshard *sh,
			    struct tw_watchers *ws, tw_op_fn *hand_back,
			    struct entry_chain *puts)
{
	struct tw_delayed_op *batch[CLAIM_BATCH];
	struct tw_link *last = ws->entries.prev;
	struct tw_link *l = list_empty(&ws->entries) ? NULL : ws->entries.next;
	int64_t n = 0;
	size_t k;

	pin(ws);
	tw__pg_tls_pins++; /* its hand_backs' checks: no wait at the gate */
	do {
		k = 0;
		while (l && k < CLAIM_BATCH) {
			struct tw_delayed_op *op = tw_container_of(l, struct tw_watch, link)->op;

			if (!OP_LOAD(op->completed) && tr_claim(op))
				batch[k++] = op;
			l = l == last ? NULL : l->next;
		}
		if (k)
			mark_dirty(ws);
		pshard_unlock(sh);
		TW_TEST_POINT("cancel.pinned", ws);
		for (size_t i = 0; i < k; i++) {
			tw__pg_drop_timeout(p, batch[i]);
			count_completion(p); /* its entries stay, for a purge */
			if (hand_back)
				hand_back(batch[i]);
		}
		n += (int64_t)k;
		pshard_lock(sh);
	} while (l);
	tw__pg_tls_pins--;
	unpin_locked(sh, ws, puts);
	pshard_unlock(sh);
	return n;
}

static bool has_uncompleted(const struct tw_watchers *ws)
{
	for (const struct tw_link *l = ws->entries.next; l != &ws->entries; l = l->next)
		if (!OP_LOAD(tw_container_of(l, const struct tw_watch, link)->op->completed))
			return true;
	return false;
}

/* Shutdown's second walk, for the lists its first found pinned by a check
 * (watches are refused by then, so no op is added): each list with an
 * uncompleted op is claimed in place and handed back, and the shard's
 * walk starts again, for its lock was let go of meanwhile. A list left
 * with completed entries only (their ops claimed through other keys'
 * lists, or before) is purged: marked for the last one out while a
 * check pins it -- which may have walked past those ops before they
 * were claimed, and would leave without a look back -- or dropped now.
 * After a shutdown no call may come to purge it. The references the
 * last one out drops go on puts. */
int64_t tw__pg_claim_pinned_lists(struct tw_purgatory *p, tw_op_fn *hand_back,
				  struct entry_chain *puts)
{
	int64_t n = 0;

	for (unsigned i = 0; i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];
		bool again;

		do {
			again = false;
			pshard_lock(sh);
			for (size_t b = 0; b < sh->nbuckets && !again; b++)
				for (struct tw_watchers *ws = sh->table[b], *next; ws;
				     ws = next) {
					next = ws->next; /* ws may be freed here */
					if (has_uncompleted(ws)) {
						n += claim_pinned(p, sh, ws, hand_back, puts);
						again = true;
						break;
					}
					if (!list_empty(&ws->entries)) {
						drop_completed(sh, ws, puts);
						remove_if_empty(sh, ws);
					}
				}
			if (!again)
				pshard_unlock(sh);
		} while (again);
	}
	return n;
}

/* Cancel the timeouts of the claimed ops on a chain and hand them back.
 * Their references stay on the chain: the caller drops them
 * (chain_put_all) once it holds no lock of the purgatory's, for that may
 * run on_release. */
int64_t tw__pg_hand_back_claimed(struct tw_purgatory *p, struct entry_chain *c,
				 tw_op_fn *hand_back)
{
	int64_t n = 0;

	for (struct tw_watch *w = c->head, *next; w; w = next) {
		struct tw_delayed_op *op = w->op;
		bool claimed;

		next = chain_next(w, &claimed);
		if (!claimed)
			continue;
		tw__pg_drop_timeout(p, op);
		/* Cancelled is completed: its entries on other keys wait for
		 * a check of those or a purge, which this count brings. */
		if (OP_LOAD(op->linked))
			count_completion(p);
		n++;
		if (hand_back)
			hand_back(op);
	}
	return n;
}

int64_t tw_purgatory_cancel_for_key(struct tw_purgatory *p, const void *key,
				    size_t len, tw_op_fn *hand_back)
{
	uint64_t h;
	struct pshard *sh;
	struct tw_watchers *ws;
	struct entry_chain puts;
	int64_t n;

	sh = locate(p, key, len, &h);
	if (!sh)
		return refuse_key_call("tw_purgatory_cancel_for_key", p, key, len);
	calling_begin();
	chain_init(&puts);
	pshard_lock(sh);
	ws = find(sh, h, key, len);
	if (ws && pinned(ws)) {
		n = claim_pinned(p, sh, ws, hand_back, &puts);
	} else {
		if (ws) {
			tw__pg_claim_list(p, sh, ws, &puts, NULL);
			remove_if_empty(sh, ws);
		}
		pshard_unlock(sh);
		n = tw__pg_hand_back_claimed(p, &puts, hand_back);
	}
	chain_put_all(&puts);
	calling_end();
	pg_maybe_purge(p); /* with no pin held: it would defer */
	return n;
}

/* Unlink every entry of one list (destroy: its ops are completed, and
 * no call is under way, so nothing pins it). */
void tw__pg_unlink_all(struct tw_purgatory *p, struct pshard *sh,
		       struct tw_watchers *ws, struct entry_chain *puts, void *unused)
{
	(void)p;
	(void)unused;
	while (!list_empty(&ws->entries))
		unlink_entry(sh, tw_container_of(ws->entries.next, struct tw_watch, link),
			     puts, false);
}

/* The one walk over every key's list, shard by shard (purge, shutdown,
 * destroy): fn on each list under its shard's lock (lock false: destroy,
 * when nobody else is left), the list freed once empty, and the
 * references fn collected dropped after the shard is unlocked. Nothing
 * of a shard is read before its lock is taken: a watch may be growing its
 * table (a create that failed half-way keeps only the shards it gave a
 * table). */
void tw__pg_walk_lists(struct tw_purgatory *p, bool lock, tw__pg_list_fn *fn,
		       void *arg)
{
	for (unsigned i = 0; i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];
		struct entry_chain puts;

		chain_init(&puts);
		if (lock)
			pshard_lock(sh);
		for (size_t b = 0; b < sh->nbuckets; b++) {
			struct tw_watchers *ws = sh->table[b];

			while (ws) {
				struct tw_watchers *next = ws->next;

				fn(p, sh, ws, &puts, arg);
				remove_if_empty(sh, ws);
				ws = next;
			}
		}
		if (lock)
			pshard_unlock(sh);
		chain_put_all(&puts);
	}
}

static void drop_completed_of(struct tw_purgatory *p, struct pshard *sh,
			      struct tw_watchers *ws, struct entry_chain *puts,
			      void *unused)
{
	(void)p;
	(void)unused;
	drop_completed(sh, ws, puts);
}

void tw_purgatory_purge(struct tw_purgatory *p)
{
	if (!p)
		return;
	calling_begin();
	tw__pg_walk_lists(p, true, drop_completed_of, NULL);
	calling_end();
}

/* Kafka's purge: once enough completed ops may linger in lists, one thread
 * walks them all. Only where the caller holds no op's lock (core.h's
 * essay). */
void tw__pg_maybe_purge(struct tw_purgatory *p)
{
	bool expected = false;

	if (atomic_load(&p->completed_since_purge) <= p->purge_interval)
		return;
	if (!atomic_compare_exchange_strong(&p->purging, &expected, true))
		return;
	atomic_store(&p->completed_since_purge, 0);
	tw_purgatory_purge(p);
	atomic_store(&p->purging, false);
}
