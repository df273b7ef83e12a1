/*
 * workers: filling ring slots, by the reading code and the forked processes
 * that run it (or the caller itself, without workers).
 *
 * A byte travels once from the page cache into the slot when there is no
 * sample transform (pread straight into the slot, adjacent ranges of one file
 * merged into one call); with a transform it is read into a private buffer
 * and the transform writes the slot: two copies, the second being the
 * transform's own work.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "index.h"
#include "ring.h"
#include "sampler.h"
#include "text.h"
#include "units.h"
#include "workers.h"

#define FD_CACHE 64
/* Files hold this many samples on average or more: record shards, read
 * through a mapping (a memcpy, no system call per sample). */
#define MAP_SAMPLES_PER_FILE 8

/*
 * Open files by id (direct-mapped).  With `mapped` (in workers only), each
 * open file is also mapped read-only, and its size as it was then bounds
 * every copy from it: a file cut short since the index was built is an
 * error, never a SIGBUS.  A file cut short since it was mapped, or whose
 * storage fails under the mapping (a FUSE read that fails), faults during
 * the copy: the worker catches that SIGBUS and fails the sample.  The
 * caller's own process (num_workers 0) never maps: its signals are not
 * ours to take.
 */
struct fd_cache {
	bool mapped;
	uint32_t file[FD_CACHE];
	int fd[FD_CACHE];
	const char *map[FD_CACHE]; /* NULL: read with pread */
	uint64_t size[FD_CACHE];
};

struct task_msg {
	uint32_t slot;
	uint32_t op; /* TASK_FILL or TASK_EXIT */
};
enum { TASK_FILL, TASK_EXIT };

/* Worker -> caller; slot UINT32_MAX reports worker_init. */
struct done_msg {
	uint32_t slot;
	uint32_t worker;
	int32_t status;
	char msg[244];
};

static void fd_drop(struct fd_cache *fc, unsigned k)
{
	if (fc->map[k])
		munmap((void *)fc->map[k], fc->size[k]);
	if (fc->fd[k] >= 0)
		close(fc->fd[k]);
	fc->map[k] = NULL;
	fc->fd[k] = -1;
	fc->file[k] = UINT32_MAX;
}

int fill_init(struct fill_ctx *c, bool in_worker)
{
	c->fds = malloc(sizeof(*c->fds));
	if (!c->fds)
		return -ENOMEM;
	c->fds->mapped = in_worker && c->idx->nfiles &&
			 c->idx->count / c->idx->nfiles >= MAP_SAMPLES_PER_FILE;
	for (int i = 0; i < FD_CACHE; i++) {
		c->fds->file[i] = UINT32_MAX;
		c->fds->fd[i] = -1;
		c->fds->map[i] = NULL;
	}
	c->scratch = NULL;
	c->scratch_cap = 0;
	return 0;
}

void fill_fini(struct fill_ctx *c)
{
	if (c->fds)
		for (int i = 0; i < FD_CACHE; i++)
			fd_drop(c->fds, i);
	free(c->fds);
	c->fds = NULL;
	free(c->scratch);
	c->scratch = NULL;
	c->scratch_cap = 0;
}

/* The error of the sample being read, into the slot header.  The path is
 * formatted only when needed: to open a file, or for a message. */
struct where {
	struct slot_hdr *hdr;
	const struct index *idx;
	uint64_t id;
	uint32_t file; /* UINT32_MAX: not known yet */
	char path[PATH_MAX];
};

__attribute__((format(printf, 3, 4))) static int fail(struct where *w, int rc,
						      const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!w->path[0] && w->file != UINT32_MAX &&
	    index_full_path(w->idx, w->file, w->path, sizeof(w->path)) < 0)
		w->path[0] = '\0';
	snprintf(w->hdr->msg, sizeof(w->hdr->msg),
		 "sample %llu (%.300s): %.120s", (unsigned long long)w->id,
		 w->path[0] ? w->path : "?", what);
	return rc;
}

static int sample_path(struct where *w, uint32_t file)
{
	int rc = index_full_path(w->idx, file, w->path, sizeof(w->path));
	if (rc == -ERANGE)
		return fail(w, -EINVAL,
			    "index names file %u of %llu "
			    "(corrupted index)",
			    file, (unsigned long long)w->idx->nfiles);
	if (rc < 0)
		return fail(w, rc, "path too long");
	return 0;
}

