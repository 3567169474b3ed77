// gpuctl quota: GPU quota per namespace (hard, used, free, LimitRange maxima, what admission held
// back), quota keys Kubernetes never enforces, and quota set / delete / fix.
#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/quota/quota.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/table.hpp"
#include "output_format.hpp"
#include "quota_table.hpp"

namespace gpuctl::cli {
namespace {

using json = nlohmann::json;

struct QuotaOptions {
  bool all_namespaces = false;
  bool no_headers = false;
  std::string output;
};

struct QuotaSetOptions {
  std::string namespace_name;
  std::string gpus;
  std::string max_per_pod;
  bool max_per_pod_given = false;
  std::vector<std::string> resources;
  std::vector<std::string> devices;
  std::string claims;
  bool claims_given = false;
  std::string dry_run;
  std::string output;
};

struct QuotaDeleteOptions {
  std::string namespace_name;
  std::string dry_run;
};

struct QuotaFixOptions {
  std::string namespace_name;
  std::string dry_run;
  std::string output;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json list_of(std::vector<json> items) { return {{"apiVersion", "v1"}, {"kind", "List"}, {"items", std::move(items)}}; }

Result<OutputFormat> write_output_format(const std::string& text) {
  if (text == "text" || text.empty()) return OutputFormat::table;
  return parse_output_format(text);
}

Result<ExitCode> run_quota(const QuotaOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(o.output));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  ops::QuotaViewOptions options;
  options.all_namespaces = o.all_namespaces;
  if (!o.all_namespaces) {
    GPUCTL_TRY_ASSIGN(options.namespace_name, ctx.namespace_name());
  }
  // run
  GPUCTL_TRY_ASSIGN(ops::GpuQuotaList list, ops::collect_quota_view(*client, options));
  for (const auto& w : list.warnings) ctx.warn(w);
  for (const auto& s : list.skipped) ctx.warn(s);
  for (const auto& f : list.findings()) ctx.warn(f.message);
  auto& out = ctx.streams().out;
  switch (format) {
    case OutputFormat::json:
    case OutputFormat::yaml: out << render_structured(ops::to_json(list), format); break;
    case OutputFormat::name:
      for (const auto& v : list.items) {
        for (const auto& q : v.quotas) print_line(out, "resourcequota/" + q.name);
      }
      break;
    case OutputFormat::table:
    case OutputFormat::wide:
      if (list.items.empty()) {
        ctx.streams().err << "No GPU quota or GPU usage found in any namespace.\n";
        break;
      }
      out << quota_table(list, format == OutputFormat::wide, !o.no_headers, ctx.color());
      break;
  }
  return list.skipped.empty() ? ExitCode::ok : ExitCode::failure;
}

Result<std::string> namespace_argument(const std::string& positional, AppContext& ctx, const char* usage) {
  std::string ns = positional.empty() ? ctx.globals().namespace_name : positional;
  if (ns.empty()) return fail(Errc::invalid_argument, fmt::format("give the namespace: {}", usage));
  if (!positional.empty() && !ctx.globals().namespace_name.empty() && ctx.globals().namespace_name != positional) {
    return fail(Errc::invalid_argument, fmt::format("the namespace is given twice (\"{}\" and -n {}): give it once",
                                                    positional, ctx.globals().namespace_name));
  }
  return ns;
}

Result<ExitCode> run_quota_set(const QuotaSetOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(std::string ns, namespace_argument(o.namespace_name, ctx, "gpuctl quota set NS --gpus N"));
  if (o.gpus.empty())
    return fail(Errc::invalid_argument,
                "--gpus is required: the GPUs the namespace may request in all (e.g. --gpus 8)");
  GPUCTL_TRY_ASSIGN(DryRun dry_run, parse_dry_run(o.dry_run));
  GPUCTL_TRY_ASSIGN(OutputFormat format, write_output_format(o.output));
  std::optional<std::string_view> max;
  if (o.max_per_pod_given) max = o.max_per_pod;
  std::optional<std::string_view> claims;
  if (o.claims_given) claims = o.claims;
  GPUCTL_TRY_ASSIGN(ops::QuotaSpec spec, ops::parse_quota_spec(ns, o.gpus, max, o.resources, o.devices, claims));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  // run
  GPUCTL_TRY_ASSIGN(ops::SetResult result, ops::set_quota(*client, spec, dry_run));
  for (const auto& w : result.warnings) ctx.warn(w);
  auto& out = ctx.streams().out;
  if (format == OutputFormat::json || format == OutputFormat::yaml) {
    std::vector<json> items;
    for (const auto& r : result.objects) items.push_back(r.result);
    out << render_structured(list_of(std::move(items)), format);
    return ExitCode::ok;
  }
  for (const auto& r : result.objects) {
    print_line(out, fmt::format("{}/{} {}{}{}", lower(r.plan.kind), r.plan.name, ops::to_string(r.plan.action),
                                r.plan.summary.empty() ? "" : ": " + r.plan.summary, dry_run_suffix(dry_run)));
  }
  return ExitCode::ok;
}

Result<ExitCode> run_quota_delete(const QuotaDeleteOptions& o, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(std::string ns, namespace_argument(o.namespace_name, ctx, "gpuctl quota delete NS"));
  if (auto p = ops::namespace_name_problem(ns); !p.empty()) {
    return fail(Errc::invalid_argument, fmt::format("namespace \"{}\": {}", ns, p));
  }
  GPUCTL_TRY_ASSIGN(DryRun dry_run, parse_dry_run(o.dry_run));
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::DeleteResult result, ops::delete_quota(*client, ns, dry_run));
  for (const auto& item : result.items) {
    if (item.deleted)
      ctx.streams().out << fmt::format("{}/{} deleted{}\n", lower(item.kind), item.name, dry_run_suffix(dry_run));
  }
  return ExitCode::ok;
}

Result<ExitCode> run_quota_fix(const QuotaFixOptions& o, AppContext& ctx) {
  std::string ns = o.namespace_name.empty() ? ctx.globals().namespace_name : o.namespace_name;
  if (!ns.empty()) {
    if (auto p = ops::namespace_name_problem(ns); !p.empty()) {
      return fail(Errc::invalid_argument, fmt::format("namespace \"{}\": {}", ns, p));
    }
  }
  GPUCTL_TRY_ASSIGN(DryRun dry_run, parse_dry_run(o.dry_run));
  GPUCTL_TRY_ASSIGN(OutputFormat format, write_output_format(o.output));
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::FixResult result, ops::fix_quotas(*client, ns, dry_run));
  auto& out = ctx.streams().out;
  std::vector<std::string> failed;
  std::vector<json> items;
  for (const auto& item : result.items) {
    const std::string id = item.plan.namespace_name + "/" + item.plan.quota;
    if (item.error) {
      print_line(ctx.streams().err, fmt::format("error: resourcequota {}: {}", id, item.error->message));
      failed.push_back(id);
      continue;
    }
    items.push_back(item.result);
    if (format == OutputFormat::table) {
      print_line(out,
                 fmt::format("resourcequota/{} configured (namespace {}): {}{}", item.plan.quota,
                             item.plan.namespace_name, fmt::join(item.plan.changes, ", "), dry_run_suffix(dry_run)));
    }
  }
  if (format == OutputFormat::json || format == OutputFormat::yaml)
    out << render_structured(list_of(std::move(items)), format);
  if (result.items.empty() && format == OutputFormat::table) {
    out << fmt::format("No quota with GPU keys Kubernetes does not enforce in {}.\n",
                       ns.empty() ? "any namespace" : "namespace " + ns);
  }
  if (!failed.empty()) {
    print_line(ctx.streams().err, fmt::format("error: {} of {} quota(s) failed: {}", failed.size(), result.items.size(),
                                              fmt::join(failed, ", ")));
    return ExitCode::failure;
  }
  return ExitCode::ok;
}

