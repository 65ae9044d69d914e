// Background jobs: one worker thread per started job, progress and cancel through JobControl,
// and an immutable shared result the frame picks up with poll(). The frame never waits on the
// engine: a superseded job is cancelled and reaped once it notices.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope::gui {

template <class R>
class Job {
 public:
  using Fn = std::function<std::shared_ptr<const R>(JobControl&)>;
  Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() {
    cancel();
    for (auto& w : workers_)
      if (w.thread.joinable()) w.thread.join();
  }

  // Starts fn on a new thread; a job still running is cancelled and its result dropped.
  void start(std::string what, Fn fn) {
    cancel();
    auto st = std::make_shared<State>();
    st->what = std::move(what);
    st->started = std::chrono::steady_clock::now();
    current_ = st;
    workers_.push_back({std::thread([st, fn = std::move(fn)] {
                          try {
                            auto r = fn(st->ctl);
                            std::lock_guard<std::mutex> lock(st->m);
                            st->result = std::move(r);
                          } catch (const Cancelled&) {
                            std::lock_guard<std::mutex> lock(st->m);
                            st->cancelled = true;
                          } catch (const std::exception& e) {
                            std::lock_guard<std::mutex> lock(st->m);
                            st->error = e.what();
                          }
                          st->done = true;
                        }),
                        st});
  }
  void cancel() {
    if (current_) current_->ctl.cancel = true;
  }
  // A job counts as running until poll() has collected its result, so callers never see a
  // finished job whose result is not yet in the app state.
  bool running() const { return current_ != nullptr; }
  double progress() const { return current_ ? current_->ctl.progress.load() : 0.0; }
  double elapsed_s() const {
    if (!current_) return 0;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - current_->started)
        .count();
  }
  const std::string& what() const {
    static const std::string none;
    return current_ ? current_->what : none;
  }

  // Called once per frame. When the current job finished: moves its result or error out and
  // returns true (a cancelled job returns true with neither set). Also joins finished threads.
  bool poll(std::shared_ptr<const R>* result, std::string* error, bool* cancelled = nullptr) {
    for (size_t i = 0; i < workers_.size();) {
      if (workers_[i].state->done && workers_[i].state != current_) {
        workers_[i].thread.join();
        workers_.erase(workers_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    if (!current_ || !current_->done) return false;
    {
      std::lock_guard<std::mutex> lock(current_->m);
      *result = current_->result;
      *error = current_->error;
      if (cancelled) *cancelled = current_->cancelled;
    }
    for (size_t i = 0; i < workers_.size(); ++i)
      if (workers_[i].state == current_) {
        workers_[i].thread.join();
        workers_.erase(workers_.begin() + static_cast<long>(i));
        break;
      }
    current_.reset();
    return true;
  }

 private:
  struct State {
    JobControl ctl;
    std::atomic<bool> done{false};
    bool cancelled = false;
    std::mutex m;
    std::shared_ptr<const R> result;
    std::string error;
    std::string what;
    std::chrono::steady_clock::time_point started;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<State> state;
  };
  std::shared_ptr<State> current_;
  std::vector<Worker> workers_;
};

}  // namespace castscope::gui
