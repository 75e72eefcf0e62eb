"""What feeds the trainers: text files to sentences and the vocabulary (`data`), tokenizing
(`tokenization`), the whole-text shuffle's line index (`line_index`), lines over 256 KiB streamed
from their file (`long_line`, `streamed_sentence`), a training file changed under the run
(`file_changes`), sentences as word ids from worker processes (`encoded_sentence`), tokens to
character-id table rows (`char_table`), and sentences to batches with prefetching (`windows`)."""
