"""Launch configurations migrate with the code (migrate/launchers): fixtures we
wrote in the shapes projects ship (Kubeflow TFJob v1 and v1alpha2, a
Kubernetes Job per task with TF_CONFIG, docker-compose, a shell launcher, a
Slurm batch script), each rewritten with its comments kept and idempotent;
the CLI finds them next to the program; a migrated shell launcher runs as it
is on loopback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import textwrap
from pathlib import Path

import pytest
from script_runs import run_in_own_group

from migrate import cli
from migrate.launchers import LauncherError, rewrite_launcher
from migrate.launchers.manifests import load
from migrate.launchers.topology import MWMS, PSS, Topology

ROOT = Path(__file__).resolve().parent.parent
PS_FLAGS = Topology(Path("train.py"), PSS, chief_flag=True)
PS_TF_CONFIG = Topology(Path("train.py"), PSS, chief_flag=False)
MIRRORED = Topology(Path("train.py"), MWMS, chief_flag=False)


def _rewrite(name: str, text: str, topology: Topology) -> str:
    result = rewrite_launcher(Path(name), textwrap.dedent(text), [topology])
    assert result is not None
    again = rewrite_launcher(Path(name), result.text, [topology])
    assert again is not None and again.text == result.text, "a second run changes nothing"
    return result.text


TFJOB_V1 = """\
# Distributed training on the cluster (kubectl apply -f this)
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: trainer  # one job per experiment
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: tensorflow
            image: registry.example/train:3
            command: ["python", "/app/train.py", "--steps=500"]
    Worker:
      replicas: 3  # three trainers
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: tensorflow
            image: registry.example/train:3
            command: ["python", "/app/train.py", "--steps=500"]
