/*
 * The loader end to end with real forked workers: order, bytes, resume,
 * failures named, a small /dev/shm refused at open, nothing left behind.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wharf/decode.h>
#include <wharf/loader.h>
#include <wharf/log.h>

#include "fixture.h"
#include "loader_i.h"

#define REC 96	  /* bytes per record */
#define NREC 1000 /* records in the shard */
#define SEED 7

static char *root, *shard, *rec_idx, *dir_idx, *dir_root;
static wharf_index *recs, *dirs;

static void open_loader(const wharf_index *idx, struct wharf_options *o,
			wharf_loader **l)
{
	int rc = wharf_loader_open(idx, o, l);
	ck_assert_msg(rc == 0, "open: %d %s", rc, wharf_last_error());
}

/* Every batch of one epoch: sample ids in order, and bytes checked against
 * the file (records: the shard at id * REC). */
struct run {
	uint64_t n;	  /* samples */
	uint64_t nb;	  /* batches */
	uint64_t *ids;	  /* in the order returned */
	uint64_t *bindex; /* batch index of each returned batch */
	uint32_t *bcount; /* its count */
};

static void run_free(struct run *r)
{
	free(r->ids);
	free(r->bindex);
	free(r->bcount);
	memset(r, 0, sizeof(*r));
}

static void check_record(const struct wharf_batch *b, uint32_t k, const void *p)
{
	const unsigned char *d = p;
	uint64_t id = b->samples[k];
	for (uint32_t j = 0; j < REC; j++)
		ck_assert_msg(d[j] == fx_byte(SEED, id * REC + j),
			      "sample %llu byte %u differs",
			      (unsigned long long)id, j);
}

/* Reads up to max batches (UINT64_MAX: to the end) into r. */
static int take(wharf_loader *l, struct run *r, uint64_t max)
{
	const struct wharf_batch *b;
	int rc = 0;
	for (uint64_t i = 0; i < max; i++) {
		rc = wharf_loader_next(l, &b);
		if (rc)
			break;
		r->ids = realloc(r->ids, (r->n + b->count) * sizeof(*r->ids));
		r->bindex = realloc(r->bindex, (r->nb + 1) * sizeof(uint64_t));
		r->bcount = realloc(r->bcount, (r->nb + 1) * sizeof(uint32_t));
		r->bindex[r->nb] = b->index;
		r->bcount[r->nb] = b->count;
		r->nb++;
		for (uint32_t k = 0; k < b->count; k++) {
			r->ids[r->n++] = b->samples[k];
			if (b->sample_size == REC)
				check_record(b, k,
					     (const char *)b->data + k * REC);
		}
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	return rc;
}

/* Reads and releases batches until next fails or the epoch ends. */
static int drain(wharf_loader *l)
{
	const struct wharf_batch *b;
	int rc;
	while ((rc = wharf_loader_next(l, &b)) == 0)
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	return rc;
}

/* Options most tests start from. */
static void opts(struct wharf_options *o, uint32_t batch, uint32_t workers)
{
	wharf_options_init(o);
	o->batch_size = batch;
	o->num_workers = workers;
}

START_TEST(in_order_equals_sequential)
{
	/* _i: num_workers 0..3 */
	struct wharf_options o;
	opts(&o, 7, (uint32_t)_i);
	o.prefetch = 2;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	ck_assert_uint_eq(wharf_loader_num_batches(l), (NREC + 6) / 7);
	/* The concatenated batches are the shard's bytes, in order. */
	size_t len;
	unsigned char *want = fx_read_file(shard, &len);
	uint64_t pos = 0, nb = 0;
	const struct wharf_batch *b;
	int rc;
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		ck_assert_uint_eq(b->index, nb);
		ck_assert_uint_eq(b->sample_size, REC);
		ck_assert_ptr_null(b->offsets);
		ck_assert_uint_eq(b->bytes, (uint64_t)b->count * REC);
		ck_assert_int_eq(memcmp(b->data, want + pos, b->bytes), 0);
		for (uint32_t k = 0; k < b->count; k++)
			ck_assert_uint_eq(b->samples[k], pos / REC + k);
		pos += b->bytes;
		nb++;
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
		ck_assert_int_eq(wharf_loader_release(l, b), -EINVAL);
	}
	ck_assert_int_eq(rc, WHARF_END);
	ck_assert_uint_eq(pos, (uint64_t)NREC * REC);
	struct wharf_stats st = {.size = sizeof(st)};
	ck_assert_int_eq(wharf_loader_stats(l, &st), 0);
	ck_assert_uint_eq(st.batches, nb);
	ck_assert_uint_eq(st.samples, NREC);
	ck_assert_uint_eq(st.bytes, (uint64_t)NREC * REC);
	ck_assert_uint_eq(st.read_bytes, (uint64_t)NREC * REC);
	/* Adjacent records of one file were merged: one pread per batch. */
	ck_assert_uint_eq(st.preads, nb);
	/* Called again after WHARF_END: epoch 1, from its first batch. */
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->epoch, 1);
	ck_assert_uint_eq(b->index, 0);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	free(want);
	wharf_loader_close(l);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

START_TEST(out_of_order_same_multiset)
{
	struct wharf_options o;
	opts(&o, 10, 3);
	o.prefetch = 3;
	o.shuffle = 1;
	o.seed = 42;
	struct run a = {0}, b = {0};
	wharf_loader *l;
	open_loader(recs, &o, &l);
	ck_assert_int_eq(take(l, &a, UINT64_MAX), WHARF_END);
	wharf_loader_close(l);
	o.in_order = 0;
	open_loader(recs, &o, &l);
	ck_assert_int_eq(take(l, &b, UINT64_MAX), WHARF_END);
	wharf_loader_close(l);
	ck_assert_uint_eq(a.n, NREC);
	ck_assert_uint_eq(b.n, NREC);
	/* Shuffled: not the identity. */
	uint64_t moved = 0;
	for (uint64_t i = 0; i < a.n; i++)
		moved += a.ids[i] != i;
	ck_assert_uint_gt(moved, NREC / 2);
	/* Each batch index holds the same samples either way. */
	for (uint64_t i = 0; i < b.nb; i++) {
		uint64_t bi = b.bindex[i], start = 0;
		for (uint64_t j = 0; j < i; j++)
			start += b.bcount[j];
		ck_assert_uint_eq(b.bcount[i], a.bcount[bi]);
		ck_assert_int_eq(
		    memcmp(b.ids + start, a.ids + bi * 10, b.bcount[i] * 8), 0);
	}
	qsort(a.ids, a.n, 8, cmp_u64);
	qsort(b.ids, b.n, 8, cmp_u64);
	for (uint64_t i = 0; i < NREC; i++) {
		ck_assert_uint_eq(a.ids[i], i);
		ck_assert_uint_eq(b.ids[i], i);
	}
	run_free(&a);
	run_free(&b);
}
END_TEST

