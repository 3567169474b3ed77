// Tree readers for `nvidia-smi -q -x` (pugixml, private to the library) and `nvidia-smi -q` text.
#include <charconv>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "gpu/util.hpp"
#include "gpuctl/gpu/nvidia_smi.hpp"
#include "gpuctl/util/nesting.hpp"

namespace gpuctl::gpu {

using detail::trim;

const NvsmiNode* NvsmiNode::child(std::string_view k) const {
  for (const auto& c : children) {
    if (c.key == k) return &c;
  }
  return nullptr;
}

const NvsmiNode* NvsmiNode::find(std::string_view path) const {
  const NvsmiNode* cur = this;
  while (cur != nullptr && !path.empty()) {
    std::size_t slash = path.find('/');
    cur = cur->child(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
  }
  return cur;
}

std::vector<const NvsmiNode*> NvsmiNode::children_named(std::string_view k) const {
  std::vector<const NvsmiNode*> out;
  for (const auto& c : children) {
    if (c.key == k) out.push_back(&c);
  }
  return out;
}

namespace {

// Whether an element under `root` (root counting as level 1) nests deeper than `limit`, by an
// iterative walk: pugixml parses without recursion, but from_xml and every walk of the tree
// after it recurse once per level.
bool nests_deeper_than(const pugi::xml_node& root, int limit) {
  pugi::xml_node n = root;
  int depth = 1;
  for (;;) {
    if (n.type() == pugi::node_element && depth > limit) return true;
    if (pugi::xml_node child = n.first_child()) {
      n = child;
      ++depth;
      continue;
    }
    while (n != root && !n.next_sibling()) {
      n = n.parent();
      --depth;
    }
    if (n == root) return false;
    n = n.next_sibling();
  }
}

// Recursive, so only for trees nests_deeper_than has measured.
NvsmiNode from_xml(const pugi::xml_node& node) {
  NvsmiNode out;
  out.key = node.name();
  std::string text;
  for (pugi::xml_attribute a : node.attributes()) {
    out.children.push_back(NvsmiNode{std::string("@") + a.name(), std::string(trim(a.value())), {}});
  }
  for (pugi::xml_node c : node.children()) {
    if (c.type() == pugi::node_element) {
      out.children.push_back(from_xml(c));
    } else if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
      text += c.value();
    }
  }
  out.value = std::string(trim(text));
  return out;
}

int schema_version_of(std::string_view prolog) {
  constexpr std::string_view kDtd = "nvsmi_device_v";
  std::size_t p = prolog.find(kDtd);
  if (p == std::string_view::npos) return 0;
  int v = 0;
  const char* begin = prolog.data() + p + kDtd.size();
  std::from_chars(begin, prolog.data() + prolog.size(), v);
  return v;
}

void append_outside(std::string& out, std::string_view text) {
  for (std::string_view line : detail::split_lines(text)) {
    line = trim(line);
    if (line.empty()) continue;
    if (!out.empty()) out.push_back('\n');
    out.append(line);
  }
}

}  // namespace

Result<XmlTree> parse_nvidia_smi_xml_tree(std::string_view xml) {
  constexpr std::string_view kOpen = "<nvidia_smi_log";
  constexpr std::string_view kClose = "</nvidia_smi_log>";
  std::size_t root = xml.find(kOpen);
  if (root == std::string_view::npos) {
    return fail(Errc::parse, "nvidia-smi -q -x output has no <nvidia_smi_log> document");
  }
  // The document starts at the XML declaration when there is one before the root element.
  std::size_t start = root;
  if (std::size_t decl = xml.rfind("<?xml", root); decl != std::string_view::npos) start = decl;
  std::size_t close = xml.rfind(kClose);
  if (close == std::string_view::npos || close < root) {
    return fail(Errc::parse, "nvidia-smi -q -x output ends before </nvidia_smi_log> (the output was cut off)");
  }
  std::size_t end = close + kClose.size();
  std::string_view doc_text = xml.substr(start, end - start);

  pugi::xml_document doc;
  pugi::xml_parse_result res =
      doc.load_buffer(doc_text.data(), doc_text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!res) {
    return fail(Errc::parse, fmt::format("nvidia-smi -q -x output is not well-formed XML: {} at byte {}",
                                         res.description(), start + static_cast<std::size_t>(res.offset)));
  }
  pugi::xml_node log = doc.child("nvidia_smi_log");
  if (!log) return fail(Errc::parse, "nvidia-smi -q -x output has no <nvidia_smi_log> element");

  if (nests_deeper_than(log, util::kMaxNestingDepth)) {
    return fail(Errc::parse, fmt::format("nvidia-smi -q -x output nests deeper than {} levels (malformed); "
                                         "refusing to read it",
                                         util::kMaxNestingDepth));
  }
  XmlTree tree;
  tree.root = from_xml(log);
  tree.schema_version = schema_version_of(xml.substr(0, root));
  append_outside(tree.outside_text, xml.substr(0, start));
  append_outside(tree.outside_text, xml.substr(end));
  return tree;
}

namespace {

struct FlatLine {
  std::size_t indent = 0;
  NvsmiNode node;
  std::vector<std::size_t> kids;
};

// Recursive: the parser has bounded the depth.
NvsmiNode assemble(std::vector<FlatLine>& flat, std::size_t i) {
  NvsmiNode n = std::move(flat[i].node);
  for (std::size_t k : flat[i].kids) n.children.push_back(assemble(flat, k));
  return n;
}

std::size_t indent_of(std::string_view line) {
  std::size_t n = 0;
  for (char c : line) {
    if (c == ' ')
      n += 1;
    else if (c == '\t')
      n += 4;
    else
      break;
  }
  return n;
}

}  // namespace

Result<NvsmiNode> parse_nvidia_smi_query_text_tree(std::string_view text) {
  // flat[0] is the root; every other line hangs under the nearest previous line less indented.
  std::vector<FlatLine> flat(1);
  flat[0].node.key = "nvidia_smi_log";
  std::vector<std::size_t> stack{0};
  bool banner = false;
  bool gpu_section = false;
  for (std::string_view raw : detail::split_lines(text)) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.find("NVSMI LOG") != std::string_view::npos && line.front() == '=') {
      banner = true;
      continue;
    }
    FlatLine fl;
    fl.indent = indent_of(raw);
    std::size_t sep = std::string_view::npos;
    for (std::size_t p = line.find(" :"); p != std::string_view::npos; p = line.find(" :", p + 1)) {
      if (p + 2 == line.size() || line[p + 2] == ' ') {
        sep = p;
        break;
      }
    }
    std::string_view label = sep == std::string_view::npos ? line : trim(line.substr(0, sep));
    std::string_view value = sep == std::string_view::npos ? std::string_view{} : trim(line.substr(sep + 2));
    if (sep == std::string_view::npos && fl.indent == 0 && label.substr(0, 4) == "GPU " &&
        detail::find_pci_bus_id(label)) {
      fl.node.key = "gpu";
      fl.node.value = std::string(trim(label.substr(4)));
      gpu_section = true;
    } else {
      fl.node.key = detail::snake_key(label);
      fl.node.value = std::string(value);
    }
    while (stack.size() > 1 && flat[stack.back()].indent >= fl.indent) stack.pop_back();
    std::size_t idx = flat.size();
    flat[stack.back()].kids.push_back(idx);
    flat.push_back(std::move(fl));
    stack.push_back(idx);
    // The stack holds the root and the line's ancestors: its size is the line's depth.
    if (stack.size() > static_cast<std::size_t>(util::kMaxNestingDepth)) {
      return fail(Errc::parse, fmt::format("nvidia-smi -q output nests deeper than {} levels by indentation "
                                           "(malformed); refusing to read it",
                                           util::kMaxNestingDepth));
    }
  }
  if (!banner && !gpu_section) {
    return fail(Errc::parse, "not nvidia-smi -q output: no \"NVSMI LOG\" banner and no \"GPU <bus id>\" section");
  }
  return assemble(flat, 0);
}

}  // namespace gpuctl::gpu
