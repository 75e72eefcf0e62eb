"""TensorBoard event files written without TensorFlow, read back by TensorFlow's own reader."""

import numpy as np
import tensorflow as tf

from elmo_keras.training.common.event_file import EventFileWriter, crc32c


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue's check value
    assert crc32c(b"") == 0


def test_tensorflow_reads_the_scalars(tmp_path):
    writer = EventFileWriter(tmp_path / "logs")
    writer.scalars({"loss": 3.25, "perplexity_forward": 25.5}, step=50)
    writer.scalars({"loss": 2.5}, step=2**40)  # a step beyond 32 bits
    writer.close()
    events = list(tf.compat.v1.train.summary_iterator(str(writer.path)))  # checks every CRC
    assert events[0].file_version == "brain.Event:2"
    scalars = [
        (event.step, value.tag, value.metadata.plugin_data.plugin_name, value.tensor)
        for event in events[1:]
        for value in event.summary.value
    ]
    assert [(step, tag, plugin) for step, tag, plugin, _ in scalars] == [
        (50, "loss", "scalars"),
        (50, "perplexity_forward", "scalars"),
        (2**40, "loss", "scalars"),
    ]
    values = [float(tf.make_ndarray(tensor)) for *_, tensor in scalars]
    np.testing.assert_array_equal(values, [3.25, 25.5, 2.5])
    assert all(tensor.dtype == tf.float32.as_datatype_enum for *_, tensor in scalars)


def test_the_log_shows_tokens_per_second_and_peak_memory(tmp_path, capsys):
    """An accelerator's peak memory (here a stand-in for `memory_stats()`) goes to the printed
    line and TensorBoard; a CPU's (None) is left out."""
    from elmo_keras.training.common.metrics import MetricsLogger, step_logs

    logger = MetricsLogger(tmp_path, peak_memory=lambda: 3 * 2**30)
    logger.update(1, step_logs(40.0, 44.0, 20.0, 1.0))
    scalars = logger.write(1)
    logger.close(1)
    line = capsys.readouterr().out
    assert "tokens/s, peak memory 3.00 GiB" in line
    assert scalars["peak_memory_gib"] == 3.0 and scalars["tokens_per_second"] > 0
    tags = {
        value.tag
        for path in tmp_path.glob("events.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    }
    assert {"loss", "tokens_per_second", "peak_memory_gib"} <= tags
    cpu = MetricsLogger(peak_memory=lambda: None)
    cpu.update(1, step_logs(40.0, 44.0, 20.0, 1.0))
    assert "peak_memory_gib" not in cpu.write(1)
    assert "peak memory" not in capsys.readouterr().out