/* The cache entry of an open file (cached, direct-mapped by file id), or
 * -errno. */
static int file_open(struct fill_ctx *c, struct where *w, uint32_t file)
{
	struct fd_cache *fc = c->fds;
	unsigned k = file % FD_CACHE;
	struct stat st;
	int rc;

	if (fc->file[k] == file)
		return (int)k;
	rc = sample_path(w, file);
	if (rc)
		return rc;
	int fd = open(w->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(w, -errno, "open: %s", strerror(errno));
	fd_drop(fc, k);
	fc->file[k] = file;
	fc->fd[k] = fd;
	if (fc->mapped && fstat(fd, &st) == 0 && st.st_size > 0) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
			       fd, 0);

		/* Without a mapping the file is read with pread. */
		if (m != MAP_FAILED) {
			fc->map[k] = m;
			fc->size[k] = (uint64_t)st.st_size;
		}
	}
	return (int)k;
}

/* The copy in progress from a mapping, for on_sigbus; NULL when none.  A
 * worker is one thread.  Volatile, and fenced around the copy: the
 * compiler must neither drop these stores nor move the copy past them. */
static sigjmp_buf *volatile copy_fault;

/* Installed with SA_NODEFER: the jump out leaves SIGBUS unblocked without
 * a sigprocmask call per copy. */
static void on_sigbus(int sig)
{
	if (copy_fault)
		siglongjmp(*copy_fault, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Copies len bytes at off of the mapping in entry k (off + len within the
 * size it was mapped with).  A fault during the copy is reported as the
 * file's end, when it was cut short since, or as an I/O error; the
 * mapping is dropped, and the next read of the file opens it again. */
static int copy_mapped(struct fill_ctx *c, struct where *w, unsigned k,
		       void *dst, uint64_t len, uint64_t off)
{
	sigjmp_buf jb;
	struct stat st;

	if (sigsetjmp(jb, 0)) {
		copy_fault = NULL;
		bool cut = !fstat(c->fds->fd[k], &st) &&
			   (uint64_t)st.st_size < off + len;
		fd_drop(c->fds, k);
		if (cut)
			return fail(w, -EIO,
				    "short read: the file was cut to %llu bytes "
				    "while in use (%llu bytes at offset %llu "
				    "wanted)",
				    (unsigned long long)st.st_size,
				    (unsigned long long)len,
				    (unsigned long long)off);
		return fail(w, -EIO,
			    "I/O error reading %llu bytes at offset %llu "
			    "(through its mapping)",
			    (unsigned long long)len, (unsigned long long)off);
	}
	copy_fault = &jb;
	__asm__ volatile("" ::: "memory");
	memcpy(dst, c->fds->map[k] + off, len);
	__asm__ volatile("" ::: "memory");
	copy_fault = NULL;
	return 0;
}

/* Reads len bytes at off of the file in entry k into dst: a copy from its
 * mapping, or preads (retrying short reads). */
static int read_full(struct fill_ctx *c, struct where *w, struct slot_hdr *h,
		     unsigned k, void *dst, uint64_t len, uint64_t off)
{
	const int fd = c->fds->fd[k];
	uint64_t got = 0;

	if (c->fds->map[k]) {
		const uint64_t size = c->fds->size[k];

		if (off > size || len > size - off)
			return fail(w, -EIO,
				    "short read: the file ends after %llu of "
				    "%llu bytes at offset %llu",
				    (unsigned long long)(off < size ? size - off
								   : 0),
				    (unsigned long long)len,
				    (unsigned long long)off);
		int rc = copy_mapped(c, w, k, dst, len, off);

		if (rc)
			return rc;
		h->preads++;
		h->read_bytes += len;
		return 0;
	}
	while (got < len) {
		ssize_t n =
		    pread(fd, (char *)dst + got, len - got, (off_t)(off + got));
		h->preads++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(w, -EIO, "read at offset %llu: %s",
				    (unsigned long long)(off + got),
				    strerror(errno));
		}
		if (n == 0)
			return fail(w, -EIO,
				    "short read: the file ends after %llu of "
				    "%llu bytes at offset %llu",
				    (unsigned long long)got,
				    (unsigned long long)len,
				    (unsigned long long)off);
		got += (uint64_t)n;
	}
	h->read_bytes += len;
	return 0;
}

/* Where sample id (len bytes) is read in epoch: moved by the epoch's shift
 * (wharf_options.shift_step) when the next sample continues it in its file
 * with the same length, so that the read stays inside the index's records. */
static uint64_t read_offset(const struct fill_ctx *c, uint64_t epoch,
			    uint64_t id, uint64_t len)
{
	const struct index *idx = c->idx;
	const uint64_t off = idx->offset[id];

	if (!c->shift_step || id + 1 >= idx->count ||
	    idx->file[id + 1] != idx->file[id] ||
	    idx->length[id + 1] != len || idx->offset[id + 1] - off != len)
		return off;
	return off + sampler_shift(c->seed, epoch, len / c->shift_step) *
			 c->shift_step;
}

/* The length of sample id (the file's size when the index has none). */
static int sample_len(struct where *w, int fd, uint64_t id, uint64_t *len)
{
	*len = w->idx->length[id];
	if (*len != WHARF_LENGTH_UNKNOWN)
		return 0;
	struct stat st;
	if (fstat(fd, &st))
		return fail(w, -errno, "stat: %s", strerror(errno));
	if (w->idx->offset[id] > (uint64_t)st.st_size)
		return fail(w, -EINVAL,
			    "offset %llu is past the end of the file (%llu "
			    "bytes)",
			    (unsigned long long)w->idx->offset[id],
			    (unsigned long long)st.st_size);
	*len = (uint64_t)st.st_size - w->idx->offset[id];
	return 0;
}

/* Names, comma-separated, of sample id's fields (which = NULL) or of the
 * fields asked for (which = want), into buf: for a message. */
static void field_list(const struct index *idx, const bool *which, uint64_t id,
		       char *buf, size_t len)
{
	uint64_t f, end;
	size_t at = 0;

	buf[0] = '\0';
	if (which) {
		f = 0;
		end = idx->nnames;
	} else if (index_fields(idx, id, &f, &end)) {
		return;
	}
	for (; f < end && at < len; f++) {
		uint32_t k = which ? (uint32_t)f : idx->fext[f];
		if ((which && !which[k]) || k >= idx->nnames)
			continue;
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       at ? "," : "", idx->names[k]);
	}
}

