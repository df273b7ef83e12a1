/*
 * decode: built-in decoders, per-sample transforms chosen by a spec string,
 * so that callers in other languages never run their own code in the
 * workers.
 */
#include "config.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/decode.h>

#include "error.h"
#ifdef HAVE_JPEG
#include "jpeg.h"
#include "text.h"
#endif

#define DECODE_MAX_DIMS 8

enum decode_kind {
	DECODE_RAW,
	DECODE_ARRAY,
	DECODE_TOKENS,
	DECODE_PLUGIN,
	DECODE_JPEG
};

typedef int (*plugin_init_fn)(const char *arg, uint32_t worker, void **state);

struct wharf_decoder {
	enum decode_kind kind;
	uint64_t in_bytes;  /* expected stored size; 0: any */
	uint64_t out_bytes; /* decoded size; 0: not fixed */
	uint64_t offset;    /* array: header bytes dropped */
	uint32_t in_size;   /* tokens: bytes per stored token */
	uint32_t out_size;  /* tokens: bytes per output token */
	uint64_t window;    /* tokens */
	bool moving;	    /* tokens: windows move each epoch */
	void *dl;
	wharf_sample_fn plugin_fn;
	plugin_init_fn plugin_init;
	char *arg;
	void *state; /* plugin state; each worker sets its own copy */
	struct jpegdec *jpeg;
	char *field;	   /* field=, or the image default; NULL: none */
	bool field_if_any; /* the default: whole samples without fields */
};

/* The image decoders' field when none is named: the first image member of
 * a WebDataset sample. */
#define IMAGE_FIELDS "jpg,jpeg,png,webp"

static int decode_fail(int rc, const char *spec, const char *what)
{
	return error_set(rc, strdupf("decoder \"%s\": %s", spec, what));
}

/* The element types, both spellings: short as specs write them, long as
 * NumPy and torch do.  The only table: wharf_dtype() gives it to the
 * bindings, so that a spelling the documentation uses works everywhere. */
static const struct dtype {
	const char *name, *long_name;
	uint32_t size;
} dtypes[] = {
    {"u8", "uint8", 1},	  {"i8", "int8", 1},	 {"u16", "uint16", 2},
    {"i16", "int16", 2},  {"f16", "float16", 2}, {"bf16", "bfloat16", 2},
    {"u32", "uint32", 4}, {"i32", "int32", 4},	 {"f32", "float32", 4},
    {"u64", "uint64", 8}, {"i64", "int64", 8},	 {"f64", "float64", 8},
};

/* The entry of either spelling, or NULL (name NULL: absent). */
static const struct dtype *dtype_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(name, dtypes[i].name) ||
		    !strcmp(name, dtypes[i].long_name))
			return &dtypes[i];
	return NULL;
}

/* Whether name spells one of the short names in `among` ("u16 u32"). */
static bool dtype_is(const char *name, const char *among)
{
	const struct dtype *t = dtype_find(name);
	const size_t n = t ? strlen(t->name) : 0;

	for (const char *p = among; t && (p = strstr(p, t->name)); p += n)
		if ((p == among || p[-1] == ' ') && (!p[n] || p[n] == ' '))
			return true;
	return false;
}

