// gpuctl quota: the per-namespace view (hard, used, free, LimitRange maxima, what admission held
// back); what each key means is quota_keys.cpp.
#include "gpuctl/ops/quota/quota.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "gpuctl/kube/quantity.hpp"
#include "gpuctl/ops/common/schema.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;
namespace {

using kube::field;

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

std::optional<std::int64_t> integer_of(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_string()) return std::nullopt;
  auto q = kube::Quantity::parse(v.get<std::string>());
  if (!q) return std::nullopt;
  return q->value();
}

// nvidia.com/gpu, the other extended resources, the DRA device classes, the claim count.
bool is_gpu_first(const QuotaResourceUsage& a, const QuotaResourceUsage& b) {
  auto rank = [](const QuotaResourceUsage& r) {
    if (r.resource == kGpuResource) return 0;
    if (!r.device_class.empty()) return 2;
    return r.resource == kResourceClaimsQuotaKey ? 3 : 1;
  };
  return std::make_tuple(rank(a), a.resource, !a.enforced, a.key) <
         std::make_tuple(rank(b), b.resource, !b.enforced, b.key);
}

bool managed(const json& object) { return kube::label_of(object, kManagedByLabel) == std::string(kManagedByValue); }

GpuQuota read_quota(const json& quota) {
  GpuQuota q;
  q.name = kube::name_of(quota);
  q.managed_by_gpuctl = managed(quota);
  const json& spec = field(quota, "spec");
  q.scoped =
      (field(spec, "scopes").is_array() && !field(spec, "scopes").empty()) || field(spec, "scopeSelector").is_object();
  const json& hard = field(spec, "hard");
  const json& used = field(field(quota, "status"), "used");
  if (!hard.is_object()) return q;
  for (const auto& [key, value] : hard.items()) {
    auto k = classify_gpu_quota_key(key);
    if (!k) continue;
    QuotaResourceUsage r;
    r.resource = k->resource;
    r.device_class = k->device_class;
    r.key = key;
    r.enforced = k->enforced;
    r.hard = integer_of(value).value_or(0);
    if (r.enforced && used.is_object() && used.contains(key)) r.used = integer_of(used[key]);
    q.resources.push_back(std::move(r));
  }
  std::sort(q.resources.begin(), q.resources.end(), is_gpu_first);
  return q;
}

// The newest time an event was seen (series, lastTimestamp, eventTime, creation).
std::string event_time(const json& e) {
  for (const auto* ptr :
       {"/series/lastObservedTime", "/lastTimestamp", "/eventTime", "/firstTimestamp", "/metadata/creationTimestamp"}) {
    json::json_pointer p(ptr);
    if (e.contains(p) && e.at(p).is_string() && !e.at(p).get<std::string>().empty()) return e.at(p).get<std::string>();
  }
  return {};
}

std::int64_t event_count(const json& e) {
  if (e.contains("/series/count"_json_pointer) && e.at("/series/count"_json_pointer).is_number_integer()) {
    return e.at("/series/count"_json_pointer).get<std::int64_t>();
  }
  const json& c = field(e, "count");
  return c.is_number_integer() && c.get<std::int64_t>() > 0 ? c.get<std::int64_t>() : 1;
}

bool job_finished(const json& job) {
  const json& conditions = field(field(job, "status"), "conditions");
  if (!conditions.is_array()) return false;
  for (const auto& c : conditions) {
    std::string type = text(field(c, "type"));
    if ((type == "Complete" || type == "Failed") && text(field(c, "status")) == "True") return true;
  }
  return false;
}

// The Job is not (or no longer) held back: gone, replaced, finished, or running all its pods.
bool job_no_longer_held(const json* job, const std::string& event_uid) {
  if (job == nullptr) return true;
  if (!event_uid.empty() && text(field(field(*job, "metadata"), "uid")) != event_uid) return true;
  if (job_finished(*job)) return true;
  const json& parallelism = field(field(*job, "spec"), "parallelism");
  std::int64_t want = parallelism.is_number_integer() ? parallelism.get<std::int64_t>() : 1;
  const json& active = field(field(*job, "status"), "active");
  std::int64_t have = active.is_number_integer() ? active.get<std::int64_t>() : 0;
  return want > 0 && have >= want;
}

json usage_json(const QuotaResourceUsage& r) {
  return {{"resource", r.resource},
          {"deviceClass", r.device_class.empty() ? json(nullptr) : json(r.device_class)},
          {"key", r.key},
          {"enforced", r.enforced},
          {"hard", r.hard},
          {"used", r.used ? json(*r.used) : json(nullptr)},
          {"free", r.free() ? json(*r.free()) : json(nullptr)}};
}

json finding_json(const QuotaFinding& f) {
  return {{"namespace", f.namespace_name}, {"quota", f.quota},    {"key", f.key}, {"value", f.value},
          {"replacement", f.replacement},  {"message", f.message}};
}

