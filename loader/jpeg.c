/*
 * jpeg: the jpeg decoder.  libjpeg-turbo decodes only what the crop needs,
 * and a separable resampler makes the output.
 *
 * Work saved per sample, cheapest first:
 *  - rows below the crop are never decoded (the decode stops there), rows
 *    above are skipped (jpeg_skip_scanlines: entropy decoding only), and
 *    columns left and right of it are not transformed (jpeg_crop_scanline,
 *    to the nearest iMCU boundary);
 *  - when the crop is larger than the output, the DCT itself scales it
 *    down (scale_num/8, the smallest that keeps the crop at least as large
 *    as the output), so IDCT, upsampling and color conversion run on fewer
 *    pixels and the resampler only finishes the job.
 *
 * The resampler is PIL's (which torchvision uses on PIL images): a
 * triangle filter widened by the downscaling factor (antialias), the same
 * tap positions, a horizontal then a vertical pass with 8-bit rounding in
 * between; only its weights are rounded to 14 bits instead of 22, so that
 * SSE2 multiplies them in 16-bit lanes.  At a DCT scale of 8/8 the center
 * crop agrees with torchvision's to about a hundredth of a level of 255
 * (tests/python/test_jpeg.py).
 *
 * Copies: the decoder writes the crop's rows into a private buffer (four
 * bytes a pixel), the horizontal pass into a second one (output width),
 * and the vertical pass straight into the ring slot.  Our buffers grow to
 * the largest need seen and then stay; libjpeg itself allocates its
 * per-image pools at each jpeg_start_decompress(), which it does not let a
 * caller avoid.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <wharf/loader.h>

#include "jpeg.h"

#define JPEG_MAX_SIZE 4096
/* Larger images are refused: a header can claim 65500 x 65500, and the
 * rows of the crop are kept whole. */
#define JPEG_MAX_PIXELS (1ull << 26)
/* Decode limits (max_scans=, max_pixel_scans=; include/wharf/decode.h
 * argues the numbers).  A progressive file may have any number of scans,
 * each a pass over the whole coefficient buffer: a few megabytes of them
 * make one sample cost half a minute. */
#define JPEG_MAX_SCANS 500
#define JPEG_MAX_PIXEL_SCANS (1ull << 30)
/* Fixed-point weights.  PIL uses 22 bits; 14 fit the 16-bit lanes that
 * SSE2 multiplies, and move an output by a level only where its exact
 * value lies within a few hundredths of a level of a rounding boundary. */
#define WEIGHT_BITS 14
/* Lanes of the row loops: GCC's -O2 cost model vectorizes a loop of a
 * fixed trip count, not one of a trip count known only at run time. */
#define LANES 16
/* Python's rounding of a crop offset: half to even. */
#define ROUND_EVEN(x) ((int)nearbyint(x))

struct jpeg_err {
	struct jpeg_error_mgr pub;
	jmp_buf jump; /* 1: libjpeg's error; JUMP_LIMIT: over a limit */
	char msg[JMSG_LENGTH_MAX];
};
#define JUMP_LIMIT 2

/* Taps of one output pixel: n weights from input position first. */
struct tap {
	int first, n;
};

/* Per process: made by the first sample, grown, never shrunk. */
struct jpeg_state {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_err err;
	struct jpeg_progress_mgr progress; /* checks the limits per scan */
	const struct jpegdec *j;
	unsigned char *pix; /* decoded rows of the crop */
	size_t pix_cap;
	unsigned char *mid; /* after the horizontal pass: rows x width x 3 */
	size_t mid_cap;
	int32_t *kx, *ky; /* weights, ksize per output (kx paired for SSE2) */
	size_t kx_cap, ky_cap;
	struct tap *tx, *ty; /* width and height of them */
	int32_t *acc;	     /* one output row, width x 3 */
	unsigned char *row;  /* the same row, rounded */
};

struct jpegdec {
	uint32_t w, h;		  /* output width and height */
	uint32_t max_scans;	  /* 0: no cap */
	uint64_t max_pixel_scans; /* 0: no budget */
	bool center, flip, f32, chw;
	double scale[2];
	double log_ratio[2];
	float mul[3], add[3]; /* f32: value * mul + add */
	struct jpeg_state *st;
};

/* The crop in source pixels: the box to resample, and the frame the
 * filter may read (the crop itself for RandomResizedCrop, which crops
 * first; the whole image for the eval transform, which resizes first). */
struct crop {
	double x0, y0, x1, y1;
	double lo_x, lo_y, hi_x, hi_y;
};

/* ---------------------------------------------------------------- spec */

/* n numbers separated by commas. */
static int parse_numbers(const char *s, double *v, int n)
{
	char *end;

	for (int i = 0; i < n; i++) {
		errno = 0;
		v[i] = strtod(s, &end);
		if (errno || end == s || !isfinite(v[i]))
			return -EINVAL;
		if (i + 1 < n && *end != ',')
			return -EINVAL;
		s = end + (i + 1 < n);
	}
	return *end ? -EINVAL : 0;
}

