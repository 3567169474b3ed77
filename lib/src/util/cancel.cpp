#include "gpuctl/util/cancel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace gpuctl::util {
namespace {

// Everything the handler touches is a lock-free atomic or a plain buffer written before the
// handler is installed, so it stays async-signal-safe.
std::atomic<int> g_signal{0};
std::atomic<int> g_read_fd{-1};
std::atomic<int> g_write_fd{-1};
constexpr int kMaxChildren = 4096;
std::atomic<pid_t> g_children[kMaxChildren];
char g_notice[512];
std::size_t g_notice_size = 0;
std::once_flag g_pipe_once;

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free);

void wake_pollers() noexcept {
  int fd = g_write_fd.load();
  if (fd < 0) return;
  char byte = 'x';
  // Non-blocking: a full pipe is already readable, which is all a poller needs.
  [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
}

void make_pipe() {
  std::call_once(g_pipe_once, [] {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;  // cancel_fd() then stays -1: poll loops see no fd
    g_read_fd.store(fds[0]);
    g_write_fd.store(fds[1]);
    if (g_signal.load() != 0) wake_pollers();  // cancelled before anyone asked for the pipe
  });
}

void kill_children(int signal) noexcept {
  for (auto& slot : g_children) {
    pid_t target = slot.load();
    if (target != 0) ::kill(target, signal);
  }
}

void on_signal(int signal) {
  const int saved_errno = errno;
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, signal)) {
    wake_pollers();
    if (g_notice_size > 0) {
      [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, g_notice, g_notice_size);
    }
    errno = saved_errno;
    return;
  }
  // The second signal: the user does not want to wait for a clean stop.
  kill_children(SIGKILL);
  ::_exit(128 + signal);
}

}  // namespace

int cancel_signal() noexcept { return g_signal.load(std::memory_order_relaxed); }

int cancel_fd() {
  make_pipe();
  return g_read_fd.load();
}

bool sleep_unless_cancelled(std::chrono::milliseconds duration) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + duration;
  const int fd = cancel_fd();
  while (!cancelled()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    // Without a pipe (pipe2 failed) poll() just sleeps in slices, checking the flag.
    int ready = ::poll(fd >= 0 ? &p : nullptr, fd >= 0 ? 1 : 0,
                       static_cast<int>(std::min<long long>(left, fd >= 0 ? left : 100)));
    if (ready < 0 && errno != EINTR) return !cancelled();
  }
  return false;
}

void request_cancel(int signal) noexcept {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, signal)) wake_pollers();
}

std::string cancel_signal_name() {
  switch (int s = cancel_signal()) {
    case 0: return "";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return fmt::format("signal {}", s);
  }
}

Error cancelled_error(std::string_view what) {
  Error e;
  e.code = Errc::cancelled;
  std::string by = cancel_signal_name();
  e.message = fmt::format("{}: interrupted{}", what, by.empty() ? "" : " by " + by);
  return e;
}

void install_interrupt_handlers(std::string_view notice) {
  make_pipe();
  g_notice_size = std::min(notice.size(), sizeof g_notice);
  // An empty notice may have no data at all (nullptr): memcpy from null is undefined even for 0 bytes.
  if (g_notice_size > 0) std::memcpy(g_notice, notice.data(), g_notice_size);
  struct sigaction action{};
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  // Restart interrupted system calls: loops learn of the signal from the flag and the pipe, not
  // from EINTR, so no read or waitpid elsewhere has to care.
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

void register_child(pid_t target) noexcept {
  if (target == 0) return;
  for (auto& slot : g_children) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, target)) return;
  }
}

void unregister_child(pid_t target) noexcept {
  if (target == 0) return;
  for (auto& slot : g_children) {
    pid_t expected = target;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

int registered_children() noexcept {
  return static_cast<int>(
      std::count_if(std::begin(g_children), std::end(g_children), [](const auto& s) { return s.load() != 0; }));
}

namespace {
thread_local int t_cleanup_depth = 0;
}  // namespace

CleanupScope::CleanupScope() noexcept { ++t_cleanup_depth; }
CleanupScope::~CleanupScope() { --t_cleanup_depth; }
bool in_cleanup_scope() noexcept { return t_cleanup_depth > 0; }

void reset_cancel_for_tests() {
  make_pipe();
  char buffer[64];
  while (::read(g_read_fd.load(), buffer, sizeof buffer) > 0) {
  }
  g_signal.store(0);
}

}  // namespace gpuctl::util
