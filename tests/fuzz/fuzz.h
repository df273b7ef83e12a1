#ifndef WHARF_TESTS_FUZZ_H
#define WHARF_TESTS_FUZZ_H
/*
 * What the fuzz targets share.  Each target defines LLVMFuzzerTestOneInput;
 * clang's libFuzzer drives it (make fuzz), and replay.c's main() feeds it
 * every file of the target's corpus and regression directories (make
 * check, with any compiler).  A target aborts when a parser breaks one of
 * its own promises, so that a wrong answer is a finding like a crash.
 */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with a message naming the broken promise. */
#define FUZZ_ASSERT(cond)                                                      \
	((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))
void fuzz_fail(const char *file, int line, const char *what)
    __attribute__((noreturn));

/* A malloc'd copy of data with a NUL after it (aborts when out of
 * memory). */
char *fuzz_str(const uint8_t *data, size_t size);

/* The path of a private temporary file now holding exactly data; the same
 * file for every call of one process, removed at exit. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A listing_cb (fs/listing.h) that checks each entry against the header's
 * promises and counts it in *(size_t *)arg. */
struct listing_entry;
int fuzz_check_entry(void *arg, const struct listing_entry *e);
/* The same for a source_list_cb (fs/source.h). */
struct source_object;
int fuzz_check_object(void *arg, const struct source_object *o);
/* The prefix a listing page is parsed for, picked by a byte of input. */
const char *fuzz_list_prefix(uint8_t pick);
/* What an AWS credential parser (fs/origin/creds_aws.h) promises of its
 * result rc, keys, expiry and message (fuzz/check-keys.c). */
struct aws_keys;
void fuzz_check_keys(int rc, const struct aws_keys *k, int64_t expires,
		     const char *err);

#endif
