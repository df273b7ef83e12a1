#include "config.h"

#include "fixture.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void fx_skip_note(const char *func, const char *fmt, ...)
{
	size_t len = strlen(func);
	char *why;
	va_list ap;

	/* START_TEST(name) makes name_fn. */
	if (len > 3 && !strcmp(func + len - 3, "_fn"))
		len -= 3;
	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		abort();
	va_end(ap);
	/* One line: summarize reads it as one. */
	for (char *p = why; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fflush(stderr);
	printf("SKIP: %.*s: %s\n", (int)len, func, why);
	fflush(stdout);
	free(why);
}

void fx_need(const char *why)
{
	if (!why)
		return;
	printf("SKIP: %s\n", why);
	fflush(stdout);
	exit(77);
}

const char *fx_fuse_missing(void)
{
	return access("/dev/fuse", R_OK | W_OK) ? "/dev/fuse is not usable here"
						: NULL;
}

static const char *tmp_root(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

char *fx_tmpdir(const char *tag)
{
	char *p;

	if (asprintf(&p, "%s/wharf-%s-XXXXXX", tmp_root(), tag) < 0)
		abort();
	if (!mkdtemp(p)) {
		perror(p);
		abort();
	}
	return p;
}

void fx_rmtree(const char *path)
{
	const char *t = tmp_root();

	if (!path || (strncmp(path, t, strlen(t)) && strncmp(path, "/tmp/", 5)))
		return;
	fx_sh("rm -rf '%s'", path);
}

uint8_t fx_byte(uint32_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ull ^
		     (uint64_t)seed * 0xD1B54A32D192ED03ull;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> ((off & 7) * 8));
}

int fx_write_file(const char *path, uint64_t size, uint32_t seed)
{
	static uint8_t buf[1 << 16];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t off = 0;

	if (fd < 0)
		return -errno;
	while (off < size) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = fx_byte(seed, off + i);
		if (write(fd, buf, n) != (ssize_t)n) {
			close(fd);
			return -EIO;
		}
		off += n;
	}
	return close(fd) ? -errno : 0;
}

long long fx_read_seed(const char *dir, const char *name, uint32_t seed,
		       uint64_t *got)
{
	static const size_t step = 300007; /* not chunk-aligned on purpose */
	char path[PATH_MAX];
	unsigned char *buf = malloc(step);
	long long bad = 0;
	ssize_t n = 0;
	int fd;

	*got = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((n = read(fd, buf, step)) > 0) {
		for (ssize_t k = 0; k < n; k++)
			bad += buf[k] != fx_byte(seed, *got + (uint64_t)k);
		*got += (uint64_t)n;
	}
	if (n < 0 && errno != EIO)
		bad = -1;
	close(fd);
	free(buf);
	return bad;
}

int fx_mkdirs(const char *path)
{
	return fx_sh("mkdir -p '%s'", path) ? -EIO : 0;
}

void *fx_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap + 1);
			if (!buf)
				abort();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

int fx_sh(const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	if (vasprintf(&cmd, fmt, ap) < 0)
		abort();
	va_end(ap);
	rc = system(cmd);
	free(cmd);
	if (rc == -1 || !WIFEXITED(rc))
		return -1;
	return WEXITSTATUS(rc);
}

int fx_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		abort();
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

int fx_wait_port(int port, int timeout_ms)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

		close(fd);
		if (ok)
			return 0;
		usleep(20000);
	}
	return -1;
}

pid_t fx_spawn(char *const argv[], const char *log_path)
{
	sigset_t all, old;
	pid_t pid;

	/* Until its exec, the child must not run the test runner's own
	 * handlers (Check's SIGTERM handler kills the whole test): a
	 * signal sent to it that early takes the default action. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return pid;
	}
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		/* An ignored signal stays ignored across exec, as before. */
		if (!sigaction(sig, NULL, &sa) &&
		    ((sa.sa_flags & SA_SIGINFO) || sa.sa_handler != SIG_IGN))
			signal(sig, SIG_DFL);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (log_path) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
	}
	execvp(argv[0], argv);
	perror(argv[0]);
	_exit(127);
}

