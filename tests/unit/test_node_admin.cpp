// Node administration in the library: Kubernetes' validation rules, kubectl's taint and label
// syntax, the pure planners, toleration matching, and writes that survive 409 Conflicts.
#include <catch2/catch.hpp>

#include "fakes/test_support.hpp"
#include "gpuctl/ops/nodes/node_admin.hpp"
#include "test_drain_support.hpp"

using json = nlohmann::json;

using namespace gpuctl;
using namespace gpuctl::testing::nodeadmin;
using gpuctl::testing::FakeClient;
using gpuctl::testing::json_answer;

namespace {
json taints(std::vector<json> list) { return json(std::move(list)); }
}  // namespace

TEST_CASE("qualified names, label values and node names follow apimachinery's rules", "[node-admin]") {
  // From k8s.io/apimachinery/pkg/util/validation's TestIsQualifiedName.
  for (const char* good :
       {"simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
        "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple",
        "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123",
        "requests.storage-foo", "nvidia.com/gpu.product"}) {
    CAPTURE(good);
    CHECK(ops::qualified_name_problem(good).empty());
  }
  CHECK(ops::qualified_name_problem(std::string(63, 'a')).empty());
  CHECK(ops::qualified_name_problem(std::string(253, 'a') + "/" + std::string(63, 'b')).empty());
  for (const char* bad : {"nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash",
                          "Example.com/abc", "example_com/abc", "example.com/", "/simple", "", "a b"}) {
    CAPTURE(bad);
    CHECK_FALSE(ops::qualified_name_problem(bad).empty());
  }
  CHECK(ops::qualified_name_problem(std::string(64, 'a')) == "name part must be no more than 63 characters (has 64)");
  CHECK_FALSE(ops::qualified_name_problem(std::string(254, 'a') + "/abc").empty());

  for (const char* good :
       {"", "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "A_Mixed_Case.value"}) {
    CAPTURE(good);
    CHECK(ops::label_value_problem(good).empty());
  }
  for (const char* bad : {"nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad",
                          "-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a b"}) {
    CAPTURE(bad);
    CHECK_FALSE(ops::label_value_problem(bad).empty());
  }
  CHECK_FALSE(ops::label_value_problem(std::string(64, 'a')).empty());

  CHECK(ops::node_name_problem("gpu-node-7.example.com").empty());
  CHECK_FALSE(ops::node_name_problem("Not_A_Node").empty());
  CHECK_FALSE(ops::node_name_problem("ends-").empty());
  CHECK_FALSE(ops::node_name_problem("").empty());
}

TEST_CASE("taint specs in kubectl's syntax", "[node-admin]") {
  auto add = ops::parse_taint_spec("dedicated=ml:NoSchedule");
  REQUIRE(add);
  CHECK_FALSE(add->remove);
  CHECK(add->taint == kube::Taint{"dedicated", "ml", "NoSchedule", ""});

  auto no_value = ops::parse_taint_spec("nvidia.com/gpu:NoExecute");
  REQUIRE(no_value);
  CHECK(no_value->taint == kube::Taint{"nvidia.com/gpu", "", "NoExecute", ""});

  auto remove_effect = ops::parse_taint_spec("dedicated:NoSchedule-");
  REQUIRE(remove_effect);
  CHECK(remove_effect->remove);
  CHECK(remove_effect->taint.effect == "NoSchedule");

  auto remove_key = ops::parse_taint_spec("dedicated-");
  REQUIRE(remove_key);
  CHECK(remove_key->remove);
  CHECK(remove_key->taint.key == "dedicated");
  CHECK(remove_key->taint.effect.empty());

  struct Bad {
    const char* spec;
    const char* message;
  };
  for (const auto& b : std::vector<Bad>{
           {"a:Bogus",
            "invalid taint spec \"a:Bogus\": effect \"Bogus\" is not one of NoSchedule, PreferNoSchedule, NoExecute"},
           {"a=b",
            "invalid taint spec \"a=b\": an added taint needs an effect, as in "
            "KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute"},
           {"bad key=x:NoSchedule",
            "invalid taint spec \"bad key=x:NoSchedule\": key \"bad key\": name part must be 63 characters or less, "
            "begin and end with an alphanumeric character ([a-z0-9A-Z]) with dashes (-), underscores (_), dots (.), "
            "and alphanumerics between"},
           {"k=-v:NoSchedule", ""},
           {"=v:NoSchedule", ""}}) {
    CAPTURE(b.spec);
    auto r = ops::parse_taint_spec(b.spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    if (b.message[0] != '\0') CHECK(r.error().message == b.message);
  }
  CHECK(ops::looks_like_taint_spec("k:NoSchedule"));
  CHECK(ops::looks_like_taint_spec("k-"));
  CHECK_FALSE(ops::looks_like_taint_spec("gpu-node-1"));  // dashes inside a node name are fine
}

TEST_CASE("label specs in kubectl's syntax", "[node-admin]") {
  auto set = ops::parse_label_spec("accelerator=nvidia-a100");
  REQUIRE(set);
  CHECK(set->key == "accelerator");
  CHECK(set->value == "nvidia-a100");
  auto empty_value = ops::parse_label_spec("flag=");
  REQUIRE(empty_value);
  CHECK(empty_value->value.empty());
  auto remove = ops::parse_label_spec("accelerator-");
  REQUIRE(remove);
  CHECK(remove->remove);
  CHECK_FALSE(ops::parse_label_spec("bad key=x"));
  CHECK_FALSE(ops::parse_label_spec("k=bad value"));
  CHECK_FALSE(ops::parse_label_spec("novalue"));
}

TEST_CASE("plan_taints adds, keeps, overwrites and removes, always preconditioned on resourceVersion", "[node-admin]") {
  json n = node("n1", "42", taints({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}}));
  auto spec = [](const char* s) { return *ops::parse_taint_spec(s); };

  auto added = ops::plan_taints(n, {spec("dedicated=ml:NoExecute")}, false, "2026-12-02T10:00:00Z");
  REQUIRE(added);
  CHECK(added->changed);
  CHECK(added->summary == "added dedicated=ml:NoExecute");
  CHECK(added->patch["metadata"]["resourceVersion"] == "42");
  REQUIRE(added->patch["spec"]["taints"].size() == 2);  // the existing taint is kept: the list is written whole
  CHECK(added->patch["spec"]["taints"][0]["key"] == "nvidia.com/gpu");
  CHECK(added->patch["spec"]["taints"][1]["timeAdded"] == "2026-12-02T10:00:00Z");  // as kubectl sets it for NoExecute

  auto same = ops::plan_taints(n, {spec("nvidia.com/gpu=present:NoSchedule")}, false, "t");
  REQUIRE(same);
  CHECK_FALSE(same->changed);
  CHECK(same->summary == "already has nvidia.com/gpu=present:NoSchedule");
  CHECK(same->patch.is_null());

  auto other_value = ops::plan_taints(n, {spec("nvidia.com/gpu=absent:NoSchedule")}, false, "t");
  REQUIRE_FALSE(other_value);
  CHECK(other_value.error().message ==
        "node n1 already has a taint with key \"nvidia.com/gpu\" and effect \"NoSchedule\" "
        "(nvidia.com/gpu=present:NoSchedule), "
        "and --overwrite is false: add --overwrite to change its value");

  auto overwritten = ops::plan_taints(n, {spec("nvidia.com/gpu=absent:NoSchedule")}, true, "t");
  REQUIRE(overwritten);
  CHECK(overwritten->summary == "changed nvidia.com/gpu=present:NoSchedule to nvidia.com/gpu=absent:NoSchedule");
  CHECK(overwritten->patch["spec"]["taints"].size() == 1);

  // Another effect for the same key is another taint, as the API defines uniqueness.
  auto other_effect = ops::plan_taints(n, {spec("nvidia.com/gpu=present:PreferNoSchedule")}, false, "t");
  REQUIRE(other_effect);
  CHECK(other_effect->patch["spec"]["taints"].size() == 2);

  auto removed = ops::plan_taints(n, {spec("nvidia.com/gpu-")}, false, "t");
  REQUIRE(removed);
  CHECK(removed->summary == "removed nvidia.com/gpu");
  CHECK(removed->patch["spec"]["taints"].is_null());  // merge patch: null deletes the list

  auto absent = ops::plan_taints(n, {spec("dedicated:NoSchedule-")}, false, "t");
  REQUIRE(absent);
  CHECK_FALSE(absent->changed);
  CHECK(absent->summary == "had no taint dedicated:NoSchedule");
}

TEST_CASE("plan_labels sets, refuses to overwrite silently, and removes", "[node-admin]") {
  json n = node("n1", "7");
  auto spec = [](const char* s) { return *ops::parse_label_spec(s); };
  auto set = ops::plan_labels(n, {spec("accelerator=nvidia-a100")}, false);
  REQUIRE(set);
  CHECK(set->patch == json{{"metadata", {{"resourceVersion", "7"}, {"labels", {{"accelerator", "nvidia-a100"}}}}}});
  auto same = ops::plan_labels(n, {spec("nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB")}, false);
  REQUIRE(same);
  CHECK_FALSE(same->changed);
  auto refused = ops::plan_labels(n, {spec("nvidia.com/gpu.product=other")}, false);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Errc::invalid_argument);
  auto removed = ops::plan_labels(n, {spec("kubernetes.io/hostname-"), spec("missing-")}, false);
  REQUIRE(removed);
  CHECK(removed->patch["metadata"]["labels"] == json{{"kubernetes.io/hostname", nullptr}});
  CHECK(removed->summary == "removed kubernetes.io/hostname");
}

