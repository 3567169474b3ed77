// Kubernetes' protobuf encoding read into JSON (kube/protobuf.hpp), against answers a real
// kube-apiserver gave to the same request in both encodings (tests/data/protobuf/README.md).
#include <catch2/catch.hpp>

#include "fakes/fixtures.hpp"
#include "fakes/test_support.hpp"
#include "gpuctl/kube/projection.hpp"
#include "gpuctl/kube/protobuf.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"

using gpuctl::Errc;
using gpuctl::kube::parse_projected;
using gpuctl::kube::Projection;
using gpuctl::testing::FakeAnswer;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;
using gpuctl::testing::test_data;
namespace proto = gpuctl::kube::proto;
using nlohmann::json;

namespace {

FakeAnswer protobuf_answer(int status, std::string body) {
  return FakeAnswer{status, std::move(body), {{"content-type", "application/vnd.kubernetes.protobuf"}}, false};
}

// The JSON answer decoded as list_pages decodes JSON: through the items' projection.
json projected_json(const std::string& name, const Projection& items) {
  auto page = parse_projected(test_data("protobuf/" + name + ".json"), Projection::list_of(items));
  REQUIRE(page);
  return *page;
}

json decoded_protobuf(const std::string& name, const Projection& items) {
  auto page = proto::decode_list(test_data("protobuf/" + name + ".pb"), proto::pod(), items);
  INFO((page ? std::string() : page.error().message));
  REQUIRE(page);
  return *page;
}

}  // namespace

TEST_CASE("protobuf: a real pod list decodes to the items and metadata its JSON twin projects to", "[protobuf]") {
  const Projection inventory = gpuctl::ops::inventory_pod_fields();
  const Projection identity{"metadata.name",        "metadata.namespace", "metadata.uid", "metadata.labels",
                            "metadata.annotations", "spec.nodeName",      "status.phase"};
  for (const char* name : {"pods-team", "pods-sidecar"}) {
    for (const Projection* items : {&inventory, &identity}) {
      INFO(name << (items == &inventory ? " through the inventory's fields" : " through identity fields"));
      json from_json = projected_json(name, *items);
      json from_protobuf = decoded_protobuf(name, *items);
      REQUIRE(from_json["items"].size() > 0);
      CHECK(from_protobuf["items"] == from_json["items"]);
      CHECK(from_protobuf["metadata"] == from_json["metadata"]);
      CHECK(from_protobuf["kind"] == "PodList");
      CHECK(from_protobuf["apiVersion"] == "v1");
    }
  }
  // What the sidecar pod exercises: a sidecar's restartPolicy, GPU limits on an init container,
  // and a container without resources (an empty object, as JSON has it).
  json sidecar = decoded_protobuf("pods-sidecar", inventory)["items"][0]["spec"];
  CHECK(sidecar["initContainers"][0]["restartPolicy"] == "Always");
  CHECK(sidecar["initContainers"][1]["resources"]["limits"]["nvidia.com/gpu"] == "2");
  CHECK(sidecar["containers"][1]["resources"] == json::object());
}

TEST_CASE("protobuf: a schema covers only projections whose every field it knows", "[protobuf]") {
  CHECK(proto::covers(proto::pod(), gpuctl::ops::inventory_pod_fields()));
  CHECK(proto::covers(proto::pod(), Projection{"spec.containers[].resources"}));  // ResourceRequirements is complete
  CHECK_FALSE(proto::covers(proto::pod(), Projection{}));                         // everything
  CHECK_FALSE(proto::covers(proto::pod(), Projection{"spec"}));                   // PodSpec is partial
  CHECK_FALSE(proto::covers(proto::pod(), Projection{"spec.volumes"}));
  CHECK_FALSE(proto::covers(proto::pod(), Projection{"metadata.name", "status.conditions"}));
  CHECK_FALSE(proto::covers(proto::pod(), Projection{"metadata.labels.app"}));  // one label of a map
}

TEST_CASE("protobuf: the continue token is read from the metadata alone", "[protobuf]") {
  json metadata = json::parse(test_data("protobuf/pods-team.json"))["metadata"];
  REQUIRE(metadata["continue"].get<std::string>().size() > 10);
  CHECK(proto::peek_continue(test_data("protobuf/pods-team.pb")) == metadata["continue"].get<std::string>());
  CHECK(proto::peek_continue(test_data("protobuf/pods-sidecar.pb")) == std::string());  // the last page
  CHECK_FALSE(proto::peek_continue(test_data("protobuf/pods-team.json")));              // not protobuf
}

