#ifndef WHARF_INCLUDE_WHARF_LOADER_H
#define WHARF_INCLUDE_WHARF_LOADER_H
/*
 * libwharf: a data loader for training jobs.
 *
 * An index (a flat file, mapped read-only) lists the samples: file, byte
 * offset, length and label.  A loader reads them in the sampler's order
 * (sequential, or shuffled as a pure function of seed and epoch, sharded by
 * rank and world size) with forked worker processes, straight into slots of
 * one shared-memory ring, and hands each batch to the caller as a read-only
 * view without copying it.
 */
/* clang-format off */
/*
 * Call order (each indented call happens while what the line above opened
 * is open; laid out by hand, hence the clang-format guard):
 *
 *   wharf_index_open(path, flags, &index)   an index built by `wharf index`
 *     wharf_options_init(&options)          or wharf_options_default()
 *     set the fields wanted
 *     wharf_loader_open(index, &options, &loader)
 *                                           forks the workers, reserves the
 *                                           ring in /dev/shm, reads ahead
 *       for each epoch:
 *         wharf_loader_set_epoch(loader, epoch)     optional: 0 at first
 *         (or wharf_loader_state_restore(loader, &state) to resume)
 *         while wharf_loader_next(loader, &batch) == 0:
 *           use the batch (a read-only view into the ring)
 *           wharf_loader_release(loader, batch)
 *         wharf_loader_next() == WHARF_END: the epoch is done
 *         (called again, next starts the next epoch: epoch_end)
 *     wharf_loader_close(loader)
 *   wharf_index_close(index)                after every loader on it closed
 */
/* clang-format on */
/*
 * Errors: every function that can fail returns 0 (or WHARF_END where said) on
 * success and a negative errno value on failure.  The message that goes with
 * the last failure on the calling thread (which sample, which path, which
 * worker, what happened) is wharf_last_error(); a loader keeps the message of
 * the error that stopped it in wharf_loader_error().
 *
 * Threads: a loader is used by one thread at a time.  Distinct loaders are
 * independent.  An index may be shared by several loaders and threads.
 * Workers die with the process that opened the loader, not with the
 * thread: a loader opened on a thread that exits keeps its workers.
 * Workers are forked: what a callback may do in one is in libwharf(3),
 * FORK RULES (no thread of the caller's, an OpenMP pool or CUDA, survives
 * the fork).
 *
 * NULL and closed handles: a NULL argument fails with -EINVAL and its name
 * in the message (getters that cannot fail return 0 or NULL and set the
 * message); a closed loader fails every call with -EBADF ("this loader
 * was closed").
 *
 * Processes: a loader belongs to the process that opened it.  A child
 * forked afterwards (a DataLoader worker, multiprocessing) that calls it
 * gets -EPERM at once, with "this loader was opened in process P; open one
 * in each process (inside the DataLoader worker, not before the fork)",
 * and the parent's workers and batches are left alone; the child's
 * wharf_loader_close() frees only its own copy.
 *
 * All structs are plain C with fixed-width fields, so that they can be
 * declared from other languages (Python ctypes).  Structs that may grow carry
 * their own size in the first field; set it with the matching _init call.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WHARF_VERSION_MAJOR 0
#define WHARF_VERSION_MINOR 1
#define WHARF_VERSION_PATCH 0
#define WHARF_VERSION_NUMBER                                                   \
	(WHARF_VERSION_MAJOR * 10000 + WHARF_VERSION_MINOR * 100 +             \
	 WHARF_VERSION_PATCH)

/* WHARF_VERSION_NUMBER of the library actually linked. */
unsigned wharf_version_number(void);
#define WHARF_VERSION_STRING "0.1.0" /* MAJOR.MINOR.PATCH, as below */

/* The version of the library actually linked, "MAJOR.MINOR.PATCH"
 * (static storage; compare with WHARF_VERSION_STRING, what the caller
 * was built against). */
const char *wharf_version(void);

/* Returned by wharf_loader_next() when the epoch has no more batches. */
#define WHARF_END 1

/*
 * The message that goes with the last failed call on this thread, or "" when
 * none failed yet.  Valid until the next libwharf call on this thread.
 */
const char *wharf_last_error(void);

/*
 * For transforms: sets the message that the loader reports with the error
 * code the transform returns (printf format).  Has no other effect.
 */