/* Where sample id is read and how much: the field asked for
 * (wharf_options.field), else the sample as the index gives it. */
static int sample_extent(struct fill_ctx *c, struct where *w, int fd,
			 uint64_t epoch, uint64_t id, uint64_t *off,
			 uint64_t *len)
{
	const struct index *idx = c->idx;
	char want[64], has[64];

	if (!c->field_want) {
		int rc = sample_len(w, fd, id, len);
		if (!rc)
			*off = read_offset(c, epoch, id, *len);
		return rc;
	}
	int64_t f = index_field_pick(idx, c->field_want, id);
	if (f == -EINVAL)
		return fail(w, -EINVAL,
			    "its fields' entries are out of range (corrupted "
			    "index)");
	if (f < 0) {
		field_list(idx, c->field_want, id, want, sizeof(want));
		field_list(idx, NULL, id, has, sizeof(has));
		return fail(w, -ENOENT, "no field %s (it has: %s)", want,
			    has[0] ? has : "none");
	}
	*off = idx->foff[f];
	*len = idx->flen[f];
	return 0;
}

/*
 * Fills ids[k..] starting at data + pos: one sample, or (no transform) a run
 * of samples adjacent in one file read with one pread.  *nrun and *used say
 * how many samples and bytes went in.
 */
static int fill_some(struct fill_ctx *c, struct where *w, uint32_t s,
		     uint32_t k, uint32_t n, uint64_t pos, bool merge,
		     uint32_t *nrun, uint64_t *used)
{
	const struct index *idx = c->idx;
	const struct ring *r = c->ring;
	struct slot_hdr *h = ring_hdr(r, s);
	uint64_t *ids = ring_samples(r, s);
	char *data = ring_data(r, s);
	uint64_t cap = r->data_cap - pos;
	uint64_t id = ids[k], len, off;
	int rc;

	w->id = id;
	w->file = UINT32_MAX;
	w->path[0] = '\0';
	if (id >= idx->count)
		return fail(w, -EINVAL, "no such sample (index has %llu)",
			    (unsigned long long)idx->count);
	uint32_t file = idx->file[id];
	w->file = file;
	int ent = file_open(c, w, file);
	if (ent < 0)
		return ent;
	rc = sample_extent(c, w, c->fds->fd[ent], h->epoch, id, &off, &len);
	if (rc)
		return rc;
	if (c->sample_fn) {
		if (len > c->scratch_cap) {
			/* Grows to the largest sample once, then stays. */
			char *b = realloc(c->scratch, len ? len : 1);
			if (!b)
				return fail(w, -ENOMEM,
					    "no memory for %llu bytes",
					    (unsigned long long)len);
			c->scratch = b;
			c->scratch_cap = len;
		}
		rc = read_full(c, w, h, (unsigned)ent, c->scratch, len, off);
		if (rc)
			return rc;
		uint64_t out_cap = c->sample_size ? c->sample_size : cap;
		if (out_cap > cap)
			return fail(w, -EMSGSIZE,
				    "%llu bytes per sample, %llu left in the "
				    "slot of %llu: raise slot_bytes",
				    (unsigned long long)out_cap,
				    (unsigned long long)cap,
				    (unsigned long long)c->ring->data_cap);
		uint64_t out_len = 0;
		error_transform_clear();
		error_seed_set(sampler_sample_seed(c->seed, h->epoch, id));
		rc = c->sample_fn(c->user, id, c->scratch, len, data + pos,
				  out_cap, &out_len);
		if (rc)
			return fail(w, rc < 0 ? rc : -EINVAL,
				    "transform failed: %s",
				    error_transform()[0]
					? error_transform()
					: strerror(rc < 0 ? -rc : EINVAL));
		if (out_len > out_cap ||
		    (c->sample_size && out_len != c->sample_size))
			return fail(w, -EINVAL,
				    "transform wrote %llu bytes, the slot "
				    "takes %s%llu",
				    (unsigned long long)out_len,
				    c->sample_size ? "exactly " : "at most ",
				    (unsigned long long)out_cap);
		*nrun = 1;
		*used = out_len;
		return 0;
	}
	if (c->sample_size && len != c->sample_size)
		return fail(w, -EINVAL,
			    "%llu bytes, but samples are %llu bytes "
			    "(set sample_bytes, or a transform)",
			    (unsigned long long)len,
			    (unsigned long long)c->sample_size);
	/* Extend the run while the next sample starts where this one ends. */
	uint32_t run = 1;
	uint64_t total = len;
	/* Moved samples are not merged: each has its own shift; nor are
	 * fields, which the index's sample extents do not describe. */
	while (merge && !c->shift_step && !c->field_want && k + run < n) {
		uint64_t prev = ids[k + run - 1], nx = ids[k + run];
		if (nx >= idx->count || idx->file[nx] != file ||
		    idx->length[prev] == WHARF_LENGTH_UNKNOWN ||
		    idx->length[nx] == WHARF_LENGTH_UNKNOWN ||
		    idx->offset[nx] != idx->offset[prev] + idx->length[prev] ||
		    (c->sample_size && idx->length[nx] != c->sample_size) ||
		    /* Subtract, not add: an index's lengths may be huge. */
		    total > cap || idx->length[nx] > cap - total)
			break;
		total += idx->length[nx];
		run++;
	}
	/* Not -ENOBUFS, which next returns for "release some batches". */
	if (total > cap)
		return fail(w, -EMSGSIZE,
			    "%llu bytes, %llu left in the slot of %llu: "
			    "raise slot_bytes",
			    (unsigned long long)len, (unsigned long long)cap,
			    (unsigned long long)c->ring->data_cap);
	*nrun = run; /* also on failure: the caller retries a merged run */
	rc = read_full(c, w, h, (unsigned)ent, data + pos, total, off);
	if (rc)
		return rc;
	*used = total;
	return 0;
}