int fx_wait_path(pid_t *pid, const char *path, int timeout_ms, const char *log)
{
	struct stat st;

	for (int waited = 0; waited < timeout_ms; waited += 50) {
		int status;

		if (waitpid(*pid, &status, WNOHANG) == *pid) {
			*pid = -1;
			fprintf(stderr, "the daemon died; see %s\n", log);
			return -1;
		}
		if (stat(path, &st) == 0)
			return 0;
		usleep(50000);
	}
	fprintf(stderr, "%s did not appear; see %s\n", path, log);
	return -1;
}

int fx_stop(pid_t pid, int timeout_ms)
{
	int status = -1;

	if (pid <= 0)
		return -1;
	kill(pid, SIGTERM);
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return status;
}

/* The nginx binary, or NULL when there is none. */
static const char *nginx_bin(void)
{
	static const char *const bins[] = {"/usr/sbin/nginx", "/usr/bin/nginx"};
	const char *bin = NULL;

	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++)
		if (access(bins[i], X_OK) == 0)
			bin = bins[i];
	return bin;
}

const char *fx_node_bin(const char *env, const char *name)
{
	static char path[PATH_MAX];
	const char *set = getenv(env);
	const char *src = getenv("WHARF_SRCDIR");

	if (set && *set)
		return set;
	snprintf(path, sizeof(path), "%s/build/node/node_modules/.bin/%s",
		 src ? src : ".", name);
	return path;
}

const char *fx_node_missing(const char *env, const char *name)
{
	static char why[PATH_MAX + 128];
	const char *bin = fx_node_bin(env, name);

	if (!access(bin, X_OK))
		return NULL;
	snprintf(why, sizeof(why),
		 "%s not found at %s (set %s, or run ./quickstart deps, which "
		 "installs it into build/node)",
		 name, bin, env);
	return why;
}

const char *fx_nginx_missing(void)
{
	return nginx_bin() ? NULL
			   : "nginx is not installed (apt-get install "
			     "nginx-light)";
}

/* Starts the server argv (nginx, squid) of ng, its output in its
 * directory, and waits (bounded) for its port. */
static int server_spawn(struct fx_nginx *ng, char *const argv[])
{
	char log[4200];

	snprintf(log, sizeof(log), "%s/stderr.log", ng->dir);
	ng->pid = fx_spawn(argv, log);
	if (ng->pid < 0 || fx_wait_port(ng->port, 20000)) {
		fprintf(stderr, "%s did not start; see %s\n", argv[0], ng->dir);
		return -1;
	}
	return 0;
}

/* Starts nginx on ng's conf. */
static int nginx_spawn(struct fx_nginx *ng)
{
	char path[4200];
	char *argv[] = {(char *)nginx_bin(), "-c", path, "-p", ng->dir, NULL};

	snprintf(path, sizeof(path), "%s/nginx.conf", ng->dir);
	return server_spawn(ng, argv);
}

/* What every nginx of the tests has, its directory as argument 1: a
 * foreground process, logs and temporary files in its directory. */
#define NGINX_TOP                                                              \
	"daemon off;\nmaster_process off;\nworker_processes 1;\n"              \
	"pid %1$s/nginx.pid;\nerror_log %1$s/error.log warn;\n"                \
	"events { worker_connections 1024; }\n"
#define NGINX_TEMPS                                                            \
	" client_body_temp_path %1$s/body;\n proxy_temp_path %1$s/proxy;\n"   \
	" fastcgi_temp_path %1$s/fastcgi;\n uwsgi_temp_path %1$s/uwsgi;\n"    \
	" scgi_temp_path %1$s/scgi;\n"

/* A fresh ng: its directory (TAG) and port, base URL of that scheme.
 * @return 0, or -1 when there is no nginx (ng is then empty). */
static int nginx_init(struct fx_nginx *ng, const char *tag, const char *scheme)
{
	memset(ng, 0, sizeof(*ng));
	if (!nginx_bin()) {
		fprintf(stderr, "%s\n", fx_nginx_missing());
		return -1;
	}
	ng->dir = fx_tmpdir(tag);
	ng->port = fx_free_port();
	snprintf(ng->base, sizeof(ng->base), "%s://127.0.0.1:%d", scheme,
		 ng->port);
	return 0;
}

