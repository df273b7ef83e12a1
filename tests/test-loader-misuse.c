/*
 * The loader against a caller's mistakes that once cost another batch's
 * bytes or hung the caller: a batch released twice, late, after its slot
 * went out again; a loader used from a process forked after its open.
 * Each is refused at once and leaves the batches held, and the opener's
 * loader, as they were.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wharf/loader.h>

#include "fixture.h"

#define REC 64	 /* bytes per record */
#define NREC 400 /* records in the shard */
#define BATCH 10
#define SEED 11

static char *root, *shard, *rec_idx;
static wharf_index *recs;

static wharf_loader *open_records(uint32_t workers, uint32_t prefetch,
				  uint32_t held)
{
	struct wharf_options o;
	wharf_options_init(&o);
	o.batch_size = BATCH;
	o.num_workers = workers;
	o.prefetch = prefetch;
	o.held = held;
	/* A parent left waiting fails the test instead of hanging it. */
	o.timeout_ms = 60000;
	wharf_loader *l;
	int rc = wharf_loader_open(recs, &o, &l);
	ck_assert_msg(rc == 0, "open: %d %s", rc, wharf_last_error());
	return l;
}

/* The batch holds records index * BATCH.. of the shard, byte for byte. */
static void assert_batch(const struct wharf_batch *b, uint64_t index)
{
	ck_assert_uint_eq(b->index, index);
	ck_assert_uint_eq(b->count, BATCH);
	const unsigned char *d = b->data;
	for (uint32_t k = 0; k < b->count; k++) {
		const uint64_t id = index * BATCH + k;
		ck_assert_uint_eq(b->samples[k], id);
		for (uint32_t j = 0; j < REC; j++)
			ck_assert_msg(d[k * REC + j] ==
					  fx_byte(SEED, id * REC + j),
				      "batch %llu, sample %llu: byte %u is "
				      "another batch's",
				      (unsigned long long)index,
				      (unsigned long long)id, j);
	}
}

/*
 * Without workers the caller fills the lowest free slot, so the slot a
 * release frees is the next batch's.  A batch released twice, with that
 * slot handed out again in between, must not free the batch now in it:
 * neither through the pointer it was handed out as (the loader's views
 * alternate, so the pointer still shows its own generation) nor through a
 * copy of it kept for a late release (as the Python binding's lease
 * does).
 */
START_TEST(stale_release_refused)
{
	wharf_loader *l = open_records(0, 1, 1);
	const struct wharf_batch *a, *b, *c;
	ck_assert_int_eq(wharf_loader_next(l, &a), 0);
	assert_batch(a, 0);
	const struct wharf_batch kept = *a;
	ck_assert_int_eq(wharf_loader_release(l, a), 0);

	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->slot, kept.slot);
	/* The pointer again, and the copy, twice each: refused. */
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(wharf_loader_release(l, a), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), "released already"),
			      "message: %s", wharf_last_error());
		ck_assert_int_eq(wharf_loader_release(l, &kept), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), "generation 1"),
			      "message: %s", wharf_last_error());
	}
	/* Had the slot gone back, batch 2 would be read into it now. */
	ck_assert_int_eq(wharf_loader_next(l, &c), 0);
	ck_assert_uint_ne(c->slot, b->slot);
	assert_batch(b, 1);
	assert_batch(c, 2);
	ck_assert_uint_eq(kept.generation, 1);
	ck_assert_uint_eq(b->generation, 2);
	/* A copy of a batch held is its batch: it releases it, once. */
	const struct wharf_batch copy = *b;
	ck_assert_int_eq(wharf_loader_release(l, &copy), 0);
	ck_assert_int_eq(wharf_loader_release(l, b), -EINVAL);
	ck_assert_int_eq(wharf_loader_release(l, c), 0);
	wharf_loader_close(l);
}
END_TEST

/* A struct that no hand-out of this loader made is refused as foreign. */
START_TEST(foreign_batch_refused)
{
	wharf_loader *l = open_records(0, 1, 0);
	wharf_loader *m = open_records(0, 1, 0);
	const struct wharf_batch *a, *b;
	ck_assert_int_eq(wharf_loader_next(l, &a), 0);
	ck_assert_int_eq(wharf_loader_next(m, &b), 0);
	/* Same slot, same generation, another loader's ring. */
	ck_assert_uint_eq(a->slot, b->slot);
	ck_assert_uint_eq(a->generation, b->generation);
	ck_assert_int_eq(wharf_loader_release(l, b), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "not a batch this loader"),
		      "message: %s", wharf_last_error());
	assert_batch(a, 0);
	ck_assert_int_eq(wharf_loader_release(l, a), 0);
	ck_assert_int_eq(wharf_loader_release(m, b), 0);
	wharf_loader_close(m);
	wharf_loader_close(l);
}
END_TEST

