/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c — a purgatory's beginning and end: create (its shards and
 * its own timer service), the counts, a manual poll, shutdown (refuse new
 * watches, wait for the calls under way, claim every op still watched and
 * hand it back, then shut the service down, whose hand-back ends any
 * timeout still armed) and destroy.
 */
#include "core.h"

int tw_purgatory_create(struct tw_purgatory **out,
			const struct tw_purgatory_config *cfg)
{
	struct tw_purgatory *p;
	struct tw_service_config scfg = { 0 };
	int rc;

	if (!out)
		return TW_EINVAL_BECAUSE("tw_purgatory_create", "out is NULL");
	*out = NULL;
	if (cfg && cfg->shards > 65536)
		return TW_EINVAL_BECAUSE("tw_purgatory_create",
					 "cfg.shards must be at most 65536, not %u",
					 cfg->shards);
	/* Its stripes are cache-line aligned: calloc promises only 16. */
	p = aligned_alloc(_Alignof(struct tw_purgatory), sizeof(*p));
	if (!p)
		return TW_ENOMEM;
	memset(p, 0, sizeof(*p));
	if (cfg)
		scfg = cfg->service;
	p->kafka_mode = scfg.mode == TW_MODE_KAFKA;
	p->nshards = cfg && cfg->shards ? cfg->shards : 512;
	p->purge_interval = cfg && cfg->purge_interval ? cfg->purge_interval : 1000;
	p->purge_flush = p->purge_interval / (2 * ENTRY_STRIPES);
	if (p->purge_flush < 1)
		p->purge_flush = 1;
	pthread_mutex_init(&p->shutdown_mu, NULL);
	p->shards = aligned_alloc(64, p->nshards * sizeof(*p->shards));
	if (!p->shards) {
		free(p);
		return TW_ENOMEM;
	}
	for (unsigned i = 0; i < p->nshards; i++) {
		struct pshard *sh = &p->shards[i];

		memset(sh, 0, sizeof(*sh)); /* its lock free (lock.h) */
		sh->nbuckets = 8;
		sh->table = calloc(sh->nbuckets, sizeof(*sh->table));
		if (!sh->table) {
			/* Only whole shards are left: every shard a walk
			 * visits has a table, read under its lock. */
			p->nshards = i;
			tw_purgatory_destroy(p);
			return TW_ENOMEM;
		}
	}
	rc = tw_service_create(&p->svc, &scfg);
	if (rc) {
		tw_purgatory_destroy(p);
		/* tw_service_create said which field, as its own cfg. */
		return rc == TW_EINVAL
			       ? TW_EINVAL_BECAUSE("tw_purgatory_create", "%s",
						   "cfg.service was refused (the line "
						   "above names the field: its cfg.X "
						   "is cfg.service.X)")
			       : rc;
	}
	*out = p;
	return TW_OK;
}

size_t tw_purgatory_watched(struct tw_purgatory *p)
{
	if (!p)
		return 0;
	size_t n = 0;

	for (unsigned i = 0; i < p->nshards; i++)
		n += atomic_load_explicit(&p->shards[i].watched, memory_order_relaxed);
	return n;
}

size_t tw_purgatory_delayed(struct tw_purgatory *p)
{
	if (!p)
		return 0;
	long n = 0;

	for (unsigned i = 0; i < ENTRY_STRIPES; i++)
		n += atomic_load_explicit(&p->stripes[i].delayed, memory_order_relaxed);
	return n > 0 ? (size_t)n : 0;
}

int64_t tw_purgatory_poll(struct tw_purgatory *p)
{
	if (!p)
		return TW_EINVAL_BECAUSE("tw_purgatory_poll", "%s",
					 "the purgatory is NULL");
	/* From a callback a purgatory call runs on this thread, often under
	 * an op's lock, a poll would run other ops' timeouts there, whose
	 * callbacks may take that lock (the service refuses the callbacks it
	 * runs itself). */
	if (tw__pg_tls_calling)
		return TW_EREENTER;
	return tw_service_poll(p->svc);
}

bool tw_purgatory_next_expiry(struct tw_purgatory *p, int64_t *when)
{
	return p && tw_service_next_expiry(p->svc, when);
}

int64_t tw_purgatory_timeout(struct tw_purgatory *p, int64_t now)
{
	return p ? tw_service_timeout(p->svc, now) : -1;
}

/*
 * The ops whose timeouts the service's shutdown handed back, chained
 * through op->timeout, so that holding them needs no memory: a
 * timeout's length is read once, when the watch arms it, and an op is
 * armed once per tw_op_init, so once its timeout is handed back the field
 * is free until the next init. The chain holds each timeout's reference,
 * dropped after the purgatory's and the service's locks are let go of.
 */
struct timeout_hand_back {
	struct tw_purgatory *p;
	tw_op_fn *hand_back;
	int64_t n;
	struct tw_delayed_op *puts; /* the chain's head; NULL: empty */
};

static void handed_push(struct timeout_hand_back *ctx, struct tw_delayed_op *op)
{
	op->timeout = (int64_t)(intptr_t)ctx->puts;
	ctx->puts = op;
}

/* Drop the chain's references, with no lock held: the last may release
 * the op, so the next one is read before. */
static void handed_put_all(struct timeout_hand_back *ctx)
{
	struct tw_delayed_op *op = ctx->puts;

	ctx->puts = NULL;
	while (op) {
		struct tw_delayed_op *next =
			(struct tw_delayed_op *)(intptr_t)op->timeout;

		op_put(op);
		op = next;
	}
}

