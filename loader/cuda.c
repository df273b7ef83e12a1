/*
 * cuda: pinned CUDA prefetch, on top of the public loader.  It drives the
 * loader through wharf_loader_next() and _release() and the hooks of
 * loader_i.h; loader.c reaches it only through those hooks.
 *
 * The ring registered as pinned memory, N device buffers filled on a
 * private copy stream, events that order the caller's stream after the
 * copy and the next copy into a buffer after the caller's last use of it.
 *
 * A device buffer goes FREE -> QUEUED (copy enqueued, not handed out) ->
 * HELD (handed out) -> FREE (released: an event on the caller's stream, which
 * the copy stream waits on before it writes the buffer again, so the host
 * never waits for the release).  The ring slot a copy reads stays held until
 * the copy's `done` event completed; it is given back by the next call that
 * sees it completed, or at once when the ring runs out of slots.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/cuda.h>

#include "cuda.h"
#include "error.h"
#include "loader_i.h"
#include "log.h"
#include "text.h"
#include "units.h"

void wharf_cuda_options_init(struct wharf_cuda_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->size = sizeof(*opt);
	opt->buffers = 2;
}

#ifndef HAVE_CUDA

static int no_cuda(void)
{
	return error_set(-ENOTSUP, strdupf("libwharf was built without CUDA"));
}

int wharf_cuda_available(void)
{
	(void)no_cuda();
	return 0;
}

int wharf_loader_cuda_enable(wharf_loader *l,
			     const struct wharf_cuda_options *opt)
{
	(void)l;
	(void)opt;
	return no_cuda();
}

int wharf_loader_next_device(wharf_loader *l, void *stream,
			     const struct wharf_device_batch **out)
{
	(void)l;
	(void)stream;
	*out = NULL;
	return no_cuda();
}

int wharf_loader_release_device(wharf_loader *l,
				const struct wharf_device_batch *b,
				void *stream)
{
	(void)l;
	(void)b;
	(void)stream;
	return no_cuda();
}

int wharf_loader_device_set_epoch(wharf_loader *l, uint64_t epoch)
{
	(void)l;
	(void)epoch;
	return no_cuda();
}

int wharf_loader_device_state_save(wharf_loader *l, struct wharf_state *st)
{
	(void)l;
	(void)st;
	return no_cuda();
}

int wharf_loader_device_state_restore(wharf_loader *l,
				      const struct wharf_state *st)
{
	(void)l;
	(void)st;
	return no_cuda();
}

int wharf_loader_cuda_stats(const wharf_loader *l, struct wharf_cuda_stats *st)
{
	(void)l;
	(void)st;
	return no_cuda();
}

int cuda_copy_events(const struct wharf_loader *l, uint32_t buffer,
		     void **start, void **done)
{
	(void)l;
	(void)buffer;
	*start = *done = NULL;
	return no_cuda();
}

int cuda_spin(void *stream, uint64_t ns)
{
	(void)stream;
	(void)ns;
	return no_cuda();
}

#else /* HAVE_CUDA */

#include <sys/mman.h>

#include "cudart.h"

enum buf_state { BUF_FREE, BUF_QUEUED, BUF_HELD };

struct dbuf;

/*
 * One host-to-device copy: its events and the ring slot it reads.  The events
 * of a copy are recorded again only after both the copy stream and the
 * caller's stream passed them, so that issuing the next copy into a buffer
 * never waits for the caller's stream: a pool of these, larger than the ring
 * lets run at once, instead of one set per buffer.
 */
struct xfer {
	cudaEvent_t start, done, need;
	bool busy;			/* recorded, not accounted yet */
	bool queued;			/* its batch is not handed out yet */
	bool need_recorded;		/* `need` is on the caller's stream */
	const struct wharf_batch *host; /* ring slot read, until `done` */
	const struct dbuf *buf;		/* the buffer it fills */
	uint64_t seq;			/* order it was issued */
};

