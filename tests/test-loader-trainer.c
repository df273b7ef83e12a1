/*
 * The loader as a C trainer drives it (issue 49): a profiler's timer
 * signals while it waits, calls on a closed loader and NULL arguments,
 * loops that never call set_epoch, a stopped worker, a loader opened on a
 * thread that exits, and the small contracts (version string, the state's
 * size field, a sample larger than its slot).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <wharf/decode.h>
#include <wharf/loader.h>

#include "fixture.h"

#define REC 64	 /* bytes per record */
#define NREC 400 /* records in the shard */
#define BATCH 10
#define NBATCH (NREC / BATCH)
#define SEED 23

static char *root, *shard, *rec_idx;
static wharf_index *recs;

static void options(struct wharf_options *o, uint32_t workers)
{
	wharf_options_init(o);
	o->batch_size = BATCH;
	o->num_workers = workers;
	o->shuffle = 1;
}

static wharf_loader *open_with(const struct wharf_options *o)
{
	wharf_loader *l = NULL;
	int rc = wharf_loader_open(recs, o, &l);
	ck_assert_msg(rc == 0, "open: %d %s", rc, wharf_last_error());
	return l;
}

/* Reads one whole epoch: every record exactly once, the batches' bytes
 * the records' own.  Returns the epoch the batches carried. */
