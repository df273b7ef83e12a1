/*
 * The jpeg decoder through the loader, on JPEGs this test writes with
 * libjpeg: spec checks, crops and flips fixed by (seed, epoch, sample),
 * grayscale and CMYK made RGB, progressive files, and damaged or foreign
 * files failing by name (or skipped) without taking a worker down,
 * outputs of any height and width, and the decode limits: a progressive
 * file of two thousand scans fails in milliseconds, naming the sample,
 * while ordinary progressive files pass.  Its agreement with torchvision
 * is tests/python/test_jpeg.py's.
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

#include "error.h"
#include "fixture.h"
#include "units.h"

#define S 48 /* output side */
#define NRGB 12

static char *root, *good_idx, *bad_idx, *lim_idx;
static wharf_index *good, *bad, *lim;
/* The limits' files: a scan bomb, then a 12-megapixel progressive photo. */
enum { ID_BOMB, ID_PHOTO };
#define BOMB_W 1024
#define BOMB_H 768
/* Sample ids in the good index (files sort by name). */
enum { ID_RGB = 0, ID_GRAY = NRGB, ID_CMYK, ID_PROG, NGOOD };

/*
 * The most scans libjpeg lets a 3-component file have: DC in 11 scans
 * (successive approximation, one bit each), then each of the 63 AC
 * coefficients of each component in a band of its own, in 11 scans each:
 * 2,090 scans, every one a pass over the picture.
 */
#define AL_MAX 10
#define BOMB_SCANS ((AL_MAX + 1) * (1 + 63 * 3))
static jpeg_scan_info *bomb_script(void)
{
	jpeg_scan_info *s = calloc(BOMB_SCANS, sizeof(*s));
	int n = 0;

	for (int a = AL_MAX; a >= 0; a--, n++) {
		s[n].comps_in_scan = 3;
		for (int c = 0; c < 3; c++)
			s[n].component_index[c] = c;
		s[n].Ah = a == AL_MAX ? 0 : a + 1;
		s[n].Al = a;
	}
	for (int c = 0; c < 3; c++)
		for (int k = 1; k < 64; k++)
			for (int a = AL_MAX; a >= 0; a--, n++) {
				s[n].comps_in_scan = 1;
				s[n].component_index[0] = c;
				s[n].Ss = s[n].Se = k;
				s[n].Ah = a == AL_MAX ? 0 : a + 1;
				s[n].Al = a;
			}
	return s;
}

/* scans: NULL for a baseline or simple progressive file (progressive), or
 * a scan script of nscans. */
static void write_jpeg_scans(const char *path, int w, int h, int comps,
			     J_COLOR_SPACE cs, bool progressive,
			     const unsigned char *pix,
			     const jpeg_scan_info *scans, int nscans)
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
	if (scans) {
		c.scan_info = scans;
		c.num_scans = nscans;
	}
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