START_TEST(variable_size_and_labels)
{
	struct wharf_options o;
	opts(&o, 4, 2);
	wharf_loader *l;
	open_loader(dirs, &o, &l);
	const struct wharf_batch *b;
	uint64_t seen = 0;
	while (wharf_loader_next(l, &b) == 0) {
		ck_assert_uint_eq(b->sample_size, 0);
		ck_assert_ptr_nonnull(b->offsets);
		ck_assert_uint_eq(b->offsets[0], 0);
		ck_assert_uint_eq(b->offsets[b->count], b->bytes);
		for (uint32_t k = 0; k < b->count; k++) {
			struct wharf_sample s;
			char path[4096];
			ck_assert_int_eq(
			    wharf_index_sample(dirs, b->samples[k], &s), 0);
			ck_assert_int_eq(b->labels[k], s.label);
			ck_assert_int_gt(
			    wharf_index_path(dirs, s.file, path, sizeof(path)),
			    0);
			size_t len;
			void *want = fx_read_file(path, &len);
			ck_assert_uint_eq(b->offsets[k + 1] - b->offsets[k],
					  len);
			ck_assert_int_eq(
			    memcmp((const char *)b->data + b->offsets[k], want,
				   len),
			    0);
			free(want);
			seen++;
		}
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_uint_eq(seen, wharf_index_count(dirs));
	wharf_loader_close(l);
}
END_TEST

/* Sample transform: the record's bytes reversed, then 4 bytes of its id. */
static int rev_fn(void *user, uint64_t sample, const void *in, uint64_t len,
		  void *out, uint64_t cap, uint64_t *out_len)
{
	const unsigned char *s = in;
	unsigned char *d = out;
	if (cap < len + 4)
		return -ENOBUFS;
	for (uint64_t i = 0; i < len; i++)
		d[i] = s[len - 1 - i];
	uint32_t id = (uint32_t)sample;
	memcpy(d + len, &id, 4);
	*out_len = len + 4;
	return 0;
}

/* Batch transform: the first byte of every sample becomes the count. */
static int count_fn(void *user, struct wharf_batch_rw *b)
{
	for (uint32_t k = 0; k < b->count; k++)
		((unsigned char *)b->data)[k * b->sample_size] =
		    (unsigned char)b->count;
	return 0;
}

START_TEST(transforms)
{
	struct wharf_options o;
	opts(&o, 8, 2);
	o.sample_bytes = REC + 4;
	o.sample_fn = rev_fn;
	o.batch_fn = count_fn;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	const struct wharf_batch *b;
	uint64_t n = 0;
	while (wharf_loader_next(l, &b) == 0) {
		ck_assert_uint_eq(b->sample_size, REC + 4);
		for (uint32_t k = 0; k < b->count; k++) {
			const unsigned char *d =
			    (const unsigned char *)b->data + k * (REC + 4);
			uint64_t id = b->samples[k];
			ck_assert_uint_eq(d[0], b->count);
			for (uint32_t j = 1; j < REC; j++)
				ck_assert_uint_eq(
				    d[j],
				    fx_byte(SEED, id * REC + REC - 1 - j));
			uint32_t got;
			memcpy(&got, d + REC, 4);
			ck_assert_uint_eq(got, id);
			n++;
		}
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_uint_eq(n, NREC);
	wharf_loader_close(l);
}
END_TEST

/* Token windows: two files of u32 tokens f * TOK_FILE + i, records of
 * TREC tokens; the second has a tail of 5 tokens the index leaves out. */
#define TW 7
#define TREC (TW + 1)
#define TOK_FILE 100000u
static const uint32_t tok_recs[2] = {40, 25};
#define TOK_SAMPLES 65
#define TOK_SPEC "tokens dtype=u32 window=7 out=same"
static wharf_index *toks;

static void tokens_index(void)
{
	char *idx, *f[2];

	for (int k = 0; k < 2; k++) {
		const uint32_t n = tok_recs[k] * TREC + (k ? 5 : 0);
		uint32_t *t = malloc(n * sizeof(*t));
		FILE *fp;

		if (asprintf(&f[k], "%s/tokens%d", root, k) < 0)
			abort();
		for (uint32_t i = 0; i < n; i++)
			t[i] = k * TOK_FILE + i;
		fp = fopen(f[k], "wb");
		ck_assert_ptr_nonnull(fp);
		ck_assert_uint_eq(fwrite(t, sizeof(*t), n, fp), n);
		fclose(fp);
		free(t);
	}
	if (asprintf(&idx, "%s/tokens.idx", root) < 0)
		abort();
	ck_assert_int_eq(wharf_index_build_records(TREC * 4,
						   (const char *const *)f, 2,
						   idx),
			 0);
	ck_assert_int_eq(wharf_index_open(idx, 0, &toks), 0);
	ck_assert_uint_eq(wharf_index_count(toks), TOK_SAMPLES);
	free(idx);
	free(f[0]);
	free(f[1]);
}

/* The windows of one epoch by sample id (2 TW tokens each) into out, with
 * spec: from the epoch's start, or from the state *from; up to `stop`
 * batches (then the state into *st), else to the end. */
static void windows_of(const char *spec, uint32_t workers, uint64_t seed,
		       uint64_t epoch, const struct wharf_state *from,
		       uint64_t stop, struct wharf_state *st, uint32_t *out)
{
	struct wharf_options o;
	const struct wharf_batch *b;
	wharf_decoder *d;
	wharf_loader *l;
	uint64_t i = 0;
	int rc = 0;

	ck_assert_int_eq(wharf_decoder_new(spec, &d), 0);
	opts(&o, 4, workers);
	o.shuffle = 1;
	o.seed = seed;
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	open_loader(toks, &o, &l);
	if (from)
		ck_assert_int_eq(wharf_loader_state_restore(l, from), 0);
	else
		ck_assert_int_eq(wharf_loader_set_epoch(l, epoch), 0);
	for (; i < stop && (rc = wharf_loader_next(l, &b)) == 0; i++) {
		for (uint32_t k = 0; k < b->count; k++)
			memcpy(out + b->samples[k] * 2 * TW,
			       (const uint32_t *)b->data + k * 2 * TW,
			       2 * TW * sizeof(*out));
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_msg(i == stop || rc == WHARF_END, "next: %d %s", rc,
		      wharf_loader_error(l));
	if (st)
		ck_assert_int_eq(wharf_loader_state_save(l, st), 0);
	wharf_loader_close(l);
	wharf_decoder_free(d);
}

/*
 * Checks one epoch's windows (each an input and its target moved by one,
 * inside its file's records) and marks the pairs of tokens they train in
 * pairs[f][i] (i: the first token's position).  @return the epoch's
 * shift: that of every window but the last of each file, which stays.
 */
static uint32_t check_windows(const uint32_t *w, char *pairs[2])
{
	uint32_t shift = UINT32_MAX;

	for (uint64_t id = 0; id < TOK_SAMPLES; id++) {
		const uint32_t *x = w + id * 2 * TW, *y = x + TW;
		const uint32_t f = id >= tok_recs[0];
		const uint32_t r = (uint32_t)id - (f ? tok_recs[0] : 0);
		const uint32_t start = x[0] - f * TOK_FILE;

		ck_assert_uint_eq(x[0] / TOK_FILE, f);
		for (int j = 0; j < TW; j++) {
			ck_assert_uint_eq(x[j], x[0] + j);
			ck_assert_uint_eq(y[j], x[j] + 1);
			pairs[f][start + j] = 1;
		}
		ck_assert_uint_ge(start, r * TREC);
		ck_assert_uint_le(start + TREC, tok_recs[f] * TREC);
		if (r + 1 == tok_recs[f]) {
			ck_assert_uint_eq(start, r * TREC);
			continue;
		}
		if (shift == UINT32_MAX)
			shift = start - r * TREC;
		ck_assert_uint_eq(start - r * TREC, shift);
	}
	return shift;
}

/* Moving windows: epoch 0 reads the records; each later epoch moves every
 * window (but each file's last) by one shift in 1..TW, a function of seed
 * and epoch only, resumed exactly; epochs 0 and 1 together train every
 * pair of tokens inside the records, which fixed windows never do. */
START_TEST(moving_windows)
{
	const size_t one = (size_t)TOK_SAMPLES * 2 * TW;
	uint32_t *w = calloc(one, sizeof(*w)), *v = calloc(one, sizeof(*v));
	char *pairs[2], *fixed[2];
	struct wharf_state st;
	uint32_t shifts[4];

	tokens_index();
	for (int f = 0; f < 2; f++) {
		pairs[f] = calloc(tok_recs[f] * TREC, 1);
		fixed[f] = calloc(tok_recs[f] * TREC, 1);
	}
	for (uint64_t e = 0; e < 4; e++) {
		windows_of(TOK_SPEC, 2, 11, e, NULL, UINT64_MAX, NULL, w);
		shifts[e] = check_windows(w, pairs);
		ck_assert_uint_le(shifts[e], TW);
		if (e == 0)
			ck_assert_uint_eq(shifts[e], 0);
		else
			ck_assert_uint_ge(shifts[e], 1);
		/* The same seed and epoch: the same windows, whatever the
		 * workers. */
		windows_of(TOK_SPEC " windows=moving", 0, 11, e, NULL,
			   UINT64_MAX, NULL, v);
		ck_assert_int_eq(memcmp(w, v, one * sizeof(*w)), 0);
		/* windows=fixed: the records, every epoch. */
		windows_of(TOK_SPEC " windows=fixed", 1, 11, e, NULL,
			   UINT64_MAX, NULL, v);
		ck_assert_uint_eq(check_windows(v, fixed), 0);
		if (e == 1)
			for (int f = 0; f < 2; f++)
				for (uint32_t i = 0; i + 1 < tok_recs[f] * TREC;
				     i++)
					ck_assert_msg(pairs[f][i],
						      "file %d: pair at %u "
						      "untrained",
						      f, i);
	}
	ck_assert_msg(shifts[1] != shifts[2] || shifts[2] != shifts[3],
		      "the shift is the same in epochs 1 to 3");
	/* Fixed windows never train the pair across a record boundary. */
	for (int f = 0; f < 2; f++)
		for (uint32_t r = 1; r < tok_recs[f]; r++)
			ck_assert(!fixed[f][r * TREC - 1]);
	/* Epoch 3 cut after 5 batches and resumed by another loader: the
	 * same windows as in one go. */
	windows_of(TOK_SPEC, 2, 11, 3, NULL, UINT64_MAX, NULL, w);
	memset(v, 0, one * sizeof(*v));
	windows_of(TOK_SPEC, 2, 11, 3, NULL, 5, &st, v);
	windows_of(TOK_SPEC, 1, 11, 0, &st, UINT64_MAX, NULL, v);
	ck_assert_int_eq(memcmp(w, v, one * sizeof(*w)), 0);
	for (int f = 0; f < 2; f++) {
		free(pairs[f]);
		free(fixed[f]);
	}
	free(w);
	free(v);
	wharf_index_close(toks);
}
END_TEST

/* Element types in either spelling, from the one table. */
START_TEST(dtype_spellings)
{
	static const char *const specs[] = {
	    "tokens dtype=uint16 window=4 out=int32",
	    "tokens dtype=u16 window=4 out=i32",
	    "array dtype=bfloat16 shape=16",
	    "array dtype=bf16 shape=16",
	};
	wharf_decoder *d;
	uint32_t size = 0;

	ck_assert_str_eq(wharf_dtype("u16", &size), "uint16");
	ck_assert_uint_eq(size, 2);
	ck_assert_str_eq(wharf_dtype("float64", &size), "float64");
	ck_assert_uint_eq(size, 8);
	ck_assert_str_eq(wharf_dtype("bf16", NULL), "bfloat16");
	ck_assert_ptr_null(wharf_dtype("f33", NULL));
	ck_assert_ptr_null(wharf_dtype("uint", NULL));
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		ck_assert_msg(wharf_decoder_new(specs[i], &d) == 0, "%s: %s",
			      specs[i], wharf_last_error());
		ck_assert_uint_eq(wharf_decoder_sample_bytes(d), 32);
		wharf_decoder_free(d);
	}
	ck_assert_int_eq(wharf_decoder_new("tokens dtype=int16 window=4", &d),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "uint16"));
	ck_assert_int_eq(wharf_decoder_new("array dtype=f33 shape=2", &d),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "u16 (uint16)"));
	ck_assert_int_eq(
	    wharf_decoder_new("tokens dtype=u16 window=4 windows=sliding", &d),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "windows="));
}
END_TEST