struct dbuf {
	enum buf_state state;
	char *dev;   /* data | labels | offsets, one allocation */
	char *stage; /* pinned staging, when the ring is not registered */
	cudaEvent_t released;
	bool release_pending; /* the copy stream must wait on `released` */
	struct xfer *x;	      /* the last copy into it */
	uint64_t *samples;    /* host copies, batch_size each */
	int32_t *labels;
	uint32_t generation; /* hand-outs so far */
	/* Hand-out g's view is views[g % 2], as the loader's host views: a
	 * pointer released twice shows its own generation for one more
	 * hand-out of the buffer. */
	struct wharf_device_batch views[2];
};

/* Which of b's views holds the batch copied into it, not handed out yet. */
static unsigned queued_view(const struct dbuf *b)
{
	return (b->generation + 1) % 2;
}

struct loader_cuda {
	struct wharf_loader *l;
	int device;
	cudaStream_t copy;
	bool registered;
	bool ended; /* the loader said WHARF_END for this epoch */
	uint32_t nbuf, nxfer;
	struct dbuf *bufs;
	struct xfer *xfers;
	uint64_t seq;
	size_t off_labels, off_offsets, buf_bytes;
	struct wharf_cuda_stats stats;
};

/*
 * Event flags.  The host waits on `done` (a ring slot or a staging buffer to
 * reuse, an epoch's end), on `need` (only when the pool of copies runs dry)
 * and on `released` (at close): blocking sync, so that such a wait sleeps
 * instead of spinning a core the workers need.  `start`, `done` and `need`
 * time the copies; `released` only orders the copy stream after the caller's,
 * and an event without timing is the cheaper one to wait on.
 */
#define EV_TIMED cudaEventBlockingSync
#define EV_ORDER (cudaEventDisableTiming | cudaEventBlockingSync)

static int cuda_rc(cudaError_t e)
{
	switch (e) {
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorNoDevice:
		return -ENODEV;
	default: /* broken, not absent: a driver too old, a fault */
		return -EIO;
	}
}

/* The message of a failed CUDA call: the runtime's words, and the fix where
 * the installation is at fault.  The runtime's last error is not read: it
 * may hold the caller's, which cudaGetLastError() would clear. */
static char *cuda_msg(cudaError_t e, const char *what)
{
	int v = 0;
	if ((e == cudaErrorInsufficientDriver ||
	     e == cudaErrorSystemDriverMismatch ||
	     e == cudaErrorCompatNotSupportedOnDevice) &&
	    cudaDriverGetVersion(&v) == cudaSuccess)
		return strdupf("CUDA %s: %s (%s): libwharf uses the CUDA "
			       "%d.%d runtime, the NVIDIA driver supports "
			       "CUDA %d.%d: update the driver, or build "
			       "libwharf against the CUDA toolkit the driver "
			       "supports (configure --with-cuda=DIR)",
			       what, cudaGetErrorString(e), cudaGetErrorName(e),
			       CUDART_VERSION / 1000,
			       CUDART_VERSION % 1000 / 10, v / 1000,
			       v % 1000 / 10);
	return strdupf("CUDA %s: %s (%s)", what, cudaGetErrorString(e),
		       cudaGetErrorName(e));
}

static int cuda_fail(cudaError_t e, const char *what)
{
	return error_set(cuda_rc(e), cuda_msg(e, what));
}

/* A CUDA failure in the middle of the pipeline leaves buffers in an unknown
 * state: the loader is stopped, as for a worker's failure. */
static int pipe_fail(struct loader_cuda *c, cudaError_t e, const char *what)
{
	return loader_fail(c->l, cuda_rc(e), cuda_msg(e, what));
}

#define CU(call, what)                                                         \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess)                                         \
			return pipe_fail(c, e_, what);                         \
	} while (0)

/* Makes the loader's device current for one call; dev_leave puts the
 * caller's back, so that a caller driving several GPUs keeps its own. */
static cudaError_t dev_enter(const struct loader_cuda *c, int *prev)
{
	*prev = c->device;
	cudaError_t e = cudaGetDevice(prev);
	if (e == cudaSuccess && *prev != c->device)
		e = cudaSetDevice(c->device);
	return e;
}