int fx_nginx_start(struct fx_nginx *ng, const char *root)
{
	char conf[4096], *path;
	FILE *f;

	if (nginx_init(ng, "nginx", "http"))
		return -1;
	snprintf(conf, sizeof(conf),
		 NGINX_TOP "http {\n access_log off;\n" NGINX_TEMPS
		 " types { text/html html; application/octet-stream bin; "
		 "application/json json; }\n"
		 " default_type application/octet-stream;\n"
		 " keepalive_requests 100000;\n"
		 " server {\n  listen 127.0.0.1:%2$d;\n"
		 "  location /json/ { alias %3$s/; autoindex on; "
		 "autoindex_format json; }\n"
		 "  location /html/ { alias %3$s/; autoindex on; }\n"
		 "  location /plain/ { alias %3$s/; }\n"
		 "  location /jsonfile/ { alias %3$s/; index listing.json; }\n"
		 /* `return` takes a literal code, not a capture. */
		 "  location /status/401 { return 401; }\n"
		 "  location /status/403 { return 403; }\n"
		 "  location /status/404 { return 404; }\n"
		 "  location /status/410 { return 410; }\n"
		 "  location /status/429 { return 429; }\n"
		 "  location /status/500 { return 500; }\n"
		 "  location /status/502 { return 502; }\n"
		 "  location /status/503 { return 503; }\n"
		 " }\n}\n",
		 ng->dir, ng->port, root);
	if (asprintf(&path, "%s/nginx.conf", ng->dir) < 0)
		abort();
	f = fopen(path, "w");
	if (!f || fputs(conf, f) < 0 || fclose(f))
		abort();
	free(path);
	return nginx_spawn(ng);
}

void fx_nginx_pause(struct fx_nginx *ng)
{
	if (ng->pid > 0)
		fx_stop(ng->pid, 5000);
	ng->pid = 0;
}

int fx_nginx_resume(struct fx_nginx *ng)
{
	return nginx_spawn(ng);
}

void fx_nginx_stop(struct fx_nginx *ng)
{
	if (ng->pid > 0)
		fx_stop(ng->pid, 5000);
	ng->pid = 0;
	fx_rmtree(ng->dir);
	free(ng->dir);
	ng->dir = NULL;
}

/* Replaces the first `from` in *s by `to`; -1 when there is none. */
static int subst(char **s, const char *from, const char *to)
{
	char *at = strstr(*s, from), *n;

	if (!at) {
		fprintf(stderr, "the shipped site cache config has no '%s'\n",
			from);
		return -1;
	}
	if (asprintf(&n, "%.*s%s%s", (int)(at - *s), *s, to,
		     at + strlen(from)) < 0)
		abort();
	free(*s);
	*s = n;
	return 0;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		abort();
}

int fx_site_cache_start(struct fx_nginx *ng, const char *const origins[],
			const char *slice, const char *const more[])
{
	const char *src = getenv("WHARF_SRCDIR");
	char path[PATH_MAX], listen[64], slice_line[64], cache[PATH_MAX];
	char map[PATH_MAX], *conf, *origin_map = strdup(""), *wrap;
	size_t len;
	int rc = 0;

	if (nginx_init(ng, "sitecache", "http")) {
		free(origin_map);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/examples/site-cache/nginx-wharf.conf",
		 src ? src : "..");
	conf = fx_read_file(path, &len);
	if (!conf) {
		fprintf(stderr, "cannot read %s\n", path);
		return -1;
	}
	for (int i = 0; origins[i]; i++) {
		char *n;

		if (asprintf(&n, "%s\"%s\" $http_x_wharf_origin;\n", origin_map,
			     origins[i]) < 0)
			abort();
		free(origin_map);
		origin_map = n;
	}
	write_text(ng->dir, "origins.map", origin_map);
	free(origin_map);
	snprintf(listen, sizeof(listen), "listen 127.0.0.1:%d;", ng->port);
	snprintf(slice_line, sizeof(slice_line), "slice %s;", slice);
	snprintf(cache, sizeof(cache), "%s/cache", ng->dir);
	snprintf(map, sizeof(map), "%s/origins.map", ng->dir);
	rc |= subst(&conf, "listen 8080;", listen);
	rc |= subst(&conf, "slice 4m;", slice_line);
	rc |= subst(&conf, "/var/cache/nginx/wharf", cache);
	rc |= subst(&conf, "/etc/nginx/wharf-origins.map", map);
	for (int i = 0; more && more[i] && more[i + 1]; i += 2)
		rc |= subst(&conf, more[i], more[i + 1]);
	write_text(ng->dir, "wharf.conf", conf);
	free(conf);
	if (rc)
		return -1;
	/* The shipped file is an http {} include; this is the rest of a
	 * stock nginx.conf, with a log of what the cache did. */
	if (asprintf(&wrap,
		     NGINX_TOP "http {\n log_format sc '$request_method $status "
		     "$upstream_cache_status';\n"
		     " access_log %1$s/access.log sc;\n" NGINX_TEMPS
		     " include %1$s/wharf.conf;\n}\n",
		     ng->dir) < 0)
		abort();
	write_text(ng->dir, "nginx.conf", wrap);
	free(wrap);
	return nginx_spawn(ng);
}