void workers_fill(struct fill_ctx *c, uint32_t s, uint32_t worker)
{
	const struct ring *r = c->ring;
	struct slot_hdr *h = ring_hdr(r, s);
	uint64_t *ids = ring_samples(r, s);
	int32_t *labels = ring_labels(r, s);
	uint64_t *offs = ring_offsets(r, s);
	struct where w = {.hdr = h, .idx = c->idx, .file = UINT32_MAX};
	uint64_t t0 = now_ns(), pos = 0;
	uint32_t n = h->count, out = 0;

	h->status = 0;
	h->msg[0] = '\0';
	h->skipped = 0;
	h->worker = worker;
	h->preads = 0;
	h->read_bytes = 0;
	for (uint32_t k = 0; k < n;) {
		uint32_t run = 0;
		uint64_t used = 0;
		if (__atomic_load_n(&h->dropped, __ATOMIC_RELAXED)) {
			h->status = -ECANCELED; /* the caller ignores it */
			break;
		}
		h->cur = k;
		int rc = fill_some(c, &w, s, k, n, pos, true, &run, &used);
		/* A merged run failed: read its first sample alone, to name
		 * the sample that fails rather than the run (a failure
		 * before any read is not repeated). */
		if (rc && run > 1)
			rc = fill_some(c, &w, s, k, n, pos, false, &run, &used);
		if (rc && !c->skip_bad) {
			h->status = rc;
			break;
		}
		if (rc) {
			h->skipped++;
			k++;
			continue;
		}
		/* A merged run holds its samples back to back. */
		uint64_t p = pos;
		for (uint32_t i = 0; i < run; i++) {
			uint64_t id = ids[k + i];
			ids[out] = id;
			labels[out] = labels[k + i];
			offs[out] = p;
			p += run > 1 ? c->idx->length[id] : used;
			out++;
		}
		pos += used;
		k += run;
	}
	if (h->status == 0) {
		h->count = out;
		offs[out] = pos;
		h->bytes = pos;
		h->sample_size = c->sample_size;
		if (c->batch_fn) {
			struct wharf_batch_rw b = {
			    .epoch = h->epoch,
			    .index = h->index,
			    .sample_size = h->sample_size,
			    .bytes = h->bytes,
			    .data = ring_data(r, s),
			    .offsets = offs,
			    .samples = ids,
			    .labels = labels,
			    .data_cap = r->data_cap,
			    .count = out,
			    .worker = worker,
			};
			error_transform_clear();
			int rc = c->batch_fn(c->user, &b);
			if (rc) {
				h->status = rc < 0 ? rc : -EINVAL;
				snprintf(h->msg, sizeof(h->msg),
					 "batch transform failed: %s",
					 error_transform()[0]
					     ? error_transform()
					     : strerror(-h->status));
			} else if (b.bytes > r->data_cap ||
				   (b.sample_size &&
				    b.sample_size * out != b.bytes)) {
				h->status = -EINVAL;
				snprintf(h->msg, sizeof(h->msg),
					 "batch transform left %llu bytes "
					 "(%llu per sample, capacity %llu)",
					 (unsigned long long)b.bytes,
					 (unsigned long long)b.sample_size,
					 (unsigned long long)r->data_cap);
			} else {
				h->bytes = b.bytes;
				h->sample_size = b.sample_size;
			}
		}
	}
	if (c->ring->nstats) {
		struct ring_worker_stats *st = ring_stats(r, worker);
		__atomic_fetch_add(&st->busy_ns, now_ns() - t0,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&st->read_bytes, h->read_bytes,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&st->preads, h->preads, __ATOMIC_RELAXED);
		__atomic_fetch_add(&st->skipped, h->skipped, __ATOMIC_RELAXED);
	}
}

