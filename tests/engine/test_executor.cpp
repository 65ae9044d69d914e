// The executor: where work is placed, what a device failure leads to, that a swept tensor is
// uploaded once for all its datatypes, progress and cancellation, and that every result equals
// the CPU's bits. A host-memory backend stands in for the GPU, so this runs on any machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "castscope/executor.hpp"
#include "castscope/export.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/rotate.hpp"
#include "test_seed.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

uint64_t seed() {
  static const uint64_t s = test::test_seed();
  return s;
}

using test::normal;
using test::same_bits;

bool same_stats(const Stats& a, const Stats& b) {
  return std::memcmp(&a.mse, &b.mse, sizeof a.mse) == 0 &&
         std::memcmp(&a.snr_db, &b.snr_db, sizeof a.snr_db) == 0 &&
         std::memcmp(&a.max_abs_err, &b.max_abs_err, sizeof a.max_abs_err) == 0 &&
         std::memcmp(&a.mean_err, &b.mean_err, sizeof a.mean_err) == 0 && a.clipped == b.clipped &&
         a.count == b.count && a.zeros_out == b.zeros_out;
}

// A device in host memory: its copies are host tensors, its casts the CPU's. It counts what it
// is asked for and fails on request, as a GPU out of memory would.
class HostDevice final : public exec::DeviceBackend {
 public:
  bool usable = true;
  bool fail_upload = false, fail_cast = false;
  bool rotates = false;  // the stand-in rotates (on the CPU) only when told to
  std::atomic<int> probes{0}, uploads{0}, casts{0}, device_stats{0}, rotations{0};
  std::function<void()> on_stats;  // called before each device statistics

  const char* name() const override { return "hostdevice"; }
  exec::DeviceFacts facts() override {
    exec::DeviceFacts f;
    f.available = [this](std::string* why) {
      ++probes;
      if (!usable && why) *why = "the test's device is switched off";
      return usable;
    };
    return f;
  }
  CastResult cast(const Tensor& x, const DataType& d, const CastOptions& o) override {
    ++casts;
    if (fail_cast) throw Error("device out of memory (test)");
    CastOptions c = o;
    c.device = Device::CPU;
    CastResult r = castscope::cast(x, d, c);
    r.backend = name();
    return r;
  }
  exec::DeviceHandle upload(const Tensor& x) override {
    ++uploads;
    if (fail_upload) throw Error("device out of memory (test)");
    return std::make_shared<Tensor>(x.to_f32());
  }
  Stats cast_stats(const exec::DeviceHandle& h, const DataType& d, const CastOptions& o) override {
    ++device_stats;
    if (on_stats) on_stats();
    if (fail_cast) throw Error("device out of memory (test)");
    const Tensor& x = *static_cast<const Tensor*>(h.get());
    CastOptions c = o;
    c.device = Device::CPU;
    const CastResult r = castscope::cast(x, d, c);
    return compute_stats(x, r.values, r.counts.clipped);
  }
  Tensor rotate(const Tensor& x, const Rotation& r, float scale, int64_t outer, int64_t len,
                int64_t inner, bool inverse) override {
    ++rotations;
    if (!rotates) return exec::DeviceBackend::rotate(x, r, scale, outer, len, inner, inverse);
    return castscope::rotate(x.reshaped({outer, len, inner}), r, 1, inverse, Device::CPU)
        .reshaped(x.shape());
  }
};

exec::DeviceFacts facts(bool available, bool running = false, bool starting = false,
                        int* probes = nullptr) {
  exec::DeviceFacts f;
  f.running = running;
  f.starting = starting;
  f.available = [=](std::string* why) {
    if (probes) ++*probes;
    if (!available && why) *why = "no device here";
    return available;
  };
  return f;
}