static void dev_leave(const struct loader_cuda *c, int prev)
{
	if (prev != c->device)
		(void)cudaSetDevice(prev);
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

static void cuda_free(struct loader_cuda *c)
{
	if (!c)
		return;
	int prev;
	(void)dev_enter(c, &prev);
	/* Nothing may use what is freed below: the copies (and the releases
	 * the copy stream waits on), then the caller's work on buffers it
	 * released.  Buffers still held go too: the caller's to avoid. */
	if (c->copy)
		(void)cudaStreamSynchronize(c->copy);
	for (uint32_t i = 0; c->bufs && i < c->nbuf; i++)
		if (c->bufs[i].release_pending)
			(void)cudaEventSynchronize(c->bufs[i].released);
	for (uint32_t i = 0; c->bufs && i < c->nbuf; i++) {
		struct dbuf *b = &c->bufs[i];
		/* Ring slots still held go with the ring (the loader
		 * closes). */
		(void)cudaFree(b->dev);
		(void)cudaFreeHost(b->stage);
		if (b->released)
			(void)cudaEventDestroy(b->released);
		free(b->samples);
		free(b->labels);
	}
	for (uint32_t i = 0; c->xfers && i < c->nxfer; i++) {
		struct xfer *x = &c->xfers[i];
		cudaEvent_t evs[] = {x->start, x->done, x->need};
		for (size_t k = 0; k < sizeof(evs) / sizeof(evs[0]); k++)
			if (evs[k])
				(void)cudaEventDestroy(evs[k]);
	}
	free(c->bufs);
	free(c->xfers);
	if (c->copy)
		(void)cudaStreamDestroy(c->copy);
	if (c->registered) {
		size_t size;
		(void)cudaHostUnregister(loader_ring_base(c->l, &size));
	}
	dev_leave(c, prev);
	free(c);
}

/* Called by wharf_loader_close() before the ring is unmapped: no copy may
 * read it after. */
static void cuda_close_hook(void *ctx)
{
	struct loader_cuda *c = ctx;
	c->l->cuda = NULL;
	cuda_free(c);
}

int wharf_cuda_available(void)
{
	int n = 0;
	int v = -1;
	cudaError_t e;

	if (cudart_load())
		return 0;
	e = cudaGetDeviceCount(&n);
	/* Without any NVIDIA driver the runtime says "insufficient driver"
	 * too; only then does cudaDriverGetVersion() give 0. */
	if (e == cudaErrorInsufficientDriver &&
	    cudaDriverGetVersion(&v) == cudaSuccess && v == 0) {
		(void)error_set(-ENODEV, strdupf("no CUDA device found: no "
						 "NVIDIA driver is "
						 "installed"));
		return 0;
	}
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
		(void)error_set(-ENODEV, strdupf("no CUDA device found (the "
						 "driver sees none: "
						 "nvidia-smi, "
						 "CUDA_VISIBLE_DEVICES)"));
		return 0;
	}
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaGetDeviceCount");
	return 1;
}

static int buf_init(struct loader_cuda *c, struct dbuf *b, uint32_t batch)
{
	cudaError_t e;
	if ((e = cudaMalloc((void **)&b->dev, c->buf_bytes)) != cudaSuccess)
		return cuda_fail(e, "cudaMalloc of a device buffer");
	if (!c->registered && (e = cudaMallocHost((void **)&b->stage,
						  c->buf_bytes)) != cudaSuccess)
		return cuda_fail(e, "cudaMallocHost of a staging buffer");
	if ((e = cudaEventCreateWithFlags(&b->released, EV_ORDER)) !=
	    cudaSuccess)
		return cuda_fail(e, "cudaEventCreate");
	b->samples = calloc(batch, sizeof(*b->samples));
	b->labels = calloc(batch, sizeof(*b->labels));
	if (!b->samples || !b->labels)
		return error_set(-ENOMEM, NULL);
	return 0;
}

static int xfer_init(struct xfer *x)
{
	cudaError_t e;
	if ((e = cudaEventCreateWithFlags(&x->start, cudaEventDefault)) !=
		cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&x->done, EV_TIMED)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&x->need, EV_TIMED)) != cudaSuccess)
		return cuda_fail(e, "cudaEventCreate");
	return 0;
}

/* Registers the ring as pinned memory; false (and a warning, once) where
 * CUDA refuses. */
