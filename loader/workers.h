#ifndef WHARF_LOADER_WORKERS_H
#define WHARF_LOADER_WORKERS_H
/*
 * Workers: forked, persistent processes that fill ring slots.  Each worker
 * has a task pipe (caller -> worker: which slot to fill) and a done pipe
 * (worker -> caller: slot filled; EOF when the worker dies).  A worker sets
 * up its signals first, dies with the caller's process (a thread that sees
 * the task channel close, PR_SET_PDEATHSIG where the caller's main thread
 * forked it, and a getppid() check), closes the other workers' pipe ends,
 * runs worker_init, then serves tasks until told to exit or the pipe
 * closes.
 *
 * workers_fill() is the reading code itself, also run in the caller when
 * there are no workers.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <wharf/loader.h>

struct index;
struct ring;

/* What a fill needs; copied into each worker by fork. */
struct fill_ctx {
	const struct index *idx;
	const struct ring *ring;
	uint64_t sample_size; /* 0: variable-size */
	bool skip_bad;
	uint64_t seed; /* the options' seed: sample transforms' randomness */
	uint32_t shift_step; /* moving windows: wharf_options.shift_step */
	/* wharf_options.field resolved (index_field_want), or NULL: read
	 * the whole sample. */
	const bool *field_want;
	wharf_sample_fn sample_fn;
	wharf_batch_fn batch_fn;
	void *user;
	/* Private to the process that fills. */
	char *scratch; /* transform input, grown to the largest sample seen */
	uint64_t scratch_cap;
	struct fd_cache *fds;
};

/* Per-process state for fills (the fd cache, the scratch buffer).
 * in_worker: the process is a worker of ours (it may map files). */
int fill_init(struct fill_ctx *c, bool in_worker)
    __attribute__((warn_unused_result));
void fill_fini(struct fill_ctx *c);

/* Reads and transforms the batch whose ids and labels the caller put in
 * slot s (hdr->count, samples, labels).  The result and any error go into
 * the slot header. */
void workers_fill(struct fill_ctx *c, uint32_t s, uint32_t worker);

struct worker {
	pid_t pid;
	int task_fd;	 /* caller's write end */
	int done_fd;	 /* caller's read end */
	uint32_t queued; /* tasks sent, not reported done */
	uint32_t *fifo;	 /* slots in the order sent (prefetch entries) */
	uint32_t fifo_head;
	bool dead;
};

struct workers {
	struct worker *w;
	uint32_t n;
	uint32_t depth; /* fifo size */
};

/* Forks n workers.  Each runs init (worker_init) and reports; returns once
 * all reported. -errno with *err (naming the worker) on failure, nothing
 * left running. */
int workers_start(struct workers *ws, uint32_t n, uint32_t depth,
		  struct fill_ctx *ctx, wharf_worker_init_fn init, void *user,
		  char **err) __attribute__((warn_unused_result));

/* Sends slot s to worker i.  When it is gone: -EPIPE if it had batches
 * queued (workers_wait reports it, with the batch), else -ECHILD, and it
 * is reaped and *err says how it ended (the caller frees it). */
int workers_send(struct workers *ws, uint32_t i, uint32_t s, char **err)
    __attribute__((warn_unused_result));

/*
 * Waits up to timeout_ms (-1: forever) for one worker to report.
 * @return 1 and *worker, *slot set for a slot done; 0 on timeout;
 *         -ECHILD when a worker died (*worker set, *err describes how, with
 *         the slot it held in *slot or UINT32_MAX); -EINTR when a signal
 *         came first; other -errno.
 */
int workers_wait(struct workers *ws, int timeout_ms, uint32_t *worker,
		 uint32_t *slot, char **err)
    __attribute__((warn_unused_result));

/* The slot worker i is filling now (the oldest it was sent and has not
 * reported, stale or not), or UINT32_MAX when it has none. */
uint32_t workers_current(const struct workers *ws, uint32_t i);

/* fd (open in the caller, -1: none) is no worker's business, as a wharf
 * mount's hints file: every worker forked while it is listed closes it
 * first, so that workers, ours or another loader's, never hold the mount
 * busy past the caller's close of it.  workers_include_fd unlists it:
 * call it before the close (the number may be reused). */
void workers_exclude_fd(int fd);
void workers_include_fd(int fd);

/* Stops and reaps every worker (exit request, SIGTERM, SIGKILL). */
void workers_stop(struct workers *ws);

/* In a process forked from the workers' parent: closes this process's
 * copies of the channels and frees the table, and nothing else (the
 * workers are the parent's, still at work). */
void workers_forget(struct workers *ws);

#endif