TEST(Executor, PlacementDecisions) {
  using exec::OnFailure;
  using exec::Work;
  const DataType fp8 = DataType::parse("mxfp8e4");
  const DataType ggml = DataType::parse("q4_0");
  int probes = 0;

  // Forced CPU never asks for the GPU (the ask loads the driver).
  exec::Placement p = exec::decide(Work::Cast, Device::CPU, int64_t{1} << 40, &fp8,
                                   facts(true, true, false, &probes));
  EXPECT_EQ(p.device, Device::CPU);
  EXPECT_EQ(probes, 0);

  // Auto keeps a small cast on the CPU (start-up cost), without asking either.
  p = exec::decide(Work::Cast, Device::Auto, 4096, &fp8, facts(true, false, false, &probes));
  EXPECT_EQ(p.device, Device::CPU);
  EXPECT_NE(p.reason.find("auto"), std::string::npos) << p.reason;
  EXPECT_FALSE(p.no_gpu);
  EXPECT_EQ(probes, 0);

  // ... and sends one past the threshold to a usable GPU; the threshold drops once it runs.
  const int64_t cold = auto_gpu_min_elements(fp8, false), warm = auto_gpu_min_elements(fp8, true);
  EXPECT_LE(warm, cold);
  EXPECT_EQ(exec::decide(Work::Cast, Device::Auto, cold, &fp8, facts(true)).device, Device::CUDA);
  EXPECT_EQ(exec::decide(Work::Cast, Device::Auto, cold - 1, &fp8, facts(true)).device,
            Device::CPU);
  EXPECT_EQ(exec::decide(Work::Cast, Device::Auto, warm, &fp8, facts(true, true)).device,
            Device::CUDA);

  // A family without device kernels stays on the CPU whatever was asked.
  p = exec::decide(Work::Cast, Device::CUDA, cold, &ggml, facts(true));
  EXPECT_EQ(p.device, Device::CPU);
  EXPECT_NE(p.reason.find("q4_0"), std::string::npos) << p.reason;

  // CUDA asked, none usable: the CPU with the reason (FallBack), or the device attempt that
  // reports it (Throw).
  p = exec::decide(Work::Cast, Device::CUDA, 16, &fp8, facts(false));
  EXPECT_EQ(p.device, Device::CPU);
  EXPECT_TRUE(p.no_gpu);
  EXPECT_NE(p.reason.find("no device here"), std::string::npos) << p.reason;
  p = exec::decide(Work::Linear, Device::CUDA, 16, nullptr, facts(false), OnFailure::Throw);
  EXPECT_EQ(p.device, Device::CUDA);
  EXPECT_TRUE(p.no_gpu);

  // Sweeps, rotations and linear layers take a usable GPU under Auto at any size.
  for (Work w : {Work::Sweep, Work::Rotation, Work::Linear}) {
    EXPECT_EQ(exec::decide(w, Device::Auto, 1, nullptr, facts(true)).device, Device::CUDA)
        << exec::to_string(w);
    EXPECT_EQ(exec::decide(w, Device::Auto, 1, nullptr, facts(false)).device, Device::CPU)
        << exec::to_string(w);
  }
  // The views wait for a GPU that is still starting under Auto, not when CUDA was asked for.
  EXPECT_EQ(exec::decide(Work::Views, Device::Auto, 1, &fp8, facts(true, false, true)).device,
            Device::CPU);
  EXPECT_EQ(exec::decide(Work::Views, Device::CUDA, 1, &fp8, facts(true, false, true)).device,
            Device::CUDA);
}

TEST(Executor, FallbackRecordsTheReasonAndKeepsTheBits) {
  auto dev = std::make_shared<HostDevice>();
  exec::Executor ex(dev);
  exec::Override use(ex);
  const Tensor x = normal({64, 96}, seed());
  const DataType d = DataType::parse("nvfp4");
  CastOptions cpu;
  cpu.device = Device::CPU;
  const CastResult want = cast(x, d, cpu);
  EXPECT_EQ(dev->probes, 0) << "a CPU cast asked about the device";

  CastOptions o;
  o.device = Device::CUDA;
  const CastResult on_dev = cast(x, d, o);
  EXPECT_EQ(dev->casts, 1);
  EXPECT_EQ(on_dev.backend, "hostdevice");
  EXPECT_TRUE(same_bits(on_dev.values, want.values)) << "seed " << seed();

  dev->fail_cast = true;
  const CastResult fell = cast(x, d, o);
  EXPECT_EQ(fell.backend, "cpu");
  EXPECT_TRUE(same_bits(fell.values, want.values)) << "seed " << seed();
  ASSERT_EQ(ex.fallbacks().size(), 1u);
  EXPECT_NE(ex.fallbacks()[0].find("out of memory"), std::string::npos);

  // A request the host refuses too is the caller's error, not a device failure.
  o.axis = 7;
  EXPECT_THROW(cast(x, d, o), Error);
  EXPECT_EQ(ex.fallbacks().size(), 1u);

  // Throw hands the device's error on; Cancelled always passes through, the host untouched.
  exec::Placement p = ex.place(exec::Work::Linear, Device::CUDA, 1, nullptr);
  ASSERT_EQ(p.device, Device::CUDA);
  bool host_ran = false;
  auto fail = []() -> int { throw Error("device failed (test)"); };
  auto host = [&] {
    host_ran = true;
    return 1;
  };
  EXPECT_THROW(ex.run<int>(p, exec::OnFailure::Throw, fail, host), Error);
  EXPECT_FALSE(host_ran);
  EXPECT_THROW(ex.run<int>(
                   p, exec::OnFailure::FallBack, []() -> int { throw Cancelled(); }, host),
               Cancelled);
  EXPECT_FALSE(host_ran);
  std::string why;
  EXPECT_EQ(ex.run<int>(p, exec::OnFailure::FallBack, fail, host, &why), 1);
  EXPECT_TRUE(host_ran);
  EXPECT_EQ(why, "device failed (test)");

  // No usable device: a cast asked of it runs on the CPU, same bits.
  dev->usable = false;
  dev->fail_cast = false;
  o.axis = -1;
  const int casts = dev->casts;
  EXPECT_TRUE(same_bits(cast(x, d, o).values, want.values));
  EXPECT_EQ(dev->casts, casts);
}

