"""A program that only serves (a ps/worker standard server for a cluster
whose training runs in other programs, as Kubeflow's TFJob examples start
their ps): its server becomes ``tf.distribute.Server``, the same server in
TF2, and nothing else is added (no resolver nothing would read)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from migrate.codemod.engine import dedent, migrate_source

STANDARD_SERVER = dedent(
    """
    import json
    import logging
    import os

    import tensorflow as tf

    def serve():
        config = json.loads(os.environ.get("TF_CONFIG", "{}"))
        role = config.get("task", {}).get("type")
        index = config.get("task", {}).get("index")
        logging.info("serving as %s:%s", role, index)
        spec = tf.train.ClusterSpec(config.get("cluster"))
        server = tf.train.Server(spec, job_name=role, task_index=index)
        server.join()

    if __name__ == "__main__":
        serve()
    """
)


def test_a_standard_server_becomes_tf_distribute_server_and_nothing_else():
    result = migrate_source(STANDARD_SERVER)
    out = result.output
    assert "server = tf.distribute.Server(spec, job_name=role, task_index=index)" in out
    assert "cluster_resolver" not in out and "compat.v1" not in out
    assert out.replace("tf.distribute.Server(", "tf.train.Server(") == STANDARD_SERVER
    assert not result.manual_work
    assert [d.code for d in result.diagnostics if d.fixed and d.code.startswith("TFM20")] == ["TFM202"]
    assert migrate_source(out).output == out


def test_a_server_that_is_also_a_sessions_target_is_not_a_standard_server():
    client = STANDARD_SERVER.replace("    server.join()\n", "    tf.Session(server.target).run(tf.no_op())\n")
    assert client != STANDARD_SERVER
    out = migrate_source(client, select=["TFM201", "TFM202"]).output
    assert "tf.distribute.Server(" not in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONTRIB_STANDARD_SERVER = dedent(
    """
    import tensorflow as tf

    if __name__ == "__main__":
        server = tf.contrib.distribute.run_standard_tensorflow_server()
        server.join()
    """
)


def test_tf1s_standard_server_function_becomes_the_tf2_guides_server_from_tf_config():
    result = migrate_source(CONTRIB_STANDARD_SERVER)
    out = result.output
    assert "contrib" not in out and not result.manual_work
    assert "cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()" in out
    assert "server = tf.distribute.Server(\n" in out and "job_name=cluster_resolver.task_type" in out
    assert out.index("server = tf.distribute.Server(") < out.index("server.join()")
    assert migrate_source(out).output == out


@pytest.mark.parametrize("source", [STANDARD_SERVER, CONTRIB_STANDARD_SERVER], ids=["train_server", "contrib"])
def test_the_migrated_standard_server_serves_its_task(tmp_path, source):
    program = tmp_path / "standard_server.py"
    program.write_text(migrate_source(source).output)
    ps, worker = _free_port(), _free_port()
    config = {"cluster": {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]},
              "task": {"type": "ps", "index": 0}}
    env = dict(os.environ, TF_CONFIG=json.dumps(config), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen([sys.executable, str(program)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        serving = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", ps), timeout=1).close()
                serving = True
                break
            except OSError:
                time.sleep(0.5)
        assert serving, proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no server"
        time.sleep(1)
        assert proc.poll() is None  # joined: it keeps serving
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()