START_TEST(resume)
{
	/* _i selects the mode: 0 in order, 1 out of order, 2 in the
	 * shard-aware order (the record shard as one shard, cut into
	 * pieces by rank 1 of 3). */
	struct wharf_options o;
	opts(&o, 16, 2);
	o.prefetch = 2;
	o.shuffle = _i == 2 ? WHARF_SHUFFLE_SHARDS : 1;
	o.seed = 9;
	o.in_order = _i != 1;
	if (_i == 2) {
		o.rank = 1;
		o.world = 3;
	}
	wharf_loader *l;
	/* Reference: epoch 3 in full. */
	struct run ref = {0};
	open_loader(recs, &o, &l);
	ck_assert_int_eq(wharf_loader_set_epoch(l, 3), 0);
	ck_assert_int_eq(take(l, &ref, UINT64_MAX), WHARF_END);
	uint64_t nb = wharf_loader_num_batches(l);
	wharf_loader_close(l);

	const uint64_t points[] = {0, 1, 5, nb - 1, nb};
	for (size_t p = 0; p < 5; p++) {
		struct run a = {0}, b = {0};
		struct wharf_state st;
		open_loader(recs, &o, &l);
		ck_assert_int_eq(wharf_loader_set_epoch(l, 3), 0);
		take(l, &a, points[p]);
		ck_assert_uint_eq(a.nb, points[p]);
		ck_assert_int_eq(wharf_loader_state_save(l, &st), 0);
		ck_assert_uint_eq(st.epoch, 3);
		wharf_loader_close(l);
		/* A different num_workers and prefetch resume the same. */
		struct wharf_options o2 = o;
		o2.num_workers = (uint32_t)p % 4;
		o2.prefetch = 1 + (uint32_t)p % 3;
		open_loader(recs, &o2, &l);
		ck_assert_int_eq(wharf_loader_state_restore(l, &st), 0);
		ck_assert_int_eq(take(l, &b, UINT64_MAX), WHARF_END);
		wharf_loader_close(l);
		/* Together exactly the epoch's batches, each once. */
		ck_assert_uint_eq(a.nb + b.nb, nb);
		char *seen = calloc(nb, 1);
		for (uint64_t i = 0; i < a.nb; i++)
			seen[a.bindex[i]]++;
		for (uint64_t i = 0; i < b.nb; i++)
			seen[b.bindex[i]]++;
		for (uint64_t i = 0; i < nb; i++)
			ck_assert_int_eq(seen[i], 1);
		free(seen);
		if (o.in_order && a.n)
			ck_assert_int_eq(memcmp(a.ids, ref.ids, a.n * 8), 0);
		if (o.in_order && b.n)
			ck_assert_int_eq(memcmp(b.ids, ref.ids + a.n, b.n * 8),
					 0);
		run_free(&a);
		run_free(&b);
	}
	/* A state from another configuration is refused by name. */
	struct wharf_state st;
	open_loader(recs, &o, &l);
	ck_assert_int_eq(wharf_loader_state_save(l, &st), 0);
	st.batch_size = 3;
	ck_assert_int_eq(wharf_loader_state_restore(l, &st), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "batch_size"));
	/* Another order, or another shard window, is another run. */
	ck_assert_int_eq(wharf_loader_state_save(l, &st), 0);
	wharf_loader_close(l);
	struct wharf_options o3 = o;
	o3.shuffle = _i == 2 ? 1 : WHARF_SHUFFLE_SHARDS;
	open_loader(recs, &o3, &l);
	ck_assert_int_eq(wharf_loader_state_restore(l, &st), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "shard_window"));
	wharf_loader_close(l);
	if (_i == 2) {
		o3 = o;
		o3.shard_window = 7;
		open_loader(recs, &o3, &l);
		ck_assert_int_eq(wharf_loader_state_restore(l, &st), -EINVAL);
		wharf_loader_close(l);
	}
	run_free(&ref);
}
END_TEST

