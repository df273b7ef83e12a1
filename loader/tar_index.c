/*
 * tar_index: the index of WebDataset tar shards (wharf_index_build_tar).
 * tar.c walks each shard's headers and groups its members by key; every
 * sample goes through the public index builder with its fields, so a
 * script that adds fields itself builds the very same index.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wharf/loader.h>

#include "error.h"
#include "log.h"
#include "tar.h"
#include "text.h"

/* A label field holds a decimal integer: more bytes than this is not one,
 * and reading it stays one small ranged read. */
#define LABEL_MAX 64

struct tar_build {
	wharf_index_builder *b;
	const struct wharf_tar_options *opt;
	const char *shard; /* as given: the path the index stores */
	const char *prev;  /* the shard before, or NULL */
	int fd;
	uint64_t samples, shard_samples;
	/* The last key of this shard and of the one before. */
	char *key, *prev_key;
	bool prev_had_key;
	char *msg; /* why a callback stopped the walk */
};

void wharf_tar_options_init(struct wharf_tar_options *o)
{
	if (!o) {
		(void)error_set(-EINVAL, strdupf("wharf_tar_options_init: "
						 "NULL options"));
		return;
	}
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
}

/* The label in a field's bytes: a decimal integer from -1 up, white space
 * around it allowed.  Returns NULL, or what is wrong. */
static const char *parse_label(const char *s, int32_t *label)
{
	char *end;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || errno || v < -1 || v > INT32_MAX)
		return "not an integer from -1 to 2147483647";
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	if (*end)
		return "not an integer from -1 to 2147483647";
	*label = (int32_t)v;
	return NULL;
}

/* Sample s's label: its label field's content, or -1 without one. */
static int sample_label(struct tar_build *t, const struct tar_sample *s,
			int32_t *label)
{
	const char *want = t->opt->label_field ? t->opt->label_field : "cls";
	char buf[LABEL_MAX + 1];
	const char *why = NULL;

	*label = -1;
	if (!*want)
		return 0;
	for (size_t i = 0; i < s->nfields; i++) {
		const struct tar_field *f = &s->fields[i];
		if (strcmp(f->ext, want))
			continue;
		if (f->size > LABEL_MAX) {
			why = "too long for an integer";
		} else {
			int rc = tar_pread(&t->fd, f->offset, buf, f->size);
			if (rc) {
				t->msg = strdupf("%s: byte %llu: reading "
						 "%s.%s: %s",
						 t->shard,
						 (unsigned long long)f->offset,
						 s->key, f->ext, strerror(-rc));
				return rc;
			}
			buf[f->size] = '\0';
			if (strlen(buf) != f->size)
				why = "holds a NUL byte";
			else
				why = parse_label(buf, label);
		}
		if (why) {
			t->msg = strdupf(
			    "%s: byte %llu: the label of key %s "
			    "(%s.%s, %llu bytes) is %s: name "
			    "another label field, or none",
			    t->shard, (unsigned long long)f->offset, s->key,
			    s->key, f->ext, (unsigned long long)f->size, why);
			return -EINVAL;
		}
		return 0;
	}
	return 0;
}

/* One sample: its span (first field to last) and its fields. */
static int add_sample(void *arg, const struct tar_sample *s)
{
	struct tar_build *t = arg;
	int32_t label;
	int rc;

	if (!t->shard_samples && t->prev_had_key &&
	    !strcmp(s->key, t->prev_key)) {
		t->msg = strdupf("%s: byte %llu: key %s goes on from the end "
				 "of shard %s: a sample split across two "
				 "shards (write each key's members into "
				 "one shard)",
				 t->shard, (unsigned long long)s->header,
				 s->key, t->prev);
		return -EBADMSG;
	}
	rc = sample_label(t, s, &label);
	if (rc)
		return rc;
	const struct tar_field *last = &s->fields[s->nfields - 1];
	const uint64_t off = s->fields[0].offset;
	rc = wharf_index_builder_add(t->b, t->shard, off,
				     last->offset + last->size - off, label);
	for (size_t i = 0; !rc && i < s->nfields; i++)
		rc = wharf_index_builder_field(t->b, s->fields[i].ext,
					       s->fields[i].offset,
					       s->fields[i].size);
	if (rc) {
		t->msg = strdupf("%s", wharf_last_error());
		return rc;
	}
	snprintf(t->key, TAR_NAME_MAX + 1, "%s", s->key);
	t->shard_samples++;
	t->samples++;
	return 0;
}

