#ifndef WHARF_LOADER_HINTS_H
#define WHARF_LOADER_HINTS_H
/*
 * Read-order hints for a wharf mount: the loader knows which samples it
 * reads next, so it tells the filesystem, which fetches them ahead.  The
 * loader calls hints_send() from the caller's process when it dispatches
 * batches, for the batches a window ahead of the one being dispatched.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct index;
struct hints;

/* NULL (and costs nothing) unless the index's files lie on a wharf mount. */
struct hints *hints_new(const struct index *idx);
/* The fields the loader reads (index_field_want), so that each hint names
 * the field's bytes rather than the whole sample's.  h may be NULL. */
void hints_set_field(struct hints *h, const bool *want);
/* Tells the mount these samples will be read next, in this order. Never
 * blocks.  h may be NULL (no-op). */
void hints_send(struct hints *h, const uint64_t *samples, size_t n);
/* The mount's disk cache cap in bytes (its .wharf/stats
 * disk_cache.cap_bytes), or 0 when h is NULL or it cannot be read. */
uint64_t hints_cache_cap(const struct hints *h);
/* The hints file's descriptor (workers close it), or -1 for NULL. */
int hints_fd(const struct hints *h);
/* NULL is a no-op. */
void hints_free(struct hints *h);

#endif