START_TEST(epochs_differ_and_repeat)
{
	struct wharf_options o;
	/* _i: 1 persistent workers, 0 fresh workers per epoch. */
	opts(&o, 50, 2);
	o.shuffle = 1;
	o.persistent = (uint32_t)_i;
	wharf_loader *l;
	struct run e0 = {0}, e1 = {0}, e0b = {0};
	open_loader(recs, &o, &l);
	ck_assert_int_eq(take(l, &e0, 3), 0);
	/* Switching epochs mid-way drops what was read ahead. */
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	ck_assert_int_eq(take(l, &e1, UINT64_MAX), WHARF_END);
	ck_assert_int_eq(wharf_loader_set_epoch(l, 0), 0);
	ck_assert_int_eq(take(l, &e0b, UINT64_MAX), WHARF_END);
	wharf_loader_close(l);
	ck_assert_uint_eq(e1.n, NREC);
	ck_assert_int_eq(memcmp(e0.ids, e0b.ids, e0.n * 8), 0);
	ck_assert_int_ne(memcmp(e0.ids, e1.ids, e0.n * 8), 0);
	run_free(&e0);
	run_free(&e1);
	run_free(&e0b);
}
END_TEST

/* The end of the test transforms: the sample as it is. */
static int pass_through(const void *in, uint64_t len, void *out,
			uint64_t *out_len)
{
	memcpy(out, in, len);
	*out_len = len;
	return 0;
}

/* Bytes the workers read so far (batches they finished or gave up). */
static uint64_t read_so_far(const wharf_loader *l)
{
	struct wharf_stats st = {.size = sizeof(st)};

	ck_assert_int_eq(wharf_loader_stats(l, &st), 0);
	return st.read_bytes;
}

/* Setting the epoch the loader is at, before taking any of it (a loop
 * that sets every epoch), keeps what the open read ahead: every record is
 * read once. */
START_TEST(set_epoch_at_start_keeps_read_ahead)
{
	struct wharf_options o;
	opts(&o, 50, 2);
	o.prefetch = 2;
	o.shuffle = 1;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	/* The open's read-ahead (4 batches of 50) is done or under way. */
	for (int i = 0; i < 200 && read_so_far(l) < 4 * 50 * REC; i++)
		usleep(10000);
	ck_assert_uint_gt(read_so_far(l), 0);
	ck_assert_int_eq(wharf_loader_set_epoch(l, 0), 0);
	ck_assert_int_eq(drain(l), WHARF_END);
	ck_assert_uint_eq(read_so_far(l), (uint64_t)NREC * REC);
	wharf_loader_close(l);
}
END_TEST

/* A slow transform: 20 ms a sample. */
static int slow_each_fn(void *user, uint64_t sample, const void *in,
			uint64_t len, void *out, uint64_t cap,
			uint64_t *out_len)
{
	usleep(20000);
	return pass_through(in, len, out, out_len);
}

/* Batches a restart made stale stop at their next sample: the first batch
 * of the new epoch does not wait for four batches nobody takes. */
START_TEST(restart_stops_stale_batches)
{
	struct wharf_options o;
	opts(&o, 10, 2);
	o.prefetch = 2;
	o.shuffle = 1;
	o.sample_bytes = REC;
	o.sample_fn = slow_each_fn;
	wharf_loader *l;
	struct run e1 = {0};
	open_loader(recs, &o, &l);
	usleep(50000); /* each worker is into its first batch of epoch 0 */
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	ck_assert_int_eq(take(l, &e1, 1), 0);
	/* Read to finish the stale batches: at least 3 of them (30
	 * records), and the batch taken.  Stopped: a record or two each. */
	ck_assert_uint_lt(read_so_far(l), 40 * REC);
	ck_assert_uint_eq(e1.n, 10);
	wharf_loader_close(l);
	run_free(&e1);
}
END_TEST

/* Kills its own worker on sample 123. */
static int crash_fn(void *user, uint64_t sample, const void *in, uint64_t len,
		    void *out, uint64_t cap, uint64_t *out_len)
{
	if (sample == 123)
		raise(SIGKILL);
	return pass_through(in, len, out, out_len);
}

