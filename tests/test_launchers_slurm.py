"""Slurm batch scripts migrate with the program they start (migrate/launchers/
slurm.py, shell.py): fixtures we wrote in the two shapes HPC projects ship --
one ``srun`` per role with host lists from ``scontrol show hostnames``, and one
``srun`` step whose tasks take their roles from Slurm's environment -- each
rewritten with its comments kept and idempotent; counts the script does not
spell as numbers, and resolvers that do not count their tasks, get located
diagnostics; a migrated batch script runs as it is on loopback under an
emulated Slurm (SLURM_PROCID, SLURM_STEP_NODELIST...) through
SlurmClusterResolver."""

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
from migrate.launchers.topology import EVERY_TASK_A_WORKER, MWMS, PSS, Topology, of_program

ROOT = Path(__file__).resolve().parent.parent
PS_FLAGS = Topology(Path("train.py"), PSS, chief_flag=True)
MIRRORED = Topology(Path("train.py"), MWMS, chief_flag=False)


def _rewrite(text: str, topology: Topology, name: str = "train.slurm"):
    result = rewrite_launcher(Path(name), text, [topology])
    assert result is not None
    again = rewrite_launcher(Path(name), result.text, [topology])
    assert again is not None and again.text == result.text, "a second run changes nothing"
    assert all(e.fixed for e in again.edits), "nothing is left to do once rewritten"
    return result


PER_ROLE = """\
#!/bin/bash
#SBATCH --job-name=regression
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:30:00
# One task per node: the first node holds the variables, the others train.

module load tensorflow/1.15
NODES=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
PS_HOSTS=${NODES[0]}:2222
WORKER_HOSTS=${NODES[1]}:2222,${NODES[2]}:2222

srun --nodes=1 --ntasks=1 -w ${NODES[0]} python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS \\
    --job_name=ps --task_index=0 > ps.log 2>&1 &
srun --nodes=1 --ntasks=1 -w ${NODES[1]} python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS \\
    --job_name=worker --task_index=0 > worker0.log 2>&1 &
srun --nodes=1 --ntasks=1 -w ${NODES[2]} python train.py --ps_hosts=$PS_HOSTS --worker_hosts=$WORKER_HOSTS \\
    --job_name=worker --task_index=1 > worker1.log 2>&1 &
wait
echo "job finished"
"""


def _command(out: str, needle: str) -> str:
    """The (continued) command of ``out`` holding ``needle``, as one line."""
    joined = out.replace("\\\n", "")
    [line] = [line for line in joined.splitlines() if needle in line]
    return line


def test_per_role_script_starts_a_chief_on_a_node_of_its_own():
    result = _rewrite(PER_ROLE, PS_FLAGS)
    out = result.text
    # the allocation grows by the chief's node; the chief's address is on it, named like the others
    assert "#SBATCH --nodes=4\n" in out and "#SBATCH --nodes=3" not in out
    assert "WORKER_HOSTS=${NODES[1]}:2222,${NODES[2]}:2222\nCHIEF_HOSTS=${NODES[3]}:2222\n" in out
    chief = _command(out, "--job_name=chief")
    assert chief.startswith("srun --nodes=1 --ntasks=1 -w ${NODES[3]} python train.py")
    assert "--task_index=0" in chief and "> chief.log" in chief
    assert not chief.rstrip().endswith("&"), "the chief runs in the foreground"
    assert out.count("--chief_hosts=$CHIEF_HOSTS") == 4
    # the ps and workers serve until the chief ends; the script exits with its status
    assert "\nwait\n" in out.split("--job_name=chief")[1] and out.rstrip().endswith("exit $chief_status")
    # comments and layout kept
    assert "# One task per node: the first node holds the variables, the others train.\n" in out
    assert "#SBATCH --time=00:30:00\n" in out and 'echo "job finished"' in out
    assert _command(out, "--job_name=ps").startswith("srun --nodes=1 --ntasks=1 -w ${NODES[0]} python")
    assert {e.line for e in result.edits} == {3, 15}


def test_per_role_script_loses_its_ps_for_multi_worker_mirrored():
    out = _rewrite(PER_ROLE, MIRRORED).text
    assert "--job_name=ps" not in out and "ps.log" not in out
    assert out.count("--job_name=worker") == 2 and "\nwait\n" in out
    assert "# One task per node" in out and "#SBATCH --nodes=3\n" in out


