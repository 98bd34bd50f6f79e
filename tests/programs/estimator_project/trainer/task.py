"""Trains the model of trainer/model.py on the TF_CONFIG cluster: the driver of
the two-file Estimator trainer (python -m trainer.task --model-dir DIR)."""

import argparse

import tensorflow as tf

from trainer import model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=200)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    args = parser.parse_args()

    run_config = tf.estimator.RunConfig(
        model_dir=args.model_dir, save_checkpoints_steps=100, tf_random_seed=7)
    estimator = tf.estimator.Estimator(
        model_fn=model.model_fn, config=run_config, params={"learning_rate": args.learning_rate})
    train_spec = tf.estimator.TrainSpec(
        input_fn=model.make_input_fn(512, batch_size=32, seed=1), max_steps=args.train_steps)
    eval_spec = tf.estimator.EvalSpec(input_fn=model.make_input_fn(128, batch_size=32, seed=2), steps=4)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


if __name__ == "__main__":
    main()