static void assert_no_children(void)
{
	errno = 0;
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
}

START_TEST(worker_crash_named)
{
	struct wharf_options o;
	opts(&o, 10, 2);
	o.sample_fn = crash_fn;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	const struct wharf_batch *b;
	int rc = drain(l);
	ck_assert_int_eq(rc, -ECHILD);
	const char *e = wharf_loader_error(l);
	ck_assert_msg(strstr(e, "worker ") && strstr(e, "signal 9") &&
			  strstr(e, "sample 123 (") && strstr(e, shard) &&
			  strstr(e, "batch 12"),
		      "message: %s", e);
	ck_assert_str_eq(wharf_last_error(), e);
	/* Stopped: next keeps failing the same way; close is clean. */
	ck_assert_int_eq(wharf_loader_next(l, &b), -ECHILD);
	wharf_loader_close(l);
	assert_no_children();
}
END_TEST

/* What the installed log function received. */
struct logged {
	int calls;
	enum wharf_log_level level;
	char msg[1024];
	void *arg;
};

static void log_to(enum wharf_log_level level, const char *msg, void *arg)
{
	struct logged *g = arg;
	g->calls++;
	g->level = level;
	g->arg = arg;
	snprintf(g->msg, sizeof(g->msg), "%s", msg);
}

/* Runs crash_fn's loader to its failure. */
static void crash_once(void)
{
	struct wharf_options o;
	opts(&o, 10, 2);
	o.sample_fn = crash_fn;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	ck_assert_int_eq(drain(l), -ECHILD);
	wharf_loader_close(l);
}

/* A worker's death goes to the installed log function, once, as an error
 * naming the worker, the signal and the sample; with the function taken
 * away again, the next one goes to stderr. */
START_TEST(log_func_gets_worker_death)
{
	struct logged g = {0};
	wharf_log_set_func(log_to, &g);
	crash_once();
	wharf_log_set_func(NULL, NULL);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_ptr_eq(g.arg, &g);
	ck_assert_int_eq(g.level, WHARF_LOG_ERROR);
	ck_assert_msg(strstr(g.msg, "worker ") && strstr(g.msg, "signal 9") &&
			  strstr(g.msg, "sample 123 (") && !strchr(g.msg, '\n'),
		      "logged: %s", g.msg);

	char path[4096];
	snprintf(path, sizeof(path), "%s/stderr", root);
	fflush(stderr);
	int saved = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	close(fd);
	crash_once();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ck_assert_int_eq(g.calls, 1);
	char text[2048] = "";
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	ck_assert_msg(!strncmp(text, "wharf: error: worker ", 21) &&
			  strstr(text, "signal 9"),
		      "stderr: %s", text);
}
END_TEST

static int bad_fn(void *user, uint64_t sample, const void *in, uint64_t len,
		  void *out, uint64_t cap, uint64_t *out_len)
{
	if (sample % 100 == 57) {
		wharf_set_error("sample %llu is not a tensor",
				(unsigned long long)sample);
		return -EBADMSG;
	}
	return pass_through(in, len, out, out_len);
}

START_TEST(transform_error_and_skip)
{
	struct wharf_options o;
	opts(&o, 10, (uint32_t)_i);
	o.sample_fn = bad_fn;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	const struct wharf_batch *b;
	int rc = drain(l);
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_msg(strstr(wharf_loader_error(l), "sample 57 is not a "
						    "tensor") &&
			  strstr(wharf_loader_error(l), "batch 5 "),
		      "message: %s", wharf_loader_error(l));
	wharf_loader_close(l);

	o.skip_bad = 1;
	open_loader(recs, &o, &l);
	uint64_t n = 0, skipped = 0;
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		for (uint32_t k = 0; k < b->count; k++) {
			ck_assert_uint_ne(b->samples[k] % 100, 57);
			check_record(b, k, (const char *)b->data + k * REC);
		}
		n += b->count;
		skipped += b->skipped;
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_int_eq(rc, WHARF_END);
	ck_assert_uint_eq(skipped, NREC / 100);
	ck_assert_uint_eq(n, NREC - NREC / 100);
	struct wharf_stats st = {.size = sizeof(st)};
	ck_assert_int_eq(wharf_loader_stats(l, &st), 0);
	ck_assert_uint_eq(st.skipped, NREC / 100);
	wharf_loader_close(l);
}
END_TEST

static unsigned bad_calls; /* calls for bad samples (num_workers 0) */

static int bad_counted_fn(void *user, uint64_t sample, const void *in,
			  uint64_t len, void *out, uint64_t cap,
			  uint64_t *out_len)
{
	bad_calls += sample % 100 == 57;
	return bad_fn(user, sample, in, len, out, cap, out_len);
}

START_TEST(failed_transform_runs_once)
{
	/* A failing sample is read and transformed once, not again. */
	struct wharf_options o;
	opts(&o, 10, 0);
	o.sample_fn = bad_counted_fn;
	o.skip_bad = 1;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	bad_calls = 0;
	ck_assert_int_eq(drain(l), WHARF_END);
	ck_assert_uint_eq(bad_calls, NREC / 100);
	wharf_loader_close(l);
}
END_TEST

START_TEST(unreadable_file)
{
	/* A file removed after the index was built. */
	char *d = fx_tmpdir("unread"), *p, *out;
	if (asprintf(&p, "%s/c/f1", d) < 0 || asprintf(&out, "%s/i", d) < 0)
		abort();
	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/c", d);
	ck_assert_int_eq(fx_mkdirs(sub), 0);
	for (int i = 0; i < 4; i++) {
		p[strlen(p) - 1] = (char)('0' + i);
		ck_assert_int_eq(fx_write_file(p, 64, (uint32_t)i), 0);
	}
	ck_assert_int_eq(wharf_index_build_dir(d, out), 0);
	p[strlen(p) - 1] = '2';
	ck_assert_int_eq(unlink(p), 0);
	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	struct wharf_options o;
	opts(&o, 4, 1);
	wharf_loader *l;
	open_loader(idx, &o, &l);
	const struct wharf_batch *b;
	ck_assert_int_eq(wharf_loader_next(l, &b), -ENOENT);
	const char *e = wharf_loader_error(l);
	ck_assert_msg(strstr(e, "sample 2 (") && strstr(e, p) &&
			  strstr(e, "No such file") && strstr(e, "worker 0"),
		      "message: %s", e);
	wharf_loader_close(l);
	wharf_index_close(idx);
	fx_rmtree(d);
	free(d);
	free(p);
	free(out);
}
END_TEST

/* A shard of 100 records in its own directory, and its index. */
struct shard {
	char *dir;
	char file[4096];
	wharf_index *idx;
};

