"""The explicit rule registry. Order matters: rules run top to bottom, each
on the output of the previous one.

Codes are stable; never reuse a retired code.

- TFM1xx imports, flags, logging: the plain API
- TFM2xx cluster topology (ClusterSpec, Server and role branching)
- TFM3xx training: strategies, the session skeleton, optimizers
- TFM4xx Estimator / contrib
- TFM9xx what the rules could not migrate
"""

from __future__ import annotations

from migrate.codemod.engine import Rule
from migrate.codemod.rules.tfm101_tensorflow_import import TensorflowImport
from migrate.codemod.rules.tfm102_absl_flags import AbslFlags
from migrate.codemod.rules.tfm103_tf_logging import TfLogging
from migrate.codemod.rules.tfm104_tf_layers import TfLayers
from migrate.codemod.rules.tfm105_tf2_spellings import Tf2Spellings
from migrate.codemod.rules.tfm201_cluster_resolver import ClusterResolver
from migrate.codemod.rules.tfm202_server_roles import ServerRoles
from migrate.codemod.rules.tfm300_inline_graph_builder import InlineGraphBuilder
from migrate.codemod.rules.tfm301_graph_to_strategy import GraphToStrategy
from migrate.codemod.rules.tfm302_sync_backup_workers import SyncBackupWorkers
from migrate.codemod.rules.tfm303_towers_to_mirrored import TowersToMirrored
from migrate.codemod.rules.tfm304_session_evals import SessionEvals
from migrate.codemod.rules.tfm305_queue_input_to_dataset import QueueInputToDataset
from migrate.codemod.rules.tfm401_estimator import Estimator
from migrate.codemod.rules.tfm402_contrib import Contrib
from migrate.codemod.rules.tfm403_estimator_to_strategy import EstimatorToStrategy
from migrate.codemod.rules.tfm901_legacy_leftovers import LegacyDistributedLeftover

REGISTRY: list[type[Rule]] = [
    # first: the tf.layers / contrib layer calls it rewrites into functions of the
    # module are then never reported by TFM101 as Keras 2 only (nor by TFM402),
    # and TFM301 sees a model built by get_variable helpers it can reuse
    TfLayers,
    TensorflowImport,
    AbslFlags,
    TfLogging,
    ClusterResolver,
    ServerRoles,
    SyncBackupWorkers,  # before TFM301 removes the SyncReplicasOptimizer it inspects
    SessionEvals,  # before TFM301: values read by tensor.eval() become session runs it migrates
    InlineGraphBuilder,  # before TFM301: the train op a helper builds is then in the block
    QueueInputToDataset,  # before TFM301: a queue pipeline is then a tf.data one it migrates
    GraphToStrategy,
    TowersToMirrored,
    EstimatorToStrategy,  # before TFM401: what it migrates is then no Estimator left to report
    Estimator,
    Contrib,
    # after every rule that writes or keeps TF 1.x calls (TFM101 spells them tf.compat.v1)
    Tf2Spellings,
    LegacyDistributedLeftover,  # last: whatever is still legacy gets reported
]


def by_code(code: str) -> type[Rule]:
    for rule in REGISTRY:
        if rule.code == code:
            return rule
    raise KeyError(code)