std::string_view denial_kind_name(AdmissionDenialKind k) {
  switch (k) {
    case AdmissionDenialKind::quota_exceeded: return "QuotaExceeded";
    case AdmissionDenialKind::quota_status_unknown: return "QuotaNotCounted";
    case AdmissionDenialKind::quota_must_specify: return "QuotaMustSpecify";
    case AdmissionDenialKind::limit_range: return "LimitRange";
  }
  return "";
}

}  // namespace

std::optional<GpuLimit> NamespaceQuotaView::max_per_pod(std::string_view resource) const {
  std::optional<GpuLimit> best;
  for (const char* type : {"Pod", "Container"}) {
    for (const auto& l : limits) {
      if (l.type != type || l.resource != resource) continue;
      if (!best || l.max < best->max) best = l;
    }
    if (best) return best;
  }
  return best;
}

std::vector<QuotaFinding> GpuQuotaList::findings() const {
  std::vector<QuotaFinding> out;
  for (const auto& item : items) out.insert(out.end(), item.findings.begin(), item.findings.end());
  return out;
}

void NamespaceGpuRequests::add(const json& pod) {
  std::size_t index = seen++;
  if (auto problem = kube::pod_shape_problem(pod); !problem.empty()) {
    skipped.push_back(fmt::format("{} skipped: {}", kube::object_label("pod", pod, index), problem));
    return;
  }
  if (kube::pod_is_terminal(pod)) return;
  for (const auto& [resource, q] : kube::pod_requests(pod)) {
    if (!is_nvidia_resource(resource) || q.value() <= 0) continue;
    std::int64_t& requested = by_namespace[kube::namespace_of(pod)][resource];
    requested = kube::saturating_add(requested, q.value());
  }
}

GpuQuotaList build_quota_view(const QuotaViewInput& input) {
  std::map<std::string, NamespaceQuotaView> by_ns;
  auto view = [&](const std::string& ns) -> NamespaceQuotaView& {
    auto& v = by_ns[ns];
    v.namespace_name = ns;
    return v;
  };
  for (const auto& ns : input.always_show) view(ns);

  for (const auto& quota : input.quotas) {
    GpuQuota q = read_quota(quota);
    if (q.resources.empty()) continue;
    auto& v = view(kube::namespace_of(quota));
    auto findings = check_quota_keys(quota);
    v.findings.insert(v.findings.end(), findings.begin(), findings.end());
    v.quotas.push_back(std::move(q));
  }
  for (const auto& lr : input.limit_ranges) {
    const json& limits = field(field(lr, "spec"), "limits");
    if (!limits.is_array()) continue;
    for (const auto& l : limits) {
      const json& max = field(l, "max");
      if (!max.is_object()) continue;
      for (const auto& [resource, value] : max.items()) {
        if (!is_nvidia_resource(resource)) continue;
        view(kube::namespace_of(lr))
            .limits.push_back({kube::name_of(lr), text(field(l, "type")), resource, integer_of(value).value_or(0)});
      }
    }
  }
  for (const auto& [ns, requested] : input.pod_requests.by_namespace) view(ns).requested = requested;

  std::map<std::pair<std::string, std::string>, const json*> jobs;
  for (const auto& job : input.jobs) jobs[{kube::namespace_of(job), kube::name_of(job)}] = &job;
  // One entry per involved object: the latest event's denial, counts summed.
  std::map<std::tuple<std::string, std::string, std::string>, HeldBack> held;
  for (const auto& e : input.events) {
    if (!text(field(e, "type")).empty() && text(field(e, "type")) != "Warning") continue;
    auto denial = parse_admission_denial(text(field(e, "message")));
    if (!denial) continue;
    const json& subject = field(e, "involvedObject");
    std::string ns = text(field(subject, "namespace"));
    if (ns.empty()) ns = kube::namespace_of(e);
    HeldBack h;
    h.kind = text(field(subject, "kind"));
    h.name = text(field(subject, "name"));
    if (h.kind == "Job" && input.jobs_listed) {
      auto it = jobs.find({ns, h.name});
      if (job_no_longer_held(it == jobs.end() ? nullptr : it->second, text(field(subject, "uid")))) continue;
    }
    h.denial = *denial;
    h.reason = describe(*denial);
    h.last_seen = event_time(e);
    h.count = event_count(e);
    auto key = std::make_tuple(ns, h.kind, h.name);
    auto it = held.find(key);
    if (it == held.end()) {
      held.emplace(key, std::move(h));
    } else {
      std::int64_t total = it->second.count + h.count;
      if (h.last_seen >= it->second.last_seen) it->second = std::move(h);
      it->second.count = total;
    }
  }
  for (auto& [key, h] : held) view(std::get<0>(key)).held_back.push_back(std::move(h));

  GpuQuotaList list;
  for (auto& [ns, v] : by_ns) {
    std::sort(v.quotas.begin(), v.quotas.end(), [](const GpuQuota& a, const GpuQuota& b) { return a.name < b.name; });
    list.items.push_back(std::move(v));
  }
  return list;
}

