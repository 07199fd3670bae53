#include "kernels/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <new>

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln::kernels {
namespace {

constexpr uint32_t kClosed = 0xFFFFFFFFu;  // next-item value of an epoch whose job is not yet written
constexpr size_t kMaxItems = 0xFFFFFFF0u;  // larger jobs run as groups of items

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Sleeps while *word == expected (may return early); wakes every sleeper on `word`. The Linux
// futex directly: libstdc++ 12's atomic::wait can miss a notify_all (seen here as a hang).
void sleep_while_equal(std::atomic<uint32_t>& word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word.wait(expected, std::memory_order_seq_cst);
#endif
}
void wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

// Flush-to-zero and denormals-are-zero for the items of a job that asks for it, restored after.
class DenormalsOff {
 public:
  explicit DenormalsOff(bool on) : on_(on) {
    if (!on_) return;
#if defined(__x86_64__) || defined(__i386__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040u);  // FTZ | DAZ
#elif defined(__aarch64__)
    uint64_t fpcr;
    asm volatile("mrs %0, fpcr" : "=r"(fpcr));
    saved_ = fpcr;
    asm volatile("msr fpcr, %0" ::"r"(fpcr | (uint64_t{1} << 24)));  // FZ
#endif
  }
  ~DenormalsOff() {
    if (!on_) return;
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(static_cast<unsigned>(saved_));
#elif defined(__aarch64__)
    asm volatile("msr fpcr, %0" ::"r"(saved_));
#endif
  }

 private:
  bool on_;
  uint64_t saved_ = 0;
};

// Spins for about `us` microseconds while `pending()` holds; true when it stopped holding.
template <typename F>
bool spin_while(uint32_t us, F pending) {
  if (us == 0) return !pending();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int k = 0; k < 32; ++k) {
      if (!pending()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return !pending();
  }
}

// Like spin_while, but gives up the core between checks (sched_yield).
template <typename F>
bool yield_while(uint32_t us, F pending) {
  if (us == 0) return !pending();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    if (!pending()) return true;
    sched_yield();
    if (std::chrono::steady_clock::now() >= until) return !pending();
  }
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A job of more than kMaxItems items runs as groups.
struct Grouped {
  ThreadPool::Task task;
  const void* job;
  size_t items, group;
};
void run_groups(const void* p, size_t b, size_t e) {
  const Grouped& g = *static_cast<const Grouped*>(p);
  g.task(g.job, b * g.group, std::min(g.items, e * g.group));
}

}  // namespace

bool ThreadPool::start(size_t threads) {
  if (threads <= 1) return true;
  workers_.reset(new (std::nothrow) Worker[threads - 1]);
  homes_.reset(new (std::nothrow) Home[threads]);
  if (!workers_ || !homes_) return false;
  for (size_t t = 1; t < threads; ++t) {
    Worker& w = workers_[num_workers_];
    w.pool = this;
    if (pthread_create(&w.thread, nullptr, &ThreadPool::worker_main, &w) != 0) return false;
    ++num_workers_;
  }
  return true;
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  wake_all(epoch_);
  for (size_t t = 0; t < num_workers_; ++t) pthread_join(workers_[t].thread, nullptr);
}

ThreadPool::Stats ThreadPool::stats() const {
  Stats s;
  s.jobs = jobs_.load(std::memory_order_relaxed);
  s.worker_items = worker_items_.load(std::memory_order_relaxed);
  s.items = items_run_.load(std::memory_order_relaxed);
  s.caller_sleeps = caller_sleeps_.load(std::memory_order_relaxed);
  s.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  s.long_waits = long_waits_.load(std::memory_order_relaxed);
  s.alone_periods = alone_periods_.load(std::memory_order_relaxed);
  s.alone_jobs = alone_jobs_.load(std::memory_order_relaxed);
  s.moves = moves_.load(std::memory_order_relaxed);
  return s;
}

void* ThreadPool::worker_main(void* self) {
  Worker& w = *static_cast<Worker*>(self);
  w.pool->worker_loop(w);
  return nullptr;
}

void ThreadPool::worker_loop(Worker& me) {
  // Epoch 0 is the pool's state before its first job: a worker that starts after a job was
  // posted takes part in it.
  uint32_t seen = 0;
  for (;;) {
    // A worker that starts after the destructor began finds stop_ set (before the final epoch),
    // so it never sleeps on an epoch that will not change.
    auto idle = [&] { return epoch_.load(std::memory_order_seq_cst) == seen && !stop_.load(std::memory_order_seq_cst); };
    // Between jobs: spin, then keep checking while yielding the core (an idle CPU returns at once,
    // a shared one runs the caller or whoever else is waiting), then sleep.
    if (!spin_while(spin_us_, idle) && !yield_while(yield_us_, idle)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (idle()) sleep_while_equal(epoch_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
#if defined(__linux__)
    if (me.widen.load(std::memory_order_acquire)) {  // moved off the caller's core: free again
      pthread_setaffinity_np(pthread_self(), sizeof(me.allowed), &me.allowed);
      me.widen.store(false, std::memory_order_relaxed);
    }
    me.cpu.store(sched_getcpu(), std::memory_order_relaxed);
#endif
    me.arrivals.fetch_add(1, std::memory_order_release);
    const size_t ran = participate(seen, static_cast<size_t>(&me - workers_.get()) + 1);
    if (ran) worker_items_.fetch_add(ran, std::memory_order_relaxed);
  }
}

// Guided self-scheduling within each home range: each claim takes a quarter of what is left of
// the range (of a shared range, 1 / (2 * threads); at least one item), so chunks start large
// (few claims) and end small (a late or preempted thread holds little, and the other threads
// take the rest of its range).
size_t ThreadPool::participate(uint32_t epoch, size_t self) {
  size_t ran = 0;
  const size_t threads = this->threads();
  for (size_t h = 0; h < threads; ++h) {
    const size_t k = (self + h) % threads;
    std::atomic<uint64_t>& state = homes_[k].state;
    uint64_t s = state.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(s >> 32) != epoch) return ran;
      const uint32_t next = static_cast<uint32_t>(s);
      // The job's fields, then a fence: if any of these reads saw the next job's fields, the
      // claim below cannot succeed (run() closes every range before writing them).
      const Task task = task_.load(std::memory_order_relaxed);
      const void* job = job_.load(std::memory_order_relaxed);
      const uint32_t items = items_.load(std::memory_order_relaxed);
      const uint32_t homes = homes_used_.load(std::memory_order_relaxed);
      const bool flush = flush_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (next == kClosed) return ran;
      const uint32_t end = k < homes ? static_cast<uint32_t>((k + 1) * uint64_t{items} / homes) : items;
      if (next >= end) break;
      const uint32_t left = end - next;
      const uint32_t take = std::max<uint32_t>(1, left / (homes == 1 ? 2 * static_cast<uint32_t>(threads) : 4));
      if (!state.compare_exchange_weak(s, s + take, std::memory_order_acquire, std::memory_order_acquire)) continue;
      {
        DenormalsOff d(flush);
        task(job, next, next + take);
      }
      ran += take;
      if (done_.fetch_add(take, std::memory_order_seq_cst) + take == items &&
          caller_asleep_.load(std::memory_order_seq_cst))
        wake_all(done_);
      s = state.load(std::memory_order_acquire);
    }
  }
  return ran;
}

bool ThreadPool::alone() {
  if (alone_until_us_ == 0) return false;
  if (now_us() < alone_until_us_) {
    alone_jobs_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  alone_until_us_ = 0;  // try the workers again
  return false;
}

void ThreadPool::judge(size_t items, size_t own) {
  const int64_t now = now_us();
  if (window_jobs_ == 0) window_start_us_ = now;
  window_items_ += items;
  window_worker_items_ += items - own;
  // At least kWindowJobs jobs over at least kWindowUs: a worker woken from its sleep takes
  // tens of microseconds to arrive, which a few short jobs would read as "no free core" (seen
  // idle on a transformer of 30-us jobs: its probes kept failing, so it ran on one thread).
  if (++window_jobs_ < kWindowJobs || now - window_start_us_ < kWindowUs) return;
  // Their fair share is (threads - 1) / threads of the items; an eighth of it means they were
  // not running while the caller was (the cores are taken by other work, or the OS queued a
  // worker behind the caller on its core).
  const bool idle_workers = window_worker_items_ * 8 * threads() < window_items_ * num_workers_;
  window_jobs_ = 0;
  window_items_ = window_worker_items_ = 0;
  const bool moved = move_off_caller_core(now);
  if (!idle_workers) {
    backoff_us_ = kMinAloneUs;
    if (!moved) move_backoff_us_ = kMinAloneUs;
    return;
  }
  if (moved) return;  // the moved workers get a window before they are judged idle
  alone_periods_.fetch_add(1, std::memory_order_relaxed);
  alone_until_us_ = now_us() + backoff_us_;
  backoff_us_ = std::min(2 * backoff_us_, kMaxAloneUs);
}

bool ThreadPool::move_off_caller_core(int64_t now) {
#if defined(__linux__)
  // Which workers sat on the caller's core over the window (or did not wake at all); the
  // affinity calls only when one did and the last move is long enough ago.
  const int here = sched_getcpu();
  bool any = false;
  for (size_t t = 0; t < num_workers_; ++t) {
    Worker& w = workers_[t];
    const uint32_t arrivals = w.arrivals.load(std::memory_order_acquire);
    w.stuck = arrivals == w.window_arrivals || w.cpu.load(std::memory_order_relaxed) == here;
    w.window_arrivals = arrivals;
    any = any || w.stuck;
  }
  cpu_set_t allowed, others;
  if (!any || now < next_move_us_ || here < 0 || here >= CPU_SETSIZE ||
      pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0)
    return false;
  others = allowed;
  CPU_CLR(here, &others);
  if (CPU_COUNT(&others) == 0) return false;
  bool moved = false;
  for (size_t t = 0; t < num_workers_; ++t) {
    Worker& w = workers_[t];
    if (!w.stuck || w.widen.load(std::memory_order_acquire)) continue;
    w.allowed = allowed;  // written before `widen`; the worker reads it after
    if (pthread_setaffinity_np(w.thread, sizeof(others), &others) != 0) continue;
    w.widen.store(true, std::memory_order_release);
    moves_.fetch_add(1, std::memory_order_relaxed);
    moved = true;
  }
  if (moved) {
    next_move_us_ = now + move_backoff_us_;
    move_backoff_us_ = std::min(2 * move_backoff_us_, kMaxAloneUs);
  }
  return moved;
#else
  (void)now;
  return false;
#endif
}

void ThreadPool::run(Task task, const void* job, size_t items, bool flush_denormals, Split split) {
  if (items == 0) return;
  if (items > kMaxItems) {
    const size_t group = (items + kMaxItems - 1) / kMaxItems;
    const Grouped g{task, job, items, group};
    return run(run_groups, &g, (items + group - 1) / group, flush_denormals, split);
  }
  jobs_.fetch_add(1, std::memory_order_relaxed);
  items_run_.fetch_add(items, std::memory_order_relaxed);
  if (num_workers_ == 0 || items == 1 || alone()) {
    DenormalsOff d(flush_denormals);
    return task(job, 0, items);
  }
  // Close the old epoch's ranges under a new number, write the job, then open them (the fence
  // pairs with the one in participate(): a claim that read these fields is a claim of this epoch).
  const uint32_t epoch = ++last_epoch_;
  const size_t threads = this->threads(), homes = split == Split::kShared ? 1 : threads;
  for (size_t k = 0; k < threads; ++k)
    homes_[k].state.store((uint64_t{epoch} << 32) | kClosed, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  task_.store(task, std::memory_order_relaxed);
  job_.store(job, std::memory_order_relaxed);
  items_.store(static_cast<uint32_t>(items), std::memory_order_relaxed);
  homes_used_.store(static_cast<uint32_t>(homes), std::memory_order_relaxed);
  flush_.store(flush_denormals, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  for (size_t k = 0; k < threads; ++k)
    homes_[k].state.store(
        (uint64_t{epoch} << 32) | static_cast<uint32_t>(k < homes ? k * uint64_t{items} / homes : items),
        std::memory_order_release);
  epoch_.store(epoch, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_all(epoch_);
  const size_t own = participate(epoch, 0);
  judge(items, own);
  // Only chunks in flight are left: wait for those, spinning briefly, then asleep.
  const uint32_t n = static_cast<uint32_t>(items);
  if (done_.load(std::memory_order_acquire) == n) return;
  const auto waiting = std::chrono::steady_clock::now();
  if (!spin_while(spin_us_, [&] { return done_.load(std::memory_order_acquire) != n; })) {
    caller_sleeps_.fetch_add(1, std::memory_order_relaxed);
    caller_asleep_.store(true, std::memory_order_seq_cst);
    for (uint32_t d; (d = done_.load(std::memory_order_seq_cst)) != n;) sleep_while_equal(done_, d);
    caller_asleep_.store(false, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  const uint64_t ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - waiting).count());
  wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  if (ns > kLongWaitNs) long_waits_.fetch_add(1, std::memory_order_relaxed);
}

void run_on(ThreadPool* pool, ThreadPool::Task task, const void* job, size_t items, bool flush_denormals,
            ThreadPool::Split split) {
  if (pool) return pool->run(task, job, items, flush_denormals, split);
  if (items == 0) return;
  DenormalsOff d(flush_denormals);
  task(job, 0, items);
}

}  // namespace kiln::kernels