void wharf_set_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/*
 * For sample transforms (wharf_sample_fn), during the call: 64 bits that
 * are a pure function of (the options' seed, the batch's epoch, the sample
 * id), the same in every worker, run and resumed epoch.  Seed a transform's
 * random choices (crops, flips) with it, so that they are reproducible.
 * Outside a transform the value is meaningless.
 */
uint64_t wharf_sample_seed(void);

/* ------------------------------------------------------------------------
 * Index
 * ------------------------------------------------------------------------ */

typedef struct wharf_index wharf_index;

/* wharf_index_open() flags. */
#define WHARF_INDEX_VERIFY 1u /* checksum the whole file (reads all of it) */

/*
 * Opens an index file built by wharf_index_build_*() or `wharf index build`.
 * The file is mapped read-only: forked workers share its pages, and opening
 * costs the same for ten samples as for a hundred million.  Without
 * WHARF_INDEX_VERIFY only the header (magic, version, its own checksum,
 * section bounds against the file size) is checked; the full checksum reads
 * every page, which is what `wharf index info --verify` does.
 * @return 0 and *out set (close it with wharf_index_close()), or a negative
 *         errno (-EINVAL for a file that is not a valid index: truncated,
 *         corrupted, wrong version; the message says which).
 */
int wharf_index_open(const char *path, uint32_t flags, wharf_index **out);

/* Unmaps the index.  It must outlive every loader opened on it, or at least
 * that loader's use: after wharf_loader_stop() it may go before
 * wharf_loader_close().  NULL is a no-op. */
void wharf_index_close(wharf_index *idx);

/* Number of samples. */
uint64_t wharf_index_count(const wharf_index *idx);

/* Number of distinct files the samples come from. */
uint64_t wharf_index_num_files(const wharf_index *idx);

/* 1 + the largest label, or 0 when no sample has a label (all -1). */
uint32_t wharf_index_num_labels(const wharf_index *idx);

struct wharf_index_info {
	uint32_t size; /* sizeof(struct wharf_index_info) */
	uint32_t num_labels;
	uint64_t count;
	uint64_t num_files;
	uint64_t min_length; /* over samples of known length */
	uint64_t max_length;
	uint64_t total_bytes;	  /* sum of known lengths */
	uint64_t file_bytes;	  /* size of the index file */
	uint32_t unknown_lengths; /* 1 when some lengths are unknown */
	uint32_t version;	  /* file format version */
	/* Added later (a smaller size leaves them out): */
	uint64_t num_fields;	  /* fields of all samples (tar shards) */
	uint32_t num_field_names; /* distinct field names ("jpg", "cls") */
	uint32_t reserved;
};

/* Fills *info (set info->size first; fields past it are left alone).
 * @return 0. */
int wharf_index_info(const wharf_index *idx, struct wharf_index_info *info);

/*
 * Checksums the whole file (every page is read: O(size)).
 * @return 0, or -EINVAL for a corrupted index (the message says so).
 */
int wharf_index_verify(const wharf_index *idx);

/* Length of a sample when it is unknown (a list index built without stat):
 * the whole file is read. */
#define WHARF_LENGTH_UNKNOWN UINT64_MAX

struct wharf_sample {
	uint64_t offset; /* byte offset within the file */
	uint64_t length; /* bytes, or WHARF_LENGTH_UNKNOWN */
	uint32_t file;	 /* file id: wharf_index_path() */
	int32_t label;	 /* -1 when none */
};

/*
 * Describes sample i.
 * @return 0, or -ERANGE when i >= wharf_index_count().
 */
int wharf_index_sample(const wharf_index *idx, uint64_t i,
		       struct wharf_sample *out);

/*
 * Fields: the parts of a sample, for an index of WebDataset tar shards
 * (wharf_index_build_tar()) or one built with wharf_index_builder_field().
 * A sample of key "0001" made of the members 0001.jpg and 0001.cls has two
 * fields, "jpg" and "cls" (a field's name is what follows the first dot of
 * the member's basename), each with its own bytes in the sample's file;
 * the sample's own offset and length span its first field to its last.
 * A loader reads one field of each sample (wharf_options.field).
 */
struct wharf_field {
	uint64_t offset;  /* byte offset within the sample's file */
	uint64_t length;  /* bytes (0 for an empty member) */
	const char *name; /* "jpg"; lives as long as the index */
};

/* Number of fields of sample i, in archive order: 0 for an index without
 * fields, and for i >= wharf_index_count(). */