TEST(Executor, DeviceCacheUploadsATensorOnce) {
  auto dev = std::make_shared<HostDevice>();
  exec::DeviceCache cache(dev);
  const Tensor a = normal({8, 32}, seed()), b = normal({8, 32}, seed() + 1);
  const exec::DeviceHandle h = cache.get(a);
  EXPECT_EQ(cache.get(a), h);
  EXPECT_EQ(cache.uploads(), 1u);
  cache.get(b);
  EXPECT_EQ(cache.uploads(), 2u);
  cache.get(a);  // one tensor held: a comes back after b
  EXPECT_EQ(cache.uploads(), 3u);
  cache.clear();
  cache.get(a);
  EXPECT_EQ(cache.uploads(), 4u);
  EXPECT_EQ(dev->uploads, 4);
}

MemoryModel three_tensors() {
  MemoryModel m("three");
  m.add("layers.0.q.weight", normal({64, 128}, seed() + 10, 0.02));
  m.add("layers.0.up.weight", normal({96, 128}, seed() + 11, 0.5));
  m.add("layers.1.down.weight", normal({128, 96}, seed() + 12, 3.0));
  return m;
}

MapOptions three_dtypes(Device device) {
  MapOptions o;
  o.dtypes = {"mxfp4e2", "nvfp4", "e4m3fn", "q4_0"};
  o.cast.device = device;
  return o;
}

