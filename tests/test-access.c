/*
 * test-access: what other local users can and cannot do to a mount.
 * Modes and owners (--uid, --gid, --file-mode, --dir-mode, --umask with
 * default_permissions) narrow an allow_other mount to a group; the work
 * they can make the daemon do is bounded: stats opens hold nothing after
 * close and only so many at once, a failing file is asked for once per
 * --error-ttl, and the log lines of failures are rate-limited (log.c).
 *
 * The origin is a small HTTP server in the test (a thread), so that the
 * test decides what a file answers and counts the requests for it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"
#include "log.h"

#define FILE_SIZE 1000
#define SEED 7

static char *work_dir;

/* The origin: every path is a file of FILE_SIZE bytes, but for paths
 * that end in '/': directories, listed as nginx's JSON autoindex does
 * ("/" holds good, bad and the directory bad-dir; any other one file f).
 * Paths under /bad answer `status` (0: as above).  Counts GETs of
 * /bad*. */
struct origin {
	int fd, port;
	pthread_t th;
	int status;		/* atomic */
	unsigned long requests; /* atomic */
	bool stop;		/* atomic */
};

/* The listing of directory path, answered on c. */
static void answer_listing(int c, const char *path)
{
	static const char mtime[] = "\"mtime\":\"Tue, 14 Nov 2023 22:13:20 GMT\"";
	char head[256], body[512];
	size_t n, len;

	if (!strcmp(path, "/"))
		len = (size_t)snprintf(
		    body, sizeof(body),
		    "[{\"name\":\"good\",\"type\":\"file\",%s,\"size\":%d},"
		    "{\"name\":\"bad\",\"type\":\"file\",%s,\"size\":%d},"
		    "{\"name\":\"bad-dir\",\"type\":\"directory\",%s}]",
		    mtime, FILE_SIZE, mtime, FILE_SIZE, mtime);
	else
		len = (size_t)snprintf(
		    body, sizeof(body),
		    "[{\"name\":\"f\",\"type\":\"file\",%s,\"size\":%d}]",
		    mtime, FILE_SIZE);
	n = (size_t)snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nContent-Type: application/json"
			     "\r\nContent-Length: %zu\r\nConnection: close"
			     "\r\n\r\n",
			     len);
	(void)!send(c, head, n, MSG_NOSIGNAL);
	(void)!send(c, body, len, MSG_NOSIGNAL);
}

