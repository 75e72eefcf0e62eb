"""The TensorFlow trainer: the `tf.distribute` step (`trainer`), its checkpointed variables
(`state`), clipping and the softmax's row update under a strategy (`gradients`), the compiled
evaluation step (`tf_steps`)."""
