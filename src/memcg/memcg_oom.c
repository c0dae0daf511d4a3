// SPDX-License-Identifier: MIT
/*
 * memcg_oom.c - OOM policies, kills and tasks.
 *
 * One kill at a time per tree: kill_running, under oom_lock, is set by the
 * thread that chose a victim and cleared when its callback returned; no
 * lock is held across the callback, so it may detach tasks (its victim
 * too), charge, create and destroy groups, and fork() never waits for it.
 * The victim is read only under oom_lock while it is attached: its detach
 * (by the callback, or by another thread, which waits for the callback)
 * clears killing, and destroy waits on the victim's group, recorded apart.
 * The kill callback itself is called, replaced and removed by
 * memcg_callback.c, as the reclaim callbacks are; the rest of a policy
 * (mode, timeout) changes with it under oom_lock, so a kill policy always
 * has its callback.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "runtime/inject.h"
#include "memcg_internal.h"

/* ---- OOM -------------------------------------------------------------- */

struct collect {
	struct tally_memcg_tree *t;
	size_t nr;
};

/*
 * What tally_oom_select() accepts of a task: its fields are the caller's
 * and may have changed since the attach checked them; one bad task must
 * not make the whole selection fail, so it is left out.
 */
static bool valid_task(const struct tally_memcg_task *task)
{
	return task->mm && task->mm->magic == TALLY_MM_MAGIC &&
	       !(task->flags & ~(TALLY_OOM_UNKILLABLE | TALLY_OOM_PREFER)) &&
	       task->score_adj >= TALLY_OOM_SCORE_ADJ_MIN &&
	       task->score_adj <= TALLY_OOM_SCORE_ADJ_MAX;
}

static long collect_tasks(struct tally_memcg *g, void *arg)
{
	struct collect *c = arg;

	for (struct tally_memcg_task *task = g->tasks; task;
	     task = task->next_) {
		struct tally_oom_candidate *cand;

		if (c->nr == c->t->cand_room)
			break;
		if (!valid_task(task))
			continue;
		cand = &c->t->cands[c->nr];
		memset(cand, 0, sizeof(*cand));
		cand->mm = task->mm;
		cand->score_adj = task->score_adj;
		cand->flags = task->flags;
		c->t->cand_tasks[c->nr++] = task;
	}
	return 0;
}

/*
 * Choose a task of @h's subtree and report it: MEMCG_KILLED,
 * MEMCG_NO_VICTIM, MEMCG_KILL_BUSY when another kill of the tree is
 * running (then wait for what it frees, as the kernel does when its OOM
 * lock is taken), or MEMCG_NOT_KILLING when @h's policy is no longer a
 * kill.  *@pol is set to @h's policy, read under oom_lock.
 */
int memcg_oom_kill(struct tally_memcg *h, struct memcg_oom *pol)
{
	struct tally_memcg_tree *t = h->tree;
	struct tally_oom_options opts = TALLY_OOM_OPTIONS_INIT;
	struct tally_oom_result res;
	struct collect c = { t, 0 };
	struct tally_memcg_task *victim = NULL;
	struct memcg_cb_call call;

	(void)tally_inject(TALLY_INJECT_MEMCG_BEFORE_KILL);
	pthread_mutex_lock(&t->oom_lock);
	/*
	 * The policy as it is now: a setter that replaced it since the
	 * caller read it has returned, and its kill callback's argument
	 * may be gone.
	 */
	*pol = h->oom;
	if (pol->mode != TALLY_MEMCG_OOM_KILL) {
		pthread_mutex_unlock(&t->oom_lock);
		return MEMCG_NOT_KILLING;
	}
	if (t->kill_running) {
		pthread_mutex_unlock(&t->oom_lock);
		return MEMCG_KILL_BUSY;
	}
	pthread_rwlock_rdlock(&t->structure);
	memcg_walk(h, collect_tasks, &c);
	pthread_rwlock_unlock(&t->structure);
	opts.total = LOAD(&h->max) == TALLY_MEMCG_UNLIMITED ?
			0 : (unsigned long)LOAD(&h->max);
	/*
	 * The callback read now, with the policy: one that a setter replaced
	 * is never called after the setter returned.
	 */
	if (c.nr && !tally_oom_select(t->cands, c.nr, &opts, &res) &&
	    memcg_callback_enter(h, MEMCG_CB_KILL, &call))
		victim = t->cand_tasks[res.index];
	if (victim) {
		t->kill_running = 1;
		t->killing = victim;
		t->killing_group = victim->group_;
		t->killer = pthread_self();
		memcg_event(victim->group_, TALLY_MEMCG_EVENT_OOM_KILL);
	}
	pthread_mutex_unlock(&t->oom_lock);
	if (!victim)
		return MEMCG_NO_VICTIM;
	((tally_memcg_kill_fn)call.fn)(h, victim, call.arg);
	memcg_callback_leave(&call);
	pthread_mutex_lock(&t->oom_lock);
	t->kill_running = 0;
	t->killing = NULL;
	t->killing_group = NULL;
	pthread_cond_broadcast(&t->kill_done);
	pthread_mutex_unlock(&t->oom_lock);
	return MEMCG_KILLED;
}

static bool killed_by_another(const struct tally_memcg_tree *t)
{
	return t->kill_running && !pthread_equal(t->killer, pthread_self());
}

