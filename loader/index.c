/*
 * index: the index file: open (map, check the header), verify (checksum
 * every section) and build (from a directory, a list, fixed-size records,
 * or samples added one by one through the public builder).
 *
 * Builders stream each array into its own unnamed temporary file next to the
 * output, so memory does not grow with the number of samples (the directory
 * builder alone holds the paths, in one blob, because it sorts them), then
 * copy the arrays into the output behind a header, hashing as they go.
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

#include "error.h"
#include "index.h"
#include "text.h"

#define ALIGN 64u

/* A 64-bit running hash over 8-byte words: fast enough to verify gigabytes
 * and sensitive to every bit, which is all a corruption check needs. */
#define HASH_SEED 0x9e3779b97f4a7c15ull
static uint64_t hash_words(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	assert(len % 8 == 0);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

uint64_t index_header_hash(const struct index_header *h)
{
	struct index_header c = *h;
	c.header_hash = 0;
	return hash_words(HASH_SEED, &c, sizeof(c));
}

static uint64_t align_up(uint64_t v)
{
	return (v + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

static int section_ok(const struct index_header *h, uint64_t off, uint64_t len)
{
	return off >= h->header_size && off % ALIGN == 0 &&
	       off <= h->file_size && len <= h->file_size - off;
}

/* Points *out at the n names of the section at off (size bytes): the class
 * names (labels) or the field names.
 * @return 0; -EINVAL with *err set for a malformed section; -ENOMEM. */
static int index_names(struct index *idx, const struct index_header *h,
		       uint64_t off, uint64_t size, uint32_t n,
		       const char ***out, const char *what, char **err)
{
	const char *names;

	/* Each name takes a byte at least: a count past that is corrupt,
	 * and would be allocated for first.  The pointer is made only once
	 * off is known to lie in the file. */
	if (!section_ok(h, off, size) || !size || n > size ||
	    ((const char *)idx->map)[off + size - 1] != '\0') {
		*err = strdupf("index %s: the %s lie outside the file "
			       "(corrupted)",
			       idx->path, what);
		return -EINVAL;
	}
	names = (const char *)idx->map + off;
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	uint64_t at = 0;
	for (uint32_t k = 0; k < n; k++) {
		if (at >= size) {
			*err = strdupf("index %s: %u %s for %u (corrupted)",
				       idx->path, k, what, n);
			return -EINVAL;
		}
		(*out)[k] = names + at;
		at += strlen(names + at) + 1;
	}
	return 0;
}

/* Points idx at the optional field sections (sizes checked against the
 * file; the entries themselves are checked where they are read). */
static int index_fields_open(struct index *idx, const struct index_header *h,
			     char **err)
{
	const char *base = idx->map;
	if (h->count > UINT64_MAX / 8 - 1 || h->nfields > UINT64_MAX / 8 ||
	    !section_ok(h, h->off_fstart, (h->count + 1) * 8) ||
	    !section_ok(h, h->off_fext, h->nfields * 4) ||
	    !section_ok(h, h->off_foff, h->nfields * 8) ||
	    !section_ok(h, h->off_flen, h->nfields * 8)) {
		*err = strdupf("index %s: the field arrays lie outside the "
			       "file (corrupted)",
			       idx->path);
		return -EINVAL;
	}
	idx->fstart = (const void *)(base + h->off_fstart);
	if (idx->fstart[h->count] != h->nfields) {
		*err = strdupf("index %s: the field table is inconsistent "
			       "(corrupted)",
			       idx->path);
		return -EINVAL;
	}
	idx->nfields = h->nfields;
	idx->fext = (const void *)(base + h->off_fext);
	idx->foff = (const void *)(base + h->off_foff);
	idx->flen = (const void *)(base + h->off_flen);
	idx->nnames = h->nnames;
	return index_names(idx, h, h->off_names, h->names_size, h->nnames,
			   &idx->names, "field names", err);
}

int index_open(const char *path, uint32_t flags, struct index **out, char **err)
{
	struct index *idx = NULL;
	struct index_header h;
	struct stat st;
	void *map = MAP_FAILED;
	int rc, fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		*err = strdupf("index %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		*err = strdupf("index %s: %s", path, strerror(-rc));
		goto out;
	}
	rc = -EINVAL;
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		*err = strdupf("index %s: a directory, not an index file: "
			       "build one with `wharf index build --dir %s -o "
			       "INDEX` (Python: wharf.Index.build(INDEX, "
			       "dir=...)) and pass INDEX",
			       path, path);
		goto out;
	}
	if ((uint64_t)st.st_size < INDEX_HEADER_SIZE) {
		*err = strdupf("index %s: %lld bytes, too short for an "
			       "index (header is %u bytes)",
			       path, (long long)st.st_size, INDEX_HEADER_SIZE);
		goto out;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		*err = strdupf("index %s: mmap: %s", path, strerror(-rc));
		goto out;
	}
	memcpy(&h, map, sizeof(h));
	if (memcmp(h.magic, INDEX_MAGIC, 8)) {
		*err = strdupf("index %s: not a wharf index (bad magic)", path);
		goto out;
	}
	if (h.version != INDEX_VERSION || h.header_size != INDEX_HEADER_SIZE) {
		*err = strdupf("index %s: version %u, this library reads "
			       "version %u",
			       path, h.version, INDEX_VERSION);
		goto out;
	}
	if (index_header_hash(&h) != h.header_hash) {
		*err = strdupf("index %s: header checksum mismatch "
			       "(corrupted)",
			       path);
		goto out;
	}
	if (h.file_size != (uint64_t)st.st_size) {
		*err = strdupf("index %s: file is %lld bytes, header "
			       "says %llu (truncated or appended to)",
			       path, (long long)st.st_size,
			       (unsigned long long)h.file_size);
		goto out;
	}
	/* The body checksum runs over 8-byte words. */
	if (h.file_size % 8) {
		*err = strdupf("index %s: %llu bytes is not a whole "
			       "number of 8-byte words (corrupt)",
			       path, (unsigned long long)h.file_size);
		goto out;
	}
	if (h.count > UINT64_MAX / 8 || h.nfiles > UINT32_MAX ||
	    !section_ok(&h, h.off_file, h.count * 4) ||
	    !section_ok(&h, h.off_offset, h.count * 8) ||
	    !section_ok(&h, h.off_length, h.count * 8) ||
	    !section_ok(&h, h.off_label, h.count * 4) ||
	    !section_ok(&h, h.off_pathoff, (h.nfiles + 1) * 8) ||
	    !section_ok(&h, h.off_blob, h.blob_size) ||
	    !section_ok(&h, h.off_root, h.root_size) || h.root_size == 0 ||
	    h.blob_size == 0) {
		*err = strdupf("index %s: a section lies outside the "
			       "file (corrupted)",
			       path);
		goto out;
	}
	const char *base = map;
	const uint64_t *pathoff = (const void *)(base + h.off_pathoff);
	if (base[h.off_blob + h.blob_size - 1] != '\0' ||
	    base[h.off_root + h.root_size - 1] != '\0' ||
	    pathoff[h.nfiles] != h.blob_size) {
		*err = strdupf("index %s: path table is inconsistent "
			       "(corrupted)",
			       path);
		goto out;
	}
	idx = calloc(1, sizeof(*idx));
	if (!idx) {
		rc = -ENOMEM;
		*err = strdupf("index %s: out of memory", path);
		goto out;
	}
	idx->count = h.count;
	idx->nfiles = h.nfiles;
	idx->file = (const void *)(base + h.off_file);
	idx->offset = (const void *)(base + h.off_offset);
	idx->length = (const void *)(base + h.off_length);
	idx->label = (const void *)(base + h.off_label);
	idx->pathoff = pathoff;
	idx->blob = base + h.off_blob;
	idx->root = base + h.off_root;
	idx->min_length = h.min_length;
	idx->max_length = h.max_length;
	idx->total_bytes = h.total_bytes;
	idx->num_labels = h.num_labels;
	idx->unknown_lengths = h.unknown_lengths;
	idx->map = map;
	idx->map_size = st.st_size;
	map = MAP_FAILED; /* idx owns it now */
	idx->path = strdup(path);
	if (!idx->path) {
		rc = -ENOMEM;
		*err = strdupf("index %s: out of memory", path);
		goto out;
	}
	rc = 0;
	if (h.off_classes)
		rc = index_names(idx, &h, h.off_classes, h.classes_size,
				 h.num_labels, &idx->classes, "class names",
				 err);
	if (!rc && h.off_fstart)
		rc = index_fields_open(idx, &h, err);
	if (rc) {
		if (!*err)
			*err = strdupf("index %s: out of memory", path);
		goto out;
	}
	if (flags & WHARF_INDEX_VERIFY) {
		rc = index_verify(idx, err);
		if (rc)
			goto out;
	}
	*out = idx;
	idx = NULL;
	rc = 0;
out:
	if (idx) {
		if (idx->map)
			munmap(idx->map, idx->map_size);
		free(idx->classes);
		free(idx->names);
		free(idx->path);
		free(idx);
	}
	if (map != MAP_FAILED)
		munmap(map, st.st_size);
	close(fd);
	return rc;
}

void index_close(struct index *idx)
{
	if (!idx)
		return;
	munmap(idx->map, idx->map_size);
	free(idx->classes);
	free(idx->names);
	free(idx->path);
	free(idx);
}

int index_verify(const struct index *idx, char **err)
{
	const struct index_header *h = idx->map;
	uint64_t sum =
	    hash_words(HASH_SEED, (const char *)idx->map + h->header_size,
		       h->file_size - h->header_size);
	if (sum != h->body_hash) {
		*err = strdupf("index %s: checksum mismatch over the "
			       "sample arrays and paths (corrupted)",
			       idx->path);
		return -EINVAL;
	}
	return 0;
}

int index_full_path(const struct index *idx, uint32_t f, char *buf, size_t len)
{
	if (f >= idx->nfiles)
		return -ERANGE;
	uint64_t off = idx->pathoff[f];
	const struct index_header *h = idx->map;
	if (off >= h->blob_size)
		return -ERANGE;
	const char *p = idx->blob + off;
	int n;
	if (p[0] == '/' || !idx->root[0])
		n = snprintf(buf, len, "%s", p);
	else
		n = snprintf(buf, len, "%s/%s", idx->root, p);
	if (n < 0 || (size_t)n >= len) {
		if (len)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return n;
}

/* The index's field names, ", "-separated, for messages. */
static char *field_names(const struct index *idx)
{
	size_t len = 1;
	for (uint32_t k = 0; k < idx->nnames; k++)
		len += strlen(idx->names[k]) + 2;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*p = '\0';
	for (uint32_t k = 0; k < idx->nnames; k++)
		p += sprintf(p, "%s%s", k ? ", " : "", idx->names[k]);
	return s;
}

int index_field_want(const struct index *idx, const char *list, bool **want,
		     char **err)
{
	bool any = false;
	*want = NULL;
	if (!idx->fstart) {
		*err = strdupf("index %s has no fields (it was not built from "
			       "tar shards): read whole samples (no field)",
			       idx->path);
		return -EINVAL;
	}
	*want = calloc(idx->nnames ? idx->nnames : 1, sizeof(**want));
	if (!*want) {
		*err = strdupf("index %s: out of memory", idx->path);
		return -ENOMEM;
	}
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		for (uint32_t k = 0; k < idx->nnames; k++)
			if (strlen(idx->names[k]) == n &&
			    !memcmp(idx->names[k], p, n))
				(*want)[k] = any = true;
		p += n + (p[n] == ',');
	}
	if (!any) {
		char *names = field_names(idx);
		*err = strdupf("field \"%s\": no sample of index %s has it "
			       "(its fields: %s)",
			       list, idx->path, names ? names : "?");
		free(names);
		free(*want);
		*want = NULL;
		return *list ? -ENOENT : -EINVAL;
	}
	return 0;
}

/* ---- the writer ---- */

/* The sections every index has (S_COUNT), then the field sections, made
 * at the first field. */
enum {
	S_FILE,
	S_OFFSET,
	S_LENGTH,
	S_LABEL,
	S_PATHOFF,
	S_BLOB,
	S_COUNT,
	S_FSTART = S_COUNT,
	S_FEXT,
	S_FOFF,
	S_FLEN,
	S_ALL
};

/* Distinct field names an index may hold: a bound on memory a hostile
 * shard could grow (WebDataset datasets use a handful). */
#define NAMES_MAX 65536u

/* The field names met so far, and an open-addressing table of their ids
 * (slot = id + 1, 0 empty; cap a power of two, n < cap / 2). */
struct names {
	char **name;
	uint32_t n;
	uint32_t *slot;
	uint32_t cap;
};

struct writer {
	const char *out;
	char *tmp_path; /* the output before rename */
	FILE *sec[S_ALL];
	uint64_t count, nfiles, blob_size;
	/* Fields: their count, the sample added last (which the next fields
	 * belong to) and the names its fields have so far. */
	uint64_t nfields;
	bool fields_on;
	uint64_t last_off, last_len;
	uint32_t *cur;
	size_t ncur, capcur;
	struct names names;
	uint64_t min_length, max_length, total_bytes;
	int32_t max_label;
	uint32_t unknown;
	char *root;
	char *const *classes; /* borrowed: num class names, or NULL */
	size_t nclasses;
	char *last_path; /* writer_file_once(): the file added last */
	uint32_t last_id;
	char **err;
};

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

static char *dir_of(const char *path)
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
	char *dir = dir_of(w->out);
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

static int writer_init(struct writer *w, const char *out, const char *root,
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

static void writer_free(struct writer *w)
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
static int writer_file(struct writer *w, const char *path, uint32_t *id)
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
static int writer_file_once(struct writer *w, const char *path, uint32_t *id,
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

static int writer_sample(struct writer *w, uint32_t file, uint64_t off,
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
static int writer_field(struct writer *w, const char *ext, uint64_t off,
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

static int writer_finish(struct writer *w)
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

/* ---- from a directory ---- */

struct pathset {
	char *blob;
	size_t len, cap;
	uint64_t *off;
	uint64_t *size;
	size_t n, ncap;
};

static int pathset_add(struct pathset *ps, const char *p, uint64_t size)
{
	size_t l = strlen(p) + 1;
	if (ps->len + l > ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 1 << 16;
		while (cap < ps->len + l)
			cap *= 2;
		char *b = realloc(ps->blob, cap);
		if (!b)
			return -ENOMEM;
		ps->blob = b;
		ps->cap = cap;
	}
	if (ps->n == ps->ncap) {
		size_t cap = ps->ncap ? ps->ncap * 2 : 1024;
		uint64_t *o = realloc(ps->off, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		ps->off = o;
		uint64_t *s = realloc(ps->size, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		ps->size = s;
		ps->ncap = cap;
	}
	memcpy(ps->blob + ps->len, p, l);
	ps->off[ps->n] = ps->len;
	ps->size[ps->n] = size;
	ps->n++;
	ps->len += l;
	return 0;
}

static void pathset_free(struct pathset *ps)
{
	free(ps->blob);
	free(ps->off);
	free(ps->size);
}

/* Walks dirfd (path rel below the root) adding every regular file. */
static int walk(int dirfd, const char *rel, struct pathset *ps,
		const char *root, char **err)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		int rc = -errno;
		close(dirfd);
		*err = strdupf("%s/%s: %s", root, rel, strerror(-rc));
		return rc;
	}
	int rc = 0;
	struct dirent *de;
	char path[PATH_MAX];
	while ((errno = 0, de = readdir(d))) {
		const char *nm = de->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		int n = rel[0] ? snprintf(path, sizeof(path), "%s/%s", rel, nm)
			       : snprintf(path, sizeof(path), "%s", nm);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			rc = -ENAMETOOLONG;
			*err =
			    strdupf("%s/%s/%s: path too long", root, rel, nm);
			break;
		}
		struct stat st;
		bool is_dir = de->d_type == DT_DIR;
		if (!is_dir) {
			if (fstatat(dirfd, nm, &st, 0)) {
				rc = -errno;
				*err = strdupf("%s/%s: %s", root, path,
					       strerror(-rc));
				break;
			}
			/* Directories behind symbolic links are not followed:
			 * a link loop would never end. */
			is_dir = S_ISDIR(st.st_mode) && de->d_type != DT_LNK;
			if (!is_dir && !S_ISREG(st.st_mode))
				continue;
		}
		if (is_dir) {
			int fd = openat(dirfd, nm,
					O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				rc = -errno;
				*err = strdupf("%s/%s: %s", root, path,
					       strerror(-rc));
				break;
			}
			rc = walk(fd, path, ps, root, err);
			if (rc)
				break;
			continue;
		}
		rc = pathset_add(ps, path, (uint64_t)st.st_size);
		if (rc) {
			*err = strdupf("%s: out of memory", root);
			break;
		}
	}
	if (!rc && errno) {
		rc = -errno;
		*err = strdupf("%s/%s: %s", root, rel, strerror(-rc));
	}
	closedir(d);
	return rc;
}

static int cmp_path(const void *a, const void *b, void *blob)
{
	const char *s = blob;
	return strcmp(s + *(const uint64_t *)a, s + *(const uint64_t *)b);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int wharf_index_build_dir(const char *dir, const char *out)
{
	struct pathset ps = {0};
	struct writer w;
	char *err = NULL, *root = NULL;
	char **top = NULL;
	uint64_t *order = NULL;
	size_t ntop = 0;
	int rc;

	memset(&w, 0, sizeof(w));
	root = realpath(dir, NULL);
	if (!root) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		return error_set(rc, err);
	}
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		goto out;
	}
	rc = walk(fd, "", &ps, root, &err);
	if (rc)
		goto out;
	/* Sort (a permutation of indices, so the sizes follow). */
	order = malloc((ps.n ? ps.n : 1) * sizeof(*order));
	if (!order) {
		rc = -ENOMEM;
		err = strdupf("%s: out of memory", dir);
		goto out;
	}
	memcpy(order, ps.off, ps.n * sizeof(*order));
	qsort_r(order, ps.n, sizeof(*order), cmp_path, ps.blob);
	/* Top-level subdirectories, sorted, give the labels. */
	DIR *d = opendir(root);
	if (!d) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		goto out;
	}
	struct dirent *de;
	size_t tcap = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' &&
		    (!de->d_name[1] ||
		     (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		struct stat st;
		if (de->d_type == DT_DIR ||
		    (de->d_type == DT_UNKNOWN &&
		     !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		     S_ISDIR(st.st_mode))) {
			if (ntop == tcap) {
				tcap = tcap ? tcap * 2 : 64;
				char **t = realloc(top, tcap * sizeof(*t));
				if (!t) {
					closedir(d);
					rc = -ENOMEM;
					goto out;
				}
				top = t;
			}
			top[ntop] = strdup(de->d_name);
			if (!top[ntop++]) {
				closedir(d);
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	closedir(d);
	if (ntop) /* top is NULL for a directory of files only */
		qsort(top, ntop, sizeof(*top), cmp_str);

	rc = writer_init(&w, out, root, &err);
	if (rc)
		goto out;
	/* Label of a file: the rank of its first path component among the
	 * sorted top-level directories (binary search, nothing allocated). */
	for (size_t i = 0; i < ps.n; i++) {
		const char *p = ps.blob + order[i];
		int32_t label = -1;
		const char *slash = strchr(p, '/');
		if (slash) {
			size_t lo = 0, hi = ntop, cl = (size_t)(slash - p);
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				int c = strncmp(top[mid], p, cl);
				if (!c && top[mid][cl])
					c = 1;
				if (c < 0)
					lo = mid + 1;
				else if (c > 0)
					hi = mid;
				else {
					label = (int32_t)mid;
					break;
				}
			}
		}
		/* Its size: ps.size is indexed like ps.off, whose entries
		 * increase, so the offset finds it by binary search. */
		size_t lo = 0, hi = ps.n;
		while (lo + 1 < hi) {
			size_t mid = (lo + hi) / 2;
			if (ps.off[mid] <= order[i])
				lo = mid;
			else
				hi = mid;
		}
		uint32_t id;
		rc = writer_file(&w, p, &id);
		if (!rc)
			rc = writer_sample(&w, id, 0, ps.size[lo], label);
		if (rc)
			goto out;
	}
	/* Every class directory counts, even an empty one (ImageFolder). */
	if (ntop && (int32_t)(ntop - 1) > w.max_label)
		w.max_label = (int32_t)(ntop - 1);
	w.classes = top;
	w.nclasses = ntop;
	rc = writer_finish(&w);
out:
	writer_free(&w);
	for (size_t i = 0; i < ntop; i++)
		free(top[i]);
	free(top);
	free(order);
	pathset_free(&ps);
	free(root);
	if (rc && !err)
		err = strdupf("index %s from %s: %s", out, dir, strerror(-rc));
	return rc ? error_set(rc, err) : 0;
}

/* ---- from a list ---- */

/* A list whose first line is this holds "PATH OFFSET LENGTH [LABEL]" lines;
 * without it lines are "PATH [LABEL]" as they always were, so an old list
 * means what it meant (its '#' lines were comments, and still are). */
#define LIST_OFFSETS "#wharf-list offsets"

/* An optional '-' and decimal digits, nothing else. */
static bool is_int(const char *s)
{
	if (*s == '-')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (*end || errno)
		return false;
	*v = x;
	return true;
}

static bool parse_label(const char *s, int32_t *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (end == s || *end || errno || x < -1 || x > INT32_MAX)
		return false;
	*v = (int32_t)x;
	return true;
}

/* "PATH [LABEL]": cuts the label off p when the last word is one. */
static int32_t parse_plain_line(char *p)
{
	int32_t label = -1;
	char *sp = strrchr(p, ' '), *tab = strrchr(p, '\t');
	if (tab && (!sp || tab > sp))
		sp = tab;
	if (sp && parse_label(sp + 1, &label)) {
		while (sp > p && (sp[-1] == ' ' || sp[-1] == '\t'))
			sp--;
		*sp = '\0';
	}
	return label;
}

/*
 * "PATH OFFSET LENGTH [LABEL]" (p trimmed, not blank): with a tab in the
 * line the fields are split at tabs only, so a path may hold spaces and end
 * in a number; otherwise the last two or three words are the numbers and a
 * path that itself ends in a number word would be read wrong, so four
 * numeric words are refused as ambiguous.  Cuts the path off in place.
 * Returns NULL, or why the line is refused.
 */
static const char *parse_offsets_line(char *p, uint64_t *off, uint64_t *len,
				      int32_t *label)
{
	char *f[4]; /* the number fields, last first */
	int k = 0;
	if (strchr(p, '\t')) {
		char *fields[5], *s = p;
		int n = 0;
		while (s && n < 5) {
			fields[n++] = s;
			s = strchr(s, '\t');
			if (s)
				*s++ = '\0';
		}
		if (s || n < 3 || n > 4)
			return "expected "
			       "PATH<TAB>OFFSET<TAB>LENGTH[<TAB>LABEL]";
		for (int i = n - 1; i >= 1; i--)
			f[k++] = fields[i];
	} else {
		char *end = p + strlen(p);
		while (k < 4) {
			char *sp = end;
			while (sp > p && sp[-1] != ' ')
				sp--;
			if (sp == p || !is_int(sp))
				break;
			f[k++] = sp;
			while (sp > p && sp[-1] == ' ')
				sp--;
			*sp = '\0';
			end = sp;
		}
		if (k == 4)
			return "ambiguous: four numbers after the path (a path "
			       "ending in a number needs tabs between the "
			       "fields)";
		if (k < 2)
			return "expected PATH OFFSET LENGTH [LABEL]";
	}
	const char *o = f[k - 1], *l = f[k - 2];
	if (!parse_u64(o, off))
		return "the offset is not a number >= 0";
	if (!parse_u64(l, len))
		return "the length is not a number >= 0";
	*label = -1;
	if (k == 3 && !parse_label(f[0], label))
		return "the label is not a number from -1 to 2147483647";
	if (!*p)
		return "no path";
	return NULL;
}

/* Whether a plain line's path ends in two number words, as an offset line
 * would: the hint when such a path is missing. */
static bool looks_offset(const char *path)
{
	int words = 0;
	const char *end = path + strlen(path);
	while (words < 2) {
		const char *sp = end;
		while (sp > path && sp[-1] != ' ' && sp[-1] != '\t')
			sp--;
		if (sp == path || sp == end)
			return false;
		for (const char *c = sp; c < end; c++)
			if (*c < '0' || *c > '9')
				return false;
		words++;
		end = sp;
		while (end > path && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
	}
	return true;
}

int wharf_index_build_list(const char *list, int stat_files, const char *out)
{
	struct writer w;
	char *err = NULL, *root = NULL, *line = NULL;
	size_t cap = 0;
	uint64_t lineno = 0, size = 0;
	bool offsets = false;
	FILE *in = NULL;
	int rc;

	memset(&w, 0, sizeof(w));
	in = fopen(list, "re");
	if (!in) {
		rc = -errno;
		err = strdupf("%s: %s", list, strerror(-rc));
		goto out;
	}
	char *ldir = dir_of(list);
	root = ldir ? realpath(ldir, NULL) : NULL;
	free(ldir);
	if (!root) {
		rc = -errno;
		err = strdupf("%s: directory: %s", list, strerror(-rc));
		goto out;
	}
	rc = writer_init(&w, out, root, &err);
	if (rc)
		goto out;
	ssize_t n;
	while ((n = getline(&line, &cap, in)) >= 0) {
		lineno++;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' ||
				 line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		if (lineno == 1 && !strcmp(line, LIST_OFFSETS)) {
			offsets = true;
			continue;
		}
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		int32_t label = -1;
		uint64_t off = 0, len = WHARF_LENGTH_UNKNOWN;
		if (offsets) {
			const char *why =
			    parse_offsets_line(p, &off, &len, &label);
			if (why) {
				rc = -EINVAL;
				err = strdupf("%s:%llu: %s", list,
					      (unsigned long long)lineno, why);
				goto out;
			}
		} else {
			label = parse_plain_line(p);
		}
		uint32_t id;
		int added = 1;
		rc = offsets ? writer_file_once(&w, p, &id, &added)
			     : writer_file(&w, p, &id);
		if (rc)
			goto out;
		if (stat_files && added) {
			struct stat st;
			char full[PATH_MAX];
			int fl = p[0] == '/'
				     ? snprintf(full, sizeof(full), "%s", p)
				     : snprintf(full, sizeof(full), "%s/%s",
						root, p);
			if (fl < 0 || (size_t)fl >= sizeof(full)) {
				rc = -ENAMETOOLONG;
				err = strdupf("%s:%llu: path too long", list,
					      (unsigned long long)lineno);
				goto out;
			}
			if (stat(full, &st)) {
				rc = -errno;
				err = strdupf("%s:%llu: %s: %s%s", list,
					      (unsigned long long)lineno, full,
					      strerror(-rc),
					      !offsets && looks_offset(p)
						  ? " (for PATH OFFSET LENGTH "
						    "lines, make the list's "
						    "first line \"" LIST_OFFSETS
						    "\")"
						  : "");
				goto out;
			}
			size = (uint64_t)st.st_size;
		}
		if (stat_files && !offsets)
			len = size;
		if (stat_files && offsets && (off > size || len > size - off)) {
			rc = -ERANGE;
			err =
			    strdupf("%s:%llu: %s: bytes %llu to %llu are past "
				    "its end (%llu bytes)",
				    list, (unsigned long long)lineno, p,
				    (unsigned long long)off,
				    (unsigned long long)(off + len),
				    (unsigned long long)size);
			goto out;
		}
		rc = writer_sample(&w, id, off, len, label);
		if (rc)
			goto out;
	}
	if (ferror(in)) {
		rc = -EIO;
		err = strdupf("%s: read error", list);
		goto out;
	}
	rc = writer_finish(&w);
out:
	writer_free(&w);
	free(line);
	free(root);
	if (in)
		fclose(in);
	return rc ? error_set(rc, err) : 0;
}

/* ---- fixed-size records ---- */

int wharf_index_build_records(uint64_t record, const char *const *files,
			      size_t nfiles, const char *out)
{
	struct writer w;
	char *err = NULL;
	char cwd[PATH_MAX];
	int rc;

	memset(&w, 0, sizeof(w));
	if (record == 0) {
		err = strdupf("index %s: record size must be > 0", out);
		return error_set(-EINVAL, err);
	}
	if (!getcwd(cwd, sizeof(cwd))) {
		rc = -errno;
		err = strdupf("getcwd: %s", strerror(-rc));
		return error_set(rc, err);
	}
	rc = writer_init(&w, out, cwd, &err);
	if (rc)
		goto out;
	for (size_t i = 0; i < nfiles; i++) {
		struct stat st;
		if (stat(files[i], &st)) {
			rc = -errno;
			err = strdupf("%s: %s", files[i], strerror(-rc));
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			rc = -EINVAL;
			err = strdupf("%s: not a regular file", files[i]);
			goto out;
		}
		uint32_t id;
		rc = writer_file(&w, files[i], &id);
		if (rc)
			goto out;
		uint64_t n = (uint64_t)st.st_size / record;
		for (uint64_t k = 0; k < n; k++) {
			rc = writer_sample(&w, id, k * record, record, -1);
			if (rc)
				goto out;
		}
	}
	rc = writer_finish(&w);
out:
	writer_free(&w);
	return rc ? error_set(rc, err) : 0;
}

/* ---- the public builder ---- */

struct wharf_index_builder {
	struct writer w;
	char *out;
	char *err; /* where the writer leaves its messages */
	int rc;	   /* the first write error: sticky, finish returns it */
	bool done;
};

int wharf_index_builder_new(const char *out, const char *root,
			    wharf_index_builder **b)
{
	char *err = NULL;
	*b = NULL;
	if (!out || !*out)
		return error_set(-EINVAL, strdupf("index builder: no output "
						  "path"));
	char *real = realpath(root ? root : ".", NULL);
	if (!real) {
		int rc = -errno;
		return error_set(rc, strdupf("index %s: root %s: %s", out,
					     root ? root : ".", strerror(-rc)));
	}
	struct wharf_index_builder *nb = calloc(1, sizeof(*nb));
	char *o = strdup(out);
	if (!nb || !o) {
		free(nb);
		free(o);
		free(real);
		return error_set(-ENOMEM,
				 strdupf("index %s: out of memory", out));
	}
	nb->out = o;
	int rc = writer_init(&nb->w, nb->out, real, &err);
	free(real);
	if (rc) {
		writer_free(&nb->w);
		free(nb->out);
		free(nb);
		return error_set(rc, err);
	}
	nb->w.err = &nb->err;
	*b = nb;
	return 0;
}

/* A write failed: every later call fails too (the index would miss
 * samples).  Hands the writer's message to wharf_last_error(). */
static int builder_failed(struct wharf_index_builder *b, int rc)
{
	char *msg = b->err;
	b->rc = rc;
	b->err = NULL;
	return error_set(rc, msg);
}

/* A call on a builder that failed or finished. */
static int builder_spent(const struct wharf_index_builder *b)
{
	return error_set(
	    b->rc ? b->rc : -EINVAL,
	    strdupf("index %s: %s", b->out,
		    b->rc ? "an earlier write failed" : "already finished"));
}

int wharf_index_builder_add(wharf_index_builder *b, const char *path,
			    uint64_t offset, uint64_t length, int32_t label)
{
	if (b->rc || b->done)
		return builder_spent(b);
	if (!path || !*path)
		return error_set(
		    -EINVAL, strdupf("index %s: sample %llu: "
				     "empty path",
				     b->out, (unsigned long long)b->w.count));
	if (label < -1)
		return error_set(-EINVAL,
				 strdupf("index %s: sample %llu: label %d "
					 "(use -1 for none)",
					 b->out, (unsigned long long)b->w.count,
					 (int)label));
	if (length != WHARF_LENGTH_UNKNOWN && offset > UINT64_MAX - length)
		return error_set(-EOVERFLOW,
				 strdupf("index %s: sample %llu: offset + "
					 "length overflows",
					 b->out,
					 (unsigned long long)b->w.count));
	uint32_t id;
	int added;
	int rc = writer_file_once(&b->w, path, &id, &added);
	if (!rc)
		rc = writer_sample(&b->w, id, offset, length, label);
	return rc ? builder_failed(b, rc) : 0;
}

int wharf_index_builder_field(wharf_index_builder *b, const char *ext,
			      uint64_t offset, uint64_t length)
{
	struct writer *w = &b->w;
	if (b->rc || b->done)
		return builder_spent(b);
	if (!w->count)
		return error_set(-EINVAL,
				 strdupf("index %s: a field before any sample "
					 "(add the sample first)",
					 b->out));
	const unsigned long long at = w->count - 1;
	if (!ext || !*ext)
		return error_set(-EINVAL,
				 strdupf("index %s: sample %llu: a field "
					 "without a name",
					 b->out, at));
	if (offset > UINT64_MAX - length ||
	    (w->last_len != WHARF_LENGTH_UNKNOWN &&
	     (offset < w->last_off ||
	      offset + length > w->last_off + w->last_len)))
		return error_set(-ERANGE,
				 strdupf("index %s: sample %llu: field %s "
					 "(bytes %llu + %llu) lies outside "
					 "the sample (bytes %llu + %llu)",
					 b->out, at, ext,
					 (unsigned long long)offset,
					 (unsigned long long)length,
					 (unsigned long long)w->last_off,
					 (unsigned long long)w->last_len));
	for (size_t k = 0; k < w->ncur; k++)
		if (!strcmp(w->names.name[w->cur[k]], ext))
			return error_set(-EEXIST,
					 strdupf("index %s: sample %llu has "
						 "field %s twice",
						 b->out, at, ext));
	int rc = writer_field(w, ext, offset, length);
	return rc ? builder_failed(b, rc) : 0;
}

int wharf_index_builder_finish(wharf_index_builder *b)
{
	if (b->rc || b->done)
		return builder_spent(b);
	b->done = true;
	int rc = writer_finish(&b->w);
	return rc ? builder_failed(b, rc) : 0;
}

void wharf_index_builder_free(wharf_index_builder *b)
{
	if (!b)
		return;
	writer_free(&b->w);
	free(b->err);
	free(b->out);
	free(b);
}

/* ---- public accessors ---- */

int wharf_index_open(const char *path, uint32_t flags, wharf_index **out)
{
	struct index *idx;
	char *err = NULL;
	int rc = index_open(path, flags, &idx, &err);
	if (rc)
		return error_set(rc, err);
	*out = (wharf_index *)(void *)idx;
	return 0;
}

void wharf_index_close(wharf_index *idx)
{
	index_close((struct index *)(void *)idx);
}

uint64_t wharf_index_count(const wharf_index *idx)
{
	return index_from_public(idx)->count;
}

uint64_t wharf_index_num_files(const wharf_index *idx)
{
	return index_from_public(idx)->nfiles;
}

uint32_t wharf_index_num_labels(const wharf_index *idx)
{
	return index_from_public(idx)->num_labels;
}

int wharf_index_sample(const wharf_index *w, uint64_t i,
		       struct wharf_sample *out)
{
	const struct index *idx = index_from_public(w);
	if (i >= idx->count)
		return error_set(-ERANGE,
				 strdupf("sample %llu: index %s has %llu",
					 (unsigned long long)i, idx->path,
					 (unsigned long long)idx->count));
	out->file = idx->file[i];
	out->offset = idx->offset[i];
	out->length = idx->length[i];
	out->label = idx->label[i];
	return 0;
}

uint32_t wharf_index_num_fields(const wharf_index *w, uint64_t i)
{
	const struct index *idx = index_from_public(w);
	uint64_t first, end;
	if (i >= idx->count || index_fields(idx, i, &first, &end))
		return 0;
	return (uint32_t)(end - first);
}

int wharf_index_field(const wharf_index *w, uint64_t i, uint32_t k,
		      struct wharf_field *out)
{
	const struct index *idx = index_from_public(w);
	uint64_t first, end;
	if (i >= idx->count || index_fields(idx, i, &first, &end) ||
	    k >= end - first)
		return error_set(-ERANGE,
				 strdupf("sample %llu: index %s has no field "
					 "%u of it",
					 (unsigned long long)i, idx->path, k));
	const uint64_t f = first + k;
	if (idx->fext[f] >= idx->nnames)
		return error_set(-EINVAL,
				 strdupf("sample %llu: index %s: field %u "
					 "names no field name (corrupted)",
					 (unsigned long long)i, idx->path, k));
	out->offset = idx->foff[f];
	out->length = idx->flen[f];
	out->name = idx->names[idx->fext[f]];
	return 0;
}

const char *wharf_index_field_name(const wharf_index *w, uint32_t k)
{
	const struct index *idx = index_from_public(w);
	return k < idx->nnames ? idx->names[k] : NULL;
}

const char *wharf_index_class_name(const wharf_index *w, uint32_t label)
{
	const struct index *idx = index_from_public(w);
	if (!idx->classes || label >= idx->num_labels)
		return NULL;
	return idx->classes[label];
}

int wharf_index_path(const wharf_index *w, uint32_t file, char *buf, size_t len)
{
	int rc = index_full_path(index_from_public(w), file, buf, len);
	if (rc < 0)
		return error_set(rc,
				 strdupf("file %u: %s", file, strerror(-rc)));
	return rc;
}

int wharf_index_info(const wharf_index *w, struct wharf_index_info *info)
{
	const struct index *idx = index_from_public(w);
	struct wharf_index_info i = {
	    .size = sizeof(i),
	    .num_labels = idx->num_labels,
	    .count = idx->count,
	    .num_files = idx->nfiles,
	    .min_length = idx->min_length,
	    .max_length = idx->max_length,
	    .total_bytes = idx->total_bytes,
	    .file_bytes = idx->map_size,
	    .unknown_lengths = idx->unknown_lengths,
	    .version = INDEX_VERSION,
	    .num_fields = idx->nfields,
	    .num_field_names = idx->nnames,
	};
	size_t n =
	    info->size && info->size < sizeof(i) ? info->size : sizeof(i);
	memcpy(info, &i, n);
	info->size = (uint32_t)n;
	return 0;
}

int wharf_index_verify(const wharf_index *w)
{
	char *err = NULL;
	int rc = index_verify(index_from_public(w), &err);
	return rc ? error_set(rc, err) : 0;
}