static uint64_t read_epoch(wharf_loader *l)
{
	static unsigned char seen[NREC];
	const struct wharf_batch *b;
	uint64_t epoch = UINT64_MAX;
	int rc;
	memset(seen, 0, sizeof(seen));
	for (int n = 0; (rc = wharf_loader_next(l, &b)) == 0; n++) {
		ck_assert_msg(n < NBATCH, "more than %d batches", NBATCH);
		epoch = b->epoch;
		const unsigned char *d = b->data;
		for (uint32_t k = 0; k < b->count; k++) {
			const uint64_t id = b->samples[k];
			ck_assert_uint_lt(id, NREC);
			ck_assert_msg(!seen[id]++, "sample %llu twice",
				      (unsigned long long)id);
			ck_assert_msg(d[k * REC] == fx_byte(SEED, id * REC),
				      "sample %llu: wrong bytes",
				      (unsigned long long)id);
		}
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_msg(rc == WHARF_END, "next: %d (%s)", rc, wharf_last_error());
	for (uint32_t id = 0; id < NREC; id++)
		ck_assert_msg(seen[id] == 1, "sample %u missing", id);
	return epoch;
}

/* A slow transform, so that the caller waits in next most of the time. */
static int slow_copy(void *user, uint64_t sample, const void *in, uint64_t len,
		     void *out, uint64_t cap, uint64_t *out_len)
{
	(void)user;
	(void)sample;
	if (len > cap)
		return -EMSGSIZE;
	struct timespec ts = {0, 300 * 1000};
	nanosleep(&ts, NULL);
	memcpy(out, in, len);
	*out_len = len;
	return 0;
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/*
 * A 200 us SIGALRM timer (a profiler's) while three epochs are read, the
 * handler installed with and without SA_RESTART (_i): the handler runs,
 * and next neither returns -EINTR nor ends an epoch early.
 */
START_TEST(timer_signals_do_not_end_epochs)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = _i ? SA_RESTART : 0;
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	struct wharf_options o;
	options(&o, 2);
	o.sample_fn = slow_copy;
	wharf_loader *l = open_with(&o);
	alarms = 0;
	const struct itimerval every = {{0, 200}, {0, 200}};
	ck_assert_int_eq(setitimer(ITIMER_REAL, &every, NULL), 0);
	for (uint64_t e = 0; e < 3; e++) {
		ck_assert_int_eq(wharf_loader_set_epoch(l, e), 0);
		ck_assert_uint_eq(read_epoch(l), e);
	}
	const struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	/* The timer did fire: the test tried what it claims. */
	ck_assert_int_gt(alarms, 0);
	wharf_loader_close(l);
}
END_TEST

/* Interruptible on request: -EINTR, and the next call goes on. */
START_TEST(interruptible_option_returns_eintr)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	struct wharf_options o;
	options(&o, 1);
	o.sample_fn = slow_copy;
	o.interruptible = 1;
	wharf_loader *l = open_with(&o);
	const struct itimerval every = {{0, 200}, {0, 200}};
	ck_assert_int_eq(setitimer(ITIMER_REAL, &every, NULL), 0);
	int eintr = 0, got = 0, rc;
	const struct wharf_batch *b;
	while ((rc = wharf_loader_next(l, &b)) != WHARF_END) {
		if (rc == -EINTR) {
			eintr++;
			continue;
		}
		ck_assert_msg(rc == 0, "next: %d %s", rc, wharf_last_error());
		got++;
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	const struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	ck_assert_int_eq(got, NBATCH);
	ck_assert_int_gt(eintr, 0);
	wharf_loader_close(l);
}
END_TEST

/*
 * Every call on a closed loader is refused with -EBADF and a message
 * (under ASan: no read of freed memory), close again is a no-op, and NULL
 * arguments are refused with their names.
 */
START_TEST(closed_loader_and_null_refused)
{
	struct wharf_options o;
	options(&o, _i ? 2 : 0);
	wharf_loader *l = open_with(&o);
	const struct wharf_batch *b;
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	const struct wharf_batch kept = *b;
	wharf_loader_close(l);

	ck_assert_int_eq(wharf_loader_next(l, &b), -EBADF);
	ck_assert_ptr_null(b);
	ck_assert_msg(strstr(wharf_last_error(), "was closed"), "message: %s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_loader_release(l, &kept), -EBADF);
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), -EBADF);
	struct wharf_state st = {.size = sizeof(st)};
	ck_assert_int_eq(wharf_loader_state_save(l, &st), -EBADF);
	ck_assert_int_eq(wharf_loader_state_restore(l, &st), -EBADF);
	struct wharf_stats stats = {.size = sizeof(stats)};
	ck_assert_int_eq(wharf_loader_stats(l, &stats), -EBADF);
	ck_assert_uint_eq(wharf_loader_num_batches(l), 0);
	ck_assert_uint_eq(wharf_loader_worker_busy_ns(l, 0), 0);
	ck_assert_str_eq(wharf_loader_error(l), "the loader was closed");
	wharf_loader_stop(l);
	wharf_loader_close(l);

	/* NULL, everywhere. */
	ck_assert_int_eq(wharf_loader_next(NULL, &b), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "NULL"), "message: %s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_loader_release(NULL, &kept), -EINVAL);
	ck_assert_int_eq(wharf_loader_set_epoch(NULL, 0), -EINVAL);
	ck_assert_int_eq(wharf_loader_state_save(NULL, &st), -EINVAL);
	ck_assert_int_eq(wharf_loader_stats(NULL, &stats), -EINVAL);
	ck_assert_uint_eq(wharf_loader_num_batches(NULL), 0);
	wharf_loader_stop(NULL);
	wharf_loader_close(NULL);
	ck_assert_int_eq(wharf_loader_open(recs, &o, NULL), -EINVAL);
	l = open_with(&o);
	ck_assert_int_eq(wharf_loader_next(l, NULL), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "NULL batch"), "message: %s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_loader_state_save(l, NULL), -EINVAL);
	ck_assert_int_eq(wharf_loader_state_restore(l, NULL), -EINVAL);
	ck_assert_int_eq(wharf_loader_stats(l, NULL), -EINVAL);
	/* ... and the loader is none the worse for them. */
	ck_assert_uint_eq(read_epoch(l), 0);
	wharf_loader_close(l);

	wharf_index *idx = (wharf_index *)1;
	ck_assert_int_eq(wharf_index_open(rec_idx, 0, NULL), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "wharf_index_open: NULL out"),
		      "message: %s", wharf_last_error());
	ck_assert_int_eq(wharf_index_open(NULL, 0, &idx), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "NULL path"), "message: %s",
		      wharf_last_error());
	ck_assert_ptr_eq(idx, (wharf_index *)1);
	ck_assert_uint_eq(wharf_index_count(NULL), 0);
	struct wharf_sample smp;
	ck_assert_int_eq(wharf_index_sample(NULL, 0, &smp), -EINVAL);
	ck_assert_int_eq(wharf_index_sample(recs, 0, NULL), -EINVAL);
	struct wharf_index_info info = {.size = sizeof(info)};
	ck_assert_int_eq(wharf_index_info(NULL, &info), -EINVAL);
	ck_assert_int_eq(wharf_index_verify(NULL), -EINVAL);
	ck_assert_int_eq(wharf_index_path(NULL, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(wharf_index_build_dir(NULL, rec_idx), -EINVAL);
	ck_assert_int_eq(wharf_index_build_records(REC, NULL, 1, rec_idx),
			 -EINVAL);
	ck_assert_int_eq(wharf_index_builder_new(rec_idx, NULL, NULL), -EINVAL);
	ck_assert_int_eq(wharf_index_builder_finish(NULL), -EINVAL);
	ck_assert_int_eq(wharf_index_builder_add(NULL, shard, 0, 1, -1),
			 -EINVAL);
	ck_assert_int_eq(wharf_index_build_tar(NULL, 1, NULL, rec_idx),
			 -EINVAL);
	wharf_tar_options_init(NULL);
	ck_assert_msg(strstr(wharf_last_error(), "NULL options"), "message: %s",
		      wharf_last_error());
	wharf_options_init(NULL);
	ck_assert_msg(strstr(wharf_last_error(), "wharf_options_init: NULL"),
		      "message: %s", wharf_last_error());
	ck_assert_int_eq(wharf_decoder_new("u8", NULL), -EINVAL);
	ck_assert_int_eq(wharf_decoder_apply(NULL, &o), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "NULL decoder"), "message: %s",
		      wharf_last_error());
	ck_assert_uint_eq(wharf_decoder_sample_bytes(NULL), 0);
	uint32_t r, w;
	ck_assert_int_eq(wharf_rank_world(0, 1, NULL, &w), -EINVAL);
	ck_assert_int_eq(wharf_rank_world(0, 1, &r, &w), 0);
}
END_TEST

