// Watches (one JSON event per line; an ERROR event becomes an Error) and streamed text bodies.
#include "gpuctl/kube/client.hpp"

#include <fmt/format.h>

#include "gpuctl/kube/objects.hpp"

namespace gpuctl::kube {

namespace {
using json = nlohmann::json;
}  // namespace

Result<void> Client::watch(std::string_view path, const WatchOptions& options,
                           const std::function<bool(const WatchEvent&)>& on_event) {
  Query query;
  query.add("watch", "1");
  query.add_if(!options.label_selector.empty(), "labelSelector", options.label_selector);
  query.add_if(!options.field_selector.empty(), "fieldSelector", options.field_selector);
  query.add_if(!options.resource_version.empty(), "resourceVersion", options.resource_version);
  query.add_if(options.allow_bookmarks, "allowWatchBookmarks", "true");
  query.add_if(options.timeout_seconds > 0, "timeoutSeconds", std::to_string(options.timeout_seconds));
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("WATCH", path, query));
  // The server ends the watch after timeoutSeconds; give it room before we give up ourselves.
  req.timeout =
      options.timeout_seconds > 0 ? std::chrono::seconds(options.timeout_seconds + 30) : std::chrono::milliseconds(0);

  std::string buffer;
  std::optional<Error> watch_error;
  bool stopped = false;
  BodyChunkHandler handler = [&](std::string_view chunk) {
    buffer.append(chunk);
    std::size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      if (line.empty()) continue;
      auto event = json::parse(line, nullptr, false);
      if (!event.is_object()) {
        watch_error =
            fail(Errc::parse, fmt::format("watch {}: the API server sent an event that is not JSON", path)).error();
        return false;
      }
      WatchEvent ev{string_field(event, "type"), event.value("object", json::object())};
      if (ev.type == "ERROR") {
        HttpResponse fake;
        const json& code = field(ev.object, "code");
        fake.status = code.is_number_integer() && code >= 100 && code <= 599 ? code.get<int>() : 500;
        fake.headers.emplace_back("content-type", "application/json");
        fake.body = ev.object.dump();
        watch_error = decode_api_error(fake, "WATCH", req.url);
        return false;
      }
      if (!on_event(ev)) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  auto resp = send_impl(std::move(req), &handler);
  if (watch_error) return fail(*watch_error);
  if (!resp) {
    if (stopped) return {};
    return fail(resp.error());
  }
  return {};
}

Result<void> Client::stream_text(std::string_view path, const Query& query,
                                 const std::function<bool(std::string_view)>& on_chunk) {
  HttpRequest req;
  req.method = "GET";
  GPUCTL_TRY_ASSIGN(req.url, url_for("GET", path, query));
  req.timeout = std::chrono::milliseconds(0);
  BodyChunkHandler handler = [&](std::string_view chunk) { return on_chunk(chunk); };
  GPUCTL_TRY(send_impl(std::move(req), &handler));
  return {};
}

}  // namespace gpuctl::kube
