#ifndef WHARF_LOADER_INDEX_H
#define WHARF_LOADER_INDEX_H
/*
 * The index: flat arrays mapped read-only from one file.
 *
 * File layout (little-endian, every section 64-byte aligned):
 *   header (struct index_header, 256 bytes)
 *   file[n]      uint32  file id of each sample
 *   offset[n]    uint64  byte offset of each sample in its file
 *   length[n]    uint64  bytes, or WHARF_LENGTH_UNKNOWN (whole file)
 *   label[n]     int32   label, -1 when none
 *   pathoff[f+1] uint64  start of each file's path in the blob (last = size)
 *   blob         paths, NUL-terminated, relative to root unless absolute
 *   root         the directory relative paths are joined to, NUL-terminated
 *   classes      optional: num_labels names, each NUL-terminated (label k is
 *                the k-th), from the class folders of a --dir build
 *   fields       optional (samples of tar shards, or added with
 *                wharf_index_builder_field): fstart[n+1] uint64, sample i's
 *                fields are [fstart[i], fstart[i+1]); fext[m] uint32, the
 *                field's name in the names table; foff[m], flen[m] uint64,
 *                its bytes in the sample's file; names: nnames names, each
 *                NUL-terminated ("jpg", "cls")
 * The header carries its own checksum (checked at every open: O(1)) and one
 * over the sections (checked on request: it reads every page).
 *
 * Accessors are inline: the hot path reads the arrays directly.
 *
 * Readers of format 1 before fields existed ignore those header words (they
 * were pad, hashed as zero), so they still read a tar index's samples as
 * the span from a sample's first field to its last: the version stays.
 */
#include <stdint.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <wharf/loader.h>

#define INDEX_MAGIC "WHARFIX1"
#define INDEX_VERSION 1u
#define INDEX_HEADER_SIZE 256u

struct index_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint64_t count;
	uint64_t nfiles;
	uint64_t off_file, off_offset, off_length, off_label, off_pathoff;
	uint64_t off_blob, blob_size, off_root, root_size;
	uint64_t file_size;
	uint64_t min_length, max_length, total_bytes;
	uint32_t num_labels, unknown_lengths;
	uint64_t body_hash;   /* over bytes [header_size, file_size) */
	uint64_t header_hash; /* over the header with this field zero */
	/* Zero in files without class names (older files: the pad was zero,
	 * so the format version stays). */
	uint64_t off_classes, classes_size;
	/* Zero in files without fields, likewise. */
	uint64_t off_fstart, nfields, off_fext, off_foff, off_flen;
	uint64_t off_names, names_size;
	uint32_t nnames, reserved;
	uint8_t pad[INDEX_HEADER_SIZE - 240];
};
_Static_assert(sizeof(struct index_header) == INDEX_HEADER_SIZE, "header size");

/* The header's checksum (header_hash is taken as zero). */
uint64_t index_header_hash(const struct index_header *h);

struct index {
	uint64_t count;	 /* samples */
	uint64_t nfiles; /* files */
	const uint32_t *file;
	const uint64_t *offset;
	const uint64_t *length;
	const int32_t *label;
	const uint64_t *pathoff;
	const char *blob;
	const char *root;    /* "" or a directory, no trailing slash */
	const char **classes; /* num_labels names, or NULL */
	uint64_t min_length; /* over known lengths; 0 when none known */
	uint64_t max_length;
	uint64_t total_bytes; /* sum of known lengths */
	uint32_t num_labels;
	uint32_t unknown_lengths; /* 1 when some length is unknown */
	/* Fields (all NULL and 0 in an index without them). */
	uint64_t nfields;
	const uint64_t *fstart; /* count + 1 */
	const uint32_t *fext;	/* nfields, each < nnames when sound */
	const uint64_t *foff;
	const uint64_t *flen;
	const char **names; /* nnames field names */
	uint32_t nnames;
	void *map;
	size_t map_size;
	char *path; /* the index file */
};

/* Opens and maps path; flags as wharf_index_open.  Sets *err (malloc'd) on
 * failure. */
int index_open(const char *path, uint32_t flags, struct index **out, char **err)
    __attribute__((warn_unused_result));
void index_close(struct index *idx);

/* Checksums every section: 0, or -EINVAL with *err set. */
int index_verify(const struct index *idx, char **err)
    __attribute__((warn_unused_result));

static inline uint64_t index_count(const struct index *idx)
{
	return idx->count;
}

static inline uint32_t index_file(const struct index *idx, uint64_t i)
{
	return idx->file[i];
}

static inline uint64_t index_offset(const struct index *idx, uint64_t i)
{
	return idx->offset[i];
}

static inline uint64_t index_length(const struct index *idx, uint64_t i)
{
	return idx->length[i];
}

static inline int32_t index_label(const struct index *idx, uint64_t i)
{
	return idx->label[i];
}

/* Sample i's fields: [*first, *end) of the field arrays.  The bounds come
 * from the file and are checked here, O(1): -EINVAL for a corrupt entry
 * (the full checksum would have caught it). */
static inline int index_fields(const struct index *idx, uint64_t i,
			       uint64_t *first, uint64_t *end)
{
	if (!idx->fstart) {
		*first = *end = 0;
		return 0;
	}
	*first = idx->fstart[i];
	*end = idx->fstart[i + 1];
	return *first <= *end && *end <= idx->nfields ? 0 : -EINVAL;
}

/*
 * The field names in list ("jpg" or "jpg,jpeg,png") as idx->nnames flags
 * for index_field_pick().  @return 0 and *want (malloc'd); -EINVAL when
 * the index has no fields or list is empty, -ENOENT when no sample has any
 * of the names; *err says which names the index has.
 */
int index_field_want(const struct index *idx, const char *list, bool **want,
		     char **err) __attribute__((warn_unused_result));

/* The first field of sample i whose name want flags: its position in the
 * field arrays (index_fields order), or -ENOENT when it has none, -EINVAL
 * for a corrupt entry.  O(fields of i), nothing allocated. */
static inline int64_t index_field_pick(const struct index *idx,
				       const bool *want, uint64_t i)
{
	uint64_t f, end;
	if (index_fields(idx, i, &f, &end))
		return -EINVAL;
	for (; f < end; f++) {
		if (idx->fext[f] >= idx->nnames)
			return -EINVAL;
		if (want[idx->fext[f]])
			return (int64_t)f;
	}
	return -ENOENT;
}

/* The path of file f as stored (relative to index_root() unless it starts
 * with '/'). f < idx->nfiles. */
static inline const char *index_file_path(const struct index *idx, uint32_t f)
{
	return idx->blob + idx->pathoff[f];
}

/* "" or the directory relative paths are joined to. */
static inline const char *index_root(const struct index *idx)
{
	return idx->root;
}

/* Full path of file f into buf: its length, -ERANGE (bad f) or
 * -ENAMETOOLONG. */
int index_full_path(const struct index *idx, uint32_t f, char *buf, size_t len);

/* The public handle is the internal struct. */
static inline const struct index *index_from_public(const wharf_index *w)
{
	return (const struct index *)(const void *)w;
}

#endif
