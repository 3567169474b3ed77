// `gpuctl diagnose -o junit`: one testsuite per check, one testcase per object (report_formats.hpp).
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "gpuctl/ops/diagnose/report_formats.hpp"
#include "gpuctl/ops/diagnose/suppress.hpp"
#include "gpuctl/output/printable.hpp"
#include "gpuctl/util/time.hpp"

namespace gpuctl::ops::diagnose {
namespace {

// Text as XML 1.0 may carry it. Control characters other than tab and newline are not allowed
// even as references, and bytes that are not UTF-8 make the document unreadable: both are
// escaped (\xHH) as printable() does for a terminal, line by line so newlines survive.
// printable() keeps U+FFFE and U+FFFF, which XML also forbids.
std::string xml_text(std::string_view text) {
  std::string out;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    if (start != 0) out += '\n';
    out += output::printable(text.substr(start, end - start));
    start = end + 1;
  }
  for (std::string_view bad : {"\xEF\xBF\xBE", "\xEF\xBF\xBF"}) {
    for (std::size_t at = out.find(bad); at != std::string::npos; at = out.find(bad, at)) {
      out.replace(at, bad.size(), bad.back() == '\xBE' ? "\\ufffe" : "\\uffff");
    }
  }
  return out;
}

// One line for an attribute.
std::string xml_line(std::string_view text) { return xml_text(output::printable(text)); }

// Milliseconds at most: junit-10.xsd's time pattern (Surefire's) allows three decimals, no more.
std::string seconds(std::chrono::microseconds d) {
  auto ms = std::chrono::round<std::chrono::milliseconds>(d).count();
  return fmt::format("{}.{:03}", ms / 1000, ms % 1000);
}

// One finding in a testcase's text; `note` (the suppression) follows its summary line.
void describe(std::string& body, const Finding& f, std::string_view note) {
  body += fmt::format("[{}] {}\n", to_string(f.severity), f.summary);
  if (!note.empty()) body += fmt::format("  {}\n", note);
  if (!f.node.empty()) body += fmt::format("  node: {}\n", f.node);
  for (const auto& e : f.evidence) {
    std::string when = e.time.empty() ? "" : fmt::format(" at {}", e.time);
    body += fmt::format("  evidence ({}{}): {}\n", e.source, when, e.text);
  }
  for (const auto& command : f.remedy) body += fmt::format("  run: {}\n", command);
}

// One object's findings within a check: those left to act on and those suppressed.
struct ObjectCase {
  std::string object;
  std::vector<const Finding*> active;
  std::vector<const SuppressedFinding*> suppressed;
};

// The objects `check` found something on, in the report's order (worst first).
std::vector<ObjectCase> cases_of(const Report& report, std::string_view check) {
  std::vector<ObjectCase> cases;
  std::map<std::string, std::size_t> index;  // a check may fire on every node of a large cluster
  auto case_for = [&](const ObjectRef& object) -> ObjectCase& {
    std::string path = object_path(object);
    auto [at, added] = index.try_emplace(path, cases.size());
    if (added) cases.push_back(ObjectCase{std::move(path), {}, {}});
    return cases[at->second];
  };
  for (const auto& f : report.findings) {
    if (f.check == check) case_for(f.object).active.push_back(&f);
  }
  for (const auto& s : report.suppressed) {
    if (s.finding.check == check) case_for(s.finding.object).suppressed.push_back(&s);
  }
  return cases;
}

std::string suppressed_because(const SuppressedFinding& s) {
  return s.until.empty() ? fmt::format("suppressed: {}", s.reason)
                         : fmt::format("suppressed until {}: {}", s.until, s.reason);
}

// Adds the testcase of one object; returns whether it failed (true) or was skipped (false).
bool add_object_case(pugi::xml_node suite, const std::string& classname, const ObjectCase& c) {
  auto testcase = suite.append_child("testcase");
  testcase.append_attribute("classname") = classname.c_str();
  testcase.append_attribute("name") = xml_line(c.object).c_str();
  if (c.active.empty()) {
    auto skipped = testcase.append_child("skipped");
    skipped.append_attribute("message") = xml_line(suppressed_because(*c.suppressed.front())).c_str();
    std::string body;
    for (const auto* s : c.suppressed) describe(body, s->finding, suppressed_because(*s));
    skipped.text() = xml_text(body).c_str();
    return false;
  }
  const Finding& worst = *c.active.front();
  std::string message = worst.summary;
  if (c.active.size() > 1) message += fmt::format(" (and {} more)", c.active.size() - 1);
  auto failure = testcase.append_child("failure");
  failure.append_attribute("message") = xml_line(message).c_str();
  failure.append_attribute("type") = std::string(to_string(worst.severity)).c_str();
  std::string body;
  for (const auto* f : c.active) describe(body, *f, "");
  for (const auto* s : c.suppressed) describe(body, s->finding, suppressed_because(*s));
  failure.text() = xml_text(body).c_str();
  return true;
}

struct Counts {
  int tests = 0;
  int failures = 0;
  int skipped = 0;
};

Counts add_suite(pugi::xml_node root, const Report& report, const CheckRun& run, std::string_view timestamp) {
  auto suite = root.append_child("testsuite");
  suite.append_attribute("name") = run.id.c_str();
  const std::string classname = "gpuctl.diagnose." + run.id;
  const Check* check = find_check(run.id);
  const std::string title = check != nullptr ? std::string(check->title) : run.id;
  Counts counts;
  bool any_failed = false;
  for (const auto& c : cases_of(report, run.id)) {
    bool failed = add_object_case(suite, classname, c);
    any_failed = any_failed || failed;
    ++counts.tests;
    (failed ? counts.failures : counts.skipped) += 1;
  }
  if (!any_failed) {
    // What the check stands for, so the suite is never empty and CI tracks it from run to run.
    auto testcase = suite.append_child("testcase");
    testcase.append_attribute("classname") = classname.c_str();
    testcase.append_attribute("name") = title.c_str();
    testcase.append_attribute("time") = seconds(run.duration).c_str();
    if (run.status == CheckStatus::skipped) {
      testcase.append_child("skipped").append_attribute("message") =
          xml_line("could not run: " + run.skipped_because).c_str();
      ++counts.skipped;
    }
    ++counts.tests;
  }
  // Appended after the testcases, yet written right after the name: pugixml keeps attributes
  // and children apart.
  suite.append_attribute("tests") = counts.tests;
  suite.append_attribute("failures") = counts.failures;
  suite.append_attribute("errors") = 0;
  suite.append_attribute("skipped") = counts.skipped;
  suite.append_attribute("time") = seconds(run.duration).c_str();
  suite.append_attribute("timestamp") = std::string(timestamp).c_str();
  return counts;
}

}  // namespace

std::string to_junit(const Report& report, std::chrono::system_clock::time_point run_at) {
  pugi::xml_document doc;
  auto declaration = doc.append_child(pugi::node_declaration);
  declaration.append_attribute("version") = "1.0";
  declaration.append_attribute("encoding") = "UTF-8";
  auto root = doc.append_child("testsuites");
  root.append_attribute("name") = "gpuctl diagnose";
  const std::string timestamp = util::format_rfc3339(run_at);
  Counts total;
  std::chrono::microseconds time{0};
  for (const auto& run : report.checks) {
    Counts counts = add_suite(root, report, run, timestamp);
    total.tests += counts.tests;
    total.failures += counts.failures;
    time += run.duration;
  }
  root.append_attribute("tests") = total.tests;
  root.append_attribute("failures") = total.failures;
  root.append_attribute("errors") = 0;
  root.append_attribute("time") = seconds(time).c_str();
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

}  // namespace gpuctl::ops::diagnose
