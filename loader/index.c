/*
 * index: reading the index file: open (map, check the header), verify
 * (checksum every section), paths and fields, and the public accessors.
 * Building one is index_build.c's (through the writer, index_write.c).
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
#include "index_i.h"
#include "text.h"

uint64_t index_header_hash(const struct index_header *h)
{
	struct index_header c = *h;
	c.header_hash = 0;
	return hash_words(HASH_SEED, &c, sizeof(c));
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

/* ---- public accessors ---- */

/* -EINVAL for a NULL argument of `call`, with a message naming it. */
static int refuse_null(const char *call, const char *what)
{
	return error_set(-EINVAL, strdupf("%s: NULL %s", call, what));
}

int wharf_index_open(const char *path, uint32_t flags, wharf_index **out)
{
	struct index *idx;
	char *err = NULL;
	if (!path || !out)
		return refuse_null("wharf_index_open",
				   path ? "out pointer" : "path");
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

/* The getters that cannot return an error return 0 (NULL) for a NULL
 * index, with the message in wharf_last_error(). */
uint64_t wharf_index_count(const wharf_index *idx)
{
	if (!idx)
		return (void)refuse_null("wharf_index_count", "index"), 0;
	return index_from_public(idx)->count;
}

uint64_t wharf_index_num_files(const wharf_index *idx)
{
	if (!idx)
		return (void)refuse_null("wharf_index_num_files", "index"), 0;
	return index_from_public(idx)->nfiles;
}

uint32_t wharf_index_num_labels(const wharf_index *idx)
{
	if (!idx)
		return (void)refuse_null("wharf_index_num_labels", "index"), 0;
	return index_from_public(idx)->num_labels;
}

int wharf_index_sample(const wharf_index *w, uint64_t i,
		       struct wharf_sample *out)
{
	if (!w || !out)
		return refuse_null("wharf_index_sample", w ? "out" : "index");
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
	if (!w)
		return (void)refuse_null("wharf_index_num_fields", "index"), 0;
	const struct index *idx = index_from_public(w);
	uint64_t first, end;
	if (i >= idx->count || index_fields(idx, i, &first, &end))
		return 0;
	return (uint32_t)(end - first);
}

int wharf_index_field(const wharf_index *w, uint64_t i, uint32_t k,
		      struct wharf_field *out)
{
	if (!w || !out)
		return refuse_null("wharf_index_field", w ? "out" : "index");
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
	if (!w)
		return (void)refuse_null("wharf_index_field_name", "index"),
		       NULL;
	const struct index *idx = index_from_public(w);
	return k < idx->nnames ? idx->names[k] : NULL;
}

const char *wharf_index_class_name(const wharf_index *w, uint32_t label)
{
	if (!w)
		return (void)refuse_null("wharf_index_class_name", "index"),
		       NULL;
	const struct index *idx = index_from_public(w);
	if (!idx->classes || label >= idx->num_labels)
		return NULL;
	return idx->classes[label];
}

int wharf_index_path(const wharf_index *w, uint32_t file, char *buf, size_t len)
{
	if (!w || (!buf && len))
		return refuse_null("wharf_index_path", w ? "buffer" : "index");
	int rc = index_full_path(index_from_public(w), file, buf, len);
	if (rc < 0)
		return error_set(rc,
				 strdupf("file %u: %s", file, strerror(-rc)));
	return rc;
}

int wharf_index_info(const wharf_index *w, struct wharf_index_info *info)
{
	if (!w || !info)
		return refuse_null("wharf_index_info", w ? "info" : "index");
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
	if (!w)
		return refuse_null("wharf_index_verify", "index");
	int rc = index_verify(index_from_public(w), &err);
	return rc ? error_set(rc, err) : 0;
}

