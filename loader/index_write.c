/*
 * index_write: the writer of an index file (see index_write.h), apart from
 * the builders that feed it (index_build.c) and from the reader (index.c):
 * the on-disk format written in one place.
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index.h"
#include "index_i.h"
#include "index_write.h"
#include "text.h"

/* An unnamed temporary file in dir (falls back to $TMPDIR). */
static FILE *temp_stream(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0) {
		FILE *f = fdopen(fd, "w+");
		if (f) {
			setvbuf(f, NULL, _IOFBF, 1 << 20);
			return f;
		}
		close(fd);
	}
	FILE *f = tmpfile();
	if (f)
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

char *index_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, slash - path);
}

/* Opens the section streams [from, to) next to the output. */
static int writer_streams(struct writer *w, int from, int to)
{
	char *dir = index_dir_of(w->out);
	if (!dir) {
		*w->err = strdupf("index %s: out of memory", w->out);
		return -ENOMEM;
	}
	for (int i = from; i < to; i++) {
		w->sec[i] = temp_stream(dir);
		if (!w->sec[i]) {
			int rc = -errno;
			*w->err = strdupf("index %s: temporary file: %s",
					  w->out, strerror(-rc));
			free(dir);
			return rc;
		}
	}
	free(dir);
	return 0;
}

int writer_init(struct writer *w, const char *out, const char *root,
		char **err)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->err = err;
	w->min_length = UINT64_MAX;
	w->max_label = -1;
	w->root = strdup(root);
	if (!w->root) {
		*err = strdupf("index %s: out of memory", out);
		return -ENOMEM;
	}
	return writer_streams(w, 0, S_COUNT);
}

void writer_free(struct writer *w)
{
	for (int i = 0; i < S_ALL; i++)
		if (w->sec[i])
			fclose(w->sec[i]);
	for (uint32_t k = 0; k < w->names.n; k++)
		free(w->names.name[k]);
	free(w->names.name);
	free(w->names.slot);
	free(w->cur);
	if (w->tmp_path) {
		unlink(w->tmp_path);
		free(w->tmp_path);
	}
	free(w->root);
	free(w->last_path);
}

