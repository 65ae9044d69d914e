// How close a codebook subtile's best mapping is to its runner-up, on Gaussian tiles: the data
// a cheaper mapping choice needs (float sums with an error bound, the exact double sums only where
// the bound cannot separate the best mapping from the others; docs/gpu-notes.md, codebooks).
// Sums are encode_sub's (cb_block.hpp), in double, element order, no fused multiply-adds.
// Run: ./build/bench/codebook_ties [dtype tiles seed input], input float32 (default) or bfloat16:
// bfloat16 values land on midpoints between magnitudes far more often, so ties between different
// magnitude sequences appear.
// Also: for relative windows 2^-6 to 2^-10, the subtiles with a mapping of other magnitudes within
// the window of the best, and what a pre-filter of that precision would leave a warp to resolve:
// the GPU kernel gives each thread one tile, so a warp holds 32 tiles' subtile si at once and runs
// as many exact passes as its busiest lane has candidates (the best and its near mappings; a lane
// with none needs no pass). The mean is over warps and subtile positions.
// Last, what pruning could skip of the float sums even knowing the best sum in advance: a
// mapping's running sum only grows, so once it passes the best's total the rest of its
// subtile could be skipped. Per lane, and per warp for chunks of four mappings (the float rows'
// 16-byte loads), which only skip where all 32 lanes have passed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "castscope/datatype.hpp"
#include "castscope/tensor.hpp"
#include "families/codebook/cb_cast.hpp"

