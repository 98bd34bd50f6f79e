"""A stand-in for ``tensorflow.examples.tutorials.mnist.input_data`` (and its ``mnist`` model module).

TF 1.x shipped an MNIST reader that downloaded the data set; TF 2 removed it,
and legacy distributed examples use it more than anything else
(``mnist = input_data.read_data_sets(FLAGS.data_dir, one_hot=True)`` then
``mnist.train.next_batch(batch_size)``). ``tfmigrate check`` compares two
trainings of the same data, not the data: when a legacy script reads MNIST
this way, both sides read this module instead (the harness installs it under
the old module name), so the check runs offline and both programs see the
same examples in the same order.

Same API and types as TF1's reader (``Datasets(train, validation, test)`` of
``DataSet`` objects: ``images`` float32 in [0, 1], flat ``[n, 784]`` or
``[n, 28, 28, 1]``, labels ``uint8`` or one-hot ``float64``, ``next_batch``
shuffling with NumPy's global generator per epoch, ``num_examples``,
``epochs_completed``). The data are synthetic and deterministic: ten class
templates plus noise, learnable like MNIST, and smaller (6,000 training
images, of which up to 1,000 go to validation; 1,000 test images) so that
every task of a local cluster can hold them.
"""

from __future__ import annotations

import collections

import numpy as np

__all__ = ["DataSet", "Datasets", "read_data_sets"]

Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])

TRAIN_IMAGES, TEST_IMAGES, MAX_VALIDATION = 6000, 1000, 1000
IMAGE_SIZE, NUM_CLASSES = 28, 10