TEST(Executor, SweepUploadsEachTensorOnceAndGivesTheHostsStatistics) {
  const MemoryModel m = three_tensors();
  const ModelMap want = sweep_model(m, three_dtypes(Device::CPU));
  ASSERT_EQ(want.backend, "cpu");

  auto dev = std::make_shared<HostDevice>();
  exec::Executor ex(dev);
  exec::Override use(ex);
  const ModelMap got = sweep_model(m, three_dtypes(Device::Auto));
  EXPECT_EQ(got.backend, "hostdevice");
  EXPECT_EQ(dev->uploads, 3) << "one upload per tensor, not per datatype";
  EXPECT_EQ(dev->device_stats, 9) << "q4_0 has no device kernels: the host casts it";
  ASSERT_EQ(got.rows.size(), want.rows.size());
  for (size_t r = 0; r < got.rows.size(); ++r)
    for (size_t c = 0; c < got.rows[r].cells.size(); ++c)
      EXPECT_TRUE(same_stats(got.rows[r].cells[c].stats, want.rows[r].cells[c].stats))
          << got.rows[r].name << " " << got.columns[c] << " seed " << seed();
  EXPECT_TRUE(ex.fallbacks().empty());

  // Out of device memory on the first upload: the rest of the sweep runs on the host, the
  // reason recorded, the statistics the same.
  dev->fail_upload = true;
  const ModelMap fell = sweep_model(m, three_dtypes(Device::Auto));
  EXPECT_EQ(fell.backend, "cpu");
  EXPECT_EQ(dev->uploads, 4);
  ASSERT_EQ(ex.fallbacks().size(), 1u);
  EXPECT_NE(ex.fallbacks()[0].find("out of memory"), std::string::npos);
  for (size_t r = 0; r < fell.rows.size(); ++r)
    for (size_t c = 0; c < fell.rows[r].cells.size(); ++c)
      EXPECT_TRUE(same_stats(fell.rows[r].cells[c].stats, want.rows[r].cells[c].stats));

  // A device cast that fails falls back per cell.
  dev->fail_upload = false;
  dev->fail_cast = true;
  const ModelMap cells = sweep_model(m, three_dtypes(Device::Auto));
  EXPECT_EQ(cells.backend, "hostdevice");
  EXPECT_EQ(ex.fallbacks().size(), 10u);
  for (size_t r = 0; r < cells.rows.size(); ++r)
    for (size_t c = 0; c < cells.rows[r].cells.size(); ++c) {
      EXPECT_TRUE(cells.rows[r].cells[c].error.empty()) << cells.rows[r].cells[c].error;
      EXPECT_TRUE(same_stats(cells.rows[r].cells[c].stats, want.rows[r].cells[c].stats));
    }

  // Forced CPU and rotations keep the sweep off the device.
  const int uploads = dev->uploads;
  EXPECT_EQ(sweep_model(m, three_dtypes(Device::CPU)).backend, "cpu");
  MapOptions rot = three_dtypes(Device::Auto);
  rot.cast.rotate = parse_rotation("h32");
  EXPECT_EQ(sweep_model(m, rot).backend, "cpu");
  EXPECT_EQ(dev->uploads, uploads);
}

TEST(Executor, SweepReportsProgressAndStopsWhenCancelled) {
  const MemoryModel m = three_tensors();
  auto dev = std::make_shared<HostDevice>();
  exec::Executor ex(dev);
  exec::Override use(ex);

  JobControl job;
  std::vector<double> seen;
  std::mutex mu;
  job.on_progress = [&](double f) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(f);
  };
  sweep_model(m, three_dtypes(Device::Auto), &job);
  ASSERT_FALSE(seen.empty());
  EXPECT_DOUBLE_EQ(job.progress.load(), 1.0);
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);
  for (double f : seen) EXPECT_TRUE(f >= 0.0 && f <= 1.0) << f;

  // Cancelled from inside the device work: the sweep stops there, no host fallback.
  JobControl stop;
  dev->on_stats = [&] {
    if (dev->device_stats == 2) stop.cancel = true;
  };
  dev->device_stats = 0;
  EXPECT_THROW(sweep_model(m, three_dtypes(Device::Auto), &stop), Cancelled);
  EXPECT_LE(dev->device_stats, 3);
  EXPECT_TRUE(ex.fallbacks().empty());
}

TEST(Executor, LinearErrorAndRotationPlacedByTheExecutor) {
  auto dev = std::make_shared<HostDevice>();
  exec::Executor ex(dev);
  exec::Override use(ex);
  dev->usable = false;
  const Tensor x = normal({16, 64}, seed() + 20), w = normal({32, 64}, seed() + 21, 0.1);
  LinearErrorOptions lo;
  lo.weight_dtype = DataType::parse("mxfp4e2");
  lo.cast.device = Device::CUDA;
  // CUDA asked and none usable: the linear layer's policy is to throw, naming why.
  EXPECT_THROW(linear_error(x, w, lo), Error);
  lo.cast.device = Device::Auto;
  const LinearError auto_run = linear_error(x, w, lo);
  lo.cast.device = Device::CPU;
  const LinearError cpu_run = linear_error(x, w, lo);
  EXPECT_EQ(auto_run.product, "fp32 (CPU)");
  EXPECT_EQ(std::memcmp(&auto_run.snr_db, &cpu_run.snr_db, sizeof(double)), 0);

  // A rotation on the unusable device runs on the CPU with the CPU's bits.
  const Rotation r = parse_rotation("h32r7");
  EXPECT_TRUE(
      same_bits(rotate(x, r, -1, false, Device::CUDA), rotate(x, r, -1, false, Device::CPU)));
  EXPECT_EQ(dev->probes > 0, true);
  EXPECT_EQ(dev->rotations, 0);

  // A usable device gets the rotation through its backend; one without a device rotation (the
  // backend's default) falls back to the CPU, the reason recorded.
  dev->usable = true;
  dev->rotates = true;
  EXPECT_TRUE(
      same_bits(rotate(x, r, -1, false, Device::CUDA), rotate(x, r, -1, false, Device::CPU)));
  EXPECT_EQ(dev->rotations, 1);
  dev->rotates = false;
  const size_t before = ex.fallbacks().size();
  EXPECT_TRUE(
      same_bits(rotate(x, r, -1, false, Device::CUDA), rotate(x, r, -1, false, Device::CPU)));
  EXPECT_EQ(dev->rotations, 2);
  ASSERT_EQ(ex.fallbacks().size(), before + 1);
  EXPECT_NE(ex.fallbacks().back().find("no device rotation"), std::string::npos)
      << ex.fallbacks().back();
}

