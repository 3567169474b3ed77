// Paginated lists (limit/continue) that restart, or continue inconsistently, after 410 Expired,
// and end on a repeated continue token or after kMaxListPages pages.
#include "gpuctl/kube/client.hpp"

#include <iterator>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {

namespace {

using json = nlohmann::json;

// 10,000 pages of 500 are 5 million objects: far beyond any cluster, short of forever.
constexpr int kMaxListPages = 10000;

}  // namespace

Result<ListResult> Client::list(std::string_view path, const ListOptions& options) {
  ListResult result;
  ListPageSink sink;
  sink.on_items = [&](std::vector<json>& items) -> Result<void> {
    if (result.items.empty()) {
      result.items = std::move(items);
    } else {
      result.items.insert(result.items.end(), std::make_move_iterator(items.begin()),
                          std::make_move_iterator(items.end()));
    }
    return {};
  };
  sink.on_restart = [&] { result.items.clear(); };
  GPUCTL_TRY_ASSIGN(ListSummary summary, list_pages(path, options, sink));
  result.resource_version = std::move(summary.resource_version);
  result.pages = summary.pages;
  result.restarts = summary.restarts;
  return result;
}

Result<ListSummary> Client::list_pages(std::string_view path, const ListOptions& options, const ListPageSink& sink) {
  ListSummary result;
  const Projection page_fields = Projection::list_of(options.fields);
  std::string token;
  for (;;) {
    Query query;
    query.add_if(!options.label_selector.empty(), "labelSelector", options.label_selector);
    query.add_if(!options.field_selector.empty(), "fieldSelector", options.field_selector);
    query.add_if(options.limit > 0, "limit", std::to_string(options.limit));
    // resourceVersion must not accompany continue; the token pins the snapshot itself.
    query.add_if(options.from_cache && token.empty(), "resourceVersion", "0");
    query.add_if(!token.empty(), "continue", token);
    auto page = get_projected(path, query, page_fields);
    if (!page) {
      if (page.error().is_gone() && !token.empty()) {
        if (options.accept_inconsistent && !page.error().continue_token.empty()) {
          token = page.error().continue_token;
          continue;
        }
        if (result.restarts >= options.max_restarts) {
          return fail(
              page.error().with_context(fmt::format("listing {} expired {} times in a row (the cluster changes faster "
                                                    "than the list can be read); retry, or raise the page size",
                                                    path, result.restarts + 1)));
        }
        ++result.restarts;
        result.pages = 0;
        token.clear();
        if (sink.on_restart) sink.on_restart();
        continue;
      }
      return fail(page.error());
    }
    ++result.pages;
    auto items = page->find("items");
    if (items == page->end() || !items->is_array()) {
      return fail(
          Errc::parse,
          fmt::format(
              "GET {}: the API server's list answer has {} (expected an \"items\" array); a proxy in between may be "
              "broken",
              path, items == page->end() ? "no \"items\"" : fmt::format("\"items\" as a JSON {}", items->type_name())));
    }
    GPUCTL_TRY(sink.on_items(items->get_ref<json::array_t&>()));
    // string_field: a resourceVersion or continue token that is not a string reads as absent
    // (json::value() would throw type_error.302 on it).
    const json& metadata = field(*page, "metadata");
    result.resource_version = string_field(metadata, "resourceVersion");
    std::string next = string_field(metadata, "continue");
    if (next.empty() || options.limit <= 0) break;
    // A server whose continue token never changes would page forever.
    if (next == token) {
      return fail(
          Errc::api,
          fmt::format("GET {}: the API server sent the same continue token twice; the list would never end", path));
    }
    if (result.pages >= kMaxListPages) {
      return fail(
          Errc::api,
          fmt::format(
              "GET {}: the list did not end after {} pages (the limit); the API server keeps sending continue tokens",
              path, kMaxListPages));
    }
    token = std::move(next);
  }
  return result;
}

}  // namespace gpuctl::kube