static int parse_crop(struct jpegdec *j, const struct jpegdec_words *w,
		      const char **why)
{
	double r[2] = {3.0 / 4.0, 4.0 / 3.0};

	j->scale[0] = 0.08;
	j->scale[1] = 1.0;
	if (!w->crop || !strcmp(w->crop, "random-resized"))
		j->center = false;
	else if (!strcmp(w->crop, "center"))
		j->center = true;
	else
		return *why = "crop= must be random-resized or center", -EINVAL;
	if (w->scale && (parse_numbers(w->scale, j->scale, 2) ||
			 j->scale[0] <= 0 || j->scale[0] > j->scale[1]))
		return *why = "scale= must be MIN,MAX with 0 < MIN <= MAX",
		       -EINVAL;
	if (w->ratio &&
	    (parse_numbers(w->ratio, r, 2) || r[0] <= 0 || r[0] > r[1]))
		return *why = "ratio= must be MIN,MAX with 0 < MIN <= MAX",
		       -EINVAL;
	j->log_ratio[0] = log(r[0]);
	j->log_ratio[1] = log(r[1]);
	/* Flips are for training: off by default with the eval crop. */
	j->flip = !j->center;
	if (w->flip && strcmp(w->flip, "0") && strcmp(w->flip, "1"))
		return *why = "flip= must be 0 or 1", -EINVAL;
	if (w->flip)
		j->flip = w->flip[0] == '1';
	return 0;
}

static int parse_format(struct jpegdec *j, const struct jpegdec_words *w,
			const char **why)
{
	double mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};

	if (!w->dtype || !strcmp(w->dtype, "u8"))
		j->f32 = false;
	else if (!strcmp(w->dtype, "f32"))
		j->f32 = true;
	else
		return *why = "dtype= must be u8 or f32", -EINVAL;
	if (!w->layout || !strcmp(w->layout, "chw"))
		j->chw = true;
	else if (!strcmp(w->layout, "hwc"))
		j->chw = false;
	else
		return *why = "layout= must be chw or hwc", -EINVAL;
	if ((w->mean || w->std) && !j->f32)
		return *why = "mean= and std= need dtype=f32", -EINVAL;
	/* One without the other is a mistake, not a request for a default. */
	if (!w->mean != !w->std)
		return *why = w->mean
				  ? "mean= needs std= (give both or neither)"
				  : "std= needs mean= (give both or neither)",
		       -EINVAL;
	if (w->mean && parse_numbers(w->mean, mean, 3))
		return *why = "mean= must be three numbers R,G,B", -EINVAL;
	if (w->std && (parse_numbers(w->std, std, 3) || std[0] <= 0 ||
		       std[1] <= 0 || std[2] <= 0))
		return *why = "std= must be three positive numbers R,G,B",
		       -EINVAL;
	/* ToTensor then Normalize: (v / 255 - mean) / std. */
	for (int c = 0; c < 3; c++) {
		j->mul[c] = (float)(1.0 / (255.0 * std[c]));
		j->add[c] = (float)(-mean[c] / std[c]);
	}
	return 0;
}

/* An output side: 1 to JPEG_MAX_SIZE pixels, ending at *end. */
static int parse_side(const char *s, char **end, uint32_t *side)
{
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, end, 10);
	if (errno || !v || v > JPEG_MAX_SIZE)
		return -EINVAL;
	*side = (uint32_t)v;
	return 0;
}

/* size=S (a square) or size=H,W, torchvision's (height, width). */
static int parse_size(struct jpegdec *j, const char *s)
{
	char *end;

	if (!s || parse_side(s, &end, &j->h))
		return -EINVAL;
	j->w = j->h;
	if (*end == ',' && parse_side(end + 1, &end, &j->w))
		return -EINVAL;
	return *end ? -EINVAL : 0;
}

/* A limit: a count, 0 for none. */
static int parse_limit(const char *s, uint64_t max, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || *v > max ? -EINVAL : 0;
}

static int parse_limits(struct jpegdec *j, const struct jpegdec_words *w,
			const char **why)
{
	uint64_t v = JPEG_MAX_SCANS;

	if (w->max_scans && parse_limit(w->max_scans, UINT32_MAX, &v))
		return *why = "max_scans= must be a scan count (0: no cap)",
		       -EINVAL;
	j->max_scans = (uint32_t)v;
	j->max_pixel_scans = JPEG_MAX_PIXEL_SCANS;
	if (w->max_pixel_scans &&
	    parse_limit(w->max_pixel_scans, UINT64_MAX, &j->max_pixel_scans))
		return *why = "max_pixel_scans= must be a count of pixels "
			      "times scans (0: no budget)",
		       -EINVAL;
	return 0;
}

