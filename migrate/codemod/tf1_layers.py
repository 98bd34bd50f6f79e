"""TensorFlow 1's functional layers, rebuilt on ``variable_scope`` + ``get_variable``.

Keras 3, the default of TF 2.21, removed ``tf.compat.v1.layers``
(``tf.compat.v1.layers.dense`` raises "'dense' is not available with Keras 3"),
and ``tf.contrib`` (``tf.contrib.layers``, ``slim``) went with TF 2.0. Legacy
training scripts build their models with them. Each function here computes
what its TF1 namesake computed, with its signature and defaults, the same
variable names (``dense/kernel``, ``fully_connected/weights``, ``Conv/biases``
...), the same default initializers and the same ops, using only
``tf.compat.v1.variable_scope``, ``tf.compat.v1.get_variable`` and plain
``tf.nn`` ops. They run in TF1 graph mode and in TF2 under
``tf.compat.v1.make_template`` (eagerly and in a ``tf.function``), which
creates the variables once and reuses them at every call.

Rule TFM104 copies the functions a module calls (and the helpers they call)
into that module, with its TensorFlow alias; ``tfmigrate check`` imports this
module to run unmigrated legacy programs on Keras 3. So this module stays
importable on its own, and every TensorFlow name in it is spelled as the
codemod leaves it (``tf.X`` where ``tf.compat.v1.X is tf.X`` or, by TFM105, where
TF2's ``X`` computes the same for the arguments given, else ``tf.compat.v1.X``)
and exists both as ``tensorflow.X`` and ``tensorflow.compat.v1.X``: the copies
mean the same under ``import tensorflow as tf`` and ``import
tensorflow.compat.v1 as tf``, and no rule rewrites them. No default argument
calls TensorFlow (defaults are evaluated once, where the function is defined):
a default TF1 wrote as an initializer object is spelled by its Keras name
(``"zeros"``, ``"glorot_uniform"``), which TF1's layers accepted too.

Arguments these functions cannot reproduce (regularizers, constraints,
channels-first data, normalizer functions, output collections) raise
``NotImplementedError`` instead of training a different model.
"""

import tensorflow as tf


# TF1 layers took initializers as objects or by Keras name; the names the
# defaults use become TF1's initializer objects (Keras 3 removed tf.compat.v1.layers).
def tf1_initializer(initializer):
    if initializer == "zeros":
        return tf.compat.v1.zeros_initializer()
    if initializer == "glorot_uniform":
        return tf.compat.v1.glorot_uniform_initializer()
    raise NotImplementedError(f"initializer {initializer!r}: pass an initializer object")


# TF1's normalize_tuple: an int or a pair of ints -> a pair (kernel sizes, strides).
def tf1_pair(value):
    if isinstance(value, (list, tuple)):
        first, second = value
        return int(first), int(second)
    return int(value), int(value)


# tf.layers.dense of TF 1.x (Keras 3 removed tf.compat.v1.layers): variables
# <scope>/dense[_N]/kernel and bias, matmul (tensordot over the last axis for
# rank > 2), bias_add, activation.
def tf1_dense(
        inputs, units, activation=None, use_bias=True, kernel_initializer=None,
        bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
        activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True,
        name=None, reuse=None):
    if any(x is not None for x in (
            kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint,
            bias_constraint)):
        raise NotImplementedError("tf1_dense: regularizers and constraints are not reproduced")
    if isinstance(kernel_initializer, str):
        kernel_initializer = tf1_initializer(kernel_initializer)
    if isinstance(bias_initializer, str):
        bias_initializer = tf1_initializer(bias_initializer)
    inputs = tf.convert_to_tensor(inputs)
    shape = inputs.shape.as_list()
    if len(shape) < 2 or shape[-1] is None:
        raise ValueError(f"tf1_dense: inputs need rank >= 2 and a known last dimension: {shape}")
    scope = name or ("dense" if reuse else None)
    with tf.compat.v1.variable_scope(scope, default_name="dense", reuse=reuse):
        kernel = tf.compat.v1.get_variable(
            "kernel", shape=[shape[-1], units], dtype=inputs.dtype.base_dtype,
            initializer=kernel_initializer, trainable=trainable)
        if len(shape) > 2:
            outputs = tf.tensordot(inputs, kernel, [[len(shape) - 1], [0]])
            outputs.set_shape(shape[:-1] + [units])
        else:
            outputs = tf.matmul(inputs, kernel)
        if use_bias:
            bias = tf.compat.v1.get_variable(
                "bias", shape=[units], dtype=inputs.dtype.base_dtype,
                initializer=bias_initializer, trainable=trainable)
            outputs = tf.nn.bias_add(outputs, bias)
        if activation is not None:
            outputs = activation(outputs)
    return outputs


