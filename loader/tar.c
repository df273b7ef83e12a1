/* Tar shards: member extents from headers alone (see tar.h). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tar.h"
#include "text.h"

#define BLOCK 512
#define ROUND_UP(n) (((n) + BLOCK - 1) & ~(uint64_t)(BLOCK - 1))

/* Header fields (offset, length), POSIX ustar. */
#define H_NAME_LEN 100
#define H_SIZE 124, 12
#define H_CHKSUM 148, 8
#define H_TYPE 156
#define H_MAGIC 257
#define H_PREFIX 345
#define H_PREFIX_LEN 155

/* A name set by an extended record, or unset. */
struct opt_name {
	bool set;
	char s[TAR_NAME_MAX + 1];
};

struct opt_size {
	bool set;
	uint64_t v;
};

struct walk {
	const char *shard;
	uint64_t size;
	tar_read_fn rd;
	void *rd_arg;
	char **err;
	uint8_t blk[BLOCK];
	/* For the next member: pax x and GNU L; for all later ones: pax g. */
	struct opt_name xpath, lpath, gpath;
	struct opt_size xsize, gsize;
	/* The next member is a GNU sparse file in pax form (GNU.sparse.*
	 * records): its data is a map and the stored parts, not its bytes. */
	bool xsparse;
	char name[TAR_NAME_MAX + 1];
};

