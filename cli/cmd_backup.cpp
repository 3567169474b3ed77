// gpuctl backup [-f FILE|-] and gpuctl backup inspect FILE: the cluster's GPU admin state into
// one archive written safely (0600, temporary name, fsync, rename), and its manifest read back.
#include <sys/stat.h>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/kube/client.hpp"
#include "gpuctl/ops/backup/backup.hpp"
#include "gpuctl/util/atomic_file.hpp"
#include "gpuctl/util/cancel.hpp"
#include "input_file.hpp"
#include "output_format.hpp"

namespace gpuctl::cli {
namespace {

using json = nlohmann::json;

struct BackupCommandOptions {
  std::string file;
  std::string node_keys;
  bool all_jobs = false;
  bool include_secrets = false;
  bool allow_partial = false;
  std::string output;
};

struct InspectOptions {
  std::string file;
  std::string output;
};

std::vector<std::string> split_prefixes(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void warn_about(const ops::BackupContents& contents, const ops::BackupOptions& options, AppContext& ctx) {
  for (const auto& gap : contents.gaps)
    ctx.warn(fmt::format("{} not backed up ({}); the manifest records the gap", gap.resource, gap.reason));
  if (options.include_secrets) {
    const auto secrets = std::ranges::count_if(
        contents.objects, [](const ops::BackupObject& o) { return o.kind->resource == "secrets"; });
    ctx.warn(
        fmt::format("the archive holds {} Secret(s), readable by anyone who can read the file: keep it as you "
                    "keep the Secrets themselves",
                    secrets));
  }
}

Result<ExitCode> run_backup(const BackupCommandOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(auto format, structured_output_format(o.output));
  const bool to_stdout = o.file == "-";
  if (to_stdout && format)
    return fail(usage("-o prints the manifest on stdout, where -f - writes the archive; give one"));
  if (to_stdout && ctx.streams().out_is_terminal)
    return fail(usage("refusing to write a binary archive to a terminal: redirect stdout, or give -f FILE"));
  ops::BackupOptions options;
  options.node_key_prefixes = split_prefixes(o.node_keys);
  options.all_jobs = o.all_jobs;
  options.include_secrets = o.include_secrets;
  options.allow_partial = o.allow_partial;
  auto& err = ctx.streams().err;
  const bool progress = ctx.streams().err_is_terminal;
  if (progress) options.on_progress = [&err](std::string_view what) { err << "\r\033[K" << what << std::flush; };
  // complete
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  // run
  const std::string context = client->config().context;
  auto collected = ops::collect_backup(*client, options, context);
  if (progress) err << "\r\033[K" << std::flush;
  GPUCTL_TRY_ASSIGN(ops::BackupContents contents, std::move(collected));
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  GPUCTL_TRY_ASSIGN(ops::BackupArchive archive, ops::build_backup_archive(contents, options, now.count()));
  const std::string file = o.file.empty() ? ops::default_backup_file_name(context, now.count()) : o.file;
  if (util::cancelled()) return fail(Errc::cancelled, "backup interrupted; nothing was written");
  if (to_stdout) {
    ctx.streams().out.write(archive.bytes.data(), static_cast<std::streamsize>(archive.bytes.size()));
    ctx.streams().out.flush();
  } else {
    GPUCTL_TRY(util::write_file_atomically(file, archive.bytes, 0600));
  }
  warn_about(contents, options, ctx);
  if (format) {
    ctx.streams().out << render_structured(archive.manifest, *format);
  } else {
    std::ostream& summary = to_stdout ? err : ctx.streams().out;
    print_line(summary, fmt::format("backup written to {}: {}", to_stdout ? "stdout" : file,
                                    ops::describe_counts(archive.manifest)));
  }
  return ExitCode::ok;
}

std::string inspect_text(const json& m) {
  const json& cluster = m.value("cluster", json::object());
  std::string text = fmt::format("format:   {}\ngpuctl:   {}\ncluster:  {} ({}, context {})\ncreated:  {}\n",
                                 m.value("formatVersion", 0), m.value("gpuctlVersion", ""), cluster.value("server", ""),
                                 cluster.value("version", ""), cluster.value("context", ""), m.value("createdAt", ""));
  text += fmt::format("{:<40} {}\n", "RESOURCE", "COUNT");
  for (const auto& k : m.value("kinds", json::array())) {
    text += fmt::format("{:<40} {}\n", k.value("resource", ""), k.value("count", 0));
  }
  for (const auto& g : m.value("gaps", json::array())) {
    text += fmt::format("gap: {}: {}\n", g.value("resource", ""), g.value("reason", ""));
  }
  if (const auto& ns = m.value("notServed", json::array()); !ns.empty()) {
    std::vector<std::string> names;
    for (const auto& n : ns) names.push_back(n.get<std::string>());
    text += fmt::format("not served by the cluster: {}\n", fmt::join(names, ", "));
  }
  return text;
}

Result<ExitCode> run_inspect(const InspectOptions& o, AppContext& ctx) {
  GPUCTL_TRY_ASSIGN(auto format, structured_output_format(o.output));
  GPUCTL_TRY_ASSIGN(std::string bytes, read_input_file(o.file));
  if (!ops::looks_like_archive(bytes))
    return fail(usage(fmt::format("{}: is not a gpuctl backup archive (not gzip-compressed)", input_name(o.file))));
  GPUCTL_TRY_ASSIGN(ops::ReadArchive archive, ops::read_backup_archive(bytes, input_name(o.file)));
  if (format) {
    ctx.streams().out << render_structured(archive.manifest, *format);
    return ExitCode::ok;
  }
  const std::string text = inspect_text(archive.manifest);
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    print_line(ctx.streams().out, std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  return ExitCode::ok;
}

CLI::App* register_inspect(CLI::App& backup, AppContext& ctx) {
  auto o = std::make_shared<InspectOptions>();
  auto* cmd = backup.add_subcommand("inspect", "Check a backup archive and print its manifest");
  document(*cmd, ctx.help(),
           {R"(Reads the whole archive and checks it as restore would (gzip and tar integrity, every file against
its sha256 in the manifest, the format version), then prints the manifest: gpuctl and cluster
versions, the context, the time, and per resource the number of objects. Nothing is sent.)",
            {{"Is the archive whole, and what does it hold?",
              "gpuctl backup inspect gpuctl-backup-prod-20261206T120000Z.tar.gz"},
             {"How many objects of each kind, for a script",
              "gpuctl backup inspect backup.tar.gz -o json | jq '.kinds[] | {resource, count}'"}}});
  completes(cmd->add_option("FILE", o->file, "The archive (- for stdin)"), ctx.help(), ValueKind::file)->required();
  add_output_flag(*cmd, ctx.help(), o->output, {"text", "json", "yaml"});
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_inspect(*o, ctx); }; });
  return cmd;
}

}  // namespace

