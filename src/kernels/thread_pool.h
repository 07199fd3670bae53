#pragma once
// Kiln's thread pool: one per Method, shared by the portable kernels (parallel_for) and the
// XNNPACK delegate, which reaches it through the pthreadpool C API that Kiln implements
// (pthreadpool_api.cc). Built for cores shared with other work:
// - items are claimed, never assigned: the caller and the workers take guided chunks from one
//   counter, so a worker that the OS has not scheduled leaves its share to the others;
// - a call waits only for chunks in flight, never for every worker to check in (pthreadpool's
//   barrier waits for each worker, so one descheduled thread stalls every op);
// - waits spin briefly, then sleep in the kernel (futex), so a waiting thread gives its core
//   to the one it waits for and the scheduler can move a preempted worker onto it;
// - between jobs a worker spins 20 us, then checks for 200 us more with sched_yield between
//   checks (on an idle CPU the yield returns at once and the next op finds the worker awake;
//   on a shared one it hands the core to the caller or whoever waits), then sleeps. Measured
//   with bench/contention.py: without the yield phase, 2 threads idle ran up to 15% slower
//   than pthreadpool's long spin on small-op models, and up to 1.85x their 1-thread time
//   beside a busy process at nice 10;
// - a worker that the OS placed on the caller's core (seen on a 2-vCPU VM: a freshly woken
//   worker queued behind the spinning caller for milliseconds while the other core idled, in
//   3 of 10 runs) is moved off it once, by its affinity, which it widens again when it next
//   runs; only then are idle workers taken for busy cores (see judge()).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <pthread.h>
#if defined(__linux__)
#include <sched.h>
#endif

namespace kiln::kernels {

class ThreadPool {
 public:
  /// Items [begin, end) of one job; `job` is what run() was given.
  using Task = void (*)(const void* job, size_t begin, size_t end);

  /// Starts `threads - 1` workers (the caller of run() is the last thread). False when memory
  /// for them or a thread cannot be had; the pool then runs everything on the caller.
  bool start(size_t threads);
  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  /// Threads that take part in run(): the workers and the caller.
  size_t threads() const { return num_workers_ + 1; }

  /// How run() deals the items: each thread from its own home range first (kHomes), or all
  /// threads in order from one range (kShared: neighbouring items run at the same time on
  /// different cores, for jobs whose neighbouring items share data that should be read once,
  /// e.g. a weight chunk read by every pixel group).
  enum class Split { kHomes, kShared };

  /// Runs task(job, b, e) over the items [0, items) on the caller and the workers; returns when
  /// every item has run. `flush_denormals` runs the items with denormals flushed to zero
  /// (pthreadpool's PTHREADPOOL_FLAG_DISABLE_DENORMALS). One caller at a time per pool.
  void run(Task task, const void* job, size_t items, bool flush_denormals, Split split = Split::kHomes);

  /// Counters for tests and profiles: jobs run, their items, items run by workers (not the
  /// caller), how often the caller slept waiting for a chunk in flight, the time it spent
  /// waiting for chunks in flight after its own share, and the waits longer than kLongWaitNs
  /// (a worker preempted while it held a chunk: on a shared CPU, where 2 threads lose to 1).
  /// Also how often the workers were found idle (below an eighth of their share of the items
  /// over a window of at least kWindowJobs jobs and kWindowUs) and the jobs then run on the
  /// caller alone, and the workers moved off the caller's core.
  struct Stats {
    uint64_t jobs = 0, items = 0, worker_items = 0, caller_sleeps = 0, wait_ns = 0, long_waits = 0;
    uint64_t alone_periods = 0, alone_jobs = 0;
    uint64_t moves = 0;  ///< workers moved off the caller's core
  };
  static constexpr uint64_t kLongWaitNs = 200000;
  Stats stats() const;

  /// How long a worker spins, then checks while yielding, before it sleeps (microseconds; 20 and
  /// 200 by default); a test knob.
  void set_spin_us(uint32_t spin, uint32_t yield) {
    spin_us_ = spin;
    yield_us_ = yield;
  }

 private:
  struct Worker;
  static void* worker_main(void* self);
  void worker_loop(Worker& me);
  // Claims and runs chunks of epoch `epoch` until none is left, from its home range first
  // (`self`: 0 the caller, 1.. the workers); returns the items it ran.
  size_t participate(uint32_t epoch, size_t self);
  void run_range(uint32_t epoch, Task task, const void* job, size_t items, bool flush);