using namespace castscope;
namespace cb = castscope::detail::cb;

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "icb44fi4_e32";
  const long tiles = argc > 2 ? std::atol(argv[2]) : 200000;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  const std::string input = argc > 4 ? argv[4] : "float32";
  if (input != "float32" && input != "bfloat16") {
    std::fprintf(stderr, "codebook_ties: input must be float32 or bfloat16, not %s\n",
                 input.c_str());
    return 1;
  }
  const bool bf16 = input == "bfloat16";
  try {
    const DataType d = DataType::parse(name);
    const codebook::Layout l = codebook::make_layout({1, 4096}, d, {});
    const cb::Params p = l.params();
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0, 1);
    std::vector<double> x(p.tile), sse(p.nmaps);
    std::vector<std::vector<double>> mags(p.nmaps);
    long subs = 0, ties = 0, ties_same = 0, ties_other = 0, near16 = 0, near6 = 0;
    constexpr int kWindows = 5, kFirst = 6, kLanes = 32;
    const int nsub = p.tile / p.sub;
    long within[kWindows] = {}, warps = 0, lane = 0;
    double passes[kWindows] = {};
    std::vector<int> lane_passes(static_cast<size_t>(kWindows) * kLanes * nsub);
    const int nchunks = (p.nmaps + 3) / 4;
    auto chunk_maps = [&](int c) { return std::min(4, p.nmaps - 4 * c); };
    std::vector<std::vector<double>> running(p.nmaps, std::vector<double>(p.sub));
    std::vector<int> chunk_from(static_cast<size_t>(kLanes) * nsub * nchunks);
    double lane_skip = 0, warp_skip = 0;
    std::vector<long> best_of(p.nmaps);
    for (long t = 0; t < tiles; ++t) {
      // float32 (or bfloat16) values over 20 binades of scale.
      const double s = std::ldexp(1.0, static_cast<int>(rng() % 20) - 10);
      for (double& v : x) {
        const float f = static_cast<float>(nd(rng) * s);
        v = bf16 ? bf16_to_float(float_to_bf16(f)) : f;
      }
      int nonfinite = 0;
      const auto g = cb::tile_scale(p, x.data(), p.tile, nonfinite);
      if (!cb::scale_usable(p, g)) continue;
      for (int s0 = 0, si = 0; s0 < p.tile; s0 += p.sub, ++si) {
        for (int m = 0; m < p.nmaps; ++m) {
          const double* mag = p.mags + m * p.half;
          mags[m].clear();
          double acc = 0;
          for (int i = s0; i < s0 + p.sub; ++i) {
            const int j = cb::nearest_slot(mag, p.half, cb::scaled_abs(p, g, x[i]));
            mags[m].push_back(mag[j]);
            const double e = cb::add_rn(cb::unscale(p, g, mag[j]), -std::fabs(x[i]));
            acc = cb::add_rn(acc, cb::mul_rn(e, e));
            running[m][i - s0] = acc;
          }
          sse[m] = acc;
        }
        int best = 0;
        for (int m = 1; m < p.nmaps; ++m)
          if (sse[m] < sse[best]) best = m;
        ++best_of[best];
        for (int c = 0; c < nchunks; ++c) {
          int from = 0;  // the chunk's sums can be skipped from element `from` of the subtile on
          for (int m = 4 * c; m < 4 * c + chunk_maps(c); ++m) {
            // Elements whose sums m needs: all for the best, else up to the first whose running
            // sum passes the best's total.
            int needed = 0;
            while (needed < p.sub && (m == best || running[m][needed] <= sse[best])) ++needed;
            needed = std::min(needed + 1, p.sub);
            lane_skip += p.sub - needed;
            from = std::max(from, needed);
          }
          chunk_from[(static_cast<size_t>(lane) * nsub + si) * nchunks + c] = from;
        }
        bool tie = false, same = false, other = false, n16 = false, n6 = false;
        for (int m = 0; m < p.nmaps; ++m) {
          if (m == best) continue;
          if (sse[m] == sse[best]) {
            tie = true;
            same = same || mags[m] == mags[best];
            other = other || mags[m] != mags[best];
          } else {
            n16 = n16 || sse[m] - sse[best] <= std::ldexp(sse[best], -16);
            n6 = n6 || sse[m] - sse[best] <= std::ldexp(sse[best], -6);
          }
        }
        for (int w = 0; w < kWindows; ++w) {
          int c = 0;
          for (int m = 0; m < p.nmaps; ++m)
            c += m != best && mags[m] != mags[best] &&
                 sse[m] - sse[best] <= std::ldexp(sse[best], -(kFirst + w));
          within[w] += c > 0;
          lane_passes[(static_cast<size_t>(w) * kLanes + lane) * nsub + si] = c ? c + 1 : 0;
        }
        ++subs;
        ties += tie;
        ties_same += same;
        ties_other += other;
        near16 += n16;
        near6 += n6;
      }
      if (++lane == kLanes) {
        lane = 0;
        ++warps;
        // A warp waits for its busiest lane: the most of lane-indexed counts at(l).
        auto busiest = [&](auto at) {
          int most = 0;
          for (int l2 = 0; l2 < kLanes; ++l2) most = std::max(most, at(static_cast<size_t>(l2)));
          return most;
        };
        for (int w = 0; w < kWindows; ++w)
          for (int si = 0; si < nsub; ++si)
            passes[w] += busiest([&](size_t l2) {
              return lane_passes[(static_cast<size_t>(w) * kLanes + l2) * nsub + si];
            });
        for (int si = 0; si < nsub; ++si)
          for (int c = 0; c < nchunks; ++c) {
            const int from =
                busiest([&](size_t l2) { return chunk_from[(l2 * nsub + si) * nchunks + c]; });
            warp_skip += static_cast<double>(kLanes) * (p.sub - from) * chunk_maps(c);
          }
      }
    }
    const double pc = subs ? 100.0 / static_cast<double>(subs) : 0.0;
    std::printf(
        "%s from %s (%d mappings, subtiles of %d, %ld subtiles, seed %llu)\n"
        "  best sum shared exactly with another mapping:      %8.4f%%\n"
        "    of which the two mappings' magnitudes agree:      %8.4f%%\n"
        "    of which they differ somewhere:                   %8.4f%%\n"
        "  runner-up above the best by at most 2^-16 (rel.):   %8.4f%%\n"
        "  runner-up above the best by at most 2^-6 (rel.):    %8.4f%%\n",
        name, input.c_str(), p.nmaps, p.sub, subs, static_cast<unsigned long long>(seed), ties * pc,
        ties_same * pc, ties_other * pc, near16 * pc, near6 * pc);
    std::printf(
        "  window   subtiles with a mapping of other magnitudes within it   passes per warp\n");
    for (int w = 0; w < kWindows; ++w)
      std::printf("  2^-%-2d    %8.4f%%%45.3f\n", kFirst + w, within[w] * pc,
                  warps ? passes[w] / static_cast<double>(warps * nsub) : 0.0);
    const double sums = static_cast<double>(subs) * p.sub * p.nmaps;
    const double warp_sums = static_cast<double>(warps) * kLanes * nsub * p.sub * p.nmaps;
    std::printf(
        "  float sums skippable knowing the best sum in advance: per lane %.1f%%, per warp in\n"
        "  chunks of four mappings %.2f%%\n",
        sums ? 100.0 * lane_skip / sums : 0.0, warp_sums ? 100.0 * warp_skip / warp_sums : 0.0);
    const auto [fewest, most] = std::minmax_element(best_of.begin(), best_of.end());
    std::printf("  subtiles whose best is a given mapping: %.1f%% to %.1f%%\n", *fewest * pc,
                *most * pc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "codebook_ties: %s\n", e.what());
    return 1;
  }
  return 0;
}
