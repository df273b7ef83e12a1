#include "config.h"

#include "fixture-ck.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

/* ---- Tests left out by name. */

#define STAND_INS 256

/* Stand-in i (its loop index) prints the skip of the test it replaces. */
static TTest stand_ins[STAND_INS];
static char *stand_in_why[STAND_INS];
static int n_stand_ins;

static void stand_in_fn(int i)
{
	fx_skip_note(stand_ins[i].name, "%s", stand_in_why[i]);
}

void fx_tcase_add_loop(TCase *tc, const TTest *t, int start, int end,
		       const char *why)
{
	if (!why) {
		tcase_add_loop_test(tc, t, start, end);
		return;
	}
	for (int k = start; k < end; k++) {
		const int i = n_stand_ins;

		if (i == STAND_INS) {
			fprintf(stderr,
				"fx_tcase_add: more than %d tests "
				"left out\n",
				STAND_INS);
			abort();
		}
		stand_ins[i] = (TTest){t->name, stand_in_fn, t->file, t->line};
		stand_in_why[i] = strdup(why);
		if (!stand_in_why[i])
			abort();
		n_stand_ins++;
		tcase_add_loop_test(tc, &stand_ins[i], i, i + 1);
	}
}

void fx_tcase_add(TCase *tc, const TTest *t, const char *why)
{
	fx_tcase_add_loop(tc, t, 0, 1, why);
}

/* ---- `wharf mount -f` daemons. */

void fx_mount_init(struct fx_mount *m, const char *work, const char *tag)
{
	char *d = fx_tmpdir(tag);
	const char *name = strrchr(d, '/') + 1;
	FILE *f;

	m->pid = -1;
	if (snprintf(m->dir, sizeof(m->dir), "%s", d) >= FX_MOUNT_PATH ||
	    snprintf(m->cache, sizeof(m->cache), "%s/%s.cache", work, name) >=
		FX_MOUNT_PATH ||
	    snprintf(m->log, sizeof(m->log), "%s/%s.log", work, name) >=
		FX_MOUNT_PATH ||
	    snprintf(m->mounts, sizeof(m->mounts), "%s/mounts", work) >=
		FX_MOUNT_PATH) {
		fprintf(stderr, "fx_mount_init: %s is too long a path\n", work);
		abort();
	}
	f = fopen(m->mounts, "a");
	if (!f || fprintf(f, "%s\n", m->dir) < 0 || fclose(f)) {
		perror(m->mounts);
		abort();
	}
	free(d);
}

int fx_mount_start(struct fx_mount *m, const char *url,
		   const char *const opts[], const char *const extra[])
{
	const char *const *lists[] = {opts, extra};
	char stats[PATH_MAX + 16];
	char *argv[64];
	int n = 0;

	if (fx_mkdirs(m->cache))
		return -1;
	argv[n++] = (char *)fx_wharf_bin();
	argv[n++] = "mount";
	argv[n++] = "-f";
	argv[n++] = "--cache-dir";
	argv[n++] = m->cache;
	argv[n++] = "--chunk-size";
	argv[n++] = "1M";
	for (int l = 0; l < 2; l++)
		for (int i = 0; lists[l] && lists[l][i]; i++) {
			if (n == 61) {
				fprintf(stderr, "fx_mount_start: too many "
						"options\n");
				return -1;
			}
			argv[n++] = (char *)lists[l][i];
		}
	argv[n++] = (char *)url;
	argv[n++] = m->dir;
	argv[n] = NULL;
	m->pid = fx_spawn(argv, m->log);
	if (m->pid < 0)
		return -1;
	snprintf(stats, sizeof(stats), "%s/.wharf/stats", m->dir);
	return fx_wait_path(&m->pid, stats, 30000, m->log);
}

void fx_mount_ok_at(const char *file, int line, int rc,
		    const struct fx_mount *m)
{
	if (!rc)
		return;
	fx_sh("cat '%s' >&2", m->log);
	_ck_assert_failed(file, line, "the mount",
			  "the mount on %s did not come up (its log: %s)",
			  m->dir, m->log);
}

int fx_mount_stop(struct fx_mount *m)
{
	int status = -1;

	if (m->pid <= 0)
		return -1;
	if (fx_sh("'%s' umount '%s' >>'%s' 2>&1", fx_wharf_bin(), m->dir,
		  m->log)) {
		fx_stop(m->pid, 5000);
		fx_sh("umount -l '%s' 2>/dev/null", m->dir);
		m->pid = -1;
		return -1;
	}
	for (int waited = 0; waited < 30000; waited += 20) {
		if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
			m->pid = -1;
			return status;
		}
		usleep(20000);
	}
	fx_stop(m->pid, 5000);
	m->pid = -1;
	return -1;
}

void fx_unmount_leftovers(const char *work)
{
	if (!work)
		return;
	fx_sh("while read -r d; do mountpoint -q \"$d\" && "
	      "{ '%s' umount \"$d\" || umount -l \"$d\"; }; "
	      "rmdir \"$d\" 2>/dev/null; done <'%s/mounts' 2>/dev/null; true",
	      fx_wharf_bin(), work);
}

/* ---- The numbers in a mount's stats. */

char *fx_mount_stats(const char *mnt)
{
	char path[PATH_MAX];
	size_t len;

	snprintf(path, sizeof(path), "%s/.wharf/stats", mnt);
	return fx_read_file(path, &len);
}