def test_per_role_script_with_literal_hosts_runs_the_chief_beside_worker_0():
    text = textwrap.dedent("""\
        #!/bin/bash
        #SBATCH --ntasks=3
        HOSTS="--ps_hosts=node01:2222 --worker_hosts=node02:2222,node03:2222"
        srun -n1 -w node01 python train.py $HOSTS --job_name=ps --task_index=0 &
        srun -n1 -w node02 python train.py --ps_hosts=node01:2222 --worker_hosts=node02:2222,node03:2222 --job_name=worker --task_index=0 &
        srun -n1 -w node03 python train.py --ps_hosts=node01:2222 --worker_hosts=node02:2222,node03:2222 --job_name=worker --task_index=1 &
        wait
        """)
    result = _rewrite(text, PS_FLAGS)
    chief = _command(result.text, "--job_name=chief")
    # worker 0's node, the next port there; one more task in the allocation
    assert chief.startswith("srun -n1 -w node02 python train.py") and "--chief_hosts=node02:2223" in chief
    assert "#SBATCH --ntasks=4\n" in result.text
    assert any("beside worker 0" in e.message for e in result.edits)


def test_per_role_script_in_a_loop_gets_a_located_diagnostic():
    text = textwrap.dedent("""\
        #!/bin/bash
        #SBATCH -N 3
        for i in 1 2; do
          srun -N1 -n1 python train.py --job_name=worker --task_index=$((i-1)) &
        done
        srun -N1 -n1 python train.py --job_name=ps --task_index=0
        """)
    result = rewrite_launcher(Path("job.sbatch"), text, [PS_FLAGS])
    assert result is not None and result.text == text
    [edit] = result.edits
    assert edit.code == "TFM504" and not edit.fixed and edit.line == 4 and "worker 0" in edit.message


STEP = """\
#!/bin/bash
#SBATCH -N 3
#SBATCH --ntasks-per-node=1
#SBATCH -t 01:00:00
# every task runs the same program: Slurm's task id says which role it plays
module load tensorflow
srun -u python train.py --epochs 3  # output unbuffered
"""
RESOLVED_PS = Topology(Path("train.py"), PSS, chief_flag=False, slurm_jobs=(("chief", 1), ("ps", 1), ("worker", 2)))
RESOLVED_WORKERS = Topology(Path("train.py"), MWMS, chief_flag=False, slurm_jobs=(("worker", 2),))


def test_one_step_script_starts_as_many_tasks_as_the_resolver_counts():
    result = _rewrite(STEP, RESOLVED_PS)
    out = result.text
    assert "#SBATCH -N 4\n" in out
    # the ps and workers serve forever: srun ends them once the chief exits
    assert "srun --wait=60 -u python train.py --epochs 3  # output unbuffered\n" in out
    assert "# every task runs the same program: Slurm's task id says which role it plays\n" in out
    counted = next(e for e in result.edits if "4 tasks (was 3)" in e.message)
    assert counted.line == 2 and counted.fixed
    # a MultiWorkerMirroredStrategy job: the ps tasks' slots go, no --wait (every task ends)
    out = _rewrite(STEP, RESOLVED_WORKERS).text
    assert "#SBATCH -N 2\n" in out and "--wait" not in out


@pytest.mark.parametrize("script, topology, expected", [
    # srun's own count, and the nodes it needs at one task per node
    (STEP.replace("srun -u", "srun -n 3 -u"), RESOLVED_PS, ("srun --wait=60 -n 4 -u", "#SBATCH -N 4\n")),
    (STEP.replace("#SBATCH -N 3\n", "#SBATCH -N 3\n#SBATCH --ntasks=3\n"), RESOLVED_PS,
     ("#SBATCH --ntasks=4\n", "#SBATCH -N 4\n")),
    # two tasks per node: two workers fill one node
    (STEP.replace("#SBATCH -N 3\n#SBATCH --ntasks-per-node=1\n", "#SBATCH --nodes 2\n#SBATCH --ntasks-per-node 2\n"),
     RESOLVED_WORKERS, ("#SBATCH --nodes 1\n", "#SBATCH --ntasks-per-node 2\n")),
])
def test_the_task_count_is_set_where_the_script_gives_it(script, topology, expected):
    out = _rewrite(script, topology).text
    for piece in expected:
        assert piece in out