static bool register_ring(struct wharf_loader *l)
{
	size_t size;
	void *base = loader_ring_base(l, &size);
	cudaError_t e = cudaHostRegister(base, size, cudaHostRegisterDefault);
	const char *why = NULL;
	if (e != cudaSuccess) {
		why = cudaGetErrorString(e);
	} else if (madvise(base, size, MADV_DOFORK)) {
		/* A driver may mark pinned pages MADV_DONTFORK, against the
		 * copy-on-write of a private page under DMA.  The ring is a
		 * shared mapping, which a fork does not copy, and workers
		 * forked later (persistent = 0) must have it. */
		why = "madvise(MADV_DOFORK) of the registered ring failed";
		(void)cudaHostUnregister(base);
	}
	if (!why)
		return true;
	static int said;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		log_warn("cudaHostRegister of the %zu-byte batch ring failed "
			 "(%s): copying through pinned staging buffers "
			 "instead",
			 size, why);
	return false;
}

int wharf_loader_cuda_enable(wharf_loader *l,
			     const struct wharf_cuda_options *opt)
{
	struct wharf_cuda_options o;
	struct loader_cuda *c = NULL;
	cudaError_t e;
	int rc;

	wharf_cuda_options_init(&o);
	if (opt)
		memcpy(&o, opt, opt->size < sizeof(o) ? opt->size : sizeof(o));
	o.size = sizeof(o);
	rc = loader_check_owner(l);
	if (!rc)
		rc = cudart_load();
	if (rc)
		return rc;
	if (l->cuda)
		return error_set(-EEXIST,
				 strdupf("cuda_enable: CUDA prefetch is "
					 "already on for this loader"));
	if (o.buffers < 1 || o.buffers > 64)
		return error_set(-EINVAL, strdupf("cuda_enable: buffers is %u; "
						  "it must be 1 to 64",
						  o.buffers));
	rc = wharf_cuda_available();
	if (rc <= 0)
		return rc < 0 ? rc : -ENODEV;
	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(-ENOMEM, NULL);
	c->l = l;
	c->nbuf = o.buffers;
	/* In use at once: a copy per ring slot still reading it, one per
	 * device buffer not handed out, one per buffer handed out that the
	 * caller's stream has not reached (a copy into a buffer waits for
	 * the caller's release of it): the pool does not run dry. */
	c->nxfer = 2 * c->nbuf + l->nslots + 1;
	c->stats.size = sizeof(c->stats);
	if ((e = cudaGetDevice(&c->device)) != cudaSuccess) {
		rc = cuda_fail(e, "cudaGetDevice");
		goto fail;
	}

	uint32_t batch = l->opt.batch_size;
	c->off_labels = align_up(l->slot_cap, 256);
	c->off_offsets = align_up(c->off_labels + batch * sizeof(int32_t), 256);
	c->buf_bytes = c->off_offsets + (batch + 1) * sizeof(uint64_t);

	if (!(o.flags & WHARF_CUDA_NO_REGISTER))
		c->registered = register_ring(l);
	c->stats.registered = c->registered;
	if ((e = cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking)) !=
	    cudaSuccess) {
		rc = cuda_fail(e, "cudaStreamCreate");
		goto fail;
	}
	c->bufs = calloc(c->nbuf, sizeof(*c->bufs));
	c->xfers = calloc(c->nxfer, sizeof(*c->xfers));
	if (!c->bufs || !c->xfers) {
		rc = error_set(-ENOMEM, NULL);
		goto fail;
	}
	for (uint32_t i = 0; i < c->nbuf; i++)
		if ((rc = buf_init(c, &c->bufs[i], batch)) < 0)
			goto fail;
	for (uint32_t i = 0; i < c->nxfer; i++)
		if ((rc = xfer_init(&c->xfers[i])) < 0)
			goto fail;
	l->cuda = c;
	loader_set_close_hook(l, cuda_close_hook, c);
	return 0;
fail:
	cuda_free(c);
	return rc;
}

static int not_enabled(void)
{
	return error_set(-EINVAL,
			 strdupf("CUDA prefetch is not on for this loader: "
				 "call wharf_loader_cuda_enable() first"));
}

/*
 * Gives the ring slot of copy x back once the copy is done, and accounts its
 * timing (with how much of it the caller's stream waited for) once the
 * caller's stream reached the batch too.  wait_done blocks for the copy,
 * wait_need for the caller's stream (only when the pool runs dry).
 * @return 0 when x is free, 1 while in use, or the loader's failure.
 */