static void shard_make(struct shard *sh, const char *tag)
{
	char out[4096];
	const char *files[] = {sh->file};

	sh->dir = fx_tmpdir(tag);
	snprintf(sh->file, sizeof(sh->file), "%s/shard", sh->dir);
	snprintf(out, sizeof(out), "%s/i", sh->dir);
	ck_assert_int_eq(fx_write_file(sh->file, 100 * REC, SEED), 0);
	ck_assert_int_eq(wharf_index_build_records(REC, files, 1, out), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &sh->idx), 0);
}

static void shard_remove(struct shard *sh)
{
	wharf_index_close(sh->idx);
	fx_rmtree(sh->dir);
	free(sh->dir);
}

/* The loader failed with a short read of sample `sample` of the shard. */
static void assert_short_read(wharf_loader *l, const struct shard *sh,
			      uint64_t sample)
{
	const char *e = wharf_loader_error(l);
	char want[32];

	snprintf(want, sizeof(want), "sample %llu (",
		 (unsigned long long)sample);
	ck_assert_msg(strstr(e, want) && strstr(e, sh->file) &&
			  strstr(e, "short read"),
		      "message: %s", e);
}

START_TEST(truncated_shard)
{
	/* _i: num_workers 0..1.  A record shard cut short after the index
	 * was built: workers map record shards, and the cut must read as a
	 * short read naming the sample, never as a SIGBUS. */
	struct shard sh;
	shard_make(&sh, "trunc");
	ck_assert_int_eq(truncate(sh.file, 50 * REC + 10), 0);
	struct wharf_options o;
	opts(&o, 10, (uint32_t)_i);
	wharf_loader *l;
	open_loader(sh.idx, &o, &l);
	struct run r = {0};
	ck_assert_int_eq(take(l, &r, UINT64_MAX), -EIO);
	ck_assert_uint_eq(r.n, 50); /* five whole batches, checked */
	assert_short_read(l, &sh, 50);
	run_free(&r);
	wharf_loader_close(l);
	shard_remove(&sh);
}
END_TEST

START_TEST(shard_cut_while_mapped)
{
	/* _i: num_workers 0..1, then the same with skip_bad.  The shard is
	 * read whole once (workers map it then), then cut at a page
	 * boundary: the next epoch's copies fault past the end, and must
	 * read as short reads naming the sample, never kill anyone. */
	const uint32_t workers = (uint32_t)_i % 2, skip = (uint32_t)_i / 2;
	const uint64_t cut = 4096, whole = cut / REC; /* 42 whole records */
	struct shard sh;
	shard_make(&sh, "cutmap");
	struct wharf_options o;
	opts(&o, 10, workers);
	o.skip_bad = skip;
	wharf_loader *l;
	open_loader(sh.idx, &o, &l);
	struct run r = {0};
	ck_assert_int_eq(take(l, &r, UINT64_MAX), WHARF_END);
	ck_assert_uint_eq(r.n, 100);
	run_free(&r);

	ck_assert_int_eq(truncate(sh.file, (off_t)cut), 0);
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	int rc = take(l, &r, UINT64_MAX);
	if (skip) {
		struct wharf_stats st = {.size = sizeof(st)};
		ck_assert_int_eq(rc, WHARF_END);
		ck_assert_uint_eq(r.n, whole);
		ck_assert_int_eq(wharf_loader_stats(l, &st), 0);
		ck_assert_uint_eq(st.skipped, 100 - whole);
	} else {
		ck_assert_msg(rc == -EIO, "%d: %s", rc,
			      wharf_loader_error(l));
		ck_assert_uint_eq(r.n, whole / 10 * 10); /* whole batches */
		assert_short_read(l, &sh, whole);
	}
	run_free(&r);
	wharf_loader_close(l);
	shard_remove(&sh);
}
END_TEST

/* Made by slow_fn in the worker when it starts to hang (if set). */
static char hang_mark[PATH_MAX];

static int slow_fn(void *user, uint64_t sample, const void *in, uint64_t len,
		   void *out, uint64_t cap, uint64_t *out_len)
{
	if (sample == 30) {
		if (hang_mark[0])
			close(open(hang_mark, O_CREAT | O_WRONLY, 0600));
		pause(); /* until the loader kills us */
	}
	return pass_through(in, len, out, out_len);
}

/* A loader whose workers hang on sample 30, with a 300 ms timeout. */
static wharf_loader *open_hanging(uint32_t workers)
{
	struct wharf_options o;
	opts(&o, 10, workers);
	o.timeout_ms = 300;
	o.sample_fn = slow_fn;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	return l;
}

START_TEST(timeout_named)
{
	wharf_loader *l = open_hanging(2);
	int rc = drain(l);
	ck_assert_int_eq(rc, -ETIMEDOUT);
	ck_assert_msg(strstr(wharf_loader_error(l), "sample 30 (") &&
			  strstr(wharf_loader_error(l), "timed out"),
		      "message: %s", wharf_loader_error(l));
	wharf_loader_close(l);
	assert_no_children();
}
END_TEST

START_TEST(timeout_names_stale_sample)
{
	/* The worker hangs on a batch sent before set_epoch, and the new
	 * epoch's first batch waits behind it: the timeout must name the
	 * sample it hangs on, not the batch waited for. */
	snprintf(hang_mark, sizeof(hang_mark), "%s/hang-mark", root);
	unlink(hang_mark);
	wharf_loader *l = open_hanging(1);
	const struct wharf_batch *b;
	for (int i = 0; i < 3; i++) { /* samples 0..29; 30 is sent */
		ck_assert_int_eq(wharf_loader_next(l, &b), 0);
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	/* Hanging already: a stale batch not yet begun would be dropped
	 * before its first sample (restart_stops_stale_batches). */
	for (int i = 0; i < 500 && access(hang_mark, F_OK); i++)
		usleep(10000);
	ck_assert_int_eq(access(hang_mark, F_OK), 0);
	hang_mark[0] = '\0';
	ck_assert_int_eq(wharf_loader_set_epoch(l, 1), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), -ETIMEDOUT);
	ck_assert_msg(strstr(wharf_loader_error(l), "sample 30 (") &&
			  strstr(wharf_loader_error(l), "earlier epoch"),
		      "message: %s", wharf_loader_error(l));
	wharf_loader_close(l);
	assert_no_children();
}
END_TEST

/* Two workers with one slot each. */
static wharf_loader *open_two_slots(void)
{
	struct wharf_options o;
	opts(&o, 10, 2);
	o.prefetch = 1;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	return l;
}

/* Workers killed while idle (every slot filled): the next dispatch finds
 * them gone and the loader says so, rather than "no free slot". */
