// A SAX handler for nlohmann's parser that builds the DOM of the projected fields only: values
// outside the projection are counted through (their depth tracked) and never allocated.
#include "gpuctl/kube/projection.hpp"

#include <fmt/format.h>

#include "gpuctl/util/nesting.hpp"

namespace gpuctl::kube {

using json = nlohmann::json;

Projection::Projection(std::initializer_list<std::string_view> paths) {
  for (auto p : paths) add(p);
}

Projection::Projection(const std::vector<std::string>& paths) {
  for (const auto& p : paths) add(p);
}

Projection::Projection(const std::vector<FieldShape>& shapes, std::initializer_list<std::string_view> more) {
  // A shape table names a parent ("spec", an object) before the fields read below it; only the
  // leaves are kept whole, or "spec" would keep every field of the spec.
  auto has_children = [&](const std::string& path) {
    for (const auto& other : shapes) {
      std::string_view rest = other.path;
      if (rest.size() > path.size() && rest.starts_with(path) && (rest[path.size()] == '.' || rest[path.size()] == '['))
        return true;
    }
    return false;
  };
  for (const auto& s : shapes) {
    if (!has_children(s.path)) add(s.path);
  }
  for (auto p : more) add(p);
}

void Projection::add(std::string_view path) {
  if (!root_) root_ = std::make_shared<Node>();
  Node* node = root_.get();
  bool extended = false;  // whether this path reaches below a node that already kept everything
  while (!path.empty()) {
    std::size_t dot = path.find('.');
    std::string_view step = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
    if (step.ends_with("[]")) step.remove_suffix(2);
    if (step.empty()) continue;
    // A node without children keeps its whole subtree: "metadata" then "metadata.name" must
    // not narrow "metadata" down to its name.
    if (node != root_.get() && node->children.empty() && !extended) return;
    auto [it, inserted] = node->children.try_emplace(std::string(step));
    extended = inserted;
    node = &it->second;
  }
  // "a.b" after "a.b.c": a.b is kept whole.
  if (!extended) node->children.clear();
}

Projection Projection::list_of(const Projection& items) {
  Projection list;
  list.root_ = std::make_shared<Node>();
  list.root_->children["metadata"];
  if (items.root_) {
    list.root_->children["items"] = *items.root_;
  } else {
    list.root_->children["items"];
  }
  return list;
}

namespace {

using Node = Projection::Node;

class ProjectingSax {
 public:
  explicit ProjectingSax(const Node* root) : root_(root) {}

  json result;
  std::string error;

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(std::move(v)); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    if (skipping_ > 0) return true;
    const Frame& top = stack_.back();
    if (keeps_all(top.fields)) {
      next_fields_ = nullptr;
    } else if (auto it = top.fields->children.find(k); it != top.fields->children.end()) {
      next_fields_ = &it->second;
    } else {
      drop_next_ = true;
      return true;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 7: ...";
    // the part after the id is what a person needs.
    std::string_view what = e.what();
    if (auto close = what.find("] "); close != std::string_view::npos) what.remove_prefix(close + 2);
    error = fmt::format("{} (byte {})", what, position);
    return false;
  }

 private:
  struct Frame {
    json* value;
    const Node* fields;  // nullptr or childless: keep everything below
  };

  static bool keeps_all(const Node* fields) { return fields == nullptr || fields->children.empty(); }

  // Where the next value goes and which fields of it to keep; nullptr when it is dropped.
  json* slot(const Node*& fields) {
    if (stack_.empty()) {
      fields = root_;
      return &result;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      fields = top.fields;  // arrays are looked through
      top.value->push_back(nullptr);
      return &top.value->back();
    }
    if (drop_next_) {
      drop_next_ = false;
      return nullptr;
    }
    fields = next_fields_;
    return &(*top.value)[key_];
  }

  template <typename T>
  bool put(T&& v) {
    if (skipping_ > 0) return true;
    const Node* fields = nullptr;
    if (json* at = slot(fields)) *at = std::forward<T>(v);
    return true;
  }

  bool open(json::value_t type) {
    if (skipping_ > 0) {
      ++skipping_;
      return true;
    }
    const Node* fields = nullptr;
    json* at = slot(fields);
    if (at == nullptr) {
      skipping_ = 1;
      return true;
    }
    if (stack_.size() >= static_cast<std::size_t>(util::kMaxNestingDepth)) {
      error = fmt::format("nested deeper than {} levels", util::kMaxNestingDepth);
      return false;
    }
    *at = json(type);
    stack_.push_back({at, fields});
    return true;
  }

  bool close() {
    if (skipping_ > 0) {
      --skipping_;
    } else {
      stack_.pop_back();
    }
    return true;
  }

  const Node* root_;
  std::vector<Frame> stack_;
  int skipping_ = 0;  // >0: inside a dropped object or array, this many levels deep
  bool drop_next_ = false;
  const Node* next_fields_ = nullptr;
  std::string key_;
};

}  // namespace

Result<json> parse_projected(std::string_view text, const Projection& projection) {
  ProjectingSax sax(projection.root());
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const std::exception& e) {  // allocation failures; the parser itself reports through sax
    sax.error = e.what();
  }
  if (!ok) return fail(Errc::parse, sax.error.empty() ? std::string("not valid JSON") : sax.error);
  return std::move(sax.result);
}

}  // namespace gpuctl::kube