/* What the forked child found, as bits of its exit status. */
enum {
	CHILD_NEXT = 1,	    /* next was not refused with -EPERM */
	CHILD_MESSAGE = 2,  /* the message does not name the opener and fix */
	CHILD_RELEASE = 4,  /* release of the parent's batch not refused */
	CHILD_EPOCH = 8,    /* set_epoch not refused */
	CHILD_STATE = 16,   /* state_save not refused */
	CHILD_GOT = 32,	    /* next handed out a batch */
	CHILD_TIMEOUT = 64, /* a call blocked (alarm) */
};

static void child_alarm(int sig)
{
	(void)sig;
	_exit(CHILD_TIMEOUT);
}

/* In the child: every call on the parent's loader, then its close. */
static int child_uses(wharf_loader *l, const struct wharf_batch *held,
		      pid_t parent)
{
	int bad = 0;
	char want[64];
	signal(SIGALRM, child_alarm);
	alarm(30);
	const struct wharf_batch *b = NULL;
	int rc = wharf_loader_next(l, &b);
	bad |= rc != -EPERM ? CHILD_NEXT : 0;
	bad |= b ? CHILD_GOT : 0;
	snprintf(want, sizeof(want), "opened in process %d;", (int)parent);
	const char *e = wharf_last_error();
	if (!strstr(e, want) || !strstr(e, "open one in each process") ||
	    !strstr(e, "not before the fork"))
		bad |= CHILD_MESSAGE;
	bad |= wharf_loader_release(l, held) != -EPERM ? CHILD_RELEASE : 0;
	bad |= wharf_loader_set_epoch(l, 3) != -EPERM ? CHILD_EPOCH : 0;
	struct wharf_state st;
	bad |= wharf_loader_state_save(l, &st) != -EPERM ? CHILD_STATE : 0;
	/* Neither may end the parent's workers or unmap its ring. */
	wharf_loader_stop(l);
	wharf_loader_close(l);
	return bad;
}

/*
 * A child forked after the open is refused at once, whatever it calls,
 * and its stop and close free only its copy: the parent's held batch stays
 * intact, and the parent gets every batch of the epoch, in order, with
 * no wait that would have ended in its timeout.
 */
START_TEST(forked_child_refused)
{
	/* _i: workers 2 (batches flow through their channels), 0 */
	const uint32_t workers = _i ? 0 : 2;
	wharf_loader *l = open_records(workers, 2, 1);
	const struct wharf_batch *held, *b;
	ck_assert_int_eq(wharf_loader_next(l, &held), 0);
	fflush(NULL);
	const pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child_uses(l, held, parent));
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "child: status %#x (bits: 1 next not refused, 2 "
		      "message, 4 release, 8 set_epoch, 16 state_save, 32 got "
		      "a batch, 64 blocked)",
		      WIFEXITED(st) ? WEXITSTATUS(st) : st);
	/* The parent goes on as if nothing had happened. */
	assert_batch(held, 0);
	uint64_t next = 1;
	int rc;
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		assert_batch(b, next++);
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_msg(rc == WHARF_END, "parent: next %d: %s", rc,
		      wharf_loader_error(l));
	ck_assert_uint_eq(next, NREC / BATCH);
	assert_batch(held, 0);
	ck_assert_int_eq(wharf_loader_release(l, held), 0);
	/* And the next epoch too: its workers were left alone. */
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	assert_batch(b, 0);
	wharf_loader_close(l);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("loader-misuse");
	TCase *tc = tcase_create("misuse");
	tcase_add_test(tc, stale_release_refused);
	tcase_add_test(tc, foreign_batch_refused);
	tcase_add_loop_test(tc, forked_child_refused, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	root = fx_tmpdir("misuse");
	if (asprintf(&shard, "%s/shard", root) < 0 ||
	    asprintf(&rec_idx, "%s/rec.idx", root) < 0)
		abort();
	if (fx_write_file(shard, (uint64_t)NREC * REC, SEED))
		return 1;
	const char *files[] = {shard};
	if (wharf_index_build_records(REC, files, 1, rec_idx) ||
	    wharf_index_open(rec_idx, 0, &recs)) {
		fprintf(stderr, "%s\n", wharf_last_error());
		return 1;
	}
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	wharf_index_close(recs);
	fx_rmtree(root);
	free(root);
	free(shard);
	free(rec_idx);
	return failed ? 1 : 0;
}
