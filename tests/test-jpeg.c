/*
 * The jpeg decoder through the loader, on JPEGs this test writes with
 * libjpeg: spec checks, crops and flips fixed by (seed, epoch, sample),
 * grayscale and CMYK made RGB, progressive files, and damaged or foreign
 * files failing by name (or skipped) without taking a worker down.  Its
 * agreement with torchvision is tests/python/test_jpeg.py's.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include <wharf/decode.h>
#include <wharf/loader.h>

#include "fixture.h"

#define S 48 /* output side */
#define NRGB 12

static char *root, *good_idx, *bad_idx;
static wharf_index *good, *bad;
/* Sample ids in the good index (files sort by name). */
enum { ID_RGB = 0, ID_GRAY = NRGB, ID_CMYK, ID_PROG, NGOOD };

static void write_jpeg(const char *path, int w, int h, int comps,
		       J_COLOR_SPACE cs, bool progressive,
		       const unsigned char *pix)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	FILE *f = fopen(path, "wb");

	if (!f)
		abort();
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_stdio_dest(&c, f);
	c.image_width = (JDIMENSION)w;
	c.image_height = (JDIMENSION)h;
	c.input_components = comps;
	c.in_color_space = cs;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 90, TRUE);
	if (progressive)
		jpeg_simple_progression(&c);
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < c.image_height) {
		JSAMPROW row = (JSAMPROW)pix +
			       (size_t)c.next_scanline * (size_t)w * comps;
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	fclose(f);
}

/* A smooth RGB picture with some detail; seed varies it. */
static unsigned char *picture(int w, int h, int seed)
{
	unsigned char *p = malloc((size_t)w * h * 3);

	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *q = p + ((size_t)y * w + x) * 3;

			q[0] = (unsigned char)(x * 255 / w);
			q[1] = (unsigned char)(y * 255 / h);
			q[2] = (unsigned char)(128 + 100 * sin(x / 9.0 + seed) *
							 cos(y / 7.0));
		}
	return p;
}

static char *path_in(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s/%s", root, dir, name) < 0)
		abort();
	return p;
}

static void make_files(void)
{
	static const int sizes[][2] = {{320, 240}, {240, 320}, {500, 375},
				       {96, 64},   {1000, 750}, {61, 47}};
	char name[64], *p;
	unsigned char *pix;

	for (int i = 0; i < NRGB; i++) {
		const int w = sizes[i % 6][0], h = sizes[i % 6][1];

		snprintf(name, sizeof(name), "a-rgb-%02d.jpg", i);
		p = path_in("good", name);
		pix = picture(w, h, i);
		write_jpeg(p, w, h, 3, JCS_RGB, false, pix);
		free(pix);
		free(p);
	}
	/* Gray: a ramp, so the channels must agree everywhere. */
	pix = malloc(200 * 150);
	for (int k = 0; k < 200 * 150; k++)
		pix[k] = (unsigned char)(k % 200 + 20);
	p = path_in("good", "b-gray.jpg");
	write_jpeg(p, 200, 150, 1, JCS_GRAYSCALE, false, pix);
	free(pix);
	free(p);
	/* CMYK as Adobe (and PIL) store it, inverted: this one is RGB
	 * (200, 100, 50) with black 55. */
	pix = malloc(120 * 90 * 4);
	for (int k = 0; k < 120 * 90; k++)
		memcpy(pix + 4 * k, "\xff\x7f\x40\xc8", 4);
	p = path_in("good", "c-cmyk.jpg");
	write_jpeg(p, 120, 90, 4, JCS_CMYK, false, pix);
	free(pix);
	free(p);
	/* Progressive: the same picture as a-rgb-02 (500x375, seed 2). */
	pix = picture(500, 375, 2);
	p = path_in("good", "d-prog.jpg");
	write_jpeg(p, 500, 375, 3, JCS_RGB, true, pix);
	free(p);
	/* Bad ones next to a good one: the first third of a baseline file,
	 * text, nothing. */
	p = path_in("bad", "a-good.jpg");
	write_jpeg(p, 500, 375, 3, JCS_RGB, false, pix);
	free(pix);
	{
		size_t len;
		void *b = fx_read_file(p, &len);
		char *t = path_in("bad", "b-trunc.jpg");
		FILE *f = fopen(t, "wb");

		if (!b || !f || fwrite(b, 1, len / 3, f) != len / 3)
			abort();
		fclose(f);
		free(t);
		free(b);
	}
	free(p);
	p = path_in("bad", "c-text.jpg");
	fx_sh("echo 'not a picture' > '%s'", p);
	free(p);
	p = path_in("bad", "d-empty.jpg");
	fx_sh(": > '%s'", p);
	free(p);
}

