#ifndef WHARF_TEST_FIXTURE_CREDS_H
#define WHARF_TEST_FIXTURE_CREDS_H
/*
 * What the credential tests (test-creds, test-trust) share: an environment
 * with no credentials of the caller's, small files, and a tap.  The checks
 * fail the test through Check.
 *
 * A tap is a listener on every address of this machine that records what
 * reaches it, for tests of where credentials go.  It counts the connections it
 * takes and notes whether one carried `marker`.  With to_port it relays each
 * connection to 127.0.0.1:to_port, so that an origin on loopback is reached
 * over another address; without, it answers nothing and closes a connection
 * once the client stops sending.
 */
#include <stdbool.h>

#include <pthread.h>

struct tap {
	int fd, port, to_port;
	const char *marker; /* may be changed between a test's steps */
	pthread_t th;
	int conns, marked, active; /* atomic */
};

/* Unsets every variable that picks credentials or says where they go
 * (AWS, Google, Azure, proxies), points the AWS shared files at the absent
 * dir/none and gcloud's at dir, and unsets HOME: nothing of the caller's
 * environment leaks in. */
void fxc_clean_env(const char *dir);

/* Writes text to path. */
void fxc_write_text(const char *path, const char *text);

void tap_start(struct tap *t, int to_port, const char *marker);
void tap_stop(struct tap *t);

/* The connections the tap took since the last call, and whether one
 * carried its marker; both start again from 0. */
int tap_took(struct tap *t, bool *marked);

/* An IPv4 address of this machine that is not loopback, or NULL: what a
 * host elsewhere on the network looks like to wharf's checks, while a
 * tap still hears what is sent there. */
const char *tap_other_address(void);
/* Why a test that needs one skips without it. */
#define TAP_NO_OTHER_ADDRESS                                                   \
	"no non-loopback IPv4 address to stand for a host elsewhere"

#endif