// gpuctl quota set NS: its flags, help and run.
CLI::App* register_quota_set(CLI::App& quota, AppContext& ctx) {
  auto s = std::make_shared<QuotaSetOptions>();
  auto* set =
      quota.add_subcommand("set", "Create or update the namespace's GPU quota (requests.* keys) and per-pod maximum");
  document(*set, ctx.help(),
           {R"(Writes the ResourceQuota gpuctl-gpu-quota with requests.nvidia.com/gpu: N and requests.<resource>: K
for each --resource (the requests. keys are the only ones Kubernetes enforces for extended
resources); for GPUs as DRA devices, CLASS.deviceclass.resource.k8s.io/devices: K for each
--devices CLASS=K and count/resourceclaims.resource.k8s.io: C for --claims C (past them new
ResourceClaims are refused and their pods wait in Pending); and with --max-per-pod the LimitRange
gpuctl-gpu-limits (type Pod and Container max nvidia.com/gpu: M; containers without a GPU limit
default to 0, as LimitRanger would refuse them otherwise). Both carry
app.kubernetes.io/managed-by=gpuctl; other quotas are never touched. Idempotent: "unchanged" when
nothing differs, "configured" when it did. --resource, --devices and --claims are the whole list: a
key left out of a later call is dropped from the quota. Without --max-per-pod an existing gpuctl
LimitRange is left as it is ('gpuctl quota delete' removes both). A value below current use warns:
running pods (and claims) stay, new ones are refused.)",
            {{"8 GPUs for team-a, at most 4 per pod", "gpuctl quota set team-a --gpus 8 --max-per-pod 4"},
             {"Whole GPUs and MIG slices", "gpuctl quota set team-b --gpus 2 --resource nvidia.com/mig-1g.10gb=7"},
             {"GPUs as DRA devices: 8 of NVIDIA's DeviceClass in at most 4 claims",
              "gpuctl quota set team-c --gpus 8 --devices gpu.nvidia.com=8 --claims 4"},
             {"The objects that would be sent", "gpuctl quota set team-a --gpus 8 --dry-run=client -o yaml"}}});
  set->fallthrough();
  completes(set->add_option("namespace", s->namespace_name, "NS"), ctx.help(), ValueKind::namespace_);
  set->add_option("--gpus", s->gpus,
                  "requests.nvidia.com/gpu: the GPUs all pods of the namespace may request together");
  auto* max = set->add_option("--max-per-pod", s->max_per_pod,
                              "The most GPUs one pod (and one container) may request (a LimitRange)");
  set->add_option("--resource", s->resources,
                  "Another extended resource to cap, NAME=COUNT (e.g. nvidia.com/mig-1g.10gb=7); repeatable");
  set->add_option("--devices", s->devices,
                  "DRA devices of a DeviceClass all claims may ask for, CLASS=COUNT (e.g. gpu.nvidia.com=8); "
                  "repeatable");
  auto* claims = set->add_option("--claims", s->claims, "The most ResourceClaims the namespace may hold");
  add_dry_run_flag(*set, ctx.help(), s->dry_run);
  with_choices(set->add_option("-o,--output", s->output,
                               "Output format: text|json|yaml (json/yaml: the objects as written, a v1 List)"),
               ctx.help(), {"text", "json", "yaml"});
  set->callback([s, max, claims, &ctx] {
    s->max_per_pod_given = max->count() > 0;
    s->claims_given = claims->count() > 0;
    ctx.run = [s, &ctx] { return run_quota_set(*s, ctx); };
  });
  return set;
}