uint32_t wharf_index_num_fields(const wharf_index *idx, uint64_t i);

/*
 * Field k (< wharf_index_num_fields(idx, i)) of sample i.
 * @return 0 and *out set; -ERANGE for a bad i or k; -EINVAL for a corrupt
 *         entry.
 */
int wharf_index_field(const wharf_index *idx, uint64_t i, uint32_t k,
		      struct wharf_field *out);

/* The k-th distinct field name of the index (k < info.num_field_names), or
 * NULL: to list what the samples hold. */
const char *wharf_index_field_name(const wharf_index *idx, uint32_t k);

/*
 * The name of label `label`: the class folder it was made from, for an index
 * built with wharf_index_build_dir() (or `wharf index build --dir`) whose
 * root had subdirectories.  NULL for other indexes and labels out of range.
 * The string lives as long as the index.
 */
const char *wharf_index_class_name(const wharf_index *idx, uint32_t label);

/*
 * Writes the full path of file `file` (the index's root joined with the
 * stored path) into buf.
 * @return the path's length (not counting the NUL); -ERANGE for a bad file
 *         id; -ENAMETOOLONG when len is too small (buf then holds nothing).
 */
int wharf_index_path(const wharf_index *idx, uint32_t file, char *buf,
		     size_t len);

/*
 * Builders.  Each writes `out` through a temporary file in the same directory
 * and renames it into place, so a failure leaves no partial index.  Memory
 * stays flat in the number of samples (arrays are streamed to disk); the
 * paths themselves are held in one blob only where sorting needs them (--dir).
 */

/*
 * Every regular file under dir, in byte order of the path (deterministic).
 * Label = position of the file's top-level subdirectory among dir's
 * subdirectories in sorted order (ImageFolder); files directly in dir get -1.
 * Symbolic links are followed for files, not for directories.
 */
int wharf_index_build_dir(const char *dir, const char *out);

/*
 * One sample per line of list: "PATH" or "PATH LABEL" (separated by
 * whitespace; a PATH with spaces must be the only field).  Blank lines and
 * lines starting with '#' are skipped.  Relative paths are relative to the
 * list file's directory.  With stat_files == 0 lengths are left unknown (the
 * whole file is read; the loader then needs sample_bytes or slot_bytes);
 * otherwise every file is stat'ed for its size.
 *
 * A list whose first line is exactly "#wharf-list offsets" holds samples
 * inside files instead: "PATH OFFSET LENGTH [LABEL]" (decimal bytes).
 * Separated by spaces, the last two or three words are the numbers, and a
 * line with four numeric words is refused as ambiguous; separated by tabs
 * (any tab in the line), the fields are exactly those between tabs, so a
 * path may hold spaces and end in a number.  Consecutive lines of one path
 * share one file entry.  With stat_files, OFFSET + LENGTH must lie within
 * the file.  A refused line fails the build with -EINVAL (-ERANGE when out
 * of the file) and "LIST:LINE: why" in wharf_last_error().
 */
int wharf_index_build_list(const char *list, int stat_files, const char *out);

/*
 * Fixed-size records: every file is cut into floor(size / record) samples of
 * `record` bytes (a tail shorter than a record is left out), label -1.
 */
int wharf_index_build_records(uint64_t record, const char *const *files,
			      size_t nfiles, const char *out);

/*
 * WebDataset tar shards: one sample per key (a member's path up to the
 * first dot of its basename; a key's members adjacent in the shard), its
 * fields the members (wharf_index_field()).  Only headers are read, one
 * ranged read each (and one small read of each label field): over a wharf
 * mount, indexing a shard costs a request per member, not the shard.
 * ustar, GNU and pax headers, any member size.
 *
 * Members that are not regular files (directories, links, GNU sparse
 * files) and files whose basename has no dot or starts with one are
 * skipped, with one warning per shard that counts them.
 *
 * Damage (a bad checksum, a shard cut short, a member past the end, a key
 * whose members are not adjacent, a field twice) fails the build with
 * -EBADMSG and "SHARD: byte N: what"; with partial set the samples before
 * the damage are kept, the rest of that shard left out, with a warning.
 * A shard whose first key is the key its predecessor ended with (a sample
 * split across two shards) fails the build with -EBADMSG either way.
 */
