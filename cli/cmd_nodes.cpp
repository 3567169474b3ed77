// gpuctl nodes: the GPU inventory of the cluster at a glance.
#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/ops/fleet/gpus.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/output/table.hpp"
#include "gpuctl/util/time.hpp"
#include "node_source_flags.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {

using json = nlohmann::json;
namespace {

struct NodesOptions {
  std::string selector;
  bool all = false;
  std::string sort_by = "name";
  bool no_headers = false;
  std::string output;
  bool from_cache = false;
  bool live = false;
  NodeSourceFlags source;
};

using LiveByNode = std::map<std::string, ops::LiveSummary>;

using output::Cell;
using output::Style;

std::string status_text(const ops::NodeGpuInfo& n) {
  return n.schedulable ? n.readiness : n.readiness + ",SchedulingDisabled";
}

Style status_style(const ops::NodeGpuInfo& n) {
  if (n.readiness != "Ready") return Style::bad;
  return n.schedulable ? Style::plain : Style::warn;
}

std::string taints_text(const ops::NodeGpuInfo& n, bool wide) {
  if (n.taints.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& t : n.taints) parts.push_back(wide ? kube::to_string(t) : t.key + ":" + t.effect);
  if (!wide && parts.size() > 2) {
    return fmt::format("{},+{}", fmt::join(parts.begin(), parts.begin() + 2, ","), parts.size() - 2);
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string or_none(const std::string& s) { return s.empty() ? "<none>" : s; }

// "nvidia.com/mig-1g.5gb" -> "mig-1g.5gb"; a MIG-only node's several profiles as "mig-1g.5gb,+1".
std::string short_resource(const std::string& name) {
  std::vector<std::string> parts;
  std::string_view rest = name;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    if (one.starts_with(ops::kNvidiaResourcePrefix)) one.remove_prefix(ops::kNvidiaResourcePrefix.size());
    parts.emplace_back(one);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (parts.size() > 1) return fmt::format("{},+{}", parts[0], parts.size() - 1);
  return parts.empty() ? std::string() : parts[0];
}

std::string source_text(const ops::NodeGpuInfo& n) {
  if (!n.gpu_node) return "-";
  if (n.source == ops::kSourceDra) return n.device_plugin_gpus ? "dra+plugin" : "dra";
  return "plugin";
}

// wide: every taint of a DRA device, "gpu-1:gpu.nvidia.com/xid=79:NoSchedule".
std::string device_taints_text(const ops::NodeGpuInfo& n) {
  if (n.device_taints.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& d : n.device_taints) {
    parts.push_back(d.taint.value.empty()
                        ? fmt::format("{}:{}:{}", d.device, d.taint.key, d.taint.effect)
                        : fmt::format("{}:{}={}:{}", d.device, d.taint.key, d.taint.value, d.taint.effect));
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string live_util(const ops::LiveSummary& l) {
  return l.utilization_percent ? fmt::format("{:.0f}%", *l.utilization_percent) : "-";
}
std::string live_memory(const ops::LiveSummary& l) {
  return l.memory_total_mib > 0 ? fmt::format("{}/{} MiB", l.memory_used_mib, l.memory_total_mib) : "-";
}

std::string node_table(const ops::NodeInventory& inv, bool wide, const NodesOptions& o, bool color,
                       const LiveByNode& live) {
  std::vector<std::string> headers = {"NAME",        "STATUS", "PRODUCT", "SOURCE",    "RESOURCE", "CAPACITY",
                                      "ALLOCATABLE", "USED",   "FREE",    "UNHEALTHY", "TAINTS",   "AGE"};
  if (wide) {
    for (auto h : {"DRIVER", "CUDA", "MIG/OTHER", "DEVICE-TAINTS", "CONDITIONS", "INTERNAL-IP", "KUBELET", "CORDONED"})
      headers.emplace_back(h);
  }
  if (o.live) {
    for (auto h : {"LIVE", "LIVE-DRIVER", "GPU-UTIL", "GPU-MEMORY"}) headers.emplace_back(h);
  }
  output::Table table(headers);
  for (const auto& n : inv.nodes) {
    // Whole GPUs, or what a node whose GPUs are all MIG-partitioned offers instead.
    const ops::ResourceCount offered = n.offered();
    const std::int64_t unhealthy = ops::NodeGpuInfo::unhealthy_of(offered);
    std::vector<Cell> row = {
        Cell(n.name),
        Cell(status_text(n), status_style(n)),
        Cell(or_none(n.product)),
        Cell(source_text(n), n.device_plugin_gpus ? Style::warn : Style::plain),
        Cell(n.gpu_node ? short_resource(offered.name) : "-"),
        Cell(std::to_string(offered.capacity)),
        Cell(std::to_string(offered.allocatable)),
        Cell(std::to_string(offered.used)),
        Cell(std::to_string(offered.free()), n.gpu_node && offered.free() == 0 ? Style::warn : Style::plain),
        Cell(std::to_string(unhealthy), unhealthy > 0 ? Style::bad : Style::plain),
        Cell(taints_text(n, wide)),
        Cell(util::human_duration(std::chrono::seconds(n.age_seconds))),
    };
    if (wide) {
      std::vector<std::string> other;
      for (const auto& r : n.other_resources) {
        std::string short_name = r.name.substr(ops::kNvidiaResourcePrefix.size());
        other.push_back(fmt::format("{}={}/{}", short_name, r.used, r.allocatable));
      }
      std::vector<std::string> conditions;
      for (const auto& c : n.problem_conditions) conditions.push_back(c.type);
      std::string cordoned = "<none>";
      if (n.cordon) {
        cordoned = fmt::format("\"{}\" by {} at {}", n.cordon->reason, or_none(n.cordon->by), or_none(n.cordon->at));
      }
      row.emplace_back(or_none(n.driver_version));
      row.emplace_back(or_none(n.cuda_version));
      row.emplace_back(other.empty() ? "<none>" : fmt::format("{}", fmt::join(other, ",")));
      row.emplace_back(device_taints_text(n));
      row.emplace_back(conditions.empty() ? Cell("<none>")
                                          : Cell(fmt::format("{}", fmt::join(conditions, ",")), Style::bad));
      row.emplace_back(or_none(n.internal_ip));
      row.emplace_back(or_none(n.kubelet_version));
      row.emplace_back(cordoned);
    }
    if (o.live) {
      auto it = live.find(n.name);
      if (it == live.end()) {
        for (int i = 0; i < 4; i++) row.emplace_back("-");
      } else {
        const auto& l = it->second;
        row.emplace_back(l.outcome, l.outcome == "ok"        ? Style::good
                                    : l.outcome == "partial" ? Style::warn
                                                             : Style::bad);
        row.emplace_back(l.driver_version.empty() ? "-" : l.driver_version);
        row.emplace_back(live_util(l));
        row.emplace_back(live_memory(l));
      }
    }
    table.add_row(std::move(row));
  }
  std::string text = table.render({!o.no_headers, color});
  if (!o.no_headers && !inv.products.empty()) {
    output::Table summary({"PRODUCT", "RESOURCE", "SOURCE", "NODES", "CAPACITY", "ALLOCATABLE", "USED", "FREE"});
    for (const auto& p : inv.products) {
      std::string source = p.source == ops::kSourceDra            ? "dra"
                           : p.source == ops::kSourceDevicePlugin ? "plugin"
                                                                  : "plugin,dra";
      summary.add_row({or_none(p.product), short_resource(p.resource), source, std::to_string(p.nodes),
                       std::to_string(p.capacity), std::to_string(p.allocatable), std::to_string(p.used),
                       std::to_string(p.free)});
    }
    text += "\n" + summary.render({true, color});
  }
  return text;
}

Result<ExitCode> run_nodes(const NodesOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(OutputFormat format, parse_output_format(o.output));
  std::optional<NodeSourceRequest> ssh;
  if (o.live) {
    GPUCTL_TRY_ASSIGN(ssh, validate_node_source_flags(o.source));
  }
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  // run
  ops::NodeInventoryOptions options{o.selector, o.all, o.from_cache};
  GPUCTL_TRY_ASSIGN(ops::NodeInventory inventory, ops::collect_node_inventory(*client, options));
  GPUCTL_TRY(ops::sort_nodes(inventory.nodes, o.sort_by));
  for (const auto& skipped : inventory.skipped) ctx.warn(skipped);
  for (const auto& warning : inventory.warnings) ctx.warn(warning);
  LiveByNode live;
  bool all_answered = true;
  if (ssh) {
    // The node's own word, through the same fan-out as `gpuctl gpus`, for the GPU nodes listed.
    ops::GpuViewOptions view_options;
    for (const auto& n : inventory.nodes) {
      if (n.gpu_node) view_options.names.push_back(n.name);
    }
    if (!view_options.names.empty()) {
      GPUCTL_TRY_ASSIGN(std::unique_ptr<ops::NodeSource> source, make_node_source(*ssh, ctx));
      GPUCTL_TRY_ASSIGN(ops::GpuView view, ops::collect_gpu_view(*client, *source, view_options));
      for (const auto& v : view.nodes) {
        live[v.kube.name] = ops::summarize(v.probe);
        all_answered = all_answered && v.probe.outcome == "ok";
      }
    }
  }

  auto& out = ctx.streams().out;
  switch (format) {
    case OutputFormat::json:
    case OutputFormat::yaml: {
      out << render_structured(ssh ? ops::to_json(inventory, live) : ops::to_json(inventory), format);
      break;
    }
    case OutputFormat::name:
      for (const auto& n : inventory.nodes) print_line(out, "node/" + n.name);
      break;
    case OutputFormat::table:
    case OutputFormat::wide:
      if (inventory.nodes.empty()) {
        ctx.streams().err << (o.all ? "No nodes found" : "No GPU nodes found (use --all to list every node)")
                          << (o.selector.empty() ? "" : " matching -l " + o.selector) << ".\n";
        break;
      }
      out << node_table(inventory, format == OutputFormat::wide, o, ctx.color(), live);
      break;
  }
  return all_answered && inventory.skipped.empty() ? ExitCode::ok : ExitCode::failure;
}

}  // namespace

void register_nodes(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<NodesOptions>();
  auto* cmd =
      app.add_subcommand("nodes", "List GPU nodes: product, GPU capacity, allocatable, used, free and unhealthy");
  document(*cmd, ctx.help(),
           {R"(GPU nodes are nodes that advertise an nvidia.com/* resource or carry a GPU product label
(nvidia.com/gpu.product, cloud.google.com/gke-accelerator, accelerator, ...). USED is the sum of
the GPU requests of the non-terminal pods bound to the node; UNHEALTHY is capacity - allocatable
(devices the device plugin reported unhealthy). A summary per product follows the table.)",
            {{"Every GPU node, with a summary per product", "gpuctl nodes"},
             {"A100 nodes with driver, CUDA, MIG resources and cordon reasons",
              "gpuctl nodes -l nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB -o wide"},
             {"Nodes with the most free GPUs last, for a script", "gpuctl nodes --sort-by free --no-headers"},
             {"The stable JSON schema (kind GPUNodeList) for scripts",
              "gpuctl nodes -o json | jq '.items[] | select(.gpus.free > 0) | .name'"}}});
  add_selector_flag(*cmd, ctx.help(), o->selector);
  cmd->add_flag("--all", o->all, "List every node, not only GPU nodes");
  with_choices(cmd->add_option("--sort-by", o->sort_by,
                               "Sort by: name, status, product, capacity, allocatable, used, free, unhealthy, age")
                   ->default_str("name"),
               ctx.help(), std::vector<std::string>(ops::node_sort_keys().begin(), ops::node_sort_keys().end()));
  cmd->add_flag("--no-headers", o->no_headers, "Print no headers and no summary (for scripts)");
  cmd->add_flag(
      "--from-cache", o->from_cache,
      "Read from the API server's watch cache (resourceVersion=0): cheaper on big clusters, possibly seconds stale");
  add_output_flag(*cmd, ctx.help(), o->output, {"table", "wide", "json", "yaml", "name"});
  cmd->add_flag(
      "--live", o->live,
      "Also read every GPU node's live data (as 'gpuctl gpus' does, --via ssh, pod or prometheus): driver version, "
      "GPU utilization, memory used; exit code 1 when a node did not answer");
  add_node_source_flags(*cmd, ctx.help(), o->source);
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_nodes(*o, ctx); }; });
}

}  // namespace gpuctl::cli
