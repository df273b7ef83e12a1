#ifndef WHARF_FS_CHECKSUM_H
#define WHARF_FS_CHECKSUM_H
/*
 * checksum: the whole-object checksums origins give (GCS crc32c, S3
 * single-part MD5 ETags, a manifest's digest column), in one text form,
 * "ALGO:HEX" with ALGO crc32c, md5 or sha256 and HEX lowercase, and the
 * code that computes them.  CRC32C is the Castagnoli CRC of iSCSI and
 * GCS (the SSE4.2 instruction where the CPU has it); two CRCs combine
 * into the CRC of the concatenation, so an object's CRC comes from its
 * chunks' without reading them again.  MD5 and SHA-256 are libcrypto's.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


enum checksum_algo {
	CHECKSUM_NONE,
	CHECKSUM_CRC32C,
	CHECKSUM_MD5,
	CHECKSUM_SHA256
};

/* "sha256:" + 64 hex digits + NUL */
#define CHECKSUM_TEXT_MAX 72

struct checksum {
	enum checksum_algo algo;
	/* "md5-etag": an S3 ETag that looks like an MD5 but need not be one
	 * (SSE-KMS, SSE-C): bytes the origin itself sent that disagree with
	 * it are served with a warning instead of failing the read. */
	bool weak;
	uint8_t len;   /* bytes in v: 4, 16 or 32 */
	uint8_t v[32]; /* a CRC32C as 4 bytes, big-endian, as GCS gives it */
};

/* Parses "ALGO:HEX" (case-insensitive), ALGO also md5-etag.  @return 0,
 * or -EINVAL for an unknown algorithm or a value of the wrong length. */
int checksum_parse(const char *text, struct checksum *out) WHARF_CHECK;
/* "ALGO:HEX" into out (CHECKSUM_TEXT_MAX bytes); "" for CHECKSUM_NONE. */
const char *checksum_format(const struct checksum *c, char *out);
/* The algorithm's name ("crc32c"), "" for none. */
const char *checksum_algo_name(enum checksum_algo a);
/* A CRC32C as a checksum. */
void checksum_from_crc32c(uint32_t crc, struct checksum *out);
/* Whether a and b are the same algorithm and value. */
bool checksum_equal(const struct checksum *a, const struct checksum *b);

/* CRC32C of len bytes after the CRC32C crc of what came before them (0
 * for none): crc32c_update(crc32c_update(0, a), b) == crc32c of a then b. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);
/* The same without the CPU's instruction: what other CPUs run (tests). */
uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len);
/* The CRC32C of A then B from crc_a, crc_b and B's length: no byte is
 * read.  O(log len_b). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* A running checksum of bytes fed in order.  begin allocates (libcrypto's
 * context for MD5 and SHA-256): once per object checked, never per read. */
struct checksum_ctx {
	enum checksum_algo algo;
	uint32_t crc;
	void *md; /* EVP_MD_CTX */
};
/* @return 0, -EINVAL (CHECKSUM_NONE) or -ENOMEM. */
int checksum_begin(struct checksum_ctx *ctx,
		   enum checksum_algo algo) WHARF_CHECK;
void checksum_feed(struct checksum_ctx *ctx, const void *data, size_t len);
/* Bytes whose CRC32C is known already (a chunk's): for CRC32C only. */
void checksum_feed_crc32c(struct checksum_ctx *ctx, uint32_t crc, uint64_t len);
/* The checksum of what was fed; frees the context. */
void checksum_end(struct checksum_ctx *ctx, struct checksum *out);
/* Frees the context without a result (NULL-safe fields). */
void checksum_abort(struct checksum_ctx *ctx);

#endif