static int xfer_poll(struct loader_cuda *c, struct xfer *x, bool wait_done,
		     bool wait_need)
{
	if (!x->busy)
		return 0;
	cudaError_t e =
	    wait_done ? cudaEventSynchronize(x->done) : cudaEventQuery(x->done);
	if (e == cudaErrorNotReady)
		return 1;
	CU(e, "waiting for a copy");
	if (x->host) {
		int rc = wharf_loader_release(c->l, x->host);
		assert(rc == 0);
		(void)rc;
		x->host = NULL;
	}
	if (x->queued)
		return 1;
	float copy_ms = 0, wait_ms = 0;
	uint64_t exposed = 0;
	if (x->need_recorded) {
		e = wait_need ? cudaEventSynchronize(x->need)
			      : cudaEventQuery(x->need);
		if (e == cudaErrorNotReady)
			return 1;
		CU(e, "waiting for the caller's stream");
		CU(cudaEventElapsedTime(&wait_ms, x->need, x->done),
		   "cudaEventElapsedTime");
		if (wait_ms > 0)
			exposed = (uint64_t)(wait_ms * 1e6);
	}
	CU(cudaEventElapsedTime(&copy_ms, x->start, x->done),
	   "cudaEventElapsedTime");
	uint64_t copy = (uint64_t)(copy_ms * 1e6);
	c->stats.copies++;
	c->stats.copy_ns += copy;
	c->stats.exposed_ns += exposed < copy ? exposed : copy;
	x->busy = false;
	x->need_recorded = false;
	return 0;
}

/* Gives ring slots back whose copy completed (with wait, waits for every
 * copy), and accounts what it can. */