#define SQUID_BIN "/usr/sbin/squid"

const char *fx_squid_missing(void)
{
	return access(SQUID_BIN, X_OK) ? "squid is not installed (apt-get "
					 "install squid)"
				       : NULL;
}

int fx_squid_start(struct fx_nginx *ng, const char *origin)
{
	const char *src = getenv("WHARF_SRCDIR");
	const char *hostport = origin + strlen("http://");
	char path[PATH_MAX], listen[64], cache[PATH_MAX], *conf, *text, *re;
	char *argv[] = {SQUID_BIN, "-N", "-f", path, NULL};
	size_t len;
	int rc = 0;

	memset(ng, 0, sizeof(*ng));
	if (fx_squid_missing())
		return -1;
	ng->dir = fx_tmpdir("squid");
	ng->port = fx_free_port();
	snprintf(ng->base, sizeof(ng->base), "http://127.0.0.1:%d", ng->port);
	/* Squid run by root works as its own user (proxy). */
	if (chmod(ng->dir, 0777))
		return -1;
	snprintf(path, sizeof(path), "%s/examples/site-cache/squid-wharf.conf",
		 src ? src : "..");
	conf = fx_read_file(path, &len);
	snprintf(path, sizeof(path),
		 "%s/examples/site-cache/squid-wharf-storeid", src ? src : "..");
	text = fx_read_file(path, &len);
	if (!conf || !text) {
		fprintf(stderr, "cannot read the shipped Squid files\n");
		free(conf);
		free(text);
		return -1;
	}
	write_text(ng->dir, "storeid", text);
	free(text);
	snprintf(path, sizeof(path), "%s/storeid", ng->dir);
	if (chmod(path, 0755))
		abort();
	/* The origin as the shipped file's examples list one. */
	if (asprintf(&re, "127\\.0\\.0\\.1:%s", strchr(hostport, ':') + 1) < 0 ||
	    asprintf(&text,
		     "cache_peer 127.0.0.1 parent %1$s 0 no-query no-digest "
		     "originserver name=o\n"
		     "acl o url_regex -i ^http://%2$s/\n"
		     "acl o_via req_header X-Wharf-Origin -i ^http://%2$s$\n"
		     "cache_peer_access o allow o o_via\n"
		     "http_access allow o o_via\n",
		     strchr(hostport, ':') + 1, re) < 0)
		abort();
	free(re);
	write_text(ng->dir, "origins.conf", text);
	free(text);
	snprintf(listen, sizeof(listen), "http_port 127.0.0.1:%d ", ng->port);
	snprintf(cache, sizeof(cache), "%s/cache 200", ng->dir);
	rc |= subst(&conf, "http_port 3128 ", listen);
	snprintf(path, sizeof(path), "%s/origins.conf", ng->dir);
	rc |= subst(&conf, "/etc/squid/wharf-origins.conf", path);
	snprintf(path, sizeof(path), "%s/storeid", ng->dir);
	rc |= subst(&conf, "/etc/squid/squid-wharf-storeid", path);
	rc |= subst(&conf, "/var/spool/squid/wharf 500000", cache);
	rc |= subst(&conf, "cache_mem 4096 MB", "cache_mem 64 MB");
	if (asprintf(&text,
		     "%1$s\npid_filename %2$s/squid.pid\n"
		     "access_log stdio:%2$s/access.log squid\n"
		     "cache_log %2$s/cache.log\ncache_store_log none\n"
		     "coredump_dir %2$s\nshutdown_lifetime 1 seconds\n",
		     conf, ng->dir) < 0)
		abort();
	free(conf);
	write_text(ng->dir, "squid.conf", text);
	free(text);
	snprintf(path, sizeof(path), "%s/squid.conf", ng->dir);
	if (rc || fx_sh("'" SQUID_BIN "' -z -N -f '%s' >'%s/z.log' 2>&1", path,
			ng->dir))
		return -1;
	return server_spawn(ng, argv);
}