/* ---- processes ---- */

static int write_all(int fd, const void *p, size_t len)
{
	const char *b = p;
	while (len) {
		ssize_t n = write(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t len)
{
	char *b = p;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, b + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got ? -EIO : 0;
		got += (size_t)n;
	}
	return 1;
}

/*
 * The caller's ends of the channels of every loader alive in this process,
 * and the files listed by workers_exclude_fd.  A worker inherits them
 * (fork without exec) and closes them first, so that another loader's
 * workers see their channel close when that loader closes, instead of it
 * being held open by ours, and hold no mount busy.  Past OWN_MAX an fd is
 * not listed: a channel's loader then waits out its grace and kills.
 */
#define OWN_MAX 256
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
/* Held while a worker's own channel ends are open in the caller. */
static pthread_mutex_t spawn_mu = PTHREAD_MUTEX_INITIALIZER;
static int own_fds[OWN_MAX];
static unsigned own_n;

static void own_add(int fd)
{
	pthread_mutex_lock(&own_mu);
	if (own_n < OWN_MAX)
		own_fds[own_n++] = fd;
	pthread_mutex_unlock(&own_mu);
}

static void own_remove(int fd)
{
	pthread_mutex_lock(&own_mu);
	for (unsigned k = 0; k < own_n; k++)
		if (own_fds[k] == fd) {
			own_fds[k] = own_fds[--own_n];
			break;
		}
	pthread_mutex_unlock(&own_mu);
}

void workers_exclude_fd(int fd)
{
	if (fd >= 0)
		own_add(fd);
}

void workers_include_fd(int fd)
{
	if (fd >= 0)
		own_remove(fd);
}

/* A copy taken before fork: the child may not take the lock. */
static unsigned own_snapshot(int out[OWN_MAX])
{
	pthread_mutex_lock(&own_mu);
	const unsigned n = own_n;
	memcpy(out, own_fds, n * sizeof(*out));
	pthread_mutex_unlock(&own_mu);
	return n;
}

/* The channel ends listed when a worker was forked. */
struct inherited {
	int fd[OWN_MAX];
	unsigned n;
};

/*
 * The caller's death, seen as its end of the task channel closing: only
 * the caller's process holds it, so the process going (not the thread
 * that opened the loader, which is all PR_SET_PDEATHSIG watches) ends
 * the worker, even in the middle of a long read or transform.  Closing
 * the channel on purpose (workers_stop) ends it the same way.
 */
static void *watch_caller(void *arg)
{
	struct pollfd pf = {.fd = *(const int *)arg, .events = POLLRDHUP};

	for (;;) {
		const int n = poll(&pf, 1, -1);
		if (n > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			_exit(0);
	}
	return NULL;
}

__attribute__((noreturn)) static void
worker_main(struct workers *ws, uint32_t i, int task_rd, int done_wr,
	    pid_t parent, bool main_thread, struct fill_ctx *ctx,
	    wharf_worker_init_fn init, void *user, const struct inherited *inh)
{
	/* Signals first: the caller handles ^C and stops us; a dead caller
	 * must not leave us blocked in a write. */
	struct sigaction sa = {.sa_handler = SIG_IGN};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_sigbus;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* The parent-death signal follows the forking thread: armed only
	 * when that is the main thread, whose end is the process's. */
	if (main_thread)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0); /* the caller died before prctl took effect */
	static int watched_fd;
	watched_fd = task_rd;
	pthread_t watcher;
	if (pthread_create(&watcher, NULL, watch_caller, &watched_fd) == 0)
		pthread_detach(watcher);
	/* The caller's ends of every pipe so far are not ours. */
	for (uint32_t j = 0; j <= i; j++) {
		close(ws->w[j].task_fd);
		close(ws->w[j].done_fd);
	}
	/* ... nor other loaders'. */
	for (unsigned k = 0; k < inh->n; k++)
		if (inh->fd[k] != task_rd && inh->fd[k] != done_wr)
			close(inh->fd[k]);

	ring_populate(ctx->ring);
	struct done_msg m = {.slot = UINT32_MAX, .worker = i};
	int rc = fill_init(ctx, true);
	if (rc) {
		m.status = rc;
		snprintf(m.msg, sizeof(m.msg), "out of memory");
	} else if (init) {
		error_transform_clear();
		rc = init(user, i);
		if (rc) {
			m.status = rc < 0 ? rc : -EINVAL;
			snprintf(m.msg, sizeof(m.msg), "worker_init: %s",
				 error_transform()[0] ? error_transform()
						      : strerror(-m.status));
		}
	}
	if (write_all(done_wr, &m, sizeof(m)) || m.status)
		_exit(1);
	for (;;) {
		struct task_msg t;
		if (read_all(task_rd, &t, sizeof(t)) <= 0 || t.op == TASK_EXIT)
			break;
		if (t.slot >= ctx->ring->nslots)
			break;
		workers_fill(ctx, t.slot, i);
		struct done_msg d = {.slot = t.slot, .worker = i};
		if (write_all(done_wr, &d, offsetof(struct done_msg, msg)))
			break;
	}
	/* _exit: the caller's atexit handlers and stdio buffers are its own. */
	_exit(0);
}

int workers_start(struct workers *ws, uint32_t n, uint32_t depth,
		  struct fill_ctx *ctx, wharf_worker_init_fn init, void *user,
		  char **err)
{
	int rc = 0;
	memset(ws, 0, sizeof(*ws));
	ws->w = calloc(n ? n : 1, sizeof(*ws->w));
	if (!ws->w)
		return -ENOMEM;
	ws->depth = depth;
	pid_t parent = getpid();
	const bool main_thread = gettid() == parent;
	struct inherited inh;
	for (uint32_t i = 0; i < n; i++) {
		struct worker *w = &ws->w[i];
		int tp[2], dp[2];
		w->pid = -1;
		w->task_fd = w->done_fd = -1;
		ws->n = i + 1; /* workers_stop frees what is set up so far */
		w->fifo = calloc(depth, sizeof(*w->fifo));
		if (!w->fifo) {
			rc = -ENOMEM;
			*err = strdupf("workers: out of memory");
			goto fail;
		}
		/* The task channel is a socket so that writing to a dead
		 * worker gives EPIPE, not a SIGPIPE in the caller.  From here
		 * to the close of the worker's ends, no other loader forks:
		 * its worker would hold them open, and this worker's death
		 * would never show as EOF. */
		pthread_mutex_lock(&spawn_mu);
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tp)) {
			rc = -errno;
			pthread_mutex_unlock(&spawn_mu);
			*err = strdupf("workers: pipe: %s", strerror(-rc));
			goto fail;
		}
		if (pipe2(dp, O_CLOEXEC)) {
			rc = -errno;
			close(tp[0]);
			close(tp[1]);
			pthread_mutex_unlock(&spawn_mu);
			*err = strdupf("workers: pipe: %s", strerror(-rc));
			goto fail;
		}
		w->task_fd = tp[1];
		w->done_fd = dp[0];
		own_add(w->task_fd);
		own_add(w->done_fd);
		inh.n = own_snapshot(inh.fd);
		pid_t pid = fork();
		if (pid == 0)
			worker_main(ws, i, tp[0], dp[1], parent, main_thread,
				    ctx, init, user, &inh);
		rc = pid < 0 ? -errno : 0;
		close(tp[0]);
		close(dp[1]);
		pthread_mutex_unlock(&spawn_mu);
		if (rc) {
			*err = strdupf("workers: fork: %s", strerror(-rc));
			goto fail;
		}
		w->pid = pid;
	}
	/* Every worker reports its worker_init. */
	for (uint32_t i = 0; i < n; i++) {
		struct done_msg m;
		int r = read_all(ws->w[i].done_fd, &m, sizeof(m));
		if (r == 1 && m.status == 0)
			continue;
		if (r == 1) {
			rc = m.status;
			m.msg[sizeof(m.msg) - 1] = '\0';
			*err = strdupf("worker %u: %s", i, m.msg);
		} else {
			rc = -ECHILD;
			*err = strdupf("worker %u (pid %d) died while "
				       "starting",
				       i, (int)ws->w[i].pid);
		}
		goto fail;
	}
	return 0;