/* Every sample's output, by sample id (count x sample bytes). */
static unsigned char *decode_all(const wharf_index *idx, const char *spec,
				 uint32_t workers, uint64_t seed,
				 uint64_t epoch, uint32_t shuffle)
{
	struct wharf_options o;
	wharf_decoder *d;
	wharf_loader *l;
	const struct wharf_batch *b;
	unsigned char *all;
	uint64_t bytes;
	int rc;

	ck_assert_int_eq(wharf_decoder_new(spec, &d), 0);
	bytes = wharf_decoder_sample_bytes(d);
	all = calloc(wharf_index_count(idx), bytes);
	wharf_options_init(&o);
	o.batch_size = 5;
	o.num_workers = workers;
	o.seed = seed;
	o.shuffle = shuffle;
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	rc = wharf_loader_open(idx, &o, &l);
	ck_assert_msg(rc == 0, "open: %s", wharf_last_error());
	ck_assert_int_eq(wharf_loader_set_epoch(l, epoch), 0);
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		ck_assert_uint_eq(b->sample_size, bytes);
		for (uint32_t k = 0; k < b->count; k++)
			memcpy(all + b->samples[k] * bytes,
			       (const char *)b->data + k * bytes, bytes);
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
	}
	ck_assert_msg(rc == WHARF_END, "next: %d %s", rc,
		      wharf_loader_error(l));
	wharf_loader_close(l);
	wharf_decoder_free(d);
	return all;
}

START_TEST(spec_checked)
{
	static const struct {
		const char *spec, *word;
	} bad_specs[] = {
	    {"jpeg", "size="},
	    {"jpeg size=0", "size="},
	    {"jpeg size=5000", "size="},
	    {"jpeg size=32 crop=middle", "crop="},
	    {"jpeg size=32 scale=1,0.5", "scale="},
	    {"jpeg size=32 ratio=2", "ratio="},
	    {"jpeg size=32 flip=2", "flip="},
	    {"jpeg size=32 dtype=f16", "dtype="},
	    {"jpeg size=32 layout=cwh", "layout="},
	    {"jpeg size=32 mean=0.5,0.5,0.5", "mean="},
	    {"jpeg size=32 dtype=f32 std=1,0,1", "std="},
	};
	wharf_decoder *d;

	ck_assert_int_eq(wharf_decoder_new("jpeg size=224", &d), 0);
	ck_assert_uint_eq(wharf_decoder_sample_bytes(d), 224 * 224 * 3);
	ck_assert_uint_eq(wharf_decoder_input_bytes(d), 0);
	wharf_decoder_free(d);
	ck_assert_int_eq(wharf_decoder_new("jpeg size=32 crop=center "
					   "dtype=f32 layout=hwc "
					   "mean=0.485,0.456,0.406 "
					   "std=0.229,0.224,0.225 flip=1",
					   &d),
			 0);
	ck_assert_uint_eq(wharf_decoder_sample_bytes(d), 32 * 32 * 3 * 4);
	wharf_decoder_free(d);
	for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]);
	     i++) {
		ck_assert_int_eq(wharf_decoder_new(bad_specs[i].spec, &d),
				 -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), bad_specs[i].word),
			      "%s: %s", bad_specs[i].spec, wharf_last_error());
	}
}
END_TEST

/* Crops and flips depend on (seed, epoch, sample) only: not on the order,
 * the worker or the number of workers. */
START_TEST(random_choices_fixed)
{
	const char *spec = "jpeg size=48";
	const size_t n = (size_t)NGOOD * S * S * 3;
	unsigned char *a = decode_all(good, spec, 0, 5, 3, 1);
	unsigned char *b = decode_all(good, spec, 2, 5, 3, 0);
	unsigned char *c = decode_all(good, spec, 1, 5, 4, 1);
	unsigned char *e = decode_all(good, spec, 1, 6, 3, 1);

	ck_assert_msg(!memcmp(a, b, n), "same seed and epoch differ");
	ck_assert_msg(memcmp(a, c, n), "another epoch crops the same");
	ck_assert_msg(memcmp(a, e, n), "another seed crops the same");
	free(a);
	free(b);
	free(c);
	free(e);
}
END_TEST

static bool mirrored(const unsigned char *p, const unsigned char *q)
{
	for (int c = 0; c < 3; c++)
		for (int y = 0; y < S; y++)
			for (int x = 0; x < S; x++)
				if (p[(c * S + y) * S + x] !=
				    q[(c * S + y) * S + (S - 1 - x)])
					return false;
	return true;
}

