#ifndef WHARF_TEST_FIXTURE_TAP_H
#define WHARF_TEST_FIXTURE_TAP_H
/*
 * A tap: a listener on every address of this machine that records what
 * reaches it, for tests of where credentials go (test-trust, test-creds).
 * It counts the connections it takes and notes whether one carried
 * `marker`.  With to_port it relays each connection to 127.0.0.1:to_port,
 * so that an origin on loopback is reached over another address; without,
 * it answers nothing and closes a connection once the client stops
 * sending.  Its checks fail the test through Check.
 */
#include <stdbool.h>

#include <pthread.h>

struct tap {
	int fd, port, to_port;
	const char *marker; /* may be changed between a test's steps */
	pthread_t th;
	int conns, marked, active; /* atomic */
};

void tap_start(struct tap *t, int to_port, const char *marker);
void tap_stop(struct tap *t);

/* The connections the tap took since the last call, and whether one
 * carried its marker; both start again from 0. */
int tap_took(struct tap *t, bool *marked);

/* An IPv4 address of this machine that is not loopback, or NULL: what a
 * host elsewhere on the network looks like to wharf's checks, while a
 * tap still hears what is sent there. */
const char *tap_other_address(void);

#endif
