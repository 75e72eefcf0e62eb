"""The demo's sense check on sentences the demo does not use: a held-out look at the same words
and four more.

    python experiments/mini_en_v2/held_out_senses.py MODEL_FOLDER [MODEL_FOLDER ...]

`elmo-keras demo` scores 1-NN sense accuracy on 12 hand-written sentences per word
(`elmo_keras/corpus/demo_senses.py`). Twelve sentences move the score by 8 points each, so a model
that gains on them may only have gained on them. `HELD_OUT` below is a second set written for
this check (6 sentences per sense, the word once as its own token, none from the demo, MR or
WikiText-2): the demo's four words in new sentences, and four words the demo does not have. It
prints, per model, the LSTM 1 and LSTM 2 1-NN accuracy of every word, and the mean over the
words of each set.
"""

import sys

import numpy as np

from elmo_keras.cli.demo import word_sense_statistics
from elmo_keras.corpus.demo_senses import SENSES
from elmo_keras.models import BiLM

HELD_OUT = {
    "bank": {
        "money": [
            "The bank approved her mortgage after a long wait .",
            "He deposited his wages at the bank on Friday .",
            "The bank lent millions to the failing company .",
            "Customers queued outside the bank to withdraw their savings .",
            "A bank clerk counted the notes twice .",
            "The government rescued the largest bank in the country .",
        ],
        "river": [
            "The boat drifted toward the far bank of the lake .",
            "Willows hang over the bank where the water runs slowly .",
            "The flood washed away part of the bank near the bridge .",
            "Ducks nested in the tall grass on the bank .",
            "He climbed the steep bank above the creek .",
            "Soldiers crossed to the west bank of the river at night .",
        ],
    },
    "play": {
        "theatre": [
            "The play ran for three years in London .",
            "Her first play was performed by a small company .",
            "The director cut the second act of the play .",
            "Audiences laughed throughout the play .",
            "The play tells the story of a poor family .",
            "He acted in a play at the local theatre .",
        ],
        "game": [
            "The boys play cricket on the village green .",
            "She will play in the final on Saturday .",
            "Dogs love to play with a ball .",
            "He learned to play the guitar at school .",
            "We play cards with our neighbours on Fridays .",
            "The team did not play well in the first half .",
        ],
    },
    "present": {
        "gift": [
            "She hid the present under her bed until his birthday .",
            "The present came with a handwritten card .",
            "He could not afford a present for his sister .",
            "They unwrapped the present together .",
            "A watch was his retirement present from the firm .",
            "The child shook the present to guess what it was .",
        ],
        "now": [
            "The present government has promised lower taxes .",
            "At present there are no plans to close the school .",
            "All the directors were present at the launch .",
            "The present church was built after the fire .",
            "Traces of gold are present in the rock .",
            "The present owner bought the house in 1985 .",
        ],
    },
    "read": {
        "present_tense": [
            "I read a chapter every night before sleep .",
            "Do you read the local paper ?",
            "Many people read on the train to work .",
            "Teachers read stories aloud to young pupils .",
            "You should read the contract carefully .",
            "Few adults read poetry for pleasure .",
        ],
        "past_tense": [
            "Last night I read the first three chapters .",
            "He read the telegram and turned pale .",
            "She had read all his letters by then .",
            "In 1920 he read law at Oxford .",
            "The priest read the names of the dead .",
            "They read the announcement in yesterday 's paper .",
        ],
    },
    "light": {
        "lamp": [
            "She switched on the light in the kitchen .",
            "The light from the window woke him early .",
            "A faint light shone under the door .",
            "The street light outside flickered all night .",
            "Plants need light to grow .",
            "He read by the light of a candle .",
        ],
        "not_heavy": [
            "The box was light enough for a child to carry .",
            "She wore a light jacket in the evening .",
            "The new frame is light and strong .",
            "We had a light lunch before the walk .",
            "The traffic was light on the motorway .",
            "A light rain fell all afternoon .",
        ],
    },
    "match": {
        "game": [
            "The match ended in a draw .",
            "Thousands watched the match from the stands .",
            "He scored twice in the match against Italy .",
            "The final match of the season was cancelled .",
            "Rain delayed the start of the match .",
            "She won the tennis match in three sets .",
        ],
        "fire": [
            "He struck a match to light the stove .",
            "The match went out in the wind .",
            "She lit the candle with a single match .",
            "A burnt match lay in the ashtray .",
            "Keep the match away from the petrol .",
            "The last match in the box was damp .",
        ],
    },
    "spring": {
        "season": [
            "The flowers bloom in spring .",
            "They married in the spring of 1950 .",
            "Lambs are born in early spring .",
            "The spring was unusually warm that year .",
            "Work on the bridge will start next spring .",
            "Birds return north each spring .",
        ],
        "water": [
            "The village drew its water from a spring on the hill .",
            "A cold spring rises beneath the old oak .",
            "The spring feeds a small pond in the valley .",
            "Pilgrims drank from the holy spring .",
            "The spring dried up during the drought .",
            "Hot water bubbles from a spring near the town .",
        ],
    },
    "train": {
        "railway": [
            "The train left the station ten minutes late .",
            "She fell asleep on the train to Edinburgh .",
            "A freight train blocked the crossing .",
            "The last train home was crowded .",
            "He missed the train and had to wait an hour .",
            "The train stopped at every village .",
        ],
        "teach": [
            "Coaches train the players every morning .",
            "It takes years to train a good surgeon .",
            "They train dogs to find survivors .",
            "The army will train new recruits in the desert .",
            "Volunteers train local people to use the pumps .",
            "Nurses train for three years .",
        ],
    },
}


def main(folders):
    for folder in folders:
        bilm = BiLM.from_bilm_tf(f"{folder}/options.json", f"{folder}/lm_weights.hdf5")
        print(f"{folder} (1-NN sense accuracy, LSTM 1 / LSTM 2; chance 50%)")
        for name, senses_by_word in (("demo", SENSES), ("held out", HELD_OUT)):
            stats = word_sense_statistics(bilm, senses_by_word)
            result = {w: [layer["nn_accuracy"] for layer in s[1:3]] for w, s in stats.items()}
            cells = [f"{w} {100 * a:3.0f}/{100 * b:3.0f}" for w, (a, b) in result.items()]
            mean = np.mean(list(result.values()), axis=0)
            print(f"  {name:8s}  " + "  ".join(cells))
            print(f"  {'':8s}  mean {100 * mean[0]:.1f} / {100 * mean[1]:.1f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: held_out_senses.py MODEL_FOLDER [MODEL_FOLDER ...]")
    main(sys.argv[1:])