void register_backup(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<BackupCommandOptions>();
  auto* cmd = app.add_subcommand("backup",
                                 "Save the cluster's GPU admin state (node labels, taints, cordons, "
                                 "quotas, volumes, GPU jobs, ...) into one archive");
  document(*cmd, ctx.help(),
           {R"(Writes one .tar.gz holding, as readable YAML with one file per object: every node's labels,
annotations, taints and cordon; namespaces; ResourceQuotas and LimitRanges; PriorityClasses,
RuntimeClasses and StorageClasses; PersistentVolumes and PersistentVolumeClaims (definitions, not
data); GPU Jobs that have not finished (--all-jobs: every unfinished Job); the device plugin's
DaemonSet and the ConfigMaps it reads; and where the cluster serves them DRA DeviceClasses and
DeviceTaintRules, Kueue and KAI queues, the GPU Operator's ClusterPolicy. Status, uid,
resourceVersion, managedFields and other server-set fields are left out. Secrets only with
--include-secrets (those the kept Jobs and DaemonSets reference). manifest.yaml, first in the
archive, has the format version, gpuctl and cluster versions, the context, the time, and each
file's sha256.

The file is created 0600 under a temporary name in the target folder, synced and renamed: a crash
or Ctrl-C never leaves a partial archive under the final name. A kind the cluster refuses to list
(RBAC) fails the backup with nothing written (exit 1) unless --allow-partial, which records the gap.)",
            {{"gpuctl-backup-<context>-<UTC time>.tar.gz in the current folder", "gpuctl backup"},
             {"Only nvidia.com/ and gpuctl.io/ node keys, to a chosen file",
              "gpuctl backup --node-keys nvidia.com/,gpuctl.io/ -f /var/backups/gpu-state.tar.gz"},
             {"Stream it elsewhere", "gpuctl backup -f - | ssh backup-host 'cat > gpu-state.tar.gz'"}}});
  completes(cmd->add_option("-f,--filename", o->file,
                            "Where to write the archive (- for stdout); default "
                            "gpuctl-backup-<context>-<UTC time>.tar.gz"),
            ctx.help(), ValueKind::file);
  cmd->add_option("--node-keys", o->node_keys,
                  "Keep only node labels, annotations and taints whose key starts with one of these "
                  "comma-separated prefixes (default: all)");
  cmd->add_flag("--all-jobs", o->all_jobs, "Keep every unfinished Job, not only those requesting GPUs");
  cmd->add_flag("--include-secrets", o->include_secrets,
                "Also keep the Secrets the kept Jobs and DaemonSets reference (the archive then holds them)");
  cmd->add_flag("--allow-partial", o->allow_partial,
                "Write the archive even when a kind cannot be listed, recording the gap in the manifest");
  add_output_flag(*cmd, ctx.help(), o->output, {"text", "json", "yaml"});
  CLI::App* inspect = register_inspect(*cmd, ctx);
  cmd->callback([o, cmd, inspect, &ctx] {
    if (!cmd->got_subcommand(inspect)) ctx.run = [o, &ctx] { return run_backup(*o, ctx); };
  });
}

}  // namespace gpuctl::cli
