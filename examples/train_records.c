/*
 * A minimal training loop over libwharf: fixed-size records, each a float32
 * feature vector and a float32 target, fit by linear regression with SGD.
 *
 *   train_records [FILE...]
 *
 * With no FILE it writes a synthetic data set (y = w.x + noise) to a
 * temporary file first, so `make check` runs it end to end.  Records are
 * DIM + 1 floats; the loader reads them in shuffled batches with two forked
 * workers and hands each batch over without a copy.
 *
 * Plain C99 or C11 (-std=c11 hides mkdtemp without the POSIX macro below),
 * and C++ too: tests/test-examples.sh builds it all three ways with -Werror.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wharf/loader.h>

#define DIM 16
#define RECORD ((DIM + 1) * sizeof(float))
#define NRECORDS 8192
#define EPOCHS 4

static int write_synthetic(const char *path)
{
	FILE *f = fopen(path, "wb");
	uint64_t x = 88172645463325252ull; /* xorshift: same data every run */

	if (!f)
		return -errno;
	for (int i = 0; i < NRECORDS; i++) {
		float rec[DIM + 1], y = 0.5f;

		for (int j = 0; j < DIM; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			rec[j] = (float)(x % 2001) / 1000.0f - 1.0f;
			y += rec[j] * (float)(j % 5 - 2);
		}
		rec[DIM] = y;
		if (fwrite(rec, sizeof(rec), 1, f) != 1) {
			fclose(f);
			return -EIO;
		}
	}
	return fclose(f) ? -errno : 0;
}

/* One SGD step on a batch; returns the batch's mean squared error. */
static double step(float *w, const float *recs, uint32_t n, float lr)
{
	float grad[DIM + 1] = {0};
	double loss = 0;

	for (uint32_t i = 0; i < n; i++) {
		const float *r = recs + (size_t)i * (DIM + 1);
		float pred = w[DIM];

		for (int j = 0; j < DIM; j++)
			pred += w[j] * r[j];
		const float err = pred - r[DIM];
		loss += (double)err * err;
		for (int j = 0; j < DIM; j++)
			grad[j] += err * r[j];
		grad[DIM] += err;
	}
	for (int j = 0; j <= DIM; j++)
		w[j] -= lr * 2 * grad[j] / (float)n;
	return loss / n;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/wharf-example-XXXXXX", data[64], idxpath[64];
	const char *one[1];
	const char *const *files = (const char *const *)argv + 1;
	size_t nfiles = (size_t)argc - 1;
	wharf_index *idx = NULL;
	wharf_loader *l = NULL;
	float w[DIM + 1] = {0};
	double first = -1, last = 0;
	int rc;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(idxpath, sizeof(idxpath), "%s/records.idx", dir);
	snprintf(data, sizeof(data), "%s/records.bin", dir);
	if (!nfiles) {
		rc = write_synthetic(data);
		if (rc) {
			fprintf(stderr, "%s: %s\n", data, strerror(-rc));
			goto out;
		}
		one[0] = data;
		files = one;
		nfiles = 1;
	}
	rc = wharf_index_build_records(RECORD, files, nfiles, idxpath);
	if (!rc)
		rc = wharf_index_open(idxpath, 0, &idx);
	if (rc) {
		fprintf(stderr, "index: %s\n", wharf_last_error());
		goto out;
	}

	struct wharf_options opt;
	wharf_options_init(&opt);
	opt.batch_size = 64;
	opt.num_workers = 2;
	opt.shuffle = 1;
	opt.seed = 7;
	rc = wharf_loader_open(idx, &opt, &l);
	if (rc) {
		fprintf(stderr, "loader: %s\n", wharf_last_error());
		goto out;
	}
	for (uint64_t epoch = 0; epoch < EPOCHS; epoch++) {
		const struct wharf_batch *b;
		double sum = 0;
		uint64_t nb = 0;

		rc = wharf_loader_set_epoch(l, epoch);
		while (!rc && (rc = wharf_loader_next(l, &b)) == 0) {
			/* Fixed-size records: one contiguous array of them. */
			sum += step(w, (const float *)b->data, b->count,
				    0.01f);
			nb++;
			rc = wharf_loader_release(l, b);
		}
		if (rc < 0) {
			fprintf(stderr, "epoch %llu: %s\n",
				(unsigned long long)epoch,
				wharf_loader_error(l));
			goto out;
		}
		last = nb ? sum / (double)nb : 0;
		if (first < 0)
			first = last;
		printf("epoch %llu: %llu batches, mean squared error %.4f\n",
		       (unsigned long long)epoch, (unsigned long long)nb, last);
	}
	struct wharf_stats st;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	rc = wharf_loader_stats(l, &st);
	if (!rc)
		printf("%llu samples, data stall %.1f%% of the run\n",
		       (unsigned long long)st.samples,
		       st.open_ns
			   ? 100.0 * (double)st.wait_ns / (double)st.open_ns
			   : 0.0);
	/* The synthetic data are learnable: the error must fall. */
	if (!rc && argc == 1 && !(last < first / 2)) {
		fprintf(stderr, "error did not fall: %.4f -> %.4f\n", first,
			last);
		rc = 1;
	}
out:
	wharf_loader_close(l);
	wharf_index_close(idx);
	unlink(idxpath);
	unlink(data);
	rmdir(dir);
	return rc ? 1 : 0;
}
