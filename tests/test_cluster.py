"""The local-cluster launcher (migrate.runtime.cluster) and its task bootstrap
(migrate.runtime.taskboot), driven with tiny non-TF programs from tests/programs/
plus one real TensorFlow ps/worker run."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from migrate.runtime.cluster import (
    Fault,
    extract_stack_dump,
    network_isolation_available,
    run_cluster,
)

PROGRAMS = Path(__file__).resolve().parent / "programs"
# Generous: the two cores are shared with other TensorFlow processes.
TIMEOUT = 90.0


def program(name: str) -> Path:
    return PROGRAMS / name


def roles(result) -> dict[str, dict]:
    """The ROLE line show_role.py printed, per task name."""
    out = {}
    for t in result.tasks:
        line = next(
            ln for ln in result.log_text(t.job, t.index).splitlines() if ln.startswith("ROLE ")
        )
        out[t.name] = json.loads(line[len("ROLE ") :])
    return out


def assert_all_dead(pids) -> None:
    for pid in pids:
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            continue
        assert status == psutil.STATUS_ZOMBIE, f"pid {pid} still {status}"


def wait_all_dead(pids, limit: float = 20.0) -> list[int]:
    """Pids still alive (not dead, not zombie) after waiting up to ``limit``."""
    deadline = time.monotonic() + limit
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def every_pid(result) -> list[int]:
    return [pid for t in result.tasks for pid in t.pids]


# --------------------------------------------------------------------------- role passing


def test_flags_style_passes_roles_hosts_and_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"stale": true}')  # must not leak into flags-style tasks
    result = run_cluster(
        program("show_role.py"),
        {"ps": 1, "worker": 2},
        args=["--steps=7"],
        server_only=(),
        timeout=TIMEOUT,
        log_dir=tmp_path,
        env={"TFMIGRATE_TEST_EXTRA": "yes"},
        task_args=lambda job, index: [f"--seed={100 + index}"],
    )
    assert result.ok, result.summary()
    hosts = [h for job_hosts in result.cluster.values() for h in job_hosts]
    assert set(result.cluster) == {"ps", "worker"}
    assert len(result.cluster["ps"]) == 1 and len(result.cluster["worker"]) == 2
    assert all(h.startswith("127.0.0.1:") for h in hosts)
    assert len(set(hosts)) == 3
    ps_flag = "--ps_hosts=" + ",".join(result.cluster["ps"])
    worker_flag = "--worker_hosts=" + ",".join(result.cluster["worker"])
    seen = roles(result)
    for name, role in seen.items():
        job, index = name.split(":")
        assert role["argv"][0] == str(program("show_role.py"))
        assert role["argv"][1:] == [
            f"--job_name={job}",
            f"--task_index={index}",
            ps_flag,
            worker_flag,
            "--steps=7",
            f"--seed={100 + int(index)}",
        ]
        assert role["TF_CONFIG"] is None
        assert role["TFMIGRATE_TASK"] == name
        assert role["TFMIGRATE_LOSS_LOG"] == str(tmp_path / f"losses-{job}-{index}.jsonl")
        assert role["PYTHONUNBUFFERED"] == "1"
        assert role["EXTRA"] == "yes"
        assert role["path0"] == str(PROGRAMS)
        assert role["name"] == "__main__"
    assert set(seen) == {"ps:0", "worker:0", "worker:1"}
    assert (tmp_path / "worker-1.log").exists()


def test_tf_config_style(tmp_path):
    jobs = {"chief": 1, "worker": 2, "ps": 1}
    result = run_cluster(
        program("show_role.py"),
        jobs,
        role_style="tf_config",
        server_only=(),
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    assert list(result.cluster) == ["chief", "worker", "ps"]
    for name, role in roles(result).items():
        job, index = name.split(":")
        config = json.loads(role["TF_CONFIG"])
        assert config == {"cluster": result.cluster, "task": {"type": job, "index": int(index)}}
        assert role["argv"][1:] == []
    hosts = [h for job_hosts in result.cluster.values() for h in job_hosts]
    assert len(hosts) == 4 and all(h.startswith("127.0.0.1:") for h in hosts)


def test_boot_hooks_are_imported_before_the_program(tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "tfm_test_hook.py").write_text(
        "import os\nos.environ['TFMIGRATE_TEST_EXTRA'] = 'set by hook'\n"
    )
    result = run_cluster(
        program("show_role.py"),
        {"worker": 1},
        timeout=TIMEOUT,
        log_dir=tmp_path / "logs",
        env={"PYTHONPATH": str(hooks), "TFMIGRATE_BOOT_HOOKS": " tfm_test_hook ,"},
    )
    assert result.ok, result.summary()
    assert roles(result)["worker:0"]["EXTRA"] == "set by hook"


def test_none_style_gives_no_role_and_no_ports(tmp_path):
    result = run_cluster(
        program("show_role.py"),
        {"client": 1},
        args=["--towers=2"],
        role_style="none",
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    assert result.cluster == {}
    role = roles(result)["client:0"]
    assert role["argv"][1:] == ["--towers=2"]
    assert role["TF_CONFIG"] is None
    assert role["TFMIGRATE_TASK"] == "client:0"


def test_flag_names_can_be_renamed_or_dropped(tmp_path):
    result = run_cluster(
        program("show_role.py"),
        {"ps": 1, "worker": 1},
        server_only=(),
        flag_names={"job": "--job", "index": None, "hosts": "--{job}-addresses"},
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    argv = roles(result)["worker:0"]["argv"][1:]
    assert argv == [
        "--job=worker",
        "--ps-addresses=" + result.cluster["ps"][0],
        "--worker-addresses=" + result.cluster["worker"][0],
    ]


# --------------------------------------------------------------------------- normal runs


def test_ps_is_ready_first_and_ended_when_workers_finish(tmp_path):
    steps = 6
    result = run_cluster(
        program("worker_steps.py"),
        {"ps": 1, "worker": 2},
        args=[f"--steps={steps}", "--alloc_mb=64"],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    # worker_steps.py exits 4 if a ps port refused its connection, and the
    # fake ps only listens 0.3 s after starting: ok proves the readiness wait.
    assert result.ok, result.summary()
    assert not result.timed_out and result.reason == ""
    ps = result.task("ps", 0)
    assert ps.ended_by_launcher
    assert ps.returncode == -signal.SIGTERM
    assert ps.ready_seconds is not None and ps.ready_seconds > 0
    assert "listening" in result.log_text("ps", 0)
    for index in range(2):
        worker = result.task("worker", index)
        assert worker.returncode == 0 and not worker.ended_by_launcher
        assert worker.ready_seconds is None
        assert worker.peak_rss_bytes >= 64 * 2**20  # the ballast it touched
        assert [r.step for r in result.losses_for(worker.name)] == list(range(steps))
        assert "done" in result.log_text("worker", index)
    assert ps.peak_rss_bytes > 0
    assert len(result.losses) == 2 * steps
    assert {r.task for r in result.losses} == {"worker:0", "worker:1"}
    assert [(r.step, r.task) for r in result.losses] == sorted(
        (r.step, r.task) for r in result.losses
    )
    assert result.log_dir == tmp_path and result.wall_time > 0
    assert "ok" in result.summary() and "ps:0" in result.summary()
    assert_all_dead(every_pid(result))


def test_clusters_can_run_concurrently_from_threads(tmp_path):
    # `check` may run a legacy program and its migration side by side.
    def run(name):
        return run_cluster(
            program("worker_steps.py"),
            {"ps": 1, "worker": 1},
            args=["--steps=4"],
            timeout=TIMEOUT,
            log_dir=tmp_path / name,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(run, ["a", "b"])
    assert first.ok, first.summary()
    assert second.ok, second.summary()
    assert not set(first.cluster["ps"] + first.cluster["worker"]) & set(
        second.cluster["ps"] + second.cluster["worker"]
    )
    assert len(first.losses) == len(second.losses) == 4
    assert_all_dead(every_pid(first) + every_pid(second))


def test_reused_log_dir_starts_clean(tmp_path):
    for _ in range(2):
        result = run_cluster(
            program("worker_steps.py"),
            {"worker": 1},
            args=["--steps=3"],
            timeout=TIMEOUT,
            log_dir=tmp_path,
        )
        assert result.ok, result.summary()
        # worker_steps.py resumes after logged steps; a stale loss file would make it log none.
        assert [r.step for r in result.losses] == [0, 1, 2]
        assert "resuming" not in result.log_text("worker", 0)


def test_relative_log_dir_and_other_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    result = run_cluster(
        program("worker_steps.py"),
        {"worker": 1},
        args=["--steps=3"],
        timeout=TIMEOUT,
        log_dir="logs",
        cwd=tmp_path / "elsewhere",
    )
    assert result.ok, result.summary()
    assert result.log_dir == tmp_path / "logs"
    assert [r.step for r in result.losses] == [0, 1, 2]


def test_temporary_log_dir_is_kept(tmp_path):
    result = run_cluster(program("worker_steps.py"), {"worker": 1}, timeout=TIMEOUT)
    try:
        assert result.ok, result.summary()
        assert result.log_dir.is_dir() and (result.log_dir / "worker-0.log").exists()
    finally:
        for path in result.log_dir.iterdir():
            path.unlink()
        result.log_dir.rmdir()


# --------------------------------------------------------------------------- failures


def test_crashing_worker_tears_everything_down(tmp_path):
    result = run_cluster(
        program("crash.py"),
        {"ps": 1, "worker": 2},
        # worker:0 would need 1000 s for its steps: only the teardown ends it.
        args=[
            "--only=worker:1",
            "--wait_for=worker:0",  # so worker:0 surely runs (and can dump its stack)
            "--exit_code=3",
            "--steps=100000",
            "--step_delay=0.01",
        ],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert not result.ok and not result.timed_out
    assert result.reason.startswith("worker:1 exited with code 3")
    assert "about to crash" in result.reason
    crashed = result.task("worker", 1)
    assert crashed.returncode == 3 and not crashed.ended_by_launcher
    for job, index in (("ps", 0), ("worker", 0)):
        survivor = result.task(job, index)
        assert survivor.ended_by_launcher
        # SIGUSR1 only dumped stacks; the teardown's SIGTERM ended it.
        assert survivor.returncode == -signal.SIGTERM
        # The SIGUSR1 stack dump, taken before the teardown.
        assert survivor.stack_dump and "most recent call first" in survivor.stack_dump
    assert "in run_steps" in result.task("worker", 0).stack_dump
    assert "in serve_forever" in result.task("ps", 0).stack_dump
    assert result.losses_for("worker:1") and result.losses_for("worker:0")
    assert_all_dead(every_pid(result))


def test_uncaught_exception_reads_like_plain_python(tmp_path):
    result = run_cluster(
        program("crash.py"),
        {"worker": 1},
        args=["--exit_code=1"],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert not result.ok
    assert result.task("worker", 0).returncode == 1
    assert "ValueError: injected crash in crash.py" in result.reason
    log = result.log_text("worker", 0)
    traceback = log[log.index("Traceback") :]
    assert "crash.py" in traceback
    assert "taskboot" not in traceback and "runpy" not in traceback


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["--exit_code=0"], 0), (["--exit_code=5"], 5), (["--exit_code=1"], 1)],
)
def test_taskboot_exit_codes_match_plain_python(repo_root, argv, code):
    def run(*prefix):
        env = {**os.environ, "PYTHONPATH": str(repo_root)}
        env.pop("TFMIGRATE_LOSS_LOG", None)
        return subprocess.run(
            [sys.executable, *prefix, str(program("crash.py")), *argv],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    plain = run()
    booted = run("-m", "migrate.runtime.taskboot")
    assert plain.returncode == booted.returncode == code
    assert plain.stdout == booted.stdout
    assert plain.stderr.splitlines()[-1:] == booted.stderr.splitlines()[-1:]


def test_server_that_dies_before_ready_fails_the_run(tmp_path):
    # show_role.py exits at once: a ps that never listens.
    result = run_cluster(
        program("show_role.py"), {"ps": 1, "worker": 1}, timeout=TIMEOUT, log_dir=tmp_path
    )
    assert not result.ok and not result.timed_out
    assert result.reason.startswith("ps:0 exited with code 0 before its port accepted connections")
    assert result.task("worker", 0).pid is None  # clients never started


def test_hung_worker_times_out_with_stack_dump(tmp_path):
    result = run_cluster(
        program("hang.py"),
        {"ps": 1, "worker": 2},
        args=["--only=worker:0", "--steps=3"],
        timeout=15.0,  # ample for startup on a loaded machine; the run always takes this long
        log_dir=tmp_path,
    )
    assert result.timed_out and not result.ok
    assert "still running" in result.reason and "worker:0" in result.reason
    assert "worker:1" not in result.reason  # it finished its steps
    hung = result.task("worker", 0)
    assert hung.ended_by_launcher
    assert "in wait_for_a_chief_that_never_comes" in hung.stack_dump
    assert result.task("worker", 1).returncode == 0
    assert result.task("worker", 1).stack_dump is None
    assert "in serve_forever" in result.task("ps", 0).stack_dump
    assert "TIMED OUT" in result.summary()
    assert_all_dead(every_pid(result))


def test_extract_stack_dump_stops_at_the_second_dump():
    dump = (
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "a.py", line 3 in serve\n'
        "\n"
        "Current thread 0x00007f02 (most recent call first):\n"
        '  File "b.py", line 9 in main\n'
    )
    text = "some output\n" + dump + dump.replace("serve", "again") + "later output\n"
    extracted = extract_stack_dump(text)
    assert extracted == dump.strip()
    assert extract_stack_dump("no dump here\n") is None


# --------------------------------------------------------------------------- the launcher dies


needs_isolation = pytest.mark.skipif(
    not network_isolation_available(), reason="unshare -rn (user namespaces) unavailable"
)
ISOLATION_MODES = [
    pytest.param(False, id="plain"),
    pytest.param(True, id="isolated", marks=needs_isolation),
]


def start_driver(repo_root, log_dir, isolate=False):
    return subprocess.Popen(
        [sys.executable, str(program("launcher_driver.py")), str(log_dir)]
        + (["--isolate"] if isolate else []),
        env={**os.environ, "PYTHONPATH": str(repo_root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def wait_for_task_pids(driver, log_dir, limit=60.0) -> list[int]:
    """The pids the three hang.py tasks print once running."""
    deadline = time.monotonic() + limit
    logs = [log_dir / name for name in ("ps-0.log", "worker-0.log", "worker-1.log")]
    while time.monotonic() < deadline and driver.poll() is None:
        found = [re.search(r"pid=(\d+)", p.read_text()) if p.exists() else None for p in logs]
        if all(found):
            return [int(m.group(1)) for m in found]
        time.sleep(0.1)
    driver.kill()
    driver.wait()
    pytest.fail("cluster tasks did not start: " + str(driver.stdout.read()))


def kill_leftovers(pids) -> None:
    """If the test failed, the orphaned tasks are no longer our children (so the
    conftest guard cannot see them): kill them by pid."""
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if "migrate.runtime.taskboot" in " ".join(proc.cmdline()):
                proc.kill()
        except psutil.Error:
            pass


@pytest.mark.parametrize("isolate", ISOLATION_MODES)
def test_sigkilled_launcher_takes_its_tasks_along(repo_root, tmp_path, isolate):
    driver = start_driver(repo_root, tmp_path, isolate)
    pids = []
    try:
        pids = wait_for_task_pids(driver, tmp_path)
        for pid in pids:
            parent = psutil.Process(pid).parent()
            if isolate:  # the task's parent is the launcher inside the namespace
                parent = parent.parent()
            assert parent.pid == driver.pid
        driver.kill()
        driver.wait()
        assert wait_all_dead(pids) == []
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()
        kill_leftovers(pids)


@pytest.mark.parametrize("isolate", ISOLATION_MODES)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signalled_launcher_tears_down_then_reraises(repo_root, tmp_path, sig, isolate):
    driver = start_driver(repo_root, tmp_path, isolate)
    pids = []
    try:
        pids = wait_for_task_pids(driver, tmp_path)
        driver.send_signal(sig)
        driver.wait(timeout=60)
        # Torn down before the launcher exited, not by PDEATHSIG afterwards.
        assert_all_dead(pids)
        assert driver.returncode == -sig
        # SIGTERM (the teardown) leaves a stack dump; PDEATHSIG's SIGKILL would not.
        assert "most recent call first" in (tmp_path / "ps-0.log").read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()
        kill_leftovers(pids)


def test_orphan_guard_in_conftest_catches_a_leaked_process(repo_root, tmp_path):
    (tmp_path / "conftest.py").write_text((repo_root / "tests" / "conftest.py").read_text())
    (tmp_path / "test_leak.py").write_text(
        "import subprocess, sys\n"
        "def test_leaks():\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "def test_clean():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
    )
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # test_leaks itself passes, its teardown errors; test_clean is unaffected.
    assert "2 passed, 1 error" in inner.stdout, inner.stdout
    assert "ERROR test_leak.py::test_leaks" in inner.stdout
    assert "test left child processes running" in inner.stdout
    assert "time.sleep(60)" in inner.stdout


# --------------------------------------------------------------------------- faults


def test_fault_at_step_kills_and_restarts_the_task(tmp_path):
    steps = 40
    fault = Fault(job="worker", index=0, at_step=10)
    result = run_cluster(
        program("worker_steps.py"),
        {"ps": 1, "worker": 2},
        args=[f"--steps={steps}", "--step_delay=0.05"],
        faults=[fault],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    worker = result.task("worker", 0)
    assert worker.restarts == 1 and len(worker.pids) == 2
    assert worker.returncode == 0
    [event] = result.faults
    assert event.fault == fault
    assert event.step_seen >= 10
    assert event.killed_pid == worker.pids[0]
    assert event.restarted_pid == worker.pids[1] == worker.pid
    log = result.log_text("worker", 0)
    assert "restart 1 of worker:0" in log and "resuming at step" in log
    assert {r.step for r in result.losses_for("worker:0")} == set(range(steps))
    assert result.task("worker", 1).restarts == 0
    assert result.task("ps", 0).ended_by_launcher
    assert_all_dead(every_pid(result))


def test_restart_after_a_kill_mid_record_keeps_the_loss_log_readable(tmp_path):
    """The killed task left half a record and had checkpointed a step it never
    logged: the relaunch starts on a fresh line (its records stay readable) and
    the event's resume offset tells the two incarnations' records apart."""
    from migrate.runtime import check, losslog

    steps = 12
    result = run_cluster(
        program("checkpoint_gap.py"),
        {"worker": 1},
        args=[f"--steps={steps}", "--step_delay=0.02"],
        faults=[Fault(job="worker", index=0, at_step=steps // 2)],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    [event] = result.faults
    data = result.task("worker", 0).loss_path.read_bytes()
    lost = steps // 2 + 1
    assert data[: event.resume_offset].endswith(b'{"step": %d, \n' % lost)  # torn, then ended
    killed = {r.step for r in losslog.parse(data[: event.resume_offset])}
    restarted = {r.step for r in losslog.parse(data[event.resume_offset :])}
    assert killed == set(range(lost))
    assert restarted == set(range(lost + 1, steps))
    assert check.fault_gap(result) == {lost}
    assert_all_dead(every_pid(result))


def test_fault_after_seconds_without_restart_is_not_a_failure(tmp_path):
    fault = Fault(job="worker", index=1, after_seconds=0.5, restart=False, sig=signal.SIGTERM)
    result = run_cluster(
        program("worker_steps.py"),
        {"worker": 2},
        args=["--steps=60", "--step_delay=0.05"],
        faults=[fault],
        timeout=TIMEOUT,
        log_dir=tmp_path,
    )
    assert result.ok, result.summary()
    killed = result.task("worker", 1)
    assert killed.returncode == -signal.SIGTERM and killed.restarts == 0
    [event] = result.faults
    assert event.killed_pid == killed.pid and event.restarted_pid is None
    assert event.step_seen is None
    assert len(result.losses_for("worker:1")) < 60
    assert len(result.losses_for("worker:0")) == 60


def test_stop_when_ends_a_job_that_would_run_on(tmp_path):
    """A job far longer than the caller needs (a script without a step-count
    option) is ended once stop_when holds: a success, marked stopped early,
    every task gone (the ps too), long before the job itself would end."""
    loss_logs = [tmp_path / "losses-worker-0.jsonl", tmp_path / "losses-worker-1.jsonl"]

    def five_steps_each() -> bool:
        return all(p.exists() and p.read_text().count("\n") >= 5 for p in loss_logs)

    result = run_cluster(
        program("worker_steps.py"),
        {"ps": 1, "worker": 2},
        args=["--steps=100000", "--step_delay=0.02"],
        timeout=TIMEOUT,
        log_dir=tmp_path,
        stop_when=five_steps_each,
    )
    assert result.ok and result.stopped_early, result.summary()
    assert "stopped early" in result.summary()
    for worker in ("worker:0", "worker:1"):
        assert 5 <= len(result.losses_for(worker)) < 1000
    assert all(t.ended_by_launcher for t in result.tasks)
    assert result.wall_time < TIMEOUT / 2
    assert not wait_all_dead(every_pid(result))
    with pytest.raises(ValueError):
        run_cluster(program("worker_steps.py"), {"worker": 1}, stop_when=five_steps_each,
                    isolate_network=True, log_dir=tmp_path)


def test_a_task_raising_while_exiting_slowly_fails_a_run_stop_when_would_end(tmp_path):
    """A task that raised an uncaught exception fails the run at once, though
    it takes seconds to exit (as a TensorFlow task does): the other workers
    reaching the caller's stop_when meanwhile do not make the run a success
    with the crashed task's steps missing."""
    worker_log = tmp_path / "losses-worker-0.jsonl"

    def thirty_steps() -> bool:
        return worker_log.exists() and worker_log.read_text().count("\n") >= 30

    result = run_cluster(
        program("crash.py"),
        {"worker": 2},
        args=["--only=worker:1", "--exit_code=1", "--linger=30", "--steps=100000", "--step_delay=0.01"],
        timeout=TIMEOUT,
        log_dir=tmp_path,
        stop_when=thirty_steps,
    )
    assert not result.ok and not result.stopped_early, result.summary()
    assert "worker:1 raised an uncaught exception (ValueError: injected crash in crash.py)" in result.reason
    assert "Traceback" in result.log_text("worker", 1)
    assert result.wall_time < 25
    assert not wait_all_dead(every_pid(result))


