// Exact multiple-choice knapsack (castscope/planner.hpp; the argument is in docs/planning.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "castscope/planner.hpp"

namespace castscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A group's items that can be part of an optimum: by size ascending, error strictly descending
// (an item with no less size and no less error than another is never needed).
struct Front {
  std::vector<int> item;
  std::vector<uint64_t> size;
  std::vector<double> error;
};

// One step along a group's lower convex hull: from hull point `from` to the next, `size` more
// bits buy `gain` less error.
struct Segment {
  int group = 0;
  int to = 0;  // the front index of the hull point the step ends at
  uint64_t size = 0;
  double gain = 0;
  double slope() const { return gain / static_cast<double>(size); }
};

Front front_of(const std::vector<KnapsackItem>& items, size_t g) {
  std::vector<int> idx(items.size());
  std::iota(idx.begin(), idx.end(), 0);
  for (const KnapsackItem& it : items)
    if (!std::isfinite(it.error) || it.error < 0)
      throw Error("knapsack: group " + std::to_string(g) +
                  " has an item of error that is not a finite non-negative number");
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    const KnapsackItem &x = items[static_cast<size_t>(a)], &y = items[static_cast<size_t>(b)];
    return x.size != y.size ? x.size < y.size : x.error < y.error;
  });
  Front f;
  for (int i : idx) {
    const KnapsackItem& it = items[static_cast<size_t>(i)];
    if (!f.error.empty() && it.error >= f.error.back()) continue;
    f.item.push_back(i);
    f.size.push_back(it.size);
    f.error.push_back(it.error);
  }
  return f;
}

// The lower convex hull of a front as segments of decreasing slope (monotone chain).
std::vector<Segment> hull_of(const Front& f, int g) {
  std::vector<size_t> h;
  for (size_t i = 0; i < f.size.size(); ++i) {
    // Drop the last hull point while it lies on or above the line from its predecessor to i.
    while (h.size() >= 2) {
      const size_t a = h[h.size() - 2], b = h.back();
      // slope(b, i) < slope(a, b), cross-multiplied so no division rounds.
      const long double l = static_cast<long double>(f.error[b] - f.error[i]) *
                            static_cast<long double>(f.size[b] - f.size[a]);
      const long double r = static_cast<long double>(f.error[a] - f.error[b]) *
                            static_cast<long double>(f.size[i] - f.size[b]);
      if (l < r) break;
      h.pop_back();
    }
    h.push_back(i);
  }
  std::vector<Segment> s;
  for (size_t k = 1; k < h.size(); ++k)
    s.push_back({g, static_cast<int>(h[k]), f.size[h[k]] - f.size[h[k - 1]],
                 f.error[h[k - 1]] - f.error[h[k]]});
  return s;
}

bool steeper(const Segment& a, const Segment& b) {
  // a.gain / a.size > b.gain / b.size without the division's rounding deciding ties.
  const long double l = static_cast<long double>(a.gain) * static_cast<long double>(b.size);
  const long double r = static_cast<long double>(b.gain) * static_cast<long double>(a.size);
  return l != r ? l > r : a.group < b.group;
}

