// `--via prometheus`: real dcgm-exporter captures (tests/fixtures/dcgm-exporter) served as the
// answers Prometheus gives to gpuctl's queries, through FakeTransport; the join to nodes and
// GPUs, relabelled setups, staleness, nodes without an exporter, credentials and every failure.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fakes/fake_transport.hpp"
#include "fakes/fixtures.hpp"
#include "fakes/prometheus_answers.hpp"
#include "gpuctl/ops/fleet/prometheus_source.hpp"

using nlohmann::json;
using namespace gpuctl;
using testing::FakeAnswer;
using testing::FakeTransport;
using testing::json_answer;

namespace {

constexpr std::int64_t kNow = 1767225600;  // 2026-01-01T00:00:00Z

json gpu_node(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"status", {{"capacity", {{"nvidia.com/gpu", "1"}}}}}};
}

// The DataDog capture: two hosts (container ids as Hostname), named here as the test's nodes.
std::vector<testing::ExpositionSeries> t4_capture() {
  auto series = testing::parse_exposition(testing::fixture("dcgm-exporter/datadog__t4-two-hosts.prom"));
  series = testing::renamed(std::move(series), "Hostname", "424773df46e0", "vp-t4-a");
  return testing::renamed(std::move(series), "Hostname", "551bdf382151", "vp-t4-b");
}

std::vector<testing::ExpositionSeries> a100_faults() {
  return testing::parse_exposition(testing::fixture("dcgm-exporter/hand-edited__a100-two-gpus-faults.prom"));
}

// Reads `nodes` through a source whose transport answers as Prometheus with `series` scraped.
struct Run {
  FakeTransport* transport = nullptr;
  Result<std::vector<ops::NodeProbe>> probes;
};

Run read_with(const std::vector<testing::ExpositionSeries>& series, const std::vector<json>& nodes,
              ops::PrometheusOptions options = {}, const std::map<std::string, std::int64_t>& ages = {}) {
  auto transport = std::make_unique<FakeTransport>();
  testing::serve_dcgm(*transport, series, kNow, ages, options.labels);
  options.url = "http://prometheus.test:9090";
  Run run;
  run.transport = transport.get();
  auto source = ops::make_prometheus_source(options, std::move(transport));
  run.probes = source->read(nodes, {});
  return run;
}

ops::NodeProbe only(const Run& run) {
  REQUIRE(run.probes);
  REQUIRE(run.probes->size() == 1);
  return run.probes->front();
}

}  // namespace

TEST_CASE("prometheus_source: a captured exposition reads as each node's GPUs", "[prometheus_source]") {
  auto series = t4_capture();
  // The fold runs at the real clock: serve samples taken now.
  ops::PrometheusOptions options;
  options.stale_after = std::chrono::hours(24 * 365 * 100);
  Run run = read_with(series, {gpu_node("vp-t4-a"), gpu_node("vp-t4-b")}, options);
  REQUIRE(run.probes);
  REQUIRE(run.probes->size() == 2);
  const auto& a = (*run.probes)[0];
  CHECK(a.node == "vp-t4-a");
  CHECK(a.via == "prometheus");
  CHECK(a.outcome == "ok");
  CHECK(a.answered());
  REQUIRE(a.report);
  CHECK(a.report->enumeration == "dcgm-exporter");
  CHECK(a.report->driver_version == std::string("460.106.00"));
  REQUIRE(a.report->gpus.size() == 1);
  const gpu::GpuInfo& g = a.report->gpus[0];
  CHECK(g.index == 0);
  CHECK(g.uuid == std::string("GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"));
  CHECK(g.product_name == std::string("Tesla T4"));
  CHECK(g.memory.used_mib == std::int64_t{0});
  CHECK(g.memory.free_mib == std::int64_t{15109});
  CHECK(g.memory.total_mib == std::int64_t{15109});  // used + free: FB_TOTAL is not exported there
  CHECK(g.temperature.gpu_c == 25);
  CHECK(g.power.draw_w == 8.969);
  REQUIRE(g.clocks);
  CHECK(g.clocks->sm_mhz == 300);
  CHECK(g.clocks->memory_mhz == 405);
  CHECK(g.utilization.gpu_percent == 0);
  CHECK(g.utilization.memory_percent == 0);
  CHECK(a.report->facts.kernel_log_source == "dcgm-exporter");
  CHECK(a.report->facts.kernel_events.empty());  // DCGM_FI_DEV_XID_ERRORS 0: no Xid
  // A family the exporter was not told to export stays missing, not zero.
  CHECK(g.ecc.volatile_counts.uncorrected.absence() == gpu::Absence::missing);
  CHECK_FALSE(g.clocks_event_reasons.has_value());

  const auto& b = (*run.probes)[1];
  CHECK(b.outcome == "ok");
  REQUIRE(b.report);
  CHECK(b.report->driver_version == std::string("470.182.03"));
  CHECK(b.report->cuda_version == std::string("12.1"));
  REQUIRE(b.report->gpus.size() == 1);
  const gpu::GpuInfo& h = b.report->gpus[0];
  CHECK(h.uuid == std::string("GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"));
  CHECK(h.temperature.slowdown_threshold_c == 93);
  CHECK(h.power.limit_w == 70.0);
  CHECK(h.performance_state == std::string("P8"));
  CHECK(h.memory.total_mib == std::int64_t{15109});
  CHECK(h.memory.reserved_mib == std::int64_t{15109});
  REQUIRE(h.clocks_event_reasons);  // DCGM_FI_DEV_CLOCK_THROTTLE_REASONS 1: idle
  CHECK(*h.clocks_event_reasons == std::vector<std::string>{"gpu_idle"});
}

