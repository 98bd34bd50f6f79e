"""TFM301: a TF1 program's probe of the cluster's ports (rules/_port_probes.py)
goes once the training runs on a strategy, which waits for its peers itself;
before a ParameterServerStrategy is made (it connects then) it stays."""

from __future__ import annotations

from migrate.codemod.engine import migrate_source
from tests.test_tfm301_feed_input import READER_JOB

PROBE = '''

def wait_for_ports(addresses, timeout=60.0):
    deadline = time.time() + timeout
    for address in addresses:
        host, port = address.rsplit(":", 1)
        while time.time() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex((host, int(port))) == 0:
                    break
            time.sleep(0.1)


def main(_):
'''


def with_probe(source: str, call_before: str) -> str:
    source = source.replace("import numpy as np\n", "import socket\nimport time\n\nimport numpy as np\n")
    source = source.replace("\n\ndef main(_):\n", PROBE, 1)
    probe_call = '    wait_for_ports(FLAGS.ps_hosts.split(",") + FLAGS.worker_hosts.split(","))\n'
    assert call_before in source
    return source.replace(call_before, probe_call + call_before, 1)


def test_a_probe_before_the_synchronous_training_goes_with_its_imports():
    source = with_probe(READER_JOB, "    with tf.train.MonitoredTrainingSession(")
    result = migrate_source(source, path="job.py")
    assert "MultiWorkerMirroredStrategy(" in result.output
    out = result.output
    compile(out, "job.py", "exec")
    assert "wait_for_ports" not in out and "import socket" not in out and "import time" not in out
    assert migrate_source(out, path="job.py").output == out


ASYNC_JOB = READER_JOB.replace(
    "        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),\n"
    "                                             replicas_to_aggregate=workers, total_num_replicas=workers)\n",
    "        opt = tf.train.GradientDescentOptimizer(0.1)\n").replace(
    "    hooks = [opt.make_session_run_hook(FLAGS.task_index == 0), tf.train.StopAtStepHook(last_step=100)]\n",
    "    hooks = [tf.train.StopAtStepHook(last_step=100)]\n")


def test_a_probe_after_the_parameter_server_strategy_is_made_goes():
    source = with_probe(ASYNC_JOB, "    with tf.train.MonitoredTrainingSession(")
    out = migrate_source(source, path="job.py").output
    assert "ParameterServerStrategy(" in out
    assert "wait_for_ports" not in out and "import socket" not in out


def test_a_probe_before_the_parameter_server_strategy_is_made_stays():
    source = with_probe(ASYNC_JOB, "    cluster = tf.train.ClusterSpec(")
    out = migrate_source(source, path="job.py").output
    assert "ParameterServerStrategy(" in out
    assert out.index("    wait_for_ports(") < out.index("ParameterServerStrategy(")
    assert "import socket" in out
