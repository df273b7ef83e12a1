#ifndef WHARF_INCLUDE_WHARF_DECODE_H
#define WHARF_INCLUDE_WHARF_DECODE_H
/*
 * Built-in sample decoders for libwharf's loader.  A decoder runs inside the
 * forked workers (as the loader's per-sample transform), so a program in
 * another language (Python through ctypes) picks one by a spec string and
 * never runs its own code in the workers: a Python callback there would need
 * the interpreter in every worker and would serialize on its lock.
 *
 * A spec is a decoder name followed by key=value words separated by spaces:
 *
 *   raw [bytes=N]
 *       the sample's bytes as stored; no transform at all.  With bytes=N,
 *       the first N bytes, zero-padded when the sample is shorter: samples
 *       of any size then make fixed-size batches.
 *
 *   array dtype=T shape=D0,D1,... [offset=N]
 *       a fixed-shape typed array.  Each sample must be exactly
 *       N + D0*D1*...*size(T) bytes; the first N bytes (a header) are
 *       dropped.  T: u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64 (host
 *       byte order), or as NumPy spells them (uint8 ... float64, bfloat16;
 *       wharf_dtype()).  A sample of another length fails naming the sample.
 *
 *   tokens dtype=u16|u32 window=W [out=i64|i32|same] [windows=moving|fixed]
 *       a token window for language models.  Each sample holds W + 1
 *       tokens (build the index with records of (W + 1) * size bytes); the
 *       output is the input (tokens 0..W-1) followed by the target (tokens
 *       1..W), each W tokens of type out (default i64, what embedding and
 *       cross-entropy layers take).  windows=moving (the default): epoch 0
 *       reads the records themselves; each later epoch reads every window
 *       k tokens later, 1 <= k <= W a pure function of (seed, epoch)
 *       (wharf_options.shift_step), so that the pair of tokens across each
 *       record boundary, which fixed windows never train, is trained from
 *       epoch 1 on.  A window whose record is the last of its file (no
 *       record of the same size follows it) is read in place.
 *       windows=fixed: every epoch reads the records.
 *
 *   plugin path=SO [symbol=NAME] [arg=STRING] [bytes=N]
 *       a shared object exporting a wharf_sample_fn named NAME (default
 *       wharf_transform).  It is loaded when the decoder is made, so the
 *       workers inherit it.  If it also exports NAME_init,
 *           int NAME_init(const char *arg, uint32_t worker, void **state);
 *       each worker calls that once, and the transform gets *state as its
 *       user pointer (else arg itself).  bytes: the output size of every
 *       sample (0 or absent: variable-size output, or the index's size).
 *
 *   jpeg size=S|H,W [crop=random-resized|center] [scale=MIN,MAX]
 *        [ratio=MIN,MAX] [flip=0|1] [dtype=u8|f32] [layout=chw|hwc]
 *        [mean=R,G,B std=R,G,B] [max_scans=N] [max_pixel_scans=N]
 *       a JPEG file as an S x S RGB image, or H high and W wide (the order
 *       of torchvision's sizes) (libjpeg-turbo; a libwharf built
 *       without it refuses the spec with -ENOTSUP).  crop=random-resized
 *       (default) is torchvision's RandomResizedCrop(size, scale, ratio),
 *       default scale 0.08,1 and ratio 0.75,1.3333; crop=center its eval
 *       transform, Resize(S / 0.875) then CenterCrop(S) (H x W: the
 *       picture resized, aspect kept, to cover H / 0.875 x W / 0.875, then
 *       the center H x W).  flip=1 mirrors
 *       half of the samples (default 1 with random-resized, 0 with
 *       center).  Choices come from wharf_sample_seed(): fixed by (seed,
 *       epoch, sample).  dtype=u8 (default) keeps 0..255; f32 gives v / 255,
 *       or (v / 255 - mean) / std with mean and std, both or neither (f32
 *       only).  layout chw (default): three planes; hwc: interleaved
 *       pixels.  Output: H*W*3 bytes (u8) or H*W*3*4 (f32), written
 *       straight into the slot.  Grayscale and CMYK become RGB.  A file
 *       that is not a JPEG, is damaged in the part decoded (only the crop's
 *       rows are read: damage below it goes unseen), is larger than 2^26
 *       pixels, or is over a decode limit fails naming the sample (skip_bad
 *       leaves it out); it never takes a worker down.
 *       Decode limits: a progressive file may hold any number of scans,
 *       each a pass over the whole picture's coefficients (an 8192 x 8192
 *       file of 2,112 scans, 4.5 MB, costs 26 s and 410 MB).  max_scans
 *       (default 500, TurboJPEG's own scan limit) caps the scans;
 *       max_pixel_scans (default 2^30) caps width x height x scans, the
 *       work of the entropy decoder: a 12-megapixel photograph of up to 89
 *       scans passes, the largest picture allowed (2^26 pixels) with up to
 *       16.  A budget of work rather than of time, so that whether a
 *       sample decodes does not depend on the machine or its load (an
 *       epoch stays reproducible; wharf_options.timeout_ms bounds time).
 *       The scans are counted from the markers before decoding, so such a
 *       file fails in microseconds without its coefficient memory.  0
 *       lifts a limit.
 *       The decoder keeps its decoding buffers per process: loaders that
 *       share one with num_workers 0 must not run on two threads at once.
 *
 * Every decoder also takes field=NAME[,NAME...]: in an index of tar shards
 * (wharf_index_field()), each sample is read from its first field that has
 * one of those names instead of whole (wharf_options.field).  Without it,
 * jpeg reads the first of jpg, jpeg, png and webp that the sample has (the
 * whole sample in an index without fields); the others read the whole
 * sample, its first member to its last.
 *
 * Call order: wharf_decoder_new(), wharf_decoder_apply() on the options,
 * wharf_loader_open(); the decoder must outlive the loader; then
 * wharf_decoder_free().
 */