int fx_nginx_tls_start(struct fx_nginx *ng, const char *root)
{
	char *conf;

	if (nginx_init(ng, "nginx-tls", "https"))
		return -1;
	if (fx_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout "
		  "'%1$s/key.pem' -out '%1$s/cert.pem' -days 2 "
		  "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
		  ">/dev/null 2>&1",
		  ng->dir))
		return -1;
	if (asprintf(&conf,
		     NGINX_TOP "http {\n log_format bytes '$body_bytes_sent';\n"
		     " access_log %1$s/bytes.log bytes;\n" NGINX_TEMPS
		     " server {\n  listen 127.0.0.1:%2$d ssl;\n"
		     "  ssl_certificate %1$s/cert.pem;\n"
		     "  ssl_certificate_key %1$s/key.pem;\n"
		     "  location / { alias %3$s/; autoindex on; "
		     "autoindex_format json; }\n }\n}\n",
		     ng->dir, ng->port, root) < 0)
		abort();
	write_text(ng->dir, "nginx.conf", conf);
	free(conf);
	return nginx_spawn(ng);
}

int fx_nginx_vhosts_start(struct fx_nginx *ng, const char *root,
			  const char *other_name, const char *other_root)
{
	char *conf;

	if (nginx_init(ng, "nginx-vhosts", "http"))
		return -1;
	if (asprintf(&conf,
		     NGINX_TOP "http {\n access_log off;\n" NGINX_TEMPS
		     " gzip on;\n gzip_types *;\n gzip_min_length 1;\n"
		     " gzip_proxied any;\n"
		     " server {\n  listen 127.0.0.1:%2$d default_server;\n"
		     "  location / { alias %3$s/; autoindex on; "
		     "autoindex_format json; }\n }\n"
		     " server {\n  listen 127.0.0.1:%2$d;\n"
		     "  server_name %4$s;\n"
		     "  location / { alias %5$s/; autoindex on; "
		     "autoindex_format json; }\n }\n}\n",
		     ng->dir, ng->port, root, other_name, other_root) < 0)
		abort();
	write_text(ng->dir, "nginx.conf", conf);
	free(conf);
	return nginx_spawn(ng);
}

long fx_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

long long fx_sum_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long long sum = 0, n;

	if (!f)
		return -1;
	while (fscanf(f, "%lld", &n) == 1)
		sum += n;
	fclose(f);
	return sum;
}

int fx_site_cache_counts(const struct fx_nginx *ng,
			 struct fx_site_cache_log *out)
{
	char path[PATH_MAX], method[16], cache[16];
	int status;
	FILE *f;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/access.log", ng->dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%15s %d %15s", method, &status, cache) == 3) {
		if (strcmp(method, "GET"))
			continue;
		if (status == 403)
			out->refused++;
		else if (!strcmp(cache, "HIT"))
			out->hit++;
		else if (!strcmp(cache, "MISS"))
			out->miss++;
	}
	fclose(f);
	return 0;
}

long fx_origin_logged(const char *log, const char *marker)
{
	size_t len;
	char *text = fx_read_file(log, &len), *at;
	long n = -1;

	if (!text)
		return -1;
	at = strstr(text, marker);
	if (at)
		n = strtol(at + strlen(marker), NULL, 10);
	free(text);
	return n;
}

const char *fx_wharf_bin(void)
{
	const char *b = getenv("WHARF_BIN");

	return b && *b ? b : "wharf";
}

char *fx_cmdline(pid_t pid)
{
	char path[64], *text;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	text = fx_read_file(path, &n);
	for (size_t i = 0; text && i + 1 < n; i++)
		if (!text[i])
			text[i] = ' ';
	return text;
}

