#ifndef WHARF_LOADER_JPEG_H
#define WHARF_LOADER_JPEG_H
/*
 * The jpeg decoder (include/wharf/decode.h): JPEG bytes to a square RGB
 * image of a fixed size, cropped (torchvision's RandomResizedCrop or its
 * eval-time resize and center crop), optionally flipped, as u8 or
 * normalized f32, HWC or CHW.  Built only with libjpeg-turbo (HAVE_JPEG);
 * decode.c parses the spec's words and dispatches here.
 */
#include <stdint.h>

/* The spec's words, as decode.c split them (NULL: absent). */
struct jpegdec_words {
	const char *size, *crop, *scale, *ratio, *flip, *dtype, *layout, *mean,
	    *std, *max_scans, *max_pixel_scans;
};

struct jpegdec;

/*
 * Checks the words and makes the decoder.  The per-process decoding state
 * is made by the first sample each process decodes, then reused.
 * @return 0 and *out set, -EINVAL with *why (a static string) naming the
 *         bad word, or -ENOMEM.
 */
int jpegdec_new(const struct jpegdec_words *w, struct jpegdec **out,
		const char **why) __attribute__((warn_unused_result));

/* Bytes of one decoded sample: size * size * 3 * (1 or 4). */
uint64_t jpegdec_out_bytes(const struct jpegdec *j);

/*
 * A wharf_sample_fn, with the struct jpegdec as user.  Its random choices
 * come from wharf_sample_seed().  A file that is not a JPEG, is damaged in
 * the part decoded, or is too large fails with wharf_set_error() and
 * -EINVAL (never a crash: libjpeg's errors return here).
 */
int jpegdec_sample(void *user, uint64_t sample, const void *in, uint64_t in_len,
		   void *out, uint64_t out_cap, uint64_t *out_len);

/* Frees j and this process's state (NULL: no-op). */
void jpegdec_free(struct jpegdec *j);

#endif
