/*
 * `wharf index build|info`: builds a loader index from a directory, a list,
 * fixed-size records or tar shards, and describes one.  Everything is in
 * libwharf.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wharf/loader.h>

#include "cmd.h"
#include "jsonw.h"
#include "units.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: wharf index build (--dir DIR | --list FILE [--stat] |\n"
	    "                          --records SIZE FILE... |\n"
	    "                          --tar SHARD... | --tar-list FILE)\n"
	    "                          [--label-field EXT] [--tar-partial] "
	    "-o OUT\n"
	    "       wharf index info [--verify] [--json] INDEX\n\n"
	    "Builds or describes a libwharf loader index: one file of flat\n"
	    "arrays (file id, offset, length, label per sample) and paths.\n\n"
	    "build:\n"
	    "  --dir DIR        every regular file under DIR, sorted by "
	    "path; label =\n"
	    "                   index of its top-level subdirectory "
	    "(ImageFolder)\n"
	    "  --list FILE      one sample per line: PATH [LABEL]; "
	    "relative paths are\n"
	    "                   relative to FILE's directory; after a first\n"
	    "                   line \"#wharf-list offsets\": PATH OFFSET "
	    "LENGTH\n"
	    "                   [LABEL] (tabs between the fields allow a "
	    "path\n"
	    "                   that ends in a number)\n"
	    "  --stat           with --list: record each file's size "
	    "(else the loader\n"
	    "                   reads whole files and needs "
	    "--sample-bytes),\n"
	    "                   check offsets against it\n"
	    "  --records SIZE   each FILE cut into SIZE-byte samples "
	    "(K, M, G suffixes)\n"
	    "  --tar            WebDataset tar shards (files or quoted "
	    "globs): one\n"
	    "                   sample per key, its members as fields "
	    "(reads headers only)\n"
	    "  --tar-list FILE  the shards, one path per line, relative "
	    "to FILE's\n"
	    "                   directory\n"
	    "  --label-field EXT  the field holding each sample's label "
	    "(an integer;\n"
	    "                   default cls; \"\" for none)\n"
	    "  --tar-partial    a damaged shard keeps its samples before "
	    "the damage\n"
	    "                   (a warning) instead of failing the "
	    "build\n"
	    "  -o, --output OUT the index file to write\n\n"
	    "info:\n"
	    "  --verify         checksum the whole file (reads all of it; "
	    "opening\n"
	    "                   checks only the header)\n"
	    "  --json           print JSON\n"
	    "  -h, --help       show this help\n");
}

/* A progress line on stderr, at most once a second and only once the
 * build has run a second: short builds stay quiet. */
struct progress {
	uint64_t start, last;
	bool tty, shown;
};

static void tar_progress(void *arg, uint64_t done, uint64_t total,
			 uint64_t samples)
{
	struct progress *p = arg;
	const uint64_t now = now_ns();

	if (done == total ? !p->shown
			  : now - p->start < 1000000000ull ||
				now - p->last < 1000000000ull)
		return;
	p->last = now;
	p->shown = true;
	fprintf(stderr, "%swharf index: %llu/%llu shards, %llu samples%s",
		p->tty ? "\r" : "", (unsigned long long)done,
		(unsigned long long)total, (unsigned long long)samples,
		p->tty && done < total ? "" : "\n");
}

struct shards {
	char **v;
	size_t n, cap;
};

static int shards_add(struct shards *s, const char *path)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n] = strdup(path);
	return s->v[s->n++] ? 0 : -ENOMEM;
}

/* The shard paths of a --tar-list file, blank and '#' lines skipped. */
static int read_tar_list(const char *list, struct shards *s)
{
	FILE *in = fopen(list, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!in) {
		fprintf(stderr, "wharf index: %s: %s\n", list, strerror(errno));
		return -1;
	}
	while (!rc && (n = getline(&line, &cap, in)) >= 0) {
		while (n > 0 && strchr("\r\n \t", line[n - 1]))
			line[--n] = '\0';
		char *p = line + strspn(line, " \t");
		if (*p && *p != '#')
			rc = shards_add(s, p);
	}
	free(line);
	fclose(in);
	if (rc)
		fprintf(stderr, "wharf index: %s: out of memory\n", list);
	return rc;
}

/* Each argument a shard, or a glob (quoted, so the shell leaves it) of
 * shards in sorted order; a glob that matches nothing is an error. */
