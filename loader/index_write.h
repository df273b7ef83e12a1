#ifndef WHARF_LOADER_INDEX_WRITE_H
#define WHARF_LOADER_INDEX_WRITE_H
/*
 * index_write: the writer of an index file, for the builders (index_build.c).
 * It streams each array into its own unnamed temporary file next to the
 * output, so memory does not grow with the number of samples, then copies
 * the arrays into the output behind a header, hashing as they go.
 * Calls: writer_init, then writer_file / writer_sample / writer_field any
 * number of times, writer_finish, and writer_free in every case.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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


/* The directory of path, malloc'd ("." for a bare name, "/" at the top);
 * NULL without memory. */
char *index_dir_of(const char *path);

/* Starts an index at out whose relative paths are joined to root; its
 * messages go to *err.  writer_free() after, whatever it returned.
 * @return 0 or -errno. */
int writer_init(struct writer *w, const char *out, const char *root,
		char **err);
/* Closes and frees what a writer holds, and removes its output unless
 * writer_finish() renamed it into place. */
void writer_free(struct writer *w);
/* Adds a file (its path relative to the root, or absolute): its id. */
int writer_file(struct writer *w, const char *path, uint32_t *id);
/* Like writer_file(), but a path equal to the one added just before gets
 * the same id: samples packed in one file (records, offsets) arrive in runs,
 * so one remembered path deduplicates them with memory flat in the count.
 * *added tells whether the path is new. */
int writer_file_once(struct writer *w, const char *path, uint32_t *id,
		     int *added);
/* Adds a sample: len bytes at off in file, with label (-1: none). */
int writer_sample(struct writer *w, uint32_t file, uint64_t off,
		  uint64_t len, int32_t label);
/* Adds a field to the sample added last: its name and bytes in that
 * sample's file.  The first field of an index starts the field sections,
 * with no fields for the samples before. */
int writer_field(struct writer *w, const char *ext, uint64_t off,
		 uint64_t len);
/* Writes the header and copies the sections behind it, hashing them, and
 * renames the output into place.  @return 0 or -errno (with *err). */
int writer_finish(struct writer *w);

#endif
