// What every row of the family table must provide, and that the engine's entry points reach each
// family through its row: a registry datatype of every family casts, packs, unpacks and upcasts
// to the values of its virtual cast, and its text facts round-trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <map>
#include <set>
#include <string>

#include "castscope/cast.hpp"
#include "castscope/datatype.hpp"
#include "castscope/planner.hpp"
#include "families/family_table.hpp"
#include "test_seed.hpp"

namespace {

using namespace castscope;

TEST(FamilyTable, EveryRowIsCompleteAndAtItsFamilysIndex) {
  size_t n = 0;
  const detail::FamilyOps* rows = detail::family_table(&n);
  ASSERT_EQ(n, static_cast<size_t>(Family::GGML) + 1) << "a family without a row";
  std::set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const detail::FamilyOps& r = rows[i];
    SCOPED_TRACE(r.traits.name ? r.traits.name : "(unnamed)");
    EXPECT_EQ(static_cast<size_t>(r.traits.family), i);
    ASSERT_NE(r.traits.name, nullptr);
    ASSERT_NE(r.traits.kind, nullptr);
    EXPECT_TRUE(names.insert(r.traits.name).second) << "duplicate family name";
    EXPECT_NE(r.str, nullptr);
    EXPECT_NE(r.bits_per_value, nullptr);
    EXPECT_NE(r.describe, nullptr);
    EXPECT_NE(r.cast, nullptr);
    EXPECT_NE(r.upcast, nullptr);
    EXPECT_NE(r.pack, nullptr);
    EXPECT_NE(r.unpack, nullptr);
    EXPECT_NE(r.storage_bits, nullptr);
    // virtual_cast is optional: null takes the common path.
    EXPECT_EQ(r.traits.tcfp_bits != 0, std::string(r.traits.kind) == "TCFP");
    if (r.traits.grammar) EXPECT_TRUE(r.traits.tensorcast_layout && r.traits.device_cast);
    // A family whose scales are not in TensorCast's layout must say why it has no tile map.
    EXPECT_EQ(r.traits.tensorcast_layout, r.traits.no_tile_map == nullptr);
    if (r.traits.element_format) EXPECT_NO_THROW(NumberSpec::parse(r.traits.element_format));
    EXPECT_EQ(&family_traits(r.traits.family), &r.traits);
  }
}

TEST(FamilyTable, EveryFamilyRoundTripsThroughItsRow) {
  const uint64_t seed = test::test_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor x = Tensor::empty(DType::F32, {8, 256});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_ptr<float>()[i] = nd(rng);
  // Completed round trips per family: every family needs one; the grammar family runs them all.
  std::map<Family, int> done;
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    SCOPED_TRACE(e.name + " (seed " + std::to_string(seed) + ")");
    if (done[d.family()] > 0 && d.family() != Family::Standard) continue;
    EXPECT_EQ(DataType::parse(d.str()).str(), d.str());
    EXPECT_FALSE(d.describe().empty());
    const double bpv = d.bits_per_value(256);
    EXPECT_GT(bpv, 0.0);
    EXPECT_LE(bpv, 64.0);
    CastOptions o;
    o.device = Device::CPU;
    CastResult v;
    try {
      v = cast(x, d, o);
    } catch (const Error&) {
      continue;  // a datatype whose tile does not fit this shape (e.g. 2-D tiles of 128)
    }
    o.mode = CastMode::Compress;
    const CastResult c = cast(x, d, o);
    const Tensor back = upcast(unpack(c));
    const Tensor direct = upcast(c);
    ASSERT_EQ(back.numel(), x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float a = v.values.ptr<float>()[i], b = back.ptr<float>()[i],
                  cdir = direct.ptr<float>()[i];
      ASSERT_TRUE(std::memcmp(&a, &b, 4) == 0 && std::memcmp(&a, &cdir, 4) == 0)
          << "element " << i << ": virtual " << a << ", compressed " << b;
    }
    // The row's exact storage: at least the code bits, within the rounding of bits_per_value.
    const uint64_t bits = storage_bits(d, x.shape(), o);
    EXPECT_NEAR(static_cast<double>(bits), bpv * static_cast<double>(x.numel()),
                0.01 * bpv * static_cast<double>(x.numel()) + 64);
    ++done[d.family()];
  }
  size_t n = 0;
  const detail::FamilyOps* rows = detail::family_table(&n);
  for (size_t i = 0; i < n; ++i)
    EXPECT_GT(done[rows[i].traits.family], 0)
        << "no registry datatype of family " << rows[i].traits.name << " completed a round trip";
}

}  // namespace