static const char *skip_ws(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* Past the JSON string whose opening quote p is at. */
static const char *past_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/* The value of key in the object at obj (its '{'): a key of that object
 * itself, or of any object in it when deep.  NULL when there is none
 * before the object ends. */
static const char *key_value(const char *obj, const char *key, bool deep)
{
	const size_t klen = strlen(key);
	int depth = 0;

	for (const char *p = obj; *p;) {
		if (*p == '"') {
			const char *end = past_string(p);
			const char *after = skip_ws(end);

			if (*after == ':' && (deep || depth == 1) &&
			    (size_t)(end - p) == klen + 2 &&
			    !strncmp(p + 1, key, klen))
				return skip_ws(after + 1);
			p = end;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return NULL;
		p++;
	}
	return NULL;
}

/* Where the value of section/key starts in stats; NULL with *why (to
 * free) saying what is missing. */
static const char *stats_value(const char *stats, const char *section,
			       const char *key, char **why)
{
	const char *obj = skip_ws(stats), *v;
	int rc = 0;

	*why = NULL;
	if (*obj != '{') {
		rc = asprintf(why, "the stats are not a JSON object");
		goto out;
	}
	if (section) {
		v = key_value(obj, section, false);
		if (!v) {
			rc = asprintf(why,
				      "the stats have no section \"%s\" "
				      "(looking for \"%s\")",
				      section, key);
			goto out;
		}
		if (*v == '[') /* an array: its first object */
			v = skip_ws(v + 1);
		if (*v != '{') {
			rc = asprintf(why,
				      "the stats' \"%s\" holds no object "
				      "(looking for \"%s\")",
				      section, key);
			goto out;
		}
		obj = v;
	}
	v = key_value(obj, key, !section);
	if (v)
		return v;
	rc = section ? asprintf(why, "the stats have no \"%s\" in \"%s\"", key,
				section)
		     : asprintf(why, "the stats have no \"%s\"", key);
out:
	if (rc < 0)
		abort();
	return NULL;
}

/* The number at v: 0, or -1 with *why (to free) when it is none. */
static int stats_number(const char *v, const char *key, long long *n,
			char **why)
{
	char *end;

	errno = 0;
	*n = strtoll(v, &end, 10);
	if (end != v && !errno)
		return 0;
	if (asprintf(why, "the stats' \"%s\" is no number: %.20s", key, v) < 0)
		abort();
	return -1;
}

/* Fails the test as a check at file:line would: the failure names the
 * caller's line, not this file's. */
static void fail_at(const char *file, int line, const char *msg)
{
	_ck_assert_failed(file, line, "the stats", "%s", msg);
}

/* Fails at file:line with why and the stats, freeing both first (a test
 * run without fork goes on). */
static void fail_freeing(const char *file, int line, char *why, char *json)
{
	char msg[4096];

	snprintf(msg, sizeof(msg), "%s:\n%s", why, json);
	free(why);
	free(json);
	fail_at(file, line, msg);
}

long long fx_stats_num_at(const char *file, int line, const char *stats,
			  const char *section, const char *key)
{
	char *why, *copy;
	const char *v = stats_value(stats, section, key, &why);
	long long n = -1;

	if (v)
		stats_number(v, key, &n, &why);
	if (why) {
		copy = strdup(stats);
		if (!copy)
			abort();
		fail_freeing(file, line, why, copy);
	}
	return n;
}

/* The mount's stats, failing at file:line when they cannot be read. */
static char *stats_or_fail(const char *file, int line, const char *mnt)
{
	char *json = fx_mount_stats(mnt), msg[PATH_MAX + 128];

	if (!json) {
		snprintf(msg, sizeof(msg), "cannot read %s/.wharf/stats: %s",
			 mnt, strerror(errno));
		fail_at(file, line, msg);
	}
	return json;
}

long long fx_mount_stat_at(const char *file, int line, const char *mnt,
			   const char *section, const char *key)
{
	char *json = stats_or_fail(file, line, mnt), *why;
	const char *v = stats_value(json, section, key, &why);
	long long n = -1;

	if (v)
		stats_number(v, key, &n, &why);
	if (why)
		fail_freeing(file, line, why, json);
	free(json);
	return n;
}

bool fx_mount_passthrough_on_at(const char *file, int line, const char *mnt)
{
	char *json = stats_or_fail(file, line, mnt), *why;
	const char *v = stats_value(json, "passthrough", "on", &why);
	bool on = false;

	if (v && !strncmp(v, "true", 4))
		on = true;
	else if (v && strncmp(v, "false", 5) &&
		 asprintf(&why, "the stats' passthrough \"on\" is neither true "
				"nor false") < 0)
		abort();
	if (why)
		fail_freeing(file, line, why, json);
	free(json);
	return on;
}

bool fx_passthrough_expected(void)
{
	struct utsname u;
	int a = 0, b = 0;

	return geteuid() == 0 && uname(&u) == 0 &&
	       sscanf(u.release, "%d.%d", &a, &b) == 2 &&
	       (a > 6 || (a == 6 && b >= 9));
}

void fx_work_free(char **work)
{
	if (!*work)
		return;
	fx_unmount_leftovers(*work);
	fx_rmtree(*work);
	free(*work);
	*work = NULL;
}

int fx_suite_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