static int reap(struct loader_cuda *c, bool wait)
{
	for (uint32_t i = 0; i < c->nxfer; i++) {
		int rc = xfer_poll(c, &c->xfers[i], wait, false);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A free copy record; when none is, waits for the oldest one handed out. */
static int xfer_get(struct loader_cuda *c, struct xfer **out)
{
	struct xfer *old = NULL;
	for (uint32_t i = 0; i < c->nxfer; i++) {
		struct xfer *x = &c->xfers[i];
		int rc = xfer_poll(c, x, false, false);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			*out = x;
			return 0;
		}
		if (!x->queued && (!old || x->seq < old->seq))
			old = x;
	}
	assert(old); /* at most nbuf < nxfer are queued */
	int rc = xfer_poll(c, old, true, true);
	if (rc < 0)
		return rc;
	*out = old;
	return 0;
}

/* The loader's next batch.  When every ring slot waits for a copy out of it,
 * waits for the oldest copy, which gives its slot back. */
static int next_host(struct loader_cuda *c, const struct wharf_batch **hb)
{
	for (;;) {
		int rc = wharf_loader_next(c->l, hb);
		if (rc == -EINTR) /* the device path keeps its old contract */
			continue;
		if (rc != -ENOBUFS)
			return rc;
		struct xfer *old = NULL;
		for (uint32_t i = 0; i < c->nxfer; i++)
			if (c->xfers[i].host &&
			    (!old || c->xfers[i].seq < old->seq))
				old = &c->xfers[i];
		if (!old)
			return rc;
		rc = xfer_poll(c, old, true, false);
		if (rc < 0)
			return rc;
	}
}

/* Enqueues the copy of host batch hb into b on the copy stream.  The host
 * waits for nothing here but, without a registered ring, the last copy out
 * of b's staging buffer. */
static int issue(struct loader_cuda *c, struct dbuf *b,
		 const struct wharf_batch *hb)
{
	struct wharf_loader *l = c->l;
	uint32_t n = hb->count;
	size_t lab = (size_t)n * sizeof(int32_t);
	size_t offs = hb->offsets ? ((size_t)n + 1) * sizeof(uint64_t) : 0;
	const char *data = hb->data;
	const char *labels = (const char *)hb->labels;
	const char *offsets = (const char *)hb->offsets;
	struct xfer *x;
	int rc;

	assert(b->state == BUF_FREE);
	if (!c->registered && b->x && b->x->buf == b &&
	    (rc = xfer_poll(c, b->x, true, false)) < 0)
		return rc;
	if ((rc = xfer_get(c, &x)) < 0)
		return rc;
	if (b->release_pending) {
		CU(cudaStreamWaitEvent(c->copy, b->released, 0),
		   "cudaStreamWaitEvent");
		b->release_pending = false;
	}
	if (!c->registered) {
		uint64_t t0 = now_ns();
		memcpy(b->stage, data, hb->bytes);
		memcpy(b->stage + c->off_labels, labels, lab);
		if (offs)
			memcpy(b->stage + c->off_offsets, offsets, offs);
		c->stats.staged_ns += now_ns() - t0;
		data = b->stage;
		labels = b->stage + c->off_labels;
		offsets = b->stage + c->off_offsets;
	}
	CU(cudaEventRecord(x->start, c->copy), "cudaEventRecord");
	CU(cudaMemcpyAsync(b->dev, data, hb->bytes, cudaMemcpyHostToDevice,
			   c->copy),
	   "cudaMemcpyAsync of a batch");
	CU(cudaMemcpyAsync(b->dev + c->off_labels, labels, lab,
			   cudaMemcpyHostToDevice, c->copy),
	   "cudaMemcpyAsync of labels");
	if (offs)
		CU(cudaMemcpyAsync(b->dev + c->off_offsets, offsets, offs,
				   cudaMemcpyHostToDevice, c->copy),
		   "cudaMemcpyAsync of offsets");
	CU(cudaEventRecord(x->done, c->copy), "cudaEventRecord");
	x->busy = x->queued = true;
	x->need_recorded = false;
	x->buf = b;
	x->seq = ++c->seq;
	b->x = x;
	c->stats.bytes += hb->bytes + lab + offs;

	memcpy(b->samples, hb->samples, (size_t)n * sizeof(uint64_t));
	memcpy(b->labels, hb->labels, lab);
	struct wharf_device_batch *v = &b->views[queued_view(b)];
	v->epoch = hb->epoch;
	v->index = hb->index;
	v->sample_size = hb->sample_size;
	v->bytes = hb->bytes;
	v->data = b->dev;
	v->labels = (const int32_t *)(void *)(b->dev + c->off_labels);
	v->offsets =
	    offs ? (const uint64_t *)(void *)(b->dev + c->off_offsets) : NULL;
	v->samples = b->samples;
	v->host_labels = b->labels;
	v->count = n;
	v->skipped = hb->skipped;
	v->buffer = (uint32_t)(b - c->bufs);
	b->state = BUF_QUEUED;
	if (c->registered) {
		x->host = hb; /* given back once `done` completed */
	} else {
		rc = wharf_loader_release(l, hb);
		assert(rc == 0);
		(void)rc;
	}
	return 0;
}

/* next_device with the loader's device current. */
static int next_on_device(struct loader_cuda *c, cudaStream_t us,
			  const struct wharf_device_batch **out)
{
	int rc = reap(c, false);
	if (rc < 0)
		return rc;
	/* Read ahead into every free buffer: the batch handed out below is the
	 * oldest, the others copy while the caller computes on it. */
	while (!c->ended) {
		struct dbuf *b = NULL;
		for (uint32_t i = 0; i < c->nbuf && !b; i++)
			if (c->bufs[i].state == BUF_FREE)
				b = &c->bufs[i];
		if (!b)
			break;
		const struct wharf_batch *hb;
		rc = next_host(c, &hb);
		if (rc == WHARF_END) {
			c->ended = true;
			break;
		}
		if (rc < 0)
			return rc;
		if ((rc = issue(c, b, hb)) < 0)
			return rc;
	}
	struct dbuf *b = NULL;
	for (uint32_t i = 0; i < c->nbuf; i++)
		if (c->bufs[i].state == BUF_QUEUED &&
		    (!b || c->bufs[i].x->seq < b->x->seq))
			b = &c->bufs[i];
	if (!b) {
		if (c->ended)
			return WHARF_END;
		return error_set(-ENOBUFS, strdupf("all %u device buffers hold "
						   "batches not released yet: "
						   "release some (or raise "
						   "buffers)",
						   c->nbuf));
	}
	CU(cudaEventRecord(b->x->need, us), "cudaEventRecord on the stream");
	CU(cudaStreamWaitEvent(us, b->x->done, 0), "cudaStreamWaitEvent");
	b->x->need_recorded = true;
	b->x->queued = false;
	b->state = BUF_HELD;
	b->generation++; /* the queued view is now this hand-out's */
	struct wharf_device_batch *v = &b->views[b->generation % 2];
	v->generation = b->generation;
	c->stats.batches++;
	*out = v;
	return 0;
}

int wharf_loader_next_device(wharf_loader *l, void *stream,
			     const struct wharf_device_batch **out)
{
	struct loader_cuda *c = l->cuda;
	uint64_t t0 = now_ns();
	int prev;

	*out = NULL;
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!c)
		return not_enabled();
	if (l->failed)
		return error_set(l->fail_rc, strdupf("%s", l->error));
	cudaError_t e = dev_enter(c, &prev);
	if (e != cudaSuccess)
		return cuda_fail(e, "selecting the loader's device");
	rc = next_on_device(c, (cudaStream_t)stream, out);
	dev_leave(c, prev);
	c->stats.wait_ns += now_ns() - t0;
	return rc;
}

