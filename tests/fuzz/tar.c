/* Tar shards' headers (loader/tar.c: tar_walk, tar_wds_walk) on any
 * bytes: a damaged or hostile shard must end in an error naming the shard,
 * never a read outside it or a member that does not fit in it.  Byte 0:
 * bit 0 sets each block's header checksum right, so that the fuzzer gets
 * past it; bit 1 makes the shard 16 GiB longer (zeros, never stored), for
 * sizes in base-256 and pax. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tar.h"

#define SHARD "fuzz.tar"

struct shard {
	const uint8_t *data;
	size_t len;
	uint64_t size; /* len, or more: zeros after the data */
};

static int shard_read(void *arg, uint64_t off, void *buf, size_t len)
{
	const struct shard *s = arg;

	FUZZ_ASSERT(off <= s->size && len <= s->size - off);
	memset(buf, 0, len);
	if (off < s->len)
		memcpy(buf, s->data + off,
		       len < s->len - off ? len : s->len - off);
	return 0;
}

static int check_member(void *arg, const struct tar_member *m)
{
	const struct shard *s = arg;

	FUZZ_ASSERT(m->name[0] != '\0' && strlen(m->name) <= TAR_NAME_MAX);
	FUZZ_ASSERT(m->header < m->offset && m->offset % 512 == 0);
	FUZZ_ASSERT(m->size <= s->size - m->offset);
	FUZZ_ASSERT(m->type == TAR_REGULAR || m->type == TAR_OTHER);
	return 0;
}

static int check_sample(void *arg, const struct tar_sample *smp)
{
	const struct shard *s = arg;

	FUZZ_ASSERT(smp->nfields > 0 && smp->key[0] != '\0');
	for (size_t i = 0; i < smp->nfields; i++) {
		FUZZ_ASSERT(smp->fields[i].ext[0] != '\0');
		FUZZ_ASSERT(smp->fields[i].size <=
			    s->size - smp->fields[i].offset);
	}
	return 0;
}

/* What a walk's result promises: an error has a message naming the
 * shard, success none. */
static void check_result(int rc, char *err)
{
	if (rc == 0) {
		FUZZ_ASSERT(err == NULL);
		return;
	}
	FUZZ_ASSERT(rc == -EBADMSG || rc == -ENOMEM);
	FUZZ_ASSERT(err && !strncmp(err, SHARD ": ", strlen(SHARD ": ")));
	free(err);
}

/* The checksum field of each nonzero block, as tar would write it. */
static void seal_blocks(uint8_t *b, size_t len)
{
	for (size_t at = 0; at + 512 <= len; at += 512) {
		unsigned long sum = 0;
		size_t nz = 0;

		for (size_t i = 0; i < 512; i++)
			nz += b[at + i] != 0;
		if (nz == 0)
			continue; /* an end-of-archive block stays one */
		memset(b + at + 148, ' ', 8);
		for (size_t i = 0; i < 512; i++)
			sum += b[at + i];
		for (int i = 6; i >= 0 && sum; i--, sum >>= 3)
			b[at + 148 + i] = (uint8_t)('0' + (sum & 7));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shard s;
	uint8_t *buf;
	uint64_t skipped = 0;
	char *err = NULL;
	int rc;

	if (size < 1)
		return 0;
	buf = malloc(size);
	FUZZ_ASSERT(buf != NULL);
	memcpy(buf, data + 1, size - 1);
	if (data[0] & 1)
		seal_blocks(buf, size - 1);
	s.data = buf;
	s.len = size - 1;
	s.size = s.len + (data[0] & 2 ? 16ull << 30 : 0);
	/* rc first: err is read only after the walk set it. */
	rc = tar_walk(SHARD, s.size, shard_read, &s, check_member, &s, &err);
	check_result(rc, err);
	err = NULL;
	rc = tar_wds_walk(SHARD, s.size, shard_read, &s, check_sample, &s,
			  &skipped, &err);
	check_result(rc, err);
	free(buf);
	return 0;
}