/* The service's shutdown found an op's timeout armed: it will never run.
 * Its op is normally completed already (see tw_purgatory_shutdown); were
 * it not, it is claimed and handed back here, so it still ends once. */
static void timeout_handed_back(struct tw_service_timer *t, void *arg)
{
	struct tw_delayed_op *op = tw_container_of(t, struct tw_delayed_op, timer);
	struct timeout_hand_back *ctx = arg;

	count_delayed(ctx->p, -1);
	if (tr_claim(op)) {
		ctx->n++;
		if (ctx->hand_back)
			ctx->hand_back(op);
	}
	/* The timeout's reference, dropped once no lock is held: the
	 * service's shutdown runs this under its own, and the last put runs
	 * on_release, which may take a lock that another thread holds around
	 * its own shutdown call: dropped here, the two would hang each other. */
	handed_push(ctx, op);
}

/* shutdown's claim of every list: the entries' references go on one
 * chain for all shards, not the walker's, which drops them under
 * shutdown_mu; a list a key check pins is left for the second walk. */
struct claim_all {
	struct entry_chain deferred;
	bool left;
};

static void claim_list_deferred(struct tw_purgatory *p, struct pshard *sh,
				struct tw_watchers *ws, struct entry_chain *puts,
				void *arg)
{
	struct claim_all *all = arg;

	(void)puts;
	tw__pg_claim_list(p, sh, ws, &all->deferred, &all->left);
}

int64_t tw_purgatory_shutdown(struct tw_purgatory *p, tw_op_fn *hand_back)
{
	struct timeout_hand_back ctx;
	struct claim_all all;
	int64_t n;

	if (!p)
		return TW_EINVAL_BECAUSE("tw_purgatory_shutdown", "%s",
					 "the purgatory is NULL");
	/* From a callback (core.h's calling_begin): from one a service
	 * runs, the service's own shutdown is refused, and going on would
	 * claim and hand back every op while the service kept running, a
	 * purgatory half shut down; from one a watch runs on this thread,
	 * the wait below would be for that watch; from a hand_back of this
	 * shutdown, for shutdown_mu. */
	if (in_a_callback())
		return TW_EREENTER;
	pthread_mutex_lock(&p->shutdown_mu);
	if (p->shut_down) {
		pthread_mutex_unlock(&p->shutdown_mu);
		return 0;
	}
	calling_begin(); /* its hand_backs and on_releases */
	atomic_store(&p->closing, true);
	for (unsigned i = 0; i < ENTRY_STRIPES; i++)
		while (atomic_load_explicit(&p->stripes[i].active,
					    memory_order_acquire)) {
			TW_TEST_POINT("purgatory.shutdown.wait", p);
			sched_yield();
		}
	/* No watch is under way now, and none starts: no timeout is armed
	 * from here on. Nothing below allocates: the entries' references are
	 * chained through the entries, the timeouts' through their ops. */
	chain_init(&all.deferred);
	all.left = false;
	tw__pg_walk_lists(p, true, claim_list_deferred, &all);
	n = tw__pg_hand_back_claimed(p, &all.deferred, hand_back);
	if (all.left)
		n += tw__pg_claim_pinned_lists(p, hand_back, &all.deferred);
	/* Wait for any timeout callback still running. A timeout still armed
	 * here belongs to an op a completer has claimed but whose timeout it
	 * has not cancelled yet; the service hands it back, and its
	 * reference is dropped there, or on_release would never run
	 * (model/purgatory.pml checks it). */
	ctx.p = p;
	ctx.hand_back = hand_back;
	ctx.n = 0;
	ctx.puts = NULL;
	tw_service_shutdown(p->svc, timeout_handed_back, &ctx);
	n += ctx.n;
	p->shut_down = true;
	pthread_mutex_unlock(&p->shutdown_mu);
	/* on_release runs with no lock of the purgatory's held
	 * (purgatory.h): the references go only now. A second shutdown
	 * waits on shutdown_mu for the work above, not for these: its
	 * caller may hold a lock an on_release takes. */
	chain_put_all(&all.deferred);
	handed_put_all(&ctx);
	calling_end();
	return n;
}

void tw_purgatory_destroy(struct tw_purgatory *p)
{
	/* From a callback: nothing, as the service's destroy does there
	 * (the purgatory would be freed under the call that runs the
	 * callback). */
	if (!p || in_a_callback())
		return;
	if (p->svc) {
		tw_purgatory_shutdown(p, NULL);
		tw_service_destroy(p->svc);
	}
	/* A watch that raced shutdown may have linked entries after its
	 * walk (its op is completed by then): drop them too. */
	tw__pg_walk_lists(p, false, tw__pg_unlink_all, NULL);
	for (unsigned i = 0; i < p->nshards; i++)
		free(p->shards[i].table);
	free(p->shards);
	pthread_mutex_destroy(&p->shutdown_mu);
#ifdef TW_DEBUG
	/* Ops it still held (none after a clean shutdown) are the caller's. */
	tw__debug_forget(TW_DBG_OP, (uint64_t)(uintptr_t)p);
	tw__debug_forget(TW_DBG_OP, (uint64_t)(uintptr_t)p | 1); /* a failed watch's */
#endif
	free(p);
}
