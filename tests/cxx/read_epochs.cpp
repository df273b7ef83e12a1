/*
 * wharf.hpp end to end (built by test-cxx.sh as C++11 and C++17): records
 * that carry their own id, read through wharf::loader's epoch ranges with
 * forked workers, every sample exactly once per epoch; batches kept past
 * their loop step, a batch outliving its loader, and errors as exceptions
 * with the library's message.
 */
#include <wharf/wharf.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace
{
struct record {
	uint64_t id;
	uint64_t check; /* ~id */
	char pad[16];
};

const uint64_t nrecords = 1000;
int failures = 0;

void expect(bool ok, const std::string &what)
{
	if (!ok) {
		std::fprintf(stderr, "FAIL: %s\n", what.c_str());
		failures++;
	}
}

void write_records(const std::string &path)
{
	std::ofstream out(path.c_str(), std::ios::binary);
	for (uint64_t i = 0; i < nrecords; i++) {
		record r = record();
		r.id = i;
		r.check = ~i;
		out.write(reinterpret_cast<const char *>(&r), sizeof(r));
	}
}
} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: read_epochs SCRATCH_DIR\n");
		return 2;
	}
	const std::string dir = argv[1];
	const std::string data = dir + "/records.bin",
			  idxpath = dir + "/records.idx";
	write_records(data);
	wharf::index::build_records(sizeof(record),
				    std::vector<std::string>(1, data), idxpath);
	wharf::index idx(idxpath);
	expect(idx.size() == nrecords, "index size " +
					   std::to_string(idx.size()));

	wharf::options opt;
	opt.batch_size = 7; /* 1000 = 142 * 7 + 6: a short last batch */
	opt.num_workers = 2;
	opt.shuffle = 1;
	opt.seed = 11;
	opt.shm_dir = dir.c_str();
	wharf::loader loader(idx, opt);

	for (uint64_t e = 0; e < 3; e++) {
		std::vector<int> seen(nrecords, 0);
		uint64_t batches = 0;
		for (wharf::batch &b : loader.epoch(e)) {
			expect(b.epoch() == e, "batch of epoch " +
						   std::to_string(b.epoch()));
			wharf::view<record> recs = b.samples<record>();
			size_t k = 0;
			for (const record &r : recs) {
				expect(r.check == ~r.id && r.id < nrecords &&
					   r.id == b.sample_id(k),
				       "record " + std::to_string(r.id) +
					   " in slot of sample " +
					   std::to_string(b.sample_id(k)));
				if (r.id < nrecords)
					seen[r.id]++;
				k++;
			}
			batches++;
		}
		expect(batches == loader.num_batches(),
		       "epoch " + std::to_string(e) + ": " +
			   std::to_string(batches) + " batches, not " +
			   std::to_string(loader.num_batches()));
		for (uint64_t i = 0; i < nrecords; i++)
			expect(seen[i] == 1, "epoch " + std::to_string(e) +
						 ": sample " +
						 std::to_string(i) + " read " +
						 std::to_string(seen[i]) +
						 " times");
	}

	/* Batches moved out of the loop stay valid until destroyed; more are
	 * held than the workers' slots would allow if they were not given
	 * back. */
	loader.set_epoch(3);
	{
		std::vector<wharf::batch> kept;
		for (int round = 0; round < 50; round++) {
			wharf::batch b = loader.next();
			if (!b)
				break;
			kept.push_back(std::move(b));
			if (kept.size() > 2)
				kept.erase(kept.begin());
		}
		for (const wharf::batch &b : kept)
			expect(b.sample(0).size == sizeof(record) &&
				   static_cast<const record *>(
				       b.sample(0).data)->id == b.sample_id(0),
			       "a kept batch changed under its holder");
	}

	/* A wrong record type is refused with the sizes. */
	{
		wharf::batch b = loader.next();
		try {
			(void)b.samples<uint64_t>();
			expect(false, "samples<uint64_t> of 32-byte records");
		} catch (const wharf::error &err) {
			expect(err.code() == -EINVAL &&
				   std::string(err.what()).find("32") !=
				       std::string::npos,
			       std::string("samples<T> refusal: ") +
				   err.what());
		}
	}

	/* A batch that outlives its loader is dropped without a release into
	 * the closed loader. */
	{
		wharf::batch late = loader.next();
		expect(static_cast<bool>(late), "a batch to keep");
		wharf::loader gone = std::move(loader);
		gone.close();
		try {
			(void)gone.next();
			expect(false, "next after close did not throw");
		} catch (const wharf::error &err) {
			expect(err.code() == -EBADF,
			       std::string("next after close: ") + err.what());
		}
	}

	/* Errors carry the library's message. */
	try {
		wharf::index missing(dir + "/no-such.idx");
		expect(false, "opening a missing index did not throw");
	} catch (const wharf::error &err) {
		expect(err.code() == -ENOENT &&
			   std::string(err.what()).find("no-such.idx") !=
			       std::string::npos,
		       std::string("missing index: ") + err.what());
	} catch (const std::exception &err) {
		expect(false, std::string("not a wharf::error: ") + err.what());
	}

	std::remove(idxpath.c_str());
	std::remove(data.c_str());
	if (!failures)
		std::printf("ok: 3 epochs of %llu samples, each once (C++%ld)\n",
			    static_cast<unsigned long long>(nrecords),
			    static_cast<long>(__cplusplus / 100 % 100));
	return failures ? 1 : 0;
}
