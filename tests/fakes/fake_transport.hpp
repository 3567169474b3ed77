#pragma once
// A Transport that replays scripted answers and records what was sent. Each expectation
// matches a method and a URL path (and, optionally, a query substring); answers are consumed in
// order. A request nobody expected is answered 599 and recorded, so tests can assert on it.
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "gpuctl/kube/transport.hpp"

namespace gpuctl::testing {

struct FakeAnswer {
  int status = 200;
  std::string body;
  kube::Headers headers;
  // A transport-level failure instead of an HTTP answer.
  bool transport_error = false;
};

inline FakeAnswer json_answer(int status, std::string body, kube::Headers extra = {}) {
  extra.emplace_back("content-type", "application/json");
  return FakeAnswer{status, std::move(body), std::move(extra), false};
}

class FakeTransport : public kube::Transport {
 public:
  struct Expectation {
    std::string method;
    std::string path;            // exact path, without the query
    std::string query_contains;  // substring of the query, or "" for any
    std::deque<FakeAnswer> answers;
  };

  // Adds an answer for METHOD path; repeated calls queue more answers for the same route.
  FakeTransport& on(std::string method, std::string path, FakeAnswer answer, std::string query_contains = {}) {
    std::lock_guard guard(mutex_);
    for (auto& e : expectations_) {
      if (e.method == method && e.path == path && e.query_contains == query_contains) {
        e.answers.push_back(std::move(answer));
        return *this;
      }
    }
    expectations_.push_back({std::move(method), std::move(path), std::move(query_contains), {std::move(answer)}});
    return *this;
  }

  // A cluster without Dynamic Resource Allocation: the readers that look for resource.k8s.io/v1
  // (nodes, gpus, drain) are told 404, `times` times.
  FakeTransport& serves_no_dra(int times = 4) {
    for (int i = 0; i < times; ++i) {
      on("GET", "/apis/resource.k8s.io/v1", FakeAnswer{404, R"({"kind":"Status","code":404})", {}, false});
    }
    return *this;
  }

  Result<kube::HttpResponse> send(const kube::HttpRequest& request) override {
    std::lock_guard guard(mutex_);
    requests_.push_back(request);
    auto [path, query] = split(request.url);
    // Most specific first: the longest matching query filter wins (so "continue=t" beats "limit=500").
    Expectation* match = nullptr;
    for (auto& e : expectations_) {
      if (e.method != request.method || e.path != path || e.answers.empty()) continue;
      if (!e.query_contains.empty() && query.find(e.query_contains) == std::string::npos) continue;
      if (match == nullptr || match->query_contains.size() < e.query_contains.size()) match = &e;
    }
    if (match == nullptr) {
      unexpected_.push_back(request.method + " " + request.url);
      return response(599, {}, "unexpected request");
    }
    FakeAnswer answer = std::move(match->answers.front());
    match->answers.pop_front();
    if (answer.transport_error) {
      auto e = fail(Errc::transport, "connection reset by peer (fake)");
      e.error().transient = true;
      return e;
    }
    return response(answer.status, answer.headers, answer.body);
  }

  Result<kube::HttpResponse> send_streaming(const kube::HttpRequest& request,
                                            const kube::BodyChunkHandler& on_chunk) override {
    auto response = send(request);
    if (!response || response->status < 200 || response->status >= 300) return response;
    // Deliver the body line by line, as a watch would arrive.
    std::string body = std::move(response->body);
    response->body.clear();
    std::size_t start = 0;
    while (start < body.size()) {
      auto end = body.find('\n', start);
      end = end == std::string::npos ? body.size() : end + 1;
      if (!on_chunk(std::string_view(body).substr(start, end - start))) break;
      start = end;
    }
    return response;
  }

  const std::vector<kube::HttpRequest>& requests() const { return requests_; }
  const std::vector<std::string>& unexpected() const { return unexpected_; }
  std::size_t count(const std::string& method) const {
    std::size_t n = 0;
    for (const auto& r : requests_) n += r.method == method ? 1 : 0;
    return n;
  }

  static std::pair<std::string, std::string> split(const std::string& url) {
    auto scheme = url.find("://");
    auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    std::string rest = slash == std::string::npos ? "/" : url.substr(slash);
    auto q = rest.find('?');
    if (q == std::string::npos) return {rest, ""};
    return {rest.substr(0, q), rest.substr(q + 1)};
  }

 private:
  static kube::HttpResponse response(int status, kube::Headers headers, std::string body) {
    kube::HttpResponse r;
    r.status = status;
    r.headers = std::move(headers);
    r.body = std::move(body);
    r.protocol = "HTTP/2";
    return r;
  }

  std::mutex mutex_;
  std::vector<Expectation> expectations_;
  std::vector<kube::HttpRequest> requests_;
  std::vector<std::string> unexpected_;
};

}  // namespace gpuctl::testing