struct wharf_tar_options {
	uint32_t size;	  /* sizeof(struct wharf_tar_options) */
	uint32_t partial; /* 1: keep the samples before damage (see above) */
	/* The directory relative shard paths are resolved against when the
	 * index is loaded; NULL: the current directory. */
	const char *root;
	/* The field whose content (a decimal integer, surrounding white
	 * space allowed, -1 to 2^31 - 1) is the sample's label; NULL: "cls";
	 * "": no labels.  A sample without it gets -1; any other content
	 * fails the build naming the shard, key and offset. */
	const char *label_field;
	/* Called after each shard (NULL: none): shards done, shards in all,
	 * samples so far, for a progress line. */
	void (*progress)(void *arg, uint64_t done, uint64_t total,
			 uint64_t samples);
	void *progress_arg;
};

/* Fills *o with the defaults above and sets o->size. */
void wharf_tar_options_init(struct wharf_tar_options *o);

/*
 * The index of the samples of n tar shards, in the order given, to out;
 * opt NULL for the defaults.
 * @return 0, or a negative errno with wharf_last_error() set (-EBADMSG for
 *         damage, -EINVAL for a bad label, the errno of a shard that cannot
 *         be opened or read).
 */
int wharf_index_build_tar(const char *const *shards, size_t n,
			  const struct wharf_tar_options *opt, const char *out);

/*
 * Samples from any container (TFRecord, RecordIO, a packed blob...): a
 * builder takes (path, offset, length, label) one at a time and streams
 * them to disk like the builders above, so memory stays flat however many
 * samples are added.  Calls: wharf_index_builder_new() → any number of
 * wharf_index_builder_add() → wharf_index_builder_finish() (writes and
 * renames the index into place) → wharf_index_builder_free(), which also
 * abandons a build that was not finished (nothing is left at out).
 *
 * root: the directory that relative paths are resolved against when the
 * index is loaded (NULL: the current directory); absolute paths are kept
 * as they are.  The builder owns copies of out and root.
 *
 * A path equal to the one added just before shares its file entry, so add
 * the samples of one file together (a path that comes back later gets a
 * second entry: harmless, but the index grows by its length).  Nothing is
 * read or checked on disk: offset and length are taken as given; length
 * may be WHARF_LENGTH_UNKNOWN (read to the end of the file); label is -1
 * for none.
 *
 * @return 0, or a negative errno with wharf_last_error() set.  After a
 * failed write (not a refused argument) every later add or finish fails;
 * free the builder.
 */
typedef struct wharf_index_builder wharf_index_builder;

int wharf_index_builder_new(const char *out, const char *root,
			    wharf_index_builder **b);
int wharf_index_builder_add(wharf_index_builder *b, const char *path,
			    uint64_t offset, uint64_t length, int32_t label);
int wharf_index_builder_finish(wharf_index_builder *b);

/*
 * Adds a field to the sample added last (wharf_index_builder_add()): its
 * name and bytes in that sample's file, which must lie inside the sample
 * (when its length is known).  Add a sample's fields in the order a reader
 * should prefer them: a loader reading "jpg,png" takes the first it meets.
 * @return 0; -EINVAL before any sample or for an empty name; -ERANGE for a
 *         field outside its sample; -EEXIST for a name the sample has
 *         already; after a failed write, as wharf_index_builder_add().
 */
int wharf_index_builder_field(wharf_index_builder *b, const char *name,
			      uint64_t offset, uint64_t length);
void wharf_index_builder_free(wharf_index_builder *b);

/* ------------------------------------------------------------------------
 * Loader
 * ------------------------------------------------------------------------ */

typedef struct wharf_loader wharf_loader;

/*
 * A batch, as the caller sees it: a read-only view into a ring slot in
 * shared memory.  It stays valid until wharf_loader_release() of it, or
 * wharf_loader_close().  Fixed-size samples are one contiguous array
 * (count * sample_size bytes at data); variable-size samples lie back to back
 * in data, sample k at data + offsets[k], offsets[k+1] - offsets[k] bytes.
 *
 * The struct a pointer refers to is the loader's, and it is reused for
 * the hand-out of the same slot after next: a caller that may release
 * late (a finalizer, another language's lease) keeps a copy of the struct
 * and releases the copy, whose slot and generation name that one
 * hand-out.
 */