def _synthetic(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` images (uint8, [n, 28, 28, 1]) and labels (uint8)."""
    templates = np.random.RandomState(20160901).uniform(0, 1, (NUM_CLASSES, IMAGE_SIZE * IMAGE_SIZE))
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, NUM_CLASSES, count).astype(np.uint8)
    pixels = 0.6 * templates[labels] + 0.4 * rng.uniform(0, 1, (count, IMAGE_SIZE * IMAGE_SIZE))
    images = np.round(255 * pixels).astype(np.uint8).reshape(count, IMAGE_SIZE, IMAGE_SIZE, 1)
    return images, labels


def dense_to_one_hot(labels_dense: np.ndarray, num_classes: int = NUM_CLASSES) -> np.ndarray:
    labels_one_hot = np.zeros((labels_dense.shape[0], num_classes))
    labels_one_hot[np.arange(labels_dense.shape[0]), labels_dense.ravel()] = 1
    return labels_one_hot


class DataSet:
    """TF1's ``mnist.DataSet``: images scaled to [0, 1] (float32), batches in
    a per-epoch shuffled order."""

    def __init__(self, images, labels, fake_data=False, one_hot=False, dtype=np.float32, reshape=True, seed=None):
        if fake_data:
            self._num_examples = 10000
            self.one_hot = one_hot
        else:
            assert images.shape[0] == labels.shape[0], f"images.shape: {images.shape} labels.shape: {labels.shape}"
            self._num_examples = images.shape[0]
            if reshape:
                images = images.reshape(images.shape[0], images.shape[1] * images.shape[2])
            if np.dtype(getattr(dtype, "as_numpy_dtype", dtype)) == np.float32:
                images = images.astype(np.float32) * (1.0 / 255.0)
        self._images = images
        self._labels = labels
        self._epochs_completed = 0
        self._index_in_epoch = 0

    @property
    def images(self):
        return self._images

    @property
    def labels(self):
        return self._labels

    @property
    def num_examples(self):
        return self._num_examples

    @property
    def epochs_completed(self):
        return self._epochs_completed

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        """The next ``batch_size`` examples (TF1's order of operations)."""
        if fake_data:
            fake_image = [1] * IMAGE_SIZE * IMAGE_SIZE
            fake_label = [1] + [0] * 9 if self.one_hot else 0
            return [fake_image for _ in range(batch_size)], [fake_label for _ in range(batch_size)]
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            perm0 = np.arange(self._num_examples)
            np.random.shuffle(perm0)
            self._images = self.images[perm0]
            self._labels = self.labels[perm0]
        if start + batch_size > self._num_examples:
            self._epochs_completed += 1
            rest_num_examples = self._num_examples - start
            images_rest_part = self._images[start : self._num_examples]
            labels_rest_part = self._labels[start : self._num_examples]
            if shuffle:
                perm = np.arange(self._num_examples)
                np.random.shuffle(perm)
                self._images = self.images[perm]
                self._labels = self.labels[perm]
            start = 0
            self._index_in_epoch = batch_size - rest_num_examples
            end = self._index_in_epoch
            images_new_part = self._images[start:end]
            labels_new_part = self._labels[start:end]
            return (
                np.concatenate((images_rest_part, images_new_part), axis=0),
                np.concatenate((labels_rest_part, labels_new_part), axis=0),
            )
        self._index_in_epoch += batch_size
        end = self._index_in_epoch
        return self._images[start:end], self._labels[start:end]


def read_data_sets(train_dir=None, fake_data=False, one_hot=False, dtype=np.float32, reshape=True,
                   validation_size=5000, seed=None, source_url=None):
    """TF1's ``read_data_sets``, on synthetic data (``train_dir`` and
    ``source_url`` are not read; nothing is downloaded). A validation split
    larger than the stand-in allows is capped at 1,000 images."""
    if fake_data:
        def fake():
            return DataSet([], [], fake_data=True, one_hot=one_hot, dtype=dtype, seed=seed)

        return Datasets(train=fake(), validation=fake(), test=fake())
    train_images, train_labels = _synthetic(TRAIN_IMAGES, 1)
    test_images, test_labels = _synthetic(TEST_IMAGES, 2)
    if one_hot:
        train_labels, test_labels = dense_to_one_hot(train_labels), dense_to_one_hot(test_labels)
    if not 0 <= validation_size:
        raise ValueError(f"Validation size should be between 0 and {len(train_images)}. Received: {validation_size}.")
    validation_size = min(validation_size, MAX_VALIDATION)
    options = {"dtype": dtype, "reshape": reshape, "seed": seed}
    return Datasets(
        train=DataSet(train_images[validation_size:], train_labels[validation_size:], **options),
        validation=DataSet(train_images[:validation_size], train_labels[:validation_size], **options),
        test=DataSet(test_images, test_labels, **options),
    )


def load_mnist(train_dir="MNIST-data"):
    return read_data_sets(train_dir)


def tutorial_model(tf, name: str = "tensorflow.examples.tutorials.mnist.mnist"):
    """A stand-in for TF1's MNIST tutorial model module (``from
    tensorflow.examples.tutorials.mnist import mnist``), which TF 2 removed:
    ``inference``, ``loss``, ``training``, ``evaluation`` and its constants,
    with TF 1.15's definitions, in graph mode on ``tf`` (tensorflow.compat.v1)."""
    import math
    import types

    model = types.ModuleType(name)
    pixels = IMAGE_SIZE * IMAGE_SIZE

    def inference(images, hidden1_units, hidden2_units):
        layer, units_in = images, pixels
        for scope, units_out in (("hidden1", hidden1_units), ("hidden2", hidden2_units),
                                 ("softmax_linear", NUM_CLASSES)):
            with tf.name_scope(scope):
                weights = tf.Variable(tf.truncated_normal([units_in, units_out],
                                                          stddev=1.0 / math.sqrt(float(units_in))), name="weights")
                biases = tf.Variable(tf.zeros([units_out]), name="biases")
                layer = tf.matmul(layer, weights) + biases
                if scope != "softmax_linear":
                    layer = tf.nn.relu(layer)
            units_in = units_out
        return layer

    def loss(logits, labels):
        return tf.losses.sparse_softmax_cross_entropy(labels=tf.to_int64(labels), logits=logits)

    def training(loss, learning_rate):
        tf.summary.scalar("loss", loss)
        optimizer = tf.train.GradientDescentOptimizer(learning_rate)
        global_step = tf.Variable(0, name="global_step", trainable=False)
        return optimizer.minimize(loss, global_step=global_step)

    def evaluation(logits, labels):
        return tf.reduce_sum(tf.cast(tf.nn.in_top_k(logits, labels, 1), tf.int32))

    model.__dict__.update(NUM_CLASSES=NUM_CLASSES, IMAGE_SIZE=IMAGE_SIZE, IMAGE_PIXELS=pixels, inference=inference,
                          loss=loss, training=training, evaluation=evaluation)
    return model
