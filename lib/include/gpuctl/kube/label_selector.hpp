#pragma once
// Label selectors as kubectl writes them (`app=trainer,tier!=web,zone in (a,b),!spot,gpu`), turned
// into the metav1.LabelSelector object that affinities and PDBs carry.
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

// {"matchLabels": {...}, "matchExpressions": [...]}: `k=v` and `k==v` go to matchLabels; `k!=v`
// is NotIn [v]; `k in (..)`, `k notin (..)`, `k` (Exists) and `!k` (DoesNotExist) are
// expressions. Errors are invalid_argument naming the selector and the bad part.
Result<nlohmann::json> parse_label_selector(std::string_view text);

}  // namespace gpuctl::kube