# tf.layers.conv2d of TF 1.x (Keras 3 removed tf.compat.v1.layers): variables
# <scope>/conv2d[_N]/kernel [kh, kw, in, filters] and bias, an NHWC convolution
# (tf.nn.convolution, atrous when dilated, as TF1's layer), bias_add, activation.
def tf1_conv2d(
        inputs, filters, kernel_size, strides=(1, 1), padding="valid",
        data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
        kernel_initializer=None, bias_initializer="zeros", kernel_regularizer=None,
        bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
        bias_constraint=None, trainable=True, name=None, reuse=None):
    if any(x is not None for x in (
            kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint,
            bias_constraint)):
        raise NotImplementedError("tf1_conv2d: regularizers and constraints are not reproduced")
    if data_format != "channels_last":
        raise NotImplementedError("tf1_conv2d: only channels_last data is reproduced")
    if isinstance(kernel_initializer, str):
        kernel_initializer = tf1_initializer(kernel_initializer)
    if isinstance(bias_initializer, str):
        bias_initializer = tf1_initializer(bias_initializer)
    inputs = tf.convert_to_tensor(inputs)
    channels = inputs.shape.as_list()[-1]
    scope = name or ("conv2d" if reuse else None)
    with tf.compat.v1.variable_scope(scope, default_name="conv2d", reuse=reuse):
        kernel = tf.compat.v1.get_variable(
            "kernel", shape=[*tf1_pair(kernel_size), channels, filters],
            dtype=inputs.dtype.base_dtype, initializer=kernel_initializer, trainable=trainable)
        outputs = tf.nn.convolution(
            inputs, kernel, padding=padding.upper(), strides=list(tf1_pair(strides)),
            dilations=list(tf1_pair(dilation_rate)), data_format="NHWC")
        if use_bias:
            bias = tf.compat.v1.get_variable(
                "bias", shape=[filters], dtype=inputs.dtype.base_dtype,
                initializer=bias_initializer, trainable=trainable)
            outputs = tf.nn.bias_add(outputs, bias, data_format="NHWC")
        if activation is not None:
            outputs = activation(outputs)
    return outputs