int wharf_loader_release_device(wharf_loader *l,
				const struct wharf_device_batch *db,
				void *stream)
{
	struct loader_cuda *c = l->cuda;
	int prev;
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!c)
		return not_enabled();
	if (!db || db->buffer >= c->nbuf || db->data != c->bufs[db->buffer].dev)
		return error_set(-EINVAL,
				 strdupf("release_device: not a batch this "
					 "loader handed out"));
	/* By generation, as wharf_loader_release: a copy of the view names
	 * the hand-out it ends. */
	struct dbuf *b = &c->bufs[db->buffer];
	if (b->state != BUF_HELD || b->generation != db->generation)
		return loader_refuse_stale("release_device", "buffer",
					   db->index, db->epoch, db->buffer,
					   db->generation);
	cudaError_t e = dev_enter(c, &prev);
	if (e == cudaSuccess)
		e = cudaEventRecord(b->released, (cudaStream_t)stream);
	dev_leave(c, prev);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaEventRecord on the release stream");
	b->release_pending = true;
	b->state = BUF_FREE;
	return 0;
}

/* Drops the batches read ahead (QUEUED): waits for their copies, gives their
 * slots back.  Held batches stay. */
static int drop_ahead(struct loader_cuda *c)
{
	int prev;
	cudaError_t e = dev_enter(c, &prev);
	if (e != cudaSuccess)
		return cuda_fail(e, "selecting the loader's device");
	for (uint32_t i = 0; i < c->nbuf; i++) {
		struct dbuf *b = &c->bufs[i];
		if (b->state != BUF_QUEUED)
			continue;
		b->state = BUF_FREE;
		b->x->queued = false;
	}
	c->ended = false;
	int rc = reap(c, true);
	dev_leave(c, prev);
	return rc;
}

int wharf_loader_device_set_epoch(wharf_loader *l, uint64_t epoch)
{
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!l->cuda)
		return not_enabled();
	rc = drop_ahead(l->cuda);
	return rc < 0 ? rc : wharf_loader_set_epoch(l, epoch);
}

int wharf_loader_device_state_restore(wharf_loader *l,
				      const struct wharf_state *st)
{
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!l->cuda)
		return not_enabled();
	rc = drop_ahead(l->cuda);
	return rc < 0 ? rc : wharf_loader_state_restore(l, st);
}

/* Marks batch b of st's epoch as not returned. */
static int unmark(struct wharf_state *st, uint64_t b)
{
	if (b < st->position) {
		/* Move the window down to b: the batches between b and the
		 * old position were returned, the old position was not. */
		uint64_t shift = st->position - b;
		if (shift > 64 ||
		    (shift < 64 && (st->done_mask >> (64 - shift)) != 0) ||
		    (shift == 64 && st->done_mask))
			return -EOVERFLOW;
		uint64_t mask = shift < 64 ? st->done_mask << shift : 0;
		mask |= shift >= 2
			    ? (shift - 1 >= 64 ? UINT64_MAX
					       : (1ull << (shift - 1)) - 1)
			    : 0;
		st->done_mask = mask;
		st->position = b;
		return 0;
	}
	if (b == st->position)
		return 0;
	if (b - st->position - 1 < 64)
		st->done_mask &= ~(1ull << (b - st->position - 1));
	return 0;
}