int tar_pread(void *arg, uint64_t off, void *buf, size_t len)
{
	const int fd = *(const int *)arg;

	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than its size said */
		buf = (char *)buf + n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* *err = "SHARD: byte AT: what"; the one form of every message here. */
static void verr(char **err, const char *shard, uint64_t at, const char *fmt,
		 va_list ap) __attribute__((format(printf, 4, 0)));
static void verr(char **err, const char *shard, uint64_t at, const char *fmt,
		 va_list ap)
{
	char what[512];

	if (!err)
		return;
	vsnprintf(what, sizeof(what), fmt, ap);
	free(*err);
	*err =
	    strdupf("%s: byte %llu: %s", shard, (unsigned long long)at, what);
}

static int fail(struct walk *w, uint64_t at, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct walk *w, uint64_t at, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(w->err, w->shard, at, fmt, ap);
	va_end(ap);
	return rc;
}

/* A numeric field: octal (leading spaces, then digits ended by a space or
 * NUL; all blank reads 0) or GNU base-256 (first byte 0x80, big-endian).
 * -1 when malformed, negative or over 64 bits. */
static int parse_num(const uint8_t *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return -1; /* negative */
		v = f[0] & 0x3f;
		for (i = 1; i < n; i++) {
			if (v >> 56)
				return -1;
			v = v << 8 | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 61)
			return -1;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = v;
	return 0;
}

/* tar writes the sum of unsigned bytes; some old writers summed signed
 * chars, which GNU tar also accepts. */
static bool checksum_ok(const uint8_t *b)
{
	uint64_t stored;
	uint64_t u = 0;
	int64_t s = 0;

	if (parse_num(b + H_CHKSUM, &stored))
		return false;
	for (int i = 0; i < BLOCK; i++) {
		const uint8_t c = i >= 148 && i < 156 ? ' ' : b[i];

		u += c;
		s += (int8_t)c;
	}
	return stored == u || (s >= 0 && stored == (uint64_t)s);
}

static bool is_zero(const uint8_t *b)
{
	for (int i = 0; i < BLOCK; i++)
		if (b[i])
			return false;
	return true;
}

/* Reads an extended header's data (n bytes at off) into a fresh buffer
 * with a NUL after it. */
static int read_ext(struct walk *w, uint64_t hdr, uint64_t off, uint64_t n,
		    uint64_t max, char **out)
{
	char *buf;
	int rc;

	if (n > max)
		return fail(w, hdr, -EBADMSG,
			    "an extended header of %llu bytes (at most %llu "
			    "accepted): damaged?",
			    (unsigned long long)n, (unsigned long long)max);
	if (n > w->size - off)
		return fail(w, hdr, -EBADMSG,
			    "truncated: an extended header's %llu bytes run "
			    "past the end of the shard (%llu bytes)",
			    (unsigned long long)n, (unsigned long long)w->size);
	buf = malloc(n + 1);
	if (!buf)
		return fail(w, hdr, -ENOMEM, "out of memory");
	rc = w->rd(w->rd_arg, off, buf, n);
	if (rc) {
		free(buf);
		return fail(w, hdr, rc, "read failed: %s", strerror(-rc));
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

static int set_name(struct walk *w, uint64_t hdr, struct opt_name *o,
		    const char *v, size_t n)
{
	if (memchr(v, '\0', n))
		return fail(w, hdr, -EBADMSG, "a pax path with a NUL byte");
	if (n > TAR_NAME_MAX)
		return fail(w, hdr, -EBADMSG, "a name over %d bytes",
			    TAR_NAME_MAX);
	memcpy(o->s, v, n);
	o->s[n] = '\0';
	o->set = n > 0; /* an empty value unsets the keyword */
	return 0;
}

/* Decimal digits (n > 0) without overflow. */
static int parse_dec(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return 0;
}

/* pax records "LEN KEY=VALUE\n", LEN counting the whole record; path and
 * size are kept, the rest (times, owners, GNU sparse maps) ignored. */
static int parse_pax(struct walk *w, uint64_t hdr, const char *p, size_t n,
		     struct opt_name *path, struct opt_size *size)
{
	while (n > 0) {
		const char *sp = memchr(p, ' ', n < 24 ? n : 24);
		const char *key, *eq, *val;
		uint64_t len;
		size_t vlen;

		if (!sp || parse_dec(p, (size_t)(sp - p), &len) || len > n ||
		    len < (uint64_t)(sp - p) + 3 || p[len - 1] != '\n')
			return fail(w, hdr, -EBADMSG,
				    "a malformed pax record (\"LENGTH "
				    "KEY=VALUE\" expected)");
		key = sp + 1;
		eq = memchr(key, '=', (size_t)(p + len - 1 - key));
		if (!eq)
			return fail(w, hdr, -EBADMSG,
				    "a pax record without '='");
		val = eq + 1;
		vlen = (size_t)(p + len - 1 - val);
		if (eq - key == 4 && !memcmp(key, "path", 4)) {
			int rc = set_name(w, hdr, path, val, vlen);

			if (rc)
				return rc;
		} else if (eq - key > 11 && !memcmp(key, "GNU.sparse.", 11)) {
			if (path == &w->xpath)
				w->xsparse = true;
		} else if (eq - key == 4 && !memcmp(key, "size", 4)) {
			size->set = vlen > 0;
			if (vlen > 0 && parse_dec(val, vlen, &size->v))
				return fail(w, hdr, -EBADMSG,
					    "a pax size that is not a "
					    "decimal number of 64 bits");
		}
		p += len;
		n -= (size_t)len;
	}
	return 0;
}

/* The member's name from the header block alone. */
static void header_name(struct walk *w)
{
	const uint8_t *b = w->blk;
	size_t np = 0, nn = strnlen((const char *)b, H_NAME_LEN);

	/* Only POSIX ustar has a prefix; GNU keeps times there. */
	if (!memcmp(b + H_MAGIC, "ustar\0", 6))
		np = strnlen((const char *)b + H_PREFIX, H_PREFIX_LEN);
	if (np) {
		memcpy(w->name, b + H_PREFIX, np);
		w->name[np++] = '/';
	}
	memcpy(w->name + np, b, nn);
	w->name[np + nn] = '\0';
}

static const char *member_name(struct walk *w)
{
	if (w->xpath.set)
		return w->xpath.s;
	if (w->lpath.set)
		return w->lpath.s;
	if (w->gpath.set)
		return w->gpath.s;
	header_name(w);
	return w->name;
}

/* At a zero block at off: 0 when it ends the archive (a second zero block
 * or the shard's end follows), else damage. */
static int zero_block(struct walk *w, uint64_t off, bool pending)
{
	int rc;

	if (pending)
		return fail(w, off, -EBADMSG,
			    "the archive ends after an extended header, "
			    "before its member: truncated?");
	off += BLOCK;
	if (off == w->size)
		return 0;
	if (w->size - off < BLOCK)
		return fail(w, off, -EBADMSG,
			    "truncated: a partial block after a zero block");
	rc = w->rd(w->rd_arg, off, w->blk, BLOCK);
	if (rc)
		return fail(w, off, rc, "read failed: %s", strerror(-rc));
	if (is_zero(w->blk))
		return 0;
	return fail(w, off - BLOCK, -EBADMSG,
		    "a lone zero block before more headers: a damaged "
		    "archive (or several joined without tar -A)");
}

static bool has_no_data(uint8_t type)
{
	/* Links, devices, directories, FIFOs: their size field is not a
	 * data length (tar's readers skip nothing for them either). */
	return type >= '1' && type <= '6';
}

static int walk(struct walk *w, tar_member_fn cb, void *cb_arg)
{
	uint64_t off = 0;
	uint64_t first = UINT64_MAX; /* the member's first header block */

	for (;;) {
		struct tar_member m;
		uint64_t hsize, data, end;
		uint8_t type;
		char *ext = NULL;
		int rc;

		if (off == w->size) {
			if (first != UINT64_MAX)
				return zero_block(w, first, true);
			return 0; /* no trailer: accepted */
		}
		if (w->size - off < BLOCK)
			return fail(w, off, -EBADMSG,
				    "truncated: the shard ends %llu bytes "
				    "into a header",
				    (unsigned long long)(w->size - off));
		rc = w->rd(w->rd_arg, off, w->blk, BLOCK);
		if (rc)
			return fail(w, off, rc, "read failed: %s",
				    strerror(-rc));
		if (is_zero(w->blk))
			return zero_block(w, off, first != UINT64_MAX);
		if (!checksum_ok(w->blk))
			return fail(w, off, -EBADMSG,
				    "bad header checksum: not a tar archive, "
				    "or damaged there");
		if (parse_num(w->blk + H_SIZE, &hsize))
			return fail(w, off, -EBADMSG,
				    "the size field is not a number");
		if (first == UINT64_MAX)
			first = off;
		type = w->blk[H_TYPE];
		data = off + BLOCK;
		switch (type) {
		case 'L':
		case 'x':
		case 'g':
			rc = read_ext(w, off, data, hsize,
				      type == 'L' ? TAR_NAME_MAX : TAR_PAX_MAX,
				      &ext);
			if (rc)
				return rc;
			if (type == 'L')
				rc = set_name(w, off, &w->lpath, ext,
					      strlen(ext));
			else if (type == 'x')
				rc = parse_pax(w, off, ext, hsize, &w->xpath,
					       &w->xsize);
			else
				rc = parse_pax(w, off, ext, hsize, &w->gpath,
					       &w->gsize);
			free(ext);
			if (rc)
				return rc;
			if (type == 'g')
				first = UINT64_MAX; /* not a member's */
			break;
		case 'K': /* a long link target: not needed */
			break;
		default:
			m.size = w->xsize.set	? w->xsize.v
				 : w->gsize.set ? w->gsize.v
						: hsize;
			if (has_no_data(type))
				m.size = 0;
			m.name = member_name(w);
			m.header = first;
			m.offset = data;
			m.type = (type == '0' || type == '\0' || type == '7') &&
					 !w->xsparse
				     ? TAR_REGULAR
				     : TAR_OTHER;
			if (m.name[0] == '\0')
				return fail(w, first, -EBADMSG,
					    "a member with an empty name");
			if (m.size > w->size - data ||
			    ROUND_UP(m.size) > w->size - data)
				return fail(w, first, -EBADMSG,
					    "member %s: its %llu bytes at "
					    "byte %llu run past the end of the "
					    "shard (%llu bytes): truncated, or "
					    "a wrong size",
					    m.name, (unsigned long long)m.size,
					    (unsigned long long)data,
					    (unsigned long long)w->size);
			rc = cb(cb_arg, &m);
			if (rc)
				return rc;
			hsize = m.size;
			w->xpath.set = w->lpath.set = w->xsize.set = false;
			w->xsparse = false;
			first = UINT64_MAX;
			break;
		}
		/* The data of this block's entry, padded to a block. */
		if (hsize > w->size - data || ROUND_UP(hsize) > w->size - data)
			return fail(w, off, -EBADMSG,
				    "truncated: an entry's %llu bytes run past "
				    "the end of the shard (%llu bytes)",
				    (unsigned long long)hsize,
				    (unsigned long long)w->size);
		end = data + ROUND_UP(hsize);
		off = end;
	}
}

int tar_walk(const char *shard, uint64_t shard_size, tar_read_fn rd,
	     void *rd_arg, tar_member_fn cb, void *cb_arg, char **err)
{
	struct walk *w = calloc(1, sizeof(*w));
	int rc;

	if (!w) {
		if (err)
			*err = strdupf("%s: out of memory", shard);
		return -ENOMEM;
	}
	w->shard = shard;
	w->size = shard_size;
	w->rd = rd;
	w->rd_arg = rd_arg;
	w->err = err;
	rc = walk(w, cb, cb_arg);
	free(w);
	return rc;
}

long tar_wds_split(const char *path, const char **ext)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	const char *dot = strchr(base, '.');

	if (!dot || dot == base || dot[1] == '\0')
		return -1;
	*ext = dot + 1;
	return dot - path;
}

/* The keys already closed in this shard: an open-addressing set. */
struct keyset {
	char **slot;
	size_t cap, n; /* cap a power of two, n < cap / 2 */
};

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

/* The slot of key (n bytes) or the empty slot where it would go. */
static char **keyset_find(const struct keyset *k, const char *key, size_t n)
{
	size_t i = hash(key, n) & (k->cap - 1);

	while (k->slot[i] &&
	       (strlen(k->slot[i]) != n || memcmp(k->slot[i], key, n)))
		i = (i + 1) & (k->cap - 1);
	return &k->slot[i];
}

static int keyset_add(struct keyset *k, const char *key)
{
	char **s;

	if (2 * (k->n + 1) >= k->cap) {
		struct keyset g = {
		    calloc(k->cap ? 2 * k->cap : 64, sizeof(char *)),
		    k->cap ? 2 * k->cap : 64, k->n};

		if (!g.slot)
			return -ENOMEM;
		for (size_t i = 0; i < k->cap; i++)
			if (k->slot[i])
				*keyset_find(&g, k->slot[i],
					     strlen(k->slot[i])) = k->slot[i];
		free(k->slot);
		*k = g;
	}
	s = keyset_find(k, key, strlen(key));
	*s = strdup(key);
	if (!*s)
		return -ENOMEM;
	k->n++;
	return 0;
}

static void keyset_free(struct keyset *k)
{
	for (size_t i = 0; i < k->cap; i++)
		free(k->slot[i]);
	free(k->slot);
}

/* Fields per sample: WebDataset samples have a handful; the bound keeps a
 * hostile shard from growing one sample without end. */
#define WDS_FIELDS_MAX 4096

struct wds {
	const char *shard;
	char **err;
	tar_sample_fn cb;
	void *cb_arg;
	uint64_t skipped;
	struct keyset seen;
	bool open;
	struct tar_sample s;
	char key[TAR_NAME_MAX + 1];
	struct tar_field fields[WDS_FIELDS_MAX];
	/* The fields' names, NUL-separated; fields[i].ext points here. */
	char exts[TAR_NAME_MAX + WDS_FIELDS_MAX];
	size_t extlen;
};

static int wds_fail(struct wds *g, uint64_t at, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int wds_fail(struct wds *g, uint64_t at, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(g->err, g->shard, at, fmt, ap);
	va_end(ap);
	return rc;
}

static int wds_flush(struct wds *g)
{
	int rc;

	if (!g->open)
		return 0;
	g->open = false;
	rc = keyset_add(&g->seen, g->key);
	if (rc)
		return wds_fail(g, g->s.header, rc, "out of memory");
	g->s.key = g->key;
	g->s.fields = g->fields;
	return g->cb(g->cb_arg, &g->s);
}

static int wds_member(void *arg, const struct tar_member *m)
{
	struct wds *g = arg;
	const char *ext;
	long klen = m->type == TAR_REGULAR ? tar_wds_split(m->name, &ext) : -1;
	size_t elen;
	int rc;

	if (klen < 0) {
		g->skipped++;
		return 0;
	}
	if (!g->open || strlen(g->key) != (size_t)klen ||
	    memcmp(g->key, m->name, (size_t)klen)) {
		rc = wds_flush(g);
		if (rc)
			return rc;
		memcpy(g->key, m->name, (size_t)klen);
		g->key[klen] = '\0';
		if (g->seen.n && *keyset_find(&g->seen, g->key, (size_t)klen))
			return wds_fail(g, m->header, -EBADMSG,
					"key %s comes back after other keys "
					"(%s): a sample's members must be "
					"adjacent",
					g->key, m->name);
		g->open = true;
		g->s.header = m->header;
		g->s.nfields = 0;
		g->extlen = 0;
	}
	for (size_t i = 0; i < g->s.nfields; i++)
		if (!strcmp(g->fields[i].ext, ext))
			return wds_fail(g, m->header, -EBADMSG,
					"key %s has field %s twice", g->key,
					ext);
	elen = strlen(ext) + 1;
	if (g->s.nfields == WDS_FIELDS_MAX ||
	    elen > sizeof(g->exts) - g->extlen)
		return wds_fail(g, m->header, -EBADMSG,
				"key %s has too many fields (at %s)", g->key,
				ext);
	memcpy(g->exts + g->extlen, ext, elen);
	g->fields[g->s.nfields++] = (struct tar_field){
	    .ext = g->exts + g->extlen, .offset = m->offset, .size = m->size};
	g->extlen += elen;
	return 0;
}

int tar_wds_walk(const char *shard, uint64_t shard_size, tar_read_fn rd,
		 void *rd_arg, tar_sample_fn cb, void *cb_arg,
		 uint64_t *skipped, char **err)
{
	struct wds *g = calloc(1, sizeof(*g));
	int rc;

	if (!g) {
		if (err)
			*err = strdupf("%s: out of memory", shard);
		return -ENOMEM;
	}
	g->shard = shard;
	g->err = err;
	g->cb = cb;
	g->cb_arg = cb_arg;
	rc = tar_walk(shard, shard_size, rd, rd_arg, wds_member, g, err);
	/* The sample open at damage may have lost fields: not passed. */
	if (rc == 0)
		rc = wds_flush(g);
	if (skipped)
		*skipped = g->skipped;
	keyset_free(&g->seen);
	free(g);
	return rc;
}