// gpuctl quota delete NS.
CLI::App* register_quota_delete(CLI::App& quota, AppContext& ctx) {
  auto d = std::make_shared<QuotaDeleteOptions>();
  auto* del = quota.add_subcommand("delete", "Delete the GPU quota and LimitRange gpuctl created in a namespace");
  document(*del, ctx.help(),
           {R"(Deletes resourcequota/gpuctl-gpu-quota and limitrange/gpuctl-gpu-limits (only with the label
app.kubernetes.io/managed-by=gpuctl, with a uid precondition). Quotas gpuctl did not create are
never deleted; when neither object is there, the error names the quotas that are.)",
            {{"Remove team-a's GPU cap", "gpuctl quota delete team-a"},
             {"What would be deleted", "gpuctl quota delete team-a --dry-run"}}});
  del->fallthrough();
  completes(del->add_option("namespace", d->namespace_name, "NS"), ctx.help(), ValueKind::namespace_);
  add_dry_run_flag(*del, ctx.help(), d->dry_run);
  del->callback([d, &ctx] { ctx.run = [d, &ctx] { return run_quota_delete(*d, ctx); }; });
  return del;
}

// gpuctl quota fix [NS].
CLI::App* register_quota_fix(CLI::App& quota, AppContext& ctx) {
  auto f = std::make_shared<QuotaFixOptions>();
  auto* fix =
      quota.add_subcommand("fix", "Rewrite quota keys Kubernetes never enforces (nvidia.com/gpu) to requests.* keys");
  document(*fix, ctx.help(),
           {R"(For every ResourceQuota (in NS, else -n, else every namespace) whose spec.hard has nvidia.com/*
keys without the requests. prefix (nvidia.com/gpu, limits.nvidia.com/gpu), rewrites them to
requests.<resource>. When the requests. key is there too, the smaller (stricter) value is kept.
Each quota is replaced with its resourceVersion, so a concurrent change is never lost (gpuctl
reads it again and re-plans). One failed quota does not stop the others (exit code 1).)",
            {{"What would change, in every namespace", "gpuctl quota fix --dry-run"},
             {"Fix team-a's quotas", "gpuctl quota fix team-a"}}});
  fix->fallthrough();
  completes(fix->add_option("namespace", f->namespace_name, "NS"), ctx.help(), ValueKind::namespace_);
  add_dry_run_flag(*fix, ctx.help(), f->dry_run);
  with_choices(fix->add_option("-o,--output", f->output,
                               "Output format: text|json|yaml (json/yaml: the quotas as written, a v1 List)"),
               ctx.help(), {"text", "json", "yaml"});
  fix->callback([f, &ctx] { ctx.run = [f, &ctx] { return run_quota_fix(*f, ctx); }; });
  return fix;
}

}  // namespace

