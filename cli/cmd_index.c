/*
 * `wharf index build|info`: builds a loader index from a directory, a list
 * or fixed-size records, and describes one.  Everything is in libwharf.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/loader.h>

#include "cmd.h"
#include "jsonw.h"
#include "util.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: wharf index build (--dir DIR | --list FILE [--stat] |\n"
	    "                          --records SIZE FILE...) -o OUT\n"
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
	    "  -o, --output OUT the index file to write\n\n"
	    "info:\n"
	    "  --verify         checksum the whole file (reads all of it; "
	    "opening\n"
	    "                   checks only the header)\n"
	    "  --json           print JSON\n"
	    "  -h, --help       show this help\n");
}

static int build(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"list", required_argument, NULL, 'l'},
	    {"stat", no_argument, NULL, 's'},
	    {"records", required_argument, NULL, 'r'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *dir = NULL, *list = NULL, *out = NULL;
	uint64_t rec = 0;
	bool stat_files = false, records = false;
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
	if ((dir != NULL) + (list != NULL) + records != 1)
		return cmd_usage_error("index", "build needs exactly one of "
						"--dir, --list, --records");
	if (!out)
		return cmd_usage_error("index", "build needs -o OUT");
	if (records && optind >= argc)
		return cmd_usage_error("index", "--records needs files");
	if (!records && optind < argc)
		return cmd_usage_error("index", "unexpected argument '%s'",
				       argv[optind]);
	int rc;
	if (dir)
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
