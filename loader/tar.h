#ifndef WHARF_LOADER_TAR_H
#define WHARF_LOADER_TAR_H
/*
 * Tar shards: where each member's data lies, read from the headers alone.
 *
 * tar_walk reads a tar archive through a read callback, one header block
 * at a time (and the data of GNU long-name and pax records), and never a
 * member's data: over a mount, indexing a shard costs a ranged read per
 * member.  Formats: v7, ustar (prefix + name), GNU (L long names, K long
 * links, base-256 sizes) and pax (x and g records: path, size).
 *
 * The end of an archive: the first zero block when the next block is zero
 * too or the shard ends there, or the shard ending at a header's place
 * (a writer that left out the trailer).  Anything after two zero blocks is
 * not read.  A zero block followed by a header is damage.
 *
 * Damage (a bad checksum, a header or a member cut off by the end of the
 * shard, a size that runs past the end, a malformed number or pax record)
 * stops the walk with -EBADMSG and a message naming the shard and the
 * byte offset of the header at fault.  The members before it have
 * already been passed to the callback: the caller keeps or drops them.
 *
 * tar_wds_walk groups the members the WebDataset way: a regular member's
 * key is its path up to the first dot of its basename, the rest is its
 * field ("0001.seg.png": key "0001", field "seg.png"); one key's members
 * must be adjacent in the shard.  Not thread-safe per walk; no globals.
 */
#include <stddef.h>
#include <stdint.h>

/* The longest member name accepted (GNU L or pax path), and the largest
 * pax record block read: both bound memory fed by the shard. */
#define TAR_NAME_MAX 65536
#define TAR_PAX_MAX (1u << 20)

/* Reads len bytes at off into buf: 0, or -errno (the walk stops with it).
 * The walk never asks past the size it was given. */
typedef int (*tar_read_fn)(void *arg, uint64_t off, void *buf, size_t len);

/* A tar_read_fn over a file descriptor: arg points to the int. */
int tar_pread(void *arg, uint64_t off, void *buf, size_t len);

enum tar_type {
	TAR_REGULAR, /* '0', NUL (v7) and '7' (contiguous) */
	TAR_OTHER,   /* directories, links, devices, GNU sparse files (type
		      * S, or pax GNU.sparse records), anything else */
};

struct tar_member {
	const char *name; /* the full path; valid during the callback */
	uint64_t header;  /* offset of its (first) header block */
	uint64_t offset;  /* offset of its data */
	uint64_t size;	  /* bytes of data (0 for links, directories) */
	enum tar_type type;
};

/* Called once per member, in archive order; a nonzero return stops the
 * walk, and tar_walk returns it. */
typedef int (*tar_member_fn)(void *arg, const struct tar_member *m);

/*
 * Walks the archive `shard` (a name for messages) of `shard_size` bytes.
 * @return 0 at the archive's end; -EBADMSG for damage, -ENOMEM, or the
 * read callback's -errno, with *err (when err is not NULL) a malloc'd
 * "SHARD: byte N: what" for the caller to free; or the member callback's
 * nonzero value as it gave it (*err untouched).
 */
int tar_walk(const char *shard, uint64_t shard_size, tar_read_fn rd,
	     void *rd_arg, tar_member_fn cb, void *cb_arg, char **err)
    __attribute__((warn_unused_result));

/* One field of a WebDataset sample. */
struct tar_field {
	const char *ext; /* after the first dot of the basename: "jpg" */
	uint64_t offset; /* of its data in the shard */
	uint64_t size;
};

/* A sample: its key and fields in archive order; valid during the
 * callback. */
struct tar_sample {
	const char *key;
	uint64_t header; /* the first member's header offset */
	const struct tar_field *fields;
	size_t nfields;
};

typedef int (*tar_sample_fn)(void *arg, const struct tar_sample *s);

/*
 * tar_walk, grouped into samples.  Members that are not regular files,
 * and files whose basename has no dot or starts with one, are skipped
 * and counted in *skipped (when not NULL).  A key that comes back after
 * another key, or a field twice in one sample, is damage (-EBADMSG) named
 * by the offset of the member that breaks the rule; the samples before it
 * have been passed to cb.  Returns as tar_walk does.
 */
int tar_wds_walk(const char *shard, uint64_t shard_size, tar_read_fn rd,
		 void *rd_arg, tar_sample_fn cb, void *cb_arg,
		 uint64_t *skipped, char **err)
    __attribute__((warn_unused_result));

/* The key and field split of a path: the length of its key, and *ext the
 * field after the dot; -1 when the basename has no dot or starts with
 * one. */
long tar_wds_split(const char *path, const char **ext);

#endif