TEST_CASE("prometheus_source: the number of queries does not grow with the nodes", "[prometheus_source]") {
  const std::size_t expected = ops::dcgm_families().size() + 1;
  for (int n : {1, 40}) {
    std::vector<json> nodes;
    for (int i = 0; i < n; ++i) nodes.push_back(gpu_node("vp-node-" + std::to_string(i)));
    Run run = read_with(t4_capture(), nodes);
    REQUIRE(run.probes);
    CHECK(run.probes->size() == static_cast<std::size_t>(n));
    CHECK(run.transport->requests().size() == expected);
    CHECK(run.transport->unexpected().empty());
  }
}

TEST_CASE("prometheus_source: Xid ECC row remapping throttling NVLink and health are read", "[prometheus_source]") {
  ops::PrometheusOptions options;
  options.stale_after = std::chrono::hours(24 * 365 * 100);
  ops::NodeProbe p = only(read_with(a100_faults(), {gpu_node("dgx-a07")}, options));
  CHECK(p.outcome == "ok");
  REQUIRE(p.report);
  REQUIRE(p.report->gpus.size() == 2);
  const gpu::GpuInfo& g0 = p.report->gpus[0];
  const gpu::GpuInfo& g1 = p.report->gpus[1];
  CHECK(g0.pci_bus_id == std::string("00000000:07:00.0"));
  CHECK(g0.ecc.volatile_counts.corrected == std::int64_t{3});
  CHECK(g0.ecc.volatile_counts.uncorrected == std::int64_t{2});
  CHECK(g0.ecc.aggregate_counts.corrected == std::int64_t{15});
  CHECK(g0.remapped_rows.uncorrectable == std::int64_t{1});
  CHECK(g0.remapped_rows.failure == true);
  CHECK(g1.remapped_rows.failure == false);
  REQUIRE(g0.clocks_event_reasons);  // 72 = hw_slowdown (0x8) + hw_thermal_slowdown (0x40)
  CHECK(*g0.clocks_event_reasons == std::vector<std::string>{"hw_slowdown", "hw_thermal_slowdown"});
  CHECK(g0.memory.total_mib == std::int64_t{78301 + 2213 + 570});
  // DCGM's blank (not supported) is nvidia-smi's N/A, never a temperature of 9e18.
  CHECK(g1.temperature.memory_c.absence() == gpu::Absence::not_available);
  CHECK(std::any_of(g0.warnings.begin(), g0.warnings.end(),
                    [](const std::string& w) { return w.find("NVLink CRC flit errors: 12") != std::string::npos; }));
  CHECK(std::any_of(g0.warnings.begin(), g0.warnings.end(),
                    [](const std::string& w) { return w == "DCGM health MEM: FAIL (DCGM_FR_VOLATILE_DBE_DETECTED)"; }));
  CHECK(g1.warnings.empty());
  // The last Xid, as the kernel-log reader would have given it to diagnose's xid-errors.
  REQUIRE(p.report->facts.kernel_events.size() == 1);
  const gpu::KernelLogEvent& xid = p.report->facts.kernel_events[0];
  CHECK(xid.kind == gpu::KernelLogEventKind::xid);
  CHECK(xid.code == 79);
  CHECK(xid.pci_bus_id == std::string("0000:07:00.0"));
  CHECK(xid.unix_time_s == p.sampled_at_unix_s);
  CHECK(xid.message.find("dcgm-exporter") != std::string::npos);
}