// A placed host tensor is the tensor itself; its statistics are the host functions'.
TEST(Executor, PlacedTensorOnTheHostIsTheTensor) {
  const Tensor x = normal({24, 40}, seed() + 40);
  CastOptions o;
  o.device = Device::CPU;
  const CastResult c = cast(x, DataType::parse("nvfp4"), o);
  const exec::PlacedTensor px(x), pq(c.values);
  ASSERT_TRUE(px);
  EXPECT_FALSE(px.on_device());
  EXPECT_EQ(px.device_data(), nullptr);
  EXPECT_EQ(px.host().data(), x.data());
  EXPECT_THROW(px.dev(), Error);
  EXPECT_TRUE(same_stats(exec::compute_stats(px, pq, c.counts.clipped),
                         compute_stats(x, c.values, c.counts.clipped)));
  const Histogram h = exec::histogram(pq, -4, 4, 33);
  EXPECT_EQ(h.counts, histogram(c.values.ptr<float>(), x.numel(), -4, 4, 33).counts);
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(x.ptr<float>()[i])));
  EXPECT_EQ(exec::absmax(px), m);
  // A block of the 2-D fold, clipped at the edges.
  const Tensor b = px.reshaped({24, 40}).block(20, 30, 10, 20);
  ASSERT_EQ(b.shape(), (Shape{4, 10}));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t k = 0; k < 10; ++k)
      ASSERT_EQ(b.ptr<float>()[r * 10 + k], x.ptr<float>()[(20 + r) * 40 + 30 + k]);
  EXPECT_THROW(px.block(24, 0, 1, 1), Error);
  // The parts of a placed host result are its tensors.
  const exec::PlacedResult pr(c);
  EXPECT_EQ(pr.part(exec::Part::Scale).host().data(), c.scale.data());
  EXPECT_EQ(pr.values().host().data(), c.values.data());
  // The mask's cell counts are counted inside the host views' own pass: host inputs are refused
  // here, naming why, instead of being counted a second way.
  try {
    exec::cell_counts(px, pq, nullptr, 40, 1, 1, 24, 40);
    ADD_FAILURE() << "cell_counts took host tensors";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device tensors only"), std::string::npos) << e.what();
  }
}

TEST(Executor, PlacedResultHoldsAHostCastAsItIs) {
  const Tensor x = normal({32, 64}, seed() + 30);
  CastOptions o;
  o.device = Device::CPU;
  o.mode = CastMode::Actual;
  const CastResult c = cast(x, DataType::parse("mxfp4e2"), o);
  const exec::PlacedResult r(c);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.on_device());
  EXPECT_EQ(r.device(), Device::CPU);
  EXPECT_EQ(r.backend(), "cpu");
  EXPECT_EQ(r.mode(), CastMode::Actual);
  EXPECT_EQ(r.shape(), x.shape());
  EXPECT_EQ(r.dtype().str(), c.dtype.str());
  EXPECT_EQ(r.counts().clipped, c.counts.clipped);
  EXPECT_TRUE(same_bits(r.host().codes, c.codes));
  EXPECT_TRUE(same_bits(r.to_host().scale, c.scale));
  EXPECT_THROW(r.dev(), Error);
  const exec::PlacedResult empty;
  EXPECT_FALSE(empty);
  EXPECT_THROW(empty.shape(), Error);
  // A tensor in device memory is cast where it lives: asking for the CPU is refused.
  EXPECT_THROW(exec::current().cast_resident(exec::PlacedTensor(), DataType::parse("nvfp4"), o),
               Error);
}

}  // namespace
}  // namespace castscope
