/*
 * The origin checksums on record (store.h): DIR/sums, one line an object,
 *     wharf-sum1 =SOURCE =PATH =VERSION SIZE MTIME CHUNK_SIZE ALGO:HEX
 * the strings percent-encoded after their '=' (so that none is empty or
 * holds a space).  Appended by the mount with one write(2) under
 * O_APPEND; read whole by `wharf cache verify`.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "listing.h"
#include "log.h"
#include "store_i.h"
#include "text.h"
#include "url.h"

#define SUMS_MAGIC "wharf-sum1"
/* A record file larger than this is not read (a million objects take
 * some 300 MB). */
#define SUMS_CAP (1ull << 30)

/* "=" and s percent-encoded at out; @return bytes written, -1 when the
 * room ran out. */
static int put_str(char *out, size_t cap, const char *s)
{
	int n;

	if (cap < 2)
		return -1;
	out[0] = '=';
	n = url_encode(s, true, out + 1, cap - 1);
	return n < 0 ? -1 : n + 1;
}

int store_sum_record(struct store *st, const struct store_sum *s)
{
	/* 3x for each encoded string (a path is at most 4 KiB) */
	const size_t cap =
	    3 * (strlen(s->source) + strlen(s->path) + strlen(s->version)) +
	    256;
	char *line = malloc(cap), path[PATH_MAX];
	size_t n;
	int fd, rc = 0, w;

	if (!line)
		return -ENOMEM;
	n = (size_t)snprintf(line, cap, "%s ", SUMS_MAGIC);
	w = put_str(line + n, cap - n, s->source);
	if (w >= 0) {
		n += (size_t)w;
		line[n++] = ' ';
		w = put_str(line + n, cap - n, s->path);
	}
	if (w >= 0) {
		n += (size_t)w;
		line[n++] = ' ';
		w = put_str(line + n, cap - n, s->version);
	}
	if (w >= 0) {
		n += (size_t)w;
		w = snprintf(line + n, cap - n,
			     " %" PRIu64 " %" PRId64 " %" PRIu32 " %s\n",
			     s->size, s->mtime, s->chunk_size, s->digest);
		if (w < 0 || (size_t)w >= cap - n)
			w = -1;
	}
	if (w < 0) {
		free(line);
		return -ENAMETOOLONG;
	}
	n += (size_t)w;
	snprintf(path, sizeof(path), "%s/%s", st->dir, CACHEDIR_SUMS);
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
		      O_NONBLOCK,
		  0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		const ssize_t wr = write(fd, line, n);

		if (wr < 0)
			rc = -errno;
		else if ((size_t)wr != n)
			rc = -EIO;
		close(fd);
	}
	free(line);
	return rc;
}

void store_sums_clear(struct store *st)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", st->dir, CACHEDIR_SUMS);
	if (unlink(path) && errno != ENOENT)
		log_warn("%s: cannot remove: %s", path, strerror(errno));
}

/* ---- checking what is on record ---- */

/* Reads the record whole, as the cache's files are opened: no link
 * followed, no FIFO waited on.  @return 0, -EINVAL (not a regular
 * file), -EFBIG, -errno. */
static int read_private(const char *path, char **text, size_t *len)
{
	struct stat sb;
	size_t got = 0;
	int fd = open(path, CHUNK_OPEN), rc = 0;

	*text = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb))
		rc = -errno;
	else if (!S_ISREG(sb.st_mode))
		rc = -EINVAL;
	else if ((uint64_t)sb.st_size > SUMS_CAP)
		rc = -EFBIG;
	else if (!(*text = malloc((size_t)sb.st_size + 1)))
		rc = -ENOMEM;
	while (!rc && got < (size_t)sb.st_size) {
		const ssize_t r =
		    read(fd, *text + got, (size_t)sb.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* shorter than it was: what came is enough */
		got += (size_t)r;
	}
	close(fd);
	if (rc) {
		free(*text);
		*text = NULL;
		return rc;
	}
	(*text)[got] = '\0';
	*len = got;
	return 0;
}

/* One line, parsed in place. */
struct rec {
	struct store_sum s;
	struct chunk_key key0; /* chunk 0's: names the object */
	size_t line;	       /* its place in the file */
};

/* Decodes "=ENC" in place.  @return the string, NULL when malformed. */
static char *take_str(char *tok)
{
	const size_t n = strlen(tok);
	int dl;

	if (tok[0] != '=')
		return NULL;
	if (n == 1)
		return tok + 1;
	dl = listing_url_decode(tok + 1, n - 1, tok + 1, n);
	return dl < 0 ? NULL : tok + 1;
}