"""


def test_tfjob_v1_gets_a_chief_for_parameter_server_strategy():
    out = _rewrite("job.yaml", TFJOB_V1, PS_TF_CONFIG)
    spec = load(out)[0]["spec"]["tfReplicaSpecs"]
    assert list(spec) == ["Chief", "PS", "Worker"]
    assert spec["Chief"]["replicas"] == 1 and spec["Worker"]["replicas"] == 3
    assert spec["Chief"]["restartPolicy"] == "OnFailure"
    assert spec["Chief"]["template"] == spec["Worker"]["template"]
    # comments and layout kept
    assert out.startswith("# Distributed training on the cluster (kubectl apply -f this)\n")
    assert "name: trainer  # one job per experiment" in out and "replicas: 3  # three trainers" in out
    assert '          - name: tensorflow\n            image: registry.example/train:3\n' in out
    assert out.count("# three trainers") == 1


def test_tfjob_v1alpha2_loses_its_ps_for_multi_worker_mirrored():
    text = TFJOB_V1.replace("kubeflow.org/v1", "kubeflow.org/v1alpha2")
    out = _rewrite("job.yaml", text, MIRRORED)
    assert list(load(out)[0]["spec"]["tfReplicaSpecs"]) == ["Worker"]
    assert "replicas: 3  # three trainers" in out


def test_tfjob_with_an_evaluator_keeps_it_apart():
    text = TFJOB_V1 + textwrap.indent(textwrap.dedent("""\
        Evaluator:
          replicas: 1
          template:
            spec:
              containers:
              - name: tensorflow
                image: registry.example/train:3
                command: ["python", "/app/train.py", "--evaluate"]
        """), "    ")
    spec = load(_rewrite("job.yaml", text, PS_TF_CONFIG))[0]["spec"]["tfReplicaSpecs"]
    assert list(spec) == ["Chief", "PS", "Worker", "Evaluator"]
    assert spec["Evaluator"]["replicas"] == 1


def _k8s_task(role: str, index: int, cluster: dict) -> str:
    config = json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})
    return textwrap.dedent(f"""\
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: mnist-{role}-{index}
        spec:
          template:
            metadata:
              labels:
                app: mnist
                task: {role}-{index}
            spec:
              containers:
              - name: trainer
                image: registry.example/mnist:1
                args: ["python", "train.py"]
                env:
                - name: TF_CONFIG
                  value: '{config}'
              restartPolicy: Never
        ---
        apiVersion: v1
        kind: Service
        metadata:
          name: mnist-{role}-{index}
        spec:
          selector:
            app: mnist
            task: {role}-{index}
          ports:
          - port: 2222
        """)


CLUSTER = {"ps": ["mnist-ps-0:2222"], "worker": ["mnist-worker-0:2222", "mnist-worker-1:2222"]}
K8S = "# one Job and one Service per task\n" + "---\n".join(
    _k8s_task(role, i, CLUSTER) for role, i in (("ps", 0), ("worker", 0), ("worker", 1)))


def _configs(out: str) -> dict[str, dict]:
    configs = {}
    for doc in load(out):
        if doc["kind"] != "Job":
            continue
        [env] = doc["spec"]["template"]["spec"]["containers"][0]["env"]
        configs[doc["metadata"]["name"]] = json.loads(env["value"])
    return configs


def test_kubernetes_jobs_with_tf_config_get_a_chief_task_and_service():
    out = _rewrite("k8s.yaml", K8S, PS_TF_CONFIG)
    configs = _configs(out)
    assert sorted(configs) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    assert configs["mnist-chief-0"]["task"] == {"type": "chief", "index": 0}
    for config in configs.values():
        assert config["cluster"]["chief"] == ["mnist-chief-0:2222"]
        assert config["cluster"]["worker"] == CLUSTER["worker"]
    services = [d for d in load(out) if d["kind"] == "Service"]
    chief_service = [s for s in services if s["metadata"]["name"] == "mnist-chief-0"]
    assert chief_service and chief_service[0]["spec"]["selector"]["task"] == "chief-0"
    assert out.startswith("# one Job and one Service per task\n")


def test_kubernetes_jobs_lose_the_ps_for_multi_worker_mirrored():
    out = _rewrite("k8s.yaml", K8S, MIRRORED)
    configs = _configs(out)
    assert sorted(configs) == ["mnist-worker-0", "mnist-worker-1"]
    assert all("ps" not in c["cluster"] for c in configs.values())
    assert "mnist-ps-0" not in out


COMPOSE = """\
services:
  ps:
    image: registry.example/train:3
    command: python train.py --ps_hosts=ps:2222 --worker_hosts=worker0:2222,worker1:2222 --job_name=ps --task_index=0
  worker0:
    image: registry.example/train:3  # the trainer image
    hostname: worker0
    depends_on: [ps]
    command: python train.py --ps_hosts=ps:2222 --worker_hosts=worker0:2222,worker1:2222 --job_name=worker --task_index=0
  worker1:
    image: registry.example/train:3
    hostname: worker1
    depends_on: [ps]
    command: python train.py --ps_hosts=ps:2222 --worker_hosts=worker0:2222,worker1:2222 --job_name=worker --task_index=1
"""


def test_compose_gets_a_chief_service_with_flags():
    out = _rewrite("docker-compose.yml", COMPOSE, PS_FLAGS)
    services = load(out)[0]["services"]
    # named like worker 0, in its place
    assert list(services) == ["ps", "worker0", "chief0", "worker1"]
    assert "--job_name=chief --task_index=0" in services["chief0"]["command"]
    assert services["chief0"]["hostname"] == "chief0"
    for service in services.values():
        assert "--chief_hosts=chief0:2222" in service["command"]
    assert "# the trainer image" in out


def test_compose_loses_the_ps_for_multi_worker_mirrored():
    services = load(_rewrite("docker-compose.yml", COMPOSE, MIRRORED))[0]["services"]
    assert list(services) == ["worker0", "worker1"]
    assert all("ps" not in (s.get("depends_on") or []) for s in services.values())


SHELL = """\
#!/bin/bash
# Starts one ps and two workers on this machine.
set -e
PS_HOSTS=localhost:${PS_PORT:-2222}
WORKER_HOSTS=localhost:${WORKER0_PORT:-2223},localhost:${WORKER1_PORT:-2224}