/*
 * A loop that never calls set_epoch: by default each pass after WHARF_END
 * is the next epoch (as in Python); with WHARF_EPOCH_EXPLICIT, next after
 * WHARF_END is refused, naming the call to make.  Never a silent
 * WHARF_END again.
 */
START_TEST(next_after_end_is_next_epoch_or_refused)
{
	struct wharf_options o;
	options(&o, _i ? 2 : 0);
	wharf_loader *l = open_with(&o);
	for (uint64_t e = 0; e < 3; e++)
		ck_assert_uint_eq(read_epoch(l), e);
	struct wharf_state st = {.size = sizeof(st)};
	ck_assert_int_eq(wharf_loader_state_save(l, &st), 0);
	ck_assert_uint_eq(st.epoch, 2);
	/* A set_epoch after END still decides. */
	ck_assert_int_eq(wharf_loader_set_epoch(l, 7), 0);
	ck_assert_uint_eq(read_epoch(l), 7);
	wharf_loader_close(l);

	o.epoch_end = WHARF_EPOCH_EXPLICIT;
	l = open_with(&o);
	ck_assert_uint_eq(read_epoch(l), 0);
	const struct wharf_batch *b;
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(wharf_loader_next(l, &b), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(),
				     "call wharf_loader_set_epoch(loader, 1)"),
			      "message: %s", wharf_last_error());
	}
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	ck_assert_uint_eq(read_epoch(l), 1);
	wharf_loader_close(l);
}
END_TEST

/* Worker pids, written by worker_init in each worker. */
static pid_t *worker_pids;

static int note_pid(void *user, uint32_t worker)
{
	(void)user;
	worker_pids[worker] = getpid();
	return 0;
}

#define STOP_AT 123 /* the sample whose worker stops itself */

static int stop_at(void *user, uint64_t sample, const void *in, uint64_t len,
		   void *out, uint64_t cap, uint64_t *out_len)
{
	(void)user;
	if (sample == STOP_AT)
		raise(SIGSTOP);
	if (len > cap)
		return -EMSGSIZE;
	memcpy(out, in, len);
	*out_len = len;
	return 0;
}

/*
 * The default timeout is finite, and a stopped worker fails next with
 * -ETIMEDOUT naming the worker, its pid and the sample it is stuck on;
 * close reaps it.
 */
START_TEST(stopped_worker_named_by_timeout)
{
	struct wharf_options o;
	wharf_options_init(&o);
	ck_assert_uint_gt(o.timeout_ms, 0);
	ck_assert_uint_le(o.timeout_ms, 600000);
	options(&o, 2);
	o.shuffle = 0;
	o.timeout_ms = 500;
	o.sample_fn = stop_at;
	o.worker_init = note_pid;
	worker_pids = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(worker_pids, MAP_FAILED);
	wharf_loader *l = open_with(&o);
	const struct wharf_batch *b;
	int rc;
	while ((rc = wharf_loader_next(l, &b)) == 0)
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	ck_assert_msg(rc == -ETIMEDOUT, "next: %d %s", rc, wharf_last_error());
	const char *e = wharf_loader_error(l);
	char want[96];
	int found = 0;
	for (uint32_t w = 0; w < 2; w++) {
		snprintf(want, sizeof(want), "worker %u (pid %d)", w,
			 (int)worker_pids[w]);
		found += strstr(e, want) != NULL;
	}
	ck_assert_msg(found == 1, "no worker and pid named: %s", e);
	snprintf(want, sizeof(want), "sample %d ", STOP_AT);
	ck_assert_msg(strstr(e, want), "sample not named: %s", e);
	wharf_loader_close(l);
	munmap(worker_pids, 4096);
}
END_TEST