# tf.layers.max_pooling2d of TF 1.x (Keras 3 removed tf.compat.v1.layers): NHWC max pooling.
def tf1_max_pooling2d(
        inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    if data_format != "channels_last":
        raise NotImplementedError("tf1_max_pooling2d: only channels_last data is reproduced")
    with tf.compat.v1.variable_scope(name, default_name="max_pooling2d"):
        return tf.nn.max_pool2d(
            inputs, ksize=[1, *tf1_pair(pool_size), 1], strides=[1, *tf1_pair(strides), 1],
            padding=padding.upper())


# tf.layers.average_pooling2d of TF 1.x (Keras 3 removed tf.compat.v1.layers): NHWC
# average pooling.
def tf1_average_pooling2d(
        inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    if data_format != "channels_last":
        raise NotImplementedError("tf1_average_pooling2d: only channels_last data is reproduced")
    with tf.compat.v1.variable_scope(name, default_name="average_pooling2d"):
        return tf.compat.v1.nn.avg_pool2d(
            inputs, ksize=[1, *tf1_pair(pool_size), 1], strides=[1, *tf1_pair(strides), 1],
            padding=padding.upper())


# tf.layers.flatten of TF 1.x (Keras 3 removed tf.compat.v1.layers): [batch, -1],
# keeping as much static shape as TF1 kept.
def tf1_flatten(inputs, name=None, data_format="channels_last"):
    if data_format != "channels_last":
        raise NotImplementedError("tf1_flatten: only channels_last data is reproduced")
    with tf.compat.v1.variable_scope(name, default_name="flatten"):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.shape.as_list()
        if len(shape) == 1:
            return tf.expand_dims(inputs, axis=1)
        if None not in shape[1:]:
            size = 1
            for dim in shape[1:]:
                size *= dim
            return tf.reshape(inputs, [-1, size])
        if shape[0] is not None:
            return tf.reshape(inputs, [shape[0], -1])
        return tf.reshape(inputs, [tf.shape(inputs)[0], -1])


# tf.layers.dropout of TF 1.x (Keras 3 removed tf.compat.v1.layers): the input
# unchanged unless `training`; a tensor `training` decides at run time (tf.cond).
def tf1_dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    with tf.compat.v1.variable_scope(name, default_name="dropout"):
        inputs = tf.convert_to_tensor(inputs)
        if noise_shape is not None:
            dims = tf.shape(inputs)
            noise_shape = [dims[i] if n is None else n for i, n in enumerate(noise_shape)]

        def dropped():
            return tf.nn.dropout(
                inputs, rate=rate, noise_shape=noise_shape, seed=seed)

        decided = tf.get_static_value(training)
        if decided is None:
            return tf.compat.v1.cond(training, dropped, lambda: tf.identity(inputs))
        return dropped() if decided else tf.identity(inputs)



# tf.layers.batch_normalization of TF 1.x (Keras 3 removed tf.compat.v1.layers):
# variables <scope>/batch_normalization[_N]/gamma, beta, moving_mean and
# moving_variance; 4-D inputs through fused_batch_norm, others through
# tf.nn.moments and tf.nn.batch_normalization, as TF1's layer chose. While
# `training`, the batch's statistics normalize and the moving averages move
# towards them (the fused kernel's variance with Bessel's correction, as TF1's):
# in a TF1 graph the updates go to the UPDATE_OPS collection, run by the train
# op that depends on them; in TF2 (a tf.function step) they run with the step. An
# eager call is the migrated program building its variables once: it moves none.
def tf1_batch_normalization(
        inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
        beta_initializer="zeros", gamma_initializer="ones", moving_mean_initializer="zeros",
        moving_variance_initializer="ones", beta_regularizer=None, gamma_regularizer=None,
        beta_constraint=None, gamma_constraint=None, training=False, trainable=True, name=None,
        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None,
        virtual_batch_size=None, adjustment=None):
    if any(x is not None for x in (
            beta_regularizer, gamma_regularizer, beta_constraint, gamma_constraint,
            renorm_clipping, virtual_batch_size, adjustment)) or renorm:
        raise NotImplementedError(
            "tf1_batch_normalization: regularizers, constraints, renorm, virtual batches and"
            " adjustments are not reproduced")
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.rank
    if rank is None or inputs.shape[-1] is None:
        raise ValueError(f"tf1_batch_normalization: inputs need a known rank and last dimension: {inputs.shape}")
    if axis not in (-1, rank - 1) or rank == 5:
        raise NotImplementedError("tf1_batch_normalization: only the last axis of non-5-D inputs is reproduced")
    fused = rank == 4 and fused is not False
    initializers = [
        tf.compat.v1.ones_initializer() if i == "ones" else tf1_initializer(i) if isinstance(i, str) else i
        for i in (gamma_initializer, beta_initializer, moving_mean_initializer, moving_variance_initializer)]
    channels = inputs.shape.as_list()[-1]
    dtype = inputs.dtype.base_dtype
    scope = name or ("batch_normalization" if reuse else None)
    with tf.compat.v1.variable_scope(scope, default_name="batch_normalization", reuse=reuse):
        gamma = tf.compat.v1.get_variable(
            "gamma", shape=[channels], dtype=dtype, initializer=initializers[0],
            trainable=trainable) if scale else None
        beta = tf.compat.v1.get_variable(
            "beta", shape=[channels], dtype=dtype, initializer=initializers[1],
            trainable=trainable) if center else None
        moving_mean = tf.compat.v1.get_variable(
            "moving_mean", shape=[channels], dtype=dtype, initializer=initializers[2],
            trainable=False, aggregation=tf.compat.v1.VariableAggregation.MEAN)
        moving_variance = tf.compat.v1.get_variable(
            "moving_variance", shape=[channels], dtype=dtype, initializer=initializers[3],
            trainable=False, aggregation=tf.compat.v1.VariableAggregation.MEAN)
        decided = tf.get_static_value(training)
        if fused:
            gamma = gamma if scale else tf.constant(1.0, dtype, [channels])
            beta = beta if center else tf.constant(0.0, dtype, [channels])

            def normalized(is_training):
                if is_training:
                    return tf.compat.v1.nn.fused_batch_norm(
                        inputs, gamma, beta, epsilon=epsilon, is_training=True, data_format="NHWC")
                return tf.compat.v1.nn.fused_batch_norm(
                    inputs, gamma, beta, mean=moving_mean, variance=moving_variance,
                    epsilon=epsilon, is_training=False, data_format="NHWC")

            if decided is None:
                outputs, mean, variance = tf.compat.v1.cond(
                    training, lambda: normalized(True), lambda: normalized(False))
                # TF1 moved the averages by 0 when not training
                momentum = tf.compat.v1.cond(
                    training, lambda: tf.constant(momentum), lambda: tf.constant(1.0))
            else:
                outputs, mean, variance = normalized(bool(decided))
                momentum = tf.convert_to_tensor(momentum)
        else:
            axes = list(range(rank - 1))
            if decided is None:
                batch_mean, batch_variance = tf.nn.moments(inputs, axes)
                mean = tf.compat.v1.cond(training, lambda: batch_mean, lambda: tf.convert_to_tensor(moving_mean))
                variance = tf.compat.v1.cond(
                    training, lambda: batch_variance, lambda: tf.convert_to_tensor(moving_variance))
            elif decided:
                mean, variance = tf.nn.moments(inputs, axes)
            else:
                mean, variance = moving_mean, moving_variance
            outputs = tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, epsilon)
        if (decided is None or decided) and not tf.compat.v1.executing_eagerly():
            def moved(average, value):
                with tf.compat.v1.name_scope("AssignMovingAvg"):
                    decay = tf.cast(tf.convert_to_tensor(1.0 - momentum), dtype)
                    return average.assign_sub((average - tf.cast(value, dtype)) * decay)

            def updates():
                return [moved(moving_mean, mean), moved(moving_variance, variance)]

            if fused or decided:
                update_ops = updates()
            else:
                update_ops = tf.compat.v1.cond(
                    training, updates, lambda: [tf.identity(moving_mean), tf.identity(moving_variance)])
            if not tf.compat.v1.executing_eagerly_outside_functions():
                for op in update_ops:
                    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, op)
    return outputs

