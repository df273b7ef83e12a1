#ifndef WHARF_INCLUDE_WHARF_WHARF_HPP
#define WHARF_INCLUDE_WHARF_WHARF_HPP
/*
 * libwharf for C++ (C++11 or later), header-only over <wharf/loader.h>:
 * handles that close themselves, batches that release themselves, errors
 * as exceptions, and an epoch as a range.
 *
 *   wharf::index idx("train.idx");
 *   wharf::options opt;             // wharf_options_init()'s defaults
 *   opt.batch_size = 64;
 *   wharf::loader loader(idx, opt);
 *   for (uint64_t e = 0; e < 3; e++)
 *       for (wharf::batch &b : loader.epoch(e))
 *           step(b.samples<record>());   // released when the loop moves on
 *
 * Ownership: wharf::index and wharf::loader are move-only and close their
 * handle when destroyed.  An index must outlive the loaders opened on it
 * (as in C).  A batch holds its ring slot until it is destroyed, released
 * or moved from; one that outlives its loader gives nothing back (the
 * loader's close took every slot back) but its data are gone with it.
 *
 * Errors: every failing call throws wharf::error, a std::runtime_error whose
 * what() is the library's message (wharf_last_error(), or the loader's
 * wharf_loader_error()) and whose code() is the negative errno.  Destructors
 * never throw.  -EINTR from next is retried: the signal's handler has run.
 */