int jpegdec_new(const struct jpegdec_words *w, struct jpegdec **out,
		const char **why)
{
	struct jpegdec *j = calloc(1, sizeof(*j));
	int rc;

	*out = NULL;
	if (!j)
		return *why = "out of memory", -ENOMEM;
	rc = parse_size(j, w->size);
	if (rc) {
		*why = "size= must be S or H,W: sides of 1 to 4096 pixels";
		goto out;
	}
	rc = parse_crop(j, w, why);
	if (!rc)
		rc = parse_format(j, w, why);
	if (!rc)
		rc = parse_limits(j, w, why);
out:
	if (rc) {
		free(j);
		return rc;
	}
	*out = j;
	return 0;
}

uint64_t jpegdec_out_bytes(const struct jpegdec *j)
{
	return (uint64_t)j->w * j->h * 3 * (j->f32 ? 4 : 1);
}

/* ---------------------------------------------------------- randomness */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [a, b). */
static double rng_uniform(uint64_t *s, double a, double b)
{
	return a + (b - a) * (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n]. */
static int rng_upto(uint64_t *s, int n)
{
	return (int)((double)(n + 1) * (double)(rng_next(s) >> 11) * 0x1.0p-53);
}

/* torchvision's RandomResizedCrop.get_params, with our generator: ten
 * tries at an area and an aspect ratio, else the whole image clamped to
 * the ratio range. */
static void random_crop(const struct jpegdec *j, int W, int H, uint64_t *rng,
			struct crop *c)
{
	const double area = (double)W * H;
	int w = 0, h = 0, x, y;

	for (int t = 0; t < 10; t++) {
		const double target =
		    area * rng_uniform(rng, j->scale[0], j->scale[1]);
		const double aspect =
		    exp(rng_uniform(rng, j->log_ratio[0], j->log_ratio[1]));

		/* Compared as doubles: a scale= or ratio= far past 1 gives
		 * sides that no int holds. */
		const double fw = nearbyint(sqrt(target * aspect));
		const double fh = nearbyint(sqrt(target / aspect));

		if (fw > 0 && fw <= W && fh > 0 && fh <= H) {
			w = (int)fw;
			h = (int)fh;
			y = rng_upto(rng, H - h);
			x = rng_upto(rng, W - w);
			goto found;
		}
	}
	{
		const double in = (double)W / H;
		const double lo = exp(j->log_ratio[0]);
		const double hi = exp(j->log_ratio[1]);

		w = W;
		h = H;
		if (in < lo)
			h = ROUND_EVEN(W / lo);
		else if (in > hi)
			w = ROUND_EVEN(H * hi);
		y = (H - h) / 2;
		x = (W - w) / 2;
	}
found:
	c->x0 = c->lo_x = x;
	c->y0 = c->lo_y = y;
	c->x1 = c->hi_x = x + w;
	c->y1 = c->hi_y = y + h;
}

/* torchvision's eval transform: Resize(size / 0.875) of the short side,
 * then CenterCrop(size), as one box on the source image.  For an output
 * of h x w, the picture is resized (aspect kept) until it covers
 * h / 0.875 x w / 0.875, which for a square is that rule. */
static void center_crop(const struct jpegdec *j, int W, int H, struct crop *c)
{
	const int sw = (int)(j->w / 0.875 + 1e-9);
	const int sh = (int)(j->h / 0.875 + 1e-9);
	int rw, rh, left, top;
	double fx, fy;

	/* Resize's output size: the other side truncated, as torchvision.
	 * The width binds when sw / W >= sh / H. */
	if ((int64_t)sw * H >= (int64_t)sh * W) {
		rw = sw;
		rh = (int)((double)sw * H / W);
	} else {
		rh = sh;
		rw = (int)((double)sh * W / H);
	}
	left = ROUND_EVEN((rw - (int)j->w) / 2.0);
	top = ROUND_EVEN((rh - (int)j->h) / 2.0);
	fx = (double)W / rw;
	fy = (double)H / rh;
	c->x0 = left * fx;
	c->x1 = (left + j->w) * fx;
	c->y0 = top * fy;
	c->y1 = (top + j->h) * fy;
	c->lo_x = c->lo_y = 0;
	c->hi_x = W;
	c->hi_y = H;
}

/* ----------------------------------------------------------- resampler */

static int ksize_for(double b0, double b1, uint32_t out)
{
	const double scale = (b1 - b0) / out;

	return (int)ceil(scale > 1 ? scale : 1) * 2 + 1;
}

/*
 * PIL's precompute_coeffs for the bilinear filter: out taps resampling
 * the box [b0, b1) of a line whose frame is [0, len), as positions in the
 * frame and fixed-point weights (ksize per tap).
 */
static void make_taps(double b0, double b1, int len, uint32_t out, int ksize,
		      int bits, struct tap *tap, int32_t *k)
{
	const double scale = (b1 - b0) / out;
	const double fs = scale > 1 ? scale : 1;
	const double support = fs;
	double w[ksize];

	for (uint32_t o = 0; o < out; o++) {
		const double center = b0 + (o + 0.5) * scale;
		int lo = (int)(center - support + 0.5);
		int hi = (int)(center + support + 0.5);
		double sum = 0;

		if (lo < 0)
			lo = 0;
		if (hi > len)
			hi = len;
		if (hi - lo > ksize)
			hi = lo + ksize;
		for (int x = lo; x < hi; x++) {
			double t = fabs((x - center + 0.5) / fs);

			w[x - lo] = t < 1 ? 1 - t : 0;
			sum += w[x - lo];
		}
		for (int x = 0; x < hi - lo; x++) {
			const double v = sum ? w[x] / sum : 0;

			k[(size_t)o * ksize + x] =
			    (int32_t)trunc(v * (1 << bits) + 0.5);
		}
		tap[o].first = lo;
		tap[o].n = hi - lo;
	}
}

static unsigned char clip8(int32_t v, int bits)
{
	v >>= bits;
	return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

#ifdef __SSE2__
/* The weights of each output as pairs (two 16-bit weights in one int32,
 * zero after an odd last one), in place: what pixel_x() multiplies by. */
static void pair_weights(int32_t *k, const struct tap *tap, uint32_t out,
			 int ksize)
{
	for (uint32_t o = 0; o < out; o++) {
		int32_t *w = k + (size_t)o * ksize;

		for (int t = 0; t < tap[o].n; t += 2) {
			const uint32_t hi =
			    t + 1 < tap[o].n ? (uint32_t)w[t + 1] : 0;

			w[t / 2] = (int32_t)((uint32_t)w[t] | hi << 16);
		}
	}
}

/* One output pixel of the horizontal pass: n 4-byte pixels at p weighted
 * by the pairs kp, as 0x00BBGGRR.  Two pixels a step: their bytes widened
 * to 16 bits and paired by channel, so that one multiply-add (pmaddwd)
 * gives the four channels' sums of both.  An odd last step reads a pixel
 * past the taps (weight 0): the rows are padded for it. */
static uint32_t pixel_x(const unsigned char *p, const int32_t *kp, int n)
{
	const __m128i zero = _mm_setzero_si128();
	__m128i acc = _mm_set1_epi32(1 << (WEIGHT_BITS - 1));

	for (int t = 0; t < n; t += 2) {
		__m128i px = _mm_loadl_epi64((const __m128i *)(p + 4 * t));

		px = _mm_unpacklo_epi8(px, zero);
		px = _mm_unpacklo_epi16(px, _mm_srli_si128(px, 8));
		acc = _mm_add_epi32(
		    acc, _mm_madd_epi16(px, _mm_set1_epi32(kp[t / 2])));
	}
	acc = _mm_srai_epi32(acc, WEIGHT_BITS);
	acc = _mm_packs_epi32(acc, acc);
	return (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(acc, acc));
}
#else
/* The same sums in plain C, for targets without SSE2. */
static uint32_t pixel_x(const unsigned char *p, const int32_t *k, int n)
{
	int32_t sum[3] = {1 << (WEIGHT_BITS - 1), 1 << (WEIGHT_BITS - 1),
			  1 << (WEIGHT_BITS - 1)};

	for (int t = 0; t < n; t++)
		for (int c = 0; c < 3; c++)
			sum[c] += p[4 * t + c] * k[t];
	return clip8(sum[0], WEIGHT_BITS) |
	       (uint32_t)clip8(sum[1], WEIGHT_BITS) << 8 |
	       (uint32_t)clip8(sum[2], WEIGHT_BITS) << 16;
}
#endif

/* Horizontal pass over rows [0, rows) of src (4 bytes a pixel: RGB and
 * one unused, stride bytes a row) into mid, mirrored when flip.  A row of
 * mid is planar (size red values, then green, then blue): the CHW output
 * is then a copy. */
static void pass_x(const struct jpegdec *j, const struct jpeg_state *st,
		   int ksize, const unsigned char *src, size_t stride, int rows,
		   bool flip)
{
	const uint32_t S = j->w;

	for (int y = 0; y < rows; y++) {
		const unsigned char *row = src + (size_t)y * stride;
		unsigned char *dst = st->mid + (size_t)y * S * 3;

		for (uint32_t o = 0; o < S; o++) {
			const uint32_t v =
			    pixel_x(row + 4 * st->tx[o].first,
				    st->kx + (size_t)o * ksize, st->tx[o].n);
			unsigned char *q = dst + (flip ? S - 1 - o : o);

			q[0] = (unsigned char)v;
			q[S] = (unsigned char)(v >> 8);
			q[2 * S] = (unsigned char)(v >> 16);
		}
	}
}

/* o = v * mul + add over n values. */
static void row_float(float *restrict o, const unsigned char *restrict v,
		      float mul, float add, size_t n)
{
	size_t x = 0;

	for (; x + LANES <= n; x += LANES)
		for (int i = 0; i < LANES; i++)
			o[x + i] = v[x + i] * mul + add;
	for (; x < n; x++)
		o[x] = v[x] * mul + add;
}

/* Output row i (planar, as mid) into the slot. */
static void store_row(const struct jpegdec *j, const unsigned char *v,
		      uint32_t i, void *out)
{
	const uint32_t S = j->w;
	const size_t plane = (size_t)S * j->h;

	if (j->chw && !j->f32) {
		for (int c = 0; c < 3; c++)
			memcpy((unsigned char *)out + c * plane + (size_t)i * S,
			       v + (size_t)c * S, S);
	} else if (j->chw) {
		for (int c = 0; c < 3; c++)
			row_float((float *)out + c * plane + (size_t)i * S,
				  v + (size_t)c * S, j->mul[c], j->add[c], S);
	} else if (!j->f32) {
		unsigned char *o = (unsigned char *)out + (size_t)i * S * 3;

		for (uint32_t x = 0; x < S; x++)
			for (int c = 0; c < 3; c++)
				o[3 * x + c] = v[c * S + x];
	} else {
		float *o = (float *)out + (size_t)i * S * 3;

		for (uint32_t x = 0; x < S; x++)
			for (int c = 0; c < 3; c++)
				o[3 * x + c] =
				    v[c * S + x] * j->mul[c] + j->add[c];
	}
}

/* acc = m * k (+ acc unless first) over n values. */
static void row_mac(int32_t *restrict acc, const unsigned char *restrict m,
		    int16_t k, bool first, size_t n)
{
	const int32_t half = 1 << (WEIGHT_BITS - 1);
	size_t x = 0;

	if (first) {
		for (; x + LANES <= n; x += LANES)
			for (int i = 0; i < LANES; i++)
				acc[x + i] = half + (int16_t)m[x + i] * k;
		for (; x < n; x++)
			acc[x] = half + (int16_t)m[x] * k;
		return;
	}
	for (; x + LANES <= n; x += LANES)
		for (int i = 0; i < LANES; i++)
			acc[x + i] += (int16_t)m[x + i] * k;
	for (; x < n; x++)
		acc[x] += (int16_t)m[x] * k;
}

/* v = acc rounded to 8 bits, over n values. */
static void row_round(unsigned char *restrict v, const int32_t *restrict acc,
		      size_t n)
{
	size_t x = 0;

	for (; x + LANES <= n; x += LANES)
		for (int i = 0; i < LANES; i++)
			v[x + i] = clip8(acc[x + i], WEIGHT_BITS);
	for (; x < n; x++)
		v[x] = clip8(acc[x], WEIGHT_BITS);
}

#ifdef __SSE2__
/*
 * One output row of the vertical pass in SSE2: n rows of len bytes,
 * stride apart from m, weighted by k, into v.  Two rows a step, their
 * bytes paired so that one multiply-add (pmaddwd) weighs both; the sums
 * stay in registers and are rounded and saturated by packing.  The same
 * integers as row_mac() and row_round(): the same output.  Returns the
 * bytes done (a multiple of 16); the caller finishes the rest.
 */
static size_t row_y(unsigned char *v, const unsigned char *m, size_t stride,
		    const int32_t *k, int n, size_t len)
{
	const __m128i zero = _mm_setzero_si128();
	const __m128i half = _mm_set1_epi32(1 << (WEIGHT_BITS - 1));
	size_t x = 0;

	for (; x + 16 <= len; x += 16) {
		__m128i a[4] = {half, half, half, half};

		for (int t = 0; t < n; t += 2) {
			const __m128i p = _mm_loadu_si128(
			    (const __m128i *)(m + (size_t)t * stride + x));
			/* An odd last row is paired with zeros. */
			const __m128i q =
			    t + 1 < n ? _mm_loadu_si128(
					    (const __m128i *)(m +
							      (size_t)(t + 1) *
								  stride +
							      x))
				      : zero;
			const uint32_t k1 = t + 1 < n ? (uint32_t)k[t + 1] : 0;
			const __m128i kk = _mm_set1_epi32(
			    (int32_t)((uint32_t)k[t] | k1 << 16));
			const __m128i lo = _mm_unpacklo_epi8(p, q);
			const __m128i hi = _mm_unpackhi_epi8(p, q);

			a[0] = _mm_add_epi32(
			    a[0],
			    _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), kk));
			a[1] = _mm_add_epi32(
			    a[1],
			    _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), kk));
			a[2] = _mm_add_epi32(
			    a[2],
			    _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), kk));
			a[3] = _mm_add_epi32(
			    a[3],
			    _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), kk));
		}
		for (int i = 0; i < 4; i++)
			a[i] = _mm_srai_epi32(a[i], WEIGHT_BITS);
		_mm_storeu_si128((__m128i *)(v + x),
				 _mm_packus_epi16(_mm_packs_epi32(a[0], a[1]),
						  _mm_packs_epi32(a[2], a[3])));
	}
	return x;
}
#endif