# tf.contrib.layers.fully_connected / slim.fully_connected of TF 1.x (TF 2.0
# removed tf.contrib): variables <scope>/fully_connected[_N]/weights and biases,
# a ReLU by default, no biases when biases_initializer is None.
def tf1_fully_connected(
        inputs, num_outputs, activation_fn=tf.nn.relu, normalizer_fn=None,
        normalizer_params=None, weights_initializer="glorot_uniform", weights_regularizer=None,
        biases_initializer="zeros", biases_regularizer=None, reuse=None,
        variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    if any(x is not None for x in (
            normalizer_fn, normalizer_params, weights_regularizer, biases_regularizer,
            variables_collections, outputs_collections)):
        raise NotImplementedError(
            "tf1_fully_connected: normalizers, regularizers and collections are not reproduced")
    if isinstance(weights_initializer, str):
        weights_initializer = tf1_initializer(weights_initializer)
    if isinstance(biases_initializer, str):
        biases_initializer = tf1_initializer(biases_initializer)
    with tf.compat.v1.variable_scope(scope, default_name="fully_connected", reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.shape.as_list()
        if len(shape) < 2 or shape[-1] is None:
            raise ValueError(
                f"tf1_fully_connected: inputs need rank >= 2 and a known last dimension: {shape}")
        weights = tf.compat.v1.get_variable(
            "weights", shape=[shape[-1], num_outputs], dtype=inputs.dtype.base_dtype,
            initializer=weights_initializer, trainable=trainable)
        if len(shape) > 2:
            outputs = tf.tensordot(inputs, weights, [[len(shape) - 1], [0]])
            outputs.set_shape(shape[:-1] + [num_outputs])
        else:
            outputs = tf.matmul(inputs, weights)
        if biases_initializer:
            biases = tf.compat.v1.get_variable(
                "biases", shape=[num_outputs], dtype=inputs.dtype.base_dtype,
                initializer=biases_initializer, trainable=trainable)
            outputs = tf.nn.bias_add(outputs, biases)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
    return outputs


# tf.contrib.layers.conv2d / slim.conv2d of TF 1.x (TF 2.0 removed tf.contrib):
# variables <scope>/Conv[_N]/weights [kh, kw, in, out] and biases, stride 1, 'SAME'
# padding and a ReLU by default, `rate` the dilation.
def tf1_contrib_conv2d(
        inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None, rate=1,
        activation_fn=tf.nn.relu, normalizer_fn=None, normalizer_params=None,
        weights_initializer="glorot_uniform", weights_regularizer=None,
        biases_initializer="zeros", biases_regularizer=None, reuse=None,
        variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    if any(x is not None for x in (
            normalizer_fn, normalizer_params, weights_regularizer, biases_regularizer,
            variables_collections, outputs_collections)):
        raise NotImplementedError(
            "tf1_contrib_conv2d: normalizers, regularizers and collections are not reproduced")
    if data_format not in (None, "NHWC"):
        raise NotImplementedError("tf1_contrib_conv2d: only NHWC data is reproduced")
    if isinstance(weights_initializer, str):
        weights_initializer = tf1_initializer(weights_initializer)
    if isinstance(biases_initializer, str):
        biases_initializer = tf1_initializer(biases_initializer)
    with tf.compat.v1.variable_scope(scope, default_name="Conv", reuse=reuse):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.shape.as_list()
        if len(shape) != 4:
            raise ValueError(f"Convolution expects input with rank 4, got {len(shape)}")
        weights = tf.compat.v1.get_variable(
            "weights", shape=[*tf1_pair(kernel_size), shape[-1], num_outputs],
            dtype=inputs.dtype.base_dtype, initializer=weights_initializer, trainable=trainable)
        outputs = tf.nn.convolution(
            inputs, weights, padding=padding.upper(), strides=list(tf1_pair(stride)),
            dilations=list(tf1_pair(rate)), data_format="NHWC")
        if biases_initializer:
            biases = tf.compat.v1.get_variable(
                "biases", shape=[num_outputs], dtype=inputs.dtype.base_dtype,
                initializer=biases_initializer, trainable=trainable)
            outputs = tf.nn.bias_add(outputs, biases, data_format="NHWC")
        if activation_fn is not None:
            outputs = activation_fn(outputs)
    return outputs


# tf.contrib.layers.max_pool2d / slim.max_pool2d of TF 1.x (TF 2.0 removed
# tf.contrib): NHWC max pooling, stride 2 and 'VALID' by default.
def tf1_max_pool2d(
        inputs, kernel_size, stride=2, padding="VALID", data_format="NHWC",
        outputs_collections=None, scope=None):
    if data_format != "NHWC" or outputs_collections is not None:
        raise NotImplementedError("tf1_max_pool2d: only NHWC data, no collections reproduced")
    with tf.compat.v1.name_scope(scope, "MaxPool2D", [inputs]):
        return tf.nn.max_pool2d(
            inputs, ksize=[1, *tf1_pair(kernel_size), 1], strides=[1, *tf1_pair(stride), 1],
            padding=padding.upper())


# tf.contrib.layers.avg_pool2d / slim.avg_pool2d of TF 1.x (TF 2.0 removed
# tf.contrib): NHWC average pooling, stride 2 and 'VALID' by default.
def tf1_avg_pool2d(
        inputs, kernel_size, stride=2, padding="VALID", data_format="NHWC",
        outputs_collections=None, scope=None):
    if data_format != "NHWC" or outputs_collections is not None:
        raise NotImplementedError("tf1_avg_pool2d: only NHWC data, no collections reproduced")
    with tf.compat.v1.name_scope(scope, "AvgPool2D", [inputs]):
        return tf.compat.v1.nn.avg_pool2d(
            inputs, ksize=[1, *tf1_pair(kernel_size), 1], strides=[1, *tf1_pair(stride), 1],
            padding=padding.upper())


# tf.contrib.layers.flatten / slim.flatten of TF 1.x (TF 2.0 removed tf.contrib):
# [batch, -1], as tf.layers.flatten.
def tf1_contrib_flatten(inputs, outputs_collections=None, scope=None):
    if outputs_collections is not None:
        raise NotImplementedError("tf1_contrib_flatten: output collections are not reproduced")
    with tf.compat.v1.name_scope(scope, "Flatten", [inputs]):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.shape.as_list()
        if len(shape) == 1:
            return tf.expand_dims(inputs, axis=1)
        if None not in shape[1:]:
            size = 1
            for dim in shape[1:]:
                size *= dim
            return tf.reshape(inputs, [-1, size])
        if shape[0] is not None:
            return tf.reshape(inputs, [shape[0], -1])
        return tf.reshape(inputs, [tf.shape(inputs)[0], -1])


# tf.contrib.layers.dropout / slim.dropout of TF 1.x (TF 2.0 removed tf.contrib):
# drops 1 - keep_prob of the input while `is_training` (True by default); a tensor
# `is_training` decides at run time (tf.cond).
def tf1_contrib_dropout(
        inputs, keep_prob=0.5, noise_shape=None, is_training=True, outputs_collections=None,
        scope=None, seed=None):
    if outputs_collections is not None:
        raise NotImplementedError("tf1_contrib_dropout: output collections are not reproduced")
    with tf.compat.v1.variable_scope(scope, default_name="Dropout"):
        inputs = tf.convert_to_tensor(inputs)
        if noise_shape is not None:
            dims = tf.shape(inputs)
            noise_shape = [dims[i] if n is None else n for i, n in enumerate(noise_shape)]

        def dropped():
            return tf.nn.dropout(
                inputs, rate=1 - keep_prob, noise_shape=noise_shape, seed=seed)

        decided = tf.get_static_value(is_training)
        if decided is None:
            return tf.compat.v1.cond(is_training, dropped, lambda: tf.identity(inputs))
        return dropped() if decided else tf.identity(inputs)