static void *open_and_exit(void *arg)
{
	const struct wharf_options *o = arg;
	wharf_loader *l = NULL;
	int rc = wharf_loader_open(recs, o, &l);
	if (rc)
		fprintf(stderr, "open: %s\n", wharf_last_error());
	return l;
}

/*
 * A loader opened on a thread that then exits keeps its workers: the
 * parent-death signal follows the thread, not the process.
 */
START_TEST(workers_outlive_the_opening_thread)
{
	struct wharf_options o;
	options(&o, 2);
	pthread_t t;
	void *ret = NULL;
	ck_assert_int_eq(pthread_create(&t, NULL, open_and_exit, &o), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	wharf_loader *l = ret;
	ck_assert_ptr_nonnull(l);
	/* Three epochs: time enough for a killed worker to show. */
	for (uint64_t e = 0; e < 3; e++)
		ck_assert_uint_eq(read_epoch(l), e);
	wharf_loader_close(l);
}
END_TEST

/* The small contracts: the version string, the state's size field, a
 * sample larger than its slot. */
START_TEST(version_state_size_and_big_sample)
{
	char want[32];
	snprintf(want, sizeof(want), "%d.%d.%d", WHARF_VERSION_MAJOR,
		 WHARF_VERSION_MINOR, WHARF_VERSION_PATCH);
	ck_assert_str_eq(wharf_version(), want);
	ck_assert_str_eq(wharf_version(), WHARF_VERSION_STRING);
	ck_assert_str_eq(wharf_version(), PACKAGE_VERSION);

	struct wharf_options o;
	options(&o, 0);
	wharf_loader *l = open_with(&o);
	/* A caller built when the state ended before flags. */
	union {
		struct wharf_state st;
		unsigned char bytes[sizeof(struct wharf_state) + 8];
	} u;
	memset(&u, 0xa5, sizeof(u));
	const size_t small = offsetof(struct wharf_state, flags);
	u.st.size = (uint32_t)small;
	ck_assert_int_eq(wharf_loader_state_save(l, &u.st), 0);
	ck_assert_uint_eq(u.st.size, small);
	ck_assert_uint_eq(u.st.batch_size, BATCH);
	for (size_t k = small; k < sizeof(u); k++)
		ck_assert_msg(u.bytes[k] == 0xa5,
			      "state_save wrote byte %zu past size %zu", k,
			      small);
	wharf_loader_close(l);

	/* Samples of 16 and 64 bytes in slots of 40: the second does not
	 * fit, a distinct error, not the -ENOBUFS of "release some". */
	char *var_idx;
	ck_assert_int_ge(asprintf(&var_idx, "%s/var.idx", root), 0);
	wharf_index_builder *bld;
	ck_assert_int_eq(wharf_index_builder_new(var_idx, NULL, &bld), 0);
	ck_assert_int_eq(wharf_index_builder_add(bld, shard, 0, 16, -1), 0);
	ck_assert_int_eq(wharf_index_builder_add(bld, shard, 16, 64, -1), 0);
	ck_assert_int_eq(wharf_index_builder_finish(bld), 0);
	wharf_index_builder_free(bld);
	wharf_index *var;
	ck_assert_int_eq(wharf_index_open(var_idx, 0, &var), 0);
	wharf_options_init(&o);
	o.batch_size = 1;
	o.num_workers = _i ? 1 : 0;
	o.slot_bytes = 40;
	ck_assert_int_eq(wharf_loader_open(var, &o, &l), 0);
	const struct wharf_batch *b;
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->bytes, 16);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	int rc = wharf_loader_next(l, &b);
	ck_assert_msg(rc == -EMSGSIZE, "next: %d %s", rc, wharf_last_error());
	ck_assert_msg(strstr(wharf_last_error(), "raise slot_bytes") &&
			  strstr(wharf_last_error(), "sample 1 ") &&
			  strstr(wharf_last_error(), "64 bytes, 40 left"),
		      "message: %s", wharf_last_error());
	wharf_loader_close(l);
	wharf_index_close(var);
	free(var_idx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("loader-trainer");
	TCase *tc = tcase_create("trainer");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, timer_signals_do_not_end_epochs, 0, 2);
	tcase_add_test(tc, interruptible_option_returns_eintr);
	tcase_add_loop_test(tc, closed_loader_and_null_refused, 0, 2);
	tcase_add_loop_test(tc, next_after_end_is_next_epoch_or_refused, 0, 2);
	tcase_add_test(tc, stopped_worker_named_by_timeout);
	tcase_add_test(tc, workers_outlive_the_opening_thread);
	tcase_add_loop_test(tc, version_state_size_and_big_sample, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	root = fx_tmpdir("trainer");
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
