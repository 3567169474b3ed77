// Paginated lists (limit/continue) that restart, or continue inconsistently, after 410 Expired,
// and end on a repeated continue token or after kMaxListPages pages.
#include "gpuctl/kube/client.hpp"

#include <future>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/protobuf.hpp"

namespace gpuctl::kube {

namespace {

using json = nlohmann::json;

// 10,000 pages of 500 are 5 million objects: far beyond any cluster, short of forever.
constexpr int kMaxListPages = 10000;

// Reads a list answer's continue token from its metadata, stopping at "items": the API server
// writes metadata first, so this scans a few hundred bytes, and the next page can be fetched
// while this one decodes. nullopt when the items come first or the text is malformed (then the
// pages are read one after another).
class ContinuePeek {
 public:
  std::optional<std::string> token;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool string(json::string_t& v) {
    if (in_continue_) token = std::move(v);
    in_continue_ = false;
    return true;
  }
  bool start_object(std::size_t) { return open(); }
  bool start_array(std::size_t) { return open(); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    in_continue_ = false;
    if (depth_ == 1) {
      if (k == "items") return false;  // done: what metadata said is all there is
      next_is_metadata_ = k == "metadata";
    } else if (depth_ == 2 && in_metadata_) {
      in_continue_ = k == "continue";
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    token.reset();
    return false;
  }

 private:
  bool open() {
    ++depth_;
    if (depth_ == 2 && next_is_metadata_) {
      in_metadata_ = true;
      token = "";  // metadata seen: no continue in it means no next page
    }
    next_is_metadata_ = false;
    in_continue_ = false;
    return true;
  }
  bool close() {
    if (depth_ == 2) in_metadata_ = false;
    --depth_;
    return true;
  }
  int depth_ = 0;
  bool next_is_metadata_ = false;
  bool in_metadata_ = false;
  bool in_continue_ = false;
};

bool is_protobuf(const HttpResponse& response) {
  return response.header("content-type").starts_with(proto::kMediaType);
}

std::optional<std::string> peek_continue(const HttpResponse& response) {
  if (is_protobuf(response)) return proto::peek_continue(response.body);
  ContinuePeek peek;
  json::sax_parse(response.body.begin(), response.body.end(), &peek);
  return peek.token;
}

// How one page is asked for and decoded: in protobuf where the reader's schema covers its
// fields (the server may still answer JSON), else JSON through the projection.
struct PageCodec {
  const ListOptions& options;
  Projection page_fields = Projection::list_of(options.fields);
  bool protobuf =
      !options.metadata_only && options.protobuf != nullptr && proto::covers(*options.protobuf, options.fields);

  std::string_view accept() const {
    if (options.metadata_only)
      return "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    return protobuf ? proto::kAcceptProtobufOrJson : std::string_view{};
  }
  Result<json> decode(const HttpResponse& response, std::string_view path) const {
    if (protobuf && is_protobuf(response)) {
      auto page = proto::decode_list(response.body, *options.protobuf, options.fields);
      if (!page) return fail(page.error().with_context(fmt::format("GET {}", path)));
      return page;
    }
    return decode_object(response, path, page_fields);
  }
};

Query page_query(const ListOptions& options, const std::string& token) {
  Query query;
  query.add_if(!options.label_selector.empty(), "labelSelector", options.label_selector);
  query.add_if(!options.field_selector.empty(), "fieldSelector", options.field_selector);
  query.add_if(options.limit > 0, "limit", std::to_string(options.limit));
  // resourceVersion must not accompany continue; the token pins the snapshot itself.
  query.add_if(options.from_cache && token.empty(), "resourceVersion", "0");
  query.add_if(!token.empty(), "continue", token);
  return query;
}

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
  GPUCTL_TRY_ASSIGN(static_cast<ListSummary&>(result), list_pages(path, options, sink));
  return result;
}

Result<ListSummary> Client::list_pages(std::string_view path, const ListOptions& options, const ListPageSink& sink) {
  ListSummary result;
  const PageCodec codec{options};
  std::string token;
  // The next page, fetched on another thread while this one decodes (pipelined, as curl and
  // kubectl are not: their pages wait for the decode in between).
  std::future<Result<HttpResponse>> ahead;
  std::string ahead_token;
  for (;;) {
    // A prefetch has always finished here (waited for below); one for another token (the
    // decoded metadata disagreed with the peek) is dropped.
    Result<HttpResponse> raw =
        ahead.valid() && ahead_token == token ? ahead.get() : fetch(path, page_query(options, token), codec.accept());
    ahead = {};
    if (raw && options.limit > 0) {
      if (auto next = peek_continue(*raw); next && !next->empty() && *next != token) {
        ahead_token = *next;
        ahead = std::async(std::launch::async,
                           [this, &codec, where = std::string(path), query = page_query(options, *next)] {
                             return fetch(where, query, codec.accept());
                           });
      }
    }
    Result<json> page = raw ? codec.decode(*raw, path) : fail(raw.error());
    // The sink and the rest of this loop may use the client: never while a prefetch does.
    if (ahead.valid()) ahead.wait();
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
