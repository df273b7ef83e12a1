/*
 * layout: the sizes and field offsets of the public structs that the
 * Python binding mirrors by hand (python/wharf/_lib.py), as the C compiler
 * lays them out.  test_layout.py compares them with ctypes', so that a
 * field added, moved or resized in include/wharf/ fails a test before it
 * shifts the fields after it in Python.  A test-only program: nothing is
 * added to libwharf's ABI.
 *
 * Output, one line each: "CLASS SIZE" for a struct, then "CLASS.FIELD
 * OFFSET SIZE" for each of its fields; CLASS is _lib.py's name for it.
 * A field that only Python would have does not compile here, and one that
 * only C has changes the struct's size (or takes padding, shifting
 * nothing).
 */
#include <stddef.h>
#include <stdio.h>

#include <wharf/cuda.h>
#include <wharf/loader.h>

#define STRUCT(py, c) printf("%s %zu\n", py, sizeof(struct c))
#define FIELD(py, c, f)                                                        \
	printf("%s.%s %zu %zu\n", py, #f, offsetof(struct c, f),               \
	       sizeof(((struct c *)0)->f))

int main(void)
{
	STRUCT("Sample", wharf_sample);
	FIELD("Sample", wharf_sample, offset);
	FIELD("Sample", wharf_sample, length);
	FIELD("Sample", wharf_sample, file);
	FIELD("Sample", wharf_sample, label);

	STRUCT("Field", wharf_field);
	FIELD("Field", wharf_field, offset);
	FIELD("Field", wharf_field, length);
	FIELD("Field", wharf_field, name);

	STRUCT("TarOptions", wharf_tar_options);
	FIELD("TarOptions", wharf_tar_options, size);
	FIELD("TarOptions", wharf_tar_options, partial);
	FIELD("TarOptions", wharf_tar_options, root);
	FIELD("TarOptions", wharf_tar_options, label_field);
	FIELD("TarOptions", wharf_tar_options, progress);
	FIELD("TarOptions", wharf_tar_options, progress_arg);

	STRUCT("BatchC", wharf_batch);
	FIELD("BatchC", wharf_batch, epoch);
	FIELD("BatchC", wharf_batch, index);
	FIELD("BatchC", wharf_batch, sample_size);
	FIELD("BatchC", wharf_batch, bytes);
	FIELD("BatchC", wharf_batch, data);
	FIELD("BatchC", wharf_batch, offsets);
	FIELD("BatchC", wharf_batch, samples);
	FIELD("BatchC", wharf_batch, labels);
	FIELD("BatchC", wharf_batch, count);
	FIELD("BatchC", wharf_batch, skipped);
	FIELD("BatchC", wharf_batch, worker);
	FIELD("BatchC", wharf_batch, slot);
	FIELD("BatchC", wharf_batch, generation);

	STRUCT("Options", wharf_options);
	FIELD("Options", wharf_options, size);
	FIELD("Options", wharf_options, batch_size);
	FIELD("Options", wharf_options, num_workers);
	FIELD("Options", wharf_options, prefetch);
	FIELD("Options", wharf_options, shuffle);
	FIELD("Options", wharf_options, drop_last);
	FIELD("Options", wharf_options, in_order);
	FIELD("Options", wharf_options, even);
	FIELD("Options", wharf_options, rank);
	FIELD("Options", wharf_options, world);
	FIELD("Options", wharf_options, skip_bad);
	FIELD("Options", wharf_options, persistent);
	FIELD("Options", wharf_options, timeout_ms);
	FIELD("Options", wharf_options, held);
	FIELD("Options", wharf_options, seed);
	FIELD("Options", wharf_options, sample_bytes);
	FIELD("Options", wharf_options, slot_bytes);
	FIELD("Options", wharf_options, shm_dir);
	FIELD("Options", wharf_options, worker_init);
	FIELD("Options", wharf_options, sample_fn);
	FIELD("Options", wharf_options, batch_fn);
	FIELD("Options", wharf_options, user);
	FIELD("Options", wharf_options, shift_step);
	FIELD("Options", wharf_options, reserved1);
	FIELD("Options", wharf_options, field);
	FIELD("Options", wharf_options, field_if_any);
	FIELD("Options", wharf_options, reserved2);
	FIELD("Options", wharf_options, shard_window);
	FIELD("Options", wharf_options, reserved3);
	FIELD("Options", wharf_options, interruptible);
	FIELD("Options", wharf_options, epoch_end);

	STRUCT("State", wharf_state);
	FIELD("State", wharf_state, size);
	FIELD("State", wharf_state, version);
	FIELD("State", wharf_state, seed);
	FIELD("State", wharf_state, epoch);
	FIELD("State", wharf_state, position);
	FIELD("State", wharf_state, done_mask);
	FIELD("State", wharf_state, num_samples);
	FIELD("State", wharf_state, batch_size);
	FIELD("State", wharf_state, rank);
	FIELD("State", wharf_state, world);
	FIELD("State", wharf_state, flags);

	STRUCT("Stats", wharf_stats);
	FIELD("Stats", wharf_stats, size);
	FIELD("Stats", wharf_stats, num_workers);
	FIELD("Stats", wharf_stats, batches);
	FIELD("Stats", wharf_stats, samples);
	FIELD("Stats", wharf_stats, bytes);
	FIELD("Stats", wharf_stats, skipped);
	FIELD("Stats", wharf_stats, wait_ns);
	FIELD("Stats", wharf_stats, open_ns);
	FIELD("Stats", wharf_stats, read_bytes);
	FIELD("Stats", wharf_stats, preads);

	STRUCT("CudaOptions", wharf_cuda_options);
	FIELD("CudaOptions", wharf_cuda_options, size);
	FIELD("CudaOptions", wharf_cuda_options, buffers);
	FIELD("CudaOptions", wharf_cuda_options, flags);
	FIELD("CudaOptions", wharf_cuda_options, reserved0);

	STRUCT("DeviceBatch", wharf_device_batch);
	FIELD("DeviceBatch", wharf_device_batch, epoch);
	FIELD("DeviceBatch", wharf_device_batch, index);
	FIELD("DeviceBatch", wharf_device_batch, sample_size);
	FIELD("DeviceBatch", wharf_device_batch, bytes);
	FIELD("DeviceBatch", wharf_device_batch, data);
	FIELD("DeviceBatch", wharf_device_batch, offsets);
	FIELD("DeviceBatch", wharf_device_batch, labels);
	FIELD("DeviceBatch", wharf_device_batch, samples);
	FIELD("DeviceBatch", wharf_device_batch, host_labels);
	FIELD("DeviceBatch", wharf_device_batch, count);
	FIELD("DeviceBatch", wharf_device_batch, skipped);
	FIELD("DeviceBatch", wharf_device_batch, buffer);
	FIELD("DeviceBatch", wharf_device_batch, generation);
	return ferror(stdout) ? 1 : 0;
}
