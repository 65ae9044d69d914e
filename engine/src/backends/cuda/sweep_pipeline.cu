// The tensor stream of sweep_pipeline.hpp: reader threads -> pinned slots -> upload thread ->
// tensors on the device, in the order the sweep asked for them.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>

#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/sweep_pipeline.hpp"

namespace castscope::gpu {
namespace {

// Stored dtypes widened on the device exactly as the readers' load() widens them on the host.
bool device_castable(DType d) {
  return d == DType::F32 || d == DType::BF16 || d == DType::F16;
}

template <class T>
__global__ void widen_kernel(const T* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      out[i] = __bfloat162float(in[i]);
    else
      out[i] = __half2float(in[i]);
  }
}

// The float32 tensor load() would give, from the stored bytes already on the device.
DeviceTensor widen(const DeviceTensor& raw) {
  if (raw.dtype() == DType::F32) return raw;
  DeviceTensor out = DeviceTensor::empty(DType::F32, raw.shape());
  const int64_t n = raw.numel();
  const unsigned grid = detail::grid_for(n, 256, 4096);
  if (raw.dtype() == DType::BF16)
    widen_kernel<<<grid, 256, 0, detail::stream()>>>(static_cast<const __nv_bfloat16*>(raw.data()),
                                                     static_cast<float*>(out.mutable_data()), n);
  else
    widen_kernel<<<grid, 256, 0, detail::stream()>>>(static_cast<const __half*>(raw.data()),
                                                     static_cast<float*>(out.mutable_data()), n);
  CS_CUDA_LAUNCH("widen_kernel");
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
  return out;
}

// Faults a slice of the file map in with one call instead of a page fault per 4 KB page; on a
// cold file this also puts the readers' slices to the disk in parallel. A hint: failures (an older
// kernel, memory that is not a file map) leave the copy to fault the pages in.
void populate(const void* p, size_t len) {
#ifdef MADV_POPULATE_READ
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) + len;
  madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_READ);
#else
  (void)p;
  (void)len;
#endif
}

struct Item {
  Tensor raw;  // the stored bytes (a view of the file map where the reader gives one)
  bool ok = false;
  DeviceTensor dev;
};

struct Slice {
  std::shared_ptr<Item> item;
  size_t off = 0, len = 0;
  int slot = -1;
  bool first = false, last = false;
};