/* Adds the samples of shard t->shard (path: where to open it). */
static int add_shard(struct tar_build *t, const char *path, char **err)
{
	struct stat st;
	uint64_t skipped = 0;
	char *walk_err = NULL;
	int rc;

	t->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->fd < 0 || fstat(t->fd, &st)) {
		rc = -errno;
		*err = strdupf("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		*err = strdupf("%s: not a regular file (a tar shard is one "
			       "file)",
			       path);
		return -EINVAL;
	}
	t->shard_samples = 0;
	rc = tar_wds_walk(t->shard, (uint64_t)st.st_size, tar_pread, &t->fd,
			  add_sample, t, &skipped, &walk_err);
	if (skipped)
		log_warn("%s: left out %llu members that are not regular "
			 "files named KEY.FIELD (directories, links, sparse "
			 "files, names without a dot)",
			 t->shard, (unsigned long long)skipped);
	if (t->msg) { /* our callback stopped it: never partial */
		*err = t->msg;
		t->msg = NULL;
	} else if (rc == -EBADMSG && t->opt->partial) {
		log_warn("%s; kept the %llu samples before it, left out the "
			 "rest of the shard",
			 walk_err, (unsigned long long)t->shard_samples);
		rc = 0;
	} else if (rc) {
		*err = walk_err;
		walk_err = NULL;
	}
	free(walk_err);
	return rc;
}

int wharf_index_build_tar(const char *const *shards, size_t n,
			  const struct wharf_tar_options *opt, const char *out)
{
	struct wharf_tar_options o;
	struct tar_build t = {.fd = -1};
	char *err = NULL;
	int rc;

	if ((!shards && n) || !out)
		return error_set(-EINVAL, strdupf("wharf_index_build_tar: NULL "
						  "%s",
						  out ? "shards" : "out"));

	/* A caller built against a shorter struct keeps the defaults of the
	 * fields it lacks. */
	wharf_tar_options_init(&o);
	if (opt)
		memcpy(&o, opt,
		       opt->size && opt->size < sizeof(o) ? opt->size
							  : sizeof(o));
	o.size = sizeof(o);
	opt = &o;
	t.opt = opt;
	rc = wharf_index_builder_new(out, opt->root, &t.b);
	if (rc)
		return rc;
	t.key = malloc(TAR_NAME_MAX + 1);
	t.prev_key = malloc(TAR_NAME_MAX + 1);
	if (!t.key || !t.prev_key) {
		rc = -ENOMEM;
		err = strdupf("index %s: out of memory", out);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char *path = shards[i][0] == '/' || !opt->root
				 ? strdup(shards[i])
				 : strdupf("%s/%s", opt->root, shards[i]);
		if (!path) {
			rc = -ENOMEM;
			err = strdupf("index %s: out of memory", out);
			goto out;
		}
		t.shard = shards[i];
		rc = add_shard(&t, path, &err);
		free(path);
		if (t.fd >= 0)
			close(t.fd);
		t.fd = -1;
		if (rc)
			goto out;
		/* The key this shard ended with, for the next one's check. */
		char *k = t.prev_key;
		t.prev_key = t.key;
		t.key = k;
		t.prev_had_key = t.shard_samples > 0;
		t.prev = shards[i];
		if (opt->progress)
			opt->progress(opt->progress_arg, i + 1, n, t.samples);
	}
	rc = wharf_index_builder_finish(t.b);
	if (rc)
		err = strdupf("%s", wharf_last_error());
out:
	wharf_index_builder_free(t.b);
	free(t.key);
	free(t.prev_key);
	free(t.msg);
	return rc ? error_set(rc, err) : 0;
}
