// The table of `gpuctl quota` (quota_table.hpp).
#include "quota_table.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/output/table.hpp"

namespace gpuctl::cli {
namespace {

using output::Cell;
using output::Style;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string short_resource(const std::string& r) {
  return r.starts_with(ops::kNvidiaResourcePrefix) ? r.substr(ops::kNvidiaResourcePrefix.size()) : r;
}

// What the RESOURCE column says: "gpu" for nvidia.com/gpu, "gpu.nvidia.com devices" for a DRA
// device class key, "resourceclaims" for the claim count.
std::string resource_label(const ops::QuotaResourceUsage& r) {
  if (!r.device_class.empty()) return r.device_class + " devices";
  if (r.resource == ops::kResourceClaimsQuotaKey) return "resourceclaims";
  return short_resource(r.resource);
}

// "[######----]": used of hard in ten steps.
Cell usage_bar(std::int64_t used, std::int64_t hard) {
  constexpr int kWidth = 10;
  int filled = hard <= 0 ? (used > 0 ? kWidth : 0)
                         : static_cast<int>(std::min<std::int64_t>(kWidth, (used * kWidth + hard - 1) / hard));
  std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                    std::string(static_cast<std::size_t>(kWidth - filled), '-') + "]";
  Style style = used > hard ? Style::bad : used == hard && hard > 0 ? Style::warn : Style::plain;
  return Cell(bar, style);
}

std::string max_text(const ops::NamespaceQuotaView& v, const std::string& resource) {
  auto m = v.max_per_pod(resource);
  if (!m) return "-";
  return m->type == "Pod" ? std::to_string(m->max) : fmt::format("{}/container", m->max);
}

}  // namespace

std::string quota_table(const ops::GpuQuotaList& list, bool wide, bool headers, bool color) {
  std::vector<std::string> columns = {"NAMESPACE", "QUOTA", "RESOURCE", "USED",     "HARD",
                                      "FREE",      "USAGE", "MAX/POD",  "HELD-BACK"};
  if (wide) {
    columns.emplace_back("SCOPED");
    columns.emplace_back("MANAGED-BY");
  }
  output::Table table(columns);
  for (const auto& v : list.items) {
    const std::string held = std::to_string(v.held_back.size());
    const Style held_style = v.held_back.empty() ? Style::plain : Style::warn;
    auto requested = [&](const std::string& r) {
      auto it = v.requested.find(r);
      return it == v.requested.end() ? std::int64_t{0} : it->second;
    };
    for (const auto& q : v.quotas) {
      for (const auto& r : q.resources) {
        std::vector<Cell> row = {v.namespace_name, q.name, resource_label(r)};
        if (!r.enforced) {
          row.insert(row.end(), {std::to_string(requested(r.resource)), std::to_string(r.hard), "-",
                                 Cell("NOT ENFORCED (" + r.key + ")", Style::bad)});
        } else if (!r.used) {
          row.insert(row.end(), {"?", std::to_string(r.hard), "?", Cell("not counted yet", Style::dim)});
        } else {
          row.insert(row.end(), {std::to_string(*r.used), std::to_string(r.hard), std::to_string(*r.free()),
                                 usage_bar(*r.used, r.hard)});
        }
        row.emplace_back(max_text(v, r.resource));
        row.emplace_back(held, held_style);
        if (wide) {
          row.emplace_back(q.scoped ? "yes" : "no");
          row.emplace_back(q.managed_by_gpuctl ? "gpuctl" : "-");
        }
        table.add_row(std::move(row));
      }
    }
    if (v.quotas.empty()) {
      std::map<std::string, std::int64_t> shown = v.requested;
      if (shown.empty()) shown[std::string(ops::kGpuResource)] = 0;
      for (const auto& [resource, n] : shown) {
        std::vector<Cell> row = {v.namespace_name,
                                 "<none>",
                                 short_resource(resource),
                                 std::to_string(n),
                                 "-",
                                 "-",
                                 Cell("no quota", Style::dim),
                                 max_text(v, resource),
                                 Cell(held, held_style)};
        if (wide) {
          row.emplace_back("-");
          row.emplace_back("-");
        }
        table.add_row(std::move(row));
      }
    }
  }
  std::string text = table.render({headers, color});
  std::vector<std::string> held_lines;
  for (const auto& v : list.items) {
    for (const auto& h : v.held_back) {
      std::string when = h.last_seen.empty() ? "" : ", last " + h.last_seen;
      held_lines.push_back(output::printable(fmt::format("  {} {}/{}: {} ({} time{}{})", v.namespace_name,
                                                         h.kind.empty() ? "object" : lower(h.kind), h.name, h.reason,
                                                         h.count, h.count == 1 ? "" : "s", when)));
    }
  }
  if (headers && !held_lines.empty())
    text += fmt::format("\nHeld back by admission:\n{}\n", fmt::join(held_lines, "\n"));
  return text;
}

}  // namespace gpuctl::cli