TEST_CASE("plan_cordon records why, by whom and when, uncordon clears the record", "[node-admin]") {
  json n = node("n1", "3");
  ops::CordonRequest request{true, "ECC errors", "alice", "2026-12-02T10:00:00Z"};
  auto cordon = ops::plan_cordon(n, request);
  REQUIRE(cordon);
  CHECK(cordon->summary == "reason \"ECC errors\"");
  CHECK(cordon->patch["spec"]["unschedulable"] == true);
  CHECK(cordon->patch["metadata"]["annotations"] == json{{"gpuctl.io/cordon-reason", "ECC errors"},
                                                         {"gpuctl.io/cordoned-by", "alice"},
                                                         {"gpuctl.io/cordoned-at", "2026-12-02T10:00:00Z"}});

  json cordoned = node("n1", "4", json::array(), true);
  cordoned["metadata"]["annotations"] = {{"gpuctl.io/cordon-reason", "Xid 79"},
                                         {"gpuctl.io/cordoned-by", "bob"},
                                         {"gpuctl.io/cordoned-at", "2026-12-01T00:00:00Z"}};
  auto again = ops::plan_cordon(cordoned, request);
  REQUIRE(again);
  CHECK_FALSE(again->changed);  // bob's record stays
  CHECK(again->summary == "already cordoned: reason \"Xid 79\" by bob at 2026-12-01T00:00:00Z");

  auto uncordon = ops::plan_cordon(cordoned, {false, "", "", ""});
  REQUIRE(uncordon);
  CHECK(uncordon->changed);
  CHECK(uncordon->patch["spec"]["unschedulable"].is_null());
  CHECK(uncordon->patch["metadata"]["annotations"] == json{{"gpuctl.io/cordon-reason", nullptr},
                                                           {"gpuctl.io/cordoned-by", nullptr},
                                                           {"gpuctl.io/cordoned-at", nullptr}});
  auto schedulable = ops::plan_cordon(n, {false, "", "", ""});
  REQUIRE(schedulable);
  CHECK_FALSE(schedulable->changed);
  CHECK(schedulable->summary == "already uncordoned");
}

