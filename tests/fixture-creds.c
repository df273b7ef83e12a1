/* What the credential tests share (fixture-creds.h). */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture-creds.h"

static const char *const cred_vars[] = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "GCE_METADATA_HOST",
    "STORAGE_EMULATOR_HOST",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_AUTHORITY_HOST",
    "AZURE_POD_IDENTITY_AUTHORITY_HOST",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_ACCOUNT",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
};

void fxc_clean_env(const char *dir)
{
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(cred_vars) / sizeof(*cred_vars); i++)
		unsetenv(cred_vars[i]);
	snprintf(p, sizeof(p), "%s/none", dir);
	setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
	setenv("AWS_CONFIG_FILE", p, 1);
	setenv("CLOUDSDK_CONFIG", dir, 1);
	unsetenv("HOME");
}

void fxc_write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

struct tap_conn {
	struct tap *t;
	int fd;
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *tap_conn_run(void *arg)
{
	struct tap_conn *tc = arg;
	struct tap *t = tc->t;
	struct sockaddr_in up_at = {.sin_family = AF_INET};
	char buf[16384], seen[8192];
	size_t ns = 0;
	int c = tc->fd, up = -1;

	free(tc);
	if (t->to_port) {
		up_at.sin_port = htons((uint16_t)t->to_port);
		up_at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(up, (struct sockaddr *)&up_at, sizeof(up_at)))
			goto out;
	}
	for (;;) {
		struct pollfd p[2] = {{c, POLLIN, 0}, {up, POLLIN, 0}};
		ssize_t r;

		/* Without an upstream, a client that says no more for a
		 * moment is waiting for an answer that never comes. */
		if (poll(p, 2, up >= 0 ? 30000 : 300) <= 0)
			break;
		if (p[0].revents) {
			r = read(c, buf, sizeof(buf));
			if (r <= 0)
				break;
			if (ns < sizeof(seen) - 1) {
				size_t k = (size_t)r < sizeof(seen) - 1 - ns
					       ? (size_t)r
					       : sizeof(seen) - 1 - ns;

				memcpy(seen + ns, buf, k);
				ns += k;
			}
			if (up >= 0 && write_all(up, buf, (size_t)r))
				break;
		}
		if (up >= 0 && p[1].revents) {
			r = read(up, buf, sizeof(buf));
			if (r <= 0 || write_all(c, buf, (size_t)r))
				break;
		}
	}
	seen[ns] = '\0';
	if (t->marker && strstr(seen, t->marker))
		__atomic_store_n(&t->marked, 1, __ATOMIC_SEQ_CST);
out:
	if (up >= 0)
		close(up);
	close(c); /* after marked: the client's call returns after this */
	__atomic_sub_fetch(&t->active, 1, __ATOMIC_SEQ_CST); /* t's last use */
	return NULL;
}

static void *tap_run(void *arg)
{
	struct tap *t = arg;

	for (;;) {
		struct tap_conn *tc;
		pthread_t th;
		int c = accept4(t->fd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0)
			return NULL; /* tap_stop shut the socket down */
		__atomic_add_fetch(&t->conns, 1, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&t->active, 1, __ATOMIC_SEQ_CST);
		tc = malloc(sizeof(*tc));
		ck_assert_ptr_nonnull(tc);
		tc->t = t;
		tc->fd = c;
		ck_assert_int_eq(pthread_create(&th, NULL, tap_conn_run, tc),
				 0);
		pthread_detach(th);
	}
}

void tap_start(struct tap *t, int to_port, const char *marker)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	const int one = 1;

	memset(t, 0, sizeof(*t));
	t->to_port = to_port;
	t->marker = marker;
	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(t->fd, 0);
	setsockopt(t->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(t->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(t->fd, 16), 0);
	ck_assert_int_eq(getsockname(t->fd, (struct sockaddr *)&a, &al), 0);
	t->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&t->th, NULL, tap_run, t), 0);
}

void tap_stop(struct tap *t)
{
	shutdown(t->fd, SHUT_RDWR);
	pthread_join(t->th, NULL);
	close(t->fd);
	/* Connections end when their clients close, or within the idle
	 * time of tap_conn_run: t outlives them. */
	for (int i = 0; __atomic_load_n(&t->active, __ATOMIC_SEQ_CST); i++) {
		ck_assert_msg(i < 400, "a tap's connection outlived 40 s");
		usleep(100000);
	}
}

int tap_took(struct tap *t, bool *marked)
{
	*marked = __atomic_exchange_n(&t->marked, 0, __ATOMIC_SEQ_CST);
	return __atomic_exchange_n(&t->conns, 0, __ATOMIC_SEQ_CST);
}

const char *tap_other_address(void)
{
	static char out[INET_ADDRSTRLEN];
	struct ifaddrs *all = NULL;

	out[0] = '\0';
	if (getifaddrs(&all))
		return NULL;
	for (struct ifaddrs *i = all; i && !out[0]; i = i->ifa_next) {
		const struct sockaddr_in *a = (void *)i->ifa_addr;

		if (a && a->sin_family == AF_INET &&
		    (ntohl(a->sin_addr.s_addr) >> 24) != 127)
			inet_ntop(AF_INET, &a->sin_addr, out, sizeof(out));
	}
	freeifaddrs(all);
	return out[0] ? out : NULL;
}
