// Folds kernel-log events per GPU into one verdict: the catalogue's action per event, then the
// pattern rules the sources give (anchors-2026 §3.2, §3.4), then Xid 154's stated action over all
// of it, since that is the driver telling what it needs.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuctl/gpu/xid.hpp"

namespace gpuctl::gpu {

namespace {

constexpr std::size_t kMaxEvidence = 6;

int rank(XidSeverity s) {
  switch (s) {
    case XidSeverity::informational: return 0;
    case XidSeverity::application: return 1;
    case XidSeverity::driver: return 2;
    case XidSeverity::unknown: return 3;
    case XidSeverity::hardware: return 4;
  }
  return 3;
}

struct Judged {
  XidAction action = XidAction::ignore;
  XidSeverity severity = XidSeverity::informational;
  std::string why;
};

// One event, on its own.
Judged judge(const KernelLogEvent& ev) {
  switch (ev.kind) {
    case KernelLogEventKind::fallen_off_bus:
      return {XidAction::restart_bm, XidSeverity::hardware, "the GPU has fallen off the bus"};
    case KernelLogEventKind::rm_init_adapter_failed:
      return {XidAction::restart_bm, XidSeverity::driver, "the driver could not initialise the GPU (RmInitAdapter)"};
    case KernelLogEventKind::sxid: {
      const SxidInfo* info = find_sxid(ev.code.value_or(0));
      bool fatal = ev.sxid_fatal.value_or(info ? info->fatal : true);
      std::string meaning = info ? std::string(info->meaning) : "not in the catalogue";
      return {fatal ? XidAction::restart_bm : XidAction::ignore,
              fatal ? XidSeverity::hardware : XidSeverity::informational,
              fmt::format("SXid {} ({}), {}", ev.code.value_or(0), meaning, fatal ? "fatal" : "non-fatal")};
    }
    case KernelLogEventKind::xid: break;
  }
  int code = ev.code.value_or(0);
  const XidInfo* info = find_xid(code);
  if (!info)
    return {XidAction::contact_support, XidSeverity::unknown, fmt::format("Xid {} is not in the catalogue", code)};
  Judged j{info->action, info->severity, fmt::format("Xid {} ({})", code, info->meaning)};
  // NVLink5 codes (144-150) say on the line whether this instance is fatal.
  if (code >= 144 && code <= 150 && ev.message.find(" Fatal") != std::string::npos) j.action = XidAction::reset_gpu;
  return j;
}

struct Fold {
  XidVerdict v;
  std::map<std::pair<int, int>, int> index;        // (kind, code) -> position in v.counts
  std::map<int, std::set<std::string>> processes;  // Xid -> distinct pid/name
  std::set<int> sxid_headlines;
  std::vector<const KernelLogEvent*> sxid_details;
  int severe_events = 0;  // events whose own action is RESET_GPU or worse
};

void raise(XidVerdict& v, XidAction a, std::string reason) {
  if (a > v.action) v.action = a;
  v.reasons.push_back(std::move(reason));
}

void count(Fold& f, const KernelLogEvent& ev) {
  auto key = std::pair{static_cast<int>(ev.kind), ev.code.value_or(0)};
  auto [it, fresh] = f.index.try_emplace(key, static_cast<int>(f.v.counts.size()));
  if (fresh) {
    f.v.counts.push_back({ev.kind, ev.code.value_or(0), 0});
    if (f.v.evidence.size() < kMaxEvidence) f.v.evidence.push_back(ev.line);
  }
  ++f.v.counts[static_cast<std::size_t>(it->second)].count;
  if (f.v.first_time.empty()) f.v.first_time = ev.time_text;
  f.v.last_time = ev.time_text;
  Judged j = judge(ev);
  if (rank(j.severity) > rank(f.v.severity)) f.v.severity = j.severity;
  if (j.action > f.v.action) f.v.action = j.action;
  if (j.action >= XidAction::reset_gpu) ++f.severe_events;
}

void add(Fold& f, const KernelLogEvent& ev) {
  if (ev.kind == KernelLogEventKind::sxid && !ev.sxid_fatal) {
    f.sxid_details.push_back(&ev);  // counted only when no headline of the code made it in
    return;
  }
  if (ev.kind == KernelLogEventKind::sxid) f.sxid_headlines.insert(ev.code.value_or(0));
  if (ev.kind == KernelLogEventKind::xid && ev.code == 154 && ev.recovery_action) {
    f.v.stated_recovery = ev.recovery_action;
  }
  if (ev.kind == KernelLogEventKind::xid && (ev.code == 13 || ev.code == 31) && (ev.pid || ev.process_name)) {
    f.processes[*ev.code].insert(fmt::format("{}/{}", ev.pid.value_or(0), ev.process_name.value_or("")));
  }
  count(f, ev);
}

// The reasons per code, then the pattern rules; `app_gpus` counts the GPUs with each app Xid.
void conclude(Fold& f, const XidPolicy& policy, const std::map<int, int>& app_gpus) {
  for (const KernelLogEvent* ev : f.sxid_details) {
    if (!f.sxid_headlines.contains(ev->code.value_or(0))) {
      f.sxid_headlines.insert(ev->code.value_or(0));
      count(f, *ev);
    }
  }
  XidVerdict& v = f.v;
  for (const XidCount& c : v.counts) {
    KernelLogEvent probe;
    probe.kind = c.kind;
    probe.code = c.code;
    Judged j = judge(probe);
    v.reasons.push_back(fmt::format("{} x{}: {}", j.why, c.count, to_string(j.action)));
    const XidInfo* info = c.kind == KernelLogEventKind::xid ? find_xid(c.code) : nullptr;
    bool hardware = info && info->severity == XidSeverity::hardware && info->action >= XidAction::reset_gpu;
    if (hardware && c.count >= policy.hardware_repeat && v.action < XidAction::restart_bm) {
      raise(v, XidAction::restart_bm,
            fmt::format("Xid {} repeated {} times on this GPU: the fault recurs, reboot the node", c.code, c.count));
    }
  }
  if (f.index.contains({0, 48}) && (f.index.contains({0, 63}) || f.index.contains({0, 64}))) {
    raise(v, XidAction::reset_gpu, "Xid 48 with a row-remap event (63/64): drain and reset (WORKFLOW_XID_48)");
  }
  for (const auto& [code, procs] : f.processes) {
    auto others = app_gpus.find(code);
    if (static_cast<int>(procs.size()) >= policy.app_distinct_processes && others != app_gpus.end() &&
        others->second == 1) {
      v.severity = XidSeverity::hardware;
      raise(v, XidAction::reset_gpu,
            fmt::format("Xid {} from {} different processes on this GPU only: the GPU is suspect (WORKFLOW_XID_{}), "
                        "run field diagnostics (dcgmi diag -r 3)",
                        code, procs.size(), code));
    }
  }
  if (v.stated_recovery) {
    v.action = to_xid_action(*v.stated_recovery);
    v.reasons.push_back(fmt::format("the driver states the recovery: {} (Xid 154): {}", to_string(*v.stated_recovery),
                                    to_string(v.action)));
  }
  if (f.severe_events >= policy.contact_support_repeat) {
    raise(v, XidAction::contact_support,
          fmt::format("{} fatal events on this GPU (NVSentinel's threshold is {}): contact support", f.severe_events,
                      policy.contact_support_repeat));
  }
}

}  // namespace

std::vector<XidVerdict> classify_xid_events(std::span<const KernelLogEvent> events, const XidPolicy& policy) {
  std::vector<Fold> folds;
  std::map<std::string, std::size_t> by_gpu;
  for (const KernelLogEvent& ev : events) {
    std::string id = ev.pci_bus_id.value_or("unknown");
    auto [it, fresh] = by_gpu.try_emplace(id, folds.size());
    if (fresh) {
      folds.emplace_back();
      folds.back().v.pci_bus_id = id;
      folds.back().v.nvswitch = ev.kind == KernelLogEventKind::sxid;
    }
    add(folds[it->second], ev);
  }
  std::map<int, int> app_gpus;
  for (const Fold& f : folds) {
    for (const auto& [code, procs] : f.processes) ++app_gpus[code];
  }
  std::vector<XidVerdict> out;
  out.reserve(folds.size());
  for (Fold& f : folds) {
    conclude(f, policy, app_gpus);
    out.push_back(std::move(f.v));
  }
  return out;
}

void to_json(nlohmann::json& j, const XidVerdict& v) {
  nlohmann::json counts = nlohmann::json::array();
  for (const XidCount& c : v.counts) {
    counts.push_back({{"kind", to_string(c.kind)}, {"code", c.code}, {"count", c.count}});
  }
  j = nlohmann::json{
      {"pciBusId", v.pci_bus_id},
      {"nvswitch", v.nvswitch},
      {"action", to_string(v.action)},
      {"severity", to_string(v.severity)},
      {"statedRecovery", v.stated_recovery ? nlohmann::json(to_string(*v.stated_recovery)) : nlohmann::json(nullptr)},
      {"counts", counts},
      {"reasons", v.reasons},
      {"evidence", v.evidence},
      {"firstTime", v.first_time},
      {"lastTime", v.last_time}};
}

}  // namespace gpuctl::gpu
