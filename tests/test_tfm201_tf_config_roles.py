"""A program that reads TF_CONFIG by hand and maps its task type to its own
job names (Cloud ML Engine / Azure ML call the chief ``master``; the program
trains it as the worker of the same index): the resolver takes the job name
and index the Server got. TFConfigClusterResolver would hand
MultiWorkerMirroredStrategy TF_CONFIG's ``master``, which it rejects."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from migrate.codemod.engine import migrate_source

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "data" / "check" / "clusters" / "tf_config_master.py"
MAPPED_RESOLVER = (
    "cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(\n"
    '        spec, task_type=role, task_id=index, rpc_layer="grpc")'
)


def _migrated() -> str:
    result = migrate_source(PROGRAM.read_text(), path=str(PROGRAM))
    assert not result.manual_work, [d.message for d in result.manual_work]
    return result.output


def test_the_resolver_takes_the_programs_own_role_mapping():
    out = _migrated()
    assert MAPPED_RESOLVER in out
    assert "TFConfigClusterResolver" not in out
    assert out.index('role = "worker" if role == "master" else role') < out.index(MAPPED_RESOLVER)
    assert "tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)" in out


def test_a_tf_config_program_without_its_own_mapping_keeps_tf_config_resolver():
    plain = PROGRAM.read_text().replace('    role = "worker" if role == "master" else role\n', "")
    assert plain != PROGRAM.read_text()
    out = migrate_source(plain).output
    assert "cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()" in out
    assert "SimpleClusterResolver" not in out


def _run(program: Path) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = {"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "master", "index": 0}}
    env = dict(os.environ, TF_CONFIG=json.dumps(config), CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, str(program)], check=False, env=env, capture_output=True, text=True,
                          timeout=180)


def test_the_migrated_program_trains_as_its_master_task(tmp_path):
    migrated = tmp_path / "migrated.py"
    migrated.write_text(_migrated())
    done = _run(migrated)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len([line for line in done.stdout.splitlines() if line.startswith("loss ")]) == 6
    # what TF_CONFIG's own resolver would have done with the same task
    tf_config_resolver = tmp_path / "tf_config_resolver.py"
    tf_config_resolver.write_text(migrated.read_text().replace(
        MAPPED_RESOLVER, "cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()"))
    failed = _run(tf_config_resolver)
    assert failed.returncode != 0 and "Unrecognized task_type: master" in failed.stderr