const char *fx_wharf_real_bin(void)
{
	static char real[PATH_MAX];
	const char *b = fx_wharf_bin(), *bd = getenv("WHARF_BUILDDIR");
	const char *slash = strrchr(b, '/');
	char lib[PATH_MAX];

	snprintf(real, sizeof(real), "%.*s/.libs/wharf",
		 slash ? (int)(slash - b) : 1, slash ? b : ".");
	if (access(real, X_OK))
		snprintf(real, sizeof(real), "%s", b);
	if (bd) {
		snprintf(lib, sizeof(lib), "%s/loader/.libs", bd);
		setenv("LD_LIBRARY_PATH", lib, 1);
	}
	return real;
}

pid_t fx_origin_start(const char *root, const char *const extra[],
		      const char *work_dir, const char *tag, char *url,
		      size_t url_cap)
{
	const char *b = getenv("WHARF_BUILDDIR");
	char bin[PATH_MAX], port_file[PATH_MAX], log[PATH_MAX];
	char *argv[32];
	pid_t pid;
	int n = 0;

	snprintf(bin, sizeof(bin), "%s/bench/origin", b ? b : "..");
	if (access(bin, X_OK)) {
		/* make builds it with the filesystem, as these tests. */
		fprintf(stderr,
			"%s is not built (or WHARF_BUILDDIR is not "
			"the build directory)\n",
			bin);
		return -1;
	}
	snprintf(port_file, sizeof(port_file), "%s/%s.port", work_dir, tag);
	snprintf(log, sizeof(log), "%s/%s.log", work_dir, tag);
	unlink(port_file);
	argv[n++] = bin;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	for (int i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = (char *)extra[i];
	argv[n++] = (char *)root;
	argv[n] = NULL;
	pid = fx_spawn(argv, log);
	if (pid < 0)
		return -1;
	for (int waited = 0; waited < 10000; waited += 20) {
		FILE *f = fopen(port_file, "r");
		int port = 0;

		if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
			fclose(f);
			snprintf(url, url_cap, "http://127.0.0.1:%d/", port);
			if (fx_wait_port(port, 5000) == 0)
				return pid;
			break;
		}
		if (f)
			fclose(f);
		usleep(20000);
	}
	fx_stop(pid, 5000);
	return -1;
}

long long fx_json_num(const char *json, const char *key)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(json, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

pid_t fx_bad_cache_start(const char *work_dir, char *url, size_t url_cap)
{
	const char *src = getenv("WHARF_SRCDIR");
	char script[PATH_MAX], port[16], log[PATH_MAX];
	const int p = fx_free_port();
	char *argv[] = {"/usr/bin/python3", script, port, NULL};
	pid_t pid;

	snprintf(script, sizeof(script), "%s/tests/bad-cache",
		 src ? src : "..");
	snprintf(port, sizeof(port), "%d", p);
	snprintf(log, sizeof(log), "%s/bad-cache.log", work_dir);
	pid = fx_spawn(argv, log);
	if (pid < 0)
		return -1;
	if (fx_wait_port(p, 10000)) {
		fprintf(stderr, "tests/bad-cache did not come up; see %s\n",
			log);
		fx_stop(pid, 5000);
		return -1;
	}
	snprintf(url, url_cap, "http://127.0.0.1:%d", p);
	return pid;
}

int fx_wait_exit(pid_t pid, int timeout_ms)
{
	int status;

	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(10000);
	}
	return -1;
}

bool fx_process_gone(pid_t pid)
{
	char path[64], line[512];
	const char *rp = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	/* "pid (comm) S ...": comm may hold spaces and parentheses. */
	if (fgets(line, sizeof(line), f))
		rp = strrchr(line, ')');
	fclose(f);
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

pid_t fx_spawn_server(char *const argv[], const char *log_path, int port,
		      int timeout_ms)
{
	pid_t pid = fx_spawn(argv, log_path);

	if (pid > 0 && !fx_wait_port(port, timeout_ms))
		return pid;
	fprintf(stderr, "%s did not listen on port %d within %d ms:\n", argv[0],
		port, timeout_ms);
	if (log_path)
		fx_sh("cat '%s' >&2", log_path);
	if (pid > 0)
		fx_stop(pid, 3000);
	return -1;
}

bool fx_log_has(const char *log, const char *pattern)
{
	return fx_sh("grep -q -- '%s' '%s'", pattern, log) == 0;
}

int fx_count_names(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}
