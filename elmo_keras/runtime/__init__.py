"""elmo_keras.runtime."""
