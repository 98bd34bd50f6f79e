"""The codemod: rules, the engine that runs them, files and notebooks, reports.

Never imports TensorFlow."""