fail:
	workers_stop(ws);
	return rc;
}

uint32_t workers_current(const struct workers *ws, uint32_t i)
{
	if (i >= ws->n || !ws->w[i].queued)
		return UINT32_MAX;
	return ws->w[i].fifo[ws->w[i].fifo_head];
}

static char *death(struct worker *w, uint32_t i)
{
	int st = 0;
	pid_t r;
	do
		r = waitpid(w->pid, &st, 0);
	while (r < 0 && errno == EINTR);
	w->dead = true;
	pid_t pid = w->pid;
	w->pid = -1;
	if (r < 0)
		return strdupf("worker %u (pid %d) went away", i, (int)pid);
	if (WIFSIGNALED(st))
		return strdupf("worker %u (pid %d) was killed by "
			       "signal %d (%s)",
			       i, (int)pid, WTERMSIG(st),
			       strsignal(WTERMSIG(st)));
	return strdupf("worker %u (pid %d) exited with status %d", i, (int)pid,
		       WEXITSTATUS(st));
}

int workers_send(struct workers *ws, uint32_t i, uint32_t s, char **err)
{
	struct worker *w = &ws->w[i];
	assert(w->queued < ws->depth);
	struct task_msg t = {.slot = s, .op = TASK_FILL};
	ssize_t n;
	do
		n = send(w->task_fd, &t, sizeof(t), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(t)) {
		/* Gone with batches queued: the wait reports it, naming the
		 * sample it was on.  Gone idle: nothing else would. */
		if (w->queued)
			return -EPIPE;
		*err = death(w, i);
		return -ECHILD;
	}
	w->fifo[(w->fifo_head + w->queued) % ws->depth] = s;
	w->queued++;
	return 0;
}

