/*
 * fs/origin/source_azure and creds_azure: the List Blobs parser and the
 * credential parsers alone, then `wharf mount az://...` against a real
 * Azurite (npm): Shared Key and SAS mounts, paging past 5,000 blobs, a
 * replaced blob refused by its ETag, an offline remount, the shipped nginx
 * site cache, and bearer tokens from stand-in IMDS and Entra endpoints
 * (tests/azure-tool.py) against a second Azurite that checks them (OAuth
 * needs HTTPS there: a certificate made here, trusted with --ca-file).
 *
 * Azurite is found via $WHARF_AZURITE, else $WHARF_SRCDIR/build/node/
 * node_modules/.bin/azurite-blob (the quickstart installs it there); the
 * test skips when it is absent.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "creds_azure.h"
#include "creds_renew.h"
#include "fixture-ck.h"
#include "fixture.h"
#include "origins.h"
#include "source_azure.h"

#define ACCOUNT "devstoreaccount1"
/* Azurite's well-known development key (public, in its documentation). */
#define KEY                                                                    \
	"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZF" \
	"PTOtr/KBHBeksoGMGw=="
#define CONTAINER "data"
#define MANY 5001 /* past one page of List Blobs (5,000 at most) */
#define TENANT "72f988bf-86f1-41af-91ab-2d7cd011db47"
#define CLIENT "0d2b5d6a-5c2e-4d1b-a9f3-1f6a4b2b7e10"
#define ASSERTION "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ3aGFyZiJ9.c2ln"
#define LIFETIME 8 /* seconds a stand-in token lasts */

static char *work;
static pid_t az_pid = -1, azs_pid = -1, tok_pid = -1;
static char base[96];	  /* http://127.0.0.1:P/ACCOUNT */
static char tls_base[96]; /* https://127.0.0.1:P/ACCOUNT, OAuth on */
static char tok_url[64];  /* the stand-in token endpoints */
static char cert[PATH_MAX];
static char tool[PATH_MAX];

/* ---- The parsers alone. */

struct got {
	int files, dirs;
	char names[8][64], versions[8][64], digests[8][80];
	uint64_t sizes[8];
};

static int collect(void *arg, const struct source_object *o)
{
	struct got *g = arg;
	const int i = g->files + g->dirs;

	if (i < 8) {
		snprintf(g->names[i], sizeof(g->names[i]), "%s", o->name);
		snprintf(g->versions[i], sizeof(g->versions[i]), "%s",
			 o->version);
		snprintf(g->digests[i], sizeof(g->digests[i]), "%s",
			 o->digest ? o->digest : "");
		g->sizes[i] = o->size;
	}
	if (o->is_dir)
		g->dirs++;
	else
		g->files++;
	return 0;
}

static const char page_xml[] =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?>"
    "<EnumerationResults ServiceEndpoint=\"https://a.blob.core.windows.net/\""
    " ContainerName=\"c\"><Prefix>p/</Prefix><Delimiter>/</Delimiter>"
    "<Blobs><Blob><Name>p/</Name><Properties><Content-Length>0"
    "</Content-Length></Properties></Blob>"
    "<Blob><Name>p/a &amp; b.bin</Name><Properties>"
    "<Last-Modified>Tue, 07 May 2024 10:00:00 GMT</Last-Modified>"
    "<Etag>0x8DC6E1234567890</Etag><Content-Length>12345</Content-Length>"
    "<Content-MD5>XUFAKrxLKna5cZ2REBfFkg==</Content-MD5>"
    "<BlobType>BlockBlob</BlobType></Properties><Metadata/></Blob>"
    "<BlobPrefix><Name>p/sub/</Name></BlobPrefix></Blobs>"
    "<NextMarker>2!88!MDAwMDIx</NextMarker></EnumerationResults>";

START_TEST(test_page_parse)
{
	struct azure_page page;
	struct got g = {0};
	char *err = NULL;

	ck_assert_int_eq(azure_parse_list_page(page_xml, strlen(page_xml), "p/",
					       collect, &g, &page, &err),
			 0);
	ck_assert_int_eq(g.files, 1);
	ck_assert_int_eq(g.dirs, 1);
	ck_assert_str_eq(g.names[0], "a & b.bin");
	ck_assert_uint_eq(g.sizes[0], 12345);
	/* quoted, as the ETag header that If-Match and answers carry */
	ck_assert_str_eq(g.versions[0], "\"0x8DC6E1234567890\"");
	ck_assert_str_eq(g.digests[0], "md5:5d41402abc4b2a76b9719d911017c592");
	ck_assert_str_eq(g.names[1], "sub");
	ck_assert_str_eq(page.marker, "2!88!MDAwMDIx");
	ck_assert_uint_eq(page.names, 3); /* the marker blob counts */
}
END_TEST

