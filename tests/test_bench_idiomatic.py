"""benchmarks/bench_idiomatic.py measures what a TF2 reviewer would object to
in a migrated file: each figure on a pair we write, and the table on a small
directory run through tfmigrate itself."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_idiomatic

LEGACY = '''"""Trains with a Supervisor.

The Supervisor restores the latest checkpoint.
"""
import tensorflow as tf
sv = tf.train.Supervisor()
'''


def test_each_figure_counts_what_it_names():
    migrated = '''"""Trains with a Supervisor.

The Supervisor restores the latest checkpoint.
"""
import os
import tensorflow as tf
step = tf.compat.v1.make_template("model", lambda: None)
steps_in_flight = []
'''
    m = bench_idiomatic.measure(LEGACY, migrated)
    assert m["pyflakes"] == 1  # `os` imported but unused, new with the migration
    assert m["make_template"] == 1 and m["compat_v1"] == 1 and m["stacking"] == 1
    assert m["tf_data"] == "no" and m["stale_text"] == 2  # the summary and the paragraph
    clean = '''"""Trains a small model."""
import tensorflow as tf
dataset = tf.data.Dataset.range(4)
batches = strategy.experimental_distribute_dataset(dataset)
'''
    m = bench_idiomatic.measure(LEGACY, clean)
    # `strategy` is read undefined: a new warning too
    assert (m["pyflakes"], m["make_template"], m["compat_v1"], m["stacking"], m["stale_text"]) == (1, 0, 0, 0, 0)
    assert m["tf_data"] == "yes"


def test_table_over_a_directory_of_legacy_programs(tmp_path):
    (tmp_path / "job.py").write_text((ROOT / "legacy_reference" / "async_ps.py").read_text())
    (tmp_path / "plain.py").write_text("import tensorflow as tf\nprint(tf.constant(1))\n")
    rows = bench_idiomatic.run(tmp_path, every=False)
    assert [name for name, _ in rows] == ["job.py"]
    text = bench_idiomatic.table(rows, tmp_path)
    assert "| job.py |" in text and "1 files:" in text