TEST_CASE("prometheus_source: nodes are found by any case and by their short name", "[prometheus_source]") {
  auto series = testing::renamed(a100_faults(), "Hostname", "dgx-a07", "DGX-A07.cluster.example.com");
  Run run = read_with(series, {gpu_node("dgx-a07"), gpu_node("dgx-a08")});
  REQUIRE(run.probes);
  CHECK((*run.probes)[0].report.has_value());
  CHECK((*run.probes)[0].outcome != "no_exporter");
  CHECK((*run.probes)[1].outcome == "no_exporter");
  // And a FQDN node name finds a short Hostname.
  Run fqdn = read_with(a100_faults(), {gpu_node("dgx-a07.cluster.example.com")});
  CHECK(only(fqdn).outcome != "no_exporter");
}

TEST_CASE("prometheus_source: a relabelled setup names its own node and GPU labels", "[prometheus_source]") {
  // Hostname is the exporter pod's name; Prometheus' relabelling wrote the node as k8s_node and
  // the GPU index as gpu_index.
  auto series = a100_faults();
  for (auto& s : series) {
    s.labels["Hostname"] = "nvidia-dcgm-exporter-7x2kq";
    s.labels["k8s_node"] = "gpu-node-3";
    s.labels["gpu_index"] = s.labels["gpu"];
    s.labels.erase("gpu");
  }
  ops::PrometheusOptions options;
  options.labels.node = {"k8s_node"};
  options.labels.gpu_index = "gpu_index";
  ops::NodeProbe p = only(read_with(series, {gpu_node("gpu-node-3")}, options));
  REQUIRE(p.report);
  REQUIRE(p.report->gpus.size() == 2);
  CHECK(p.report->gpus[1].index == 1);
  // With the default mapping the exporter pod's name matches no node.
  ops::NodeProbe unmapped = only(read_with(series, {gpu_node("gpu-node-3")}));
  CHECK(unmapped.outcome == "no_exporter");
}

TEST_CASE("prometheus_source: old samples make the node stale with its numbers", "[prometheus_source]") {
  ops::PrometheusOptions options;
  options.stale_after = std::chrono::seconds(120);
  // The fake's freshness answer says the samples were taken 300 s before kNow; the source
  // evaluates at the real clock, so they are older still.
  ops::NodeProbe p = only(read_with(a100_faults(), {gpu_node("dgx-a07")}, options, {{"dgx-a07", 300}}));
  CHECK(p.outcome == "stale");
  CHECK_FALSE(p.answered());
  CHECK(p.message.find("old (--prometheus-stale-after 2m") != std::string::npos);
  REQUIRE(p.sampled_at_unix_s);
  CHECK(*p.sampled_at_unix_s == kNow - 300);
  REQUIRE(p.report);
  CHECK(p.report->gpus.size() == 2);
}

TEST_CASE("prometheus_source: the fold decides stale against the queries' time", "[prometheus_source]") {
  ops::DcgmReadings readings;
  readings.now_unix_s = kNow;
  ops::PromSample util;
  util.labels = {
      {"Hostname", "n1"}, {"gpu", "0"}, {"UUID", "GPU-x"}, {std::string(ops::kMetricLabel), "DCGM_FI_DEV_GPU_UTIL"}};
  util.value = 42;
  readings.samples.push_back(util);
  ops::PromSample fresh;
  fresh.labels = {{"Hostname", "n1"}};
  ops::PrometheusOptions options;
  options.stale_after = std::chrono::seconds(30);
  fresh.value = static_cast<double>(kNow - 29);
  readings.freshness = {fresh};
  auto probes = ops::fold_dcgm_readings({gpu_node("n1")}, readings, options);
  CHECK(probes[0].outcome == "ok");
  CHECK(probes[0].report->gpus[0].utilization.gpu_percent == 42);
  readings.freshness[0].value = static_cast<double>(kNow - 31);
  probes = ops::fold_dcgm_readings({gpu_node("n1")}, readings, options);
  CHECK(probes[0].outcome == "stale");
  CHECK(probes[0].report->gpus[0].utilization.gpu_percent == 42);
}

