"""TFM302 sync-backup-workers."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.rules import _cst as C


def _int(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    return None


class SyncBackupWorkers(Rule):
    """What it does
    Reports ``SyncReplicasOptimizer`` configured with backup workers
    (``replicas_to_aggregate`` smaller than ``total_num_replicas``): each step
    then used the gradients of the *first* replicas to arrive and dropped the
    stragglers'.

    Why
    The TF2 replacement, ``MultiWorkerMirroredStrategy``, all-reduces the
    gradients of every replica on every step; there is no equivalent of backup
    workers. The migrated job trains on all replicas' gradients, so its
    trajectory differs from a run that dropped stragglers, and a slow worker
    slows every step.

    Example
        opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=4, total_num_replicas=5)
    is reported (TFM302) with the hint to size the job to 4 workers or accept
    all-replica averaging.

    Fix safety
    No fix: it is a semantic change only a person can accept. When the two
    counts are expressions the rule cannot compare, it says nothing.
    """

    code = "TFM302"
    name = "sync-backup-workers"
    triggers = ("SyncReplicasOptimizer",)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.qualname(original.func) != "train.SyncReplicasOptimizer":
            return updated
        aggregate = C.arg(original, 1, "replicas_to_aggregate")
        total = C.arg(original, 2, "total_num_replicas")
        if aggregate is None or total is None:
            return updated
        a, t = _int(aggregate), _int(total)
        differs = (a is not None and t is not None and a < t) or (
            a is None and t is None and _is_difference(total, aggregate)
        )
        if differs:
            self.report(
                original,
                "SyncReplicasOptimizer with backup workers (replicas_to_aggregate < total_num_replicas): "
                "MultiWorkerMirroredStrategy averages the gradients of every replica and has no backup workers",
                hint="run the migrated job with replicas_to_aggregate workers, or accept all-replica averaging"
                " (and slow steps when a worker straggles)",
                reference="legacy_reference/sync_replicas.py",
                fixed=False,
            )
        return updated


def _is_difference(total: cst.BaseExpression, aggregate: cst.BaseExpression) -> bool:
    """`total = n + backup` vs `aggregate = n` spelled with names."""
    if isinstance(total, cst.BinaryOperation) and isinstance(total.operator, cst.Add):
        return C.code_of(total.left) == C.code_of(aggregate) or C.code_of(total.right) == C.code_of(aggregate)
    return False


SyncBackupWorkers.VALID = [
    Valid(
        """
        import tensorflow as tf
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2, total_num_replicas=2)
        """
    ),
    Valid(
        """
        import tensorflow.compat.v1 as tf
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=num_workers)
        """
    ),
]

SyncBackupWorkers.INVALID = [
    Invalid(
        """
        import tensorflow as tf
        opt = tf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=4, total_num_replicas=5)
        """,
        None,
        diagnostics=("TFM302",),
    ),
    Invalid(
        """
        import tensorflow.compat.v1 as tf1
        opt = tf1.train.SyncReplicasOptimizer(
            opt, FLAGS.replicas_to_aggregate, FLAGS.replicas_to_aggregate + FLAGS.backup_workers)
        """,
        None,
        diagnostics=("TFM302",),
    ),
]