START_TEST(idle_workers_killed)
{
	wharf_loader *l = open_two_slots();
	const struct wharf_batch *b;
	/* Both slots filled: the workers have nothing left to do. */
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	usleep(200 * 1000); /* batches of 10 small records: long done */
	for (uint32_t i = 0; i < 2; i++)
		ck_assert_int_eq(kill(l->workers.w[i].pid, SIGKILL), 0);
	usleep(200 * 1000);
	int rc = 0;
	for (int i = 0; i < 4 && rc == 0; i++) {
		rc = wharf_loader_next(l, &b);
		if (rc == 0)
			ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_int_eq(rc, -ECHILD);
	ck_assert_msg(strstr(wharf_loader_error(l), "signal 9"), "message: %s",
		      wharf_loader_error(l));
	wharf_loader_close(l);
	assert_no_children();
}
END_TEST

static void on_alarm(int sig)
{
	(void)sig;
}

/* Takes a second over sample 0. */
static int sleepy_fn(void *user, uint64_t sample, const void *in, uint64_t len,
		   void *out, uint64_t cap, uint64_t *out_len)
{
	if (sample == 0)
		usleep(1000 * 1000);
	return pass_through(in, len, out, out_len);
}

/* Interruptible (as the Python package asks): a signal during the wait
 * returns -EINTR, so that the caller's handler runs (Python's ^C); the
 * next call goes on as if nothing happened. */
START_TEST(signal_interrupts_wait)
{
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	struct itimerval it = {.it_value = {0, 200 * 1000}};
	struct wharf_options o;
	const struct wharf_batch *b;
	wharf_loader *l;

	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	opts(&o, 10, 1);
	o.sample_fn = sleepy_fn;
	o.interruptible = 1;
	open_loader(recs, &o, &l);
	ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), -EINTR);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "signal"));
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->samples[0], 0);
	check_record(b, 0, b->data);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	ck_assert_int_eq(drain(l), WHARF_END);
	wharf_loader_close(l);
	signal(SIGALRM, SIG_DFL);
	assert_no_children();
}
END_TEST

/* How many of fd's file (same device and inode) process pid holds open. */
static int holds(pid_t pid, int fd)
{
	struct stat want, st;
	char dir[64], path[320];
	struct dirent *de;
	int n = 0;
	DIR *d;

	ck_assert_int_eq(fstat(fd, &want), 0);
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_name[0] != '.' && stat(path, &st) == 0 &&
		    st.st_dev == want.st_dev && st.st_ino == want.st_ino)
			n++;
	}
	closedir(d);
	return n;
}

/* Two loaders at once (train and validation): the second one's workers
 * hold none of the first one's channels, so closing the first ends its
 * workers at once rather than after a grace and a SIGKILL. */
START_TEST(loaders_keep_to_their_channels)
{
	struct wharf_options o;
	wharf_loader *a, *b;

	opts(&o, 10, 2);
	open_loader(recs, &o, &a);
	open_loader(recs, &o, &b);
	for (uint32_t i = 0; i < 2; i++)
		for (uint32_t j = 0; j < 2; j++) {
			pid_t pid = b->workers.w[i].pid;

			ck_assert_int_eq(holds(pid, a->workers.w[j].task_fd), 0);
			ck_assert_int_eq(holds(pid, a->workers.w[j].done_fd), 0);
		}
	/* The check sees a pipe held: a worker of a holds the other end of
	 * its own done pipe (one inode for both ends). */
	ck_assert_int_eq(holds(a->workers.w[0].pid, a->workers.w[0].done_fd),
			 1);
	wharf_loader_close(a);
	ck_assert_int_eq(drain(b), WHARF_END);
	wharf_loader_close(b);
	assert_no_children();
}
END_TEST

START_TEST(slots_held)
{
	wharf_loader *l = open_two_slots();
	const struct wharf_batch *b[3];
	ck_assert_int_eq(wharf_loader_next(l, &b[0]), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b[1]), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b[2]), -ENOBUFS);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "release"));
	/* Held views stay intact while others are read. */
	ck_assert_int_eq(wharf_loader_release(l, b[0]), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b[2]), 0);
	ck_assert_uint_eq(b[1]->samples[0], 10);
	ck_assert_uint_eq(b[2]->samples[0], 20);
	check_record(b[1], 0, b[1]->data);
	wharf_loader_close(l);
}
END_TEST

/* held: slots beyond the workers', so a caller that keeps that many batches
 * leaves the workers theirs. */
START_TEST(held_slots_beyond_the_workers)
{
	struct wharf_options o;
	opts(&o, 10, 2);
	o.prefetch = 1;
	o.held = 2;
	wharf_loader *l;
	open_loader(recs, &o, &l);
	const struct wharf_batch *b[5];
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(wharf_loader_next(l, &b[k]), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b[4]), -ENOBUFS);
	for (int k = 0; k < 4; k++) {
		ck_assert_uint_eq(b[k]->samples[0], 10u * k);
		check_record(b[k], 0, b[k]->data);
	}
	wharf_loader_close(l);
	o.held = 1025;
	ck_assert_int_eq(wharf_loader_open(recs, &o, &l), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "held"));
}
END_TEST

/* stop: the workers go, a held batch stays readable until close. */
START_TEST(stop_keeps_held_batches)
{
	wharf_loader *l = open_two_slots();
	const struct wharf_batch *b, *c;
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	wharf_loader_stop(l);
	assert_no_children();
	wharf_loader_stop(l);
	ck_assert_int_eq(wharf_loader_next(l, &c), -ESHUTDOWN);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "stopped"));
	ck_assert_uint_eq(b->samples[0], 0);
	check_record(b, 0, b->data);
	check_record(b, 9, (const char *)b->data + 9 * REC);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
}
END_TEST

START_TEST(small_shm_refused)
{
	char *d = fx_tmpdir("shm");
	if (mount("none", d, "tmpfs", 0, "size=1M")) {
		const int err = errno;

		fx_rmtree(d);
		free(d);
		fx_skip("cannot mount a 1 MiB tmpfs (%s): it needs root",
			strerror(err));
	}
	struct wharf_options o;
	opts(&o, 4096, 2);
	o.prefetch = 4;
	o.shm_dir = d;
	wharf_loader *l = NULL;
	int rc = wharf_loader_open(recs, &o, &l);
	const char *e = wharf_last_error();
	umount2(d, MNT_DETACH);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_msg(strstr(e, d) && strstr(e, "needs") &&
			  strstr(e, "bytes are free") &&
			  strstr(e, "lower prefetch"),
		      "message: %s", e);
	assert_no_children();
	/* The same through $WHARF_SHM_DIR, and a ring that fits. */
	ck_assert_int_eq(mount("none", d, "tmpfs", 0, "size=1M"), 0);
	setenv("WHARF_SHM_DIR", d, 1);
	o.shm_dir = NULL;
	rc = wharf_loader_open(recs, &o, &l);
	ck_assert_int_eq(rc, -ENOSPC);
	o.batch_size = 10;
	open_loader(recs, &o, &l);
	const struct wharf_batch *b;
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	check_record(b, 0, b->data);
	/* Nothing named in the directory: the segment has no name. */
	DIR *dd = opendir(d);
	struct dirent *de;
	int names = 0;
	while ((de = readdir(dd)))
		names += de->d_name[0] != '.';
	closedir(dd);
	ck_assert_int_eq(names, 0);
	wharf_loader_close(l);
	unsetenv("WHARF_SHM_DIR");
	umount2(d, MNT_DETACH);
	fx_rmtree(d);
	free(d);
}
END_TEST