static int expand_shards(char **args, size_t nargs, struct shards *s)
{
	for (size_t i = 0; i < nargs; i++) {
		if (!strpbrk(args[i], "*?[")) {
			if (shards_add(s, args[i]))
				goto nomem;
			continue;
		}
		glob_t g;
		int rc = glob(args[i], 0, NULL, &g);
		if (rc == GLOB_NOMATCH) {
			fprintf(stderr, "wharf index: no shard matches '%s'\n",
				args[i]);
			return -1;
		}
		for (size_t k = 0; !rc && k < g.gl_pathc; k++)
			rc = shards_add(s, g.gl_pathv[k]);
		globfree(&g);
		if (rc)
			goto nomem;
	}
	return 0;
nomem:
	fprintf(stderr, "wharf index: out of memory\n");
	return -1;
}

/* --tar, --tar-list: 0, or -1 once the reason is printed. */
static int build_tar(char **args, size_t nargs, const char *tar_list,
		     const char *label_field, bool partial, const char *out)
{
	struct shards s = {0};
	struct progress p = {.start = now_ns(), .tty = isatty(2)};
	struct wharf_tar_options o;
	char *root = NULL;
	int rc;

	wharf_tar_options_init(&o);
	o.partial = partial;
	o.label_field = label_field;
	o.progress = tar_progress;
	o.progress_arg = &p;
	if (tar_list) {
		/* Paths in the list are relative to its directory. */
		char *copy = strdup(tar_list);
		char *slash = copy ? strrchr(copy, '/') : NULL;
		if (slash)
			slash[slash == copy] = '\0';
		root = copy ? realpath(slash ? copy : ".", NULL) : NULL;
		free(copy);
		if (!root) {
			fprintf(stderr, "wharf index: %s: directory: %s\n",
				tar_list, strerror(errno));
			return -1;
		}
		o.root = root;
		rc = read_tar_list(tar_list, &s);
	} else {
		rc = expand_shards(args, nargs, &s);
	}
	if (!rc && !s.n) {
		fprintf(stderr, "wharf index: %s names no shard\n", tar_list);
		rc = -1;
	}
	if (!rc &&
	    wharf_index_build_tar((const char *const *)s.v, s.n, &o, out)) {
		fprintf(stderr, "wharf index: %s\n", wharf_last_error());
		rc = -1;
	}
	for (size_t i = 0; i < s.n; i++)
		free(s.v[i]);
	free(s.v);
	free(root);
	return rc ? -1 : 0;
}

static int build(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"list", required_argument, NULL, 'l'},
	    {"stat", no_argument, NULL, 's'},
	    {"records", required_argument, NULL, 'r'},
	    {"tar", no_argument, NULL, 't'},
	    {"tar-list", required_argument, NULL, 'T'},
	    {"label-field", required_argument, NULL, 'L'},
	    {"tar-partial", no_argument, NULL, 'P'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *dir = NULL, *list = NULL, *out = NULL;
	const char *tar_list = NULL, *label_field = NULL;
	uint64_t rec = 0;
	bool stat_files = false, records = false, tar = false;
	bool partial = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'l':
			list = optarg;
			break;
		case 's':
			stat_files = true;
			break;
		case 'r':
			if (parse_size(optarg, &rec) || rec == 0)
				return cmd_usage_error(
				    "index", "--records: bad size '%s'",
				    optarg);
			records = true;
			break;
		case 't':
			tar = true;
			break;
		case 'T':
			tar_list = optarg;
			break;
		case 'L':
			label_field = optarg;
			break;
		case 'P':
			partial = true;
			break;
		case 'o':
			out = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cmd_bad_option("index", c, argv, lo);
		}
	}
	if ((dir != NULL) + (list != NULL) + records + tar +
		(tar_list != NULL) !=
	    1)
		return cmd_usage_error("index",
				       "build needs exactly one of --dir, "
				       "--list, --records, --tar, --tar-list");
	if (!out)
		return cmd_usage_error("index", "build needs -o OUT");
	if ((records || tar) && optind >= argc)
		return cmd_usage_error("index", "%s needs files",
				       records ? "--records" : "--tar");
	if (!records && !tar && optind < argc)
		return cmd_usage_error("index", "unexpected argument '%s'",
				       argv[optind]);
	if ((label_field || partial) && !tar && !tar_list)
		return cmd_usage_error("index", "--label-field and "
						"--tar-partial go with --tar "
						"or --tar-list");
	int rc = 0;
	if (tar || tar_list) {
		if (build_tar(argv + optind, (size_t)(argc - optind), tar_list,
			      label_field, partial, out))
			return 1;
	} else if (dir)
		rc = wharf_index_build_dir(dir, out);
	else if (list)
		rc = wharf_index_build_list(list, stat_files, out);
	else
		rc = wharf_index_build_records(
		    rec, (const char *const *)argv + optind,
		    (size_t)(argc - optind), out);
	if (rc) {
		fprintf(stderr, "wharf index: %s\n", wharf_last_error());
		return 1;
	}
	wharf_index *idx;
	if (wharf_index_open(out, 0, &idx)) {
		fprintf(stderr, "wharf index: %s\n", wharf_last_error());
		return 1;
	}
	printf("%s: %llu samples in %llu files\n", out,
	       (unsigned long long)wharf_index_count(idx),
	       (unsigned long long)wharf_index_num_files(idx));
	wharf_index_close(idx);
	return 0;
}