const char *wharf_dtype(const char *name, uint32_t *size)
{
	const struct dtype *t = dtype_find(name);

	if (t && size)
		*size = t->size;
	return t ? t->long_name : NULL;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/* "3,224,224" -> product of the dimensions, checked for overflow. */
static int parse_shape(const char *s, uint64_t *elems)
{
	char buf[256];
	char *save = NULL;
	unsigned ndims = 0;
	uint64_t n = 1;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (char *tok = strtok_r(buf, ",x", &save); tok;
	     tok = strtok_r(NULL, ",x", &save)) {
		uint64_t d;

		if (parse_u64(tok, &d) || d == 0 || ++ndims > DECODE_MAX_DIMS ||
		    n > UINT64_MAX / d)
			return -EINVAL;
		n *= d;
	}
	if (!ndims)
		return -EINVAL;
	*elems = n;
	return 0;
}

/* Fixed-shape array: the length check is the point; the copy is the price
 * of the loader's transform interface (input and output buffers differ). */
static int decode_array(void *user, uint64_t sample, const void *in,
			uint64_t in_len, void *out, uint64_t out_cap,
			uint64_t *out_len)
{
	const struct wharf_decoder *d = user;

	if (in_len != d->in_bytes) {
		wharf_set_error("sample %" PRIu64 ": %" PRIu64
				" bytes, the array decoder expects %" PRIu64,
				sample, in_len, d->in_bytes);
		return -EINVAL;
	}
	assert(out_cap >= d->out_bytes);
	memcpy(out, (const char *)in + d->offset, d->out_bytes);
	*out_len = d->out_bytes;
	return 0;
}

/* raw bytes=N: the first N bytes, zero-padded when the sample is shorter,
 * so that files of any size make one fixed-size batch. */
static int decode_fit(void *user, uint64_t sample, const void *in,
		      uint64_t in_len, void *out, uint64_t out_cap,
		      uint64_t *out_len)
{
	const struct wharf_decoder *d = user;
	const uint64_t n = in_len < d->out_bytes ? in_len : d->out_bytes;

	assert(out_cap >= d->out_bytes);
	memcpy(out, in, n);
	memset((char *)out + n, 0, d->out_bytes - n);
	*out_len = d->out_bytes;
	return 0;
}

static uint64_t load_token(const unsigned char *p, uint32_t size)
{
	if (size == 2) {
		uint16_t v;

		memcpy(&v, p, sizeof(v));
		return v;
	}
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void store_token(unsigned char *p, uint32_t size, uint64_t v)
{
	if (size == 2) {
		const uint16_t t = (uint16_t)v;

		memcpy(p, &t, sizeof(t));
	} else if (size == 4) {
		const uint32_t t = (uint32_t)v;

		memcpy(p, &t, sizeof(t));
	} else {
		memcpy(p, &v, sizeof(v));
	}
}

/* Widens n tokens of in_size bytes at src to out_size bytes at dst.  The
 * common case (uint16 to int64) has its own loop: the generic one, with a
 * branch per token, made decoding most of a worker's time. */
static void widen(const unsigned char *src, uint32_t in_size,
		  unsigned char *dst, uint32_t out_size, uint64_t n)
{
	if (in_size == 2 && out_size == 8) {
		for (uint64_t i = 0; i < n; i++) {
			uint16_t v;
			uint64_t w;

			memcpy(&v, src + 2 * i, sizeof(v));
			w = v;
			memcpy(dst + 8 * i, &w, sizeof(w));
		}
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		store_token(dst + i * out_size, out_size,
			    load_token(src + i * in_size, in_size));
}

/* W + 1 tokens -> input (0..W-1) then target (1..W), widened to out_size:
 * the input is widened once and the target is the input moved by one. */
static int decode_tokens(void *user, uint64_t sample, const void *in,
			 uint64_t in_len, void *out, uint64_t out_cap,
			 uint64_t *out_len)
{
	const struct wharf_decoder *d = user;
	const unsigned char *src = in;
	unsigned char *x = out;
	unsigned char *y = x + d->window * d->out_size;

	if (in_len != d->in_bytes) {
		wharf_set_error("sample %" PRIu64 ": %" PRIu64
				" bytes, a window of %" PRIu64
				" tokens needs %" PRIu64
				" (index records of window + 1 tokens)",
				sample, in_len, d->window, d->in_bytes);
		return -EINVAL;
	}
	assert(out_cap >= d->out_bytes);
	if (d->out_size == d->in_size) {
		memcpy(x, src, d->window * d->in_size);
	} else {
		widen(src, d->in_size, x, d->out_size, d->window);
	}
	memcpy(y, x + d->out_size, (d->window - 1) * d->out_size);
	widen(src + d->window * d->in_size, d->in_size,
	      y + (d->window - 1) * d->out_size, d->out_size, 1);
	*out_len = d->out_bytes;
	return 0;
}

static int decode_plugin(void *user, uint64_t sample, const void *in,
			 uint64_t in_len, void *out, uint64_t out_cap,
			 uint64_t *out_len)
{
	const struct wharf_decoder *d = user;

	return d->plugin_fn(d->plugin_init ? d->state : d->arg, sample, in,
			    in_len, out, out_cap, out_len);
}

static int decode_jpeg(void *user, uint64_t sample, const void *in,
		       uint64_t in_len, void *out, uint64_t out_cap,
		       uint64_t *out_len)
{
#ifdef HAVE_JPEG
	const struct wharf_decoder *d = user;

	return jpegdec_sample(d->jpeg, sample, in, in_len, out, out_cap,
			      out_len);
#else
	return -ENOTSUP; /* wharf_decoder_new() refuses the spec */
#endif
}

/* Runs in each worker (its own copy of *d after the fork). */
static int plugin_worker_init(void *user, uint32_t worker)
{
	struct wharf_decoder *d = user;

	return d->plugin_init(d->arg, worker, &d->state);
}

static int load_plugin(struct wharf_decoder *d, const char *spec,
		       const char *path, const char *symbol)
{
	char name[256];

	d->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!d->dl) {
		const char *why = dlerror();

		return error_set(-ENOENT, strdupf("decoder \"%s\": %s", spec,
						  why ? why : path));
	}
	*(void **)&d->plugin_fn = dlsym(d->dl, symbol);
	if (!d->plugin_fn)
		return error_set(-ENOENT,
				 strdupf("decoder \"%s\": %s exports no %s",
					 spec, path, symbol));
	if ((size_t)snprintf(name, sizeof(name), "%s_init", symbol) <
	    sizeof(name))
		*(void **)&d->plugin_init = dlsym(d->dl, name);
	return 0;
}

struct spec_words {
	const char *dtype, *shape, *offset, *window, *out, *windows, *path,
	    *symbol, *arg, *bytes, *size, *crop, *scale, *ratio, *flip, *layout,
	    *mean, *std, *max_scans, *max_pixel_scans, *field;
};

/* Splits "key=value" words (in place) into w; unknown keys are errors. */
static int split_words(char *s, struct spec_words *w, const char **bad)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
	    {"dtype", offsetof(struct spec_words, dtype)},
	    {"shape", offsetof(struct spec_words, shape)},
	    {"offset", offsetof(struct spec_words, offset)},
	    {"window", offsetof(struct spec_words, window)},
	    {"out", offsetof(struct spec_words, out)},
	    {"windows", offsetof(struct spec_words, windows)},
	    {"path", offsetof(struct spec_words, path)},
	    {"symbol", offsetof(struct spec_words, symbol)},
	    {"arg", offsetof(struct spec_words, arg)},
	    {"bytes", offsetof(struct spec_words, bytes)},
	    {"size", offsetof(struct spec_words, size)},
	    {"crop", offsetof(struct spec_words, crop)},
	    {"scale", offsetof(struct spec_words, scale)},
	    {"ratio", offsetof(struct spec_words, ratio)},
	    {"flip", offsetof(struct spec_words, flip)},
	    {"layout", offsetof(struct spec_words, layout)},
	    {"mean", offsetof(struct spec_words, mean)},
	    {"std", offsetof(struct spec_words, std)},
	    {"max_scans", offsetof(struct spec_words, max_scans)},
	    {"max_pixel_scans", offsetof(struct spec_words, max_pixel_scans)},
	    {"field", offsetof(struct spec_words, field)},
	};
	char *save = NULL;

	for (char *tok = strtok_r(s, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		size_t i;

		*bad = tok;
		if (!eq)
			return -EINVAL;
		*eq = '\0';
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (!strcmp(tok, keys[i].key))
				break;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return -EINVAL;
		*(const char **)((char *)w + keys[i].off) = eq + 1;
	}
	return 0;
}

static int parse_array(struct wharf_decoder *d, const char *spec,
		       const struct spec_words *w)
{
	uint64_t elems;
	const struct dtype *t = dtype_find(w->dtype);
	const uint32_t size = t ? t->size : 0;

	if (!t) {
		char names[256] = "";

		for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
			snprintf(names + strlen(names),
				 sizeof(names) - strlen(names), " %s (%s)",
				 dtypes[i].name, dtypes[i].long_name);
		return error_set(-EINVAL,
				 strdupf("decoder \"%s\": dtype= must be one "
					 "of%s",
					 spec, names));
	}
	if (!w->shape || parse_shape(w->shape, &elems) ||
	    elems > UINT64_MAX / (uint64_t)size)
		return decode_fail(-EINVAL, spec,
				   "shape= must be positive dimensions "
				   "separated by commas (at most 8)");
	if (w->offset && parse_u64(w->offset, &d->offset))
		return decode_fail(-EINVAL, spec, "offset= must be bytes");
	d->kind = DECODE_ARRAY;
	d->out_bytes = elems * (uint64_t)size;
	if (d->offset > UINT64_MAX - d->out_bytes)
		return decode_fail(-EINVAL, spec, "offset= too large");
	d->in_bytes = d->offset + d->out_bytes;
	return 0;
}

static int parse_tokens(struct wharf_decoder *d, const char *spec,
			const struct spec_words *w)
{
	if (!dtype_is(w->dtype, "u16 u32"))
		return decode_fail(
		    -EINVAL, spec,
		    "dtype= must be u16 or u32 (uint16, uint32)");
	if (!w->window || parse_u64(w->window, &d->window) || !d->window ||
	    d->window > (UINT64_MAX / 16) - 1)
		return decode_fail(-EINVAL, spec,
				   "window= must be a positive token count");
	d->in_size = dtype_find(w->dtype)->size;
	if (w->out && !strcmp(w->out, "same"))
		d->out_size = d->in_size;
	else if (!w->out || dtype_is(w->out, "i64 i32"))
		d->out_size = w->out ? dtype_find(w->out)->size : 8;
	else
		return decode_fail(-EINVAL, spec,
				   "out= must be i64, i32 (int64, int32) or "
				   "same");
	if (!w->windows || !strcmp(w->windows, "moving"))
		d->moving = true;
	else if (!strcmp(w->windows, "fixed"))
		d->moving = false;
	else
		return decode_fail(-EINVAL, spec,
				   "windows= must be moving or fixed");
	d->kind = DECODE_TOKENS;
	d->in_bytes = (d->window + 1) * d->in_size;
	d->out_bytes = 2 * d->window * d->out_size;
	return 0;
}

static int parse_plugin(struct wharf_decoder *d, const char *spec,
			const struct spec_words *w)
{
	if (!w->path || !*w->path)
		return decode_fail(-EINVAL, spec, "path= is required");
	if (w->bytes && parse_u64(w->bytes, &d->out_bytes))
		return decode_fail(-EINVAL, spec, "bytes= must be bytes");
	d->arg = strdup(w->arg ? w->arg : "");
	if (!d->arg)
		return decode_fail(-ENOMEM, spec, "out of memory");
	d->kind = DECODE_PLUGIN;
	return load_plugin(d, spec, w->path,
			   w->symbol ? w->symbol : "wharf_transform");
}

#ifdef HAVE_JPEG
static int parse_jpeg(struct wharf_decoder *d, const char *spec,
		      const struct spec_words *w)
{
	const struct dtype *t = dtype_find(w->dtype);
	/* jpeg.c sees the short spelling only. */
	const struct jpegdec_words jw = {
	    .size = w->size,
	    .crop = w->crop,
	    .scale = w->scale,
	    .ratio = w->ratio,
	    .flip = w->flip,
	    .dtype = t ? t->name : w->dtype,
	    .layout = w->layout,
	    .mean = w->mean,
	    .std = w->std,
	    .max_scans = w->max_scans,
	    .max_pixel_scans = w->max_pixel_scans,
	};
	const char *why = NULL;
	const int rc = jpegdec_new(&jw, &d->jpeg, &why);

	if (rc)
		return decode_fail(rc, spec, why);
	d->kind = DECODE_JPEG;
	d->out_bytes = jpegdec_out_bytes(d->jpeg);
	return 0;
}
#else
static int parse_jpeg(struct wharf_decoder *d, const char *spec,
		      const struct spec_words *w)
{
	return decode_fail(-ENOTSUP, spec,
			   "this libwharf was built without libjpeg-turbo "
			   "(Debian: apt-get install libjpeg62-turbo-dev, "
			   "then configure again)");
}
#endif

int wharf_decoder_new(const char *spec, wharf_decoder **out)
{
	struct spec_words w = {0};
	struct wharf_decoder *d = NULL;
	char *copy = NULL, *rest;
	const char *bad = NULL;
	size_t name_len;
	int rc;

	if (!out)
		return error_set(-EINVAL, strdupf("wharf_decoder_new: NULL out "
						  "pointer"));
	*out = NULL;
	if (!spec)
		spec = "raw";
	copy = strdup(spec);
	d = calloc(1, sizeof(*d));
	if (!copy || !d) {
		rc = error_set(-ENOMEM, strdupf("out of memory"));
		goto out;
	}
	name_len = strcspn(copy, " \t");
	rest = copy + name_len + (copy[name_len] != '\0');
	copy[name_len] = '\0';
	rc = split_words(rest, &w, &bad);
	if (rc) {
		rc = error_set(rc, strdupf("decoder \"%s\": bad word \"%s\" "
					   "(expected key=value)",
					   spec, bad));
		goto out;
	}
	if (!strcmp(copy, "raw") || !*copy) {
		d->kind = DECODE_RAW;
		rc = 0;
		if (w.bytes &&
		    (parse_u64(w.bytes, &d->out_bytes) || !d->out_bytes))
			rc = decode_fail(-EINVAL, spec,
					 "bytes= must be a positive size");
	} else if (!strcmp(copy, "array")) {
		rc = parse_array(d, spec, &w);
	} else if (!strcmp(copy, "tokens")) {
		rc = parse_tokens(d, spec, &w);
	} else if (!strcmp(copy, "plugin")) {
		rc = parse_plugin(d, spec, &w);
	} else if (!strcmp(copy, "jpeg")) {
		rc = parse_jpeg(d, spec, &w);
	} else {
		rc = decode_fail(-EINVAL, spec,
				 "unknown decoder (raw, array, tokens, plugin, "
				 "jpeg)");
	}
	if (!rc && w.field &&
	    (!*w.field || strspn(w.field, ",") || strstr(w.field, ",,") ||
	     w.field[strlen(w.field) - 1] == ','))
		rc = decode_fail(-EINVAL, spec,
				 "field= must be a field name (\"jpg\") or "
				 "names separated by commas");
	if (!rc && (w.field || d->kind == DECODE_JPEG)) {
		d->field = strdup(w.field ? w.field : IMAGE_FIELDS);
		d->field_if_any = !w.field;
		if (!d->field)
			rc = decode_fail(-ENOMEM, spec, "out of memory");
	}
out:
	free(copy);
	if (rc) {
		wharf_decoder_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int wharf_decoder_apply(wharf_decoder *d, struct wharf_options *opt)
{
	if (!d || !opt)
		return error_set(-EINVAL,
				 strdupf("wharf_decoder_apply: NULL %s",
					 d ? "options" : "decoder"));
	if (opt->size < offsetof(struct wharf_options, user) + sizeof(void *))
		return error_set(-EINVAL,
				 strdupf("wharf_decoder_apply: options of "
					 "%u bytes are too old",
					 opt->size));
	/* shift_step and field came after the first options: older callers
	 * lack them. */
	const bool has_shift =
	    opt->size >= offsetof(struct wharf_options, shift_step) +
			     sizeof(opt->shift_step);
	const bool has_field =
	    opt->size >= offsetof(struct wharf_options, field_if_any) +
			     sizeof(opt->field_if_any);
	if (d->field && !d->field_if_any && !has_field)
		return error_set(-EINVAL,
				 strdupf("wharf_decoder_apply: field= needs "
					 "options of this header (%u bytes "
					 "given): rebuild",
					 opt->size));
	if (has_field) {
		opt->field = d->field;
		opt->field_if_any = d->field_if_any;
	}
	opt->user = d;
	opt->worker_init = NULL;
	if (has_shift)
		opt->shift_step = 0;
	switch (d->kind) {
	case DECODE_RAW:
		opt->sample_fn = d->out_bytes ? decode_fit : NULL;
		break;
	case DECODE_ARRAY:
		/* Without a header the workers read straight into the slot (and
		 * merge adjacent samples); they check each length themselves.
		 */
		opt->sample_fn = d->offset ? decode_array : NULL;
		break;
	case DECODE_TOKENS:
		opt->sample_fn = decode_tokens;
		if (d->moving && !has_shift)
			return error_set(-EINVAL,
					 strdupf("wharf_decoder_apply: moving "
						 "windows need options of this "
						 "header (%u bytes given): "
						 "rebuild, or windows=fixed",
						 opt->size));
		if (d->moving)
			opt->shift_step = d->in_size;
		break;
	case DECODE_PLUGIN:
		opt->sample_fn = decode_plugin;
		if (d->plugin_init)
			opt->worker_init = plugin_worker_init;
		break;
	case DECODE_JPEG:
		opt->sample_fn = decode_jpeg;
		break;
	}
	if (d->out_bytes)
		opt->sample_bytes = d->out_bytes;
	return 0;
}

uint64_t wharf_decoder_sample_bytes(const wharf_decoder *d)
{
	return d ? d->out_bytes : 0;
}

uint64_t wharf_decoder_input_bytes(const wharf_decoder *d)
{
	return d ? d->in_bytes : 0;
}

void wharf_decoder_free(wharf_decoder *d)
{
	if (!d)
		return;
	if (d->dl)
		dlclose(d->dl);
#ifdef HAVE_JPEG
	jpegdec_free(d->jpeg);
#endif
	free(d->field);
	free(d->arg);
	free(d);
}