/* flip=1 mirrors some samples and leaves the others exactly as flip=0. */
START_TEST(flips)
{
	const size_t one = (size_t)S * S * 3;
	unsigned char *a = decode_all(good, "jpeg size=48 crop=center", 0, 1,
				      0, 0);
	unsigned char *b = decode_all(good, "jpeg size=48 crop=center flip=1",
				      2, 1, 0, 0);
	int same = 0, flipped = 0;

	for (int i = 0; i < NGOOD; i++) {
		const unsigned char *p = a + i * one, *q = b + i * one;

		if (!memcmp(p, q, one))
			same++;
		else if (mirrored(p, q))
			flipped++;
		else
			ck_abort_msg("sample %d neither kept nor mirrored", i);
	}
	ck_assert_int_gt(same, 0);
	ck_assert_int_gt(flipped, 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(gray_and_cmyk_become_rgb)
{
	const size_t one = (size_t)S * S * 3, plane = (size_t)S * S;
	unsigned char *a = decode_all(good, "jpeg size=48 crop=center", 1, 0,
				      0, 0);
	const unsigned char *g = a + ID_GRAY * one, *k = a + ID_CMYK * one;
	static const int rgb[3] = {200, 100, 50};

	for (size_t i = 0; i < plane; i++) {
		ck_assert_int_eq(g[i], g[plane + i]);
		ck_assert_int_eq(g[i], g[2 * plane + i]);
		for (int c = 0; c < 3; c++)
			ck_assert_msg(abs(k[c * plane + i] - rgb[c]) <= 3,
				      "cmyk pixel %zu channel %d: %d, not %d",
				      i, c, k[c * plane + i], rgb[c]);
	}
	free(a);
}
END_TEST

/* A progressive file holds the same coefficients: the same output. */
START_TEST(progressive_same_as_baseline)
{
	const size_t one = (size_t)S * S * 3;
	unsigned char *a = decode_all(good, "jpeg size=48 crop=center", 0, 0,
				      0, 0);

	ck_assert(!memcmp(a + ID_PROG * one, a + (ID_RGB + 2) * one, one));
	free(a);
}
END_TEST

/* Each bad file alone fails naming its sample and path; under skip_bad
 * the batch holds the good one and counts three skipped. */
START_TEST(bad_files_named_or_skipped)
{
	static const char *const names[] = {"b-trunc.jpg", "c-text.jpg",
					    "d-empty.jpg"};
	struct wharf_options o;
	wharf_decoder *d;
	wharf_loader *l;
	const struct wharf_batch *b;
	char want[64];
	int rc;

	ck_assert_int_eq(
	    wharf_decoder_new("jpeg size=48 crop=center", &d), 0);
	wharf_options_init(&o);
	o.batch_size = 1;
	o.num_workers = 1;
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	for (int i = 1; i <= 3; i++) {
		struct wharf_state st = {.size = sizeof(st)};

		/* Batches of one, starting at batch i: sample i alone. */
		ck_assert_int_eq(wharf_loader_open(bad, &o, &l), 0);
		ck_assert_int_eq(wharf_loader_state_save(l, &st), 0);
		st.position = (uint64_t)i;
		ck_assert_int_eq(wharf_loader_state_restore(l, &st), 0);
		rc = wharf_loader_next(l, &b);
		ck_assert_int_eq(rc, -EINVAL);
		snprintf(want, sizeof(want), "sample %d (", i);
		ck_assert_msg(strstr(wharf_loader_error(l), want) &&
				  strstr(wharf_loader_error(l), names[i - 1]),
			      "%s", wharf_loader_error(l));
		wharf_loader_close(l);
	}
	o.batch_size = 4;
	o.skip_bad = 1;
	ck_assert_int_eq(wharf_loader_open(bad, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->count, 1);
	ck_assert_uint_eq(b->skipped, 3);
	ck_assert_uint_eq(b->samples[0], 0);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
	wharf_decoder_free(d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("jpeg");
	TCase *tc = tcase_create("jpeg");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, spec_checked);
	tcase_add_test(tc, random_choices_fixed);
	tcase_add_test(tc, flips);
	tcase_add_test(tc, gray_and_cmyk_become_rgb);
	tcase_add_test(tc, progressive_same_as_baseline);
	tcase_add_test(tc, bad_files_named_or_skipped);
	suite_add_tcase(s, tc);
	return s;
}

static wharf_index *index_of(const char *dir, char **out)
{
	char *d = path_in(dir, "");
	wharf_index *idx;

	if (asprintf(out, "%s/%s.idx", root, dir) < 0)
		abort();
	if (wharf_index_build_dir(d, *out) || wharf_index_open(*out, 0, &idx)) {
		fprintf(stderr, "%s\n", wharf_last_error());
		exit(1);
	}
	free(d);
	return idx;
}

int main(void)
{
	SRunner *sr;
	int failed;
	char *d;

	root = fx_tmpdir("jpeg");
	d = path_in("good", "");
	fx_mkdirs(d);
	free(d);
	d = path_in("bad", "");
	fx_mkdirs(d);
	free(d);
	make_files();
	good = index_of("good", &good_idx);
	bad = index_of("bad", &bad_idx);
	if (wharf_index_count(good) != NGOOD) {
		fprintf(stderr, "good index: %llu samples\n",
			(unsigned long long)wharf_index_count(good));
		return 1;
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	wharf_index_close(good);
	wharf_index_close(bad);
	fx_rmtree(root);
	free(root);
	free(good_idx);
	free(bad_idx);
	return failed ? 1 : 0;
}