#define NAME_64                                                                \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde/"
#define LONG_NAME                                                              \
	NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64        \
	    NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64 NAME_64    \
	    "x/"

START_TEST(test_page_malformed)
{
	static const char *const bad[] = {
	    "<ListBucketResult></ListBucketResult>",
	    "<EnumerationResults><Blobs><Blob><Name>x</Name></Blob></Blobs>"
	    "</EnumerationResults>",
	    "<EnumerationResults><Blobs></EnumerationResults>",
	    "<!DOCTYPE x><EnumerationResults/>",
	    "<EnumerationResults><Blobs><BlobPrefix><Name>" LONG_NAME
	    "</Name></BlobPrefix></Blobs></EnumerationResults>",
	    "",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct azure_page page;
		struct got g = {0};
		char *err = NULL;
		int rc = azure_parse_list_page(bad[i], strlen(bad[i]), "",
					       collect, &g, &page, &err);

		ck_assert_msg(rc == -EIO && err, "%s: rc %d", bad[i], rc);
		free(err);
	}
}
END_TEST

START_TEST(test_cred_parsers)
{
	char sas[AZURE_SAS_MAX], *tok = malloc(AZURE_TOKEN_MAX), *err = NULL;
	unsigned char key[AZURE_KEY_MAX];
	uint64_t exp = 0;
	size_t klen;
	static const char imds[] =
	    "{\"access_token\":\"eyJ0.eyJ1.c2ln\",\"expires_in\":\"3599\","
	    "\"token_type\":\"Bearer\",\"resource\":\"https://storage.azure."
	    "com/\"}";
	static const char entra[] =
	    "{\"token_type\":\"Bearer\",\"expires_in\":3599,"
	    "\"access_token\":\"abc\"}";

	ck_assert_int_eq(
	    azure_sas_parse(" ?sv=2021&sp=rl&sig=a%2Bb\n", sas, "t", &err), 0);
	ck_assert_str_eq(sas, "sv=2021&sp=rl&sig=a%2Bb");
	ck_assert_int_eq(azure_sas_parse("sv=2021&sp=rl", sas, "t", &err),
			 -EINVAL);
	ck_assert_ptr_null(strstr(err, "sv=2021")); /* never the secret */
	free(err);
	err = NULL;
	ck_assert_int_eq(azure_sas_parse("sig=a b", sas, "t", &err), -EINVAL);
	free(err);
	err = NULL;
	ck_assert_int_eq(azure_key_parse(KEY "\n", key, &klen, "k", &err), 0);
	ck_assert_uint_eq(klen, 64);
	ck_assert_int_eq(azure_key_parse("abc", key, &klen, "k", &err),
			 -EINVAL);
	free(err);
	err = NULL;
	ck_assert_int_eq(azure_key_parse("ab=c", key, &klen, "k", &err),
			 -EINVAL);
	free(err);
	err = NULL;
	ck_assert_int_eq(oauth_token_parse(imds, strlen(imds), tok,
					   AZURE_TOKEN_MAX, AZURE_TOKEN_RULES,
					   &exp, "IMDS", &err),
			 0);
	ck_assert_str_eq(tok, "eyJ0.eyJ1.c2ln");
	ck_assert_uint_eq(exp, 3599);
	ck_assert_int_eq(oauth_token_parse(entra, strlen(entra), tok,
					   AZURE_TOKEN_MAX, AZURE_TOKEN_RULES,
					   &exp, "Entra", &err),
			 0);
	ck_assert_str_eq(tok, "abc");
	ck_assert_int_eq(oauth_token_parse("{\"access_token\":\"x\"}", 20, tok,
					   AZURE_TOKEN_MAX, AZURE_TOKEN_RULES,
					   &exp, "Entra", &err),
			 -EINVAL);
	free(err);
	free(tok);
}
END_TEST