/* Parses one NUL-terminated line.  @return 0, -EINVAL. */
static int parse_line(char *line, struct rec *r)
{
	char *tok[9], *save = NULL, *end;
	unsigned n = 0;
	struct checksum c;

	for (char *t = strtok_r(line, " ", &save); t && n < 9;
	     t = strtok_r(NULL, " ", &save))
		tok[n++] = t;
	if (n != 8 || strcmp(tok[0], SUMS_MAGIC))
		return -EINVAL;
	r->s.source = take_str(tok[1]);
	r->s.path = take_str(tok[2]);
	r->s.version = take_str(tok[3]);
	if (!r->s.source || !r->s.path || !r->s.version)
		return -EINVAL;
	errno = 0;
	r->s.size = strtoull(tok[4], &end, 10);
	if (errno || *end)
		return -EINVAL;
	r->s.mtime = strtoll(tok[5], &end, 10);
	if (errno || *end)
		return -EINVAL;
	r->s.chunk_size = (uint32_t)strtoul(tok[6], &end, 10);
	if (errno || *end || r->s.chunk_size == 0)
		return -EINVAL;
	r->s.digest = tok[7];
	if (checksum_parse(r->s.digest, &c))
		return -EINVAL;
	store_key(&r->key0, r->s.source, r->s.path, r->s.version, r->s.size,
		  r->s.mtime, r->s.chunk_size, 0);
	return 0;
}

/* The same object's lines together, the last first. */
static int by_key_last_first(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	const int c = memcmp(x->key0.b, y->key0.b, sizeof(x->key0.b));

	if (c)
		return c;
	return x->line < y->line ? 1 : x->line > y->line ? -1 : 0;
}

/* What a check of one object needs. */
struct checker {
	int chunks_fd; /* DIR/chunks */
	struct tctx t, *tp;
	void *buf; /* one chunk */
	size_t cap;
};