TEST_CASE("protobuf: a Status reads as the JSON Status the server sends to JSON requests", "[protobuf]") {
  auto text = proto::status_as_json(test_data("protobuf/status404.pb"));
  REQUIRE(text);
  CHECK(json::parse(*text) == json::parse(test_data("protobuf/status404.json")));

  // Through the client: a list asked for in protobuf fails with the server's own words.
  FakeClient fc;
  fc.fake->on("GET", "/api/v1/pods", protobuf_answer(404, test_data("protobuf/status404.pb")));
  gpuctl::kube::ListOptions options;
  options.fields = gpuctl::ops::inventory_pod_fields();
  options.protobuf = &proto::pod();
  auto list = fc.client->list("/api/v1/pods", options);
  REQUIRE_FALSE(list);
  CHECK(list.error().code == Errc::api);
  CHECK(list.error().reason == "NotFound");
  CHECK(list.error().message.find("pods \"no-such-pod\" not found") != std::string::npos);
}

TEST_CASE("protobuf: list_pages asks for protobuf where the schema covers the reader, and reads either answer",
          "[protobuf]") {
  auto accept_of = [](const gpuctl::kube::HttpRequest& r) {
    for (const auto& [name, value] : r.headers) {
      if (name == "Accept") return value;
    }
    return std::string();
  };
  const std::string token = json::parse(test_data("protobuf/pods-team.json"))["metadata"]["continue"];
  FakeClient fc;
  // The first page in protobuf (its continue token peeked for the prefetch), the second in
  // JSON, as a server answers where it has no protobuf.
  fc.fake->on("GET", "/api/v1/pods", protobuf_answer(200, test_data("protobuf/pods-team.pb")), "limit=500")
      .on("GET", "/api/v1/pods", json_answer(200, test_data("protobuf/pods-sidecar.json")), "continue=" + token);
  gpuctl::kube::ListOptions options;
  options.fields = gpuctl::ops::inventory_pod_fields();
  options.protobuf = &proto::pod();
  auto list = fc.client->list("/api/v1/pods", options);
  REQUIRE(list);
  CHECK(fc.fake->unexpected().empty());
  std::vector<std::string> names;
  for (const auto& pod : list->items) names.push_back(pod["metadata"]["name"]);
  CHECK(names == std::vector<std::string>{"train-1008-w8-00c24", "train-1017-w7-00c42", "train-1026-w6-00c60",
                                          "fixture-sidecar"});
  REQUIRE(fc.fake->requests().size() == 2);
  CHECK(accept_of(fc.fake->requests()[0]) == std::string(proto::kAcceptProtobufOrJson));

  // A reader whose fields the schema does not cover is asked for in JSON.
  FakeClient plain;
  plain.fake->on("GET", "/api/v1/pods", json_answer(200, test_data("protobuf/pods-sidecar.json")));
  options.fields = Projection{"spec.volumes"};
  REQUIRE(plain.client->list("/api/v1/pods", options));
  REQUIRE(plain.fake->requests().size() == 1);
  CHECK(accept_of(plain.fake->requests()[0]) == "application/json");
}

TEST_CASE("protobuf: malformed answers are errors that say where, never a crash", "[protobuf]") {
  const std::string body = test_data("protobuf/pods-team.pb");
  const Projection inventory = gpuctl::ops::inventory_pod_fields();
  // Every cut short of the whole: an error (a field running past its end), or a shorter list
  // where the cut falls between fields; never a crash.
  int errors = 0;
  for (std::size_t n = 0; n < body.size(); n += 7) {
    auto page = proto::decode_list(std::string_view(body).substr(0, n), proto::pod(), inventory);
    if (!page) {
      ++errors;
      CHECK(page.error().code == Errc::parse);
    }
  }
  CHECK(errors > 0);

  auto no_magic = proto::decode_list(body.substr(4), proto::pod(), inventory);
  REQUIRE_FALSE(no_magic);
  CHECK(no_magic.error().message.find("\"k8s\\0\" prefix") != std::string::npos);

  // A pod whose metadata (field 1) arrives as a varint: the wrong wire type for a message.
  std::string raw = std::string("\x12\x02\x08\x01", 4);  // items (2): a Pod of 2 bytes: field 1, varint 1
  std::string envelope = std::string("k8s\0", 4) + "\x12" + static_cast<char>(raw.size()) + raw;
  auto wrong = proto::decode_list(envelope, proto::pod(), inventory);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("wire type") != std::string::npos);
  CHECK(wrong.error().message.find("byte") != std::string::npos);
}
