// gpuctl submit: a GPU training Job with the right defaults, checked before it is created, and
// optionally waited for (--wait) or followed (--follow) to its result.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "common_flags.hpp"
#include "gpuctl/kube/manifest.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"
#include "gpuctl/ops/jobs/job_status.hpp"
#include "gpuctl/ops/nodes/nodes.hpp"
#include "gpuctl/ops/submit/avoid_failed_nodes.hpp"
#include "gpuctl/ops/submit/submit.hpp"
#include "gpuctl/ops/submit/submit_preflight.hpp"
#include "gpuctl/output/yaml.hpp"
#include "gpuctl/util/cancel.hpp"
#include "gpuctl/util/time.hpp"
#include "input_file.hpp"
#include "job_lines.hpp"
#include "output_format.hpp"
#include "submit_wait.hpp"
#include "submit_workload.hpp"

namespace gpuctl::cli {
namespace {

using json = nlohmann::json;

struct SubmitOptions {
  ops::SubmitFlags flags;
  std::string filename;
  std::string dry_run;
  std::string output;
  bool wait = false;
  bool follow = false;
  std::string timeout = "0";
  bool parsable = false;
  bool force = false;
  // Set while parsing: NAME got its value from a word after `--` (see register_submit).
  bool name_seen = false;
  bool name_after_separator = false;
};

struct ValidatedSubmit {
  ops::SubmitSpec spec;
  DryRun dry_run = DryRun::none;
  std::optional<OutputFormat> format;
  std::chrono::milliseconds timeout{0};
};

Result<ValidatedSubmit> validate(SubmitOptions& o) {
  ValidatedSubmit v;
  o.flags.from_manifest = !o.filename.empty();
  if (o.name_after_separator) {
    // Every word after `--` is the command: give the word CLI11 took as NAME back to it, so the
    // missing NAME (or a COMMAND beside -f) is refused as such.
    o.flags.command.insert(o.flags.command.begin(), o.flags.name);
    o.flags.name.clear();
    o.name_after_separator = false;
  }
  GPUCTL_TRY_ASSIGN(v.spec, ops::parse_submit_flags(o.flags));
  GPUCTL_TRY_ASSIGN(v.dry_run, parse_dry_run(o.dry_run));
  if (!o.output.empty()) {
    GPUCTL_TRY_ASSIGN(OutputFormat f, parse_output_format(o.output));
    v.format = f;
  }
  auto timeout = util::parse_duration(o.timeout);
  if (!timeout) return fail(usage("--timeout: " + timeout.error().message));
  v.timeout = *timeout;
  if ((o.wait || o.follow) && v.dry_run != DryRun::none) {
    return fail(usage("--wait and --follow cannot be combined with --dry-run: nothing is created to wait for"));
  }
  if (o.wait && o.follow) return fail(usage("--follow already waits for the job; give one of --wait and --follow"));
  if (v.timeout.count() > 0 && !o.wait && !o.follow) return fail(usage("--timeout needs --wait or --follow"));
  if (o.parsable && v.format) return fail(usage("--parsable and -o both choose the output; give one of them"));
  if (v.spec.avoid_failed_nodes && !o.wait && !o.follow && v.dry_run == DryRun::none) {
    return fail(
        usage("--avoid-failed-nodes needs --wait or --follow: gpuctl labels a failed node while it watches the job"));
  }
  if (o.follow && v.format) return fail(usage("-o cannot be combined with --follow: stdout carries the job's logs"));
  return v;
}

Result<json> read_manifest(const std::string& path) {
  GPUCTL_TRY_ASSIGN(std::string text, read_input_file(path));
  return kube::parse_manifest(text, input_name(path));
}

std::string gpu_phrase(const ops::BuiltJob& built) {
  if (!built.claim_template.is_null()) return ops::describe_claim_template(built.claim_template) + " per pod";
  const json& job = built.job;
  std::string resource = ops::requested_gpu_resource(job);
  if (resource.empty()) return "no GPUs";
  json pod = {{"spec", job["spec"]["template"]["spec"]}};
  auto requests = kube::pod_requests(pod);
  return fmt::format("{} {} per pod", requests.at(resource).to_string(), resource);
}

Result<ExitCode> run_submit(SubmitOptions& o, AppContext& ctx) {
  // validate (no I/O)
  GPUCTL_TRY_ASSIGN(ValidatedSubmit v, validate(o));
  json manifest;
  if (v.spec.from_manifest) {
    GPUCTL_TRY_ASSIGN(manifest, read_manifest(o.filename));
    if (is_workload_manifest(manifest)) {  // a JobSet or a PyTorchJob: cli/submit_workload.cpp
      return submit_workload(
          ctx, {v.spec, manifest, o.filename, v.dry_run, v.format, o.parsable, o.force, o.wait || o.follow});
    }
    GPUCTL_TRY(ops::check_manifest(manifest, o.filename));  // before any request
  }
  // complete: the nodes say which label names the product and which taints mark the pools.
  GPUCTL_TRY_ASSIGN(kube::Client * client, ctx.client());
  GPUCTL_TRY_ASSIGN(std::string ns, ctx.namespace_name());
  bool explicit_namespace = !ctx.globals().namespace_name.empty();
  if (v.spec.from_manifest && !explicit_namespace) {
    if (auto manifest_ns = kube::namespace_of(manifest); !manifest_ns.empty()) {
      ns = manifest_ns;
    }
  }
  GPUCTL_TRY_ASSIGN(ops::SubmitPlan plan,
                    ops::plan_submission(*client, v.spec, manifest, ns, explicit_namespace, o.filename));
  ops::BuiltJob& built = plan.built;
  const std::string name = kube::name_of(built.job);
  for (const auto& notice : plan.notices) print_line(ctx.streams().err, notice);
  for (const auto& w : built.warnings) ctx.warn(w);

  // pre-flight: refuse what can never run, before anything exists.
  const std::vector<ops::PreflightFinding>& findings = plan.findings;
  bool refused = false;
  for (const auto& f : findings) {
    if (f.severity == ops::FindingSeverity::warning) {
      ctx.warn(f.message);
    } else if (o.force) {
      ctx.warn("--force: submitting although " + f.message);
    } else {
      print_line(ctx.streams().err, "refused (" + f.check + "): " + f.message);
      refused = true;
    }
  }
  if (refused) {
    print_line(ctx.streams().err,
               fmt::format("error: job {}/{} was not submitted; fix the above, or pass --force to submit it anyway", ns,
                           name));
    return (o.wait || o.follow) ? ExitCode::refused_before_run : ExitCode::refused;
  }

  // run
  auto& out = ctx.streams().out;
  ops::SentSubmission sent{built.job, built.claim_template, built.service, {}};
  if (v.dry_run != DryRun::client) {
    GPUCTL_TRY_ASSIGN(sent, ops::send_submission(*client, built, v.dry_run == DryRun::server));
  }
  for (const auto& w : sent.warnings) ctx.warn(w);
  const char* suffix = v.dry_run == DryRun::client   ? " (dry run)"
                       : v.dry_run == DryRun::server ? " (server dry run)"
                                                     : "";
  if (o.parsable) {
    print_line(out, ns + '/' + name);
  } else if (v.format && (*v.format == OutputFormat::json || *v.format == OutputFormat::yaml)) {
    // With a claim template or a Service, every object as kubectl prints several: a v1 List,
    // in the order they are sent.
    json items = json::array();
    if (!sent.claim_template.is_null()) items.push_back(sent.claim_template);
    items.push_back(sent.job);
    if (!sent.service.is_null()) items.push_back(sent.service);
    json document = items.size() == 1 ? sent.job : json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
    out << render_structured(document, *v.format);
  } else if (v.format && *v.format == OutputFormat::name) {
    if (!sent.claim_template.is_null()) {
      print_line(out, "resourceclaimtemplate.resource.k8s.io/" + kube::name_of(sent.claim_template));
    }
    print_line(out, "job.batch/" + name);
    if (!sent.service.is_null()) print_line(out, "service/" + kube::name_of(sent.service));
  } else {
    // The human summary: what will run where, and every default gpuctl chose.
    auto& summary = o.follow ? ctx.streams().err : out;
    print_line(summary,
               fmt::format("job {}/{} {}{}: {}", ns, name,
                           v.dry_run == DryRun::none ? "submitted" : "would be submitted", suffix, gpu_phrase(built)));
    for (const auto& note : built.notes) print_line(summary, "  " + note);
    if (v.dry_run == DryRun::server) {
      summary << fmt::format("  the API server admitted {}the Job{} and a pod built from its template\n",
                             built.claim_template.is_null() ? "" : "the ResourceClaimTemplate, ",
                             built.service.is_null() ? "" : ", its Service");
    }
  }
  if (!o.wait && !o.follow) return ExitCode::ok;
  out << std::flush;
  return wait_and_report(ctx, *client, ns, name,
                         {v.timeout, o.follow, o.parsable || v.format.has_value(), v.spec.avoid_failed_nodes});
}

// The help: the defaults a Job gets (with the values of the constants), what the pre-flight
// checks refuse, and the exit codes of --wait and --follow.
CommandDoc submit_doc() {
  return {fmt::format(R"(The Job gets, unless told otherwise:
  GPU requests equal to limits, restartPolicy Never, backoffLimit {} (--backoff-limit),
  a podFailurePolicy under which pods lost to drains, preemption or eviction are replaced without
  counting as failures (--count-disruptions turns it off), ttlSecondsAfterFinished {} (a week;
  --ttl-after-finished, or 'none' to keep finished jobs), and with --gpu-type a node selector on the
  product label the cluster's nodes carry plus tolerations for the taints every node of that type
  carries (read from the nodes, never hard-coded). A -f manifest is completed with the same defaults
  where it says nothing; what it says stays.

-f also takes a jobset.x-k8s.io/v1alpha2 JobSet and a kubeflow.org/v1 PyTorchJob where the cluster
serves them (else exit 6, naming what to install): every pod template gets the pod defaults above;
a JobSet's Jobs get backoffLimit and the podFailurePolicy, the JobSet ttlSecondsAfterFinished; a
PyTorchJob's replicas restartPolicy Never, its runPolicy backoffLimit and ttlSecondsAfterFinished
(it has no podFailurePolicy). The pre-flight checks count every template times its pods. --wait
and --follow take a Job only.

GPUs as Dynamic Resource Allocation devices: with --device-class CLASS the pods claim --gpus
devices of that DeviceClass through a ResourceClaimTemplate NAME-gpus (with --gpu-type, a CEL
selector on the driver's productName), created just before the Job and owned by it, so deleting
the Job deletes it; a refused Job takes it back out. gpuctl does the same on its own, with class
gpu.nvidia.com and a line on stderr, when no node offers nvidia.com/gpu, no DeviceClass serves it
as an extended resource and NVIDIA's DRA driver publishes GPUs (--gpu-resource nvidia.com/gpu
keeps the extended resource). --dry-run=client -o yaml prints both objects as a v1 List.

Distributed training (--nodes N --gpus-per-node G, Slurm's names): an Indexed Job of N pods that
all run at once, one per node (required pod anti-affinity on kubernetes.io/hostname), and a headless
Service NAME (owned by the Job) through which pod i is reachable as NAME-i.NAME. Each pod gets
MASTER_ADDR=NAME-0.NAME, MASTER_PORT={}, WORLD_SIZE=N, RANK and NODE_RANK (its index), and
torchrun's PET_NNODES, PET_NPROC_PER_NODE=G, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, so
`torchrun train.py` needs no arguments; an --env of the same name wins. A failed pod is replaced
alone under its index. Nothing starts the pods together unless a gang scheduler does: with Kueue,
--queue LOCALQUEUE creates the job suspended and Kueue admits all its pods at once; without it
gpuctl warns (check gang). --completions and --parallelism make a plain parallel job.

--avoid-failed-nodes (with --wait or --follow): the pods require nodes without the job's own label
avoid.gpuctl.io/NAME-HASH; while gpuctl waits, a pod that fails for a cause that blames its node
(NVML errors, a lost GPU, an Xid, a driver too old or mismatched, no CUDA device; not CUDA out of
memory nor NCCL) gets that node labelled, so the Job controller's next pod goes elsewhere, and
the labels are removed when the job finishes (Ctrl-C or --timeout leave them, and say how to
remove them). It needs permission to patch nodes; a retry scheduled before the label lands may
still go to the same node.

Before creating anything, gpuctl refuses (exit code 3, 126 with --wait or --follow, unless
--force) a job that no schedulable node could ever hold (for DRA devices: no schedulable node holds
that many untainted devices the class and --gpu-type match), one the namespace's GPU quota (also
CLASS.deviceclass.resource.k8s.io/devices and count/resourceclaims.resource.k8s.io) or LimitRange
would refuse, one whose --volume claims are missing or not Bound, a job over --nodes N when fewer
than N schedulable nodes could each hold one pod, and a --queue that Kueue does not serve. It warns when the GPUs exist
but are busy now, and when a selector is outside the CEL gpuctl evaluates (it cannot count).

--wait and --follow exit with the job's result: 0 when it succeeded, the failed container's exit
code, 124 when it ran past --active-deadline, 125 when it failed with no exit code; the last line
on stderr says which (job NS/NAME succeeded, failed: ..., was not submitted). While the job
is pending they say why (the scheduler's verdict, quota refusals) on stderr.)",
                      ops::kDefaultBackoffLimit, ops::kDefaultTtlAfterFinishedSeconds, ops::kRendezvousPort),
          {{"Eight A100s for a training run, waiting for the result",
            R"(gpuctl submit bert-large -n ml --image nvcr.io/nvidia/pytorch:24.05-py3 --gpus 8 --gpu-type A100 \
      --volume datasets:/data:ro --volume checkpoints:/ckpt --wait -- python train.py --epochs 3)"},
           {"Four nodes of 8 H100s each, one torchrun per node, admitted together by Kueue",
            R"(gpuctl submit llama-ft -n ml --image nvcr.io/nvidia/pytorch:24.05-py3 --nodes 4 --gpus-per-node 8 \
      --gpu-type H100 --queue team-a --wait -- torchrun train.py)"},
           {"Two H100s as DRA devices of NVIDIA's DeviceClass; the claim and the Job that would be created",
            "gpuctl submit smoke --image busybox --gpus 2 --gpu-type H100 --device-class gpu.nvidia.com "
            "--dry-run=client -o yaml -- nvidia-smi"},
           {"See the Job that would be created",
            "gpuctl submit smoke --image busybox --gpus 1 --dry-run=client -o yaml -- nvidia-smi"},
           {"Check a manifest against the server (quota, LimitRange, strict field validation), create nothing",
            "gpuctl submit -f job.yaml --dry-run=server"},
           {"A JobSet (the JobSet controller must be installed), its pods checked before it is created",
            "gpuctl submit -f jobset.yaml --gpu-type H100"},
           {"In a script: the job's name, then its exit code",
            R"(job=$(gpuctl submit -f job.yaml --parsable) && gpuctl jobs -n "${job%/*}")"}}};
}

// NAME and COMMAND, the positionals, and -f: what the job is and runs.
void add_job_source_flags(CLI::App& cmd, HelpData& help, const std::shared_ptr<SubmitOptions>& o) {
  auto& f = o->flags;
  auto* name = cmd.add_option("name", f.name, "NAME of the job (DNS label; with -f, optional: the manifest's name)");
  // CLI11 fills NAME with the first word after `--` when none came before it, which would turn
  // `submit --image x --gpus 1 -- python train.py` into a job "python" running "train.py".
  // Only while parsing can that be seen: CLI11 has then already kept the `--` among the
  // subcommand's remaining arguments. The check records it and never refuses a value.
  cmd.validate_positionals();
  name->check(CLI::Validator(
      [o, &cmd](std::string&) {
        if (!o->name_seen) {
          o->name_seen = true;
          auto rest = cmd.remaining();
          o->name_after_separator = std::find(rest.begin(), rest.end(), "--") != rest.end();
        }
        return std::string();
      },
      "", "name-before-separator"));
  cmd.add_option("command", f.command, "COMMAND [ARGS...] after --: the container's command");
  completes(
      cmd.add_option("-f,--filename", o->filename,
                     "A batch/v1 Job, JobSet or PyTorchJob manifest (YAML or JSON; - for stdin) to check and complete"),
      help, ValueKind::file);
}

// The container: image, GPUs, CPU and memory, environment, volumes. Beside -f only --gpu-type is
// taken; the manifest's container says the rest (ops::parse_submit_flags refuses them).
void add_container_flags(CLI::App& cmd, ops::SubmitFlags& f) {
  cmd.add_option("--image", f.image, "Container image");
  cmd.add_option("--gpus", f.gpus, "GPUs per pod (0 for a job without GPUs)");
  cmd.add_option("--gpu-type", f.gpu_type,
                 "GPU product, as the nodes' labels name it or part of it (A100, H100-80GB, tesla-t4)");
  cmd.add_option("--gpu-resource", f.gpu_resource,
                 "Extended resource the GPUs are counted in (default nvidia.com/gpu; e.g. nvidia.com/mig-1g.10gb)");
  cmd.add_option("--device-class", f.device_class,
                 "Claim the GPUs as DRA devices of this DeviceClass (e.g. gpu.nvidia.com) through a "
                 "ResourceClaimTemplate, instead of an extended resource");
  cmd.add_option("--cpu", f.cpu, "CPU request per pod (e.g. 8, 500m)");
  cmd.add_option("--memory", f.memory, "Memory request per pod (e.g. 64Gi)");
  cmd.add_option("--cpu-limit", f.cpu_limit, "CPU limit per pod");
  cmd.add_option("--memory-limit", f.memory_limit, "Memory limit per pod");
  cmd.add_option("--env", f.env, "K=V environment variable (repeatable)");
  cmd.add_option("--volume", f.volumes, "CLAIM:/path[:ro]: mount a PersistentVolumeClaim (repeatable)");
}

// The Job around the container: retries, lifetime, priority, labels and annotations, colocation.
void add_job_policy_flags(CLI::App& cmd, ops::SubmitFlags& f) {
  cmd.add_option("--backoff-limit", f.backoff_limit,
                 fmt::format("Retries of failed pods before the job fails (default {})", ops::kDefaultBackoffLimit));
  cmd.add_option("--ttl-after-finished", f.ttl_after_finished,
                 "Delete the finished job and its pods after this long (default 7d; 'none' keeps them)");
  cmd.add_option("--active-deadline", f.active_deadline, "Fail the job when it runs longer than this (e.g. 12h)");
  cmd.add_option("--priority-class", f.priority_class, "PriorityClass of the pods");
  cmd.add_option("--label", f.labels, "K=V label on the job and its pods (repeatable)");
  cmd.add_option("--annotation", f.annotations, "K=V annotation on the job and its pods (repeatable)");
  cmd.add_option("--colocate-with", f.colocate_with, "Label selector of pods this job's pods must share a node with");
  cmd.add_option("--colocate-topology", f.colocate_topology,
                 "Topology key for --colocate-with (default kubernetes.io/hostname)");
  cmd.add_flag("--count-disruptions", f.count_disruptions,
               "Count evictions and preemptions against --backoff-limit (no podFailurePolicy)");
  cmd.add_flag("--avoid-failed-nodes", f.avoid_failed_nodes,
               "With --wait/--follow: a pod that fails for its node's GPU (NVML, Xid, lost GPU, driver) keeps the "
               "job's next attempts off that node");
}

// How many pods, where, and who starts them: Slurm's --nodes/--gpus-per-node, kubectl's
// --completions/--parallelism (as `kubectl create job` lacks them, the Job's field names), Kueue.
void add_parallel_flags(CLI::App& cmd, ops::SubmitFlags& f) {
  cmd.add_option("--nodes", f.nodes,
                 "Run a distributed job of N pods, one per node: an Indexed Job, a headless Service for rendezvous, "
                 "torchrun's environment");
  cmd.add_option("--gpus-per-node", f.gpus_per_node, "With --nodes: the GPUs of each pod (its node's share)");
  cmd.add_option("--completions", f.completions, "Pods that must succeed (a plain parallel job; default 1)");
  cmd.add_option("--parallelism", f.parallelism, "Pods that run at once (a plain parallel job; default 1)");
  cmd.add_option("--queue", f.queue,
                 "Hand the job to Kueue: create it suspended in this LocalQueue, which admits all its pods at once");
}

// What gpuctl does with the Job: dry runs, output, waiting, --force.
void add_run_flags(CLI::App& cmd, HelpData& help, SubmitOptions& o) {
  add_dry_run_flag(cmd, help, o.dry_run);
  add_output_flag(cmd, help, o.output, {"", "json", "yaml", "name"});
  cmd.add_flag("--wait", o.wait, "Wait for the job to finish; exit with its result");
  cmd.add_flag("--follow", o.follow, "Stream the job's logs until it finishes; exit with its result");
  cmd.add_option("--timeout", o.timeout,
                 "With --wait/--follow: give up waiting after this long (exit 1; the job keeps running)");
  cmd.add_flag("--parsable", o.parsable, "Print only namespace/name");
  cmd.add_flag("--force", o.force,
               "Submit even when a pre-flight check refuses (the refusals are printed as warnings)");
}

}  // namespace

void register_submit(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<SubmitOptions>();
  auto* cmd =
      app.add_subcommand("submit", "Submit a GPU training Job with safe defaults, checked before it is created");
  document(*cmd, ctx.help(), submit_doc());
  add_job_source_flags(*cmd, ctx.help(), o);
  add_container_flags(*cmd, o->flags);
  add_job_policy_flags(*cmd, o->flags);
  add_parallel_flags(*cmd, o->flags);
  add_run_flags(*cmd, ctx.help(), *o);
  cmd->callback([o, &ctx] { ctx.run = [o, &ctx] { return run_submit(*o, ctx); }; });
}

}  // namespace gpuctl::cli