/* One request on connection c, answered and closed. */
static void origin_answer(struct origin *o, int c)
{
	char req[8192], head[512], path[1024], body[FILE_SIZE];
	char crange[96] = "";
	unsigned long long a = 0, b = FILE_SIZE - 1;
	const char *range;
	size_t n = 0;
	ssize_t k;
	int status = 0;

	while (n < sizeof(req) - 1) {
		k = recv(c, req + n, sizeof(req) - 1 - n, 0);
		if (k <= 0)
			return;
		n += (size_t)k;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	if (sscanf(req, "%*s %1023s", path) != 1)
		return;
	if (!strncmp(path, "/bad", 4)) {
		__atomic_fetch_add(&o->requests, 1, __ATOMIC_RELAXED);
		status = __atomic_load_n(&o->status, __ATOMIC_ACQUIRE);
	}
	range = strcasestr(req, "\r\nRange: bytes=");
	if (range)
		sscanf(range + 15, "%llu-%llu", &a, &b);
	if (b >= FILE_SIZE)
		b = FILE_SIZE - 1;
	if (a > b)
		status = 416;
	if (status) {
		n = (size_t)snprintf(head, sizeof(head),
				     "HTTP/1.1 %d No\r\nContent-Length: 0\r\n"
				     "Connection: close\r\n\r\n",
				     status);
		(void)!send(c, head, n, MSG_NOSIGNAL);
		return;
	}
	if (path[strlen(path) - 1] == '/') {
		answer_listing(c, path);
		return;
	}
	for (unsigned long long i = a; i <= b; i++)
		body[i - a] = (char)fx_byte(SEED, i);
	if (range)
		snprintf(crange, sizeof(crange),
			 "Content-Range: bytes %llu-%llu/%d\r\n", a, b,
			 FILE_SIZE);
	n = (size_t)snprintf(head, sizeof(head),
			     "HTTP/1.1 %s\r\nContent-Length: %llu\r\n%s"
			     "Connection: close\r\n\r\n",
			     range ? "206 Partial Content" : "200 OK",
			     b - a + 1, crange);
	(void)!send(c, head, n, MSG_NOSIGNAL);
	if (strncmp(req, "HEAD", 4))
		(void)!send(c, body, b - a + 1, MSG_NOSIGNAL);
}

static void *origin_main(void *arg)
{
	struct origin *o = arg;

	while (!__atomic_load_n(&o->stop, __ATOMIC_ACQUIRE)) {
		const int c = accept(o->fd, NULL, NULL);

		if (c < 0)
			continue;
		origin_answer(o, c);
		close(c);
	}
	return NULL;
}

static void origin_start(struct origin *o, int status)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	memset(o, 0, sizeof(*o));
	o->status = status;
	o->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(o->fd, 0);
	ck_assert_int_eq(bind(o->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(o->fd, 64), 0);
	ck_assert_int_eq(getsockname(o->fd, (struct sockaddr *)&sa, &len), 0);
	o->port = ntohs(sa.sin_port);
	ck_assert_int_eq(pthread_create(&o->th, NULL, origin_main, o), 0);
}

static void origin_stop(struct origin *o)
{
	__atomic_store_n(&o->stop, true, __ATOMIC_RELEASE);
	shutdown(o->fd, SHUT_RDWR);
	pthread_join(o->th, NULL);
	close(o->fd);
}

static unsigned long origin_requests(struct origin *o)
{
	return __atomic_load_n(&o->requests, __ATOMIC_RELAXED);
}

/* Mounts o's files ("good", "bad", "sub/good", "many/eNN" for NN below
 * n_many) on m, with opts (NULL-terminated). */
static void mount_origin(struct fx_mount *m, const char *tag, struct origin *o,
			 int n_many, const char *const opts[])
{
	char manifest[PATH_MAX], url[64];
	const char *extra[] = {"--manifest", manifest, NULL};
	FILE *f;

	snprintf(manifest, sizeof(manifest), "%s/%s.manifest", work_dir, tag);
	f = fopen(manifest, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "good %d\nbad %d\nsub/good %d\n", FILE_SIZE, FILE_SIZE,
		FILE_SIZE);
	for (int i = 0; i < n_many; i++)
		fprintf(f, "bad-many/e%02d %d\n", i, FILE_SIZE);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", o->port);
	fx_mount_init(m, work_dir, tag);
	ck_assert_int_eq(fx_mount_start(m, url, opts, extra), 0);
}

/* Reads root/name whole: 0 with its bytes as the origin's, else errno
 * (EBADMSG: other bytes). */
static int read_file(const char *root, const char *name)
{
	char path[PATH_MAX], buf[FILE_SIZE + 1];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		const int err = errno;

		close(fd);
		return err;
	}
	close(fd);
	if (n != FILE_SIZE)
		return EBADMSG;
	for (ssize_t i = 0; i < n; i++)
		if ((uint8_t)buf[i] != fx_byte(SEED, (uint64_t)i))
			return EBADMSG;
	return 0;
}

/* Lines of path that hold s. */
static int lines_with(const char *path, const char *s)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, s))
			n++;
	fclose(f);
	return n;
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs read_file(root, name) in a child with uid and gid 4444 and only
 * group `group` besides (-1: none).  @return what it returned. */