#include <stdint.h>
#include <wharf/loader.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wharf_decoder wharf_decoder;

/*
 * Parses spec (see above) and, for a plugin, loads it.
 * @return 0 and *out set, or -EINVAL for a bad spec, -ENOENT for a plugin
 *         that cannot be loaded or lacks the symbol, -ENOTSUP for jpeg in
 *         a libwharf built without libjpeg-turbo; wharf_last_error() says
 *         which word or what dlopen said.
 */
int wharf_decoder_new(const char *spec, wharf_decoder **out);

/*
 * Sets opt's sample_fn, worker_init, user, shift_step (moving token
 * windows; 0 for every other decoder), field and field_if_any (the field
 * read: field=, jpeg's default, or none) and (when the decoder knows it)
 * sample_bytes.  Overwrites those fields only; field points into d.
 * @return 0, or -EINVAL when opt->size is too small.
 */
int wharf_decoder_apply(wharf_decoder *d, struct wharf_options *opt);

/* Bytes of one decoded sample, or 0 when the decoder does not fix it (raw,
 * plugin without bytes=). */
uint64_t wharf_decoder_sample_bytes(const wharf_decoder *d);

/* Bytes the decoder expects of one stored sample, or 0 when any size will
 * do. */
uint64_t wharf_decoder_input_bytes(const wharf_decoder *d);

/*
 * The element types of the decoders (array dtype=, tokens dtype= and out=,
 * jpeg dtype=): the one table that specs and the bindings share.  name is
 * either spelling: short, as specs are written here (u16), or long, as
 * NumPy and torch name types (uint16).
 * @return the long name (static), with *size (if size is not NULL) its
 *         bytes; NULL for a name that is not an element type.
 */
const char *wharf_dtype(const char *name, uint32_t *size);

/* Frees d and unloads its plugin (NULL: no-op).  Close the loaders that
 * use it first. */
void wharf_decoder_free(wharf_decoder *d);

#ifdef __cplusplus
}
#endif
#endif
