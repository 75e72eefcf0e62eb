"""elmo_keras.training."""
