/*
 * Hint spans: each file's hints that no read has finished yet, oldest
 * first, so that a read says which hint it reached (struct pf_file.spans)
 * and the pool can drop hints a reader has passed (HINT_SLACK).  Apart
 * from read-ahead: its own bounds (SPANS_MAX) and its own memory.
 */
#include "config.h"

#include "read_i.h"

#include <stdlib.h>
#include <string.h>

/* Hint spans (see struct pf_file) remembered at most, over all files:
 * 24 bytes each, so 6 MiB live (arrays shrink as they drain).  A span no
 * read finishes (a file read only in part, or from the page cache) goes
 * when its file is touched again or its hint is found stale; a bound
 * keeps the rest in check. */
#define SPANS_MAX (1u << 18)

/* Under f->mu: moves the pending spans to the front of the array. */
static void spans_compact(struct pf_file *f)
{
	f->span_len -= f->span_head;
	memmove(f->spans, f->spans + f->span_head,
		f->span_len * sizeof(*f->spans));
	f->span_head = 0;
}

/* Under f->mu: drops the spans before i; frees the array once empty. */
static void spans_drop_before(struct pf_file *f, uint32_t i)
{
	__atomic_sub_fetch(f->spans_live, i - f->span_head, __ATOMIC_RELAXED);
	f->span_head = i;
	if (f->span_head == f->span_len) {
		free(f->spans);
		f->spans = NULL;
		f->span_head = f->span_len = f->span_cap = 0;
	} else if (f->span_cap > 16 &&
		   (f->span_len - f->span_head) * 4 < f->span_cap) {
		/* Mostly drained: give back half, so that a shard hinted
		 * thousands of times does not keep its peak. */
		struct hint_span *n;

		spans_compact(f);
		n = realloc(f->spans, f->span_cap / 2 * sizeof(*n));
		if (n) {
			f->spans = n;
			f->span_cap /= 2;
		}
	}
	__atomic_store_n(&f->pending, f->span_len - f->span_head,
			 __ATOMIC_RELAXED);
}

/* Under f->mu: drops the spans readers have passed by more than the
 * slack (rs: the newest hint reached). */
void spans_trim(struct pf_file *f, uint64_t rs)
{
	uint32_t i = f->span_head;

	while (i < f->span_len && f->spans[i].seq + HINT_SLACK < rs)
		i++;
	if (i != f->span_head)
		spans_drop_before(f, i);
}

/*
 * Numbers a hint over bytes [off, end) of f and remembers it; the number
 * is taken under f->mu so that the spans stay in hint order.  At most
 * HINT_CAP spans a file and SPANS_MAX in all: past that the hint is
 * numbered but not remembered (its reads reach an older hint or none:
 * staleness is a heuristic, the bytes are always right).
 * @return the hint's number.
 */
uint64_t spans_add(struct prefetch *pf, struct pf_file *f, uint64_t off,
		   uint64_t end)
{
	uint64_t seq;

	pthread_mutex_lock(&f->mu);
	seq = __atomic_add_fetch(&pf->hint_seq, 1, __ATOMIC_RELAXED);
	spans_trim(f, __atomic_load_n(&pf->read_seq, __ATOMIC_RELAXED));
	if (f->span_len == f->span_cap && f->span_head)
		spans_compact(f);
	if (f->span_len == f->span_cap && f->span_cap < HINT_CAP &&
	    __atomic_load_n(f->spans_live, __ATOMIC_RELAXED) < SPANS_MAX) {
		const uint32_t cap = f->span_cap ? f->span_cap * 2 : 1;
		struct hint_span *n = realloc(f->spans, cap * sizeof(*n));

		if (n) {
			f->spans = n;
			f->span_cap = cap;
		}
	}
	/* SPANS_MAX is a bound on memory, not exact: two files may both
	 * take the last place. */
	if (f->span_len < f->span_cap &&
	    __atomic_load_n(f->spans_live, __ATOMIC_RELAXED) < SPANS_MAX) {
		f->spans[f->span_len++] =
		    (struct hint_span){.seq = seq, .off = off, .end = end};
		__atomic_add_fetch(f->spans_live, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&f->pending, f->span_len - f->span_head,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->mu);
	return seq;
}

/*
 * Under f->mu.  A read of bytes [off, end) of f: the hint it reaches is
 * the oldest pending one whose bytes it touches (0: none).  A read that
 * gets to the end of that hint's bytes finishes it, and the older ones the
 * reader skipped go with it; a second read inside a hint (a record's
 * header, then its body) reaches the same hint again.  A scan of f's
 * pending spans, oldest first.
 */
uint64_t spans_reach(struct pf_file *f, uint64_t rs, uint64_t off,
		     uint64_t end)
{
	uint64_t seq = 0;

	spans_trim(f, rs);
	for (uint32_t i = f->span_head; i < f->span_len; i++) {
		const struct hint_span *sp = &f->spans[i];

		if (sp->off >= end || off >= sp->end)
			continue;
		seq = sp->seq;
		if (end >= sp->end)
			spans_drop_before(f, i + 1);
		break;
	}
	return seq;
}