@pytest.mark.parametrize("script, line, why", [
    (STEP.replace("-N 3", "-N $NUM_NODES"), 2, "`$NUM_NODES` (line 2) is not a number"),
    # five tasks do not fill nodes of two
    (STEP.replace("--ntasks-per-node=1", "--ntasks-per-node=2"), 2, "5 tasks do not fill its nodes"),
])
def test_a_count_that_cannot_be_set_is_left_with_a_located_diagnostic(script, line, why):
    topology = Topology(Path("train.py"), PSS, False, (("chief", 1), ("ps", 1), ("worker", 3)))
    result = rewrite_launcher(Path("train.slurm"), script, [topology])
    assert result is not None and result.text == script
    [edit] = result.edits
    assert edit.code == "TFM504" and not edit.fixed and edit.line == line and why in edit.message


def test_a_resolver_without_a_chief_is_reported_not_counted():
    topology = Topology(Path("train.py"), PSS, False, (("ps", 1), ("worker", 3)))
    result = rewrite_launcher(Path("train.slurm"), STEP, [topology])
    assert result.text == STEP
    [edit] = result.edits
    assert not edit.fixed and "exactly one chief" in edit.message


def test_the_topology_reads_the_resolver_jobs_in_its_order():
    code = textwrap.dedent("""\
        import tensorflow as tf
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            jobs={"worker": 2, "ps": 1, "chief": 1}, port_base=2222)
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        """)
    topology = of_program(Path("train.py"), code)
    assert topology.slurm_jobs == (("chief", 1), ("ps", 1), ("worker", 2))
    computed = code.replace('{"worker": 2, "ps": 1, "chief": 1}', "{'chief': 1, 'ps': 1, 'worker': n - 2}")
    assert of_program(Path("train.py"), computed).slurm_jobs == ()
    assert of_program(Path("train.py"), code.replace("SlurmClusterResolver", "TFConfigClusterResolver")
                      ).slurm_jobs is None
    default = code.replace('\n    jobs={"worker": 2, "ps": 1, "chief": 1}, port_base=2222', "")
    assert of_program(Path("train.py"), default).slurm_jobs == EVERY_TASK_A_WORKER


def test_a_resolver_making_every_task_a_worker_takes_the_script_as_it_is():
    mirrored = Topology(Path("train.py"), MWMS, False, EVERY_TASK_A_WORKER)
    result = rewrite_launcher(Path("train.slurm"), STEP, [mirrored])
    assert result.text == STEP and result.edits == []
    # a ParameterServerStrategy job still needs its chief counted
    pss = Topology(Path("train.py"), PSS, False, EVERY_TASK_A_WORKER)
    [edit] = rewrite_launcher(Path("train.slurm"), STEP, [pss]).edits
    assert not edit.fixed and "has no jobs" in edit.message


def test_an_unclosed_quote_in_the_program_command_is_reported_with_its_line():
    text = PER_ROLE.replace("--job_name=worker --task_index=1 >", '--job_name="worker --task_index=1 >')
    with pytest.raises(LauncherError) as error:
        rewrite_launcher(Path("train.slurm"), text, [PS_FLAGS])
    assert (error.value.line, error.value.column) == (18, 16)


# --------------------------------------------------------------------------- CLI


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "legacy_reference" / "async_ps.py", project / "train.py")
    (project / "slurm").mkdir()
    (project / "slurm" / "train.slurm").write_text(PER_ROLE)
    return project