int workers_wait(struct workers *ws, int timeout_ms, uint32_t *worker,
		 uint32_t *slot, char **err)
{
	struct pollfd pf[ws->n ? ws->n : 1];
	uint32_t map[ws->n ? ws->n : 1], np = 0;
	for (uint32_t i = 0; i < ws->n; i++) {
		if (ws->w[i].dead || ws->w[i].done_fd < 0)
			continue;
		pf[np].fd = ws->w[i].done_fd;
		pf[np].events = POLLIN;
		map[np++] = i;
	}
	if (np == 0)
		return -ECHILD;
	/* A signal ends the wait: the caller's handler (Python's ^C) must
	 * get to run, and a timeout is recomputed by the caller. */
	int n = poll(pf, np, timeout_ms);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	for (uint32_t k = 0; k < np; k++) {
		if (!pf[k].revents)
			continue;
		uint32_t i = map[k];
		struct worker *w = &ws->w[i];
		struct done_msg m;
		int r =
		    read_all(w->done_fd, &m, offsetof(struct done_msg, msg));
		*worker = i;
		if (r == 1 && w->queued && m.slot == w->fifo[w->fifo_head]) {
			w->fifo_head = (w->fifo_head + 1) % ws->depth;
			w->queued--;
			*slot = m.slot;
			return 1;
		}
		*slot = workers_current(ws, i);
		*err = death(w, i);
		return -ECHILD;
	}
	return 0;
}