/*
 * Caller holds oom_lock: wait until no other thread's kill callback has a
 * victim in @g.
 */
void memcg_wait_kill(struct tally_memcg_tree *t, struct tally_memcg *g)
{
	while (killed_by_another(t) && t->killing_group == g)
		pthread_cond_wait(&t->kill_done, &t->oom_lock);
}

/* Retry with drains, at least once, until @deadline; NULL once charged. */
struct tally_memcg *memcg_wait_for_room(struct tally_memcg *g, long n,
					 struct tally_memcg *h, long deadline)
{
	struct backoff b;

	backoff_begin(&b, deadline);
	for (;;) {
		h = memcg_settle_and_retry(g, n, h);
		if (!h || !backoff_nap(&b))
			return h;
	}
}

int tally_memcg_set_oom_policy(struct tally_memcg *g,
			       const struct tally_memcg_oom_policy *policy)
{
	struct memcg_oom pol = { TALLY_MEMCG_OOM_FAIL, 0 };
	tally_memcg_kill_fn kill = NULL;
	void *arg = NULL;
	struct memcg_cb_wait w;
	struct tally_memcg_tree *t;
	int err;

	if (!g)
		return -EINVAL;
	memcg_check_handle(g);
	t = g->tree;
	if (policy) {
		if ((unsigned int)policy->mode > TALLY_MEMCG_OOM_KILL ||
		    policy->timeout_ns < 0 ||
		    policy->timeout_ns > MAX_OOM_TIMEOUT_NS ||
		    (policy->mode == TALLY_MEMCG_OOM_KILL && !policy->kill))
			return -EINVAL;
		pol = (struct memcg_oom){ policy->mode, policy->timeout_ns };
		if (policy->mode == TALLY_MEMCG_OOM_KILL) {
			kill = policy->kill;
			arg = policy->arg;
		}
	}
	pthread_mutex_lock(&t->oom_lock);
	err = memcg_callback_publish(g, MEMCG_CB_KILL, (void (*)(void))kill,
				     arg, &w);
	if (!err)
		g->oom = pol;
	pthread_mutex_unlock(&t->oom_lock);
	if (!err)
		memcg_callback_wait(&w);
	return err;
}

int tally_memcg_task_attach(struct tally_memcg *g,
			    struct tally_memcg_task *task)
{
	struct tally_memcg_tree *t;
	int err = 0;

	if (!g || !task || !valid_task(task))
		return -EINVAL;
	t = g->tree;
	pthread_mutex_lock(&t->oom_lock);
	pthread_rwlock_wrlock(&t->structure);
	if (LOAD(&g->dead)) {
		err = -EINVAL;
	} else if (LOAD(&task->group_)) {
		err = -EBUSY;
	} else if (t->nr_tasks == t->cand_room) {
		size_t room = t->cand_room ? 2 * t->cand_room : 16;
		struct tally_oom_candidate *cands =
			realloc(t->cands, room * sizeof(*cands));

		if (cands)
			t->cands = cands;
		if (cands) {
			struct tally_memcg_task **tasks =
				realloc(t->cand_tasks, room * sizeof(*tasks));

			if (tasks) {
				t->cand_tasks = tasks;
				t->cand_room = room;
			}
		}
		if (t->cand_room != room)
			err = -ENOMEM;
	}
	if (!err) {
		RELEASE(&task->tree_, t);
		RELEASE(&task->group_, g);
		task->prev_ = NULL;
		task->next_ = g->tasks;
		if (g->tasks)
			g->tasks->prev_ = task;
		g->tasks = task;
		t->nr_tasks++;
	}
	pthread_rwlock_unlock(&t->structure);
	pthread_mutex_unlock(&t->oom_lock);
	return err;
}

/* Caller holds oom_lock and the structure lock for writing. */
void memcg_unlink_task(struct tally_memcg_task *task)
{
	struct tally_memcg *g = task->group_;

	if (task->prev_)
		task->prev_->next_ = task->next_;
	else
		g->tasks = task->next_;
	if (task->next_)
		task->next_->prev_ = task->prev_;
	STORE(&task->group_, NULL);
	task->next_ = task->prev_ = NULL;
	g->tree->nr_tasks--;
	if (g->tree->killing == task) {
		/* Never read again: the callback may free it now. */
		g->tree->killing = NULL;
		g->tree->killing_group = NULL;
		pthread_cond_broadcast(&g->tree->kill_done);
	}
}

int tally_memcg_task_detach(struct tally_memcg_task *task)
{
	struct tally_memcg_tree *t;
	int err = 0;

	/* The tree, unlike the group, outlives every attach. */
	if (!task || !ACQUIRE(&task->group_))
		return -EINVAL;
	t = ACQUIRE(&task->tree_);
	pthread_mutex_lock(&t->oom_lock);
	/* Another thread's kill callback has it as victim: let it finish. */
	while (killed_by_another(t) && t->killing == task)
		pthread_cond_wait(&t->kill_done, &t->oom_lock);
	pthread_rwlock_wrlock(&t->structure);
	if (task->group_)
		memcg_unlink_task(task);
	else
		err = -EINVAL;	/* detached meanwhile */
	pthread_rwlock_unlock(&t->structure);
	pthread_mutex_unlock(&t->oom_lock);
	return err;
}

