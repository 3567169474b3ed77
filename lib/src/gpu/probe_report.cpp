// The probe's transcript interpreted into a NodeGpuReport: the whole query, or the per-GPU fallback
// when it failed; -L's view merged in; GPUs that failed without a query of their own; one verdict
// for the node. See probe.hpp for the script and its framing.
#include "gpuctl/gpu/probe.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "gpu/probe_internal.hpp"
#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"

namespace gpuctl::gpu {

using detail::trim;

namespace {

// One `nvidia-smi -q -x [-i N]` step, interpreted.
struct XmlStep {
  std::optional<NvidiaSmiLog> log;  // set when it produced usable XML
  NvsmiDiagnosis diagnosis;         // ok, a warning (infoROM), or why there is no log
};

NvsmiDiagnosis cut_off(std::string_view what) {
  NvsmiDiagnosis d;
  d.kind = NvsmiErrorKind::truncated;
  d.message = fmt::format(
      "{} did not finish: the probe output was cut off (output cap or deadline; a hung "
      "nvidia-smi looks like this too)",
      what);
  return d;
}

XmlStep interpret_xml_step(const ProbeStep& step, std::string_view what) {
  XmlStep out;
  if (!step.exit_code) {
    out.diagnosis = cut_off(what);
    return out;
  }
  out.diagnosis = classify_nvidia_smi_run(step.exit_code, step.stdout_text, step.stderr_text);
  if (*step.exit_code != 0 && !out.diagnosis.warning_only) return out;
  Result<NvidiaSmiLog> log = parse_nvidia_smi_xml(step.stdout_text);
  if (!log) {
    if (out.diagnosis.ok()) {
      out.diagnosis.kind = NvsmiErrorKind::garbage;
      out.diagnosis.message = fmt::format("{} exited 0 but printed no usable XML: {}", what, log.error().message);
      std::vector<std::string_view> lines = detail::split_lines(step.stdout_text);
      out.diagnosis.excerpt = detail::excerpt_around(lines, 0);
    } else {
      out.diagnosis.warning_only = false;  // infoROM message and no data: a failure
    }
    return out;
  }
  if (out.diagnosis.warning_only) detail::attach_warning_lines(*log, step.stderr_text);
  out.log = std::move(*log);
  return out;
}

// Lookups a node's output could make quadratic (a hostile node may print thousands of steps,
// indices or -L lines), done through maps built once. The first step of a name and the first
// listed GPU of an index win, as scans did.
struct ProbeIndex {
  std::unordered_map<std::string_view, const ProbeStep*> steps;
  std::unordered_map<int, const ListedGpu*> listed;