int wharf_loader_device_state_save(wharf_loader *l, struct wharf_state *st)
{
	struct loader_cuda *c = l->cuda;
	if (!c)
		return not_enabled();
	int rc = wharf_loader_state_save(l, st);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < c->nbuf; i++) {
		const struct dbuf *b = &c->bufs[i];
		const struct wharf_device_batch *v = &b->views[queued_view(b)];
		if (b->state == BUF_QUEUED && v->epoch == st->epoch &&
		    unmark(st, v->index) < 0)
			return error_set(
			    -EOVERFLOW,
			    strdupf("state_save: batch %llu, read "
				    "ahead, lies more than 64 batches "
				    "behind those returned",
				    (unsigned long long)v->index));
	}
	return 0;
}

int wharf_loader_cuda_stats(const wharf_loader *l, struct wharf_cuda_stats *st)
{
	struct loader_cuda *c = l->cuda;
	if (loader_check_owner(l))
		return -EPERM;
	if (!c)
		return not_enabled();
	if (reap(c, false) < 0)
		return l->fail_rc;
	struct wharf_cuda_stats s = c->stats;
	s.overlap_ns = s.copy_ns - s.exposed_ns;
	uint32_t size = st->size < sizeof(s) ? st->size : (uint32_t)sizeof(s);
	memcpy(st, &s, size);
	st->size = size;
	return 0;
}

int cuda_copy_events(const struct wharf_loader *l, uint32_t buffer,
		     void **start, void **done)
{
	const struct loader_cuda *c = l->cuda;
	if (!c || buffer >= c->nbuf || !c->bufs[buffer].x)
		return -EINVAL;
	*start = c->bufs[buffer].x->start;
	*done = c->bufs[buffer].x->done;
	return 0;
}

/*
 * A one-thread kernel that spins on the global timer for `ns` ns.  PTX, which
 * the driver compiles for the GPU at hand on first use (and keeps in its
 * compute cache): it serves tests and benchmarks only, which load it before
 * they time anything, so JIT costs nothing measured, and one PTX for the
 * lowest target runs on every GPU this CUDA supports, today's and later
 * ones, with no nvcc in the build and no SASS per architecture to keep.
 */
static const char spin_ptx[] = ".version 7.0\n"
			       ".target sm_50\n"
			       ".address_size 64\n"
			       ".visible .entry wharf_spin(.param .u64 ns)\n"
			       "{\n"
			       "	.reg .u64 %n, %t0, %t1, %d;\n"
			       "	.reg .pred %p;\n"
			       "	ld.param.u64 %n, [ns];\n"
			       "	mov.u64 %t0, %globaltimer;\n"
			       "SPIN:\n"
			       "	mov.u64 %t1, %globaltimer;\n"
			       "	sub.u64 %d, %t1, %t0;\n"
			       "	setp.lt.u64 %p, %d, %n;\n"
			       "	@%p bra SPIN;\n"
			       "	ret;\n"
			       "}\n";

int cuda_spin(void *stream, uint64_t ns)
{
	static cudaLibrary_t lib;
	static cudaKernel_t kern;
	cudaError_t e;
	int rc = cudart_load();
	if (rc)
		return rc;
	if (!kern) {
		e = cudaLibraryLoadData(&lib, spin_ptx, NULL, NULL, 0, NULL,
					NULL, 0);
		if (e != cudaSuccess)
			return cuda_fail(e, "loading the spin kernel's PTX");
		e = cudaLibraryGetKernel(&kern, lib, "wharf_spin");
		if (e != cudaSuccess)
			return cuda_fail(e, "cudaLibraryGetKernel");
	}
	void *args[] = {&ns};
	e = cudaLaunchKernel((const void *)kern, (dim3){1, 1, 1},
			     (dim3){1, 1, 1}, args, 0, (cudaStream_t)stream);
	if (e != cudaSuccess)
		return cuda_fail(e, "launching the spin kernel");
	return 0;
}

#endif /* HAVE_CUDA */