struct wharf_batch {
	uint64_t epoch;		 /* epoch it belongs to */
	uint64_t index;		 /* batch number within the epoch (this rank) */
	uint64_t sample_size;	 /* bytes per sample; 0 when variable-size */
	uint64_t bytes;		 /* bytes of data used */
	const void *data;	 /* samples */
	const uint64_t *offsets; /* count + 1 offsets, or NULL (fixed-size) */
	const uint64_t *samples; /* count sample ids (index positions) */
	const int32_t *labels;	 /* count labels */
	uint32_t count;		 /* samples in this batch */
	uint32_t skipped;	 /* bad samples left out (skip_bad) */
	uint32_t worker;	 /* worker that read it */
	uint32_t slot;		 /* ring slot: for wharf/cuda.h */
	/* Added later (appended: the fields above keep their offsets). */
	uint64_t generation; /* the slot's hand-outs so far, this one's 1+ */
};

/*
 * The view a batch transform gets inside the worker: the same batch, data
 * writable.  It may rewrite data in place within data_cap bytes and set
 * sample_size/offsets/bytes accordingly (offsets points at count + 1 writable
 * entries when the batch is variable-size).
 */
struct wharf_batch_rw {
	uint64_t epoch;
	uint64_t index;
	uint64_t sample_size;
	uint64_t bytes;
	void *data;
	uint64_t *offsets;
	const uint64_t *samples;
	const int32_t *labels;
	uint64_t data_cap; /* bytes available at data */
	uint32_t count;
	uint32_t worker;
};

/*
 * Called once in each worker after the fork (and in the caller when
 * num_workers is 0), before any sample.  Returns 0 or a negative errno; a
 * failure makes wharf_loader_open() fail with its message.
 */
typedef int (*wharf_worker_init_fn)(void *user, uint32_t worker);

/*
 * Per-sample transform, in the worker: turns the sample's bytes (in, in_len;
 * a private buffer it may modify) into its output, written straight into the
 * batch slot at out (out_cap bytes: sample_size when fixed-size, else what is
 * left in the slot).  Sets *out_len (must equal sample_size when fixed).
 * Returns 0 or a negative errno (with wharf_set_error() for the message).
 */
typedef int (*wharf_sample_fn)(void *user, uint64_t sample, const void *in,
			       uint64_t in_len, void *out, uint64_t out_cap,
			       uint64_t *out_len);

/* Batch transform, in the worker, after all samples are in the slot (the
 * __getitems__ analogue).  Returns 0 or a negative errno. */
typedef int (*wharf_batch_fn)(void *user, struct wharf_batch_rw *batch);

/* wharf_options.shuffle: shards in a keyed order, samples shuffled within
 * a window of shard_window shards (see shard_window). */
#define WHARF_SHUFFLE_SHARDS 2
#define WHARF_SHARD_WINDOW_DEFAULT 4

/* How ranks get equal batch counts when the samples do not divide evenly. */
#define WHARF_EVEN_PAD 0  /* repeat samples from the start (PyTorch default) */
#define WHARF_EVEN_DROP 1 /* leave the tail out: shards are disjoint */