def test_cli_diff_output_and_write_modes_on_a_batch_script(tmp_path, capsys):
    project = _project(tmp_path)
    script = project / "slurm" / "train.slurm"
    assert cli.main([str(project), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "slurm/train.slurm" in out and "TFM504" in out and "+#SBATCH --nodes=4" in out
    assert script.read_text() == PER_ROLE, "diff mode writes nothing"
    migrated = tmp_path / "migrated"
    cli.main([str(project), "-o", str(migrated), "--no-progress"])
    assert script.read_text() == PER_ROLE
    written = (migrated / "slurm" / "train.slurm").read_text()
    assert "--job_name=chief" in written and "#SBATCH --nodes=4" in written
    capsys.readouterr()
    cli.main([str(project), "--write", "--no-progress"])
    assert script.read_text() == written
    capsys.readouterr()
    # a second run finds the script as the program needs it
    cli.main([str(project), "--no-progress"])
    assert "train.slurm" not in capsys.readouterr().out


# --------------------------------------------------------------------------- emulated Slurm, loopback

# A ParameterServerStrategy program whose cluster comes from Slurm, in the
# shape TensorFlow's SlurmClusterResolver documents: every task of one srun
# step runs it; the resolver says which role it plays.
RESOLVED_PROGRAM = '''\
import json
import os

import tensorflow as tf

# task 0 coordinates (the jobs are ordered by name), then the ps, then the workers
cluster_resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
    jobs={"chief": 1, "ps": 1, "worker": 2}, port_base=int(os.environ.get("TRAIN_PORT_BASE", "8888")))
cluster = cluster_resolver.cluster_spec()
if cluster_resolver.task_type in ("ps", "worker"):
    server = tf.distribute.Server(cluster, job_name=cluster_resolver.task_type,
                                  task_index=cluster_resolver.task_id, protocol="grpc", start=True)
    server.join()

strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    weight = tf.Variable(3.0)
    optimizer = tf.keras.optimizers.SGD(0.1)


@tf.function
def train_step():
    def replica_step():
        with tf.GradientTape() as tape:
            loss = tf.square(weight - 1.0)
        optimizer.apply_gradients([(tape.gradient(loss, weight), weight)])
        return loss

    return strategy.run(replica_step)


losses = [coordinator.schedule(train_step) for _ in range(8)]
coordinator.join()
with open(os.environ["LOSS_LOG"], "w") as f:
    json.dump([float(loss.fetch()) for loss in losses], f)
'''

# srun as far as these scripts use it: --ntasks/-n tasks (else the job's),
# each with Slurm's step variables, all on this host; --wait ends the others
# that long after the first task exits
FAKE_SRUN = '''\
import os, subprocess, sys, time
args, ntasks, wait = sys.argv[1:], int(os.environ["SLURM_NTASKS"]), None
while args and args[0].startswith("-"):
    option = args.pop(0)
    name, _, value = option.partition("=")
    if name in ("-n", "--ntasks", "-W", "--wait") and not value:
        value = args.pop(0)
    if name in ("-n", "--ntasks"):
        ntasks = int(value)
    if name in ("-W", "--wait"):
        wait = float(value)
env = {**os.environ, "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_STEP_NODELIST": "localhost",
       "SLURM_STEP_TASKS_PER_NODE": str(ntasks), "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(ntasks)))}
tasks = [subprocess.Popen(args, env={**env, "SLURM_PROCID": str(i)}) for i in range(ntasks)]
while all(t.poll() is None for t in tasks):
    time.sleep(0.1)
deadline = time.time() + (wait if wait is not None else 1e9)
while any(t.poll() is None for t in tasks) and time.time() < deadline:
    time.sleep(0.1)
for t in tasks:
    if t.poll() is None:
        t.terminate()
sys.exit(max(t.wait() for t in tasks))
'''


def _free_port_block(n: int) -> int:
    for base in range(21000, 60000, 97):
        sockets = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free block of ports")


@pytest.mark.slow  # four TensorFlow processes: about a minute on a busy machine
def test_migrated_batch_script_trains_through_slurm_cluster_resolver(tmp_path):
    """The one-step batch script, rewritten for a program whose
    SlurmClusterResolver counts a chief, one ps and two workers, run as it is
    under an emulated Slurm on loopback: four tasks start, the chief trains
    every step, srun ends the serving tasks, the script ends."""
    pytest.importorskip("tensorflow")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(RESOLVED_PROGRAM)
    (project / "train.slurm").write_text(STEP.replace(" --epochs 3", ""))
    assert cli.main([str(project), "--write", "--no-progress"]) in (0, 1)
    script = (project / "train.slurm").read_text()
    assert "#SBATCH -N 4\n" in script and "srun --wait=60" in script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!{sys.executable}\n{FAKE_SRUN}")
    (bin_dir / "module").write_text("#!/bin/sh\n")
    (bin_dir / "python").symlink_to(sys.executable)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    # sbatch's part: the job's task count from the directives (nodes x tasks per node)
    nodes = int(script.split("#SBATCH -N ", 1)[1].split()[0])
    losses = tmp_path / "losses.json"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", "SLURM_NTASKS": str(nodes),
           "TRAIN_PORT_BASE": str(_free_port_block(4)), "LOSS_LOG": str(losses), "TF_CPP_MIN_LOG_LEVEL": "2"}
    # the serving tasks are ended 2 s (not 60) after the chief exits
    output, _ = run_in_own_group(["bash", "-c", script.replace("--wait=60", "--wait=2")], cwd=project, env=env,
                                 timeout=180)
    assert losses.exists(), output.decode()[-3000:]
    trained = json.loads(losses.read_text())
    assert len(trained) == 8 and trained[-1] < trained[0]
    assert output != b"(timed out)", "the script ends once the chief is done"


def _slurm_mapped_program() -> str:
    """legacy_reference/async_ps.py with its roles mapped by hand from
    Slurm's environment, as HPC projects wrote them: the first task serves
    the variables, the others train, one task per node."""
    source = (ROOT / "legacy_reference" / "async_ps.py").read_text()
    legacy_roles = '''def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
'''
    assert legacy_roles in source
    source = source.replace(legacy_roles, '''def roles_from_slurm(num_ps=1, port=2222):
    nodes = os.environ["SLURM_JOB_NODELIST"].split(",")
    rank = int(os.environ["SLURM_PROCID"])
    hosts = ["%s:%d" % (node, port) for node in nodes]
    if rank < num_ps:
        return hosts[:num_ps], hosts[num_ps:], "ps", rank
    return hosts[:num_ps], hosts[num_ps:], "worker", rank - num_ps


def main(_):
    ps_hosts, worker_hosts, job_name, task_index = roles_from_slurm()
''')
    return source.replace("FLAGS.job_name", "job_name").replace("FLAGS.task_index", "task_index")


def test_a_program_mapping_slurm_roles_by_hand_is_told_to_build_slurm_cluster_resolver(tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(_slurm_mapped_program())
    (project / "train.slurm").write_text(STEP)
    assert cli.main([str(project), "--no-progress"]) == 1
    out = capsys.readouterr().out
    # the program: no chief can be added to a cluster Slurm's environment makes; the resolver that can
    program_says = out.split("train.py:", 1)[1]
    assert "TFM201" in program_says and "SlurmClusterResolver(jobs={\"chief\": 1" in program_says
    assert "SLURM_JOB_NODELIST, SLURM_PROCID" in program_says
    # the batch script: located at its count, what it must ask for
    [script_says] = [line for line in out.splitlines() if "train.slurm:" in line]
    assert ":2:1: TFM504" in script_says and "asks for 3 task(s)" in script_says
    assert (project / "train.slurm").read_text() == STEP


def test_host_lists_the_script_computes_get_a_located_diagnostic_not_a_guess():
    loop = PER_ROLE.replace("WORKER_HOSTS=${NODES[1]}:2222,${NODES[2]}:2222\n", textwrap.dedent("""\
        WORKER_HOSTS=""
        for node in "${NODES[@]:1}"; do
            WORKER_HOSTS="${WORKER_HOSTS:+$WORKER_HOSTS,}$node:2222"
        done
        """))
    result = rewrite_launcher(Path("train.slurm"), loop, [PS_FLAGS])
    assert result.text == loop
    [edit] = result.edits
    assert edit.code == "TFM504" and not edit.fixed and edit.line == 13 and "assign once" in edit.message
    # from the environment: nothing in the script to read
    from_env = PER_ROLE.replace("WORKER_HOSTS=${NODES[1]}:2222,${NODES[2]}:2222\n", "")
    [edit] = rewrite_launcher(Path("train.slurm"), from_env, [PS_FLAGS]).edits
    assert not edit.fixed and edit.line == 14


def test_check_reads_the_legacy_job_from_a_per_role_batch_script(tmp_path):
    from migrate.launchers.legacy import plan

    script = tmp_path / "train.slurm"
    script.write_text(PER_ROLE.replace("--task_index=0 >", "--task_index=0 --batch_size=64 >"))
    found = plan(script)
    assert (found.program, found.ps, found.workers) == (tmp_path / "train.py", 1, 2)
    assert found.args == ("--batch_size=64",)


def test_a_synchronous_program_mapping_slurm_tasks_to_ps_is_told_every_task_is_a_worker(capsys):
    source = (ROOT / "legacy_reference" / "sync_replicas.py").read_text()
    from_tf_config = """    tf_config = json.loads(os.environ["TF_CONFIG"])
    cluster_def = tf_config["cluster"]
    job_name = tf_config["task"]["type"]
    task_index = int(tf_config["task"]["index"])
"""
    assert from_tf_config in source
    source = source.replace(from_tf_config, """    hosts = ["%s:2222" % node for node in os.environ["SLURM_JOB_NODELIST"].split(",")]
    rank = int(os.environ["SLURM_PROCID"])
    cluster_def = {"ps": hosts[:1], "worker": hosts[1:]}
    job_name = "ps" if rank == 0 else "worker"
    task_index = 0 if rank == 0 else rank - 1
""")
    from migrate.codemod.engine import migrate_source

    result = migrate_source(source, path="train.py")
    [said] = [d for d in result.diagnostics if d.code == "TFM201" and not d.fixed]
    assert "MultiWorkerMirroredStrategy has no ps" in said.message
    assert 'SlurmClusterResolver(jobs={"worker": W})' in said.hint


ROLE_FROM_RANK = """\
#!/bin/bash
# run by `srun ./task.sh` on every task: task 0 serves the variables
if [ "$SLURM_PROCID" -eq 0 ]; then ROLE=ps; INDEX=0; else ROLE=worker; INDEX=$((SLURM_PROCID - 1)); fi
exec python train.py --job_name=$ROLE --task_index=$INDEX --data_dir=/scratch/data
"""


@pytest.mark.parametrize("topology, need", [(PS_FLAGS, "the role chief"), (MIRRORED, "no task given the role ps")])
def test_roles_computed_from_the_slurm_rank_get_a_located_diagnostic(topology, need):
    result = rewrite_launcher(Path("task.sh"), ROLE_FROM_RANK, [topology])
    assert result.text == ROLE_FROM_RANK
    [edit] = result.edits
    assert edit.code == "TFM504" and not edit.fixed and edit.line == 4
    assert "--job_name=$ROLE" in edit.message and need in edit.message


def test_a_program_command_quoted_over_several_lines_is_valid_shell_left_with_a_diagnostic():
    text = "#!/bin/bash\n#SBATCH -N 3\nsrun bash -c 'cd $HOME/run && python train.py \\\n  --job_name=worker --task_index=0\n  echo done'\n"
    result = rewrite_launcher(Path("train.slurm"), text, [PS_FLAGS])
    assert result.text == text
    [edit] = result.edits
    assert not edit.fixed and edit.line == 3 and "several lines" in edit.message


def test_cli_reports_a_broken_batch_script_with_its_line_and_leaves_it(tmp_path, capsys):
    project = _project(tmp_path)
    script = project / "slurm" / "train.slurm"
    broken = PER_ROLE.replace("--job_name=worker --task_index=1 >", '--job_name="worker --task_index=1 >')
    script.write_text(broken)
    assert cli.main([str(project), "--write", "--no-progress"]) == 2
    out = capsys.readouterr().out
    assert "train.slurm:18:16" in out and "not closed" in out
    assert script.read_text() == broken


@pytest.mark.parametrize("srun, directives, expected", [
    ("srun -n $SLURM_NTASKS python", "#SBATCH --ntasks=3\n", "#SBATCH --ntasks=4\n"),
    ("srun -n ${SLURM_NNODES} python", "#SBATCH -N 3\n#SBATCH --ntasks-per-node=4\n", "#SBATCH -N 4\n"),
])
def test_an_srun_count_read_from_the_allocation_follows_the_directives(srun, directives, expected):
    text = f"#!/bin/bash\n{directives}{srun} train.py\n"
    out = _rewrite(text, RESOLVED_PS).text
    assert expected in out and srun.replace("srun", "srun --wait=60") in out