/* Vertical pass: mid's rows (row 0 is source row first_row) into out. */
static void pass_y(const struct jpegdec *j, const struct jpeg_state *st,
		   int ksize, int first_row, void *out)
{
	const size_t n = (size_t)j->w * 3;

	for (uint32_t i = 0; i < j->h; i++) {
		const int32_t *k = st->ky + (size_t)i * ksize;
		const unsigned char *m =
		    st->mid + (size_t)(st->ty[i].first - first_row) * n;

		size_t done = 0;

#ifdef __SSE2__
		done = row_y(st->row, m, n, k, st->ty[i].n, n);
#endif
		/* Every output has at least one tap. */
		for (int t = 0; t < st->ty[i].n; t++)
			row_mac(st->acc + done, m + (size_t)t * n + done,
				(int16_t)k[t], t == 0, n - done);
		row_round(st->row + done, st->acc + done, n - done);
		store_row(j, st->row, i, out);
	}
}

/* -------------------------------------------------------------- limits */

/*
 * The scans of a JPEG stream (its SOS markers) up to EOI, without decoding:
 * segments are skipped by their lengths, and in entropy-coded data a 0xFF
 * is followed by 0 (a stuffed byte) or a restart marker, never by another
 * marker's code.  Milliseconds for megabytes, so that a file over the
 * limits is refused before libjpeg allocates its coefficients.
 */