struct wharf_options {
	uint32_t size;	      /* sizeof(struct wharf_options) */
	uint32_t batch_size;  /* samples per batch (default 32) */
	uint32_t num_workers; /* forked workers; 0 = read in the caller (2) */
	uint32_t prefetch;    /* ring slots per worker (2); 1 to 1024 */
	uint32_t shuffle;     /* 0 sequential, 1 shuffled by (seed, epoch),
			       * WHARF_SHUFFLE_SHARDS shard-aware */
	uint32_t drop_last;   /* 1: leave out the last short batch */
	uint32_t in_order;    /* 1 (default): sampler order; 0: first ready */
	uint32_t even;	      /* WHARF_EVEN_PAD or WHARF_EVEN_DROP */
	int32_t rank;	      /* -1: $RANK, else $SLURM_PROCID, else 0 */
	int32_t world;	      /* -1: $WORLD_SIZE, else $SLURM_NTASKS, else 1 */
	uint32_t skip_bad;    /* 1: leave bad samples out, count them */
	uint32_t persistent;  /* 1 (default): workers live across epochs */
	uint32_t timeout_ms;  /* a batch later than this fails, naming the
			       * worker (pid) and sample it is stuck on
			       * (60000); 0: wait forever */
	/* Slots beyond num_workers * prefetch, for batches the caller keeps
	 * while it takes the next ones (0; at most 1024).  A caller that holds
	 * no more than this many batches never takes a slot from the workers'
	 * read-ahead. */
	uint32_t held;
	uint64_t seed; /* shuffle seed (0) */
	/* Bytes per output sample.  0: the index's length when all samples have
	 * the same length (fixed-size), else variable-size.  Must be set when a
	 * sample transform changes the size of fixed-size samples. */
	uint64_t sample_bytes;
	/* Data bytes per slot.  0: batch_size * (sample_bytes, or the longest
	 * sample).  Needed when lengths are unknown and sample_bytes is 0. */
	uint64_t slot_bytes;
	/* Directory for the ring segment; NULL: $WHARF_SHM_DIR, else /dev/shm.
	 */
	const char *shm_dir;
	wharf_worker_init_fn worker_init;
	wharf_sample_fn sample_fn;
	wharf_batch_fn batch_fn;
	void *user; /* passed to the callbacks (copied into each worker) */
	/* Fields from here on were added later: a caller built against an
	 * older header passes a smaller size, and they keep their defaults. */
	/* Moving windows (the tokens decoder sets it; 0: off).  Epoch 0 reads
	 * each sample where the index puts it; each later epoch e reads every
	 * sample k * shift_step bytes further on, k in [1, L / shift_step)
	 * for a sample of L bytes, a pure function of (seed, e) the same for
	 * every sample of that length (sampler order and resumes unchanged).
	 * A sample is moved only when the index's next sample continues it in
	 * the same file with the same length: the read then never leaves the
	 * index's records, and the last record of a run is read in place. */
	uint32_t shift_step;
	uint32_t reserved1;
	/* The field each sample is read from, in an index with fields
	 * (wharf_index_field()): a name ("jpg"), or several separated by
	 * commas ("jpg,jpeg,png,webp": the sample's first field that has one
	 * of them).  NULL: the whole sample.  A name that no sample has fails
	 * wharf_loader_open(); a sample without any fails its read (skip_bad
	 * leaves it out).  An index without fields fails wharf_loader_open(),
	 * unless field_if_any is 1: then its samples are read whole (how the
	 * image decoders' default field works on an index of image files).
	 * Decoders set both (wharf_decoder_apply). */
	const char *field;
	uint32_t field_if_any;
	uint32_t reserved2;
	/* Shard-aware shuffle (shuffle = WHARF_SHUFFLE_SHARDS): at most this
	 * many shards are open at any point of a rank's order (0: 4).  A
	 * shard is a run of consecutive samples of one file in the index (a
	 * tar shard, a record file).  Per epoch the shards go in an order
	 * keyed by (seed, epoch); rank r takes the r-th of world consecutive
	 * ranges of that order (n / world samples each, one more for the
	 * first n % world ranks), so ranks read disjoint shards, except that
	 * a range may end inside a shard: its samples are then split between
	 * two ranks, each reading only its part.  Each rank shuffles the
	 * samples of `shard_window` shards at a time, so that it reads each
	 * shard in one stretch: a mount's cache that holds about three
	 * windows of shards (the one being read, the one before, which a
	 * least-recently-used cache keeps longer, and the next, which hints
	 * and workers reach ahead) fetches every byte once an epoch.  even
	 * = WHARF_EVEN_PAD repeats a rank's last sample where it has one
	 * fewer; WHARF_EVEN_DROP leaves the last sample of the longer ranks
	 * out.  The sampler keeps 24 bytes per shard, nothing per sample. */
	uint32_t shard_window;
	uint32_t reserved3;
	/* Signals (0, the default): a signal that arrives while
	 * wharf_loader_next waits runs its handler, and the wait goes on, so
	 * a trainer's timers (a profiler's SIGALRM, SLURM's signals) never
	 * end an epoch.  1: next returns -EINTR instead, for a caller whose
	 * handler only sets a flag that its own loop must see (Python's ^C);
	 * it calls next again to go on. */
	uint32_t interruptible;
	/* What wharf_loader_next does when called again after it returned
	 * WHARF_END: WHARF_EPOCH_AUTO (0, the default) starts the next epoch,
	 * as each pass of a Python loader is the next epoch;
	 * WHARF_EPOCH_EXPLICIT fails with -EINVAL ("call
	 * wharf_loader_set_epoch") until wharf_loader_set_epoch or
	 * wharf_loader_state_restore says which epoch comes next. */
	uint32_t epoch_end;
};

/* wharf_options.epoch_end */
#define WHARF_EPOCH_AUTO 0
#define WHARF_EPOCH_EXPLICIT 1

