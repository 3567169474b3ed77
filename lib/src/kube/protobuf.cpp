// The protobuf wire format, read by a schema into JSON (protobuf.hpp). Kubernetes wraps every
// object in an envelope: the four bytes "k8s\0", then a runtime.Unknown {typeMeta = 1, raw = 2,
// contentEncoding = 3, contentType = 4} whose raw bytes are the object itself.
#include "gpuctl/kube/protobuf.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuctl/util/nesting.hpp"
#include "gpuctl/util/utf8.hpp"
#include "protobuf_internal.hpp"

namespace gpuctl::kube::proto {

using json = nlohmann::json;

const Field* Message::by_number(std::uint32_t number) const {
  for (const auto& f : fields) {
    if (f.number == number) return &f;
  }
  return nullptr;
}

const Field* Message::by_name(std::string_view json_name) const {
  for (const auto& f : fields) {
    if (f.name == json_name) return &f;
  }
  return nullptr;
}

namespace {

using Node = Projection::Node;

enum Wire : std::uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// One message's bytes, read field by field; `base` is the offset of `data` in the whole body,
// for errors.
class Reader {
 public:
  Reader(std::string_view data, std::size_t base) : data_(data), base_(base) {}

  bool done() const { return pos_ >= data_.size(); }
  std::size_t offset() const { return base_ + pos_; }