  struct Worker {
    ThreadPool* pool = nullptr;
    pthread_t thread{};
    std::atomic<int> cpu{-1};            // the CPU it last woke on for a job
    std::atomic<uint32_t> arrivals{0};   // jobs it woke for
    std::atomic<bool> widen{false};      // moved: set its affinity back to `allowed` when it runs
    uint32_t window_arrivals = 0;        // caller-only: `arrivals` when the window began
    bool stuck = false;                  // caller-only: on the caller's core over the last window
#if defined(__linux__)
    cpu_set_t allowed;                   // the caller's affinity when the worker was moved
#endif
  };
  std::unique_ptr<Worker[]> workers_;
  size_t num_workers_ = 0;
  // A job's items are cut into one home range per thread, [k * items / T, (k + 1) * items / T)
  // for thread k (the caller is 0): each thread claims from its own range first, then from the
  // others'. Consecutive ops whose items run over the same rows in the same order (most of
  // them: rows of images) then find their inputs in the cache of the core that wrote them,
  // rather than half of them in the other core's. Per range, (epoch << 32) | next unclaimed
  // item; a chunk is claimed by a CAS that also checks the epoch, so a worker that wakes late
  // can never take an item of a job that has moved on.
  struct alignas(64) Home {
    std::atomic<uint64_t> state{0};
  };
  std::unique_ptr<Home[]> homes_;
  uint32_t last_epoch_ = 0;  // caller-only
  // The job of the current epoch (relaxed atomics, published by the homes' states; see run()).
  std::atomic<Task> task_{nullptr};
  std::atomic<const void*> job_{nullptr};
  std::atomic<uint32_t> items_{0};
  std::atomic<uint32_t> homes_used_{1};  // 1 (Split::kShared) or threads()
  std::atomic<bool> flush_{false};
  std::atomic<uint32_t> done_{0};        // items finished in the current epoch
  std::atomic<uint32_t> epoch_{0};       // what sleeping workers wait on
  std::atomic<uint32_t> sleepers_{0};    // workers asleep on epoch_
  std::atomic<bool> caller_asleep_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> jobs_{0}, items_run_{0}, worker_items_{0}, caller_sleeps_{0}, wait_ns_{0}, long_waits_{0};
  std::atomic<uint64_t> alone_periods_{0}, alone_jobs_{0}, moves_{0};
  // Workers that take almost none of the items are not running while the caller is: the cores
  // are busy with other work, and waking them only costs. The caller then runs jobs alone for a
  // period (20 ms, doubling while it keeps happening, up to 640 ms) and tries the workers again.
  // Caller-only state (one caller at a time).
  static constexpr uint32_t kWindowJobs = 16;
  static constexpr int64_t kWindowUs = 2000;
  static constexpr int64_t kMinAloneUs = 20000, kMaxAloneUs = 640000;
  uint32_t window_jobs_ = 0;
  int64_t window_start_us_ = 0;
  uint64_t window_items_ = 0, window_worker_items_ = 0;
  int64_t alone_until_us_ = 0;  // steady clock; 0: not alone
  int64_t backoff_us_ = kMinAloneUs;
  int64_t next_move_us_ = 0, move_backoff_us_ = kMinAloneUs;
  bool alone();
  void judge(size_t items, size_t own);
  // Moves the workers that were on the caller's core over the window, or did not wake at all
  // (placement unknown), to the caller's other allowed CPUs; true when it moved one.
  bool move_off_caller_core(int64_t now);
  uint32_t spin_us_ = 20;
  uint32_t yield_us_ = 200;  // then this long checking with sched_yield between checks
};

/// True when the process resolves the pthreadpool API to Kiln's definitions (pthreadpool_api.cc),
/// as it does unless another library defining it was loaded first into the global scope (e.g.
/// with RTLD_GLOBAL); Method::create then runs on one thread rather than hand Kiln's pool to
/// someone else's pthreadpool.
bool pthreadpool_api_is_kiln();

/// Runs task over [0, items) on `pool` (inline when it is null or has one thread).
void run_on(ThreadPool* pool, ThreadPool::Task task, const void* job, size_t items, bool flush_denormals = false,
            ThreadPool::Split split = ThreadPool::Split::kHomes);

/// A pthreadpool flag of Kiln's own (beside PTHREADPOOL_FLAG_DISABLE_DENORMALS): Kiln's kernels
/// pass it to pthreadpool_parallelize_* for ThreadPool::Split::kShared.
constexpr uint32_t kSharedSplitFlag = 0x40000000u;

}  // namespace kiln::kernels

/// pthreadpool_t (pthreadpool.h) is a Kiln ThreadPool: what pthreadpool_create returns here.
struct pthreadpool : kiln::kernels::ThreadPool {};