/* Fills *opt with the defaults above and sets opt->size.  Always call it (or
 * use wharf_options_default()) before setting fields. */
void wharf_options_init(struct wharf_options *opt);

/* A malloc'd options struct with defaults (for FFI); free with free() or
 * wharf_options_free(). */
struct wharf_options *wharf_options_default(void);
void wharf_options_free(struct wharf_options *opt);

/*
 * Opens a loader on idx (borrowed: it must outlive the loader, or its
 * wharf_loader_stop()).  Reserves the whole ring in shm_dir now
 * (num_workers * prefetch + held slots; with no workers, prefetch + held
 * slots), so a /dev/shm that is too small fails here with the bytes
 * needed, the bytes free and the option to lower, never later with a
 * SIGBUS.  Forks the workers and runs worker_init in each.  The loader
 * starts at epoch 0, position 0.
 * @return 0 and *out set (close with wharf_loader_close()), or a negative
 *         errno with wharf_last_error() set.
 */
int wharf_loader_open(const wharf_index *idx, const struct wharf_options *opt,
		      wharf_loader **out);

/*
 * The next batch of the current epoch.  Blocks until it is ready (in_order:
 * the next in sampler order; else whichever is ready first).  The caller may
 * hold several batches; each holds a slot until released.  Signals that
 * arrive while it waits run their handlers and it waits on (unless the
 * options' interruptible is set).  Called again after WHARF_END, it starts
 * the next epoch (epoch_end = WHARF_EPOCH_AUTO, the default) or fails with
 * -EINVAL until wharf_loader_set_epoch() (WHARF_EPOCH_EXPLICIT).
 * @return 0 and *batch set; WHARF_END and *batch NULL when the epoch has no
 *         more batches; a negative errno on failure, with
 *         wharf_loader_error() naming the worker, sample, path and cause:
 *         -EIO (unreadable sample), -ECHILD (a worker died), -ETIMEDOUT
 *         (a worker stuck past timeout_ms: its number, pid and sample),
 *         -EMSGSIZE (a sample larger than what its slot has left: raise
 *         slot_bytes), -ENOBUFS (every slot is held by the caller:
 *         release some), -EINTR (interruptible only: a signal arrived
 *         while waiting; call again), -EPERM (called in a process forked
 *         after the open: nothing is taken from the opener), -EBADF (a
 *         closed loader), -EINVAL (NULL), or the transform's code.  After
 *         a failure other than -ENOBUFS, -EINTR, -EINVAL and -EPERM the
 *         loader only accepts wharf_loader_close() (and the read-only
 *         getters).
 */
int wharf_loader_next(wharf_loader *l, const struct wharf_batch **batch);

/*
 * Gives the batch's slot back to the ring.  The view must not be used after.
 * batch is the pointer wharf_loader_next() returned or a copy of the struct
 * it pointed to: slot and generation name the hand-out, so the release of
 * a batch released already whose slot went out again (a copy kept from
 * before, a second finalizer) is refused, and the batch that holds the
 * slot now stays intact.
 * @return 0, or -EINVAL for a batch not held (already released, an earlier
 *         generation of the slot, foreign); -EPERM from another process
 *         than the one that opened the loader (see wharf_loader_open()).
 */
int wharf_loader_release(wharf_loader *l, const struct wharf_batch *batch);

/*
 * Stops the workers and drops what they read ahead, for a caller that is done
 * with the loader but still uses batches it holds: those stay mapped and
 * unchanged until wharf_loader_close().  After it, wharf_loader_next() fails
 * with -ESHUTDOWN; release and close work as before.  Calling it twice is a
 * no-op.
 *
 * It also lets go of everything the loader holds on the dataset's
 * filesystem: no worker is left, and no file stays open (a wharf mount's
 * hints file, the files read in the caller's process with num_workers 0),
 * so such a mount can be unmounted while batches are held.  The index is
 * not read again: it may be closed (wharf_index_close) before the loader.
 * In another process than the opener it does nothing.
 */
void wharf_loader_stop(wharf_loader *l);

/*
 * Starts epoch `epoch` at its first batch (the shuffle is a function of seed
 * and epoch).  Batches still held by the caller stay valid; batches read
 * ahead for the old epoch are dropped, and a worker busy with one stops at
 * its next sample.  The epoch the loader is at, before any of its batches
 * was taken (the open's epoch 0, in a loop that sets every epoch), keeps
 * what was read ahead: it is what a restart would read again.
 * @return 0 or a negative errno.
 */