def test_fault_validation():
    with pytest.raises(ValueError):
        Fault(job="worker", index=0)
    with pytest.raises(ValueError):
        Fault(job="worker", index=0, at_step=1, after_seconds=1.0)
    with pytest.raises(ValueError, match="unknown task"):
        run_cluster(program("worker_steps.py"), {"worker": 1}, faults=[Fault("ps", 0, at_step=1)])
    with pytest.raises(ValueError, match="server-only"):
        run_cluster(program("worker_steps.py"), {"ps": 1})


# --------------------------------------------------------------------------- network isolation


@needs_isolation
def test_isolated_network_hides_the_host_loopback(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        env = {"TFMIGRATE_TEST_PROBE_PORT": str(listener.getsockname()[1])}
        plain = run_cluster(
            program("probe_port.py"),
            {"worker": 1},
            env=env,
            timeout=TIMEOUT,
            log_dir=tmp_path / "p",
        )
        isolated = run_cluster(
            program("probe_port.py"),
            {"worker": 1},
            env=env,
            timeout=TIMEOUT,
            log_dir=tmp_path / "i",
            isolate_network=True,
        )
    assert plain.ok and not plain.network_isolated
    assert "probe reachable" in plain.log_text("worker", 0)
    assert isolated.ok and isolated.network_isolated, isolated.summary()
    assert "probe unreachable" in isolated.log_text("worker", 0)
    assert "(isolated network)" in isolated.summary()


@needs_isolation
def test_isolated_run_reports_faults_tasks_and_losses(tmp_path):
    fault = Fault(job="worker", index=1, at_step=5)
    result = run_cluster(
        program("worker_steps.py"),
        {"ps": 1, "worker": 2},
        args=["--steps=20", "--step_delay=0.03"],
        faults=[fault],
        timeout=TIMEOUT,
        log_dir=tmp_path,
        task_args=lambda job, index: [f"--tag={job}{index}"],
        isolate_network=True,
    )
    assert result.ok and result.network_isolated, result.summary()
    [event] = result.faults
    assert event.fault == fault and event.step_seen >= 5
    worker = result.task("worker", 1)
    assert worker.restarts == 1 and event.restarted_pid == worker.pid
    assert {r.step for r in result.losses_for("worker:1")} == set(range(20))
    assert result.task("ps", 0).ended_by_launcher
    assert result.log_dir == tmp_path
    assert_all_dead(every_pid(result))


def test_isolated_crash_is_reported_like_a_plain_one(tmp_path):
    # With or without isolation (fallback), the result reads the same.
    result = run_cluster(
        program("crash.py"),
        {"worker": 1},
        args=["--exit_code=6"],
        timeout=TIMEOUT,
        log_dir=tmp_path,
        isolate_network=True,
    )
    assert not result.ok and result.reason.startswith("worker:0 exited with code 6")
    assert result.network_isolated == network_isolation_available()


# --------------------------------------------------------------------------- real TensorFlow


@pytest.mark.parametrize("isolate", ISOLATION_MODES)
def test_real_tensorflow_ps_and_worker(tmp_path, isolate):
    pytest.importorskip("tensorflow")
    steps = 5
    result = run_cluster(
        program("tf_ps_worker.py"),
        {"ps": 1, "worker": 1},
        args=[f"--steps={steps}"],
        timeout=180.0,
        log_dir=tmp_path,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        isolate_network=isolate,
    )
    assert result.ok, result.summary() + "\n" + result.log_text("worker", 0)[-3000:]
    assert result.network_isolated == isolate
    assert "weights on /job:ps/task:0" in result.log_text("worker", 0)
    ps = result.task("ps", 0)
    assert ps.ended_by_launcher and ps.ready_seconds is not None
    losses = result.losses_for("worker:0")
    assert [r.step for r in losses] == list(range(steps))
    assert losses[-1].loss < losses[0].loss  # the ps-held variable really trained
    assert result.task("worker", 0).peak_rss_bytes > 100 * 2**20  # TensorFlow is loaded
    assert_all_dead(every_pid(result))
