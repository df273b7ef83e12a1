/*
 * index_build: building an index: from a directory, a list, fixed-size
 * records, or samples added one by one through the public builder; each
 * feeds the writer (index_write.c).  Reading an index is index.c's.
 *
 * Builders stream each array into its own unnamed temporary file next to the
 * output, so memory does not grow with the number of samples (the directory
 * builder alone holds the paths, in one blob, because it sorts them).
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "index.h"
#include "index_write.h"
#include "text.h"

/* ---- from a directory ---- */

struct pathset {
	char *blob;
	size_t len, cap;
	uint64_t *off;
	uint64_t *size;
	size_t n, ncap;
};

static int pathset_add(struct pathset *ps, const char *p, uint64_t size)
{
	size_t l = strlen(p) + 1;
	if (ps->len + l > ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 1 << 16;
		while (cap < ps->len + l)
			cap *= 2;
		char *b = realloc(ps->blob, cap);
		if (!b)
			return -ENOMEM;
		ps->blob = b;
		ps->cap = cap;
	}
	if (ps->n == ps->ncap) {
		size_t cap = ps->ncap ? ps->ncap * 2 : 1024;
		uint64_t *o = realloc(ps->off, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		ps->off = o;
		uint64_t *s = realloc(ps->size, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		ps->size = s;
		ps->ncap = cap;
	}
	memcpy(ps->blob + ps->len, p, l);
	ps->off[ps->n] = ps->len;
	ps->size[ps->n] = size;
	ps->n++;
	ps->len += l;
	return 0;
}

static void pathset_free(struct pathset *ps)
{
	free(ps->blob);
	free(ps->off);
	free(ps->size);
}

/* Walks dirfd (path rel below the root) adding every regular file. */
static int walk(int dirfd, const char *rel, struct pathset *ps,
		const char *root, char **err)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		int rc = -errno;
		close(dirfd);
		*err = strdupf("%s/%s: %s", root, rel, strerror(-rc));
		return rc;
	}
	int rc = 0;
	struct dirent *de;
	char path[PATH_MAX];
	while ((errno = 0, de = readdir(d))) {
		const char *nm = de->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		int n = rel[0] ? snprintf(path, sizeof(path), "%s/%s", rel, nm)
			       : snprintf(path, sizeof(path), "%s", nm);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			rc = -ENAMETOOLONG;
			*err =
			    strdupf("%s/%s/%s: path too long", root, rel, nm);
			break;
		}
		struct stat st;
		bool is_dir = de->d_type == DT_DIR;
		if (!is_dir) {
			if (fstatat(dirfd, nm, &st, 0)) {
				rc = -errno;
				*err = strdupf("%s/%s: %s", root, path,
					       strerror(-rc));
				break;
			}
			/* Directories behind symbolic links are not followed:
			 * a link loop would never end. */
			is_dir = S_ISDIR(st.st_mode) && de->d_type != DT_LNK;
			if (!is_dir && !S_ISREG(st.st_mode))
				continue;
		}
		if (is_dir) {
			int fd = openat(dirfd, nm,
					O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				rc = -errno;
				*err = strdupf("%s/%s: %s", root, path,
					       strerror(-rc));
				break;
			}
			rc = walk(fd, path, ps, root, err);
			if (rc)
				break;
			continue;
		}
		rc = pathset_add(ps, path, (uint64_t)st.st_size);
		if (rc) {
			*err = strdupf("%s: out of memory", root);
			break;
		}
	}
	if (!rc && errno) {
		rc = -errno;
		*err = strdupf("%s/%s: %s", root, rel, strerror(-rc));
	}
	closedir(d);
	return rc;
}

