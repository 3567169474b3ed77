#pragma once
// gpuctl taint --device NODE/DEVICE: one GPU of a DRA node quarantined by a DeviceTaintRule
// instead of the whole node (ops/dra/device_taint.hpp does the work).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app.hpp"
#include "exit_code.hpp"
#include "node_changes.hpp"

namespace gpuctl::cli {

struct DeviceTaintFlags {
  std::string device;  // NODE/DEVICE
  std::string driver;
};

// Adds --device (completes node names) and --driver.
void add_device_taint_flags(CLI::App& cmd, HelpData& help, DeviceTaintFlags& flags);

// Validates (no I/O: only specs after --device, no node selection), then resolves the device,
// runs the pre-flight over its holder (NoExecute needs --yes to evict), and writes its rules.
Result<ExitCode> run_device_taint(const DeviceTaintFlags& flags, const NodeChangeFlags& nodes, bool yes,
                                  AppContext& ctx);

}  // namespace gpuctl::cli