/* What a source URL may be, checked before anything is contacted. */
START_TEST(test_spec_errors)
{
	static const struct {
		const char *spec, *why;
	} bad[] = {
	    {"az://AB/data", "account"},
	    {"az://acct/x", "container"},
	    {"az://acct/Data", "container"},
	    {"az://acct/data/../x", "'..'"},
	    {"https://acct.blob.core.windows.net/d", "container"},
	    {"az://acct/data?sv=1&sig=SECRET#f", "fragment"},
	};
	struct source_options opt = {.no_check = true};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct source *src = NULL;
		char *err = NULL;
		int rc = source_open(bad[i].spec, &opt, NULL, &src, &err);

		ck_assert_msg(rc == -EINVAL && err && strstr(err, bad[i].why),
			      "%s: rc %d, %s", bad[i].spec, rc,
			      err ? err : "no message");
		ck_assert_ptr_null(strstr(err, "SECRET"));
		free(err);
	}
	/* The blob host is Azure's, not a plain https:// prefix; the id
	 * names the data, never the SAS. */
	{
		struct source *src = NULL;
		char *err = NULL;

		ck_assert_int_eq(
		    source_open("https://acct.blob.core.windows.net/data/a//b"
				"?sv=1&sig=SECRET",
				&opt, NULL, &src, &err),
		    0);
		ck_assert_str_eq(src->ops->scheme, "az");
		ck_assert_str_eq(src->id, "az://acct/data/a/b/");
		source_close(src);
		ck_assert_int_eq(
		    source_open("az://acct/data", &opt, NULL, &src, &err), 0);
		ck_assert_str_eq(src->id, "az://acct/data/");
		source_close(src);
		/* A sovereign cloud's host is the endpoint, and in the id. */
		ck_assert_int_eq(
		    source_open(
			"https://acct.blob.core.chinacloudapi.cn/data/p", &opt,
			NULL, &src, &err),
		    0);
		ck_assert_str_eq(src->id,
				 "az+https://acct.blob.core.chinacloudapi.cn/"
				 "data/p/");
		source_close(src);
	}
}
END_TEST

/* ---- The servers. */

static pid_t azurite_start(const char *tag, int port, bool tls)
{
	char log[PATH_MAX], p[16], key[PATH_MAX];
	char *argv[] = {(char *)fx_node_bin("WHARF_AZURITE", "azurite-blob"),
			"--blobHost",
			"127.0.0.1",
			"--blobPort",
			p,
			"--inMemoryPersistence",
			"--skipApiVersionCheck",
			"--silent",
			tls ? "--oauth" : NULL,
			"basic",
			"--cert",
			cert,
			"--key",
			key,
			NULL};
	pid_t pid;

	snprintf(log, sizeof(log), "%s/%s.log", work, tag);
	snprintf(p, sizeof(p), "%d", port);
	snprintf(key, sizeof(key), "%s/key.pem", work);
	pid = fx_spawn_server(argv, log, port, 30000);
	ck_assert_msg(pid > 0, "azurite (%s) did not start", tag);
	return pid;
}

/* tests/azure-tool.py CMD BASE ACCOUNT KEY CONTAINER ARGS... */
static void tool_in(const char *b, const char *cmd, const char *container,
		    const char *args)
{
	ck_assert_msg(fx_sh("/usr/bin/python3 '%s' %s '%s' " ACCOUNT " '" KEY
			    "' %s %s",
			    tool, cmd, b, container, args) == 0,
		      "azure-tool.py %s %s failed", cmd, args);
}

static void tool_run(const char *b, const char *cmd, const char *args)
{
	tool_in(b, cmd, CONTAINER, args);
}

/* Blob NAME of the fx_write_file bytes of size and seed, on both. */
static void put_blob(const char *name, uint64_t size, uint32_t seed)
{
	char path[PATH_MAX], args[PATH_MAX + 256];

	snprintf(path, sizeof(path), "%s/blob.tmp", work);
	ck_assert_int_eq(fx_write_file(path, size, seed), 0);
	snprintf(args, sizeof(args), "'%s' '%s'", name, path);
	tool_run(base, "put", args);
	tool_run(tls_base, "put", args);
}

static void servers_stop(void)
{
	if (tok_pid > 0)
		fx_stop(tok_pid, 3000);
	if (azs_pid > 0)
		fx_stop(azs_pid, 3000);
	if (az_pid > 0)
		fx_stop(az_pid, 3000);
	tok_pid = azs_pid = az_pid = -1;
	fx_work_free(&work);
}