static int writer_put(struct writer *w, int s, const void *p, size_t len)
{
	if (fwrite(p, 1, len, w->sec[s]) != len) {
		int rc = errno ? -errno : -EIO;
		*w->err =
		    strdupf("index %s: writing: %s", w->out, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Adds a file (its path relative to the root, or absolute): its id. */
int writer_file(struct writer *w, const char *path, uint32_t *id)
{
	size_t len = strlen(path) + 1;
	if (w->nfiles >= UINT32_MAX) {
		*w->err = strdupf("index %s: more than %u files", w->out,
				  UINT32_MAX - 1);
		return -EOVERFLOW;
	}
	int rc = writer_put(w, S_PATHOFF, &w->blob_size, 8);
	if (!rc)
		rc = writer_put(w, S_BLOB, path, len);
	if (rc)
		return rc;
	w->blob_size += len;
	*id = (uint32_t)w->nfiles++;
	return 0;
}

/* Like writer_file(), but a path equal to the one added just before gets
 * the same id: samples packed in one file (records, offsets) arrive in runs,
 * so one remembered path deduplicates them with memory flat in the count.
 * *added tells whether the path is new. */
int writer_file_once(struct writer *w, const char *path, uint32_t *id,
		     int *added)
{
	if (w->last_path && !strcmp(w->last_path, path)) {
		*id = w->last_id;
		*added = 0;
		return 0;
	}
	char *copy = strdup(path);
	if (!copy) {
		*w->err = strdupf("index %s: out of memory", w->out);
		return -ENOMEM;
	}
	int rc = writer_file(w, path, id);
	if (rc) {
		free(copy);
		return rc;
	}
	free(w->last_path);
	w->last_path = copy;
	w->last_id = *id;
	*added = 1;
	return 0;
}

int writer_sample(struct writer *w, uint32_t file, uint64_t off,
		  uint64_t len, int32_t label)
{
	int rc = writer_put(w, S_FILE, &file, 4);
	if (!rc)
		rc = writer_put(w, S_OFFSET, &off, 8);
	if (!rc)
		rc = writer_put(w, S_LENGTH, &len, 8);
	if (!rc)
		rc = writer_put(w, S_LABEL, &label, 4);
	if (!rc && w->fields_on)
		rc = writer_put(w, S_FSTART, &w->nfields, 8);
	if (rc)
		return rc;
	w->count++;
	w->last_off = off;
	w->last_len = len;
	w->ncur = 0;
	if (len == WHARF_LENGTH_UNKNOWN) {
		w->unknown = 1;
	} else {
		if (len < w->min_length)
			w->min_length = len;
		if (len > w->max_length)
			w->max_length = len;
		w->total_bytes += len;
	}
	if (label > w->max_label)
		w->max_label = label;
	return 0;
}

static uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* The slot of name in the table, or the empty one where it would go. */
static uint32_t *names_slot(const struct names *t, const char *name)
{
	size_t i = hash_name(name) & (t->cap - 1);
	while (t->slot[i] && strcmp(t->name[t->slot[i] - 1], name))
		i = (i + 1) & (t->cap - 1);
	return &t->slot[i];
}

/* The id of field name ext, added when new. */
static int writer_name(struct writer *w, const char *ext, uint32_t *id)
{
	struct names *t = &w->names;
	if (2 * (t->n + 1) >= t->cap) {
		const uint32_t cap = t->cap ? 2 * t->cap : 64;
		struct names g = {.n = t->n, .cap = cap};
		g.slot = calloc(cap, sizeof(*g.slot));
		g.name = realloc(t->name, (cap / 2) * sizeof(*g.name));
		if (!g.slot || !g.name) {
			free(g.slot);
			if (g.name)
				t->name = g.name;
			goto nomem;
		}
		for (uint32_t k = 0; k < t->n; k++)
			*names_slot(&g, g.name[k]) = k + 1;
		free(t->slot);
		*t = g;
	}
	uint32_t *slot = names_slot(t, ext);
	if (*slot) {
		*id = *slot - 1;
		return 0;
	}
	if (t->n >= NAMES_MAX) {
		*w->err = strdupf("index %s: more than %u distinct field "
				  "names (at \"%s\")",
				  w->out, NAMES_MAX, ext);
		return -EOVERFLOW;
	}
	t->name[t->n] = strdup(ext);
	if (!t->name[t->n])
		goto nomem;
	*id = t->n++;
	*slot = t->n;
	return 0;
nomem:
	*w->err = strdupf("index %s: out of memory", w->out);
	return -ENOMEM;
}

/* Adds a field to the sample added last: its name and bytes in that
 * sample's file.  The first field of an index starts the field sections,
 * with no fields for the samples before. */
int writer_field(struct writer *w, const char *ext, uint64_t off,
		 uint64_t len)
{
	int rc;
	uint32_t id;

	if (!w->fields_on) {
		rc = writer_streams(w, S_COUNT, S_ALL);
		for (uint64_t i = 0; !rc && i < w->count; i++)
			rc = writer_put(w, S_FSTART, &w->nfields, 8);
		if (rc)
			return rc;
		w->fields_on = true;
	}
	rc = writer_name(w, ext, &id);
	if (rc)
		return rc;
	if (w->ncur == w->capcur) {
		size_t cap = w->capcur ? 2 * w->capcur : 16;
		uint32_t *c = realloc(w->cur, cap * sizeof(*c));
		if (!c) {
			*w->err = strdupf("index %s: out of memory", w->out);
			return -ENOMEM;
		}
		w->cur = c;
		w->capcur = cap;
	}
	w->cur[w->ncur++] = id;
	rc = writer_put(w, S_FEXT, &id, 4);
	if (!rc)
		rc = writer_put(w, S_FOFF, &off, 8);
	if (!rc)
		rc = writer_put(w, S_FLEN, &len, 8);
	if (rc)
		return rc;
	w->nfields++;
	return 0;
}

/* Copies a section stream into fd at *pos, zero-pads to ALIGN, hashes. */
static int copy_section(struct writer *w, FILE *in, int fd, uint64_t *pos,
			uint64_t *hash, char *buf, size_t cap)
{
	if (fflush(in) || fseeko(in, 0, SEEK_SET))
		goto fail;
	for (;;) {
		size_t n = fread(buf, 1, cap, in);
		if (n == 0) {
			if (ferror(in))
				goto fail;
			break;
		}
		size_t padded = n;
		if (n < cap || feof(in)) {
			padded = (size_t)align_up(n);
			memset(buf + n, 0, padded - n);
		}
		/* Only the last read can be short: cap is a multiple of ALIGN.
		 */
		*hash = hash_words(*hash, buf, padded);
		if (pwrite(fd, buf, padded, (off_t)*pos) != (ssize_t)padded)
			goto fail;
		*pos += padded;
		if (padded != n)
			break;
	}
	return 0;
fail:;
	int rc = errno ? -errno : -EIO;
	*w->err = strdupf("index %s: writing: %s", w->out, strerror(-rc));
	return rc;
}

/* Writes n NUL-terminated strings back to back at *pos, padded to a word,
 * and adds them to the body hash. */
static int put_strings(struct writer *w, int fd, uint64_t *pos,
		       uint64_t *hash, char *const *strs, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += strlen(strs[i]) + 1;
	size_t padded = (size_t)align_up(len);
	char *buf = calloc(1, padded);
	if (!buf) {
		*w->err = strdupf("index %s: out of memory", w->out);
		return -ENOMEM;
	}
	for (size_t i = 0, at = 0; i < n; i++) {
		size_t l = strlen(strs[i]) + 1;
		memcpy(buf + at, strs[i], l);
		at += l;
	}
	*hash = hash_words(*hash, buf, padded);
	ssize_t wr = pwrite(fd, buf, padded, (off_t)*pos);
	free(buf);
	if (wr != (ssize_t)padded) {
		int rc = wr < 0 ? -errno : -EIO;
		*w->err =
		    strdupf("index %s: writing: %s", w->out, strerror(-rc));
		return rc;
	}
	*pos += padded;
	return 0;
}

int writer_finish(struct writer *w)
{
	struct index_header h = {0};
	char *buf = NULL;
	const size_t cap = 1 << 20;
	int rc, fd = -1;

	/* A non-empty blob, then the closing entry of the path offsets, which
	 * must equal the blob's size (no files: the blob is one NUL). */
	if (w->blob_size == 0) {
		rc = writer_put(w, S_BLOB, "", 1);
		if (rc)
			return rc;
		w->blob_size = 1;
	}
	rc = writer_put(w, S_PATHOFF, &w->blob_size, 8);
	if (rc)
		return rc;
	w->tmp_path = strdupf("%s.tmp-XXXXXX", w->out);
	fd = mkstemp(w->tmp_path);
	if (fd < 0) {
		rc = -errno;
		free(w->tmp_path);
		w->tmp_path = NULL;
		*w->err = strdupf("index %s: %s", w->out, strerror(-rc));
		return rc;
	}
	buf = malloc(cap + ALIGN);
	if (!buf) {
		rc = -ENOMEM;
		*w->err = strdupf("index %s: out of memory", w->out);
		goto out;
	}
	uint64_t pos = INDEX_HEADER_SIZE, hash = HASH_SEED;
	uint64_t *offs[S_COUNT] = {&h.off_file,	 &h.off_offset,	 &h.off_length,
				   &h.off_label, &h.off_pathoff, &h.off_blob};
	for (int i = 0; i < S_COUNT; i++) {
		*offs[i] = pos;
		rc = copy_section(w, w->sec[i], fd, &pos, &hash, buf, cap);
		if (rc)
			goto out;
	}
	h.off_root = pos;
	h.root_size = strlen(w->root) + 1;
	rc = put_strings(w, fd, &pos, &hash, &w->root, 1);
	if (rc)
		goto out;
	if (w->nclasses) {
		h.off_classes = pos;
		rc = put_strings(w, fd, &pos, &hash, w->classes, w->nclasses);
		if (rc)
			goto out;
		h.classes_size = pos - h.off_classes;
	}
	if (w->fields_on) {
		rc = writer_put(w, S_FSTART, &w->nfields, 8);
		uint64_t *foffs[] = {&h.off_fstart, &h.off_fext, &h.off_foff,
				     &h.off_flen};
		for (int i = S_FSTART; !rc && i < S_ALL; i++) {
			*foffs[i - S_FSTART] = pos;
			rc = copy_section(w, w->sec[i], fd, &pos, &hash, buf,
					  cap);
		}
		h.off_names = pos;
		if (!rc)
			rc = put_strings(w, fd, &pos, &hash, w->names.name,
					 w->names.n);
		if (rc)
			goto out;
		h.names_size = pos - h.off_names;
		h.nfields = w->nfields;
		h.nnames = w->names.n;
	}

	memcpy(h.magic, INDEX_MAGIC, 8);
	h.version = INDEX_VERSION;
	h.header_size = INDEX_HEADER_SIZE;
	h.count = w->count;
	h.nfiles = w->nfiles;
	h.blob_size = w->blob_size;
	h.file_size = pos;
	h.min_length = w->min_length == UINT64_MAX ? 0 : w->min_length;
	h.max_length = w->max_length;
	h.total_bytes = w->total_bytes;
	/* In 64 bits: a label of INT32_MAX makes 2^31 labels. */
	h.num_labels = (uint32_t)((int64_t)w->max_label + 1);
	h.unknown_lengths = w->unknown;
	h.body_hash = hash;
	h.header_hash = index_header_hash(&h);
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto fail;
	if (fchmod(fd, 0644) || fsync(fd))
		goto fail;
	if (rename(w->tmp_path, w->out))
		goto fail;
	free(w->tmp_path);
	w->tmp_path = NULL;
	rc = 0;
	goto out;
fail:
	rc = errno ? -errno : -EIO;
	*w->err = strdupf("index %s: writing: %s", w->out, strerror(-rc));
out:
	free(buf);
	close(fd);
	return rc;
}

