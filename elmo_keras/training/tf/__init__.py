"""The TensorFlow trainer: the `tf.distribute` step (`trainer`), its checkpointed variables
(`state`), freezing and clipping under a strategy (`gradients`)."""