  Result<std::uint64_t> varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return bad("a varint runs past the end");
      auto byte = static_cast<std::uint8_t>(data_[pos_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return bad("a varint is longer than 10 bytes");
  }

  // A length-delimited value and its offset in the body.
  Result<std::pair<std::string_view, std::size_t>> bytes() {
    GPUCTL_TRY_ASSIGN(std::uint64_t size, varint());
    if (size > data_.size() - pos_) return bad(fmt::format("a field of {} bytes runs past the end", size));
    std::pair<std::string_view, std::size_t> out{data_.substr(pos_, size), base_ + pos_};
    pos_ += size;
    return out;
  }

  Result<void> skip(std::uint32_t wire) {
    switch (wire) {
      case kVarint: {
        GPUCTL_TRY(varint());
        return {};
      }
      case kBytes: {
        GPUCTL_TRY(bytes());
        return {};
      }
      case kFixed64:
      case kFixed32: {
        std::size_t size = wire == kFixed64 ? 8 : 4;
        if (size > data_.size() - pos_) return bad("a fixed-size field runs past the end");
        pos_ += size;
        return {};
      }
      default: return bad(fmt::format("unknown wire type {}", wire));
    }
  }

  std::unexpected<Error> bad(std::string_view what) const {
    return fail(Errc::parse, fmt::format("malformed protobuf at byte {}: {}", offset(), what));
  }

 private:
  std::string_view data_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

struct Tag {
  std::uint32_t number;
  std::uint32_t wire;
};

Result<Tag> read_tag(Reader& in) {
  GPUCTL_TRY_ASSIGN(std::uint64_t tag, in.varint());
  if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return in.bad("a field number of 0 or out of range");
  return Tag{static_cast<std::uint32_t>(tag >> 3), static_cast<std::uint32_t>(tag & 7)};
}

// A protobuf string as JSON text: it must be UTF-8 (JSON cannot carry anything else, and
// nlohmann's dump() would throw on it).
Result<std::string> text_of(std::string_view bytes, std::size_t offset, std::string_view field) {
  std::size_t valid = util::valid_utf8_prefix(bytes);
  if (valid != bytes.size()) {
    return fail(Errc::parse,
                fmt::format("malformed protobuf at byte {}: {} is not valid UTF-8", offset + valid, field));
  }
  return std::string(bytes);
}

// A map entry {key = 1; value = 2}, the value a string or a resource.Quantity {string = 1}.
Result<std::pair<std::string, std::string>> read_map_entry(std::string_view bytes, std::size_t base, bool quantity) {
  Reader in(bytes, base);
  std::pair<std::string, std::string> entry;
  while (!in.done()) {
    GPUCTL_TRY_ASSIGN(Tag tag, read_tag(in));
    if ((tag.number == 1 || tag.number == 2) && tag.wire == kBytes) {
      GPUCTL_TRY_ASSIGN(auto value, in.bytes());
      if (tag.number == 1) {
        GPUCTL_TRY_ASSIGN(entry.first, text_of(value.first, value.second, "a map key"));
      } else if (!quantity) {
        GPUCTL_TRY_ASSIGN(entry.second, text_of(value.first, value.second, "a map value"));
      } else {
        GPUCTL_TRY_ASSIGN(auto inner, read_map_entry(value.first, value.second, false));
        entry.second = std::move(inner.first);  // Quantity's string is its field 1
      }
    } else {
      GPUCTL_TRY(in.skip(tag.wire));
    }
  }
  return entry;
}

Result<void> decode_message(std::string_view bytes, std::size_t base, const Message& schema, const Node* keep,
                            json& out, int depth);

// One field's value into `out[field.name]`; `keep` is what the projection keeps below it
// (nullptr: everything).
Result<void> decode_field(Reader& in, const Tag& tag, const Field& field, const Node* keep, json& out, int depth) {
  const bool varint_type = field.type == Type::integer || field.type == Type::boolean;
  if (tag.wire != (varint_type ? kVarint : kBytes)) {
    return in.bad(fmt::format("field {} ({}) has wire type {}", tag.number, field.name, tag.wire));
  }
  if (varint_type) {
    GPUCTL_TRY_ASSIGN(std::uint64_t v, in.varint());
    if (v == 0 && field.omit_empty && field.type == Type::integer) return {};
    json value = field.type == Type::boolean ? json(v != 0) : json(static_cast<std::int64_t>(v));
    if (field.repeated) {
      out[field.name].push_back(std::move(value));
    } else {
      out[field.name] = std::move(value);
    }
    return {};
  }
  GPUCTL_TRY_ASSIGN(auto value, in.bytes());
  switch (field.type) {
    case Type::string: {
      if (value.first.empty() && field.omit_empty && !field.repeated) return {};
      GPUCTL_TRY_ASSIGN(std::string text, text_of(value.first, value.second, field.name));
      if (field.repeated) {
        out[field.name].push_back(std::move(text));
      } else {
        out[field.name] = std::move(text);
      }
      return {};
    }
    case Type::quantity_map:
    case Type::string_map: {
      GPUCTL_TRY_ASSIGN(auto entry, read_map_entry(value.first, value.second, field.type == Type::quantity_map));
      out[field.name][entry.first] = std::move(entry.second);
      return {};
    }
    case Type::message: {
      json child = json::object();
      GPUCTL_TRY(decode_message(value.first, value.second, *field.message, keep, child, depth + 1));
      if (field.repeated) {
        out[field.name].push_back(std::move(child));
      } else {
        out[field.name] = std::move(child);
      }
      return {};
    }
    default: return in.bad("unexpected field type");
  }
}

Result<void> decode_message(std::string_view bytes, std::size_t base, const Message& schema, const Node* keep,
                            json& out, int depth) {
  Reader in(bytes, base);
  if (depth > util::kMaxNestingDepth) return in.bad("nested too deeply");
  while (!in.done()) {
    GPUCTL_TRY_ASSIGN(Tag tag, read_tag(in));
    const Field* field = schema.by_number(tag.number);
    const Node* child_keep = nullptr;
    if (field != nullptr && keep != nullptr) {
      auto it = keep->children.find(field->name);
      if (it == keep->children.end()) {
        field = nullptr;  // not kept: skipped
      } else if (!it->second.children.empty()) {
        child_keep = &it->second;
      }
    }
    if (field == nullptr) {
      GPUCTL_TRY(in.skip(tag.wire));
      continue;
    }
    GPUCTL_TRY(decode_field(in, tag, *field, child_keep, out, depth));
  }
  return {};
}

bool covers_node(const Message& message, const Node& keep) {
  for (const auto& [name, child] : keep.children) {
    const Field* field = message.by_name(name);
    if (field == nullptr) return false;
    // Below a scalar or a map ("metadata.labels.app") the JSON projection keeps part of the
    // value; protobuf would give all of it.
    if (field->type != Type::message) {
      if (!child.children.empty()) return false;
      continue;
    }
    if (child.children.empty() ? !field->message->complete : !covers_node(*field->message, child)) return false;
  }
  return true;
}

struct Envelope {
  std::string api_version;
  std::string kind;
  std::string_view raw;
  std::size_t raw_offset = 0;
};

// The "k8s\0" magic and the runtime.Unknown around the object.
Result<Envelope> open_envelope(std::string_view body) {
  static constexpr std::string_view kMagic{"k8s\0", 4};
  if (!body.starts_with(kMagic)) {
    return fail(Errc::parse, "the API server's protobuf answer lacks the \"k8s\\0\" prefix");
  }
  Envelope env;
  Reader in(body.substr(4), 4);
  bool has_raw = false;
  while (!in.done()) {
    GPUCTL_TRY_ASSIGN(Tag tag, read_tag(in));
    if (tag.wire != kBytes) {
      GPUCTL_TRY(in.skip(tag.wire));
      continue;
    }
    GPUCTL_TRY_ASSIGN(auto value, in.bytes());
    if (tag.number == 1) {
      json type_meta = json::object();
      static const Message kTypeMeta{"TypeMeta", {{1, "apiVersion", Type::string}, {2, "kind", Type::string}}, true};
      GPUCTL_TRY(decode_message(value.first, value.second, kTypeMeta, nullptr, type_meta, 0));
      env.api_version = type_meta.value("apiVersion", "");
      env.kind = type_meta.value("kind", "");
    } else if (tag.number == 2) {
      env.raw = value.first;
      env.raw_offset = value.second;
      has_raw = true;
    } else if (tag.number == 3 && !value.first.empty()) {
      GPUCTL_TRY_ASSIGN(std::string encoding, text_of(value.first, value.second, "contentEncoding"));
      return fail(Errc::parse, fmt::format("the API server's protobuf answer is encoded as \"{}\", which gpuctl does "
                                           "not read",
                                           encoding.substr(0, 40)));
    }
  }
  if (!has_raw) return fail(Errc::parse, "the API server's protobuf answer has no object in its envelope");
  return env;
}

}  // namespace

bool covers(const Message& message, const Projection& items) {
  return !items.keeps_everything() && covers_node(message, *items.root());
}

Result<json> decode_list(std::string_view body, const Message& item, const Projection& items) {
  GPUCTL_TRY_ASSIGN(Envelope env, open_envelope(body));
  json list = {
      {"apiVersion", env.api_version}, {"kind", env.kind}, {"metadata", json::object()}, {"items", json::array()}};
  const Node* keep = items.keeps_everything() ? nullptr : items.root();
  json& out_items = list["items"];
  Reader in(env.raw, env.raw_offset);
  while (!in.done()) {
    GPUCTL_TRY_ASSIGN(Tag tag, read_tag(in));
    if ((tag.number != 1 && tag.number != 2) || tag.wire != kBytes) {
      GPUCTL_TRY(in.skip(tag.wire));
      continue;
    }
    GPUCTL_TRY_ASSIGN(auto value, in.bytes());
    if (tag.number == 1) {
      GPUCTL_TRY(decode_message(value.first, value.second, list_meta(), nullptr, list["metadata"], 1));
    } else {
      json object = json::object();
      GPUCTL_TRY(decode_message(value.first, value.second, item, keep, object, 1));
      out_items.push_back(std::move(object));
    }
  }
  return list;
}

std::optional<std::string> peek_continue(std::string_view body) {
  auto env = open_envelope(body);
  if (!env) return std::nullopt;
  Reader in(env->raw, env->raw_offset);
  while (!in.done()) {
    auto tag = read_tag(in);
    if (!tag) return std::nullopt;
    if (tag->number != 1 || tag->wire != kBytes) {
      if (tag->number == 2 || !in.skip(tag->wire)) return std::nullopt;  // items before metadata
      continue;
    }
    auto value = in.bytes();
    if (!value) return std::nullopt;
    json metadata = json::object();
    if (!decode_message(value->first, value->second, list_meta(), nullptr, metadata, 1)) return std::nullopt;
    return metadata.value("continue", "");
  }
  return std::nullopt;
}

Result<std::string> status_as_json(std::string_view body) {
  GPUCTL_TRY_ASSIGN(Envelope env, open_envelope(body));
  json out = {{"apiVersion", env.api_version}, {"kind", env.kind}};
  GPUCTL_TRY(decode_message(env.raw, env.raw_offset, status(), nullptr, out, 1));
  return out.dump();
}

}  // namespace gpuctl::kube::proto