  ProbeIndex(const ProbeTranscript& t, const GpuList& list) {
    for (const auto& s : t.steps) steps.emplace(s.name, &s);
    for (const auto& g : list.gpus) listed.emplace(g.index, &g);
  }
  const ProbeStep* step(std::string_view name) const {
    auto it = steps.find(name);
    return it == steps.end() ? nullptr : it->second;
  }
  const ListedGpu* gpu(int index) const {
    auto it = listed.find(index);
    return it == listed.end() ? nullptr : it->second;
  }
};

FailedGpu failed_gpu(int index, const ProbeIndex& lookup, NvsmiDiagnosis d) {
  FailedGpu f;
  f.index = index;
  if (d.pci_bus_id) f.pci_bus_id = *d.pci_bus_id;
  if (const ListedGpu* g = lookup.gpu(index)) {
    f.uuid = g->uuid;
    if (!g->name.empty()) f.product_name = g->name;
  }
  f.failure = std::move(d);
  return f;
}

// GPUs that failed without getting a per-index query of their own: -L printed an error naming
// their bus id instead of a "GPU N:" line, or the whole query named one no per-index query
// answered for. Their index is inferred from the indices seen (a gap, else the next after the
// last), when any GPU was seen.
void add_unlisted_failures(NodeGpuReport& report, const GpuList& list, const NvsmiDiagnosis* whole_failure) {
  std::unordered_set<std::string> known;  // canonical bus ids already reported
  for (const auto& g : report.gpus) {
    if (g.pci_bus_id) {
      if (auto bus = canonical_pci_bus_id(*g.pci_bus_id)) known.insert(*bus);
    }
  }
  for (const auto& f : report.failed_gpus) {
    if (f.pci_bus_id) {
      if (auto bus = canonical_pci_bus_id(*f.pci_bus_id)) known.insert(*bus);
    }
  }
  std::vector<NvsmiDiagnosis> found;
  auto consider = [&](NvsmiDiagnosis d) {
    if (d.ok() || d.warning_only || !d.pci_bus_id) return;
    if (!known.insert(*d.pci_bus_id).second) return;  // reported, or found already
    found.push_back(std::move(d));
  };
  for (const std::string& line : list.other_lines) consider(classify_nvidia_smi_run(std::nullopt, line, {}));
  // The whole query's error may be about a GPU whose own query failed without naming its bus id.
  bool failed_without_bus = std::any_of(report.failed_gpus.begin(), report.failed_gpus.end(),
                                        [](const FailedGpu& f) { return !f.pci_bus_id; });
  if (whole_failure != nullptr && !failed_without_bus) consider(*whole_failure);
  if (found.empty()) return;
  std::unordered_set<int> seen;
  int max_index = -1;
  auto see = [&](int index) {
    seen.insert(index);
    max_index = std::max(max_index, index);
  };
  for (const auto& g : report.gpus) see(g.index);
  for (const auto& f : report.failed_gpus) see(f.index);
  for (const auto& g : list.gpus) see(g.index);
  int next_gap = 0;
  for (NvsmiDiagnosis& d : found) {
    while (next_gap <= max_index && seen.contains(next_gap)) ++next_gap;
    FailedGpu f;
    // nvidia-smi numbers GPUs 0..N-1: a failure fills the first gap, else comes after the last.
    f.index = max_index >= 0 ? next_gap++ : -1;
    f.pci_bus_id = *d.pci_bus_id;
    f.failure = std::move(d);
    report.failed_gpus.push_back(std::move(f));
  }
  std::stable_sort(report.failed_gpus.begin(), report.failed_gpus.end(), [](const FailedGpu& a, const FailedGpu& b) {
    return (a.index < 0 ? INT32_MAX : a.index) < (b.index < 0 ? INT32_MAX : b.index);
  });
}

std::string gpu_label(const FailedGpu& f) {
  std::string label = f.index >= 0 ? fmt::format("GPU {}", f.index) : std::string("a GPU");
  if (f.pci_bus_id) label += fmt::format(" ({})", *f.pci_bus_id);
  return label;
}

void sanitize_diagnosis(NvsmiDiagnosis& d) {
  d.message = detail::sanitize(d.message);
  d.excerpt = detail::sanitize(d.excerpt);
  if (d.pci_bus_id) d.pci_bus_id = detail::sanitize(*d.pci_bus_id);
}

// Node output reaches the report's own strings (the indices source of the "indices" line, lines
// quoted in messages and warnings, versions): each becomes valid UTF-8 without control characters,
// so -o json, and the ops schemas that copy these strings, never throw on dump(). The GPUs' fields
// are sanitized by their to_json.
void sanitize_report(NodeGpuReport& report) {
  report.message = detail::sanitize(report.message);
  report.enumeration = detail::sanitize(report.enumeration);
  for (auto& w : report.warnings) w = detail::sanitize(w);
  if (report.driver_version) report.driver_version = detail::sanitize(*report.driver_version);
  if (report.cuda_version) report.cuda_version = detail::sanitize(*report.cuda_version);
  for (auto& d : report.step_failures) sanitize_diagnosis(d);
  report.facts.kernel_log_error = detail::sanitize(report.facts.kernel_log_error);
  report.facts.kernel_log_source = detail::sanitize(report.facts.kernel_log_source);
  for (auto& f : report.failed_gpus) {
    if (f.pci_bus_id) f.pci_bus_id = detail::sanitize(*f.pci_bus_id);
    if (f.uuid) f.uuid = detail::sanitize(*f.uuid);
    if (f.product_name) f.product_name = detail::sanitize(*f.product_name);
    sanitize_diagnosis(f.failure);
  }
}

// Output without the probe's framing: the script did not run, or this is not its output.
NodeGpuReport report_unframed(int exit_code, std::string_view stdout_text, std::string_view stderr_text,
                              bool truncated) {
  NodeGpuReport report;
  report.truncated = truncated;
  report.enumeration = "none";
  if (trim(stdout_text).empty() && trim(stderr_text).empty() && truncated) {
    NvsmiDiagnosis d = cut_off("the probe");
    report.kind = d.kind;
    report.message = d.message;
    report.step_failures.push_back(std::move(d));
    return report;
  }
  NvsmiDiagnosis d = classify_nvidia_smi_run(exit_code, stdout_text, stderr_text);
  if (d.kind == NvsmiErrorKind::nvidia_smi_missing && !detail::icontains(stdout_text, "nvidia-smi") &&
      !detail::icontains(stderr_text, "nvidia-smi")) {
    // Exit 127 without the probe's framing: the remote shell could not run the probe itself
    // (no sh, no sed), which says nothing about nvidia-smi.
    std::vector<std::string_view> lines = detail::split_lines(stderr_text.empty() ? stdout_text : stderr_text);
    d.kind = NvsmiErrorKind::unknown_error;
    d.message = fmt::format("the probe did not run (exit {}): \"{}\"", exit_code,
                            lines.empty() ? std::string("no output") : detail::one_line(lines.front(), 160));
  } else if (d.ok() || d.warning_only) {
    d.kind = NvsmiErrorKind::garbage;
    d.warning_only = false;
    std::vector<std::string_view> lines = detail::split_lines(stdout_text.empty() ? stderr_text : stdout_text);
    std::string first = lines.empty() ? std::string("(no output)") : detail::one_line(lines.front(), 120);
    d.message =
        fmt::format("the probe's output is not framed by {} (the probe did not run): \"{}\"", kProbeMarker, first);
    d.excerpt = detail::excerpt_around(lines, 0);
  }
  report.kind = d.kind;
  report.message = d.message;
  report.step_failures.push_back(std::move(d));
  return report;
}

// The whole query answered: its GPUs, plus a failure for each GPU -L lists but the query left
// out. A GPU matches by UUID when both have one, else by index.
void take_whole_query(NodeGpuReport& report, NvidiaSmiLog& log, const GpuList& list, const ProbeIndex& lookup) {
  report.enumeration = "query";
  report.driver_version = log.driver_version;
  report.cuda_version = log.cuda_version;
  report.gpus = std::move(log.gpus);
  report.warnings.insert(report.warnings.end(), log.warnings.begin(), log.warnings.end());
  std::unordered_set<std::string> uuids;
  std::unordered_set<int> indices;               // of every GPU
  std::unordered_set<int> indices_without_uuid;  // of GPUs without a UUID
  for (const auto& gpu : report.gpus) {
    if (gpu.uuid)
      uuids.insert(*gpu.uuid);
    else
      indices_without_uuid.insert(gpu.index);
    indices.insert(gpu.index);
  }
  for (const auto& g : list.gpus) {
    bool present =
        g.uuid ? uuids.contains(*g.uuid) || indices_without_uuid.contains(g.index) : indices.contains(g.index);
    if (present) continue;
    NvsmiDiagnosis d;
    d.kind = NvsmiErrorKind::unknown_error;
    d.message = fmt::format("GPU {} ({}) is listed by nvidia-smi -L but missing from nvidia-smi -q -x", g.index,
                            g.uuid ? *g.uuid : g.name);
    report.failed_gpus.push_back(failed_gpu(g.index, lookup, std::move(d)));
  }
  if (list.gpus.empty() && log.attached_gpus && *log.attached_gpus > static_cast<int>(report.gpus.size())) {
    report.warnings.push_back(
        fmt::format("nvidia-smi reports {} attached GPUs but described {}", *log.attached_gpus, report.gpus.size()));
  }
}

// No GPU answered in XML (a build without XML support, a vGPU guest): the --query-gpu CSV, when it
// answered, gives the GPUs with fewer fields, else the -q text; the XML failures of the GPUs they
// list are dropped.
void take_other_forms(NodeGpuReport& report, const ProbeIndex& lookup) {
  std::vector<GpuInfo> gpus;
  std::string form;
  if (const ProbeStep* csv = lookup.step("csv"); csv && csv->exit_code == 0) {
    if (auto parsed = parse_query_gpu_csv(csv->stdout_text)) {
      gpus = std::move(*parsed);
      form = "csv";
    }
  }
  if (const ProbeStep* text = lookup.step("text"); gpus.empty() && text && text->exit_code == 0) {
    if (auto parsed = parse_nvidia_smi_query_text(text->stdout_text); parsed && !parsed->gpus.empty()) {
      for (auto& g : parsed->gpus) g.driver_version = parsed->driver_version;
      gpus = std::move(parsed->gpus);
      form = "text";
    }
  }
  if (gpus.empty()) return;
  std::unordered_set<int> indices;
  for (const GpuInfo& g : gpus) indices.insert(g.index);
  std::erase_if(report.failed_gpus, [&](const FailedGpu& f) { return indices.contains(f.index); });
  report.enumeration = form;
  report.driver_version = gpus.front().driver_version;
  report.gpus = std::move(gpus);
  report.warnings.push_back(fmt::format(
      "nvidia-smi -q -x gave no GPU ({}); read from {} instead",
      report.step_failures.empty() ? std::string("no XML") : report.step_failures.front().message,
      form == "csv" ? "nvidia-smi --query-gpu (no clock reasons, row remapping or processes)" : "nvidia-smi -q"));
}

// The whole query failed: the per-GPU fallback's steps, one per enumerated index.
void take_per_gpu_queries(NodeGpuReport& report, const ProbeTranscript& t, const ProbeIndex& lookup,
                          const NvsmiDiagnosis& whole_failure) {
  report.step_failures.push_back(whole_failure);
  report.enumeration = t.indices_source.empty() ? "none" : t.indices_source;
  for (int index : t.indices) {
    std::string name = fmt::format("gpu-{}", index);
    std::string what = fmt::format("nvidia-smi -q -x -i {}", index);
    const ProbeStep* step = lookup.step(name);
    XmlStep one = step ? interpret_xml_step(*step, what) : XmlStep{std::nullopt, cut_off(what)};
    if (one.log && !one.log->gpus.empty()) {
      GpuInfo gpu = std::move(one.log->gpus.front());
      gpu.index = index;
      if (!report.driver_version) report.driver_version = one.log->driver_version;
      if (!report.cuda_version) report.cuda_version = one.log->cuda_version;
      report.gpus.push_back(std::move(gpu));
    } else {
      if (one.log) {  // well-formed but without a <gpu>
        one.diagnosis.kind = NvsmiErrorKind::garbage;
        one.diagnosis.message = fmt::format("{} printed XML without a <gpu> element", what);
      }
      report.failed_gpus.push_back(failed_gpu(index, lookup, std::move(one.diagnosis)));
    }
  }
  if (report.gpus.empty()) take_other_forms(report, lookup);
}

// No GPU answered: the whole query's verdict, unless a per-GPU one says more.
NvsmiDiagnosis node_failure(const NodeGpuReport& report, const XmlStep& whole) {
  NvsmiDiagnosis node;
  if (whole.log) {
    if (report.failed_gpus.empty()) {
      node.kind = NvsmiErrorKind::no_devices;
      node.message = "nvidia-smi -q -x reported no GPU";
    } else {
      node = report.failed_gpus.front().failure;
    }
  } else {
    node = whole.diagnosis;
    if (!report.failed_gpus.empty() && node.kind == NvsmiErrorKind::unknown_error) {
      node = report.failed_gpus.front().failure;
    }
  }
  return node;
}

// The node's status, kind and message from the GPUs that answered and those that failed.
void conclude(NodeGpuReport& report, const XmlStep& whole) {
  const std::size_t total = report.gpus.size() + report.failed_gpus.size();
  if (!report.gpus.empty() && report.failed_gpus.empty()) {
    report.status = ProbeStatus::ok;
    report.kind = NvsmiErrorKind::ok;
    report.message = fmt::format("{} GPU{} answered", report.gpus.size(), report.gpus.size() == 1 ? "" : "s");
    if (!whole.log && report.enumeration != "csv" && report.enumeration != "text") {
      report.warnings.push_back(
          fmt::format("the whole query failed ({}) but every GPU answered on its own", whole.diagnosis.message));
    }
  } else if (!report.gpus.empty()) {
    const FailedGpu& first = report.failed_gpus.front();
    report.status = ProbeStatus::partial;
    report.kind = first.failure.kind;
    report.message = fmt::format("{} of {} GPUs answered; {} failed: {}", report.gpus.size(), total, gpu_label(first),
                                 first.failure.message);
  } else {
    report.status = ProbeStatus::failed;
    NvsmiDiagnosis node = node_failure(report, whole);
    report.kind = node.kind;
    report.message = node.message;
    if (!report.failed_gpus.empty()) {
      report.message +=
          fmt::format(" [{} GPU{} failed]", report.failed_gpus.size(), report.failed_gpus.size() == 1 ? "" : "s");
    }
  }
}

NodeGpuReport read_probe_output(int exit_code, std::string_view stdout_text, std::string_view stderr_text,
                                bool truncated) {
  ProbeTranscript t = parse_probe_transcript(stdout_text);
  if (!t.started && t.steps.empty()) return report_unframed(exit_code, stdout_text, stderr_text, truncated);

  NodeGpuReport report;
  report.truncated = truncated || !t.finished;
  for (const auto& stray : t.stray_lines) {
    if (report.warnings.size() < 5) report.warnings.push_back(fmt::format("unexpected probe output: \"{}\"", stray));
  }

  // -L's GPU lines are good even when it exits non-zero because of one broken GPU.
  GpuList list;
  const ProbeIndex steps_only(t, list);
  if (const ProbeStep* l = steps_only.step("list"); l && l->exit_code) list = parse_nvidia_smi_list(l->stdout_text);
  const ProbeIndex lookup(t, list);

  const ProbeStep* all = lookup.step("all");
  XmlStep whole =
      all ? interpret_xml_step(*all, "nvidia-smi -q -x") : XmlStep{std::nullopt, cut_off("nvidia-smi -q -x")};
  if (whole.log) {
    take_whole_query(report, *whole.log, list, lookup);
  } else {
    take_per_gpu_queries(report, t, lookup, whole.diagnosis);
  }
  merge_gpu_lists(report.gpus, list);
  add_unlisted_failures(report, list, whole.diagnosis.ok() ? nullptr : &whole.diagnosis);
  conclude(report, whole);
  report.facts = detail::read_node_facts(t);

  if (report.truncated && report.status != ProbeStatus::failed) {
    report.warnings.push_back("the probe output was cut off before the probe finished");
  }
  if (t.finished && exit_code != 0) {
    report.warnings.push_back(fmt::format("the probe finished but the remote command exited {}", exit_code));
  }
  return report;
}

}  // namespace

NodeGpuReport parse_probe_output(int exit_code, std::string_view stdout_text, std::string_view stderr_text,
                                 bool truncated) {
  NodeGpuReport report = read_probe_output(exit_code, stdout_text, stderr_text, truncated);
  sanitize_report(report);
  return report;
}

}  // namespace gpuctl::gpu
