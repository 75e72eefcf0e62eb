"""What both trainers use: the loop, evaluation and output (`trainer_base`), the model and
optimizer a run starts with (`model_setup`), checkpoints (`checkpoints`), the finite-weights check
(`finite`), stopping rules (`stopping`), metrics and TensorBoard files (`metrics`, `event_file`),
Keras callbacks (`callbacks`), evaluation (`evaluation`), devices and strategies (`distribute`),
the steps' arithmetic in `keras.ops` (`step_ops`)."""