static uint64_t count_scans(const unsigned char *p, size_t n)
{
	uint64_t scans = 0;
	size_t i = 2; /* past SOI */

	while (i + 1 < n) {
		const unsigned char *ff = memchr(p + i, 0xFF, n - i - 1);
		unsigned m;

		if (!ff)
			break;
		i = (size_t)(ff - p);
		m = p[i + 1];
		if (m == 0xD9) /* EOI */
			break;
		/* Fill bytes, stuffed zeros, restarts, SOI and TEM stand
		 * alone; every other marker has a length. */
		if (m == 0xFF || m == 0x00 || m == 0x01 ||
		    (m >= 0xD0 && m <= 0xD8)) {
			i += m == 0xFF ? 1 : 2;
			continue;
		}
		if (i + 3 >= n)
			break;
		scans += m == 0xDA;
		i += 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
	}
	return scans;
}

/* Whether a W x H picture of `scans` scans (at_least: of that many or
 * more) is over j's limits; *msg then says which, and how to raise it. */
static bool over_limits(const struct jpegdec *j, unsigned W, unsigned H,
			uint64_t scans, bool at_least, char *msg, size_t len)
{
	const char *more = at_least ? "at least " : "";

	if (j->max_scans && scans > j->max_scans) {
		snprintf(msg, len,
			 "jpeg: %s%llu scans, over max_scans=%u (raise it; "
			 "0: no cap)",
			 more, (unsigned long long)scans, j->max_scans);
		return true;
	}
	if (j->max_pixel_scans &&
	    (uint64_t)W * H * scans > j->max_pixel_scans) {
		snprintf(msg, len,
			 "jpeg: %ux%u pixels x %s%llu scans, over "
			 "max_pixel_scans=%llu (raise it; 0: none)",
			 W, H, more, (unsigned long long)scans,
			 (unsigned long long)j->max_pixel_scans);
		return true;
	}
	return false;
}