static int cmp_path(const void *a, const void *b, void *blob)
{
	const char *s = blob;
	return strcmp(s + *(const uint64_t *)a, s + *(const uint64_t *)b);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int wharf_index_build_dir(const char *dir, const char *out)
{
	if (!dir || !out)
		return error_set(-EINVAL, strdupf("wharf_index_build_dir: "
						  "NULL %s",
						  dir ? "out" : "dir"));
	struct pathset ps = {0};
	struct writer w;
	char *err = NULL, *root = NULL;
	char **top = NULL;
	uint64_t *order = NULL;
	size_t ntop = 0;
	int rc;

	memset(&w, 0, sizeof(w));
	root = realpath(dir, NULL);
	if (!root) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		return error_set(rc, err);
	}
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		goto out;
	}
	rc = walk(fd, "", &ps, root, &err);
	if (rc)
		goto out;
	/* Sort (a permutation of indices, so the sizes follow). */
	order = malloc((ps.n ? ps.n : 1) * sizeof(*order));
	if (!order) {
		rc = -ENOMEM;
		err = strdupf("%s: out of memory", dir);
		goto out;
	}
	memcpy(order, ps.off, ps.n * sizeof(*order));
	qsort_r(order, ps.n, sizeof(*order), cmp_path, ps.blob);
	/* Top-level subdirectories, sorted, give the labels. */
	DIR *d = opendir(root);
	if (!d) {
		rc = -errno;
		err = strdupf("%s: %s", dir, strerror(-rc));
		goto out;
	}
	struct dirent *de;
	size_t tcap = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' &&
		    (!de->d_name[1] ||
		     (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		struct stat st;
		if (de->d_type == DT_DIR ||
		    (de->d_type == DT_UNKNOWN &&
		     !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		     S_ISDIR(st.st_mode))) {
			if (ntop == tcap) {
				tcap = tcap ? tcap * 2 : 64;
				char **t = realloc(top, tcap * sizeof(*t));
				if (!t) {
					closedir(d);
					rc = -ENOMEM;
					goto out;
				}
				top = t;
			}
			top[ntop] = strdup(de->d_name);
			if (!top[ntop++]) {
				closedir(d);
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	closedir(d);
	if (ntop) /* top is NULL for a directory of files only */
		qsort(top, ntop, sizeof(*top), cmp_str);

	rc = writer_init(&w, out, root, &err);
	if (rc)
		goto out;
	/* Label of a file: the rank of its first path component among the
	 * sorted top-level directories (binary search, nothing allocated). */
	for (size_t i = 0; i < ps.n; i++) {
		const char *p = ps.blob + order[i];
		int32_t label = -1;
		const char *slash = strchr(p, '/');
		if (slash) {
			size_t lo = 0, hi = ntop, cl = (size_t)(slash - p);
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				int c = strncmp(top[mid], p, cl);
				if (!c && top[mid][cl])
					c = 1;
				if (c < 0)
					lo = mid + 1;
				else if (c > 0)
					hi = mid;
				else {
					label = (int32_t)mid;
					break;
				}
			}
		}
		/* Its size: ps.size is indexed like ps.off, whose entries
		 * increase, so the offset finds it by binary search. */
		size_t lo = 0, hi = ps.n;
		while (lo + 1 < hi) {
			size_t mid = (lo + hi) / 2;
			if (ps.off[mid] <= order[i])
				lo = mid;
			else
				hi = mid;
		}
		uint32_t id;
		rc = writer_file(&w, p, &id);
		if (!rc)
			rc = writer_sample(&w, id, 0, ps.size[lo], label);
		if (rc)
			goto out;
	}
	/* Every class directory counts, even an empty one (ImageFolder). */
	if (ntop && (int32_t)(ntop - 1) > w.max_label)
		w.max_label = (int32_t)(ntop - 1);
	w.classes = top;
	w.nclasses = ntop;
	rc = writer_finish(&w);
out:
	writer_free(&w);
	for (size_t i = 0; i < ntop; i++)
		free(top[i]);
	free(top);
	free(order);
	pathset_free(&ps);
	free(root);
	if (rc && !err)
		err = strdupf("index %s from %s: %s", out, dir, strerror(-rc));
	return rc ? error_set(rc, err) : 0;
}

/* ---- from a list ---- */

/* A list whose first line is this holds "PATH OFFSET LENGTH [LABEL]" lines;
 * without it lines are "PATH [LABEL]" as they always were, so an old list
 * means what it meant (its '#' lines were comments, and still are). */
#define LIST_OFFSETS "#wharf-list offsets"

/* An optional '-' and decimal digits, nothing else. */
static bool is_int(const char *s)
{
	if (*s == '-')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (*end || errno)
		return false;
	*v = x;
	return true;
}

static bool parse_label(const char *s, int32_t *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (end == s || *end || errno || x < -1 || x > INT32_MAX)
		return false;
	*v = (int32_t)x;
	return true;
}

/* "PATH [LABEL]": cuts the label off p when the last word is one. */
static int32_t parse_plain_line(char *p)
{
	int32_t label = -1;
	char *sp = strrchr(p, ' '), *tab = strrchr(p, '\t');
	if (tab && (!sp || tab > sp))
		sp = tab;
	if (sp && parse_label(sp + 1, &label)) {
		while (sp > p && (sp[-1] == ' ' || sp[-1] == '\t'))
			sp--;
		*sp = '\0';
	}
	return label;
}

/*
 * "PATH OFFSET LENGTH [LABEL]" (p trimmed, not blank): with a tab in the
 * line the fields are split at tabs only, so a path may hold spaces and end
 * in a number; otherwise the last two or three words are the numbers and a
 * path that itself ends in a number word would be read wrong, so four
 * numeric words are refused as ambiguous.  Cuts the path off in place.
 * Returns NULL, or why the line is refused.
 */
static const char *parse_offsets_line(char *p, uint64_t *off, uint64_t *len,
				      int32_t *label)
{
	char *f[4]; /* the number fields, last first */
	int k = 0;
	if (strchr(p, '\t')) {
		char *fields[5], *s = p;
		int n = 0;
		while (s && n < 5) {
			fields[n++] = s;
			s = strchr(s, '\t');
			if (s)
				*s++ = '\0';
		}
		if (s || n < 3 || n > 4)
			return "expected "
			       "PATH<TAB>OFFSET<TAB>LENGTH[<TAB>LABEL]";
		for (int i = n - 1; i >= 1; i--)
			f[k++] = fields[i];
	} else {
		char *end = p + strlen(p);
		while (k < 4) {
			char *sp = end;
			while (sp > p && sp[-1] != ' ')
				sp--;
			if (sp == p || !is_int(sp))
				break;
			f[k++] = sp;
			while (sp > p && sp[-1] == ' ')
				sp--;
			*sp = '\0';
			end = sp;
		}
		if (k == 4)
			return "ambiguous: four numbers after the path (a path "
			       "ending in a number needs tabs between the "
			       "fields)";
		if (k < 2)
			return "expected PATH OFFSET LENGTH [LABEL]";
	}
	const char *o = f[k - 1], *l = f[k - 2];
	if (!parse_u64(o, off))
		return "the offset is not a number >= 0";
	if (!parse_u64(l, len))
		return "the length is not a number >= 0";
	*label = -1;
	if (k == 3 && !parse_label(f[0], label))
		return "the label is not a number from -1 to 2147483647";
	if (!*p)
		return "no path";
	return NULL;
}

/* Whether a plain line's path ends in two number words, as an offset line
 * would: the hint when such a path is missing. */
static bool looks_offset(const char *path)
{
	int words = 0;
	const char *end = path + strlen(path);
	while (words < 2) {
		const char *sp = end;
		while (sp > path && sp[-1] != ' ' && sp[-1] != '\t')
			sp--;
		if (sp == path || sp == end)
			return false;
		for (const char *c = sp; c < end; c++)
			if (*c < '0' || *c > '9')
				return false;
		words++;
		end = sp;
		while (end > path && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
	}
	return true;
}

int wharf_index_build_list(const char *list, int stat_files, const char *out)
{
	if (!list || !out)
		return error_set(-EINVAL, strdupf("wharf_index_build_list: "
						  "NULL %s",
						  list ? "out" : "list"));
	struct writer w;
	char *err = NULL, *root = NULL, *line = NULL;
	size_t cap = 0;
	uint64_t lineno = 0, size = 0;
	bool offsets = false;
	FILE *in = NULL;
	int rc;

	memset(&w, 0, sizeof(w));
	in = fopen(list, "re");
	if (!in) {
		rc = -errno;
		err = strdupf("%s: %s", list, strerror(-rc));
		goto out;
	}
	char *ldir = index_dir_of(list);
	root = ldir ? realpath(ldir, NULL) : NULL;
	free(ldir);
	if (!root) {
		rc = -errno;
		err = strdupf("%s: directory: %s", list, strerror(-rc));
		goto out;
	}
	rc = writer_init(&w, out, root, &err);
	if (rc)
		goto out;
	ssize_t n;
	while ((n = getline(&line, &cap, in)) >= 0) {
		lineno++;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' ||
				 line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		if (lineno == 1 && !strcmp(line, LIST_OFFSETS)) {
			offsets = true;
			continue;
		}
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		int32_t label = -1;
		uint64_t off = 0, len = WHARF_LENGTH_UNKNOWN;
		if (offsets) {
			const char *why =
			    parse_offsets_line(p, &off, &len, &label);
			if (why) {
				rc = -EINVAL;
				err = strdupf("%s:%llu: %s", list,
					      (unsigned long long)lineno, why);
				goto out;
			}
		} else {
			label = parse_plain_line(p);
		}
		uint32_t id;
		int added = 1;
		rc = offsets ? writer_file_once(&w, p, &id, &added)
			     : writer_file(&w, p, &id);
		if (rc)
			goto out;
		if (stat_files && added) {
			struct stat st;
			char full[PATH_MAX];
			int fl = p[0] == '/'
				     ? snprintf(full, sizeof(full), "%s", p)
				     : snprintf(full, sizeof(full), "%s/%s",
						root, p);
			if (fl < 0 || (size_t)fl >= sizeof(full)) {
				rc = -ENAMETOOLONG;
				err = strdupf("%s:%llu: path too long", list,
					      (unsigned long long)lineno);
				goto out;
			}
			if (stat(full, &st)) {
				rc = -errno;
				err = strdupf("%s:%llu: %s: %s%s", list,
					      (unsigned long long)lineno, full,
					      strerror(-rc),
					      !offsets && looks_offset(p)
						  ? " (for PATH OFFSET LENGTH "
						    "lines, make the list's "
						    "first line \"" LIST_OFFSETS
						    "\")"
						  : "");
				goto out;
			}
			size = (uint64_t)st.st_size;
		}
		if (stat_files && !offsets)
			len = size;
		if (stat_files && offsets && (off > size || len > size - off)) {
			rc = -ERANGE;
			err =
			    strdupf("%s:%llu: %s: bytes %llu to %llu are past "
				    "its end (%llu bytes)",
				    list, (unsigned long long)lineno, p,
				    (unsigned long long)off,
				    (unsigned long long)(off + len),
				    (unsigned long long)size);
			goto out;
		}
		rc = writer_sample(&w, id, off, len, label);
		if (rc)
			goto out;
	}
	if (ferror(in)) {
		rc = -EIO;
		err = strdupf("%s: read error", list);
		goto out;
	}
	rc = writer_finish(&w);
out:
	writer_free(&w);
	free(line);
	free(root);
	if (in)
		fclose(in);
	return rc ? error_set(rc, err) : 0;
}

/* ---- fixed-size records ---- */

int wharf_index_build_records(uint64_t record, const char *const *files,
			      size_t nfiles, const char *out)
{
	if ((!files && nfiles) || !out)
		return error_set(-EINVAL, strdupf("wharf_index_build_records: "
						  "NULL %s",
						  out ? "files" : "out"));
	struct writer w;
	char *err = NULL;
	char cwd[PATH_MAX];
	int rc;

	memset(&w, 0, sizeof(w));
	if (record == 0) {
		err = strdupf("index %s: record size must be > 0", out);
		return error_set(-EINVAL, err);
	}
	if (!getcwd(cwd, sizeof(cwd))) {
		rc = -errno;
		err = strdupf("getcwd: %s", strerror(-rc));
		return error_set(rc, err);
	}
	rc = writer_init(&w, out, cwd, &err);
	if (rc)
		goto out;
	for (size_t i = 0; i < nfiles; i++) {
		struct stat st;
		if (stat(files[i], &st)) {
			rc = -errno;
			err = strdupf("%s: %s", files[i], strerror(-rc));
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			rc = -EINVAL;
			err = strdupf("%s: not a regular file", files[i]);
			goto out;
		}
		uint32_t id;
		rc = writer_file(&w, files[i], &id);
		if (rc)
			goto out;
		uint64_t n = (uint64_t)st.st_size / record;
		for (uint64_t k = 0; k < n; k++) {
			rc = writer_sample(&w, id, k * record, record, -1);
			if (rc)
				goto out;
		}
	}
	rc = writer_finish(&w);
out:
	writer_free(&w);
	return rc ? error_set(rc, err) : 0;
}

/* ---- the public builder ---- */

struct wharf_index_builder {
	struct writer w;
	char *out;
	char *err; /* where the writer leaves its messages */
	int rc;	   /* the first write error: sticky, finish returns it */
	bool done;
};

int wharf_index_builder_new(const char *out, const char *root,
			    wharf_index_builder **b)
{
	if (!b)
		return error_set(-EINVAL, strdupf("wharf_index_builder_new: "
						  "NULL builder pointer"));
	char *err = NULL;
	*b = NULL;
	if (!out || !*out)
		return error_set(-EINVAL, strdupf("index builder: no output "
						  "path"));
	char *real = realpath(root ? root : ".", NULL);
	if (!real) {
		int rc = -errno;
		return error_set(rc, strdupf("index %s: root %s: %s", out,
					     root ? root : ".", strerror(-rc)));
	}
	struct wharf_index_builder *nb = calloc(1, sizeof(*nb));
	char *o = strdup(out);
	if (!nb || !o) {
		free(nb);
		free(o);
		free(real);
		return error_set(-ENOMEM,
				 strdupf("index %s: out of memory", out));
	}
	nb->out = o;
	int rc = writer_init(&nb->w, nb->out, real, &err);
	free(real);
	if (rc) {
		writer_free(&nb->w);
		free(nb->out);
		free(nb);
		return error_set(rc, err);
	}
	nb->w.err = &nb->err;
	*b = nb;
	return 0;
}

/* A write failed: every later call fails too (the index would miss
 * samples).  Hands the writer's message to wharf_last_error(). */
static int builder_failed(struct wharf_index_builder *b, int rc)
{
	char *msg = b->err;
	b->rc = rc;
	b->err = NULL;
	return error_set(rc, msg);
}

/* A call on a builder that failed or finished. */
static int builder_spent(const struct wharf_index_builder *b)
{
	return error_set(
	    b->rc ? b->rc : -EINVAL,
	    strdupf("index %s: %s", b->out,
		    b->rc ? "an earlier write failed" : "already finished"));
}

int wharf_index_builder_add(wharf_index_builder *b, const char *path,
			    uint64_t offset, uint64_t length, int32_t label)
{
	if (!b)
		return error_set(-EINVAL, strdupf("wharf_index_builder_add: "
						  "NULL builder"));
	if (b->rc || b->done)
		return builder_spent(b);
	if (!path || !*path)
		return error_set(
		    -EINVAL, strdupf("index %s: sample %llu: "
				     "empty path",
				     b->out, (unsigned long long)b->w.count));
	if (label < -1)
		return error_set(-EINVAL,
				 strdupf("index %s: sample %llu: label %d "
					 "(use -1 for none)",
					 b->out, (unsigned long long)b->w.count,
					 (int)label));
	if (length != WHARF_LENGTH_UNKNOWN && offset > UINT64_MAX - length)
		return error_set(-EOVERFLOW,
				 strdupf("index %s: sample %llu: offset + "
					 "length overflows",
					 b->out,
					 (unsigned long long)b->w.count));
	uint32_t id;
	int added;
	int rc = writer_file_once(&b->w, path, &id, &added);
	if (!rc)
		rc = writer_sample(&b->w, id, offset, length, label);
	return rc ? builder_failed(b, rc) : 0;
}

int wharf_index_builder_field(wharf_index_builder *b, const char *ext,
			      uint64_t offset, uint64_t length)
{
	if (!b)
		return error_set(-EINVAL, strdupf("wharf_index_builder_field: "
						  "NULL builder"));
	struct writer *w = &b->w;
	if (b->rc || b->done)
		return builder_spent(b);
	if (!w->count)
		return error_set(-EINVAL,
				 strdupf("index %s: a field before any sample "
					 "(add the sample first)",
					 b->out));
	const unsigned long long at = w->count - 1;
	if (!ext || !*ext)
		return error_set(-EINVAL,
				 strdupf("index %s: sample %llu: a field "
					 "without a name",
					 b->out, at));
	if (offset > UINT64_MAX - length ||
	    (w->last_len != WHARF_LENGTH_UNKNOWN &&
	     (offset < w->last_off ||
	      offset + length > w->last_off + w->last_len)))
		return error_set(-ERANGE,
				 strdupf("index %s: sample %llu: field %s "
					 "(bytes %llu + %llu) lies outside "
					 "the sample (bytes %llu + %llu)",
					 b->out, at, ext,
					 (unsigned long long)offset,
					 (unsigned long long)length,
					 (unsigned long long)w->last_off,
					 (unsigned long long)w->last_len));
	for (size_t k = 0; k < w->ncur; k++)
		if (!strcmp(w->names.name[w->cur[k]], ext))
			return error_set(-EEXIST,
					 strdupf("index %s: sample %llu has "
						 "field %s twice",
						 b->out, at, ext));
	int rc = writer_field(w, ext, offset, length);
	return rc ? builder_failed(b, rc) : 0;
}

int wharf_index_builder_finish(wharf_index_builder *b)
{
	if (!b)
		return error_set(-EINVAL, strdupf("wharf_index_builder_finish: "
						  "NULL builder"));
	if (b->rc || b->done)
		return builder_spent(b);
	b->done = true;
	int rc = writer_finish(&b->w);
	return rc ? builder_failed(b, rc) : 0;
}

void wharf_index_builder_free(wharf_index_builder *b)
{
	if (!b)
		return;
	writer_free(&b->w);
	free(b->err);
	free(b->out);
	free(b);
}