void workers_stop(struct workers *ws)
{
	if (!ws->w)
		return;
	/* Closing the task pipe asks a worker to exit; one busy in a long
	 * read gets SIGKILL after a short grace. */
	for (uint32_t i = 0; i < ws->n; i++) {
		if (ws->w[i].task_fd >= 0) {
			own_remove(ws->w[i].task_fd);
			close(ws->w[i].task_fd);
		}
		ws->w[i].task_fd = -1;
	}
	for (int round = 0; round < 50; round++) {
		bool left = false;
		for (uint32_t i = 0; i < ws->n; i++) {
			struct worker *w = &ws->w[i];
			if (w->pid <= 0)
				continue;
			pid_t r = waitpid(w->pid, NULL, WNOHANG);
			/* ECHILD: reaped by someone else (SIGCHLD ignored);
			 * its pid may be another process's by now. */
			if (r == w->pid || (r < 0 && errno == ECHILD))
				w->pid = -1;
			else
				left = true;
		}
		if (!left)
			break;
		struct timespec ts = {0, 4 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (uint32_t i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		if (w->pid > 0) {
			kill(w->pid, SIGKILL);
			while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		if (w->done_fd >= 0) {
			own_remove(w->done_fd);
			close(w->done_fd);
		}
		free(w->fifo);
	}
	free(ws->w);
	memset(ws, 0, sizeof(*ws));
}

void workers_forget(struct workers *ws)
{
	if (!ws->w)
		return;
	for (uint32_t i = 0; i < ws->n; i++) {
		struct worker *w = &ws->w[i];
		const int fds[] = {w->task_fd, w->done_fd};
		for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++)
			if (fds[k] >= 0) {
				own_remove(fds[k]);
				close(fds[k]);
			}
		free(w->fifo);
	}
	free(ws->w);
	memset(ws, 0, sizeof(*ws));
}