TEST_CASE("tolerations match taints as the scheduler and the taint manager match them", "[node-admin]") {
  kube::Taint t{"nvidia.com/gpu", "present", "NoSchedule", ""};
  auto pod_with = [](json tolerations) { return PodBuilder("ml", "p").tolerations(tolerations).build(); };
  CHECK(ops::tolerates(pod_with(json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}})), t));
  CHECK(ops::tolerates(
      pod_with(json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})), t));
  CHECK(ops::tolerates(pod_with(json::array({{{"operator", "Exists"}}})), t));  // tolerates everything
  CHECK_FALSE(ops::tolerates(pod_with(json::array({{{"key", "nvidia.com/gpu"}, {"value", "absent"}}})), t));
  CHECK_FALSE(ops::tolerates(
      pod_with(json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoExecute"}}})), t));
  CHECK_FALSE(ops::tolerates(PodBuilder("ml", "none").build(), t));

  std::vector<json> pods = {PodBuilder("ml", "bare").build(), PodBuilder("ml", "done").phase("Succeeded").build(),
                            pod_with(json::array({{{"operator", "Exists"}}}))};
  CHECK(ops::pods_not_tolerating(pods, t) == std::vector<std::string>{"ml/bare"});  // finished pods do not count
}

TEST_CASE("taint_impact warns for NoSchedule and refuses NoExecute over intolerant pods unless allowed",
          "[node-admin]") {
  std::map<std::string, std::vector<json>> pods = {{"gpu-1", {PodBuilder("ml", "bare").build()}}, {"gpu-2", {}}};
  auto spec = [](const char* effect) {
    ops::TaintSpec s;
    s.taint = kube::Taint{"gpu.health", "xid-79", effect, ""};
    return s;
  };
  auto no_schedule = ops::taint_impact(pods, {spec("NoSchedule")}, false);
  REQUIRE(no_schedule.warnings.size() == 1);
  CHECK(no_schedule.warnings[0].find("node/gpu-1: 1 running pod(s) do not tolerate") == 0);
  CHECK(no_schedule.refusals.empty());

  auto no_execute = ops::taint_impact(pods, {spec("NoExecute")}, false);
  CHECK(no_execute.warnings.empty());
  REQUIRE(no_execute.refusals.size() == 1);
  CHECK(no_execute.refusals[0].find("would be evicted: ml/bare (add --yes") != std::string::npos);

  auto allowed = ops::taint_impact(pods, {spec("NoExecute")}, true);
  CHECK(allowed.refusals.empty());
  REQUIRE(allowed.warnings.size() == 1);
  CHECK(allowed.warnings[0].find("will be evicted: ml/bare") != std::string::npos);

  ops::TaintSpec removal = spec("NoExecute");
  removal.remove = true;
  auto removing = ops::taint_impact(pods, {removal, spec("PreferNoSchedule")}, false);
  CHECK(removing.warnings.empty());
  CHECK(removing.refusals.empty());
}

TEST_CASE("apply_node_edit reads again and re-plans after a 409, so a concurrent writer's taint survives",
          "[node-admin]") {
  FakeClient fc;
  json theirs = {{"key", "theirs"}, {"effect", "NoSchedule"}};
  fc.fake->on("PATCH", "/api/v1/nodes/n1", json_answer(409, status(409, "Conflict", "the object has been modified")))
      .on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1", "11", json::array({theirs})).dump()))
      .on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "12").dump()));
  std::vector<ops::TaintSpec> specs = {*ops::parse_taint_spec("mine=1:NoSchedule")};
  auto change = ops::apply_node_edit(*fc.client, node("n1", "10"),
                                     [&](const json& n) { return ops::plan_taints(n, specs, false, "t"); }, {});
  CHECK(change.outcome == ops::ChangeOutcome::changed);
  CHECK(change.conflicts == 1);
  const auto& requests = fc.fake->requests();
  REQUIRE(requests.size() == 3);
  json first = json::parse(requests[0].body);
  json second = json::parse(requests[2].body);
  CHECK(first["metadata"]["resourceVersion"] == "10");
  CHECK(second["metadata"]["resourceVersion"] == "11");
  CHECK(second["spec"]["taints"].size() == 2);  // theirs and mine
  CHECK(second["spec"]["taints"][0]["key"] == "theirs");
  CHECK(fc.fake->unexpected().empty());
}

