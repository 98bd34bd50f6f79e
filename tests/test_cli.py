"""The ``tfmigrate`` command line, through the real console script.

Only the test rules of ``rules_for_tests`` run (``--select TFM99``), so these
tests do not depend on which project rules exist.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import stat
import subprocess
import sys

import pytest
from rules_for_tests import CLEAN, LEGACY, MANUAL, REPO_ROOT, run_tfmigrate, tfmigrate_command

from migrate import __version__


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def snapshot(root) -> dict:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def paths_in_json(proc) -> list[str]:
    return sorted(f["path"] for f in json.loads(proc.stdout)["files"])


# --------------------------------------------------------------------------- basics


def test_version_through_script_and_module(tmp_path):
    proc = run_tfmigrate("--version", cwd=tmp_path, only_test_rules=False)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"tfmigrate {__version__}"
    module = subprocess.run(
        [sys.executable, "-m", "migrate", "--version"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert module.returncode == 0 and module.stdout.strip() == f"tfmigrate {__version__}"


def test_console_script_is_installed():
    assert tfmigrate_command()[0].endswith("tfmigrate"), (
        "run `pip install -e .` for the console script"
    )


def test_rules_lists_code_name_and_summary(tmp_path):
    proc = run_tfmigrate("rules", cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    server = next(line for line in lines if line.startswith("TFM998"))
    assert "test-rename-server" in server
    assert "Rename ``tf.train.Server`` to ``tf.distribute.Server``" in server
    assert any(line.startswith("TFM999") and "test-flag-supervisor" in line for line in lines)


def test_no_paths_is_a_usage_error(tmp_path):
    proc = run_tfmigrate(cwd=tmp_path, only_test_rules=False)
    assert proc.returncode == 2
    assert "PATH" in proc.stderr


def test_bad_plugin_spec_is_reported(tmp_path):
    write(tmp_path / "a.py", CLEAN)
    proc = run_tfmigrate("a.py", cwd=tmp_path, env={"TFMIGRATE_EXTRA_RULES": "nosuchmodule:Rule"})
    assert proc.returncode == 2
    assert "TFMIGRATE_EXTRA_RULES" in proc.stderr and "nosuchmodule" in proc.stderr


# --------------------------------------------------------------------------- read-only mode and exit codes


def test_read_only_prints_diff_and_diagnostics_exit_1(tmp_path):
    source = write(tmp_path / "train.py", LEGACY)
    proc = run_tfmigrate("train.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "--- a/train.py\n+++ b/train.py\n" in proc.stdout
    assert "-server = tf.train.Server(cluster, job_name='ps', task_index=0)\n" in proc.stdout
    assert "+server = tf.distribute.Server(cluster, job_name='ps', task_index=0)\n" in proc.stdout
    assert (
        "train.py:4:10: TFM998 [fixed] tf.train.Server is tf.distribute.Server in TF2"
        in proc.stdout
    )
    assert source.read_text() == LEGACY  # read-only
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("1 file would change, 1 diagnostic (0 need manual work)")


def test_nothing_to_do_exit_0(tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    write(tmp_path / "other.py", "print('no tf here')\n")
    proc = run_tfmigrate(".", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "---" not in proc.stdout
    assert proc.stdout.splitlines()[-1] == (
        "0 files would change, 0 diagnostics (0 need manual work) (2 files checked, 1 without TensorFlow)"
    )


def test_manual_work_alone_exits_1_without_a_diff(tmp_path):
    write(tmp_path / "sv.py", MANUAL)
    proc = run_tfmigrate("sv.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "---" not in proc.stdout
    assert "sv.py:2:6: TFM999 tf.train.Supervisor has no TF2 equivalent" in proc.stdout
    assert "    hint: use a tf.function step" in proc.stdout
    assert "(1 needs manual work)" in proc.stdout


def test_unprocessable_file_exit_2_and_the_others_still_processed(tmp_path):
    write(tmp_path / "good.py", LEGACY)
    bad = write(tmp_path / "bad.py", "import tensorflow as tf\ndef f(:\n    pass\n")
    proc = run_tfmigrate("--write", ".", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.py:2:7: error: syntax error" in proc.stdout
    assert "tf.distribute.Server" in (tmp_path / "good.py").read_text()
    assert bad.read_text() == "import tensorflow as tf\ndef f(:\n    pass\n"
    assert "1 file could not be processed" in proc.stdout


def test_missing_path_exit_2_others_processed(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    proc = run_tfmigrate("a.py", "nope.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nope.py: error: no such file or directory" in proc.stdout
    assert "+server = tf.distribute.Server" in proc.stdout


def test_path_named_like_a_subcommand(tmp_path):
    write(tmp_path / "check" / "job.py", LEGACY)
    proc = run_tfmigrate("./check", cwd=tmp_path)
    assert proc.returncode == 1
    assert "check/job.py:4:10: TFM998" in proc.stdout


# --------------------------------------------------------------------------- --write


def test_write_applies_in_place_keeps_mode_and_is_idempotent(tmp_path):
    source = write(tmp_path / "train.py", LEGACY)
    os.chmod(source, 0o754)
    proc = run_tfmigrate("--write", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout  # everything fixed, nothing left by hand
    assert source.read_text() == LEGACY.replace("tf.train.Server", "tf.distribute.Server")
    assert stat.S_IMODE(source.stat().st_mode) == 0o754
    assert "---" not in proc.stdout  # diffs only in read-only mode
    assert "train.py:4:10: TFM998 [fixed]" in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("1 file changed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # no temp files left
    again = run_tfmigrate("train.py", cwd=tmp_path)
    assert again.returncode == 0 and "---" not in again.stdout


def test_write_with_manual_work_left_exits_1(tmp_path):
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    proc = run_tfmigrate("-w", "a.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "tf.distribute.Server" in (tmp_path / "a.py").read_text()
    assert "TFM999" in proc.stdout


def test_write_and_output_are_exclusive(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    proc = run_tfmigrate("--write", "-o", "out.py", "a.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "not allowed with" in proc.stderr


# --------------------------------------------------------------------------- -o OUT


def test_output_file_to_file_and_into_directory(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    proc = run_tfmigrate("a.py", "-o", "migrated.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "migrated.py").read_text() == LEGACY.replace(
        "train.Server", "distribute.Server"
    )
    assert (tmp_path / "a.py").read_text() == LEGACY
    (tmp_path / "outdir").mkdir()
    proc = run_tfmigrate("a.py", "-o", "outdir", cwd=tmp_path)
    assert proc.returncode == 0
    assert "tf.distribute.Server" in (tmp_path / "outdir" / "a.py").read_text()


def test_output_directory_to_tree(tmp_path):
    src = tmp_path / "src"
    write(src / "pkg" / "train.py", LEGACY)
    write(src / "pkg" / "util.py", "def f():\n    return 1\n")
    write(src / "pkg" / "sv.py", MANUAL)
    write(src / "data" / "config.yaml", "steps: 10\n")
    write(src / "build" / "generated.py", LEGACY)  # default exclude
    notebook = (REPO_ROOT / "tests" / "data" / "cli" / "magics.ipynb").read_bytes()
    (src / "nb").mkdir()
    (src / "nb" / "magics.ipynb").write_bytes(notebook)
    before = snapshot(src)
    proc = run_tfmigrate("src", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 1  # the Supervisor needs manual work
    assert snapshot(src) == before  # the input tree is untouched
    out = snapshot(tmp_path / "out")
    assert sorted(out) == [
        "data/config.yaml",
        "nb/magics.ipynb",
        "pkg/sv.py",
        "pkg/train.py",
        "pkg/util.py",
    ]
    assert out["pkg/train.py"].decode() == LEGACY.replace("train.Server", "distribute.Server")
    assert out["pkg/util.py"] == before["pkg/util.py"]
    assert out["pkg/sv.py"] == before["pkg/sv.py"]
    assert out["data/config.yaml"] == before["data/config.yaml"]
    assert b"tf.distribute.Server(cluster" in out["nb/magics.ipynb"]
    assert "2 files migrated" in proc.stdout


def test_output_takes_exactly_one_input(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    write(tmp_path / "b.py", LEGACY)
    proc = run_tfmigrate("a.py", "b.py", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 2
    assert "exactly one input path" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_output_inside_the_input_tree_is_not_walked(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    first = run_tfmigrate(".", "-o", "out", cwd=tmp_path)
    assert first.returncode == 0
    second = run_tfmigrate(".", "-o", "out", "--format", "json", cwd=tmp_path)
    assert paths_in_json(second) == ["a.py"]


# --------------------------------------------------------------------------- discovery


def test_recursion_respects_gitignore_and_default_excludes(tmp_path):
    write(tmp_path / ".gitignore", "ignored_dir/\nsecret_*.py\n")
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".git" / "hooks" / "x.py", LEGACY)
    write(tmp_path / "keep.py", LEGACY)
    write(tmp_path / "secret_one.py", LEGACY)
    write(tmp_path / "ignored_dir" / "a.py", LEGACY)
    write(tmp_path / "pkg" / ".gitignore", "local.py\n")
    write(tmp_path / "pkg" / "local.py", LEGACY)
    write(tmp_path / "pkg" / "mod.py", LEGACY)
    write(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr\n")
    write(tmp_path / "myenv" / "lib" / "site.py", LEGACY)
    write(tmp_path / ".venv" / "x.py", LEGACY)
    write(tmp_path / "build" / "x.py", LEGACY)
    write(tmp_path / "nb" / ".ipynb_checkpoints" / "x-checkpoint.ipynb", "{}")
    write(tmp_path / "README.md", "tensorflow\n")
    proc = run_tfmigrate("--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert paths_in_json(proc) == ["keep.py", "pkg/mod.py"]
    # an explicitly named file is processed even when excluded ...
    proc = run_tfmigrate("--format", "json", "build/x.py", cwd=tmp_path)
    assert paths_in_json(proc) == ["build/x.py"]
    # ... unless --force-exclude (pre-commit passes every file by name)
    proc = run_tfmigrate("--format", "json", "--force-exclude", "build/x.py", cwd=tmp_path)
    assert paths_in_json(proc) == [] and proc.returncode == 0


def test_exclude_and_extend_exclude_options(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    write(tmp_path / "gen" / "b.py", LEGACY)
    write(tmp_path / "build" / "c.py", LEGACY)
    proc = run_tfmigrate("--format", "json", "--extend-exclude", "gen", ".", cwd=tmp_path)
    assert paths_in_json(proc) == ["a.py"]
    # --exclude replaces the defaults, so build/ is walked again
    proc = run_tfmigrate("--format", "json", "--exclude", "gen/", ".", cwd=tmp_path)
    assert paths_in_json(proc) == ["a.py", "build/c.py"]


# --------------------------------------------------------------------------- config


def test_pyproject_config_select_ignore_exclude(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.tfmigrate]\n'
        'ignore = ["TFM998"]\nextend-exclude = ["vendored/"]\n',
    )
    write(tmp_path / "src" / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    write(tmp_path / "vendored" / "b.py", LEGACY)
    proc = run_tfmigrate("--format", "json", ".", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert [f["path"] for f in data["files"]] == ["src/a.py"]
    assert [d["code"] for d in data["files"][0]["diagnostics"]] == ["TFM999"]
    assert data["files"][0]["status"] == "unchanged"
    # found by walking up from the given path, also from a subdirectory
    proc = run_tfmigrate("--format", "json", "a.py", cwd=tmp_path / "src")
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM999"]
    # the command line overrides the config
    proc = run_tfmigrate("--format", "json", "--ignore", "TFM999", ".", cwd=tmp_path)
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM998"]
    proc = run_tfmigrate("--format", "json", "--no-config", ".", cwd=tmp_path)
    assert paths_in_json(proc) == ["src/a.py", "vendored/b.py"]


def test_explicit_config_file(tmp_path):
    write(tmp_path / "ci" / "tfmigrate.toml", '[tool.tfmigrate]\nignore = ["TFM999"]\n')
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    proc = run_tfmigrate("--format", "json", "--config", "ci/tfmigrate.toml", "a.py", cwd=tmp_path)
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM998"]
    missing = run_tfmigrate("--config", "nope.toml", "a.py", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.toml: no such config file" in missing.stderr


def test_pyproject_select(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.tfmigrate]\nselect = ["TFM999"]\n')
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    proc = run_tfmigrate("--format", "json", "a.py", cwd=tmp_path, only_test_rules=False)
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM999"]


def test_pyproject_unknown_key_is_an_error(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.tfmigrate]\nselekt = ["TFM2"]\n')
    write(tmp_path / "a.py", LEGACY)
    proc = run_tfmigrate("a.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown [tool.tfmigrate] key(s): selekt" in proc.stderr


def test_cli_select_and_ignore(tmp_path):
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    proc = run_tfmigrate(
        "--format", "json", "--select", "TFM998", "a.py", cwd=tmp_path, only_test_rules=False
    )
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM998"]
    proc = run_tfmigrate("--format", "json", "--ignore", "TFM998,TFM997", "a.py", cwd=tmp_path)
    assert [d["code"] for d in json.loads(proc.stdout)["files"][0]["diagnostics"]] == ["TFM999"]
    proc = run_tfmigrate("--select", "TFM9876", "a.py", cwd=tmp_path, only_test_rules=False)
    assert "--select TFM9876 matches no registered rule" in proc.stderr


# --------------------------------------------------------------------------- formats


def test_json_format_schema(tmp_path):
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    proc = run_tfmigrate("--format", "json", "a.py", cwd=tmp_path)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)  # stdout is only JSON
    assert data["tool"] == "tfmigrate" and data["version"] == __version__
    assert data["schema_version"] == 1 and data["mode"] == "diff"
    assert data["summary"]["changed"] == 1 and data["summary"]["manual_work"] == 1
    (entry,) = data["files"]
    assert entry["path"] == "a.py" and entry["status"] == "changed" and entry["kind"] == "python"
    assert entry["diff"].startswith("--- a/a.py")
    fixed, manual = entry["diagnostics"]
    assert fixed["code"] == "TFM998" and fixed["rule"] == "test-rename-server"
    assert (fixed["line"], fixed["column"], fixed["cell"]) == (4, 10, None)
    assert fixed["fix"] == {"available": True, "applied": False, "safety": "safe"}
    assert fixed["manual_work"] is False
    assert manual["code"] == "TFM999" and manual["manual_work"] is True
    assert manual["fix"]["available"] is False
    assert manual["hint"].startswith("use a tf.function step")
    # the summary goes to stderr so stdout stays machine-readable
    assert proc.stderr.strip().splitlines()[-1].startswith("1 file would change")


def test_json_reports_written_fixes(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    proc = run_tfmigrate("--format", "json", "--write", "a.py", cwd=tmp_path)
    entry = json.loads(proc.stdout)["files"][0]
    assert entry["written"] is True and entry["diagnostics"][0]["fix"]["applied"] is True


def test_sarif_format(tmp_path):
    write(tmp_path / "a.py", LEGACY + "sv = tf.train.Supervisor()\n")
    write(tmp_path / "bad.py", "import tensorflow\nx = (\n")
    notebook = (REPO_ROOT / "tests" / "data" / "cli" / "magics.ipynb").read_bytes()
    (tmp_path / "nb.ipynb").write_bytes(notebook)
    proc = run_tfmigrate("--format", "sarif", ".", cwd=tmp_path)
    assert proc.returncode == 2
    sarif = json.loads(proc.stdout)
    assert sarif["version"] == "2.1.0" and "sarif" in sarif["$schema"]
    (run,) = sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tfmigrate" and driver["version"] == __version__
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == ["TFM998", "TFM999"]
    assert all(r["help"]["text"] and r["shortDescription"]["text"] for r in driver["rules"])
    by_file = {}
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        loc = result["locations"][0]["physicalLocation"]
        by_file.setdefault(loc["artifactLocation"]["uri"], []).append((result, loc["region"]))
    (server, _), (sv, sv_region) = sorted(by_file["a.py"], key=lambda x: x[1]["startLine"])
    assert server["ruleId"] == "TFM998" and server["level"] == "note"
    assert sv["ruleId"] == "TFM999" and sv["level"] == "warning"
    assert sv_region["startLine"] == 5 and sv_region["startColumn"] == 6
    assert {r["properties"]["cell"] for r, _ in by_file["nb.ipynb"]} == {5, 6}
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["level"] == "error" and "syntax error" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.py"
    assert run["invocations"][0]["executionSuccessful"] is False


# --------------------------------------------------------------------------- jobs and progress


def _many_files(root, count: int = 12) -> None:
    for i in range(count):
        write(root / f"m{i:02d}.py", LEGACY if i % 3 else MANUAL)
        write(root / f"plain{i:02d}.py", f"x = {i}\n")


def test_jobs_pool_gives_the_same_results_as_serial(tmp_path):
    _many_files(tmp_path)
    serial = run_tfmigrate("--format", "json", "--jobs", "1", ".", cwd=tmp_path)
    pooled = run_tfmigrate("--format", "json", "--jobs", "2", ".", cwd=tmp_path)
    assert serial.returncode == pooled.returncode == 1
    assert json.loads(serial.stdout) == json.loads(pooled.stdout)
    assert json.loads(pooled.stdout)["summary"]["files"] == 24
    written = run_tfmigrate("--write", "--jobs", "2", ".", cwd=tmp_path)
    assert written.returncode == 1  # the Supervisors remain
    assert "tf.distribute.Server" in (tmp_path / "m01.py").read_text()


def test_jobs_must_be_positive(tmp_path):
    write(tmp_path / "a.py", CLEAN)
    proc = run_tfmigrate("--jobs", "0", "a.py", cwd=tmp_path)
    assert proc.returncode == 2 and "--jobs" in proc.stderr


def test_no_progress_display_when_not_a_tty(tmp_path):
    _many_files(tmp_path)
    proc = run_tfmigrate(".", cwd=tmp_path)
    assert "\r" not in proc.stderr and "[1/" not in proc.stderr


def test_progress_display_on_a_tty(tmp_path):
    _many_files(tmp_path, 4)
    master, slave = pty.openpty()
    try:
        proc = run_tfmigrate(
            ".", cwd=tmp_path, stderr=slave, stdout=subprocess.PIPE, capture_output=False
        )
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO once the terminal is drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    tty_output = b"".join(chunks).decode()
    assert proc.returncode == 1
    assert "[1/8]" in tty_output and "[8/8]" in tty_output
    assert "[1/8]" not in proc.stdout  # stdout stays clean
    quiet = run_tfmigrate("--no-progress", ".", cwd=tmp_path)
    assert "[1/" not in quiet.stderr


# --------------------------------------------------------------------------- other commands


def test_check_subcommand(tmp_path):
    proc = run_tfmigrate("check", "--help", cwd=tmp_path)
    if importlib.util.find_spec("migrate.runtime.check") is None:
        assert proc.returncode == 2
        assert "not available yet" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr


def test_reference_subcommand_is_dispatched(tmp_path):
    proc = run_tfmigrate("reference", "list", cwd=tmp_path)
    if importlib.util.find_spec("migrate.runtime.reference") is None:
        assert proc.returncode == 2 and "not available yet" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert "async_ps" in proc.stdout


def test_demo_migrates_the_bundled_reference(tmp_path):
    if not (REPO_ROOT / "legacy_reference" / "async_ps.py").is_file():
        pytest.skip("the bundled reference program is not in this checkout")
    proc = run_tfmigrate(
        "demo", "--no-check", "--out", tmp_path / "demo", cwd=tmp_path, extra_rules=False
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Migrating" in proc.stdout and "async_ps.py" in proc.stdout
    original = (tmp_path / "demo" / "legacy_async_ps.py").read_bytes()
    assert original == (REPO_ROOT / "legacy_reference" / "async_ps.py").read_bytes()
    migrated = (tmp_path / "demo" / "migrated_async_ps.py").read_text()
    if migrated != original.decode():
        assert "--- " in proc.stdout and "+++ " in proc.stdout
    compile(migrated, "migrated_async_ps.py", "exec")


def test_pre_commit_hooks_run_with_their_entry(tmp_path):
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {hook["id"]: hook for hook in hooks}
    assert set(ids) == {"tfmigrate", "tfmigrate-check"}
    for hook in hooks:
        assert hook["language"] == "python" and set(hook["types_or"]) == {"python", "jupyter"}
        assert hook["entry"].split()[0] == "tfmigrate"
    write(tmp_path / "a.py", LEGACY)
    check = run_tfmigrate(*ids["tfmigrate-check"]["entry"].split()[1:], "a.py", cwd=tmp_path)
    assert check.returncode == 1 and (tmp_path / "a.py").read_text() == LEGACY
    fix = run_tfmigrate(*ids["tfmigrate"]["entry"].split()[1:], "a.py", cwd=tmp_path)
    assert fix.returncode == 0 and "tf.distribute.Server" in (tmp_path / "a.py").read_text()


def test_the_codemod_path_never_imports_tensorflow(tmp_path):
    write(tmp_path / "a.py", LEGACY)
    write(tmp_path / "old.py", "import tensorflow as tf\nprint 'x'\n")
    (tmp_path / "nb.ipynb").write_bytes(
        (REPO_ROOT / "tests" / "data" / "cli" / "magics.ipynb").read_bytes()
    )
    program = (
        "import sys\n"
        "from migrate import cli\n"
        "code = cli.main(['--jobs', '1', '--format', 'json', '.'])\n"
        "assert not any(m == 'tensorflow' or m.startswith('tensorflow.') for m in sys.modules), 'TF imported'\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["summary"]["files"] == 3


def test_the_pool_is_handed_the_largest_files_first(tmp_path):
    from migrate import cli

    sizes = [3, 40, 7, 25, 1, 90, 12, 60, 5, 33]
    tasks = []
    for i, lines in enumerate(sizes):
        path = tmp_path / f"m{i}.py"
        path.write_text("x = 1\n" * lines)
        tasks.append(cli.Task(str(path), "python", "diff", None, None, (), 10**6, True))
    assert len(tasks) >= cli.POOL_THRESHOLD
    results = cli.run_tasks(tasks, 2, cli.Progress(len(tasks), False))
    expected = [t.path for _, t in sorted(zip(sizes, tasks), key=lambda pair: -pair[0])]
    assert [r.path for r in results] == expected
    assert {r.status for r in results} == {"skipped"}  # (no TensorFlow in them)