/* The chunk file of key, open; -ENOENT when absent. */
static int open_chunk(struct checker *k, const struct chunk_key *key,
		      const char *suffix)
{
	char hex[33], rel[64];
	int fd;

	store_key_hex(key, hex);
	snprintf(rel, sizeof(rel), "%.2s/%s%s", hex, hex, suffix);
	fd = openat(k->chunks_fd, rel, CHUNK_OPEN | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(k->chunks_fd, rel, CHUNK_OPEN);
	return fd < 0 ? -errno : fd;
}

/* Feeds the object's bytes from its pack (fd) into ctx. */
static int feed_pack(struct checker *k, int fd, const struct store_sum *s,
		     struct checksum_ctx *ctx, const char **why)
{
	for (uint64_t off = 0; off < s->size; off += s->chunk_size) {
		const size_t want = s->size - off < s->chunk_size
					? (size_t)(s->size - off)
					: s->chunk_size;

		if (chunkfile_pread(fd, k->buf, want, (off_t)off)) {
			*why = "the pack cannot be read whole";
			return -EIO;
		}
		checksum_feed(ctx, k->buf, want);
	}
	return 0;
}

/* Feeds the object's bytes from its chunk files into ctx. */
static int feed_chunks(struct checker *k, const struct store_sum *s,
		       struct checksum_ctx *ctx, const char **why)
{
	const uint64_t n = (s->size + s->chunk_size - 1) / s->chunk_size;

	for (uint64_t i = 0; i < n; i++) {
		const size_t want = i + 1 < n
					? s->chunk_size
					: (size_t)(s->size - i * s->chunk_size);
		struct chunk_key key;
		struct hdr h;
		int fd, rc;

		store_key(&key, s->source, s->path, s->version, s->size,
			  s->mtime, s->chunk_size, i);
		fd = open_chunk(k, &key, "");
		if (fd < 0)
			return fd == -ENOENT ? -ENOENT : -EIO;
		rc = chunkfile_read(fd, &key, &k->tp, k->buf, k->cap, &h, why,
				    NULL, NULL);
		close(fd);
		if (!rc && h.raw_len != want) {
			*why = "a chunk of the wrong length";
			rc = -EBADMSG;
		}
		/* A chunk bad by its own checksum: the walk of the chunk
		 * files says so; the object is not checked here. */
		if (rc)
			return rc == -EBADMSG ? -EIO : rc;
		checksum_feed(ctx, k->buf, want);
	}
	return 0;
}

/* Removes the object's chunk files and pack (a mismatch). */
static bool remove_object(struct checker *k, const struct store_sum *s)
{
	const uint64_t n = (s->size + s->chunk_size - 1) / s->chunk_size;
	bool any = false;

	for (uint64_t i = 0; i < n; i++) {
		char hex[33], rel[64];
		struct chunk_key key;

		store_key(&key, s->source, s->path, s->version, s->size,
			  s->mtime, s->chunk_size, i);
		store_key_hex(&key, hex);
		snprintf(rel, sizeof(rel), "%.2s/%s", hex, hex);
		any |= unlinkat(k->chunks_fd, rel, 0) == 0;
		if (i == 0) {
			/* a pack is named by chunk 0, in its fan-out dir */
			int fd;

			rel[2] = '\0';
			fd = openat(k->chunks_fd, rel, DIR_OPEN);
			if (fd >= 0) {
				any |= store_unlink_pack(fd, &key) == 0;
				close(fd);
			}
		}
	}
	return any;
}

/* Checks one object: c->state and the rest. */
static void check_one(struct checker *k, const struct rec *r,
		      struct store_sum_check *c, char *got)
{
	struct checksum want, have;
	struct checksum_ctx ctx;
	const char *why = NULL;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	c->sum = r->s;
	if (checksum_parse(r->s.digest, &want))
		abort(); /* parse_line checked it */
	if (k->cap < r->s.chunk_size) {
		void *p = realloc(k->buf, r->s.chunk_size);

		if (!p) {
			c->state = -ENOMEM;
			c->why = "out of memory";
			return;
		}
		k->buf = p;
		k->cap = r->s.chunk_size;
	}
	rc = checksum_begin(&ctx, want.algo);
	if (rc) {
		c->state = rc;
		c->why = strerror(-rc);
		return;
	}
	fd = r->s.size > r->s.chunk_size
		 ? open_chunk(k, &r->key0, PACK_DATA_SUFFIX)
		 : -ENOENT;
	if (fd >= 0) {
		rc = feed_pack(k, fd, &r->s, &ctx, &why);
		close(fd);
	} else {
		rc = feed_chunks(k, &r->s, &ctx, &why);
	}
	if (rc) {
		checksum_abort(&ctx);
		c->state = rc;
		c->why = why ? why : strerror(-rc);
		return;
	}
	checksum_end(&ctx, &have);
	if (checksum_equal(&want, &have))
		return;
	c->state = -EBADMSG;
	c->got = checksum_format(&have, got);
	c->removed = remove_object(k, &r->s);
}

int store_sums_verify(const char *dir, store_sum_fn fn, void *arg, char **err)
{
	char *path = strdupf("%s/%s", dir, CACHEDIR_SUMS), *text = NULL;
	char *chunkdir = strdupf("%s/" CACHEDIR_CHUNKS, dir);
	char got[CHECKSUM_TEXT_MAX];
	struct checker k = {.chunks_fd = -1};
	struct rec *v = NULL;
	size_t len = 0, n = 0, cap = 0, line = 0;
	int rc;

	rc = read_private(path, &text, &len);
	if (rc == -ENOENT) {
		rc = 0; /* nothing verified yet */
		goto out;
	}
	if (rc) {
		err_set(err, "%s: %s", path,
			rc == -EINVAL ? "not a regular file" : strerror(-rc));
		goto out;
	}
	for (char *p = text, *nl; p < text + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(text + len - p));
		if (!nl)
			break; /* a line being appended */
		*nl = '\0';
		line++;
		if (n == cap) {
			struct rec *nv;

			cap = cap ? cap * 2 : 256;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				err_set(err, "out of memory");
				goto out;
			}
			v = nv;
		}
		v[n].line = line;
		if (parse_line(p, &v[n])) {
			log_warn("%s line %zu: not a checksum record; skipped",
				 path, line);
			continue;
		}
		n++;
	}
	qsort(v, n, sizeof(*v), by_key_last_first);
	k.tp = &k.t;
	k.chunks_fd = open(chunkdir, DIR_OPEN);
	if (k.chunks_fd < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		if (rc)
			err_set(err, "%s: %s", chunkdir, strerror(-rc));
		goto out;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		struct store_sum_check c;

		if (i && !memcmp(v[i].key0.b, v[i - 1].key0.b, 16))
			continue; /* an older line of the same object */
		check_one(&k, &v[i], &c, got);
		rc = fn(&c, arg);
	}
out:
	if (k.chunks_fd >= 0)
		close(k.chunks_fd);
	chunkfile_codec_free(&k.t);
	free(k.buf);
	free(v);
	free(text);
	free(chunkdir);
	free(path);
	return rc;
}