static void servers_start(void)
{
	const char *src = getenv("WHARF_SRCDIR");
	char port_file[PATH_MAX], *text, life[16];
	int port, tls_port, i;
	size_t len;

	work = fx_tmpdir("azure");
	ck_assert_ptr_nonnull(work);
	snprintf(tool, sizeof(tool), "%s/tests/azure-tool.py", src ? src : ".");
	snprintf(cert, sizeof(cert), "%s/cert.pem", work);
	ck_assert_int_eq(
	    fx_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout "
		  "'%1$s/key.pem' -out '%1$s/cert.pem' -days 2 -subj "
		  "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
		  ">/dev/null 2>&1",
		  work),
	    0);
	port = fx_free_port();
	az_pid = azurite_start("azurite", port, false);
	tls_port = fx_free_port();
	azs_pid = azurite_start("azurite-tls", tls_port, true);
	snprintf(base, sizeof(base), "http://127.0.0.1:%d/" ACCOUNT, port);
	snprintf(tls_base, sizeof(tls_base), "https://127.0.0.1:%d/" ACCOUNT,
		 tls_port);
	{
		char *argv[] = {"/usr/bin/python3",
				tool,
				"tokens",
				port_file,
				life,
				TENANT,
				CLIENT,
				ASSERTION,
				NULL};
		char log[PATH_MAX];

		snprintf(port_file, sizeof(port_file), "%s/tokens.port", work);
		snprintf(life, sizeof(life), "%d", LIFETIME);
		snprintf(log, sizeof(log), "%s/tokens.log", work);
		tok_pid = fx_spawn(argv, log);
		ck_assert_int_gt(tok_pid, 0);
	}
	for (i = 0; i < 100 && access(port_file, F_OK); i++)
		usleep(100000);
	text = fx_read_file(port_file, &len);
	ck_assert_ptr_nonnull(text);
	snprintf(tok_url, sizeof(tok_url), "http://127.0.0.1:%d", atoi(text));
	free(text);
	tool_run(base, "many", "many/k " /* COUNT */ "5001");
}

/* ---- Through a real `wharf mount az://...`. */