int wharf_loader_set_epoch(wharf_loader *l, uint64_t epoch);

/* Batches per epoch on this rank. */
uint64_t wharf_loader_num_batches(const wharf_loader *l);

/* Rank and world size in use (after the environment was consulted). */
uint32_t wharf_loader_rank(const wharf_loader *l);
uint32_t wharf_loader_world(const wharf_loader *l);

/*
 * The rank and world size of this process as wharf_loader_open decides
 * them, for tools that split work the same way (wharf prefetch --rank):
 * `rank`/`world` when >= 0, else $RANK/$WORLD_SIZE (torchrun), else
 * $SLURM_PROCID/$SLURM_NTASKS, else 0 and 1.
 * @return 0, or -EINVAL (junk in the environment, rank not below world)
 * with the reason in wharf_last_error().
 */
int wharf_rank_world(int32_t rank, int32_t world, uint32_t *out_rank,
		     uint32_t *out_world);

/*
 * Where an epoch stands, as plain integers.  Saving after k batches were
 * returned by wharf_loader_next() and restoring (into a loader with the same
 * index, batch size, shuffle, drop_last, even, rank and world; num_workers and
 * prefetch may differ) yields exactly the batches not returned yet, reading
 * nothing twice.  With in_order == 0 the returned batches need not be a
 * prefix: done_mask records those among the 64 after position.
 */
struct wharf_state {
	uint32_t size;	  /* sizeof(struct wharf_state) */
	uint32_t version; /* 1 */
	uint64_t seed;
	uint64_t epoch;
	uint64_t position;  /* every batch below this was returned */
	uint64_t done_mask; /* bit k: batch position + 1 + k was returned */
	uint64_t num_samples;
	uint32_t batch_size;
	uint32_t rank;
	uint32_t world;
	/* shuffle != 0 | drop_last << 1 | even << 2, and in shard-aware
	 * order 1 << 3 | shard_window << 8 */
	uint32_t flags;
};

/* Fills *st up to st->size bytes (0: the whole struct; set it with
 * sizeof), and sets st->size to the bytes filled.
 * @return 0, or -EINVAL for NULL, -EBADF for a closed loader. */
int wharf_loader_state_save(const wharf_loader *l, struct wharf_state *st);

/*
 * Continues from *st: drops batches read ahead and starts at st->position.
 * @return 0, or -EINVAL when st does not match this loader (the message says
 *         which field).
 */
int wharf_loader_state_restore(wharf_loader *l, const struct wharf_state *st);

struct wharf_stats {
	uint32_t size; /* sizeof(struct wharf_stats) */
	uint32_t num_workers;
	uint64_t batches; /* returned by next */
	uint64_t samples;
	uint64_t bytes;	     /* sample bytes returned */
	uint64_t skipped;    /* bad samples left out */
	uint64_t wait_ns;    /* time spent blocked inside next (data stall) */
	uint64_t open_ns;    /* time since open */
	uint64_t read_bytes; /* bytes read from files by all workers */
	/* Reads: pread calls, or copies from a file the workers map
	 * (record shards); adjacent ranges merged count once. */
	uint64_t preads;
};

/* @return 0 and *st filled (set st->size first; fields past it are left). */
int wharf_loader_stats(const wharf_loader *l, struct wharf_stats *st);

/* Nanoseconds worker w spent reading and transforming (0 for a bad w; the
 * caller's own work when num_workers is 0, as worker 0). */
uint64_t wharf_loader_worker_busy_ns(const wharf_loader *l, uint32_t worker);

/* The message of the error that stopped the loader, or "". */
const char *wharf_loader_error(const wharf_loader *l);

/*
 * Stops the workers (closes their task channels, then SIGKILL after 200 ms
 * for one still busy), reaps them and unmaps the ring:
 * every batch view becomes invalid.  Nothing is left in /dev/shm.  NULL is a
 * no-op, and so is a second close.  The handle's own small struct is kept
 * (poisoned), so that a call on it after the close fails with -EBADF
 * rather than reading freed memory.  In a process forked from the one that
 * opened the loader it only unmaps and frees that process's copy: the workers,
 * the ring and the batches stay the opener's.
 */
void wharf_loader_close(wharf_loader *l);

#ifdef __cplusplus
}
#endif
#endif