/* libjpeg's progress hook: its own count of scans, checked as it reads
 * them, for a file whose markers count_scans() read otherwise. */
static void on_progress(j_common_ptr cinfo)
{
	struct jpeg_state *st =
	    (struct jpeg_state *)(void *)((char *)cinfo -
					  offsetof(struct jpeg_state, cinfo));
	const struct jpeg_decompress_struct *ci = &st->cinfo;

	if (over_limits(st->j, ci->image_width, ci->image_height,
			(uint64_t)ci->input_scan_number, true, st->err.msg,
			sizeof(st->err.msg)))
		longjmp(st->err.jump, JUMP_LIMIT);
}

/* ------------------------------------------------------------- decoder */

static void on_error(j_common_ptr cinfo)
{
	struct jpeg_err *e = (struct jpeg_err *)(void *)cinfo->err;

	cinfo->err->format_message(cinfo, e->msg);
	longjmp(e->jump, 1);
}

/* Warnings mean damaged data (libjpeg fills what it cannot decode with
 * gray): such a sample fails, as PIL refuses a truncated file.  Bytes
 * after the image are harmless and allowed. */
static void on_message(j_common_ptr cinfo, int level)
{
	if (level < 0 && cinfo->err->msg_code != JWRN_EXTRANEOUS_DATA)
		on_error(cinfo);
}

static int grow(void **p, size_t *cap, size_t need)
{
	void *q;

	if (need <= *cap)
		return 0;
	q = realloc(*p, need);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = need;
	return 0;
}

/* Frees what state_make() made; the decompressor only when it was made. */
static void state_free(struct jpeg_state *st)
{
	if (!st)
		return;
	if (st->cinfo.mem)
		jpeg_destroy_decompress(&st->cinfo);
	free(st->pix);
	free(st->mid);
	free(st->kx);
	free(st->ky);
	free(st->tx);
	free(st->ty);
	free(st->acc);
	free(st->row);
	free(st);
}