TEST_CASE("apply_node_edit: client dry run sends nothing, server dry run sends dryRun=All, conflicts give up",
          "[node-admin]") {
  auto planner = [](const json& n) { return ops::plan_cordon(n, {true, "", "", ""}); };
  {
    FakeClient fc;
    ops::ApplyOptions options;
    options.dry_run = ops::DryRun::client;
    auto change = ops::apply_node_edit(*fc.client, node("n1"), planner, options);
    CHECK(change.outcome == ops::ChangeOutcome::changed);
    CHECK(change.path == "/api/v1/nodes/n1");
    CHECK(change.patch["spec"]["unschedulable"] == true);
    CHECK(fc.fake->requests().empty());
  }
  {
    FakeClient fc;
    fc.fake->on("PATCH", "/api/v1/nodes/n1", json_answer(200, node("n1", "2").dump()), "dryRun=All");
    ops::ApplyOptions options;
    options.dry_run = ops::DryRun::server;
    auto change = ops::apply_node_edit(*fc.client, node("n1"), planner, options);
    CHECK(change.outcome == ops::ChangeOutcome::changed);
    CHECK(fc.fake->unexpected().empty());
  }
  {
    FakeClient fc;
    for (int i = 0; i < 3; i++) {
      fc.fake->on("PATCH", "/api/v1/nodes/n1", json_answer(409, status(409, "Conflict", "modified")));
      fc.fake->on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1", std::to_string(i + 2)).dump()));
    }
    ops::ApplyOptions options;
    options.max_conflict_retries = 2;
    auto change = ops::apply_node_edit(*fc.client, node("n1"), planner, options);
    CHECK(change.outcome == ops::ChangeOutcome::failed);
    REQUIRE(change.error);
    CHECK(change.error->message == "node n1 kept changing under us (3 conflicts in a row); run the command again");
  }
}

