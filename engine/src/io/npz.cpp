// .npz: a zip archive of .npy members (stored or deflated), read through libzip from the file's
// memory map. Listing decompresses only the start of each member, enough for its .npy header.
#include <filesystem>
#include <mutex>

#include "io/reader.hpp"

#ifdef CASTSCOPE_HAVE_LIBZIP
#include <zip.h>
#endif

namespace castscope::io::detail {

#ifndef CASTSCOPE_HAVE_LIBZIP

std::vector<Entry> read_npz(const std::string& path) {
  throw Error("'" + path +
              "': this build of CastScope cannot read .npz files (built without libzip)");
}

#else

namespace {

// Deflate expands at most ~1032:1; a member claiming more than this is hostile or corrupt, and
// refusing it keeps allocations proportional to the file.
constexpr uint64_t kMaxRatio = 1100;

class Archive {
 public:
  explicit Archive(std::shared_ptr<const MappedFile> map) : map_(std::move(map)) {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(map_->data(), map_->size(), 0, &err);
    if (!src) fail("cannot read archive", &err);
    zip_ = zip_open_from_source(src, ZIP_RDONLY, &err);
    if (!zip_) {
      zip_source_free(src);
      fail("not a valid zip archive", &err);
    }
    zip_error_fini(&err);
  }
  ~Archive() {
    if (zip_) zip_discard(zip_);
  }
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;

  const std::string& path() const { return map_->path(); }
  zip_int64_t count() const { return zip_get_num_entries(zip_, 0); }

  struct Member {
    std::string name;
    uint64_t size = 0;
  };
  Member stat(zip_uint64_t i) const {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip_, i, 0, &st) != 0)
      throw Error("'" + path() + "': cannot read zip entry " + std::to_string(i));
    Member m;
    m.name = st.valid & ZIP_STAT_NAME ? st.name : "";
    if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
      throw Error(where(path(), m.name) + "zip entry without sizes");
    if (st.size > st.comp_size * kMaxRatio + 4096)
      throw Error(where(path(), m.name) + "zip entry claims " + std::to_string(st.size) +
                  " bytes from " + std::to_string(st.comp_size) + " compressed (implausible)");
    m.size = st.size;
    return m;
  }
  // Reads the first `n` bytes of member i (n <= its size).
  std::vector<uint8_t> read(zip_uint64_t i, uint64_t n, const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);  // a zip_t is not thread-safe
    zip_file_t* f = zip_fopen_index(zip_, i, 0);
    if (!f) throw Error(where(path(), name) + "cannot open zip member: " + zip_strerror(zip_));
    std::vector<uint8_t> buf(n);
    uint64_t got = 0;
    while (got < n) {
      const zip_int64_t r = zip_fread(f, buf.data() + got, n - got);
      if (r < 0) {
        const std::string why = zip_file_strerror(f);
        zip_fclose(f);
        throw Error(where(path(), name) + "corrupt zip member: " + why);
      }
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    zip_fclose(f);
    if (got < n) throw Error(where(path(), name) + "zip member is truncated");
    return buf;
  }

 private:
  [[noreturn]] void fail(const std::string& why, zip_error_t* err) {
    const std::string msg = "'" + map_->path() + "': " + why + " (" + zip_error_strerror(err) + ")";
    zip_error_fini(err);
    throw Error(msg);
  }
  std::shared_ptr<const MappedFile> map_;
  zip_t* zip_ = nullptr;
  mutable std::mutex mu_;
};

}  // namespace

std::vector<Entry> read_npz(const std::string& path) {
  auto map = MappedFile::open(path);
  if (map->size() == 0) throw Error("'" + path + "' is empty (not a zip archive)");
  auto zip = std::make_shared<Archive>(map);
  std::vector<Entry> out;
  const zip_int64_t n = zip->count();
  for (zip_int64_t i = 0; i < n; ++i) {
    const Archive::Member m = zip->stat(static_cast<zip_uint64_t>(i));
    if (m.name.empty() || m.name.back() == '/') continue;  // directories
    std::string name = m.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    const std::string what = "'" + path + "': member '" + m.name + "'";
    // Read just enough for the header: the prefix first, then the declared header length.
    std::vector<uint8_t> head = zip->read(i, std::min<uint64_t>(m.size, 12), m.name);
    if (head.size() < 10 || std::memcmp(head.data(), "\x93NUMPY", 6) != 0)
      throw Error(what + " is not a .npy array (bad magic)");
    const uint64_t hl =
        head[6] == 1 ? (head[8] | (head[9] << 8)) + 10ull
        : head.size() >= 12
            ? (head[8] | (head[9] << 8) | (head[10] << 16) | (uint64_t{head[11]} << 24)) + 12ull
            : 12ull;
    head = zip->read(i, std::min<uint64_t>(m.size, hl), m.name);
    NpyHeader h = parse_npy_header(head.data(), head.size(), what, true);
    // parse_npy_header checked the data against the bytes it saw; check it against the member.
    if (h.data_offset + h.nbytes != m.size)
      throw Error(what + ": " + dtype_name(h.dtype) + " " + shape_str(h.shape) + " needs " +
                  std::to_string(h.data_offset + h.nbytes) + " bytes but the member holds " +
                  std::to_string(m.size));
    Entry e;
    e.info = {name, dtype_name(h.dtype), h.shape, h.nbytes, path, {}, {}};
    const zip_uint64_t idx = static_cast<zip_uint64_t>(i);
    const uint64_t total = m.size;
    const std::string member = m.name;
    e.raw = [zip, idx, total, member, h, what] {
      std::vector<uint8_t> all = zip->read(idx, total, member);
      return decode_npy_data(h, all.data() + h.data_offset);
    };
    auto raw = e.raw;
    e.load = [raw] {
      Tensor t = raw();
      return t.dtype() == DType::F32 ? t : t.to_f32();
    };
    out.push_back(std::move(e));
  }
  return out;
}

#endif

}  // namespace castscope::io::detail
