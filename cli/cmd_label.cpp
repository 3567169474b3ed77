// gpuctl label: set and remove node labels in kubectl's syntax, e.g. to group nodes by GPU type.
#include "commands.hpp"
#include "node_changes.hpp"

namespace gpuctl::cli {
namespace {

struct LabelOptions {
  NodeChangeFlags nodes;
  bool overwrite = false;
};

bool is_label_arg(std::string_view arg) { return ops::looks_like_label_spec(arg); }

Result<ExitCode> run_label(const LabelOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(NamesAndSpecs split, split_names_and_specs(o.nodes.args, &is_label_arg, "label"));
  std::vector<ops::LabelSpec> specs;
  for (const auto& text : split.specs) {
    GPUCTL_TRY_ASSIGN(ops::LabelSpec spec, ops::parse_label_spec(text));
    specs.push_back(std::move(spec));
  }
  GPUCTL_TRY_ASSIGN(NodeChangeRequest request, validate_node_change_flags(o.nodes, split.names));
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(ops::SelectedNodes selected, ops::select_nodes(*client, request.selection));
  // run
  auto planner = [&](const nlohmann::json& n) { return ops::plan_labels(n, specs, o.overwrite); };
  return apply_and_report(ctx, *client, std::move(selected), planner, "label", "labeled", request);
}

}  // namespace

void register_label(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<LabelOptions>();
  auto* cmd = app.add_subcommand("label", "Set or remove labels on nodes (kubectl's syntax)");
  document(*cmd, ctx.help(),
           {R"(KEY=VALUE sets a label, KEY- removes it. Changing an existing label's value needs
--overwrite. Keys and values are checked by Kubernetes' rules before anything is sent.)",
            {{"Group nodes by GPU type, as many schedulers and quotas expect",
              "gpuctl label gpu-0 gpu-1 accelerator=nvidia-a100"},
             {"Relabel every node of a product",
              "gpuctl label -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 accelerator=nvidia-h100 --overwrite"},
             {"What would be sent, without sending it", "gpuctl label gpu-0 team=vision --dry-run"}}});
  completes(cmd->add_option("args", o->nodes.args, "NODE... then KEY=VALUE or KEY-"), ctx.help(), ValueKind::node)
      ->required();
  add_node_change_flags(*cmd, ctx.help(), o->nodes);
  cmd->add_flag("--overwrite", o->overwrite, "Change the value of labels that exist");
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_label(*o, ctx); }; });
}

}  // namespace gpuctl::cli