Result<GpuQuotaList> collect_quota_view(kube::Client& client, const QuotaViewOptions& options) {
  const std::string ns = options.all_namespaces ? std::string() : options.namespace_name;
  const std::string where = ns.empty() ? "any namespace" : "namespace " + ns;
  QuotaViewInput input;
  if (!ns.empty()) input.always_show.push_back(ns);
  // Each list decodes only what its kind's shape table names: the fields the view reads.
  kube::ListOptions quota_list;
  quota_list.fields = kube::Projection(kube::quota_shapes());
  GPUCTL_TRY_ASSIGN(kube::ListResult quotas, client.list(kube::paths::resource_quotas(ns), quota_list));
  input.quotas = std::move(quotas.items);
  GPUCTL_TRY_ASSIGN(kube::ListResult limit_ranges, client.list(kube::paths::limit_ranges(ns)));
  input.limit_ranges = std::move(limit_ranges.items);
  // The largest list by far: read in protobuf and folded page by page.
  kube::ListOptions running;
  running.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  running.fields = kube::pod_request_fields();
  running.protobuf = &kube::proto::pod();
  kube::ListPageSink sink;
  sink.on_items = [&input](std::vector<json>& pods) -> Result<void> {
    for (const json& pod : pods) input.pod_requests.add(pod);
    return {};
  };
  sink.on_restart = [&input] { input.pod_requests = ops::NamespaceGpuRequests{}; };
  GPUCTL_TRY(client.list_pages(kube::paths::pods(ns), running, sink));

  GpuQuotaList list;
  kube::ListOptions warnings;
  warnings.field_selector = "type=Warning";
  warnings.fields = kube::Projection(kube::event_shapes());
  auto events = client.list(kube::paths::events(ns), warnings);
  if (events) {
    input.events = std::move(events->items);
  } else {
    list.warnings.push_back(
        fmt::format("could not list events in {} ({}): pods and jobs held back by quota are not shown", where,
                    events.error().message));
  }
  if (events) {
    kube::ListOptions job_list;
    job_list.fields = kube::Projection(kube::job_shapes());
    auto jobs = client.list(kube::paths::jobs(ns), job_list);
    if (jobs) {
      input.jobs = std::move(jobs->items);
    } else {
      input.jobs_listed = false;
      list.warnings.push_back(
          fmt::format("could not list jobs in {} ({}): held-back jobs may include ones that have since started", where,
                      jobs.error().message));
    }
  }
  std::vector<std::string> skipped;
  input.quotas = kube::keep_well_formed(std::move(input.quotas), "resourcequota", kube::quota_shape_problem, skipped);
  input.limit_ranges =
      kube::keep_well_formed(std::move(input.limit_ranges), "limitrange", kube::limit_range_shape_problem, skipped);
  input.events = kube::keep_well_formed(std::move(input.events), "event", kube::event_shape_problem, skipped);
  input.jobs = kube::keep_well_formed(std::move(input.jobs), "job", kube::job_shape_problem, skipped);
  GpuQuotaList built = build_quota_view(input);
  built.warnings = std::move(list.warnings);
  built.skipped = std::move(skipped);
  built.skipped.insert(built.skipped.end(), input.pod_requests.skipped.begin(), input.pod_requests.skipped.end());
  return built;
}

json to_json(const GpuQuotaList& list) {
  json items = json::array();
  for (const auto& v : list.items) {
    json quotas = json::array();
    for (const auto& q : v.quotas) {
      json resources = json::array();
      for (const auto& r : q.resources) resources.push_back(usage_json(r));
      quotas.push_back(
          {{"name", q.name}, {"managedByGpuctl", q.managed_by_gpuctl}, {"scoped", q.scoped}, {"resources", resources}});
    }
    json requested = json::array();
    for (const auto& [resource, n] : v.requested) requested.push_back({{"resource", resource}, {"requested", n}});
    json limits = json::array();
    for (const auto& l : v.limits) {
      limits.push_back({{"limitRange", l.limit_range}, {"type", l.type}, {"resource", l.resource}, {"max", l.max}});
    }
    auto max = v.max_per_pod(kGpuResource);
    json held = json::array();
    for (const auto& h : v.held_back) {
      held.push_back({{"kind", h.kind},
                      {"name", h.name},
                      {"denial", denial_kind_name(h.denial.kind)},
                      {"quota", h.denial.quota.empty() ? json(nullptr) : json(h.denial.quota)},
                      {"reason", h.reason},
                      {"count", h.count},
                      {"lastSeen", h.last_seen.empty() ? json(nullptr) : json(h.last_seen)}});
    }
    json findings = json::array();
    for (const auto& f : v.findings) findings.push_back(finding_json(f));
    items.push_back({{"namespace", v.namespace_name},
                     {"quotas", quotas},
                     {"requested", requested},
                     {"limits", limits},
                     {"maxPerPod", max ? json(max->max) : json(nullptr)},
                     {"heldBack", held},
                     {"findings", findings}});
  }
  json findings = json::array();
  for (const auto& f : list.findings()) findings.push_back(finding_json(f));
  return schema_document("GPUQuotaList", {{"items", items}, {"findings", findings}, {"warnings", list.warnings}});
}

}  // namespace gpuctl::ops
