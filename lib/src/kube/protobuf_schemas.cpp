// The protobuf schemas gpuctl reads: the fields of k8s.io/api core/v1 and apimachinery's meta/v1
// and runtime types that its readers use, numbered as their generated.proto files number them
// (k8s.io/api and k8s.io/apimachinery at Kubernetes 1.36; field numbers never change once
// released). The JSON names and omitempty flags are the Go types' json tags.
#include "protobuf_internal.hpp"

namespace gpuctl::kube::proto {
namespace {

constexpr bool kAlways = false;  // a json tag without omitempty: an empty string is still sent

// resource.Quantity is a message {string string = 1}; in JSON, the string.
const Message& resource_claim() {
  static const Message m{
      "ResourceClaim", {{1, "name", Type::string, false, kAlways}, {2, "request", Type::string}}, true};
  return m;
}

const Message& resource_requirements() {
  static const Message m{"ResourceRequirements",
                         {{1, "limits", Type::quantity_map},
                          {2, "requests", Type::quantity_map},
                          {3, "claims", Type::message, true, true, &resource_claim()}},
                         true};
  return m;
}

const Message& container() {
  static const Message m{"Container",
                         {{1, "name", Type::string, false, kAlways},
                          {8, "resources", Type::message, false, true, &resource_requirements()},
                          {24, "restartPolicy", Type::string}}};
  return m;
}

const Message& object_meta() {
  static const Message m{"ObjectMeta",
                         {{1, "name", Type::string},
                          {3, "namespace", Type::string},
                          {5, "uid", Type::string},
                          {6, "resourceVersion", Type::string},
                          {11, "labels", Type::string_map},
                          {12, "annotations", Type::string_map}}};
  return m;
}

const Message& pod_spec() {
  static const Message m{"PodSpec",
                         {{2, "containers", Type::message, true, true, &container()},
                          {10, "nodeName", Type::string},
                          {20, "initContainers", Type::message, true, true, &container()},
                          {32, "overhead", Type::quantity_map}}};
  return m;
}

const Message& pod_status() {
  static const Message m{"PodStatus", {{1, "phase", Type::string}}};
  return m;
}

}  // namespace

const Message& pod() {
  static const Message m{"Pod",
                         {{1, "metadata", Type::message, false, true, &object_meta()},
                          {2, "spec", Type::message, false, true, &pod_spec()},
                          {3, "status", Type::message, false, true, &pod_status()}}};
  return m;
}

const Message& list_meta() {
  static const Message m{
      "ListMeta",
      {{2, "resourceVersion", Type::string}, {3, "continue", Type::string}, {4, "remainingItemCount", Type::integer}}};
  return m;
}

const Message& status() {
  static const Message cause{
      "StatusCause", {{1, "reason", Type::string}, {2, "message", Type::string}, {3, "field", Type::string}}, true};
  static const Message details{"StatusDetails",
                               {{1, "name", Type::string},
                                {2, "group", Type::string},
                                {3, "kind", Type::string},
                                {4, "causes", Type::message, true, true, &cause},
                                {5, "retryAfterSeconds", Type::integer},
                                {6, "uid", Type::string}},
                               true};
  static const Message m{"Status",
                         {{1, "metadata", Type::message, false, true, &list_meta()},
                          {2, "status", Type::string},
                          {3, "message", Type::string},
                          {4, "reason", Type::string},
                          {5, "details", Type::message, false, true, &details},
                          {6, "code", Type::integer}},
                         true};
  return m;
}

}  // namespace gpuctl::kube::proto
