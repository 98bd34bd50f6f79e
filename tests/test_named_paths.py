"""A path named on the command line that yields no file to process says why
and makes the run exit 2 (the other paths are still processed): ignored by a
.gitignore (file, line, pattern), excluded by an exclude pattern (which one,
set where), no Python or notebook file in it, or no such path."""

from __future__ import annotations

import json

from rules_for_tests import LEGACY, run_tfmigrate

from migrate.codemod import files


def write(path, text: str = LEGACY):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def errors_in_json(proc) -> dict[str, str]:
    return {f["path"]: f["error"]["message"] for f in json.loads(proc.stdout)["files"] if f["status"] == "error"}


def test_a_gitignored_directory_names_the_gitignore_and_pattern(tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".gitignore", "# generated code\nexperiments/\n")
    write(tmp_path / "experiments" / "run.py")
    write(tmp_path / "train.py")
    proc = run_tfmigrate("--write", "--no-progress", "experiments", "train.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert (
        "experiments: error: no Python or notebook file to process here: 1 path ignored by .gitignore"
        f" ({tmp_path / '.gitignore'} line 2: `experiments/`)" in proc.stdout
    )
    assert "tf.distribute.Server" in (tmp_path / "train.py").read_text()  # still processed
    assert (tmp_path / "experiments" / "run.py").read_text() == LEGACY


def test_a_directory_excluded_by_config_names_the_pattern_and_where_it_is_set(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.tfmigrate]\nextend-exclude = ["third_party/"]\n')
    write(tmp_path / "third_party" / "lib" / "model.py")
    proc = run_tfmigrate("--format", "json", "third_party/lib", cwd=tmp_path)
    assert proc.returncode == 2
    assert errors_in_json(proc) == {
        "third_party/lib": "no Python or notebook file to process here: 1 path excluded by the exclude"
        f" pattern `third_party/` ([tool.tfmigrate] extend-exclude in {tmp_path / 'pyproject.toml'})"
    }


def test_default_excludes_and_command_line_patterns_are_named(tmp_path):
    write(tmp_path / "build" / "gen.py")
    write(tmp_path / "scratch" / "try.py")
    default = run_tfmigrate("--format", "json", "build", cwd=tmp_path)
    assert errors_in_json(default)["build"].endswith("`build` (one of the default excludes)")
    option = run_tfmigrate("--format", "json", "--extend-exclude", "scratch", "scratch", cwd=tmp_path)
    assert errors_in_json(option)["scratch"].endswith("`scratch` (--extend-exclude)")
    assert default.returncode == option.returncode == 2


def test_a_directory_without_python_or_notebook_files(tmp_path):
    write(tmp_path / "data" / "train.csv", "x,y\n")
    write(tmp_path / "data" / "notes.txt", "tensorflow\n")
    (tmp_path / "empty").mkdir()
    proc = run_tfmigrate("--format", "json", "data", "empty", cwd=tmp_path)
    assert proc.returncode == 2
    assert errors_in_json(proc) == {
        "data": "no Python or notebook file to process here: 2 files not Python or a notebook (.py, .ipynb)",
        "empty": "no Python or notebook file to process here: the directory is empty",
    }


def test_a_missing_path_is_an_error_and_the_others_are_processed(tmp_path):
    write(tmp_path / "train.py")
    proc = run_tfmigrate("--format", "json", "nothere", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert errors_in_json(proc) == {"nothere": "no such file or directory"}


def test_directories_with_files_are_not_errors(tmp_path):
    """The valid shapes: a file without TensorFlow still counts, and a
    directory named twice (or a file in it named too) is no error."""
    write(tmp_path / "pkg" / "util.py", "x = 1\n")
    write(tmp_path / "pkg" / "README.md", "docs\n")
    proc = run_tfmigrate("--format", "json", "pkg", "pkg", "pkg/util.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert errors_in_json(proc) == {}


def test_force_exclude_skips_a_named_file_and_says_why_without_failing(tmp_path):
    """pre-commit names every changed file: an excluded one is left out
    (exit 0 when nothing else is to do), with the reason on stderr."""
    write(tmp_path / "build" / "x.py")
    proc = run_tfmigrate("--force-exclude", "build/x.py", cwd=tmp_path)
    assert proc.returncode == 0
    assert "build/x.py: not processed: excluded by the exclude pattern `build`" in proc.stderr


def test_discover_reports_each_reason_once(tmp_path):
    write(tmp_path / "mixed" / "a.txt", "a\n")
    write(tmp_path / "mixed" / "b.txt", "b\n")
    write(tmp_path / "mixed" / "py311" / "pyvenv.cfg", "home = /usr\n")
    write(tmp_path / "mixed" / "__pycache__" / "c.py")
    found = files.discover([tmp_path / "mixed"], exclude_base=tmp_path)
    assert found.files == []
    why = (
        "no Python or notebook file to process here: 1 path excluded by the exclude pattern"
        " `__pycache__` (one of the default excludes); 1 virtualenv directory not entered;"
        " 2 files not Python or a notebook (.py, .ipynb)"
    )
    assert found.errors == [(tmp_path / "mixed", why)]


def test_a_named_file_that_is_not_python_says_so(tmp_path):
    write(tmp_path / "notes.txt", "tensorflow\n")
    write(tmp_path / "launch", "#!/usr/bin/env python3\n" + LEGACY)  # a script: processed
    proc = run_tfmigrate("--format", "json", "notes.txt", "launch", cwd=tmp_path)
    assert proc.returncode == 2
    assert errors_in_json(proc) == {
        "notes.txt": "not a Python or notebook file (.py, .ipynb, or a script whose #! line runs python)"
    }
    assert [f["status"] for f in json.loads(proc.stdout)["files"] if f["path"] == "launch"] == ["changed"]
    # pre-commit (--force-exclude) decides itself which files are Python: no failure there
    hook = run_tfmigrate("--force-exclude", "notes.txt", cwd=tmp_path)
    assert hook.returncode == 0 and "notes.txt: not processed: not a Python or notebook file" in hook.stderr