class PinnedStream final : public TensorStream {
 public:
  PinnedStream(const io::Model& model, std::vector<std::string> names, const TensorStreamOptions& o)
      : model_(model), names_(std::move(names)), opt_(o) {
    opt_.readers = std::max(1, opt_.readers);
    opt_.slots = std::max(2, opt_.slots);
    opt_.slot_bytes = std::max<size_t>(opt_.slot_bytes, 1u << 20);
    // A small model (the app's map of one checkpoint file, a test) pins no more than it streams.
    uint64_t total = 0, largest = 0;
    for (const std::string& n : names_)
      if (const io::TensorInfo* t = model_.find(n)) {
        total += t->nbytes;
        largest = std::max<uint64_t>(largest, t->nbytes);
      }
    if (largest > 0) {
      opt_.slot_bytes = std::max<size_t>(1u << 20, std::min<uint64_t>(opt_.slot_bytes, largest));
      const uint64_t need = (total + opt_.slot_bytes - 1) / opt_.slot_bytes;
      opt_.slots = static_cast<int>(std::max<uint64_t>(2, std::min<uint64_t>(opt_.slots, need)));
    }
    CS_CUDA(cudaGetDevice(&device_));
    for (int s = 0; s < opt_.slots; ++s) {
      void* p = nullptr;
      if (cudaHostAlloc(&p, opt_.slot_bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        break;  // fewer slots: still correct, less overlap
      }
      pinned_.push_back(p);
      free_slots_.push_back(s);
    }
    if (pinned_.size() < 2) {
      for (void* p : pinned_) cudaFreeHost(p);
      throw Error("tensor stream: cannot allocate pinned staging memory");
    }
    for (int r = 0; r < opt_.readers; ++r) readers_.emplace_back([this] { read_loop(); });
    uploader_ = std::thread([this] { upload_loop(); });
  }

  ~PinnedStream() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : readers_) t.join();
    uploader_.join();
    for (void* p : pinned_) cudaFreeHost(p);
  }

  DeviceTensor next() override {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lk(mu_);
    ahead_ -= held_;  // the consumer is done with the tensor it took last
    held_ = 0;
    cv_.notify_all();
    cv_.wait(lk, [&] { return !ready_.empty() || (uploader_done_ && ready_.empty()); });
    DeviceTensor d;
    if (!ready_.empty()) {
      d = std::move(ready_.front().first);
      held_ = ready_.front().second;
      ready_.pop_front();
    }
    stats_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return d;
  }

  TensorStreamStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }

 private:
  // Claims the next slice (a staging slot and the bytes it takes) in the sweep's order. Slots are
  // claimed together with the slice, so the oldest slice not yet uploaded always holds one and
  // the upload thread, which takes slices in order, never waits on a reader that waits for it.
  bool claim(Slice& s, uint64_t& seq) {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !free_slots_.empty() || next_tensor_ >= names_.size(); });
      if (stop_ || next_tensor_ >= names_.size()) return false;
      if (!cur_) {
        cur_ = std::make_shared<Item>();
        try {
          cur_->raw = model_.load_raw(names_[next_tensor_]);
          cur_->ok = cur_->raw && device_castable(cur_->raw.dtype()) && cur_->raw.nbytes() > 0;
        } catch (const std::exception&) {
          cur_->ok = false;  // the consumer loads this one itself
        }
        cur_off_ = 0;
      }
      s = Slice{};
      s.item = cur_;
      s.first = cur_off_ == 0;
      if (cur_->ok) {
        s.slot = free_slots_.back();
        free_slots_.pop_back();
        s.off = cur_off_;
        s.len = std::min(pinned_bytes(), cur_->raw.nbytes() - cur_off_);
        cur_off_ += s.len;
        s.last = cur_off_ == cur_->raw.nbytes();
      } else {
        s.last = true;
      }
      seq = next_seq_++;
      if (s.last) {
        cur_.reset();
        ++next_tensor_;
      }
      return true;
    }
  }

  size_t pinned_bytes() const { return opt_.slot_bytes; }

  void read_loop() {
    Slice s;
    for (;;) {
      uint64_t seq = 0;
      if (!claim(s, seq)) break;
      if (s.len) {
        const char* src = static_cast<const char*>(s.item->raw.data()) + s.off;
        populate(src, s.len);
        std::memcpy(pinned_[static_cast<size_t>(s.slot)], src, s.len);
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        filled_.emplace(seq, std::move(s));
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lk(mu_);
    ++readers_done_;
    cv_.notify_all();
  }

  void upload_loop() {
    cudaSetDevice(device_);
    for (uint64_t seq = 0;; ++seq) {
      Slice s;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] {
          return stop_ || filled_.count(seq) ||
                 (readers_done_ == static_cast<int>(readers_.size()) && !filled_.count(seq));
        });
        if (stop_ || !filled_.count(seq)) break;
        s = std::move(filled_[seq]);
        filled_.erase(seq);
      }
      Item& it = *s.item;
      // Device bytes at the peak: the stored tensor and its float32 widening.
      const uint64_t bytes =
          it.ok ? it.raw.nbytes() + (it.raw.dtype() == DType::F32 ? 0 : 4 * it.raw.numel()) : 0;
      if (s.first && it.ok) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || ahead_ == 0 || ahead_ + bytes <= opt_.device_ahead; });
        if (stop_) break;
        ahead_ += bytes;
        lk.unlock();
        try {
          it.dev = DeviceTensor::empty(it.raw.dtype(), it.raw.shape());
        } catch (const std::exception&) {
          it.ok = false;  // out of GPU memory: the consumer takes the host path for this one
        }
      }
      if (it.ok && s.len) {
        const cudaError_t e1 = cudaMemcpyAsync(static_cast<char*>(it.dev.mutable_data()) + s.off,
                                               pinned_[static_cast<size_t>(s.slot)], s.len,
                                               cudaMemcpyHostToDevice, detail::stream());
        const cudaError_t e2 = e1 == cudaSuccess ? cudaStreamSynchronize(detail::stream()) : e1;
        if (e2 != cudaSuccess) {
          cudaGetLastError();
          it.ok = false;
        }
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (s.slot >= 0) free_slots_.push_back(s.slot);
      }
      cv_.notify_all();
      if (s.last && it.ok) {
        try {
          it.dev = widen(it.dev);
        } catch (const std::exception&) {
          it.ok = false;
        }
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (s.last) {
          // A tensor that failed after its allocation gives its device bytes back at once.
          const bool counted = bytes > 0;
          if (!it.ok) {
            it.dev = DeviceTensor();
            if (counted) ahead_ -= bytes;
          }
          ready_.emplace_back(it.ok ? it.dev : DeviceTensor(), it.ok ? bytes : 0);
          if (it.ok) stats_.bytes += bytes;
          it.raw = Tensor();
          it.dev = DeviceTensor();
        }
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lk(mu_);
    uploader_done_ = true;
    cv_.notify_all();
  }

  const io::Model& model_;
  const std::vector<std::string> names_;
  TensorStreamOptions opt_;
  int device_ = 0;
  std::vector<void*> pinned_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<int> free_slots_;
  // Reader side: the tensor being cut into slices.
  size_t next_tensor_ = 0;
  std::shared_ptr<Item> cur_;
  size_t cur_off_ = 0;
  uint64_t next_seq_ = 0;
  int readers_done_ = 0;
  std::map<uint64_t, Slice> filled_;
  // Upload side: finished tensors in order, with the device bytes each holds.
  std::deque<std::pair<DeviceTensor, uint64_t>> ready_;
  uint64_t ahead_ = 0, held_ = 0;
  bool uploader_done_ = false;
  TensorStreamStats stats_;

  std::vector<std::thread> readers_;
  std::thread uploader_;
};

}  // namespace

std::unique_ptr<TensorStream> open_tensor_stream(const io::Model& model,
                                                 std::vector<std::string> names,
                                                 const TensorStreamOptions& opt) {
  if (!available()) return nullptr;
  return std::make_unique<PinnedStream>(model, std::move(names), opt);
}

}  // namespace castscope::gpu
