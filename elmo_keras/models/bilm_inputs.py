"""The dict inputs `BiLM` takes, parsed (its call's `inputs` argument documents them)."""

from keras import ops


def parse_inputs(inputs):
    """-> `(char_ids, token_rows, token_index, state)`, the unused ones `None`;
    `token_rows` is `"token_char_ids"` (int) or `"token_vectors"` (float)."""
    if not isinstance(inputs, dict):
        return inputs, None, None, None
    if ("state_h" in inputs) != ("state_c" in inputs):
        raise ValueError("`BiLM` needs both 'state_h' and 'state_c', or neither.")
    state = [inputs["state_h"], inputs["state_c"]] if "state_h" in inputs else None
    if "char_ids" in inputs:
        return inputs["char_ids"], None, None, state
    widths = {"token_char_ids": "max_characters_per_token", "token_vectors": "projection_dim"}
    rows = next((k for k in widths if k in inputs), None)
    if rows and "token_index" in inputs:
        token_rows = ops.convert_to_tensor(inputs[rows])
        token_index = ops.convert_to_tensor(inputs["token_index"])
        if len(token_rows.shape) != 2 or len(token_index.shape) != 2:
            raise ValueError(
                f"`{rows}` must be [distinct, {widths[rows]}] and `token_index` [batch, "
                f"tokens]. Received: shapes {tuple(token_rows.shape)} and "
                f"{tuple(token_index.shape)}"
            )
        return None, token_rows, token_index, state
    raise ValueError(
        "`BiLM` inputs given as a dict need a 'char_ids' entry, or 'token_char_ids' and "
        f"'token_index' (or 'token_vectors' and 'token_index'). Received keys: {sorted(inputs)}"
    )
