#pragma once
// Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf), read into the JSON the API
// server would have sent for the same object, for the fields a schema names. For large lists it
// is the cheaper answer at both ends: at 1,000 nodes the pods a `gpuctl nodes` reads are 108 MB
// of JSON and 78 MB of protobuf, and the API server sends them about twice as fast (issue 14).
// Only what a reader reads needs a schema: the fields of a type gpuctl decodes, numbered as in
// k8s.io/api's generated.proto; everything else on the wire is skipped by its wire type.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/projection.hpp"

namespace gpuctl::kube::proto {

// The media type gpuctl asks for, with JSON as the fallback (custom resources and aggregated
// APIs have no protobuf); the answer's Content-Type says which one came.
inline constexpr std::string_view kMediaType = "application/vnd.kubernetes.protobuf";
inline constexpr std::string_view kAcceptProtobufOrJson = "application/vnd.kubernetes.protobuf, application/json";

enum class Type {
  string,        // proto string; JSON string
  integer,       // varint int32/int64; JSON number
  boolean,       // varint bool; JSON true/false
  message,       // a nested message (Field::message); JSON object
  quantity_map,  // map<string, resource.Quantity>; JSON object of quantity strings
  string_map,    // map<string, string>; JSON object of strings
};

struct Message;

struct Field {
  std::uint32_t number = 0;  // as generated.proto numbers it
  std::string_view name;     // the JSON name
  Type type = Type::string;
  bool repeated = false;             // a JSON array
  bool omit_empty = true;            // the JSON tag's omitempty: an empty string is left out, as JSON leaves it
  const Message* message = nullptr;  // Type::message
};

struct Message {
  std::string_view name;  // the Go type, for errors
  std::vector<Field> fields;
  // Every field the type has is listed, so a projection may keep the whole message; on an
  // incomplete one only the listed fields can be kept (covers() says which projections fit).
  bool complete = false;

  const Field* by_number(std::uint32_t number) const;
  const Field* by_name(std::string_view json_name) const;
};

// The Pod fields gpuctl's readers take from protobuf: metadata name and namespace, the
// containers' and init containers' names, restart policies and resources, nodeName, overhead
// and status.phase.
const Message& pod();

// Whether every field `items` keeps can be read through `message` (a projection that keeps
// everything never can: the schemas are partial). A reader whose projection is not covered gets
// JSON, never a silently thinner object.
bool covers(const Message& message, const Projection& items);

// A list answer in protobuf: the JSON object {"apiVersion", "kind", "metadata": {resourceVersion,
// continue, remainingItemCount}, "items": [...]} with each item decoded through `item`, keeping
// what `items` keeps. Errc::parse, naming the byte offset, on anything malformed.
Result<nlohmann::json> decode_list(std::string_view body, const Message& item, const Projection& items);

// The continue token of a protobuf list answer, read from its metadata without decoding the
// items (empty: the last page); nullopt when the body is not a protobuf list.
std::optional<std::string> peek_continue(std::string_view body);

// A metav1.Status sent in protobuf (an error answer to a protobuf request), as its JSON text.
Result<std::string> status_as_json(std::string_view body);

}  // namespace gpuctl::kube::proto