static int info(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"verify", no_argument, NULL, 'v'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool verify = false, json = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		switch (c) {
		case 'v':
			verify = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cmd_bad_option("index", c, argv, lo);
		}
	}
	if (optind + 1 != argc)
		return cmd_usage_error("index", "info needs one INDEX");
	const char *path = argv[optind];
	wharf_index *idx;
	if (wharf_index_open(path, verify ? WHARF_INDEX_VERIFY : 0, &idx)) {
		fprintf(stderr, "wharf index: %s\n", wharf_last_error());
		return 1;
	}
	struct wharf_index_info in = {.size = sizeof(in)};
	(void)wharf_index_info(idx, &in);
	char root[4096] = "";
	if (in.num_files)
		(void)wharf_index_path(idx, 0, root, sizeof(root));
	if (json) {
		struct jsonw w;

		jsonw_init(&w, stdout);
		jsonw_object(&w, NULL, JSONW_INLINE);
		jsonw_str(&w, "index", path);
		jsonw_u64(&w, "version", in.version);
		jsonw_u64(&w, "samples", in.count);
		jsonw_u64(&w, "files", in.num_files);
		jsonw_u64(&w, "labels", in.num_labels);
		jsonw_u64(&w, "min_length", in.min_length);
		jsonw_u64(&w, "max_length", in.max_length);
		jsonw_u64(&w, "total_bytes", in.total_bytes);
		jsonw_bool(&w, "unknown_lengths", in.unknown_lengths);
		jsonw_u64(&w, "file_bytes", in.file_bytes);
		jsonw_u64(&w, "fields", in.num_fields);
		jsonw_array(&w, "field_names", JSONW_INLINE);
		for (uint32_t k = 0; k < in.num_field_names; k++)
			jsonw_str(&w, NULL, wharf_index_field_name(idx, k));
		jsonw_end(&w);
		jsonw_bool(&w, "verified", verify);
		jsonw_end(&w);
	} else {
		char a[32], b[32], t[32], f[32];
		printf("index:      %s (format %u)\n", path, in.version);
		printf("samples:    %llu\n", (unsigned long long)in.count);
		printf("files:      %llu (first: %s)\n",
		       (unsigned long long)in.num_files, root);
		printf("labels:     %u\n", in.num_labels);
		printf("lengths:    %s .. %s%s, %s in all\n",
		       format_size(in.min_length, a, sizeof(a)),
		       format_size(in.max_length, b, sizeof(b)),
		       in.unknown_lengths ? " (some unknown)" : "",
		       format_size(in.total_bytes, t, sizeof(t)));
		if (in.num_fields) {
			printf("fields:     %llu (",
			       (unsigned long long)in.num_fields);
			for (uint32_t k = 0; k < in.num_field_names; k++)
				printf("%s%s", k ? ", " : "",
				       wharf_index_field_name(idx, k));
			printf(")\n");
		}
		printf("index size: %s\n",
		       format_size(in.file_bytes, f, sizeof(f)));
		printf("checksum:   %s\n",
		       verify ? "verified" : "not checked (use --verify)");
	}
	wharf_index_close(idx);
	return 0;
}

int cmd_index(int argc, char **argv)
{
	if (argc < 2)
		return cmd_usage_error("index", "missing command");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "build"))
		return build(argc - 1, argv + 1);
	if (!strcmp(argv[1], "info"))
		return info(argc - 1, argv + 1);
	return cmd_usage_error("index", "unknown command '%s'", argv[1]);
}