TEST_CASE("select_nodes: names one by one with the missing ones named, selectors in one list", "[node-admin]") {
  {
    FakeClient fc;
    fc.fake->on("GET", "/api/v1/nodes/n1", json_answer(200, node("n1").dump()))
        .on("GET", "/api/v1/nodes/gone", json_answer(404, status(404, "NotFound", "nodes \"gone\" not found")));
    auto selected = ops::select_nodes(*fc.client, {{"n1", "gone", "n1"}, "", false});
    REQUIRE(selected);
    CHECK(selected->nodes.size() == 1);
    REQUIRE(selected->missing.size() == 1);
    CHECK(selected->missing[0].error->message == "node \"gone\" not found (list them with: gpuctl nodes --all)");
    CHECK(fc.fake->requests().size() == 2);  // the repeated name is read once
  }
  {
    FakeClient fc;
    json cpu = node("cpu-0");
    cpu["metadata"]["labels"].erase("nvidia.com/gpu.product");
    cpu["status"]["capacity"].erase("nvidia.com/gpu");
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of({node("g-0"), cpu})));
    auto selected = ops::select_nodes(*fc.client, {{}, "", true});
    REQUIRE(selected);
    REQUIRE(selected->nodes.size() == 1);
    CHECK(kube::name_of(selected->nodes[0]) == "g-0");
  }
  {
    FakeClient fc;
    fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of({})), "labelSelector=pool%3Dnone");
    auto selected = ops::select_nodes(*fc.client, {{}, "pool=none", false});
    REQUIRE_FALSE(selected);
    CHECK(selected.error().message == "no nodes match -l pool=none (check with: gpuctl nodes --all -l pool=none)");
  }
  CHECK_FALSE(ops::validate_selection({{"n1"}, "a=b", false}));
  CHECK_FALSE(ops::validate_selection({{}, "", false}));
  CHECK(ops::validate_selection({{}, "a=b", false}));
}

TEST_CASE("select_nodes: a node whose name or fields the API got wrong is reported failed, never selected",
          "[node-admin]") {
  FakeClient fc;
  json option_name = node("-oProxyCommand=touch-x");  // would be an ssh option in --exec 'ssh "$1"'
  json bad_status = node("g-2");
  bad_status["status"] = "Ready";
  fc.fake->on("GET", "/api/v1/nodes", json_answer(200, list_of({node("g-0"), option_name, bad_status})),
              "labelSelector=pool%3Da");
  auto selected = ops::select_nodes(*fc.client, {{}, "pool=a", false});
  REQUIRE(selected);
  REQUIRE(selected->nodes.size() == 1);
  CHECK(kube::name_of(selected->nodes[0]) == "g-0");
  REQUIRE(selected->missing.size() == 2);
  CHECK(selected->missing[0].node == "#2");
  CHECK(selected->missing[0].error->code == Errc::parse);
  CHECK(selected->missing[0].error->message.find("not a node name") != std::string::npos);
  CHECK(selected->missing[0].error->message.find("-oProxyCommand=touch-x") != std::string::npos);
  CHECK(selected->missing[1].node == "g-2");
  CHECK(selected->missing[1].error->message == "node g-2 skipped: status is a string, expected an object");

  FakeClient named;
  named.fake->on("GET", "/api/v1/nodes/g-2", json_answer(200, bad_status.dump()));
  auto one = ops::select_nodes(*named.client, {{"g-2"}, "", false});
  REQUIRE(one);
  CHECK(one->nodes.empty());
  REQUIRE(one->missing.size() == 1);
  CHECK(one->missing[0].error->message == "node g-2 skipped: status is a string, expected an object");
}