TEST_CASE("prometheus_source: a GPU node without series is no_exporter naming the labels", "[prometheus_source]") {
  ops::NodeProbe p = only(read_with(t4_capture(), {gpu_node("vp-missing")}));
  CHECK(p.outcome == "no_exporter");
  CHECK(p.via == "prometheus");
  CHECK_FALSE(p.report);
  CHECK(p.message.find("node, Hostname, kubernetes_node, nodename") != std::string::npos);
  CHECK(p.message.find("--prometheus-label") != std::string::npos);
}

TEST_CASE("prometheus_source: the queries are the documented PromQL", "[prometheus_source]") {
  ops::PrometheusOptions options;
  auto window = ops::prometheus_window(options);
  CHECK(window.lookback == std::chrono::seconds(600));
  CHECK(window.step == std::chrono::seconds(15));
  options.stale_after = std::chrono::seconds(3);
  CHECK(ops::prometheus_window(options).step == std::chrono::seconds(1));
  const auto& xid = *std::find_if(ops::dcgm_families().begin(), ops::dcgm_families().end(),
                                  [](const ops::DcgmFamily& f) { return f.name == "xid"; });
  CHECK(
      ops::dcgm_family_query(xid, window, ops::DcgmLabelMapping{}) ==
      R"(label_replace(DCGM_FI_DEV_XID_ERRORS or (last_over_time(DCGM_FI_DEV_XID_ERRORS[600s]) unless on(node, Hostname, kubernetes_node, nodename) DCGM_FI_DEV_XID_ERRORS), "gpuctl_metric", "DCGM_FI_DEV_XID_ERRORS", "", ""))");
  std::string fresh = ops::dcgm_freshness_query(ops::DcgmLabelMapping{}, window);
  // The live series' own times, then the subquery for those marked stale.
  CHECK(fresh.rfind("max by (node, Hostname, kubernetes_node, nodename) ((timestamp(", 0) == 0);
  CHECK(fresh.find(") or max_over_time((timestamp(") != std::string::npos);
  CHECK(fresh.find("[600s:15s]") != std::string::npos);
}

TEST_CASE("prometheus_source: credentials go in the request headers", "[prometheus_source]") {
  auto send = [](ops::PrometheusOptions options) {
    FakeTransport transport;
    transport.on("GET", "/api/v1/query", json_answer(200, testing::vector_answer(json::array())));
    options.url = "https://prom.test/";
    auto r =
        ops::prometheus_query(transport, options, "up", std::chrono::seconds(kNow) + std::chrono::milliseconds(42));
    REQUIRE(r);
    REQUIRE(transport.requests().size() == 1);
    return transport.requests()[0];
  };
  auto header = [](const kube::HttpRequest& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return std::string();
  };
  ops::PrometheusOptions bearer;
  bearer.bearer_token = "tok-123";
  auto r = send(bearer);
  CHECK(header(r, "Authorization") == "Bearer tok-123");
  CHECK(r.url == "https://prom.test/api/v1/query?query=up&time=1767225600.042");
  ops::PrometheusOptions basic;
  basic.basic_user = "admin";
  basic.basic_password = "s3cret";
  CHECK(header(send(basic), "Authorization") == "Basic YWRtaW46czNjcmV0");
  ops::PrometheusOptions cert;
  cert.client_cert_pem = "CERT";
  cert.client_key_pem = "KEY";
  auto c = send(cert);
  CHECK(header(c, "Authorization").empty());
  CHECK(c.client_cert_pem == "CERT");
  CHECK(c.client_key_pem == "KEY");
}