void register_quota(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<QuotaOptions>();
  auto* cmd = app.add_subcommand(
      "quota", "Show GPU quota per namespace: hard, used, free, the per-pod maximum, what quota held back");
  document(*cmd, ctx.help(),
           {R"(Per namespace, every ResourceQuota with nvidia.com/* keys: USED and HARD of requests.nvidia.com/gpu
(and MIG resources) from the quota's spec.hard and status.used ("not counted yet" until
kube-controller-manager fills it), FREE and a bar; for GPUs as DRA devices the keys ResourceClaims
are counted under: CLASS.deviceclass.resource.k8s.io/devices of NVIDIA's classes (shown as "CLASS
devices") and count/resourceclaims.resource.k8s.io ("resourceclaims"); MAX/POD from LimitRanges
(type Pod, else Container); HELD-BACK: jobs and pods that ResourceQuota or LimitRanger admission
refused, listed below the table. A namespace with GPU pods but no GPU quota shows "no quota" and its requests.
Quota keys Kubernetes accepts but never enforces (nvidia.com/gpu, limits.nvidia.com/gpu) are
flagged NOT ENFORCED, with a warning naming the fix: gpuctl quota fix NS.)",
            {{"The current namespace", "gpuctl quota"},
             {"Every namespace with a GPU quota or GPU pods, with scopes and owners", "gpuctl quota -A -o wide"},
             {"The stable JSON schema (kind GPUQuotaList) for scripts",
              "gpuctl quota -n team-a -o json | jq '.items[].quotas[].resources[] | {key, used, hard}'"},
             {"Cap team-a at 8 GPUs, at most 4 per pod", "gpuctl quota set team-a --gpus 8 --max-per-pod 4"}}});
  cmd->fallthrough();
  cmd->add_flag("-A,--all-namespaces", o->all_namespaces,
                "Every namespace that has a GPU quota, GPU LimitRange or GPU pods");
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers and no held-back list (for scripts)");
  add_output_flag(*cmd, ctx.help(), o->output, {"table", "wide", "json", "yaml", "name"});

  // The subcommands, in the order help lists them; plain `gpuctl quota` runs only when none is given.
  CLI::App* set = register_quota_set(*cmd, ctx);
  CLI::App* del = register_quota_delete(*cmd, ctx);
  CLI::App* fix = register_quota_fix(*cmd, ctx);
  cmd->callback([o, cmd, set, del, fix, &ctx] {
    if (cmd->got_subcommand(set) || cmd->got_subcommand(del) || cmd->got_subcommand(fix)) return;
    ctx.run = [o, &ctx] { return run_quota(*o, ctx); };
  });
}

}  // namespace gpuctl::cli
