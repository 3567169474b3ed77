// Protobuf answers of the API server (kube/protobuf.hpp): any bytes may arrive where a list or a
// Status is expected (a proxy, a truncated body, a newer server). Invariants: decoding never
// crashes and fails with a message; a decoded list is a JSON object with metadata and an items
// array, whose pods the node inventory's readers accept or reject as they would any JSON; a
// Status decodes to valid JSON text. (The continue token peeked may differ from the decoded one
// when metadata comes twice: list_pages then drops its prefetch.)
#include "fuzz_support.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace proto = gpuctl::kube::proto;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto page = proto::decode_list(body, proto::pod(), gpuctl::ops::inventory_pod_fields());
  if (!page) {
    GPUCTL_FUZZ_CHECK(!page.error().message.empty(), std::string(body));
  } else {
    GPUCTL_FUZZ_CHECK(page->is_object() && (*page)["items"].is_array() && (*page)["metadata"].is_object(),
                      std::string(body));
    (void)gpuctl::ops::build_node_inventory({}, (*page)["items"].get<std::vector<nlohmann::json>>(), true, {});
    (void)page->dump();
  }
  (void)proto::peek_continue(body);
  if (auto status = proto::status_as_json(body)) {
    GPUCTL_FUZZ_CHECK(nlohmann::json::accept(*status), *status);
  }
  return 0;
}
