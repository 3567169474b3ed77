#pragma once
// Process-wide cancellation: Ctrl-C (SIGINT) or SIGTERM asks gpuctl to stop. The first signal
// only records itself (a flag and a byte in a self-pipe); long operations check cancelled()
// between steps and poll() loops include cancel_fd() so they wake at once. Children that lead
// their own process group (ssh, --exec commands) do not get the terminal's SIGINT, so the
// process code registers them here: the operation stops them itself, and a second signal kills
// them all and exits on the spot.
//
// The library installs no handler by itself: main calls install_interrupt_handlers().
#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::util {

// SIGINT or SIGTERM once one has arrived (or request_cancel was called), else 0.
int cancel_signal() noexcept;
// Cheap (one atomic load): whether the process was asked to stop.
inline bool cancelled() noexcept { return cancel_signal() != 0; }
// The read end of the self-pipe: readable (and left readable) once cancelled, for poll().
int cancel_fd();
// Sleeps for `duration` unless cancelled first; returns false when woken by cancellation.
bool sleep_unless_cancelled(std::chrono::milliseconds duration);

// Asks to stop as a signal would (first call wins). Async-signal-safe once cancel_fd() or
// install_interrupt_handlers() has created the pipe.
void request_cancel(int signal) noexcept;

// "SIGINT" / "SIGTERM" (or "signal N") for messages; "" when not cancelled.
std::string cancel_signal_name();
// An Errc::cancelled error: "<what>: interrupted by SIGINT".
Error cancelled_error(std::string_view what);

// Installs the SIGINT and SIGTERM handlers (for main only). `notice` (kept by the library) is
// written to stderr when the first signal arrives; a second signal kills every registered child
// group with SIGKILL and exits with 128 + its number (_exit, no cleanup).
void install_interrupt_handlers(std::string_view notice = {});

// The children a second signal must kill: `target` is what kill(2) takes, -pgid for a child
// that leads its own process group, its pid for one that shares ours. Lock-free; a full table
// (more than 4096 children at once) only means the second signal misses the extra ones.
void register_child(pid_t target) noexcept;
void unregister_child(pid_t target) noexcept;
// How many children are registered now (tests).
int registered_children() noexcept;

// Within its scope, API requests made by this thread are sent even after cancellation (the kube
// client otherwise refuses to start one): for the clean-up an interrupted operation owes the
// cluster, such as deleting the probe pods it made. Sleeps and cancelled() are unchanged.
class CleanupScope {
 public:
  CleanupScope() noexcept;
  ~CleanupScope();
  CleanupScope(const CleanupScope&) = delete;
  CleanupScope& operator=(const CleanupScope&) = delete;
};
// Whether this thread is inside a CleanupScope.
bool in_cleanup_scope() noexcept;

// Tests only: forget the signal (the pipe is emptied) so later tests run uncancelled.
void reset_cancel_for_tests();

}  // namespace gpuctl::util
