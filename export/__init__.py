"""Export to SavedModel and ONNX, installed as `elmo_keras.export`."""