static void write_jpeg(const char *path, int w, int h, int comps,
		       J_COLOR_SPACE cs, bool progressive,
		       const unsigned char *pix)
{
	write_jpeg_scans(path, w, h, comps, cs, progressive, pix, NULL, 0);
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

/* A progressive picture(w, h, seed) at root/name, with a scan script of
 * nscans or libjpeg's simple one (scans NULL). */
static void write_picture(const char *name, int w, int h, int seed,
			  const jpeg_scan_info *scans, int nscans)
{
	unsigned char *pix = picture(w, h, seed);
	char *p;

	if (asprintf(&p, "%s/%s", root, name) < 0)
		abort();
	write_jpeg_scans(p, w, h, 3, JCS_RGB, true, pix, scans, nscans);
	free(p);
	free(pix);
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
	/* The limits: the bomb, and a phone's 4000 x 3000 progressive photo
	 * (10 scans), which the defaults must let through. */
	jpeg_scan_info *script = bomb_script();
	write_picture("limits/a-bomb.jpg", BOMB_W, BOMB_H, 5, script,
		      BOMB_SCANS);
	free(script);
	write_picture("limits/b-photo.jpg", 4000, 3000, 6, NULL, 0);
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
	    {"jpeg size=32 dtype=f32 std=1,0,1 mean=0,0,0", "std="},
	    /* One without the other. */
	    {"jpeg size=32 dtype=f32 mean=0.5,0.5,0.5", "mean= needs std="},
	    {"jpeg size=32 dtype=float32 std=1,1,1", "std= needs mean="},
	    {"jpeg size=32,", "size="},
	    {"jpeg size=32,0", "size="},
	    {"jpeg size=,32", "size="},
	    {"jpeg size=32,32,3", "size="},
	    {"jpeg size=32,5000", "size="},
	    {"jpeg size=32 max_scans=-1", "max_scans="},
	    {"jpeg size=32 max_pixel_scans=1e9", "max_pixel_scans="},
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
	/* Height, width; dtypes spelled either way. */
	ck_assert_int_eq(wharf_decoder_new("jpeg size=224,160 dtype=float32 "
					   "max_scans=0 max_pixel_scans=0",
					   &d),
			 0);
	ck_assert_uint_eq(wharf_decoder_sample_bytes(d), 224 * 160 * 3 * 4);
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

/* With skip_bad, the first batch of `batch` samples holds one, sample
 * `good_id`, and counts the others skipped. */
static void check_skipped(const wharf_index *idx, struct wharf_options *o,
			  uint32_t batch, uint64_t good_id)
{
	wharf_loader *l;
	const struct wharf_batch *b;

	o->batch_size = batch;
	o->skip_bad = 1;
	ck_assert_int_eq(wharf_loader_open(idx, o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->count, 1);
	ck_assert_uint_eq(b->skipped, batch - 1);
	ck_assert_uint_eq(b->samples[0], good_id);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
}

/* H x W outputs: on the gray ramp (its value depends on x only), every
 * row of every plane is the same and rises left to right, in both layouts
 * and for wide and tall outputs alike: the sides are not swapped. */
START_TEST(height_and_width)
{
	static const struct {
		const char *spec;
		uint32_t h, w;
		bool hwc;
	} cases[] = {
	    {"jpeg size=24,64 crop=center", 24, 64, false},
	    {"jpeg size=64,24 crop=center", 64, 24, false},
	    {"jpeg size=24,64 crop=center layout=hwc", 24, 64, true},
	    {"jpeg size=40,56 scale=1,1 ratio=1.3333,1.3333 flip=0", 40, 56,
	     false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint32_t h = cases[i].h, w = cases[i].w;
		unsigned char *a = decode_all(good, cases[i].spec, 1, 0, 0, 0);
		const unsigned char *g = a + (size_t)ID_GRAY * h * w * 3;

		for (uint32_t c = 0; c < 3; c++)
			for (uint32_t y = 0; y < h; y++)
				for (uint32_t x = 0; x < w; x++) {
					const size_t at =
					    cases[i].hwc
						? ((size_t)y * w + x) * 3 + c
						: ((size_t)c * h + y) * w + x;
					const size_t row0 =
					    cases[i].hwc ? (size_t)x * 3 + c
							 : (size_t)c * h * w + x;

					ck_assert_msg(g[at] == g[row0],
						      "%s: (%u, %u, %u)",
						      cases[i].spec, c, y, x);
					if (x)
						ck_assert_msg(
						    g[at] + 1 >=
							g[at - (cases[i].hwc
								    ? 3
								    : 1)],
						    "%s: falls at x %u",
						    cases[i].spec, x);
				}
		/* The ramp is x + 20 over 200 columns: the crop is centered,
		 * and spans at least a fifth of it. */
		const int first = g[0], last = g[cases[i].hwc ? (w - 1) * 3
							    : w - 1];

		ck_assert_msg(abs((first + last) / 2 - 120) <= 4 &&
				  last - first >= 40,
			      "%s: %d to %d", cases[i].spec, first, last);
		free(a);
	}
}
END_TEST

/* Decodes the file at path with spec in this thread (the decoder's own
 * sample function, no loader): the rc, and the time it took. */
static int decode_file(const char *spec, const char *path, uint64_t *ns)
{
	struct wharf_options o;
	wharf_decoder *d;
	size_t len;
	void *in = fx_read_file(path, &len);
	uint64_t out_len, t0;
	void *out;
	int rc;

	ck_assert_ptr_nonnull(in);
	ck_assert_int_eq(wharf_decoder_new(spec, &d), 0);
	wharf_options_init(&o);
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	out = malloc(wharf_decoder_sample_bytes(d));
	t0 = now_ns();
	error_transform_clear();
	rc = o.sample_fn(o.user, 0, in, len, out, wharf_decoder_sample_bytes(d),
			 &out_len);
	*ns = now_ns() - t0;
	free(out);
	free(in);
	wharf_decoder_free(d);
	return rc;
}

/* The scan bomb fails at once by its sample and path under the default
 * limits, and decodes when they are lifted (it is a valid file); the
 * budget stops it below the scan cap; the 12-megapixel progressive photo
 * passes the defaults. */
START_TEST(decode_limits)
{
	char *bomb = path_in("limits", "a-bomb.jpg");
	struct wharf_options o;
	wharf_decoder *d;
	wharf_loader *l;
	const struct wharf_batch *b;
	uint64_t fast, full;

	ck_assert_int_eq(decode_file("jpeg size=48", bomb, &fast), -EFBIG);
	ck_assert_msg(strstr(error_transform(), "2090 scans, over "
						"max_scans=500"),
		      "%s", error_transform());
	ck_assert_int_eq(decode_file("jpeg size=48 max_scans=0 "
				     "max_pixel_scans=0",
				     bomb, &full),
			 0);
	printf("scan bomb: refused in %llu us, decoded without limits in "
	       "%llu us\n",
	       (unsigned long long)fast / 1000,
	       (unsigned long long)full / 1000);
	ck_assert_msg(fast * 20 < full,
		      "refused in %llu us, decoded in %llu us",
		      (unsigned long long)fast / 1000,
		      (unsigned long long)full / 1000);
	/* Under the scan cap, over the budget: 1024 x 768 x 2090 > 2^30. */
	ck_assert_int_eq(decode_file("jpeg size=48 max_scans=5000", bomb,
				     &fast),
			 -EFBIG);
	ck_assert_msg(strstr(error_transform(), "1024x768 pixels x 2090 "
						"scans, over "
						"max_pixel_scans=1073741824"),
		      "%s", error_transform());
	/* Through a loader: the sample and its path are named. */
	ck_assert_int_eq(wharf_decoder_new("jpeg size=48", &d), 0);
	wharf_options_init(&o);
	o.batch_size = 1;
	o.num_workers = 1;
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	ck_assert_int_eq(wharf_loader_open(lim, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), -EFBIG);
	ck_assert_msg(strstr(wharf_loader_error(l), "sample 0 (") &&
			  strstr(wharf_loader_error(l), "a-bomb.jpg") &&
			  strstr(wharf_loader_error(l), "max_scans=500"),
		      "%s", wharf_loader_error(l));
	wharf_loader_close(l);
	/* skip_bad: the photo decodes, the bomb is counted out. */
	check_skipped(lim, &o, 2, ID_PHOTO);
	wharf_decoder_free(d);
	free(bomb);
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
	check_skipped(bad, &o, 4, 0);
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
	tcase_add_test(tc, height_and_width);
	tcase_add_test(tc, decode_limits);
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
	d = path_in("limits", "");
	fx_mkdirs(d);
	free(d);
	make_files();
	good = index_of("good", &good_idx);
	bad = index_of("bad", &bad_idx);
	lim = index_of("limits", &lim_idx);
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
	wharf_index_close(lim);
	fx_rmtree(root);
	free(root);
	free(good_idx);
	free(bad_idx);
	free(lim_idx);
	return failed ? 1 : 0;
}