python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS \\
    --job_name=ps --task_index=0 "$@" > ps.log 2>&1 &
PS_PID=$!
python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS --job_name=worker --task_index=0 "$@" > worker0.log 2>&1 &
W0=$!
python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS --job_name=worker --task_index=1 "$@" > worker1.log 2>&1 &
W1=$!
wait $W0 $W1
kill $PS_PID
echo "training done"
"""


def test_shell_launcher_starts_a_chief_and_ends_the_servers():
    out = _rewrite("run_local.sh", SHELL, PS_FLAGS)
    # read from the environment like the workers' ports, defaulting above them
    assert "CHIEF_HOSTS=localhost:${CHIEF_PORT:-2225}" in out
    chief_lines = [line for line in out.splitlines() if "--job_name=chief" in line]
    assert len(chief_lines) == 1 and not chief_lines[0].rstrip().endswith("&")
    assert "--task_index=0" in chief_lines[0] and "chief.log" in chief_lines[0]
    assert out.count("--chief_hosts=$CHIEF_HOSTS") == 4
    assert "wait $W0 $W1" not in out and "kill $PS_PID" not in out
    assert out.rstrip().endswith("exit $chief_status")
    assert "# Starts one ps and two workers on this machine." in out
    assert 'echo "training done"' in out


def test_shell_launcher_loses_its_ps_for_multi_worker_mirrored():
    out = _rewrite("run_local.sh", SHELL, MIRRORED)
    assert "--job_name=ps" not in out and "PS_PID" not in out
    assert "wait $W0 $W1" in out


def test_slurm_script_that_lets_the_program_pick_roles_gets_a_located_diagnostic():
    text = "#!/bin/bash\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=1\nmodule load tensorflow\nsrun python train.py --epochs 3\n"
    result = rewrite_launcher(Path("train.slurm"), text, [PS_TF_CONFIG])
    assert result is not None and result.text == text
    [edit] = result.edits
    # located at the task count the script must raise, which it names
    assert edit.code == "TFM504" and not edit.fixed and edit.line == 2
    assert "SlurmClusterResolver(jobs={\"chief\": 1" in edit.message and "asks for 4 task(s)" in edit.message


def test_bad_yaml_is_reported_with_its_line():
    with pytest.raises(LauncherError) as error:
        rewrite_launcher(Path("job.yaml"), "kind: TFJob\nspec:\n  x: [train.py\n  y: 2\n", [PS_TF_CONFIG])
    assert error.value.line is not None and error.value.line >= 3


def test_a_launcher_of_another_program_is_left_alone():
    assert rewrite_launcher(Path("run.sh"), SHELL.replace("train.py", "serve.py"), [PS_FLAGS]) is None


# --------------------------------------------------------------------------- CLI


def _project(tmp_path: Path, launcher: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "legacy_reference" / "async_ps.py", project / "train.py")
    (project / "deploy").mkdir()
    (project / "deploy" / "run_local.sh").write_text(launcher)
    return project


def test_cli_migrates_the_launcher_with_the_program_and_reports_it(tmp_path, capsys):
    project = _project(tmp_path, SHELL)
    (project / "deploy" / "broken.yaml").write_text("spec: [train.py\n")
    before = (project / "deploy" / "broken.yaml").read_bytes()
    code = cli.main([str(project), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 2  # the broken YAML could not be processed; the rest still was
    assert "deploy/run_local.sh" in out and "TFM503" in out and "--job_name=chief" in out
    assert "broken.yaml:" in out and "YAML error" in out
    assert (project / "deploy" / "broken.yaml").read_bytes() == before  # diff mode: nothing written
    assert cli.main([str(project), "--no-progress", "--no-launchers"]) == 1
    assert "run_local.sh" not in capsys.readouterr().out


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_migrated_shell_launcher_trains_on_loopback(tmp_path):
    """The migrated program and its migrated launcher, run as they are: the
    chief trains to the last step, the ps and workers are ended, exit 0."""
    pytest.importorskip("tensorflow")
    project = _project(tmp_path, SHELL)
    out = tmp_path / "migrated"
    assert cli.main([str(project), "-o", str(out), "--no-progress"]) in (0, 1)
    launcher = out / "deploy" / "run_local.sh"
    assert "--job_name=chief" in launcher.read_text()
    shutil.copy(out / "train.py", out / "deploy" / "train.py")
    ps, w0, w1, chief = _free_ports(4)
    env = {**os.environ, "PS_PORT": str(ps), "WORKER0_PORT": str(w0), "WORKER1_PORT": str(w1),
           "CHIEF_PORT": str(chief),
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    assert "CHIEF_HOSTS=localhost:${CHIEF_PORT:-2225}" in launcher.read_text()
    text = launcher.read_text().replace("python ", f"{sys.executable} ")
    launcher.write_text(text)
    losses = tmp_path / "losses.jsonl"
    env["TFMIGRATE_LOSS_LOG"] = str(losses)
    output, status = run_in_own_group(["bash", str(launcher), "--steps=12"], cwd=out / "deploy", env=env,
                                      timeout=240)
    chief_log = (out / "deploy" / "chief.log").read_text()
    assert status == 0, output.decode() + chief_log
    assert b"training done" in output
    records = [json.loads(line) for line in losses.read_text().splitlines()]
    assert sorted(r["step"] for r in records) == list(range(12))


# --------------------------------------------------------------------------- check --launcher


def _tf_config_launcher(program: str) -> str:
    cluster = {"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]}
    lines = ["#!/bin/sh", "# the legacy job: one ps, two workers, TF_CONFIG per task"]
    for job, index in (("ps", 0), ("worker", 0), ("worker", 1)):
        config = json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})
        lines.append(f"TF_CONFIG='{config}' python {program} --learning_rate=0.05 --batch_size=32 &")
    return "\n".join([*lines, "wait", ""])


def test_legacy_plan_of_a_shell_launcher_and_of_a_tfjob(tmp_path):
    from migrate.launchers.legacy import LaunchError, plan

    launcher = tmp_path / "run.sh"
    launcher.write_text(_tf_config_launcher("sync_replicas.py"))
    found = plan(launcher)
    assert (found.program, found.ps, found.workers) == (tmp_path / "sync_replicas.py", 1, 2)
    assert found.args == ("--learning_rate=0.05", "--batch_size=32")
    flags = tmp_path / "flags.sh"
    flags.write_text(SHELL.replace('"$@"', "--learning_rate=0.1"))
    assert plan(flags).args == ("--learning_rate=0.1",) and plan(flags).workers == 2
    job = tmp_path / "job.yaml"
    job.write_text(TFJOB_V1)
    tfjob = plan(job)
    assert (tfjob.program.name, tfjob.ps, tfjob.workers, tfjob.args) == ("train.py", 1, 3, ("--steps=500",))
    (tmp_path / "other.sh").write_text("#!/bin/sh\necho nothing to start\n")
    with pytest.raises(LaunchError):
        plan(tmp_path / "other.sh")


def test_check_takes_the_topology_and_arguments_from_the_legacy_launcher(tmp_path):
    """`tfmigrate check --launcher run.sh`: the script it starts, its two
    workers and its arguments, and the equivalence verdict as for the script."""
    pytest.importorskip("tensorflow")
    from migrate.runtime import check

    shutil.copy(ROOT / "legacy_reference" / "sync_replicas.py", tmp_path / "sync_replicas.py")
    launcher = tmp_path / "run.sh"
    launcher.write_text(_tf_config_launcher("sync_replicas.py"))
    out = tmp_path / "out"
    code = check.main(["--launcher", str(launcher), "--steps", "6", "--out", str(out), "--no-plot"])
    report = json.loads((out / "report.json").read_text())
    assert code == 0, report.get("reason")
    assert report["workers"] == 2
    assert report["launcher_args"] == ["--learning_rate=0.05", "--batch_size=32"]
    assert report["comparison"]["steps_compared"] == 6
