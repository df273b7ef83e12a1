#ifndef WHARF_INCLUDE_WHARF_CUDA_H
#define WHARF_INCLUDE_WHARF_CUDA_H
/*
 * libwharf CUDA prefetch: batches go from the loader's shared-memory ring to
 * the GPU without an extra host copy, and the copy of the next batch runs on
 * a side stream while the caller's kernels work on this one.
 *
 * The ring is registered as pinned memory (cudaHostRegister) in the calling
 * process, so the host-to-device copy reads straight from the slot a worker
 * filled.  When registration is refused, batches go through one pinned
 * staging buffer per device buffer instead (one extra memcpy); the library
 * says so once, as a warning through the log function (<wharf/log.h>:
 * stderr unless the program installed its own), and in
 * wharf_cuda_stats.registered.
 */
/* clang-format off */
/*
 * Call order (laid out by hand, hence the clang-format guard):
 *
 *   wharf_loader_open(index, &options, &loader)
 *   wharf_cuda_options_init(&copt); set fields
 *   wharf_loader_cuda_enable(loader, &copt)      registers the ring
 *   per epoch: wharf_loader_device_set_epoch(loader, epoch)
 *     while wharf_loader_next_device(loader, stream, &db) == 0:
 *       launch kernels on `stream` that read db->data, db->labels
 *       wharf_loader_release_device(loader, db, stream)
 *   wharf_loader_close(loader)                    frees the CUDA side too
 */
/* clang-format on */
/*
 * Ordering contract: the batch's bytes are on the device for all work that
 * the caller enqueues on `stream` after wharf_loader_next_device() returned
 * (the stream waits on the copy's event; the host does not).  Work on any
 * other stream must first wait for `stream` (an event), or it may read the
 * buffer before the copy lands.  A device buffer is refilled only after the
 * work enqueued on the release stream before wharf_loader_release_device()
 * has finished (an event is recorded there).  A ring slot goes back to the
 * workers once the copy out of it completed.  wharf_loader_close() waits for
 * the copies and for the work enqueued before each release, then frees the
 * device buffers: release every batch before closing (a batch still held is
 * freed under the caller).
 *
 * Once CUDA is enabled, use the _device calls below instead of
 * wharf_loader_next(), _release(), _set_epoch() and _state_save/_restore():
 * the CUDA side reads batches ahead, and only the _device calls know which of
 * those the caller has seen.  wharf_loader_stats() stays valid (its batches
 * count those read ahead).
 *
 * Streams are passed as void * so that this header needs no CUDA header: pass
 * a cudaStream_t (NULL is the legacy default stream of the loader's device).
 * The loader's device is the one current on the calling thread at enable
 * time; every _device call (and close) makes it current for its own work and
 * puts the caller's current device back.
 *
 * The host waits only where the ring needs it (every ring slot waiting for
 * its copy; without a registered ring, a staging buffer's last copy), never
 * for the caller's stream, so it runs ahead of the GPU as far as the ring's
 * slots allow; such waits sleep (blocking-sync events).  The calls never
 * read or clear the runtime's last error (cudaGetLastError()): a pending
 * error of the caller's stays for the caller.
 *
 * Errors as in wharf/loader.h: 0 or a negative errno, message in
 * wharf_last_error().  A library built without CUDA has every function below:
 * they return -ENOTSUP with the message "libwharf was built without CUDA".
 */
#include <stdint.h>

#include <wharf/loader.h>