/* The caller killed with SIGKILL: its workers die with it, nothing stays. */
START_TEST(killed_caller_leaves_nothing)
{
	int pp[2];
	ck_assert_int_eq(pipe(pp), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct wharf_options o;
		wharf_options_init(&o);
		o.num_workers = 3;
		wharf_loader *l;
		if (wharf_loader_open(recs, &o, &l))
			_exit(1);
		pid_t pids[3];
		for (int i = 0; i < 3; i++)
			pids[i] = l->workers.w[i].pid;
		if (write(pp[1], pids, sizeof(pids)) != sizeof(pids))
			_exit(1);
		pause();
		_exit(0);
	}
	close(pp[1]);
	pid_t pids[3];
	ck_assert_int_eq(read(pp[0], pids, sizeof(pids)), sizeof(pids));
	close(pp[0]);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* PR_SET_PDEATHSIG: each worker is gone (bounded wait; ESRCH once
	 * reaped by init). */
	for (int i = 0; i < 3; i++) {
		int tries = 0;
		while (kill(pids[i], 0) == 0 && tries++ < 500) {
			char p[64], st = 0;
			snprintf(p, sizeof(p), "/proc/%d/stat", (int)pids[i]);
			FILE *f = fopen(p, "r");
			if (f) {
				if (fscanf(f, "%*d %*s %c", &st) != 1)
					st = 0;
				fclose(f);
			}
			if (st == 'Z')
				break;
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
		}
		ck_assert_msg(tries < 500, "worker %d outlived its caller",
			      (int)pids[i]);
	}
}
END_TEST

/* `wharf bench loader --shuffle=shards` runs the shard-aware order. */
START_TEST(bench_shard_order)
{
	const char *w = fx_wharf_bin();
	if (access(w, X_OK))
		fx_skip("no wharf command at %s (a --disable-fs build)", w);
	ck_assert_int_eq(fx_sh("'%s' bench loader --shuffle=shards "
			       "--shard-window 2 --json '%s' | "
			       "grep -q '\"order\": *\"shards\".*"
			       "\"shard_window\": *2'",
			       w, dir_idx),
			 0);
	ck_assert_int_eq(fx_sh("'%s' bench loader --shuffle=shard '%s' 2>&1 "
			       "| grep -q \"the one value is 'shards'\"",
			       w, dir_idx),
			 0);
	ck_assert_int_eq(fx_sh("'%s' bench loader --shard-window 2 '%s' "
			       "2>/dev/null",
			       w, dir_idx),
			 2);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("loader");
	TCase *tc = tcase_create("loader");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, in_order_equals_sequential, 0, 4);
	tcase_add_test(tc, out_of_order_same_multiset);
	tcase_add_test(tc, variable_size_and_labels);
	tcase_add_test(tc, transforms);
	tcase_add_test(tc, moving_windows);
	tcase_add_test(tc, dtype_spellings);
	tcase_add_loop_test(tc, resume, 0, 3);
	tcase_add_test(tc, bench_shard_order);
	tcase_add_loop_test(tc, epochs_differ_and_repeat, 0, 2);
	tcase_add_test(tc, set_epoch_at_start_keeps_read_ahead);
	tcase_add_test(tc, restart_stops_stale_batches);
	tcase_add_test(tc, worker_crash_named);
	tcase_add_test(tc, log_func_gets_worker_death);
	tcase_add_loop_test(tc, transform_error_and_skip, 0, 3);
	tcase_add_test(tc, unreadable_file);
	tcase_add_loop_test(tc, truncated_shard, 0, 2);
	tcase_add_loop_test(tc, shard_cut_while_mapped, 0, 4);
	tcase_add_test(tc, failed_transform_runs_once);
	tcase_add_test(tc, timeout_named);
	tcase_add_test(tc, timeout_names_stale_sample);
	tcase_add_test(tc, idle_workers_killed);
	tcase_add_test(tc, signal_interrupts_wait);
	tcase_add_test(tc, loaders_keep_to_their_channels);
	tcase_add_test(tc, slots_held);
	tcase_add_test(tc, held_slots_beyond_the_workers);
	tcase_add_test(tc, stop_keeps_held_batches);
	tcase_add_test(tc, small_shm_refused);
	tcase_add_test(tc, killed_caller_leaves_nothing);
	suite_add_tcase(s, tc);
	return s;
}

/* wharf-* entries in /dev/shm whose pid is ours or our children's. */
static int shm_leftovers(void)
{
	DIR *d = opendir("/dev/shm");
	int n = 0;
	if (!d)
		return 0;
	struct dirent *de;
	char mine[32];
	snprintf(mine, sizeof(mine), "wharf-%d-", (int)getpid());
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, mine, strlen(mine));
	closedir(d);
	return n;
}

int main(void)
{
	root = fx_tmpdir("loader");
	if (asprintf(&shard, "%s/shard", root) < 0 ||
	    asprintf(&rec_idx, "%s/rec.idx", root) < 0 ||
	    asprintf(&dir_idx, "%s/dir.idx", root) < 0 ||
	    asprintf(&dir_root, "%s/tree", root) < 0)
		abort();
	if (fx_write_file(shard, (uint64_t)NREC * REC, SEED))
		return 1;
	const char *files[] = {shard};
	if (wharf_index_build_records(REC, files, 1, rec_idx) ||
	    wharf_index_open(rec_idx, 0, &recs)) {
		fprintf(stderr, "%s\n", wharf_last_error());
		return 1;
	}
	for (int i = 0; i < 23; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/c%d", dir_root, i % 3);
		fx_mkdirs(p);
		snprintf(p, sizeof(p), "%s/c%d/f%02d", dir_root, i % 3, i);
		if (fx_write_file(p, 10 + (uint64_t)i * 37, (uint32_t)i))
			return 1;
	}
	if (wharf_index_build_dir(dir_root, dir_idx) ||
	    wharf_index_open(dir_idx, 0, &dirs)) {
		fprintf(stderr, "%s\n", wharf_last_error());
		return 1;
	}
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	wharf_index_close(recs);
	wharf_index_close(dirs);
	/* No segment left behind by the whole suite. */
	int left = shm_leftovers();
	if (left) {
		fprintf(stderr, "%d wharf segments left in /dev/shm\n", left);
		failed++;
	}
	fx_rmtree(root);
	free(root);
	free(shard);
	free(rec_idx);
	free(dir_idx);
	free(dir_root);
	return failed ? 1 : 0;
}