static int state_make(struct jpegdec *j)
{
	struct jpeg_state *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->tx = calloc(j->w, sizeof(*st->tx));
	st->ty = calloc(j->h, sizeof(*st->ty));
	st->acc = calloc((size_t)j->w * 3, sizeof(*st->acc));
	st->row = malloc((size_t)j->w * 3);
	if (!st->tx || !st->ty || !st->acc || !st->row)
		goto fail;
	st->cinfo.err = jpeg_std_error(&st->err.pub);
	st->err.pub.error_exit = on_error;
	st->err.pub.emit_message = on_message;
	st->progress.progress_monitor = on_progress;
	st->j = j;
	/* Only an allocation in jpeg_create_decompress can fail. */
	if (setjmp(st->err.jump))
		goto fail;
	jpeg_create_decompress(&st->cinfo);
	st->cinfo.progress = &st->progress;
	j->st = st;
	return 0;
fail:
	state_free(st);
	return -ENOMEM;
}

/*
 * The smallest DCT scale n/8 that keeps the box at least min_w pixels wide
 * and min_h high.  Random crops take min = the output size (PIL's draft()
 * rule): the DCT's own downscale is a sound filter, and most of the saving. The
 * eval crop takes twice that, so that it stays within a fraction of a level
 * of torchvision's output (at min = size, photographs of fine texture differ
 * by a few levels, since the two filters are not the same).
 */
static unsigned dct_scale(const struct crop *c, uint32_t min_w, uint32_t min_h)
{
	/* Only the scales libjpeg-turbo has SIMD code for: at 3/8, 5/8, 6/8
	 * and 7/8 its plain C IDCTs cost more than the pixels saved. */
	for (unsigned n = 1; n < 8; n *= 2)
		if ((c->x1 - c->x0) * n / 8 >= min_w &&
		    (c->y1 - c->y0) * n / 8 >= min_h)
			return n;
	return 8;
}

/* CMYK rows (Adobe's inverted form, as PIL reads them) to RGBX in
 * place. */
static void cmyk_to_rgb(unsigned char *p, size_t stride, int rows, int width)
{
	for (int y = 0; y < rows; y++) {
		unsigned char *px = p + (size_t)y * stride;

		for (int x = 0; x < width; x++, px += 4) {
			const unsigned k = px[3];

			for (int c = 0; c < 3; c++) {
				const unsigned t = px[c] * k + 128;

				px[c] = (unsigned char)(((t >> 8) + t) >> 8);
			}
		}
	}
}

static void span(const struct tap *t, int *lo, int *hi)
{
	if (t->first < *lo)
		*lo = t->first;
	if (t->first + t->n > *hi)
		*hi = t->first + t->n;
}

/* Scales the crop to the decoded size and makes the taps; [*x0, *x1) and
 * [*y0, *y1) are the columns and rows they read. */
static int plan(const struct jpegdec *j, struct jpeg_state *st,
		const struct crop *c, double fx, double fy, int kx, int ky,
		int out_w, int out_h, int *x0, int *x1, int *y0, int *y1)
{
	const int lx = (int)floor(c->lo_x * fx), ly = (int)floor(c->lo_y * fy);
	int hx = (int)ceil(c->hi_x * fx), hy = (int)ceil(c->hi_y * fy);

	if (hx > out_w)
		hx = out_w;
	if (hy > out_h)
		hy = out_h;
	if (grow((void **)&st->kx, &st->kx_cap,
		 (size_t)j->w * kx * sizeof(int32_t)) ||
	    grow((void **)&st->ky, &st->ky_cap,
		 (size_t)j->h * ky * sizeof(int32_t)))
		return -ENOMEM;
	make_taps(c->x0 * fx - lx, c->x1 * fx - lx, hx - lx, j->w, kx,
		  WEIGHT_BITS, st->tx, st->kx);
	make_taps(c->y0 * fy - ly, c->y1 * fy - ly, hy - ly, j->h, ky,
		  WEIGHT_BITS, st->ty, st->ky);
#ifdef __SSE2__
	pair_weights(st->kx, st->tx, j->w, kx);
#endif
	*x0 = *y0 = INT32_MAX;
	*x1 = *y1 = 0;
	for (uint32_t o = 0; o < j->w; o++) {
		st->tx[o].first += lx;
		span(&st->tx[o], x0, x1);
	}
	for (uint32_t o = 0; o < j->h; o++) {
		st->ty[o].first += ly;
		span(&st->ty[o], y0, y1);
	}
	if (*x1 <= *x0)
		*x1 = *x0 + 1;
	if (*y1 <= *y0)
		*y1 = *y0 + 1;
	return 0;
}

/* Reads rows [y0, y1) of the crop's columns into st->pix. */
static void read_rows(struct jpeg_state *st, int y0, int y1, size_t stride)
{
	struct jpeg_decompress_struct *ci = &st->cinfo;
	JSAMPROW rows[16];

	if (y0 > 0)
		jpeg_skip_scanlines(ci, (JDIMENSION)y0);
	while (ci->output_scanline < (JDIMENSION)y1) {
		const int at = (int)ci->output_scanline - y0;
		int n = y1 - (int)ci->output_scanline;

		if (n > 16)
			n = 16;
		for (int r = 0; r < n; r++)
			rows[r] = st->pix + (size_t)(at + r) * stride;
		jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
	}
}