#ifdef __cplusplus
extern "C" {
#endif

/* wharf_cuda_options.flags */
#define WHARF_CUDA_NO_REGISTER                                                 \
	1u /* use pinned staging, even if the ring                             \
	      could be registered (for tests) */

struct wharf_cuda_options {
	uint32_t size;	  /* sizeof(struct wharf_cuda_options) */
	uint32_t buffers; /* device buffers, at least 2 (default 2) */
	uint32_t flags;	  /* WHARF_CUDA_* */
	uint32_t reserved0;
};

/* Fills *opt with the defaults and sets opt->size. */
void wharf_cuda_options_init(struct wharf_cuda_options *opt);

/*
 * 1 when the library was built with CUDA and at least one device is visible;
 * 0 when there is none to use (no CUDA in the build, no CUDA runtime, no
 * NVIDIA driver, no device); a negative errno (-EIO) when CUDA is there but broken, such as a
 * driver too old for the runtime libwharf was built with.  wharf_last_error()
 * says why, with the runtime's message and the fix.
 *
 * libwharf needs no CUDA library to load: the CUDA runtime of the toolkit
 * it was built with (libcudart.so.MAJOR) is loaded at the first of these
 * calls, the one a process has loaded already if any, else from the
 * linker's path, else from that toolkit's directory.  Without it this call
 * returns 0, and wharf_loader_cuda_enable() -ENOTSUP, naming the library
 * to install.
 */
int wharf_cuda_available(void);

/*
 * Turns on device prefetch for l: registers the ring, creates the copy
 * stream, the events and `buffers` device buffers of one slot's data, labels
 * and offsets each.  Call it once, before the first batch.
 * @return 0; -ENOTSUP (built without CUDA, or no CUDA runtime); -ENODEV (no driver or no
 *         device); -EEXIST (already enabled); -ENOMEM (device memory); -EIO
 *         (CUDA is broken, such as a driver too old, or another CUDA error:
 *         the message has the runtime's text and the fix).
 */
int wharf_loader_cuda_enable(wharf_loader *l,
			     const struct wharf_cuda_options *opt);

/*
 * A batch on the device.  Pointers marked device are device memory, valid
 * until wharf_loader_release_device() of this batch (and for the work
 * enqueued before it on the release stream).  samples and host_labels are
 * host copies, valid until the same release.
 */
struct wharf_device_batch {
	uint64_t epoch;
	uint64_t index;		    /* batch number within the epoch */
	uint64_t sample_size;	    /* bytes per sample; 0 when variable-size */
	uint64_t bytes;		    /* data bytes */
	void *data;		    /* device: the samples */
	const uint64_t *offsets;    /* device: count + 1 offsets, or NULL */
	const int32_t *labels;	    /* device: count labels */
	const uint64_t *samples;    /* host: count sample ids */
	const int32_t *host_labels; /* host: count labels */
	uint32_t count;
	uint32_t skipped;
	uint32_t buffer;     /* device buffer number */
	uint32_t generation; /* the buffer's hand-outs so far, this one's 1+ */
};

/*
 * The next batch on the device, in the loader's order (in_order or first
 * ready), with the copy of the following batch already started when a device
 * buffer is free for it.  Blocks on the host only for the loader (and, when
 * every ring slot is waiting for its copy, for the oldest copy).
 * @return 0 and *out set; WHARF_END and *out NULL at the end of the epoch;
 *         -ENOBUFS when every device buffer holds a batch not released; the
 *         loader's errors; -EIO for a CUDA error.
 */
int wharf_loader_next_device(wharf_loader *l, void *stream,
			     const struct wharf_device_batch **out);

/*
 * Gives the device buffer back once the work enqueued on `stream` so far is
 * done (the host does not wait).  Pass the stream of the last kernel that
 * reads the batch.  b is the pointer wharf_loader_next_device() returned or
 * a copy of the struct (the loader reuses the struct when the buffer goes
 * out again): buffer and generation name the hand-out, so a second release
 * of a batch whose buffer went out again is refused, as with
 * wharf_loader_release().
 * @return 0, or -EINVAL for a batch not held (released already, an
 *         earlier generation, foreign); -EPERM in another process than
 *         the opener.
 */
int wharf_loader_release_device(wharf_loader *l,
				const struct wharf_device_batch *b,
				void *stream);

/* wharf_loader_set_epoch() for a loader with CUDA: drops batches read ahead
 * (waiting for their copies) first.  Held batches stay valid. */
int wharf_loader_device_set_epoch(wharf_loader *l, uint64_t epoch);

/* wharf_loader_state_save() that counts only the batches handed out by
 * wharf_loader_next_device(), not those read ahead. */
int wharf_loader_device_state_save(wharf_loader *l, struct wharf_state *st);

/* wharf_loader_state_restore() for a loader with CUDA: drops batches read
 * ahead first. */
int wharf_loader_device_state_restore(wharf_loader *l,
				      const struct wharf_state *st);

struct wharf_cuda_stats {
	uint32_t size;	     /* sizeof(struct wharf_cuda_stats) */
	uint32_t registered; /* 1: copies read the ring; 0: pinned staging */
	uint64_t batches;    /* handed out by next_device */
	uint64_t copies;     /* host-to-device copies timed */
	uint64_t bytes;	     /* bytes copied to the device */
	uint64_t copy_ns;    /* device time of those copies */
	/* Of copy_ns, the part during which the caller's stream was already
	 * waiting for the batch (not hidden behind earlier work). */
	uint64_t exposed_ns;
	uint64_t overlap_ns; /* copy_ns - exposed_ns: hidden behind work */
	uint64_t wait_ns;    /* host time blocked inside next_device */
	uint64_t staged_ns;  /* host time in staging memcpy (registered 0) */
};

/* Fills *st (set st->size first).  Copies still running are counted once
 * they are done.  @return 0, or -EINVAL when CUDA is not enabled. */
int wharf_loader_cuda_stats(const wharf_loader *l, struct wharf_cuda_stats *st);

#ifdef __cplusplus
}
#endif
#endif
