#include "gpuctl/ops/common/schema.hpp"

namespace gpuctl::ops {

nlohmann::json schema_document(std::string_view kind, nlohmann::json fields) {
  fields["apiVersion"] = kSchemaApiVersion;
  fields["kind"] = kind;
  return fields;
}

}  // namespace gpuctl::ops
