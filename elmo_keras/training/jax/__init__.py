"""The JAX trainer (`jax_trainer`), its training state (`jax_state`), the devices it runs on
(`jax_placement`), its compiled steps (`jax_steps`) and its `.npz` checkpoints
(`array_checkpoints`)."""