class Search {
 public:
  Search(const std::vector<std::vector<KnapsackItem>>& groups, uint64_t capacity, JobControl* job,
         const KnapsackOptions& opt)
      : cap_(capacity), job_(job) {
    const size_t n = groups.size();
    for (size_t g = 0; g < n; ++g) {
      if (groups[g].empty()) throw Error("knapsack: group " + std::to_string(g) + " has no items");
      fronts_.push_back(front_of(groups[g], g));
    }
    // Decide first the groups whose choice moves the error most: their bounds tighten soonest.
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      return fronts_[a].error.front() - fronts_[a].error.back() >
             fronts_[b].error.front() - fronts_[b].error.back();
    });
    depth_of_.resize(n);
    for (size_t k = 0; k < n; ++k) depth_of_[order_[k]] = k;
    // Suffix sums of the smallest items: what the undecided groups need at least.
    min_size_.assign(n + 1, 0);
    min_error_.assign(n + 1, 0);
    for (size_t k = n; k-- > 0;) {
      min_size_[k] = min_size_[k + 1] + fronts_[order_[k]].size.front();
      min_error_[k] = min_error_[k + 1] + fronts_[order_[k]].error.front();
    }
    for (size_t g = 0; g < n; ++g) {
      std::vector<Segment> h = hull_of(fronts_[g], static_cast<int>(g));
      segments_.insert(segments_.end(), h.begin(), h.end());
    }
    std::sort(segments_.begin(), segments_.end(), steeper);
    scale_ = std::max(min_error_[0], std::numeric_limits<double>::min());
    if (static_cast<uint64_t>(segments_.size()) * (n + 1) <= opt.max_table_entries) build_tables();
  }

  KnapsackSolution run() {
    KnapsackSolution s;
    s.min_size = min_size_[0];
    const size_t n = fronts_.size();
    if (min_size_[0] > cap_) return s;
    greedy();
    std::vector<int> cur(n, 0);
    dfs(0, cap_, 0.0, cur);
    s.feasible = true;
    s.choice.resize(n);
    for (size_t g = 0; g < n; ++g) {
      const int i = best_[g];
      s.choice[g] = fronts_[g].item[static_cast<size_t>(i)];
      s.size += fronts_[g].size[static_cast<size_t>(i)];
    }
    // The reported error is summed in group order, whatever order the search added it in.
    for (size_t g = 0; g < n; ++g) s.error += fronts_[g].error[static_cast<size_t>(best_[g])];
    s.nodes = nodes_;
    return s;
  }

 private:
  // LP bound of the groups at depths k.. with `room` bits beyond their smallest items: their
  // smallest errors less the steepest hull steps that fit, the last one in part.
  double lp_bound(size_t k, uint64_t room) const {
    if (!tables_.empty()) {
      const Table& t = tables_[k];
      // The longest prefix of whole steps that fits.
      const size_t p = static_cast<size_t>(std::upper_bound(t.size.begin(), t.size.end(), room) -
                                           t.size.begin());
      double gain = t.gain[p - 1];
      if (p < t.size.size()) {
        // Part of step p, at its slope.
        const double slope =
            (t.gain[p] - t.gain[p - 1]) / static_cast<double>(t.size[p] - t.size[p - 1]);
        gain += static_cast<double>(room - t.size[p - 1]) * slope;
      }
      return min_error_[k] - gain;
    }
    double gain = 0;
    for (const Segment& s : segments_) {
      if (depth_of_[static_cast<size_t>(s.group)] < k) continue;
      if (s.size <= room) {
        room -= s.size;
        gain += s.gain;
      } else {
        gain += static_cast<double>(room) * s.slope();
        break;
      }
    }
    return min_error_[k] - gain;
  }

  struct Table {
    std::vector<uint64_t> size;  // cumulative, with a leading 0
    std::vector<double> gain;    // cumulative, with a leading 0
  };

  void build_tables() {
    const size_t n = fronts_.size();
    tables_.resize(n + 1);
    for (size_t k = 0; k <= n; ++k) {
      Table& t = tables_[k];
      t.size.push_back(0);
      t.gain.push_back(0);
      for (const Segment& s : segments_) {
        if (depth_of_[static_cast<size_t>(s.group)] < k) continue;
        t.size.push_back(t.size.back() + s.size);
        t.gain.push_back(t.gain.back() + s.gain);
      }
    }
  }

  // A first incumbent: the LP's whole steps, in slope order, while they fit.
  void greedy() {
    const size_t n = fronts_.size();
    std::vector<int> at(n, 0);
    uint64_t room = cap_ - min_size_[0];
    std::vector<bool> stuck(n, false);
    for (const Segment& s : segments_) {
      const size_t g = static_cast<size_t>(s.group);
      if (stuck[g]) continue;
      if (s.size > room) {
        stuck[g] = true;  // its later steps come after this one
        continue;
      }
      room -= s.size;
      at[g] = s.to;
    }
    best_ = at;
    best_error_ = 0;
    for (size_t g = 0; g < n; ++g) best_error_ += fronts_[g].error[static_cast<size_t>(at[g])];
  }

  // Depth k decides group order_[k] with `room` bits left for it and the ones after it.
  void dfs(size_t k, uint64_t room, double error, std::vector<int>& cur) {
    if ((++nodes_ & 4095) == 0 && job_) job_->check();
    const size_t n = fronts_.size();
    if (k == n) {
      if (error < best_error_) {
        best_error_ = error;
        best_ = cur;
      }
      return;
    }
    const size_t g = order_[k];
    const Front& f = fronts_[g];
    const uint64_t need_after = min_size_[k + 1];
    struct Branch {
      double bound;
      int i;
    };
    Branch br[64];
    std::vector<Branch> many;
    Branch* b = f.size.size() <= 64 ? br : (many.resize(f.size.size()), many.data());
    size_t nb = 0;
    for (size_t i = 0; i < f.size.size(); ++i) {
      if (f.size[i] > room || room - f.size[i] < need_after) break;  // sizes ascend
      const double bound = error + f.error[i] + lp_bound(k + 1, room - f.size[i] - need_after);
      b[nb++] = {bound, static_cast<int>(i)};
    }
    std::sort(b, b + nb, [](const Branch& x, const Branch& y) { return x.bound < y.bound; });
    for (size_t j = 0; j < nb; ++j) {
      // The bound is a sum of a few hundred terms at most: it is trusted to within kSlack of the
      // problem's scale, so a branch is dropped only when it cannot beat the incumbent by more.
      if (b[j].bound >= best_error_ + kSlack * scale_) break;
      const size_t i = static_cast<size_t>(b[j].i);
      cur[g] = b[j].i;
      dfs(k + 1, room - f.size[i], error + f.error[i], cur);
    }
  }

  static constexpr double kSlack = 1e-12;
  uint64_t cap_;
  JobControl* job_;
  std::vector<Front> fronts_;
  std::vector<size_t> order_, depth_of_;
  std::vector<uint64_t> min_size_;
  std::vector<double> min_error_;
  std::vector<Segment> segments_;
  std::vector<Table> tables_;
  double scale_ = 1;
  std::vector<int> best_;
  double best_error_ = kInf;
  uint64_t nodes_ = 0;
};

}  // namespace

KnapsackSolution solve_mckp(const std::vector<std::vector<KnapsackItem>>& groups, uint64_t capacity,
                            JobControl* job, const KnapsackOptions& opt) {
  Search s(groups, capacity, job, opt);
  return s.run();
}

}  // namespace castscope
