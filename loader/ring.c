/*
 * ring: the batch ring segment.  Reserving every page at open is the point:
 * a tmpfs that runs out of room while a worker writes a slot would deliver
 * a SIGBUS mid-epoch; posix_fallocate makes the same shortage an error at
 * open.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "error.h"
#include "ring.h"
#include "text.h"

#define PAGE 4096u
#define LINE 64u

static size_t up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

const char *ring_default_dir(void)
{
	const char *d = getenv("WHARF_SHM_DIR");
	return d && *d ? d : "/dev/shm";
}

/* Slot layout: header, ids, labels, offsets, data (cache-line aligned). */
static size_t layout(struct ring *r, uint32_t batch, uint64_t data_cap)
{
	size_t o = up(sizeof(struct slot_hdr), LINE);
	r->off_samples = o;
	o = up(o + (size_t)batch * 8, LINE);
	r->off_labels = o;
	o = up(o + (size_t)batch * 4, LINE);
	r->off_offsets = o;
	o = up(o + ((size_t)batch + 1) * 8, LINE);
	r->off_data = o;
	return up(o + data_cap, PAGE);
}

size_t ring_bytes(uint32_t nslots, uint32_t batch_size, uint64_t data_cap,
		  uint32_t nstats)
{
	struct ring r;
	size_t slot = layout(&r, batch_size, data_cap);
	return up((size_t)nstats * sizeof(struct ring_worker_stats), PAGE) +
	       slot * nslots;
}

/* An unnamed file in dir; where O_TMPFILE is refused, a named one
 * (wharf-PID-ring-N, which `wharf shm gc` knows) unlinked at once. */
static int create_segment(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 ||
	    (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd < 0 ? -errno : fd;
	static unsigned seq;
	for (int tries = 0; tries < 100; tries++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/wharf-%d-ring-%u", dir,
			 (int)getpid(),
			 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
		fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd >= 0) {
			unlink(path);
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int ring_open(struct ring *r, const char *dir, uint32_t nslots,
	      uint32_t batch_size, uint64_t data_cap, uint32_t nstats,
	      char **err)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (!dir)
		dir = ring_default_dir();
	if (data_cap > (SIZE_MAX >> 2) / (nslots ? nslots : 1)) {
		*err = strdupf("ring: %u slots of %llu bytes do not fit "
			       "in memory",
			       nslots, (unsigned long long)data_cap);
		return -EOVERFLOW;
	}
	r->slot_size = layout(r, batch_size, data_cap);
	r->slots_off =
	    up((size_t)nstats * sizeof(struct ring_worker_stats), PAGE);
	r->size = r->slots_off + r->slot_size * nslots;
	r->nslots = nslots;
	r->batch_size = batch_size;
	r->data_cap = data_cap;
	r->nstats = nstats;

	int fd = create_segment(dir);
	if (fd < 0) {
		*err = strdupf("ring: creating a segment in %s: %s", dir,
			       strerror(-fd));
		return fd;
	}
	int rc = posix_fallocate(fd, 0, (off_t)r->size);
	if (rc) {
		struct statvfs sv;
		unsigned long long avail = 0;
		if (!statvfs(dir, &sv))
			avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
		if (rc == ENOSPC)
			*err = strdupf(
			    "ring: %s is too small: the batch ring needs "
			    "%zu bytes (%u slots of %zu), %llu bytes are "
			    "free; lower prefetch, num_workers, batch_size "
			    "or slot_bytes/sample_bytes, or make %s larger",
			    dir, r->size, nslots, r->slot_size, avail, dir);
		else
			*err = strdupf("ring: reserving %zu bytes in "
				       "%s: %s",
				       r->size, dir, strerror(rc));
		close(fd);
		return -rc;
	}
	/* Not populated here: the slots are written by the workers, which
	 * map them in themselves (ring_populate), and read here, where a
	 * read fault maps 16 pages at once.  Populating all of a 150 MB ring
	 * (float32 images) took 60 ms before the first worker started, an
	 * eighth of a 2,000-sample epoch's setup. */
	r->base =
	    mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->base == MAP_FAILED) {
		rc = -errno;
		r->base = NULL;
		*err = strdupf("ring: mmap of %zu bytes: %s", r->size,
			       strerror(-rc));
		close(fd);
		return rc;
	}
	/* The mapping keeps the segment alive; no descriptor is needed. */
	close(fd);
	return 0;
}

void ring_populate(const struct ring *r)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	/* Best effort (Linux >= 5.14): a fork does not copy the page tables
	 * of a shared mapping, so each process that fills slots maps the
	 * ring in once here, not a page at a time while it writes. */
	(void)madvise(r->base, r->size, MADV_POPULATE_WRITE);
}

void ring_close(struct ring *r)
{
	if (r->base)
		munmap(r->base, r->size);
	r->base = NULL;
}
