// What the API server (or a proxy before it) answers when a request fails: a Status body, plain
// text, or anything else, decoded into gpuctl's Error. The input is the body; a Retry-After value
// may follow a form feed. Invariant: every answer becomes an error with a message, never a throw.
#include "fuzz_support.hpp"
#include "gpuctl/kube/client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parts = gpuctl::fuzz::split_parts(gpuctl::fuzz::as_text(data, size), 2);
  for (int status : {403, 409, 410, 422, 429, 500, 503}) {
    gpuctl::kube::HttpResponse response;
    response.status = status;
    response.body = std::string(parts[0]);
    response.headers = {{"content-type", "application/json"}, {"retry-after", std::string(parts[1])}};
    gpuctl::Error error = gpuctl::kube::decode_api_error(response, "GET", "https://127.0.0.1:6443/api/v1/nodes/n");
    GPUCTL_FUZZ_CHECK(!error.message.empty(), parts[0]);
    GPUCTL_FUZZ_CHECK(error.http_status == status, parts[0]);
  }
  return 0;
}
