#include "gpuctl/ops/common/schema.hpp"

namespace gpuctl::ops {

nlohmann::json schema_document(std::string_view kind, nlohmann::json fields) {
  nlohmann::json doc = nlohmann::json::object();
  doc["apiVersion"] = kSchemaApiVersion;
  doc["kind"] = kind;
  if (fields.is_object()) {
    for (auto& [key, value] : fields.items()) doc[key] = std::move(value);
  }
  return doc;
}

}  // namespace gpuctl::ops