static void env_clear(void)
{
	static const char *const names[] = {
	    "AZURE_STORAGE_ACCOUNT",   "AZURE_STORAGE_KEY",
	    "AZURE_STORAGE_SAS_TOKEN", "AZURE_FEDERATED_TOKEN_FILE",
	    "AZURE_CLIENT_ID",	       "AZURE_TENANT_ID",
	    "AZURE_AUTHORITY_HOST",    "AZURE_POD_IDENTITY_AUTHORITY_HOST",
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		unsetenv(names[i]);
}

/* `wharf mount -f` of url at endpoint b (+ extra options), fresh. */
static int mount_at(struct fx_mount *m, const char *tag, const char *url,
		    const char *b, const char *const extra[])
{
	const char *const opts[] = {"--retries", "1",  "--endpoint", b,
				    "--ca-file", cert, NULL};

	fx_mount_init(m, work, tag);
	return fx_mount_start(m, url, opts, extra);
}
#define mount_ok(m, tag, url, b, extra)                                        \
	fx_mount_ok(mount_at(m, tag, url, b, extra), m)

/* An account SAS (read, list) that expires then. */
static char *sas_token(const char *expiry)
{
	char path[PATH_MAX], *text;
	size_t len;

	snprintf(path, sizeof(path), "%s/sas.txt", work);
	ck_assert_int_eq(fx_sh("/usr/bin/python3 '%s' sas " ACCOUNT " '" KEY
			       "' %s >'%s'",
			       tool, expiry, path),
			 0);
	text = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(text);
	text[strcspn(text, "\n")] = '\0';
	return text;
}

/* Bytes of dir/name that differ from what seed made; -1: unreadable. */
static long long read_seed(const char *dir, const char *name, uint32_t seed)
{
	uint64_t got = 0;

	return fx_read_seed(dir, name, seed, &got);
}

START_TEST(test_shared_key_and_sas)
{
	static const uint64_t size = (3u << 20) + 4097;
	struct fx_mount key_m, sas_m;
	char url[PATH_MAX], *sas = sas_token("2099-01-01T00:00:00Z");

	put_blob("ks/a b.bin", size, 7);
	put_blob("ks/sub/one", 1, 8);
	env_clear();
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	mount_ok(&key_m, "key", "az://" ACCOUNT "/" CONTAINER "/ks", base,
		 NULL);
	unsetenv("AZURE_STORAGE_KEY");
	snprintf(url, sizeof(url), "az://" ACCOUNT "/" CONTAINER "/ks?%s", sas);
	mount_ok(&sas_m, "sas", url, base, NULL);
	ck_assert_int_eq(read_seed(key_m.dir, "a b.bin", 7), 0);
	ck_assert_int_eq(read_seed(sas_m.dir, "a b.bin", 7), 0);
	ck_assert_int_eq(read_seed(sas_m.dir, "sub/one", 8), 0);
	/* Checked whole against the blob's Content-MD5. */
	ck_assert_int_gt(
	    fx_mount_stat(key_m.dir, "origin_checksums", "checked"), 0);
	ck_assert_int_eq(
	    fx_mount_stat(key_m.dir, "origin_checksums", "mismatches"), 0);
	ck_assert_msg(fx_log_has(key_m.log, "Shared Key of account " ACCOUNT),
		      "the log does not name the provider");
	ck_assert_msg(!fx_log_has(sas_m.log, "sig="),
		      "the SAS reached the log");
	{
		char *cmd = fx_cmdline(sas_m.pid);

		ck_assert_ptr_nonnull(cmd);
		ck_assert_msg(!strstr(cmd, "sig="), "ps shows the SAS: %s",
			      cmd);
		free(cmd);
	}
	ck_assert_msg(!fx_log_has(key_m.log, "Eby8vdM02x"),
		      "the key reached the log");
	ck_assert_int_eq(fx_mount_stop(&key_m), 0);
	ck_assert_int_eq(fx_mount_stop(&sas_m), 0);
	free(sas);
}
END_TEST

START_TEST(test_wrong_key)
{
	struct fx_mount m;

	env_clear();
	/* the same length, another key */
	setenv("AZURE_STORAGE_KEY",
	       "AAAAvdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
	       "K1SZFPTOtr/KBHBeksoGMGw==",
	       1);
	ck_assert_int_ne(
	    mount_at(&m, "badkey", "az://" ACCOUNT "/" CONTAINER, base, NULL),
	    0);
	ck_assert_msg(fx_log_has(m.log, "access denied: check the credentials "
					"(Shared Key"),
		      "no clear message for a wrong key");
	unsetenv("AZURE_STORAGE_KEY");
}
END_TEST

START_TEST(test_paging)
{
	struct fx_mount m;
	char path[PATH_MAX + 16];

	env_clear();
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	mount_ok(&m, "many", "az://" ACCOUNT "/" CONTAINER, base, NULL);
	snprintf(path, sizeof(path), "%s/many", m.dir);
	ck_assert_int_eq(fx_count_names(path, "k"), MANY);
	snprintf(path, sizeof(path), "%s/many/k05000", m.dir);
	{
		char *text = fx_read_file(path, &(size_t){0});

		ck_assert_ptr_nonnull(text);
		ck_assert_int_eq(strncmp(text, "5000\n", 5), 0);
		free(text);
	}
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	unsetenv("AZURE_STORAGE_KEY");
}
END_TEST

/* Listed (so pinned) at one ETag, replaced, then read: EIO, no bytes. */
START_TEST(test_replaced)
{
	struct fx_mount m;
	char path[PATH_MAX + 16];
	unsigned char buf[4096];
	ssize_t got;
	int fd;

	put_blob("pin/obj", 2u << 20, 21);
	env_clear();
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	mount_ok(&m, "pin", "az://" ACCOUNT "/" CONTAINER "/pin", base, NULL);
	snprintf(path, sizeof(path), "%s/obj", m.dir);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	put_blob("pin/obj", 2u << 20, 22);
	got = pread(fd, buf, sizeof(buf), 0);
	ck_assert_msg(got == -1 && errno == EIO,
		      "a replaced blob read %zd bytes (errno %d)", got, errno);
	close(fd);
	ck_assert_msg(fx_log_has(m.log, "changed while open"),
		      "no clear log line for the replaced blob");
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	unsetenv("AZURE_STORAGE_KEY");
}
END_TEST

/* --anonymous reads a public container, and is refused a private one
 * with a message that says so. */
START_TEST(test_anonymous)
{
	const char *const anon[] = {"--anonymous", NULL};
	char path[PATH_MAX], args[PATH_MAX + 64];
	struct fx_mount m;

	snprintf(path, sizeof(path), "%s/public.tmp", work);
	ck_assert_int_eq(fx_write_file(path, 70000, 61), 0);
	snprintf(args, sizeof(args), "p.bin '%s'", path);
	tool_in(base, "public", "open", args);
	env_clear();
	setenv("AZURE_STORAGE_KEY", KEY, 1); /* --anonymous wins */
	mount_ok(&m, "anon", "az://" ACCOUNT "/open", base, anon);
	ck_assert_int_eq(read_seed(m.dir, "p.bin", 61), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_ne(
	    mount_at(&m, "anonpriv", "az://" ACCOUNT "/" CONTAINER, base, anon),
	    0);
	ck_assert_msg(fx_log_has(m.log, "the container is not public"),
		      "no clear message for a private container");
	unsetenv("AZURE_STORAGE_KEY");
}
END_TEST

/* Read once, then mounted again from the cache alone (--offline). */
START_TEST(test_offline)
{
	struct fx_mount m;
	char cache[FX_MOUNT_PATH];

	put_blob("off/x.bin", (1u << 20) + 3, 31);
	env_clear();
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	mount_ok(&m, "on", "az://" ACCOUNT "/" CONTAINER "/off", base, NULL);
	ck_assert_int_eq(read_seed(m.dir, "x.bin", 31), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	memcpy(cache, m.cache, sizeof(cache));
	unsetenv("AZURE_STORAGE_KEY");
	/* No credentials: nothing is asked. */
	fx_mount_init(&m, work, "off");
	memcpy(m.cache, cache, sizeof(cache));
	{
		const char *const opts[] = {"--endpoint", base, "--offline",
					    NULL};

		fx_mount_ok(fx_mount_start(&m,
					   "az://" ACCOUNT "/" CONTAINER "/off",
					   opts, NULL),
			    &m);
	}
	ck_assert_int_eq(read_seed(m.dir, "x.bin", 31), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
}
END_TEST

/* Two mounts with SASes of their own through the shipped nginx config:
 * the second reads from the cache, the SAS not being in its key. */
START_TEST(test_site_cache)
{
	struct fx_nginx site = {0};
	const char *origins[] = {NULL, NULL};
	char origin[64], url[PATH_MAX];
	char *sas = sas_token("2099-01-01T00:00:00Z");
	char *sas2 = sas_token("2098-01-01T00:00:00Z");
	struct fx_mount a, b;
	const char *const extra_tpl[] = {
	    "--site-cache", NULL, "--site-cache-insecure-credentials", NULL};
	const char *extra[4];
	int hits, misses;

	put_blob("sc/a.bin", (3u << 20) + 5, 41);
	snprintf(origin, sizeof(origin), "%.*s",
		 (int)(strrchr(base, '/') - base), base);
	origins[0] = origin;
	ck_assert_int_eq(fx_site_cache_start(&site, origins, "1m", NULL), 0);
	memcpy(extra, extra_tpl, sizeof(extra));
	extra[1] = site.base;
	env_clear();
	snprintf(url, sizeof(url), "az://" ACCOUNT "/" CONTAINER "/sc?%s", sas);
	mount_ok(&a, "sca", url, base, extra);
	ck_assert_int_eq(read_seed(a.dir, "a.bin", 41), 0);
	ck_assert_int_eq(fx_mount_stop(&a), 0);
	/* Another node's SAS: another signature, the same entries. */
	ck_assert_str_ne(sas, sas2);
	setenv("AZURE_STORAGE_SAS_TOKEN", sas2, 1);
	mount_ok(&b, "scb", "az://" ACCOUNT "/" CONTAINER "/sc", base, extra);
	ck_assert_int_eq(read_seed(b.dir, "a.bin", 41), 0);
	ck_assert_int_eq(fx_mount_stop(&b), 0);
	unsetenv("AZURE_STORAGE_SAS_TOKEN");
	hits = fx_sh("test $(grep -c 'GET 206 HIT' '%s/access.log') -ge 4",
		     site.dir);
	misses = fx_sh("test $(grep -c 'GET 206 MISS' '%s/access.log') -le 4",
		       site.dir);
	if (hits || misses)
		fx_sh("cat '%s/access.log' >&2", site.dir);
	ck_assert_msg(hits == 0, "the second mount did not read the cache");
	ck_assert_msg(misses == 0, "chunks went to the origin twice");
	/* Shared Key through the cache is refused at mount time, naming
	 * what works instead. */
	setenv("AZURE_STORAGE_KEY", KEY, 1);
	ck_assert_int_ne(mount_at(&b, "sck", "az://" ACCOUNT "/" CONTAINER
					     "/sc",
				  base, extra),
			 0);
	unsetenv("AZURE_STORAGE_KEY");
	ck_assert_msg(fx_log_has(b.log, "through a site cache give a SAS"),
		      "no clear refusal of Shared Key through the site cache");
	fx_nginx_stop(&site);
	free(sas);
	free(sas2);
}
END_TEST

/* A stand-in's counter (azure-tool.py, /_stats). */
static long long tok_count(const char *name)
{
	char path[PATH_MAX], *json;
	size_t len;
	long long n;

	snprintf(path, sizeof(path), "%s/tok-stats.json", work);
	ck_assert_int_eq(fx_sh("curl -sf '%s/_stats' >'%s'", tok_url, path), 0);
	json = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(json);
	n = fx_json_num(json, name);
	free(json);
	return n;
}

/*
 * A bearer mount reads for longer than two token lifetimes, against an
 * Azurite that refuses expired tokens: every read succeeds, and the
 * provider was asked again (renewals) off the read path.
 */
static void bearer_reads(const char *tag, const char *counter, int fail)
{
	const int rounds = 2 * LIFETIME + 2;
	struct fx_mount m;
	long long before = tok_count(counter);
	char name[128], dir[32];

	/* A fresh directory each second: its listing, on first use, and
	 * its blob go to the origin with the token current then (a walk
	 * may read ahead blobs of one directory, never list another). */
	snprintf(dir, sizeof(dir), "tok-%s", tag);
	for (int i = 0; i < rounds; i++) {
		snprintf(name, sizeof(name), "%s/d%02d/r", dir, i);
		put_blob(name, 100000 + (uint64_t)i, 51 + (uint32_t)i);
	}
	snprintf(name, sizeof(name), "az://" ACCOUNT "/" CONTAINER "/%s", dir);
	mount_ok(&m, tag, name, tls_base, NULL);
	/* The provider refuses the next renewals: the old token serves
	 * while they are tried again, before it expires. */
	if (fail)
		ck_assert_int_eq(
		    fx_sh("curl -sf '%s/_fail?count=%d' >/dev/null", tok_url,
			  fail),
		    0);
	for (int i = 0; i < rounds; i++) {
		snprintf(name, sizeof(name), "d%02d/r", i);
		ck_assert_msg(read_seed(m.dir, name, 51 + (uint32_t)i) == 0,
			      "%s: %s unreadable after %d s", tag, name, i);
		sleep(1);
	}
	ck_assert_msg(tok_count(counter) - before >= 3,
		      "%s: %lld tokens in %d s of %d s tokens", tag,
		      tok_count(counter) - before, rounds, LIFETIME);
	ck_assert_msg(!fx_log_has(m.log, "c2ln"), "a token reached the log");
	ck_assert_msg(!fail || fx_log_has(m.log, "the current ones stay valid"),
		      "%s: no log line for the failed renewal", tag);
	/* Counted where the other clouds' renewals are. */
	ck_assert_msg(fx_mount_stat(m.dir, "credentials", "renewals") >= 2,
		      "%s: %lld renewals counted in .wharf/stats", tag,
		      fx_mount_stat(m.dir, "credentials", "renewals"));
	ck_assert_int_ge(
	    fx_mount_stat(m.dir, "credentials", "renewal_failures"), fail);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
}

START_TEST(test_managed_identity)
{
	env_clear();
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", tok_url, 1);
	bearer_reads("imds", "imds", 0);
	bearer_reads("imds-fail", "imds", 1);
	unsetenv("AZURE_POD_IDENTITY_AUTHORITY_HOST");
}
END_TEST

START_TEST(test_workload_identity)
{
	char file[PATH_MAX];

	snprintf(file, sizeof(file), "%s/federated-token", work);
	ck_assert_int_eq(fx_sh("echo '" ASSERTION "' >'%s'", file), 0);
	env_clear();
	setenv("AZURE_FEDERATED_TOKEN_FILE", file, 1);
	setenv("AZURE_CLIENT_ID", CLIENT, 1);
	setenv("AZURE_TENANT_ID", TENANT, 1);
	setenv("AZURE_AUTHORITY_HOST", tok_url, 1);
	bearer_reads("wi", "entra", 0);
	/* A client the token endpoint does not know: refused at mount time,
	 * naming the provider. */
	{
		struct fx_mount m;

		setenv("AZURE_CLIENT_ID", "someone-else", 1);
		ck_assert_int_ne(mount_at(&m, "wibad",
					  "az://" ACCOUNT "/" CONTAINER,
					  tls_base, NULL),
				 0);
		ck_assert_msg(fx_log_has(m.log, "workload identity (client "
						"someone-else"),
			      "the refusal does not name the provider");
	}
	env_clear();
}
END_TEST

/*
 * A stat whose bearer token the service refuses renews the token on its
 * own thread and sends the HEAD once more, as a listing page does (one
 * loop, source_fetch_signed).  The stand-in hands the renewal thread a
 * token already expired but said to last an hour, so that nothing else
 * renews it before the stat meets the refusal.
 */
START_TEST(test_stat_renews)
{
	struct source_options opt = {.endpoint = tls_base};
	struct fetch_config cfg;
	struct fetch_engine *fe;
	struct source *src = NULL;
	struct source_object o;
	uint64_t r0, r, fails;
	long long i0, imds;
	char *err = NULL;
	int i;

	put_blob("renew/obj", 5000, 71);
	env_clear();
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", tok_url, 1);
	fetch_config_default(&cfg);
	cfg.retries = 1;
	cfg.ca_file = cert;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
	ck_assert_msg(source_open("az://" ACCOUNT "/" CONTAINER "/renew", &opt,
				  fe, &src, &err) == 0,
		      "%s", err ? err : "?");
	/* Every token handed out from here on is a renewal of this
	 * process's: wait until it holds the expired one. */
	i0 = tok_count("imds");
	creds_renew_counts(&r0, &fails);
	ck_assert_int_eq(
	    fx_sh("curl -sf '%s/_expired?count=1' >/dev/null", tok_url), 0);
	for (i = 0; i < 600; i++) {
		imds = tok_count("imds");
		creds_renew_counts(&r, &fails);
		if (tok_count("expired") == 1 &&
		    (long long)(r - r0) >= imds - i0)
			break;
		usleep(100000);
	}
	ck_assert_msg(i < 600, "the expired token was not taken in 60 s");
	i0 = tok_count("imds");
	creds_renew_counts(&r0, &fails);
	ck_assert_int_eq(src->ops->stat(src, "obj", &o), 0);
	ck_assert_uint_eq(o.size, 5000);
	ck_assert(!o.is_dir);
	/* Renewed once, by the refusal. */
	creds_renew_counts(&r, &fails);
	ck_assert_int_eq(tok_count("imds"), i0 + 1);
	ck_assert_uint_eq(r, r0 + 1);
	source_close(src);
	fetch_engine_free(fe);
	env_clear();
}
END_TEST

static const char *missing(void)
{
	const char *why = fx_node_missing("WHARF_AZURITE", "azurite-blob");

	if (why)
		return why;
	if (access("/usr/bin/python3", X_OK))
		return "/usr/bin/python3 (for tests/azure-tool.py) is absent";
	if (fx_sh("openssl version >/dev/null 2>&1 && curl --version "
		  ">/dev/null 2>&1"))
		return "openssl or curl is not installed";
	return NULL;
}

int main(void)
{
	Suite *s = suite_create("azure");
	TCase *unit = tcase_create("parse");
	TCase *tc = tcase_create("azurite");
	TCase *left = tcase_create("left out");
	const char *why = missing();
	const char *why_mount = why ? why : fx_fuse_missing();
	const char *why_site = why_mount ? why_mount : fx_nginx_missing();

	tcase_add_test(unit, test_page_parse);
	tcase_add_test(unit, test_page_malformed);
	tcase_add_test(unit, test_cred_parsers);
	tcase_add_test(unit, test_spec_errors);
	suite_add_tcase(s, unit);

	tcase_add_unchecked_fixture(tc, servers_start, servers_stop);
	tcase_set_timeout(tc, 300);
#define ADD(t, why) fx_tcase_add((why) ? left : tc, t, why)
	ADD(test_shared_key_and_sas, why_mount);
	ADD(test_wrong_key, why_mount);
	ADD(test_paging, why_mount);
	ADD(test_replaced, why_mount);
	ADD(test_anonymous, why_mount);
	ADD(test_offline, why_mount);
	ADD(test_site_cache, why_site);
	ADD(test_managed_identity, why_mount);
	ADD(test_workload_identity, why_mount);
	ADD(test_stat_renews, why_mount);
#undef ADD
	if (!why_mount)
		suite_add_tcase(s, tc);
	suite_add_tcase(s, left);

	return fx_suite_run(s);
}