/* Everything libjpeg does for one sample; errors longjmp to the caller. */
static int decode(struct jpegdec *j, const void *in, uint64_t in_len, void *out)
{
	struct jpeg_state *st = j->st;
	struct jpeg_decompress_struct *ci = &st->cinfo;
	uint64_t rng = wharf_sample_seed();
	struct crop c;
	int W, H, x0, x1, y0, y1, kx, ky;
	JDIMENSION xoff, xw;
	bool cmyk, flip;
	double fx, fy;

	jpeg_mem_src(ci, in, (unsigned long)in_len);
	jpeg_read_header(ci, TRUE);
	W = (int)ci->image_width;
	H = (int)ci->image_height;
	if ((uint64_t)W * (uint64_t)H > JPEG_MAX_PIXELS) {
		wharf_set_error("jpeg: %dx%d is larger than %llu pixels", W, H,
				(unsigned long long)JPEG_MAX_PIXELS);
		return -EFBIG;
	}
	if (over_limits(j, (unsigned)W, (unsigned)H, count_scans(in, in_len),
			false, st->err.msg, sizeof(st->err.msg))) {
		wharf_set_error("%s", st->err.msg);
		return -EFBIG;
	}
	if (j->center)
		center_crop(j, W, H, &c);
	else
		random_crop(j, W, H, &rng, &c);
	/* The flip is drawn after the crop, as torchvision's pipeline. */
	flip = j->flip && rng_uniform(&rng, 0, 1) < 0.5;
	cmyk = ci->jpeg_color_space == JCS_CMYK ||
	       ci->jpeg_color_space == JCS_YCCK;
	/* Four bytes a pixel, whatever the file: the horizontal pass reads
	 * two pixels in eight bytes. */
	ci->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX;
	ci->dct_method = JDCT_ISLOW;
	ci->scale_num = j->center ? dct_scale(&c, 2 * j->w, 2 * j->h)
				  : dct_scale(&c, j->w, j->h);
	ci->scale_denom = 8;
	jpeg_start_decompress(ci);
	fx = (double)ci->output_width / W;
	fy = (double)ci->output_height / H;
	kx = ksize_for(c.x0 * fx, c.x1 * fx, j->w);
	ky = ksize_for(c.y0 * fy, c.y1 * fy, j->h);
	if (plan(j, st, &c, fx, fy, kx, ky, (int)ci->output_width,
		 (int)ci->output_height, &x0, &x1, &y0, &y1))
		return -ENOMEM;
	xoff = (JDIMENSION)x0;
	xw = (JDIMENSION)(x1 - x0);
	if (xw < ci->output_width)
		jpeg_crop_scanline(ci, &xoff, &xw);
	/* 4 bytes of padding: pixel_x() may read one pixel past a row. */
	if (grow((void **)&st->pix, &st->pix_cap,
		 (size_t)(y1 - y0) * xw * 4 + 4) ||
	    grow((void **)&st->mid, &st->mid_cap, (size_t)(y1 - y0) * j->w * 3))
		return -ENOMEM;
	read_rows(st, y0, y1, (size_t)xw * 4);
	/* Rows below the crop are not needed: stop here. */
	jpeg_abort_decompress(ci);
	if (cmyk)
		cmyk_to_rgb(st->pix, (size_t)xw * 4, y1 - y0, (int)xw);
	for (uint32_t o = 0; o < j->w; o++)
		st->tx[o].first -= (int)xoff;
	pass_x(j, st, kx, st->pix, (size_t)xw * 4, y1 - y0, flip);
	pass_y(j, st, ky, y0, out);
	return 0;
}

int jpegdec_sample(void *user, uint64_t sample, const void *in, uint64_t in_len,
		   void *out, uint64_t out_cap, uint64_t *out_len)
{
	struct jpegdec *j = user;
	int rc, jump;

	if (out_cap < jpegdec_out_bytes(j))
		return -ENOBUFS;
	if (!j->st && state_make(j))
		return -ENOMEM;
	jump = setjmp(j->st->err.jump);
	if (jump) {
		jpeg_abort_decompress(&j->st->cinfo);
		if (jump == JUMP_LIMIT) {
			wharf_set_error("%s", j->st->err.msg);
			return -EFBIG;
		}
		wharf_set_error("not a JPEG, or a damaged one (%llu bytes): %s",
				(unsigned long long)in_len, j->st->err.msg);
		return -EINVAL;
	}
	rc = decode(j, in, in_len, out);
	if (rc) {
		jpeg_abort_decompress(&j->st->cinfo);
		if (rc == -ENOMEM)
			wharf_set_error("jpeg: out of memory");
		return rc;
	}
	*out_len = jpegdec_out_bytes(j);
	return 0;
}

void jpegdec_free(struct jpegdec *j)
{
	if (!j)
		return;
	state_free(j->st);
	free(j);
}
