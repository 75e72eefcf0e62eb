"""Where the JAX trainer's arrays live: the devices, data-parallel along the batch axis.

The JAX counterpart of a `tf.distribute` strategy for `jax_state.JaxTrainingState` and
`jax_trainer.JaxTrainer`: with several devices the global batch and the carried state are split
over them along the batch axis and the weights replicated (`keras.distribution.DataParallel`);
with several hosts each process holds the rows of its own devices.
"""

import contextlib

import jax
import keras
import numpy as np


class JaxPlacement:
    """The devices of a run and how an array is put on them or fetched back.

    Args:
        devices: list of JAX devices (all of them, on every host).
        batch_size: int. Rows of the global batch (split over the devices).
    """

    def __init__(self, devices, batch_size):
        self.devices = list(devices)
        self.batch_size = int(batch_size)
        self.multi_worker = jax.process_count() > 1
        self.distribution = None
        if len(self.devices) > 1:
            self.distribution = keras.distribution.DataParallel(devices=self.devices)

    def scope(self):
        """Where Keras variables are made replicated over the devices."""
        if self.distribution is None:
            return contextlib.nullcontext()
        return self.distribution.scope()

    def sharding(self, rank, split):
        """Where an array of `rank` dimensions goes: split over the devices along the batch
        axis, or replicated."""
        if self.distribution is None:
            return jax.sharding.SingleDeviceSharding(self.devices[0])
        if split:
            return self.distribution.get_data_layout(
                (self.batch_size,) + (1,) * (rank - 1)
            ).backend_layout
        mesh = self.distribution.device_mesh.backend_mesh
        return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def put(self, array, split):
        """`array` (this process's rows when `split`) on the devices."""
        sharding = self.sharding(np.ndim(array), split)
        if split and self.multi_worker:
            return jax.make_array_from_process_local_data(sharding, np.asarray(array))
        return jax.device_put(array, sharding)

    def local_rows(self):
        """The rows of the global batch that this process's devices hold."""
        if not self.multi_worker:
            return slice(None)
        per_process = self.batch_size // jax.process_count()
        start = jax.process_index() * per_process
        return slice(start, start + per_process)

    def fetch(self, array):
        """A device array as a NumPy array (gathered from every process when split)."""
        if self.multi_worker and not array.is_fully_addressable:
            from jax.experimental import multihost_utils  # noqa: PLC0415

            return np.asarray(multihost_utils.process_allgather(array, tiled=True))
        return np.asarray(array)