TEST_CASE("prometheus_source: each failure is one line that names the fix", "[prometheus_source]") {
  auto fail_with = [](FakeAnswer answer) {
    FakeTransport transport;
    transport.on("GET", "/api/v1/query", std::move(answer));
    ops::PrometheusOptions options;
    options.url = "http://user:hunter2@prom.test:9090";
    options.bearer_token = "tok-secret";
    auto r =
        ops::prometheus_query(transport, options, "up", std::chrono::seconds(kNow) + std::chrono::milliseconds(42));
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find('\n') == std::string::npos);
    CHECK(r.error().message.find("hunter2") == std::string::npos);
    CHECK(r.error().message.find("tok-secret") == std::string::npos);
    return r.error();
  };
  Error unreachable = fail_with(FakeAnswer{0, "", {}, true});
  CHECK(unreachable.code == Errc::transport);
  CHECK(unreachable.message.find("--prometheus-url") != std::string::npos);
  CHECK(unreachable.message.find("http://***@prom.test:9090/api/v1/query") != std::string::npos);

  for (int status : {401, 403}) {
    Error auth = fail_with(FakeAnswer{status, "Unauthorized\n", {}, false});
    CHECK(auth.code == Errc::config);
    CHECK(auth.http_status == status);
    CHECK(auth.message.find("--prometheus-bearer-token-file") != std::string::npos);
  }
  Error bad = fail_with(json_answer(
      400, R"({"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"})"));
  CHECK(bad.code == Errc::api);
  CHECK(bad.message == R"(Prometheus refused the query (bad_data): invalid parameter "query": 1:1: parse error)");
  Error timeout = fail_with(json_answer(503, R"({"status":"error","errorType":"timeout","error":"query timed out"})"));
  CHECK(timeout.message.find("(timeout): query timed out") != std::string::npos);
  Error html = fail_with(FakeAnswer{200, "<html><body>Grafana</body></html>", {}, false});
  CHECK(html.code == Errc::parse);
  CHECK(html.message.find("not Prometheus' API JSON") != std::string::npos);
  CHECK(html.message.find("is --prometheus-url the Prometheus server") != std::string::npos);
  Error not_found = fail_with(FakeAnswer{404, "404 page not found", {}, false});
  CHECK(not_found.message.find("HTTP 404") != std::string::npos);
  Error matrix = fail_with(json_answer(200, R"({"status":"success","data":{"resultType":"matrix","result":[]}})"));
  CHECK(matrix.message.find("a matrix result") != std::string::npos);
  Error unavailable = fail_with(FakeAnswer{502, "Bad Gateway", {}, false});
  CHECK(unavailable.message.find("HTTP 502") != std::string::npos);
}

TEST_CASE("prometheus_source: a failed family query fails the whole read", "[prometheus_source]") {
  auto transport = std::make_unique<FakeTransport>();
  transport->on("GET", "/api/v1/query", FakeAnswer{401, "", {}, false});
  ops::PrometheusOptions options;
  options.url = "http://prom.test";
  auto source = ops::make_prometheus_source(options, std::move(transport));
  CHECK(source->via() == ops::Via::prometheus);
  auto r = source->read({gpu_node("n1")}, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::config);
}

namespace {

// A transport that fails as libcurl's does when nothing listens (its message is written for the
// API server).
class RefusingTransport : public kube::Transport {
 public:
  Result<kube::HttpResponse> send(const kube::HttpRequest&) override {
    return fail(Errc::transport,
                "cannot connect to the API server http://127.0.0.1:9 (Failed to connect to 127.0.0.1 port 9 after 0 "
                "ms: Couldn't connect to server); is it running and is the kubeconfig's server address right?");
  }
  Result<kube::HttpResponse> send_streaming(const kube::HttpRequest& r, const kube::BodyChunkHandler&) override {
    return send(r);
  }
};

}  // namespace

TEST_CASE("prometheus_source: an unreachable server is told without kubeconfig advice", "[prometheus_source]") {
  RefusingTransport transport;
  ops::PrometheusOptions options;
  options.url = "http://127.0.0.1:9";
  auto r = ops::prometheus_query(transport, options, "up", std::chrono::seconds(kNow) + std::chrono::milliseconds(42));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::transport);
  CHECK(r.error().message ==
        "Prometheus at http://127.0.0.1:9/api/v1/query could not be reached (Failed to connect to 127.0.0.1 port 9 "
        "after 0 ms: Couldn't connect to server); check --prometheus-url (or $GPUCTL_PROMETHEUS_URL) and, for https, "
        "--prometheus-ca-file");
}