static int read_as_other(const char *root, const char *name, long group)
{
	const gid_t g = (gid_t)group;
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(group < 0 ? 0 : 1, &g) || setgid(4444) ||
		    setuid(4444))
			_exit(126);
		_exit(read_file(root, name));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(test_modes_narrow_allow_other)
{
	static const char *const opts[] = {
	    "-o",
	    "allow_other,default_permissions,uid=daemon,gid=4343,"
	    "file_mode=0440,dir_mode=0550",
	    NULL};
	struct origin o;
	struct fx_mount m;
	char path[PATH_MAX];
	struct stat st;

	if (geteuid() != 0)
		fx_skip("needs root (allow_other, and children of other uids)");
	origin_start(&o, 0);
	mount_origin(&m, "modes", &o, 0, opts);

	ck_assert_int_eq(stat(m.dir, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0550);
	ck_assert_uint_eq(st.st_uid, 1); /* daemon, by name */
	ck_assert_uint_eq(st.st_gid, 4343);
	snprintf(path, sizeof(path), "%s/good", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0440);
	ck_assert_uint_eq(st.st_uid, 1);
	ck_assert_uint_eq(st.st_gid, 4343);
	snprintf(path, sizeof(path), "%s/sub", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0550);
	snprintf(path, sizeof(path), "%s/.wharf/stats", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0440);

	/* Not in the group: nothing, not even the stats. */
	ck_assert_int_eq(read_as_other(m.dir, "good", -1), EACCES);
	ck_assert_int_eq(read_as_other(m.dir, "sub/good", -1), EACCES);
	ck_assert_int_eq(read_as_other(m.dir, ".wharf/stats", -1), EACCES);
	/* A member of the group reads, as root does. */
	ck_assert_int_eq(read_as_other(m.dir, "good", 4343), 0);
	ck_assert_int_eq(read_as_other(m.dir, "sub/good", 4343), 0);
	ck_assert_int_eq(read_file(m.dir, "good"), 0);

	ck_assert_int_eq(fx_mount_stop(&m), 0);
	origin_stop(&o);
}
END_TEST

START_TEST(test_umask_and_defaults)
{
	static const char *const opts[] = {"--umask", "027", "--gid", "4343",
					   NULL};
	struct origin o;
	struct fx_mount m;
	char path[PATH_MAX];
	struct stat st;

	origin_start(&o, 0);
	mount_origin(&m, "umask", &o, 0, opts);
	ck_assert_int_eq(stat(m.dir, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0550);
	ck_assert_uint_eq(st.st_uid, geteuid()); /* the mounting user's */
	snprintf(path, sizeof(path), "%s/good", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0440);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Without the options: as before, 0444 and 0555. */
	mount_origin(&m, "defaults", &o, 0, NULL);
	ck_assert_int_eq(stat(m.dir, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFDIR | 0555);
	ck_assert_uint_eq(st.st_gid, getegid());
	snprintf(path, sizeof(path), "%s/good", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0444);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	origin_stop(&o);
}
END_TEST

/* `wharf mount ARGS` fails with status 2 and says `want`. */
static void refused(const char *args, const char *want)
{
	char log[PATH_MAX];

	snprintf(log, sizeof(log), "%s/refused.log", work_dir);
	ck_assert_int_eq(fx_sh("'%s' mount %s http://127.0.0.1:1/ '%s' "
			       ">'%s' 2>&1",
			       fx_wharf_bin(), args, work_dir, log),
			 2);
	ck_assert_msg(lines_with(log, want) == 1, "%s: not '%s' in:", args,
		      want);
}

START_TEST(test_bad_values_refused)
{
	refused("--file-mode 0999", "--file-mode: '0999' is not an octal mode "
				    "from 0 to 0777 (such as 0440)");
	refused("-o dir_mode=1777", "--dir-mode: '1777' is not an octal mode");
	refused("--umask 0x22", "--umask: '0x22' is not an octal mode");
	refused("--file-mode ''", "--file-mode: '' is not an octal mode");
	refused("--uid no-such-user-here",
		"--uid: no user named 'no-such-user-here' (give a user name "
		"or a number)");
	refused("-o gid=no-such-group-here",
		"--gid: no group named 'no-such-group-here'");
	refused("--uid 4294967295", "not a user name or a number below");
	refused("--gid 12x", "--gid: '12x' is not a group name or a number");
	refused("--error-ttl -1", "--error-ttl: '-1' is not a number");
}
END_TEST

/* Resident memory says what the mount keeps, except under AddressSanitizer
 * (its quarantine keeps freed memory resident) or ThreadSanitizer. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_GREW_LESS(pid, before, kib) ((void)(before), true)
#define RSS_CHECKED false
#else
#define RSS_GREW_LESS(pid, before, kib) (fx_rss_kib(pid) - (before) < (kib))
#define RSS_CHECKED true
#endif

START_TEST(test_stats_opens_bounded)
{
	static const int held = 3000;
	static const char *const opts[] = {"--passthrough=off", NULL};
	struct rlimit rl = {4096, 4096};
	struct origin o;
	struct fx_mount m;
	char path[PATH_MAX], c;
	int *fds, refused = 0;
	size_t len;
	long before;

	if (setrlimit(RLIMIT_NOFILE, &rl))
		fx_skip("cannot raise RLIMIT_NOFILE to 4096: %s",
			strerror(errno));
	if (!RSS_CHECKED)
		fx_skip_note(__func__, "the memory bounds (a sanitizer keeps "
				       "freed memory resident); the cap on "
				       "open stats files is checked");
	fds = calloc(held, sizeof(*fds));
	ck_assert_ptr_nonnull(fds);
	origin_start(&o, 0);
	mount_origin(&m, "stats", &o, 0, opts);
	snprintf(path, sizeof(path), "%s/.wharf/stats", m.dir);

	/* Open, read, close: nothing stays. */
	for (int i = 0; i < 200; i++)
		free(fx_read_file(path, &len));
	before = fx_rss_kib(m.pid);
	for (int i = 0; i < 20000; i++) {
		const int fd = open(path, O_RDONLY);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(read(fd, &c, 1), 1);
		close(fd);
	}
	ck_assert_msg(RSS_GREW_LESS(m.pid, before, 2048),
		      "20000 opens kept %ld KiB", fx_rss_kib(m.pid) - before);

	/* Held open: a few KiB each, so only so many at once. */
	before = fx_rss_kib(m.pid);
	for (int i = 0; i < held; i++) {
		fds[i] = open(path, O_RDONLY);
		if (fds[i] < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			refused++;
		} else {
			ck_assert_int_eq(read(fds[i], &c, 1), 1);
		}
	}
	ck_assert_int_gt(refused, 0);
	ck_assert_msg(RSS_GREW_LESS(m.pid, before, 2048),
		      "%d held opens kept %ld KiB", held - refused,
		      fx_rss_kib(m.pid) - before);
	for (int i = 0; i < held; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Closed, they can be opened again (releases come asynchronously). */
	for (int tries = 0; tries < 100; tries++) {
		const int fd = open(path, O_RDONLY);

		if (fd >= 0) {
			close(fd);
			break;
		}
		ck_assert_int_eq(errno, EAGAIN);
		usleep(10000);
	}
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	origin_stop(&o);
	free(fds);
}
END_TEST

START_TEST(test_failing_file_asked_once_per_ttl)
{
	/* --outage-wait 0: a 5xx fails after the retries, as it did. */
	static const char *const opts[] = {"--error-ttl", "2", "--retries", "0",
					   "--outage-wait", "0", NULL};
	struct origin o;
	struct fx_mount m;
	double t0, t1;
	int reads = 0;

	origin_start(&o, 403);
	mount_origin(&m, "ttl", &o, 0, opts);
	t0 = seconds();
	ck_assert_int_eq(read_file(m.dir, "bad"), EACCES);
	t1 = seconds(); /* the error stands from before now */
	while (seconds() - t0 < 1.5) {
		ck_assert_int_eq(read_file(m.dir, "bad"), EACCES);
		reads++;
	}
	ck_assert_int_gt(reads, 10);
	ck_assert_uint_eq(origin_requests(&o), 1);
	ck_assert_int_ge(fx_mount_stat(m.dir, "reads", "errors_cached"), reads);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "error_ttl_ms"), 2000);
	/* A 5xx stands the same; after the ttl the file is asked again... */
	while (seconds() - t1 < 2.2)
		usleep(20000);
	__atomic_store_n(&o.status, 503, __ATOMIC_RELEASE);
	ck_assert_int_eq(read_file(m.dir, "bad"), EIO);
	ck_assert_int_eq(read_file(m.dir, "bad"), EIO);
	ck_assert_uint_eq(origin_requests(&o), 2);
	/* ... and read once the origin answers again. */
	usleep(2200000);
	__atomic_store_n(&o.status, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(read_file(m.dir, "bad"), 0);
	ck_assert_uint_eq(origin_requests(&o), 3);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* Two failed requests, each a line or two. */
	ck_assert_int_le(lines_with(m.log, "/bad"), 4);
	origin_stop(&o);
}
END_TEST

/* What a stat of root/name gives: 0 or errno. */
static int stat_errno(const char *root, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	return stat(path, &st) ? errno : 0;
}

/* A directory whose listing fails (a 403 on a prefix, say) is listed once
 * per --error-ttl however many lookups come, like a failing file. */
START_TEST(test_failing_listing_asked_once_per_ttl)
{
	static const char *const opts[] = {"--error-ttl", "2", "--retries", "0",
					   NULL};
	char url[64];
	struct origin o;
	struct fx_mount m;
	double t0;
	int looks = 0;

	origin_start(&o, 403);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", o.port);
	fx_mount_init(&m, work_dir, "dirttl");
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	ck_assert_int_eq(stat_errno(m.dir, "good"), 0);
	t0 = seconds();
	ck_assert_int_eq(stat_errno(m.dir, "bad-dir/f"), EACCES);
	while (seconds() - t0 < 1.5) {
		ck_assert_int_eq(stat_errno(m.dir, "bad-dir/f"), EACCES);
		looks++;
	}
	ck_assert_int_gt(looks, 10);
	ck_assert_uint_eq(origin_requests(&o), 1);
	ck_assert_int_ge(fx_mount_stat(m.dir, "tree", "errors_cached"), looks);
	/* After the ttl the directory is listed again, and lists. */
	while (seconds() - t0 < 2.3)
		usleep(20000);
	__atomic_store_n(&o.status, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(read_file(m.dir, "bad-dir/f"), 0);
	ck_assert_uint_ge(origin_requests(&o), 2);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	origin_stop(&o);
}
END_TEST

START_TEST(test_failure_lines_limited)
{
	static const char *const opts[] = {"--retries", "0", "--readahead", "0",
					   "--outage-wait", "0", NULL};
	static const int files = 30;
	struct origin o;
	struct fx_mount m;
	char name[64];

	origin_start(&o, 503);
	mount_origin(&m, "lines", &o, files, opts);
	for (int i = 0; i < files; i++) {
		snprintf(name, sizeof(name), "bad-many/e%02d", i);
		ck_assert_int_eq(read_file(m.dir, name), EIO);
	}
	ck_assert_uint_ge(origin_requests(&o), files);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* Two lines a failure, each from its own place: 10 of each, then
	 * each place's summary at the unmount. */
	ck_assert_int_le(lines_with(m.log, "bad-many/e"),
			 2 * LOG_LIMIT_LINES + 2);
	ck_assert_int_ge(lines_with(m.log, "were not logged (at most 10 in 60 "
					   "s); the last: "),
			 1);
	origin_stop(&o);
}
END_TEST

/* The log lines a test's log function took. */
static char got[8][512];
static int n_got;

static void take_line(enum wharf_log_level level, const char *msg, void *arg)
{
	if (n_got < 8)
		snprintf(got[n_got], sizeof(got[0]), "%s", msg);
	n_got++;
}

START_TEST(test_log_limit)
{
	static struct log_limit l = LOG_LIMIT_INIT(3, 1);

	log_set_func(take_line, NULL);
	for (int i = 0; i < 10; i++)
		log_limited(&l, WHARF_LOG_ERROR, "line %d", i);
	ck_assert_int_eq(n_got, 3);
	ck_assert_str_eq(got[2], "line 2");
	usleep(1100000);
	log_limited(&l, WHARF_LOG_WARN, "line %d", 10);
	ck_assert_int_eq(n_got, 5);
	ck_assert_str_eq(got[3], "7 more lines like this were not logged (at "
				 "most 3 in 1 s); the last: line 9");
	ck_assert_str_eq(got[4], "line 10");
	log_limits_flush(); /* nothing held back now */
	ck_assert_int_eq(n_got, 5);
	for (int i = 11; i < 14; i++)
		log_limited(&l, WHARF_LOG_ERROR, "line %d", i);
	ck_assert_int_eq(n_got, 7);
	log_limits_flush();
	ck_assert_int_eq(n_got, 8);
	ck_assert_str_eq(got[7], "1 more line like this was not logged (at "
				 "most 3 in 1 s); the last: line 13");
	log_set_func(NULL, NULL);
}
END_TEST

static void setup(void)
{
	work_dir = fx_tmpdir("access-work");
}

static void teardown(void)
{
	fx_unmount_leftovers(work_dir);
	fx_rmtree(work_dir);
	free(work_dir);
}

int main(void)
{
	Suite *s = suite_create("access");
	TCase *unit = tcase_create("log"), *tc = tcase_create("mount");
	const char *why = fx_fuse_missing();
	SRunner *sr;
	int failed;

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	tcase_add_test(unit, test_log_limit);
	suite_add_tcase(s, unit);
	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(tc, test_bad_values_refused, why);
	fx_tcase_add(tc, test_modes_narrow_allow_other, why);
	fx_tcase_add(tc, test_umask_and_defaults, why);
	fx_tcase_add(tc, test_stats_opens_bounded, why);
	fx_tcase_add(tc, test_failing_file_asked_once_per_ttl, why);
	fx_tcase_add(tc, test_failing_listing_asked_once_per_ttl, why);
	fx_tcase_add(tc, test_failure_lines_limited, why);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
