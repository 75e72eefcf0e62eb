"""The JAX trainer (`jax_trainer`), its compiled step (`jax_steps`) and its `.npz` checkpoints
(`array_checkpoints`)."""