#include <wharf/loader.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace wharf
{

/* What a failed call threw: the library's message and its -errno. */
class error : public std::runtime_error
{
      public:
	error(int code, const std::string &message)
	    : std::runtime_error(message), code_(code)
	{
	}
	/* The negative errno the C call returned. */
	int code() const noexcept { return code_; }

      private:
	int code_;
};

namespace detail
{
/* The message for a failure: the library's, else strerror's. */
inline std::string message(const char *what, int rc, const char *lib)
{
	std::string m(what);
	m += ": ";
	m += (lib && *lib) ? lib : std::strerror(-rc);
	return m;
}

inline int check(int rc, const char *what)
{
	if (rc < 0)
		throw error(rc, message(what, rc, wharf_last_error()));
	return rc;
}

/* Shared between a loader and its batches, so that a batch destroyed after
 * its loader knows not to release into freed memory. */
struct live_loader {
	wharf_loader *handle;
};
} // namespace detail

/* The library's version, as WHARF_VERSION_NUMBER (major * 10000 + ...). */
inline unsigned version_number() { return wharf_version_number(); }

/* An index file, mapped read-only (wharf_index_open()). */
class index
{
      public:
	/* Opens path (flags: WHARF_INDEX_VERIFY); throws wharf::error. */
	explicit index(const std::string &path, uint32_t flags = 0)
	    : handle_(nullptr)
	{
		detail::check(wharf_index_open(path.c_str(), flags, &handle_),
			      "wharf_index_open");
	}
	~index() { wharf_index_close(handle_); }
	index(index &&other) noexcept : handle_(other.handle_)
	{
		other.handle_ = nullptr;
	}
	index &operator=(index &&other) noexcept
	{
		if (this != &other) {
			wharf_index_close(handle_);
			handle_ = other.handle_;
			other.handle_ = nullptr;
		}
		return *this;
	}
	index(const index &) = delete;
	index &operator=(const index &) = delete;

	/* The C handle, for calls this header does not wrap. */
	const wharf_index *get() const noexcept { return handle_; }

	uint64_t size() const { return wharf_index_count(handle_); }
	uint64_t num_files() const { return wharf_index_num_files(handle_); }
	uint32_t num_labels() const { return wharf_index_num_labels(handle_); }

	wharf_sample sample(uint64_t i) const
	{
		wharf_sample s;
		detail::check(wharf_index_sample(handle_, i, &s),
			      "wharf_index_sample");
		return s;
	}

	/* The full path of file `file`. */
	std::string path(uint32_t file) const
	{
		std::vector<char> buf(4096);
		int n = detail::check(wharf_index_path(handle_, file,
						       buf.data(), buf.size()),
				      "wharf_index_path");
		return std::string(buf.data(), static_cast<size_t>(n));
	}

	/* The builders of <wharf/loader.h>, writing an index to out. */
	static void build_dir(const std::string &dir, const std::string &out)
	{
		detail::check(wharf_index_build_dir(dir.c_str(), out.c_str()),
			      "wharf_index_build_dir");
	}
	static void build_list(const std::string &list, bool stat_files,
			       const std::string &out)
	{
		detail::check(wharf_index_build_list(list.c_str(),
						     stat_files ? 1 : 0,
						     out.c_str()),
			      "wharf_index_build_list");
	}
	static void build_records(uint64_t record,
				  const std::vector<std::string> &files,
				  const std::string &out)
	{
		std::vector<const char *> paths;
		for (const std::string &f : files)
			paths.push_back(f.c_str());
		detail::check(wharf_index_build_records(record, paths.data(),
							paths.size(),
							out.c_str()),
			      "wharf_index_build_records");
	}

      private:
	wharf_index *handle_;
};

/* wharf_options with wharf_options_init()'s defaults; set fields directly. */
struct options : wharf_options {
	options() : wharf_options() { wharf_options_init(this); }
};

/* A contiguous run of T, read-only: the samples of a fixed-size batch. */
template <class T> class view
{
      public:
	view(const T *data, size_t n) noexcept : data_(data), size_(n) {}
	const T *begin() const noexcept { return data_; }
	const T *end() const noexcept { return data_ + size_; }
	const T *data() const noexcept { return data_; }
	size_t size() const noexcept { return size_; }
	const T &operator[](size_t k) const noexcept { return data_[k]; }

      private:
	const T *data_;
	size_t size_;
};

/* One sample's bytes in a batch. */
struct bytes {
	const void *data;
	size_t size;
};

/*
 * A batch handed out by a loader, valid until it is destroyed, release()d
 * or moved from (then it is empty: operator bool is false).
 */
class batch
{
      public:
	batch() noexcept : batch_(nullptr) {}
	batch(std::shared_ptr<detail::live_loader> owner,
	      const wharf_batch *b) noexcept
	    : owner_(std::move(owner)), batch_(b)
	{
	}
	~batch() { give_back(); }
	batch(batch &&other) noexcept
	    : owner_(std::move(other.owner_)), batch_(other.batch_)
	{
		other.batch_ = nullptr;
	}
	batch &operator=(batch &&other) noexcept
	{
		if (this != &other) {
			give_back();
			owner_ = std::move(other.owner_);
			batch_ = other.batch_;
			other.batch_ = nullptr;
		}
		return *this;
	}
	batch(const batch &) = delete;
	batch &operator=(const batch &) = delete;

	explicit operator bool() const noexcept { return batch_ != nullptr; }
	/* The C view, for the fields this class does not wrap. */
	const wharf_batch &get() const noexcept { return *batch_; }

	uint64_t epoch() const noexcept { return batch_->epoch; }
	uint64_t number() const noexcept { return batch_->index; }
	size_t size() const noexcept { return batch_->count; }
	uint32_t skipped() const noexcept { return batch_->skipped; }
	uint64_t sample_id(size_t k) const noexcept
	{
		return batch_->samples[k];
	}
	int32_t label(size_t k) const noexcept { return batch_->labels[k]; }
	view<uint64_t> sample_ids() const noexcept
	{
		return view<uint64_t>(batch_->samples, batch_->count);
	}
	view<int32_t> labels() const noexcept
	{
		return view<int32_t>(batch_->labels, batch_->count);
	}

	/* Sample k's bytes, fixed-size or variable-size alike. */
	bytes sample(size_t k) const noexcept
	{
		const char *data = static_cast<const char *>(batch_->data);
		if (!batch_->offsets)
			return bytes{data + k * batch_->sample_size,
				     static_cast<size_t>(batch_->sample_size)};
		return bytes{data + batch_->offsets[k],
			     static_cast<size_t>(batch_->offsets[k + 1] -
						 batch_->offsets[k])};
	}

	/*
	 * The samples as an array of T, one T per sample: a fixed-size batch
	 * whose sample_size is sizeof(T) (throws wharf::error -EINVAL
	 * otherwise).  T is a trivially copyable record type.
	 */
	template <class T> view<T> samples() const
	{
		if (batch_->offsets || batch_->sample_size != sizeof(T))
			throw error(-EINVAL,
				    "wharf::batch::samples<T>: samples of " +
					std::to_string(batch_->sample_size) +
					" bytes (0: variable-size), not "
					"sizeof(T) = " +
					std::to_string(sizeof(T)));
		return view<T>(static_cast<const T *>(batch_->data),
			       batch_->count);
	}

	/* Gives the slot back now; throws wharf::error on failure. */
	void release()
	{
		const wharf_batch *b = batch_;
		std::shared_ptr<detail::live_loader> owner = std::move(owner_);
		batch_ = nullptr;
		if (b && owner && owner->handle)
			detail::check(wharf_loader_release(owner->handle, b),
				      "wharf_loader_release");
	}

      private:
	void give_back() noexcept
	{
		if (batch_ && owner_ && owner_->handle)
			(void)wharf_loader_release(owner_->handle, batch_);
		batch_ = nullptr;
		owner_.reset();
	}

	std::shared_ptr<detail::live_loader> owner_;
	const wharf_batch *batch_;
};

class loader;

/* The batches of one epoch, for range-for (loader::epoch()).  Each batch
 * is released when the loop moves to the next; move it out to keep it. */
class epoch_range
{
      public:
	class iterator
	{
	      public:
		iterator() : loader_(nullptr) {}
		explicit iterator(loader *l);
		batch &operator*() noexcept { return current_; }
		batch *operator->() noexcept { return &current_; }
		iterator &operator++();
		bool operator==(const iterator &o) const noexcept
		{
			return loader_ == o.loader_;
		}
		bool operator!=(const iterator &o) const noexcept
		{
			return !(*this == o);
		}

	      private:
		loader *loader_; /* nullptr at the end */
		batch current_;
	};

	epoch_range(loader *l, uint64_t epoch) : loader_(l), epoch_(epoch) {}
	iterator begin();
	iterator end() { return iterator(); }

      private:
	loader *loader_;
	uint64_t epoch_;
};

/* A loader (wharf_loader_open()): forked workers reading into a ring. */
class loader
{
      public:
	/* Opens a loader on idx, which must outlive it; throws wharf::error.
	 */
	loader(const index &idx, const wharf_options &opt)
	    : live_(std::make_shared<detail::live_loader>())
	{
		live_->handle = nullptr;
		detail::check(
		    wharf_loader_open(idx.get(), &opt, &live_->handle),
		    "wharf_loader_open");
	}
	~loader() { close(); }
	loader(loader &&other) noexcept : live_(std::move(other.live_)) {}
	loader &operator=(loader &&other) noexcept
	{
		if (this != &other) {
			close();
			live_ = std::move(other.live_);
		}
		return *this;
	}
	loader(const loader &) = delete;
	loader &operator=(const loader &) = delete;

	wharf_loader *get() const noexcept
	{
		return live_ ? live_->handle : nullptr;
	}

	/* The next batch of the current epoch, or an empty batch at its end
	 * (WHARF_END); throws wharf::error naming the worker and sample. */
	batch next()
	{
		const wharf_batch *b = nullptr;
		int rc;

		wharf_loader *l = open_handle();
		do
			rc = wharf_loader_next(l, &b);
		while (rc == -EINTR);
		if (rc < 0) {
			const char *why = wharf_loader_error(l);
			if (!why || !*why)
				why = wharf_last_error();
			throw error(rc, detail::message("wharf_loader_next", rc,
							why));
		}
		if (rc == WHARF_END)
			return batch();
		return batch(live_, b);
	}

	void set_epoch(uint64_t epoch)
	{
		detail::check(wharf_loader_set_epoch(open_handle(), epoch),
			      "wharf_loader_set_epoch");
	}

	/* Starts epoch e and yields its batches: for (batch &b : l.epoch(e)). */
	epoch_range epoch(uint64_t e) { return epoch_range(this, e); }

	uint64_t num_batches() const { return wharf_loader_num_batches(open_handle()); }
	uint32_t rank() const { return wharf_loader_rank(open_handle()); }
	uint32_t world() const { return wharf_loader_world(open_handle()); }

	wharf_state state() const
	{
		wharf_state st;
		std::memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		detail::check(wharf_loader_state_save(open_handle(), &st),
			      "wharf_loader_state_save");
		return st;
	}
	void restore(const wharf_state &st)
	{
		detail::check(wharf_loader_state_restore(open_handle(), &st),
			      "wharf_loader_state_restore");
	}
	wharf_stats stats() const
	{
		wharf_stats st;
		std::memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		detail::check(wharf_loader_stats(open_handle(), &st),
			      "wharf_loader_stats");
		return st;
	}

	/* wharf_loader_stop(): workers gone, held batches still valid. */
	void stop() noexcept
	{
		if (get())
			wharf_loader_stop(get());
	}

	/* Closes now (the destructor's work): every batch's data go. */
	void close() noexcept
	{
		if (live_ && live_->handle) {
			wharf_loader_close(live_->handle);
			live_->handle = nullptr;
		}
	}

      private:
	/* The handle of a loader not closed or moved from, for the calls that
	 * change it (a closed one is an error here, not a NULL in C). */
	wharf_loader *open_handle() const
	{
		if (!get())
			throw error(-EBADF, "wharf::loader: used after close() "
					    "or after being moved from");
		return get();
	}

	std::shared_ptr<detail::live_loader> live_;
};

inline epoch_range::iterator::iterator(loader *l) : loader_(l)
{
	++*this;
}

inline epoch_range::iterator &epoch_range::iterator::operator++()
{
	current_ = batch(); /* released before the next is taken */
	if (loader_) {
		current_ = loader_->next();
		if (!current_)
			loader_ = nullptr;
	}
	return *this;
}

inline epoch_range::iterator epoch_range::begin()
{
	loader_->set_epoch(epoch_);
	return iterator(loader_);
}

} // namespace wharf
#endif
